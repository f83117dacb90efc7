"""The upstream files here are PyTorch's tests, run by this harness (``python -m torch_tests``)
once per engine, never collected by pytest: they need the harness's shim, and some import test
helpers of the torch they come from."""

collect_ignore_glob = ["upstream/*"]
