"""Relax-level rewrites before a module becomes a graph (this module imports TVM).

* :func:`fold_weight_only`: every operator whose value does not depend on the graph
  inputs (a transpose, cast, slice or reshape of a weight; a position ``arange``; a
  mask built from constants) is computed once, before running, as frameworks and TVM
  do: the values that the rest of the graph reads become weight *parameters* of
  ``main`` (after the graph inputs, ``num_input`` set), and the operators that made
  them are gone. Without it, bert_base's 73 weight transposes would move 684 MB on
  every inference. The remaining operators are untouched, so their FLOPs and bytes
  stay exact; a folded value is a weight of its readers (``param_bytes``) with its
  own size. Given an evaluator (the executor passes its torch kernels), the values
  are computed too; the structure is the same either way.
* :func:`normalize_take`: a ``take`` with negative constant indices (``y[:, -1]``,
  ``x[..., -2, :]``), which TVM 0.27 reads out of bounds, gets the equivalent
  non-negative ones (shapes are static).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tvm
from tvm import relax

from hetsim.graphs.graph import GraphError
from hetsim.graphs.relax_ops import RelaxWalker

__all__ = ["Evaluator", "bind_placeholders", "fold_weight_only", "normalize_take", "weight_only_bindings"]

#: ``evaluate(op, attrs, inputs, outputs, values) -> output arrays`` of one operator
Evaluator = Callable[[str, dict[str, Any], Sequence[Any], Sequence[Any], Sequence[Any]], Sequence[Any]]

_OPAQUE = frozenset(
    {
        "relax.call_tir",
        "relax.call_tir_inplace",
        "relax.call_tir_with_grad",
        "relax.call_dps_packed",
        "relax.call_pure_packed",
        "relax.call_builtin_with_ctx",
    }
)


def _bindings(func: relax.Function) -> list[Any]:
    return [b for block in func.body.blocks for b in block.bindings]


def _static_tensors(ty: Any) -> bool:
    """Whether a type is a tensor (or a tuple of tensors) of static shape."""
    if isinstance(ty, relax.TupleType):
        return all(_static_tensors(f) for f in ty.fields)
    if not isinstance(ty, relax.TensorType):
        return False
    dims = getattr(ty.shape, "values", None)
    return dims is not None and all(isinstance(getattr(d, "value", None), int) for d in dims)


def weight_only_bindings(func: relax.Function) -> tuple[list[str], list[str]]:
    """Variables of ``func`` whose values depend on no graph input.

    Returns
    -------
    (folded, frontier)
        Names of the weight-only bindings, in binding order, and the subset that
        the rest of the function (or its return value) reads: the values that
        become parameters.
    """
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    weights = set(func.params[n_in:])
    folded: dict[Any, Any] = {}  # var -> binding

    def constant(e: Any) -> bool:
        if isinstance(e, relax.Tuple):
            return all(constant(f) for f in e.fields)
        if isinstance(e, relax.Var):
            return e in folded or e in weights
        if isinstance(e, tvm.ir.Constant):
            return True
        ty = getattr(e, "ty", None)
        return not isinstance(ty, relax.TensorType | relax.TupleType)  # shapes, literals

    for b in _bindings(func):
        v = b.value
        if isinstance(v, relax.Call):
            ok = (
                isinstance(v.op, tvm.ir.Op)
                and v.op.name not in _OPAQUE
                and all(constant(a) for a in v.args)
            )
        elif isinstance(v, relax.TupleGetItem):
            ok = isinstance(v.tuple_value, relax.Var) and v.tuple_value in folded
        elif isinstance(v, relax.Var):
            ok = v in folded
        elif isinstance(v, tvm.ir.Constant):  # a literal bound to a variable
            ok = True
        else:
            ok = False
        if ok and _static_tensors(b.var.ty):
            folded[b.var] = b
    # the folded values read by what stays, and by the return value
    while True:
        used: set[Any] = set()

        def reads(e: Any, acc: set[Any]) -> None:
            for var in relax.analysis.free_vars(e):
                if var in folded:
                    acc.add(var)

        for b in _bindings(func):
            if b.var not in folded:
                reads(b.value, used)
        reads(func.body.body, used)
        tuples = [v for v in used if isinstance(v.ty, relax.TupleType)]
        if not tuples:
            break
        for v in tuples:  # a tuple read whole stays a binding; its parts are read
            del folded[v]
    names = [str(b.var.name) for b in _bindings(func) if b.var in folded]
    frontier = [str(b.var.name) for b in _bindings(func) if b.var in used]
    return names, frontier


@relax.expr_functor.mutator
class _Substitute(relax.PyExprMutator):
    """Replace variables by other expressions (the folded values by parameters)."""

    def __init__(self, table: dict[Any, Any]) -> None:
        super().__init__()
        self.table = table

    def visit_var_(self, var: relax.Var) -> relax.Expr:
        return self.table[var] if var in self.table else super().visit_var_(var)

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:
        return self.table[var] if var in self.table else super().visit_dataflow_var_(var)


def fold_weight_only(
    mod: tvm.IRModule, *, evaluate: Evaluator | None = None, name: str = "model"
) -> tvm.IRModule:
    """Fold the weight-only operators of ``mod["main"]`` into parameters.

    Parameters
    ----------
    mod
        A Relax module (op level); not modified.
    evaluate
        Also compute the folded values (``main``'s ``params`` attribute, as TVM's
        frontends write for weights kept as inputs) with this evaluator:
        ``evaluate(op, attrs, inputs, outputs, values)`` returns the outputs (arrays)
        of one Relax operator (``op`` its short name, ``inputs``/``outputs`` tensor
        specs, ``values`` the input arrays); the executor passes its torch kernels.
        None: only the structure.
    name
        Model name for error messages.

    Returns
    -------
    tvm.IRModule
        ``main`` takes the graph inputs, then its former weight parameters, then one
        parameter per folded value (``num_input`` = the number of graph inputs).
    """
    func = mod["main"]
    folded, frontier = weight_only_bindings(func)
    if not folded:
        return mod
    attrs = dict(func.attrs or {})
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    by_name = {str(b.var.name): b.var for b in _bindings(func)}
    new_params = [relax.Var(n, by_name[n].ty) for n in frontier]
    table = {by_name[n]: p for n, p in zip(frontier, new_params)}
    body = _Substitute(table).visit_expr(func.body)
    params = list(func.params) + new_params
    attrs["num_input"] = n_in
    if evaluate is not None:
        old = list(attrs.get("params") or [])
        if len(old) != len(func.params) - n_in:
            raise GraphError(
                f"model {name!r}: the weights passed as parameters have no values to fold with"
            )
        attrs["params"] = old + _evaluate(mod, frontier, name, evaluate)
    new = relax.Function(params, body, func.ret_ty, func.is_pure).with_attrs(attrs)
    new = relax.analysis.remove_all_unused(new)
    funcs = {gv: (new if gv.name_hint == "main" else f) for gv, f in mod.functions.items()}
    return tvm.IRModule(funcs, attrs=mod.attrs, global_infos=mod.global_infos)


def bind_placeholders(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with zero-valued weights bound for the weight parameters of ``main`` that
    have no value (the folded values of a structure-only :func:`fold_weight_only`), so
    that passes after it (TVM's fusion pipeline) see constants, as with real values."""
    func = mod["main"]
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    missing = func.params[n_in + len(attrs.get("params") or []):]
    if not missing:
        return mod
    zeros = [
        tvm.runtime.tensor(np.zeros([int(d.value) for d in p.ty.shape.values], dtype=str(p.ty.dtype)))
        for p in missing
    ]
    return relax.transform.BindParams("main", dict(zip(missing, zeros)))(mod)


def _evaluate(mod: tvm.IRModule, frontier: list[str], name: str, evaluate: Evaluator) -> list[Any]:
    """Values of the ``frontier`` variables of ``mod["main"]``: the weight-only
    operators that make them run through ``evaluate``, each once, on the weights."""
    func = mod["main"]
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    bound = dict(zip(func.params[n_in:], attrs["params"])) if "params" in attrs else {}
    walker = RelaxWalker(mod, model=name)
    walker.walk()
    by_name = {str(v.name): ref for v, ref in walker.env.items() if hasattr(v, "name")}
    memo: dict[int, list[np.ndarray]] = {}

    def value(ref: Any) -> np.ndarray:
        if ref.kind == "param":
            kind, obj = ref.key
            obj = obj if kind == "const" else bound[obj]
            return np.asarray(obj.value.numpy() if hasattr(obj, "value") else obj.numpy())
        if ref.kind != "node":
            raise GraphError(f"model {name!r}: a folded value reads graph input {ref.key!r}")
        if ref.key not in memo:
            rec = walker.recs[ref.key]
            args = [value(r) for r in rec.inputs]
            try:
                memo[ref.key] = [np.asarray(v) for v in evaluate(rec.op, rec.attrs, [r.spec for r in rec.inputs], rec.outputs, args)]
            except Exception as e:  # the evaluator's own errors
                raise GraphError(
                    f"model {name!r}: computing the folded weight {rec.var!r} ({rec.op}) failed: {e}"
                ) from e
        return memo[ref.key][ref.output]

    return [tvm.runtime.tensor(np.ascontiguousarray(value(by_name[n]))) for n in frontier]


@relax.expr_functor.mutator
class _TakeIndices(relax.PyExprMutator):
    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.take"):
            return call
        idx = call.args[1]
        if not isinstance(idx, tvm.ir.Constant):
            return call
        arr = idx.value.numpy()
        if not arr.size or not (arr < 0).any():
            return call
        dims = getattr(call.args[0].ty.shape, "values", None)
        axis = call.attrs.axis
        if dims is None:
            return call
        rank = len(dims)
        ax = 0 if axis is None else int(axis) % rank
        n = int(np.prod([int(d.value) for d in dims])) if axis is None else int(dims[ax].value)
        fixed = np.where(arr < 0, arr + n, arr).astype(arr.dtype)
        return relax.Call(call.op, [call.args[0], relax.const(fixed, str(arr.dtype))], call.attrs, call.ty_args)


def normalize_take(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every ``take`` by negative constant indices given the equivalent
    non-negative ones (TVM 0.27's ``take`` in mode ``fast`` reads them out of bounds)."""
    main = _TakeIndices().visit_expr(mod["main"])
    funcs = {gv: (main if gv.name_hint == "main" else f) for gv, f in mod.functions.items()}
    return tvm.IRModule(funcs, attrs=mod.attrs, global_infos=mod.global_infos)
