"""A PyTorch module as a Relax module: ``torch.export``, the rewrites TVM's frontend
needs, and TVM's PyTorch frontend (this module imports torch and TVM).

:func:`export_torch` is the one path from a torch module to Relax, shared by the
graph importer (:func:`graphs.relax_import.from_torch`) and the executor
(:mod:`runtime`), so that both see the same operators. Before conversion, the
exported FX graph is rewritten where TVM 0.27's frontend cannot take it, keeping what
is computed (and so FLOPs and bytes) unchanged:

* **outputs**: the module's output is flattened to its tensors (tuples, lists, dicts
  and Hugging Face ``ModelOutput`` s); objects that are not tensors or containers
  (a ``DynamicCache`` of key/value tensors) are left out: ``torch.export`` cannot
  return them, and the tensors they hold are computed by the graph anyway. A module
  whose ``forward`` takes ``use_cache`` is exported with ``use_cache=False`` unless the
  inputs say otherwise: the cache is not an output, and building it is what TVM's
  frontend cannot take.
* **non-contiguous views**: ``aten.view`` becomes ``aten.reshape`` (same values, same
  shape). A view that torch accepts eagerly may be one that the decomposition pass
  rejects with its traced strides (GPT-2 at batch > 1: "Cannot view a tensor with
  shape ... and strides ...").
* **mixture of experts**: grouped matrix multiplications (Hugging Face's
  ``transformers::grouped_mm_fallback``, ``aten._grouped_mm``) and the ``histc`` that
  sizes their groups become one slice + matmul per expert, sized by the routing of
  the example inputs (:mod:`graphs.moe`).
* **converter bugs**: ``div(x, 2, rounding_mode="floor")`` of an integer tensor (TVM
  types the literal int32 against int64), ``elu``'s ``scale`` (dropped by TVM, so
  ``selu`` was 5 % off) and ``cumsum``'s dtype (TVM kept a boolean mask's cumsum
  boolean; torch counts in int64) get converters of their own.

The result is a :class:`ImportedProgram`: the Relax module, the example inputs by
graph-input name, and tags (``moe_block``, ``expert``, ``top_k``) by Relax variable
name, which the importer turns into node attributes.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from hetsim.graphs import moe
from hetsim.graphs.graph import GraphError, first_line

__all__ = ["ImportedProgram", "export_torch", "flatten_tensors"]



def flatten_tensors(obj: Any) -> list[torch.Tensor]:
    """The tensors of a model output, depth first: tuples, lists, dicts (Hugging Face
    ``ModelOutput`` s included, in field order) are walked; other objects (caches) and
    ``None`` are skipped.

    >>> flatten_tensors({"a": torch.zeros(1), "b": (None, torch.ones(2))})[1].tolist()
    [1.0, 1.0]
    """
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, Mapping):
        return [t for v in obj.values() for t in flatten_tensors(v)]
    if isinstance(obj, tuple | list):
        return [t for v in obj for t in flatten_tensors(v)]
    return []


class _TensorOutputs(torch.nn.Module):
    """``module`` with its output flattened to a tuple of tensors, called with the
    keyword arguments ``fixed`` besides its inputs."""

    def __init__(self, module: torch.nn.Module, fixed: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.module = module
        self.fixed = dict(fixed or {})

    def forward(self, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return tuple(flatten_tensors(self.module(*args, **kwargs, **self.fixed)))


def _tensor_outputs(module: torch.nn.Module, fixed: Mapping[str, Any] | None = None) -> _TensorOutputs:
    """A :class:`_TensorOutputs` whose ``forward`` has ``module.forward``'s signature, so
    that ``torch.export`` names the graph inputs after the module's own parameters."""
    try:
        sig = inspect.signature(module.forward)
    except (TypeError, ValueError):  # no signature: inputs become args_0, args_1...
        return _TensorOutputs(module, fixed)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def forward(self: _TensorOutputs, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
        return _TensorOutputs.forward(self, *args, **kwargs)

    forward.__signature__ = sig.replace(parameters=[this, *sig.parameters.values()])
    cls = type("TensorOutputs", (_TensorOutputs,), {"forward": forward})
    return cls(module, fixed)


@dataclass
class ImportedProgram:
    """What :func:`export_torch` made of a torch module.

    Attributes
    ----------
    mod
        The Relax module (weights bound as constants), before any hetsim fold.
    inputs
        Graph input name -> the example value (numpy), in parameter order.
    tags
        Relax variable name -> node attributes (``moe_block``, ``expert``, ``top_k``).
    moe
        One entry per mixture-of-experts block: ``block``, ``experts``, ``top_k``,
        ``tokens`` (tokens routed to each expert by the example inputs).
    module, args, kwargs
        The module and example inputs it was exported with (for the reference
        forward of the executor's output check).
    """

    mod: Any
    inputs: dict[str, np.ndarray]
    tags: dict[str, dict[str, Any]] = field(default_factory=dict)
    moe: list[dict[str, Any]] = field(default_factory=list)
    module: Any = None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def reference_outputs(self) -> list[np.ndarray] | None:
        """The module's own forward on the example inputs: its output tensors, flattened
        as the graph's outputs are (:func:`flatten_tensors`); None without a module
        (an ONNX model)."""
        if self.module is None:
            return None
        training = {sub: sub.training for sub in self.module.modules()}
        try:
            with torch.no_grad():
                out = self.module.eval()(*self.args, **self.kwargs)
        finally:
            for sub, flag in training.items():
                sub.training = flag
        return [t.detach().cpu().numpy() for t in flatten_tensors(out)]


def export_torch(
    module: torch.nn.Module,
    example_inputs: Sequence[Any] | Mapping[str, Any] | torch.Tensor,
    *,
    name: str = "model",
) -> ImportedProgram:
    """Export ``module`` and convert it with TVM's PyTorch frontend, rewriting on the way
    what the frontend cannot take (see the module docstring).

    Parameters
    ----------
    module
        The model; exported in eval mode (training flags are restored afterwards).
    example_inputs
        Positional inputs (a tensor or a tuple), or keyword inputs (a dict, e.g.
        ``{"input_ids": ..., "decoder_input_ids": ...}``); their shapes become the
        graph's static shapes.
    name
        Model name for error messages.

    Raises
    ------
    GraphError
        When ``torch.export`` or the conversion fails, naming the model and, where TVM
        has no converter, the operator(s).
    """
    args, kwargs = _split_inputs(example_inputs, name)
    fixed = _cache_off(module, args, kwargs)
    wrapped = _tensor_outputs(module, fixed)
    training = {sub: sub.training for sub in module.modules()}
    try:
        with warnings.catch_warnings():
            # torch 2.13's own pytree code trips its LeafSpec deprecation warning
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec.*")
            ep = torch.export.export(wrapped.eval(), args, kwargs)
            _views_as_reshapes(ep)
            ep = ep.run_decompositions()
    except Exception as e:  # torch raises many types
        raise GraphError(f"model {name!r}: torch.export failed: {first_line(e)}") from e
    finally:
        for sub, flag in training.items():
            sub.training = flag
    leaves = _user_values(ep, args, kwargs, name)
    try:
        blocks = moe.decompose_grouped_matmuls(ep, leaves)
    except GraphError:
        raise
    except Exception as e:  # the routing run failed
        raise GraphError(f"model {name!r}: mixture-of-experts rewrite failed: {first_line(e)}") from e
    mod, env = _convert(ep, name)
    tags: dict[str, dict[str, Any]] = {}
    for node, var in env.items():
        tag = node.meta.get(moe.TAG)
        if tag and hasattr(var, "name"):
            tags[str(var.name)] = dict(tag)
    names = [p.name for p in mod["main"].params]
    inputs = {
        n: np.ascontiguousarray(v.detach().cpu().numpy()) for n, v in zip(names, leaves)
    }
    return ImportedProgram(mod, inputs, tags, blocks, module, args, {**kwargs, **fixed})


def _cache_off(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """``{"use_cache": False}`` where ``module.forward`` takes a ``use_cache`` the caller
    left to its default, else ``{}``: the key/value cache is no output of the graph (see
    *outputs* above), and building it concatenates onto empty placeholder tensors,
    which TVM's frontend refuses (a Hugging Face GPT-2 with its default config: "Concat
    expects all input tensors to have same ndim"). Bound in the exported module, not
    an input of it (TVM's frontend takes tensor inputs only)."""
    try:
        params = list(inspect.signature(module.forward).parameters)
    except (TypeError, ValueError):
        return {}
    if "use_cache" in params and "use_cache" not in kwargs and params.index("use_cache") >= len(args):
        return {"use_cache": False}
    return {}


def _split_inputs(example_inputs: Any, name: str) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,), {}
    if isinstance(example_inputs, Mapping):
        return (), dict(example_inputs)
    if isinstance(example_inputs, tuple | list):
        return tuple(example_inputs), {}
    raise GraphError(
        f"model {name!r}: example_inputs must be a tensor, a tuple of tensors or a dict of "
        f"keyword inputs, got {type(example_inputs).__name__}"
    )


def _views_as_reshapes(ep: torch.export.ExportedProgram) -> None:
    """``aten.view`` -> ``aten.reshape`` in place (same result wherever the view is valid)."""
    changed = False
    for node in ep.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        ep.graph_module.recompile()


def _user_values(
    ep: torch.export.ExportedProgram, args: tuple[Any, ...], kwargs: dict[str, Any], name: str
) -> list[torch.Tensor]:
    """The example tensors, in the order of the exported program's user inputs."""
    from torch.export.graph_signature import InputKind, TensorArgument
    from torch.utils._pytree import tree_flatten

    leaves = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    n_user = sum(
        1
        for s in ep.graph_signature.input_specs
        if s.kind == InputKind.USER_INPUT and isinstance(s.arg, TensorArgument)
    )
    if len(leaves) != n_user:
        raise GraphError(
            f"model {name!r}: {len(leaves)} example tensors, but the exported program takes "
            f"{n_user} inputs"
        )
    return leaves


def _div_rounding(node: Any, importer: Any) -> Any:
    """``aten.div.Tensor_mode`` with a Python scalar divisor typed as the tensor (TVM 0.27
    types ``perm // 2`` of an int64 tensor as int64 // int32 and fails)."""
    from tvm import relax

    bb = importer.block_builder
    args = importer.retrieve_args(node)
    x, y = args[0], args[1]
    mode = args[2] if len(node.args) > 2 else node.kwargs.get("rounding_mode")
    if isinstance(y, int | float) and not isinstance(y, bool):
        dtype = str(x.ty.dtype)
        if isinstance(y, float) and not dtype.startswith(("float", "bfloat")):
            x, dtype = bb.emit(relax.op.astype(x, "float32")), "float32"
        y = relax.const(y, dtype)
    if mode is None:
        return bb.emit(relax.op.divide(x, y))
    if mode == "floor":
        return bb.emit(relax.op.floor_divide(x, y))
    return bb.emit(relax.op.trunc(bb.emit(relax.op.divide(x, y))))


def _elu(node: Any, importer: Any) -> Any:
    """``aten.elu`` with its ``scale`` and ``input_scale`` (TVM 0.27 drops them, so that
    ``selu``, which decomposes to ``elu(x, alpha, scale)``, comes out 5 % too small)."""
    from tvm import relax

    bb = importer.block_builder
    args = importer.retrieve_args(node)
    x = args[0]
    alpha, scale, input_scale = (float(a) for a in (list(args[1:]) + [1.0, 1.0, 1.0])[:3])
    dtype = str(x.ty.dtype)

    def c(v: float) -> Any:
        return relax.const(v, dtype)

    xs = x if input_scale == 1.0 else bb.emit(relax.op.multiply(x, c(input_scale)))
    neg = bb.emit(relax.op.multiply(c(alpha), bb.emit(relax.op.subtract(bb.emit(relax.op.exp(xs)), c(1.0)))))
    y = bb.emit(relax.op.where(bb.emit(relax.op.greater(x, c(0.0))), x, neg))
    return y if scale == 1.0 else bb.emit(relax.op.multiply(y, c(scale)))


def _cumsum(node: Any, importer: Any) -> Any:
    """``aten.cumsum`` in the dtype torch gives it (TVM 0.27 keeps the input's: a cumsum
    of a boolean mask came out boolean, of int32 positions int32; torch counts in int64)."""
    from tvm import relax

    x = importer.env[node.args[0]]
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    val = node.meta.get("val")
    dtype = str(val.dtype).removeprefix("torch.") if val is not None else None
    return importer.block_builder.emit(relax.op.cumsum(x, dim, dtype))


#: converters that replace TVM's own (bugs of the 0.27 frontend)
_CONVERTERS = {"div.Tensor_mode": _div_rounding, "elu.default": _elu, "cumsum.default": _cumsum}


def _convert(ep: torch.export.ExportedProgram, name: str) -> tuple[Any, dict[Any, Any]]:
    """TVM's frontend on the (decomposed, rewritten) program: the module and the
    FX node -> Relax value map of the conversion."""
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    importer = ExportedProgramImporter()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, message=".*LeafSpec.*")
            mod = importer.from_exported_program(ep, False, False, False, _CONVERTERS)
    except Exception as e:  # the frontend raises AssertionError, ValueError...
        match = re.search(r"Unsupported function types? \[?([^\]\n]*)\]?", str(e))
        if match:
            ops = match.group(1).replace("'", "")
            raise GraphError(
                f"model {name!r}: TVM's PyTorch frontend cannot convert operator(s) {ops}"
            ) from e
        raise GraphError(f"model {name!r}: TVM's PyTorch frontend failed: {first_line(e)}") from e
    return mod, dict(importer.env)
