"""Fake values: turning real inputs into fake ones, and running ops on fake values.

Invariants:

* Every fake tensor of one :class:`~sapwood_graph.OutputGraph` belongs to its single
  ``FakeTensorMode``; the same real tensor always maps to the same fake tensor (so two sources
  naming one tensor see each other's in-place mutations while tracing).
* A dynamic dim becomes a SymInt of the graph's ``ShapeEnv`` whose source is
  ``TensorPropertySource(source, "size", dim)``; a size of 0 or 1 stays a static int (the
  ShapeEnv specialises them), and the returned dynamic-dim set says which dims really are free.
* Propagation never leaves a half-made node behind: the fake result is computed *before* the
  node is created, and any failure becomes a :class:`FakePropagationError` chaining the cause.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch
import torch._guards
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
)

from sapwood_graph._lazy import lazy
from sapwood_graph.errors import FakePropagationError, GraphInputError
from sapwood_graph.sources import Source, TensorPropertySource

if TYPE_CHECKING:
    import sympy
    from torch.fx.experimental import symbolic_shapes
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    from torch.utils._sympy import numbers as sympy_numbers
    from torch.utils._sympy import value_ranges
else:
    sympy = lazy("sympy")
    symbolic_shapes = lazy("torch.fx.experimental.symbolic_shapes")
    sympy_numbers = lazy("torch.utils._sympy.numbers")
    value_ranges = lazy("torch.utils._sympy.value_ranges")


@functools.cache
def _data_dependent() -> tuple[type[BaseException], ...]:
    """What a fake kernel raises when its result depends on the data."""
    return (
        DataDependentOutputException,
        DynamicOutputShapeException,
        symbolic_shapes.GuardOnDataDependentSymNode,
    )


# torch's ShapeEnv wants its own Source type (it checks isinstance and reads ``.name``). Our
# public sources stay independent of torch internals; this adapter carries one across. Whether
# ``name`` is a property or a method differs between torch releases, so follow the base class.
_NAME_IS_PROPERTY = not callable(inspect.getattr_static(torch._guards.Source, "name"))


@dataclasses.dataclass(frozen=True)
class _ShapeEnvSource(torch._guards.Source):
    source: Source

    def _text(self) -> str:
        return str(self.source)

    if _NAME_IS_PROPERTY:
        name = property(_text)  # type: ignore[assignment, misc]
    else:  # pragma: no cover - older torch

        def name(self) -> str:  # type: ignore[override, misc]
            return self._text()

    @property
    def guard_source(self) -> torch._guards.GuardSource:  # type: ignore[override]
        return torch._guards.GuardSource.LOCAL

    def is_ephemeral(self) -> bool:
        return False


_F = TypeVar("_F", bound=Callable[..., Any])


def shielded(fn: _F) -> _F:
    """Run ``fn`` with torch-function overrides off.

    A frontend may itself be a ``TorchFunctionMode`` (or hand us tensor subclasses); the
    library's own torch calls (fakeification, shape reads, fake kernels) must not be seen
    by it, or it would record the library's work as user code.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with torch._C.DisableTorchFunction():
            return fn(*args, **kwargs)

    return cast(_F, wrapper)


def sapwood_source(shape_env_source: Any) -> Source | None:
    """Our source behind a ShapeEnv source, or ``None`` if the ShapeEnv made it itself."""
    return shape_env_source.source if isinstance(shape_env_source, _ShapeEnvSource) else None


def to_shape_env_source(source: Source) -> torch._guards.Source:
    return _ShapeEnvSource(source)


def new_fake_mode(shape_env: ShapeEnv | None) -> FakeTensorMode:
    # Real tensors reaching a kernel (a parameter used inside an installed subgraph or a user
    # function) are converted through the mode's memo, so they share the fakes of get_attr.
    return FakeTensorMode(
        shape_env=shape_env if shape_env is not None else symbolic_shapes.ShapeEnv(),
        allow_non_fake_inputs=True,
    )


def fake_static(mode: FakeTensorMode, tensor: torch.Tensor) -> torch.Tensor:
    """The fake of a real tensor with every size static (memoised by the mode)."""
    if isinstance(tensor, FakeTensor):
        return tensor
    return mode.from_tensor(tensor, static_shapes=True)


def fake_dynamic(
    mode: FakeTensorMode,
    tensor: torch.Tensor,
    source: Source,
    dims: Iterable[int],
    ranges: Mapping[int, tuple[int | None, int | None]] | None = None,
) -> tuple[torch.Tensor, frozenset[int]]:
    """A fake of ``tensor`` whose ``dims`` are SymInts bound to ``source.size()[d]``.

    Returns the fake and the dims that really became symbolic (0/1 sizes specialise). A dim
    with bounds in ``ranges`` (``(min, max)``, either may be None) gets a symbol of its own
    (never duck-shaped) whose value range is within them; its range guards follow.
    Strides are rebuilt from the symbolic sizes in the real tensor's stride order, so a
    transposed input stays transposed; a tensor that is not dense in that order (a strided
    view) keeps its real strides.
    """
    shape_env = mode.shape_env
    assert shape_env is not None
    ndim = tensor.dim()
    wanted = {d % ndim for d in dims} if ndim else set()
    sizes: list[Any] = []
    free: set[int] = set()
    for d, size in enumerate(tensor.shape):
        if d not in wanted:
            sizes.append(int(size))
            continue
        prop = to_shape_env_source(TensorPropertySource(source, "size", d))
        bounds = ranges.get(d) if ranges else None
        if bounds is None:
            expr = shape_env.create_symbol(int(size), prop, symbolic_shapes.DimDynamic.DUCK)
        else:
            low, high = bounds
            constraint = symbolic_shapes.StrictMinMaxConstraint(
                warn_only=False,
                vr=value_ranges.ValueRanges(
                    0 if low is None else low, sympy_numbers.int_oo if high is None else high
                ),
            )
            if int(size) not in constraint.vr:
                raise GraphInputError(
                    f"{source}.size()[{d}] is {int(size)}, outside its bounds [{low}, {high}]"
                )
            expr = shape_env.create_symbol(
                int(size), prop, symbolic_shapes.DimDynamic.DYNAMIC, constraint_dim=constraint
            )
        if isinstance(expr, sympy.Integer):
            sizes.append(int(expr))
            continue
        sizes.append(shape_env.create_symintnode(expr, hint=int(size), source=prop))
        free.add(d)
    # Innermost-first order of the real strides; ties keep the later dim innermost.
    order = sorted(range(ndim), key=lambda d: (tensor.stride(d), -d))
    strides: list[Any] = [0] * ndim
    running: Any = 1
    dense = True
    real_running = 1
    for d in order:
        strides[d] = running
        running = running * sizes[d]
        # compared on the real sizes: comparing the symbolic strides would add guards
        dense = dense and (tensor.size(d) <= 1 or tensor.stride(d) == real_running)
        real_running *= tensor.size(d)
    if not dense:  # a strided view: keep its real strides, which the guards then pin
        strides = [int(st) for st in tensor.stride()]
    with mode:
        fake = torch.empty_strided(
            sizes, strides, dtype=tensor.dtype, device=tensor.device, requires_grad=False
        )
    if tensor.requires_grad:
        fake.requires_grad_(True)
    return fake, frozenset(free)


def fake_symint(mode: FakeTensorMode, value: int, source: Source) -> Any:
    """A SymInt for a Python int input bound to ``source`` (never specialised to 0/1)."""
    shape_env = mode.shape_env
    assert shape_env is not None
    return shape_env.create_unspecified_symint_and_symbol(
        value, to_shape_env_source(source), symbolic_shapes.DimDynamic.DYNAMIC
    )


def symbols_of(value: Any) -> list[sympy.Symbol]:
    """The free symbols of a fake value (tensor sizes/strides/offset, SymInts, containers)."""
    if isinstance(value, (list, tuple)):
        out: dict[sympy.Symbol, None] = {}
        for item in value:
            out.update(dict.fromkeys(symbols_of(item)))
        return list(out)
    if isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return list(symbolic_shapes.free_symbols(value))
    return []


def op_name(kind: str, target: Any) -> str:
    """A readable name of a node target for error messages."""
    if kind == "call_method":
        return f"Tensor.{target}"
    if kind in ("call_module", "get_attr"):
        return str(target)
    module = getattr(target, "__module__", None) or ""
    name = (
        getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    )
    if module.startswith("torch._C._"):
        module = "torch"
    if name.startswith("_VariableFunctionsClass."):  # how torch's C functions spell themselves
        module, name = "torch", name.rpartition(".")[2]
    return f"{module}.{name}" if module and module != "builtins" else str(name)


class _QuietWhilePropagating(logging.Filter):
    """Drops torch's own traceback log of a failing fake kernel while we propagate: the
    failure reaches the frontend as a FakePropagationError (often a planned graph break)."""

    active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.active, "on", False)


_QUIET = _QuietWhilePropagating()
logging.getLogger("torch._subclasses.fake_tensor").addFilter(_QUIET)


def _python_dispatcher(mode: FakeTensorMode) -> Any:
    env = mode.shape_env
    if env is None:
        return contextlib.nullcontext()
    # (torch 2.13 renamed var_to_val to backed_var_to_val)
    symbols = getattr(env, "backed_var_to_val", None)
    if symbols is None:
        symbols = env.var_to_val
    if not symbols and not getattr(env, "unbacked_var_to_val", None):  # a static graph
        return contextlib.nullcontext()
    from torch._dispatch.python import enable_python_dispatcher

    return enable_python_dispatcher()


def propagate(mode: FakeTensorMode, name: str, run: Callable[[], Any]) -> Any:
    """Run ``run`` under the fake mode, turning any failure into a FakePropagationError."""
    # With symbols in the shape environment, composite ops (matmul, ...) must decompose in
    # Python on SymInts: without the Python dispatcher some torch versions (2.11) read their
    # sizes through aten.size and specialise every symbolic size they touch.
    dispatcher = _python_dispatcher(mode)
    was_on = getattr(_QUIET.active, "on", False)
    _QUIET.active.on = True
    try:
        with mode, dispatcher:
            return run()
    except FakePropagationError:
        raise
    except _data_dependent() as exc:
        raise FakePropagationError(name, _first_line(exc), data_dependent=True) from exc
    except Exception as exc:
        raise FakePropagationError(name, f"{type(exc).__name__}: {_first_line(exc)}") from exc
    finally:
        _QUIET.active.on = was_on


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
