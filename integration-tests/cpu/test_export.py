"""``sapwood.export``: sapwood's whole-graph capture as torch.export's ``ExportedProgram``,
compared with eager and with ``torch.export.export`` on the same modules."""

from __future__ import annotations

import copy
import io

import pytest
import torch
from torch.export import Dim

import sapwood
import sapwood_tracer


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))


def _conv_bn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU()
    )


@pytest.mark.parametrize(
    ("build", "shape", "train"),
    [(_mlp, (5, 8), False), (_conv_bn, (2, 3, 8, 8), False), (_conv_bn, (2, 3, 8, 8), True)],
)
def test_the_program_has_torch_exports_signature_and_eagers_results(build, shape, train):
    model = build().train(train)
    x = torch.randn(*shape)
    reference = copy.deepcopy(model)
    ep = sapwood.export(model, (x,))
    theirs = torch.export.export(copy.deepcopy(model), (x,))
    assert str(ep.graph_signature) == str(theirs.graph_signature)
    assert "forward" not in model.__dict__  # the module is left as it was
    torch.testing.assert_close(ep.module()(x), reference(x))
    if train:  # the running statistics are written as the eager module writes them
        mutated = [s.kind.name for s in ep.run_decompositions().graph_signature.output_specs]
        assert mutated.count("BUFFER_MUTATION") == 3


def test_export_runs_nothing_for_real():
    model = _conv_bn().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    sapwood.export(model, (torch.randn(2, 3, 8, 8),))
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_a_dynamic_batch_within_its_range():
    model = _mlp()
    ep = sapwood.export(
        model, (torch.randn(5, 8),), dynamic_shapes={"input": {0: Dim("batch", min=2, max=64)}}
    )
    for batch in (2, 17, 64):
        x = torch.randn(batch, 8)
        torch.testing.assert_close(ep.module()(x), model(x))
    with pytest.raises(Exception, match=r"batch|size|range|constraint|Expected"):
        ep.module()(torch.randn(65, 8))


class _Branches(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x * 2
        return x - 1


def test_a_branch_on_a_dynamic_size_is_a_constraint_not_a_wrong_program():
    x = torch.randn(8, 3)
    with pytest.raises(Exception, match="min=5"):  # torch.export's suggested fix
        sapwood.export(_Branches(), (x,), dynamic_shapes={"x": {0: Dim("b", min=2, max=32)}})
    ep = sapwood.export(_Branches(), (x,), dynamic_shapes={"x": {0: Dim("b", min=5, max=32)}})
    y = torch.randn(9, 3)
    torch.testing.assert_close(ep.module()(y), y * 2)


def test_a_save_and_load_round_trip():
    model = _mlp()
    x = torch.randn(3, 8)
    buffer = io.BytesIO()
    torch.export.save(sapwood.export(model, (x,)), buffer)
    buffer.seek(0)
    torch.testing.assert_close(torch.export.load(buffer).module()(x), model(x))


class _Structured(torch.nn.Module):
    def forward(self, x, scale=2):
        return {"scaled": x * scale, "stats": (x.sum(), x.shape[0], None)}


def test_structured_results_keep_their_structure():
    x = torch.randn(4, 2)
    out = sapwood.export(_Structured(), (x,)).module()(x)
    torch.testing.assert_close(out["scaled"], x * 2)
    torch.testing.assert_close(out["stats"][0], x.sum())
    assert out["stats"][1:] == (4, None)


class _Prints(torch.nn.Module):
    def forward(self, x):
        print("side effect")
        return x + 1


def test_a_graph_break_is_a_typed_error_naming_the_line():
    with pytest.raises(sapwood_tracer.Unsupported, match=r"print\(\) at .*test_export\.py:\d+"):
        sapwood.export(_Prints(), (torch.randn(2),))


def test_bad_arguments_are_refused():
    with pytest.raises(TypeError, match=r"nn\.Module"):
        sapwood.export(lambda x: x, (torch.randn(2),))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple"):
        sapwood.export(_mlp(), [torch.randn(2, 8)])  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match=r"torch\.export"):
        sapwood.export(_mlp(), (torch.randn(2, 8),), strict=False)


class _Counts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return x * 2


class _Appends(torch.nn.Module):
    def forward(self, x, seen):
        seen.append(1)
        return x + 1


@pytest.mark.parametrize(
    ("module", "args", "said"),
    [
        (_Counts(), (torch.randn(2),), "sets the attribute 'calls' of a _Counts"),
        (_Appends(), (torch.randn(2), []), "changes a list or dict it was given"),
    ],
)
def test_a_forward_that_changes_python_state_is_refused_not_dropped(module, args, said):
    with pytest.raises(sapwood_tracer.Unsupported, match=said):
        sapwood.export(module, args)


@pytest.mark.slow
def test_aot_inductor_packages_the_program_and_the_package_runs(tmp_path):
    model = _mlp().eval()
    x = torch.randn(3, 8)
    path = torch._inductor.aoti_compile_and_package(
        sapwood.export(model, (x,)), package_path=str(tmp_path / "mlp.pt2")
    )
    runner = torch._inductor.aoti_load_package(path)
    torch.testing.assert_close(runner(x), model(x))


@pytest.mark.parametrize("kind", ["llama", "gpt2"])
def test_a_transformers_decoder_exports_with_its_model_output(kind):
    pytest.importorskip("transformers")
    from zoo import build_hf

    model, inputs = build_hf(kind)
    model.eval()
    ids, options = inputs["input_ids"], {"use_cache": False}
    ep = sapwood.export(model, (ids,), options)
    out = ep.module()(ids, **options)
    assert type(out) is type(model(ids, **options))
    torch.testing.assert_close(out.logits, model(ids, **options).logits)


class _Flag:
    active = False


_FLAG = _Flag()


class _SetsAndResets(torch.nn.Module):
    def forward(self, x):
        _FLAG.active = True
        y = x * 3
        _FLAG.active = False  # put back: no net change of Python state
        return y


class _LeavesSet(torch.nn.Module):
    def forward(self, x):
        _FLAG.active = True
        return x * 3


def test_a_flag_put_back_is_no_change_but_one_left_set_is():
    x = torch.randn(3)
    torch.testing.assert_close(sapwood.export(_SetsAndResets(), (x,)).module()(x), x * 3)
    with pytest.raises(sapwood_tracer.Unsupported, match="sets the attribute 'active'"):
        sapwood.export(_LeavesSet(), (x,))
    assert _FLAG.active is False  # nothing ran for real


def test_dim_auto_takes_the_range_the_code_allows():
    ep = sapwood.export(_Branches(), (torch.randn(8, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    y = torch.randn(12, 3)
    torch.testing.assert_close(ep.module()(y), y * 2)
    with pytest.raises(AssertionError):  # below the branch's range: refused, not x * 2
        ep.module()(torch.randn(3, 3))
    static = sapwood.export(_mlp(), (torch.randn(5, 8),), dynamic_shapes={"input": {0: Dim.STATIC}})
    assert not static.range_constraints


def test_a_transformers_decoder_with_dynamic_batch_and_sequence_length():
    pytest.importorskip("transformers")
    from zoo import build_hf

    model, inputs = build_hf("llama")
    model.eval()
    options = {"use_cache": False}
    spec = {"input_ids": {0: Dim.AUTO, 1: Dim.AUTO}, "use_cache": None}
    ep = sapwood.export(model, (inputs["input_ids"],), options, dynamic_shapes=spec)
    assert len(ep.range_constraints) == 2
    for shape in [(3, 7), (2, 16)]:
        ids = torch.randint(0, 90, shape)
        torch.testing.assert_close(ep.module()(ids, **options).logits, model(ids, **options).logits)
