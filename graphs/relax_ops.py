"""Relax-level machinery behind :mod:`graphs.relax_import` (this module imports TVM).

:class:`RelaxWalker` walks the bindings of ``main`` in a Relax IRModule and turns
every operator call (``op`` granularity) or every ``call_tir`` kernel (``fused``
granularity) into a node of a :class:`~graphs.graph.Graph`: tensor specs, JSON-safe
attributes, FLOPs and weight bytes. Bookkeeping (tuples, ``TupleGetItem``, aliases)
becomes edges, not nodes.

FLOPs come from TVM's own TIR estimation (``estimate_tir_flops``) of the legalized
PrimFunc, computed once per distinct operator signature; a multiply-add counts as
two FLOPs. :func:`formula_flops` is the fallback where TVM has no legalization for
an op, and the rule for transposed convolutions, whose legalized kernel convolves a
zero-dilated input and so makes TIR estimation count stride**2 times too many.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir.analysis import estimate_tir_flops

from hetsim.graphs.graph import DTYPE_BYTES, VIEW_OPS, GraphError, tensor_bytes

__all__ = [
    "Rec",
    "Ref",
    "RelaxWalker",
    "attrs_to_dict",
    "MAX_FOLDED_CREATION",
    "formula_flops",
    "kernel_ops_from_name",
    "legalized_flops",
    "module_weight_bytes",
    "primfunc_flops",
    "shape_fold",
    "short_op_name",
]

#: ops that only move or re-index data: no arithmetic.
DATA_MOVEMENT_OPS = frozenset(
    "reshape permute_dims transpose expand_dims squeeze flatten broadcast_to concat "
    "concatenate split strided_slice dynamic_strided_slice take gather_elements gather_nd "
    "tile repeat flip zeros zeros_like ones ones_like full full_like astype wrap_param "
    "layout_transform collapse_sum_to collapse_sum_like scatter_elements scatter_nd "
    "pad index_tensor copy".split()
)
#: TOPI/PrimFunc names that differ from the Relax operator they legalize.
_KERNEL_RENAMES = {"transpose": "permute_dims", "concatenate": "concat", "T_add": "add"}
#: multi-word kernel names, so that ``fused_max_pool2d_add`` splits correctly.
_MULTIWORD = frozenset(
    (
        "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d avg_pool1d avg_pool2d "
        "avg_pool3d max_pool1d max_pool2d max_pool3d batch_norm layer_norm group_norm "
        "instance_norm rms_norm strided_slice dynamic_strided_slice expand_dims permute_dims "
        "broadcast_to conv1d_transpose conv2d_transpose conv3d_transpose zeros_like ones_like "
        "full_like log_softmax gather_elements gather_nd scatter_elements scatter_nd "
        "where_like tir_sqrt tir_exp tir_tanh tir_sigmoid tir_rsqrt tir_log tir_erf "
        "collapse_sum_to collapse_sum_like layout_transform floor_divide floor_mod "
        "greater_equal less_equal not_equal logical_and logical_or logical_not "
        "bitwise_and bitwise_or bitwise_xor left_shift right_shift"
    ).split()
)
_CALL_TIR_OPS = frozenset({"relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad"})
_PACKED_OPS = frozenset(
    {"relax.call_dps_packed", "relax.call_pure_packed", "relax.call_builtin_with_ctx"}
)
_DROP = object()



@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence TVM's C++ log lines (e.g. legalizing ``take`` warns "Fast mode segfaults
    when there are out-of-bounds indices" for every gather) while a pass runs.

    Python exceptions still propagate; only what native code writes to fd 2 is dropped.
    """
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no usable fd 2 (embedded interpreters): nothing to silence
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)

def _is_tensor_const(e: Any) -> bool:
    return isinstance(e, tvm.ir.Constant) and isinstance(getattr(e, "ty", None), relax.TensorType)


#: positional argument names of ops whose registry entry lists fewer than they take
_ARG_NAMES: dict[str, list[str]] = {
    "strided_slice": ["x", "axes", "begin", "end", "strides"],
    "dynamic_strided_slice": ["x", "begin", "end", "strides"],
}


def short_op_name(name: str) -> str:
    """``"relax.nn.conv2d"`` -> ``"conv2d"`` (the component after the last dot)."""
    return name.rsplit(".", 1)[-1]


def to_json_value(value: Any) -> Any:
    """Convert a TVM attribute value to plain JSON-safe Python, or return a drop marker."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):  # also tvm_ffi dtype and String
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else _DROP
    if isinstance(value, tvm.ir.PrimType):
        return str(value)
    inner = getattr(value, "value", _DROP)
    if inner is not _DROP and isinstance(inner, int | float | str) and not isinstance(inner, bool):
        return to_json_value(inner)
    if isinstance(value, relax.ShapeExpr):
        return to_json_value(list(value.values))
    if hasattr(value, "items") and callable(value.items):
        out = {}
        for k, v in value.items():
            v2 = to_json_value(v)
            if v2 is _DROP:
                return _DROP
            out[str(k)] = v2
        return out
    if isinstance(value, list | tuple) or type(value).__name__ == "Array":
        items = [to_json_value(v) for v in value]
        return _DROP if any(v is _DROP for v in items) else items
    return _DROP


def attrs_to_dict(attrs: Any) -> dict[str, Any]:
    """JSON-safe dict of a Relax operator's attrs; fields that do not convert are dropped."""
    if attrs is None:
        return {}
    info = getattr(type(attrs), "__tvm_ffi_type_info__", None)
    if info is None:
        return {}
    out: dict[str, Any] = {}
    for f in info.fields:
        try:
            v = to_json_value(getattr(attrs, f.name))
        except Exception:  # an unreadable field is just dropped
            continue
        if v is not _DROP:
            out[f.name] = v
    return out


def primfunc_flops(pf: Any) -> float | None:
    """TVM's TIR FLOP estimate of one PrimFunc (None where TVM cannot estimate it)."""
    try:
        return float(estimate_tir_flops(tvm.IRModule({"main": pf})))
    except Exception:  # e.g. data-dependent loops: caller falls back
        return None


def legalized_flops(call: relax.Call) -> float | None:
    """FLOPs of one Relax operator call via ``LegalizeOps`` + TIR estimation.

    The call is rebuilt alone in a tiny module (tensor arguments, constants included,
    become parameters of the same type), legalized, and the estimates of the
    resulting ``call_tir`` kernels are summed. None when the op (or part of its
    legalization) has no TIR form or legalization fails.
    """
    params: list[relax.Var] = []

    def fresh(arg: Any) -> Any:
        if isinstance(arg, relax.Tuple):
            return relax.Tuple([fresh(a) for a in arg.fields])
        if isinstance(arg.ty, relax.TensorType | relax.TupleType):
            v = relax.Var(f"arg{len(params)}", arg.ty)
            params.append(v)
            return v
        return arg

    try:
        new = relax.Call(call.op, [fresh(a) for a in call.args], call.attrs, call.ty_args)
        bb = relax.BlockBuilder()
        with bb.function("main", params):
            with bb.dataflow():
                out = bb.emit_output(new)
            bb.emit_func_output(out)
        with quiet_native_stderr():
            leg = relax.transform.LegalizeOps()(bb.get())
        total = 0.0
        for block in leg["main"].body.blocks:
            for b in block.bindings:
                v = b.value
                if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                    if v.op.name != "relax.call_tir":
                        return None
                    f = primfunc_flops(leg[v.args[0]])
                    if f is None:
                        return None
                    total += f
        return total
    except Exception:  # no legalization: caller uses a formula
        return None


def module_weight_bytes(mod: tvm.IRModule) -> int:
    """Bytes of the distinct weights of ``mod["main"]``, each constant object once.

    Weights are the non-scalar constants among operator arguments plus the
    parameters after ``num_input`` (modules imported with params as inputs).
    """
    func = mod["main"]
    seen: dict[Any, int] = {}

    def visit(e: Any) -> None:
        if isinstance(e, relax.Tuple):
            for f in e.fields:
                visit(f)
        elif _is_tensor_const(e):
            shape = [int(d.value) for d in e.ty.shape.values]
            if shape:
                seen[e] = tensor_bytes(shape, str(e.ty.dtype))

    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call):
                for a in v.args:
                    visit(a)
            else:
                visit(v)
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    for p in func.params[n_in:]:
        if isinstance(p.ty, relax.TensorType):
            seen[p] = tensor_bytes([int(d.value) for d in p.ty.shape.values], str(p.ty.dtype))
    return int(sum(seen.values()))


#: TVM 0.27's FoldConstant folds a kernel without arguments (a tensor creation) only up
#: to this many elements (measured: 1024 folds, 1025 stays); larger ones stay kernels
MAX_FOLDED_CREATION = 1024


@relax.expr_functor.mutator
class _ShapeFolder(relax.PyExprMutator):
    """Fold ``call_tir`` kernels whose arguments are all constants into zero constants."""

    def visit_var_(self, var: relax.Var) -> relax.Expr:
        value = self.lookup_binding(var)
        if isinstance(value, tvm.ir.Constant):
            return value
        return super().visit_var_(var)  # a re-emitted binding's new variable

    def visit_dataflow_var_(self, var: relax.DataflowVar) -> relax.Expr:
        value = self.lookup_binding(var)
        if isinstance(value, tvm.ir.Constant):
            return value
        return super().visit_dataflow_var_(var)

    def visit_call_(self, call: relax.Call) -> relax.Expr:
        call = super().visit_call_(call)
        if not (isinstance(call.op, tvm.ir.Op) and call.op.name == "relax.call_tir"):
            return call
        args, ty = call.args[1], call.ty
        if not (
            isinstance(args, relax.Tuple)
            and all(isinstance(a, tvm.ir.Constant) for a in args.fields)
            and isinstance(ty, relax.TensorType)
            and ty.shape is not None
        ):
            return call
        shape = [getattr(d, "value", None) for d in ty.shape.values]
        if not all(isinstance(d, int) for d in shape):
            return call
        if not args.fields and math.prod(shape) > MAX_FOLDED_CREATION:
            return call  # TVM's pass leaves a large argument-less kernel (a creation)
        return relax.const(np.zeros(shape, dtype=str(ty.dtype)))


def shape_fold(mod: tvm.IRModule) -> tvm.IRModule:
    """Structure-only stand-in for ``relax.transform.FoldConstant`` on legalized modules.

    Folds exactly what TVM's pass folds in a legalized ``main`` (a ``call_tir`` with
    only constant arguments and one static tensor result; without arguments, e.g. the
    ``full`` of legalized attention, only up to :data:`MAX_FOLDED_CREATION` elements),
    but into zero-filled constants instead of compiling and running each kernel with
    LLVM (about 5 s on ResNet-18, against ~20 ms). The fused kernels and grouping that follow are
    identical; only constant values differ, and graphs never store them.
    """
    main = relax.analysis.remove_all_unused(_ShapeFolder().visit_expr(mod["main"]))
    funcs = {gv: (main if gv.name_hint == "main" else f) for gv, f in mod.functions.items()}
    return tvm.IRModule(funcs, attrs=mod.attrs, global_infos=mod.global_infos)


def _prod(shape: Any) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def formula_flops(
    op: str, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], attrs: dict[str, Any]
) -> float:
    """Analytic FLOPs (multiply-add = 2) of an operator from its tensor specs.

    Convolutions: ``2 * out_elems * Cin/groups * prod(kernel)``; transposed
    convolutions: ``2 * in_elems * Cout/groups * prod(kernel)``; matmul:
    ``2 * out_elems * K``; data movement: 0; anything else: one per output element.
    """
    out_elems = sum(_prod(t["shape"]) for t in outputs)
    if op.startswith("conv") and len(inputs) >= 2:
        w = inputs[1]["shape"]
        if not w:
            return float(out_elems)
        if "transpose" in op:
            i = str(attrs.get("kernel_layout", "IOHW")).find("I")
            return 2.0 * _prod(inputs[0]["shape"]) * _prod(w) / max(int(w[max(i, 0)]), 1)
        o = str(attrs.get("kernel_layout", "OIHW")).find("O")
        return 2.0 * _prod(outputs[0]["shape"]) * _prod(w) / max(int(w[max(o, 0)]), 1)
    if op in ("matmul", "dense", "linear") and inputs and inputs[0]["shape"]:
        return 2.0 * out_elems * int(inputs[0]["shape"][-1])
    if op in DATA_MOVEMENT_OPS:
        return 0.0
    return float(out_elems)


def kernel_ops_from_name(name: str) -> list[str]:
    """Member op kinds of a kernel from its PrimFunc name alone (fallback only).

    >>> kernel_ops_from_name("fused_conv2d1_add_max_pool2d_relu2")
    ['conv2d', 'add', 'max_pool2d', 'relu']
    """
    tokens = [t for t in re.sub(r"^fused_", "", name).split("_") if t]
    out: list[str] = []
    i = 0
    while i < len(tokens):
        for j in range(min(len(tokens), i + 4), i, -1):
            cand = re.sub(r"(?<=[a-z_])\d+$", "", "_".join(tokens[i:j]))  # add2 -> add
            if j - i == 1 or cand in _MULTIWORD:
                out.append(_canonical_kernel(cand))
                i = j
                break
    return out


def _canonical_kernel(name: str) -> str:
    name = _KERNEL_RENAMES.get(name, name)
    return name[4:] if name.startswith("tir_") else name


def canonical_kernel_name(gvar_name: str) -> str:
    """A legalized PrimFunc's op kind from its name (``add2`` -> ``add``)."""
    ops = kernel_ops_from_name(gvar_name)
    return ops[0] if len(ops) == 1 else gvar_name


@dataclass(frozen=True)
class Ref:
    """One tensor value of the walk: a node output, a graph input or a constant."""

    kind: str  # "node" | "input" | "param"
    key: Any  # node index | input name | constant key
    output: int
    shape: tuple[int, ...]
    dtype: str
    scalar: bool = False  # a 0-d constant: a literal, not a weight

    @property
    def spec(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}

    @property
    def nbytes(self) -> int:
        return tensor_bytes(self.shape, self.dtype)


@dataclass
class Rec:
    """One future graph node, in binding order."""

    index: int
    label: str
    op: str
    var: str
    inputs: list[Ref]
    outputs: list[dict[str, Any]]
    attrs: dict[str, Any]
    flops: float
    ops: list[str] | None = None
    tags: dict[str, Any] | None = None  # graph node attributes (moe_block, expert, top_k)


class RelaxWalker:
    """Turn ``mod["main"]`` into node records (``recs``), graph inputs and outputs.

    Parameters
    ----------
    mod
        The Relax IRModule (op-level, or after the fusion passes).
    model
        Model name, used in error messages.
    members
        For fused modules: kernel name -> list of member op kinds.
    tags
        Binding variable name (or fused kernel name) -> node attributes to add.
    """

    def __init__(
        self,
        mod: tvm.IRModule,
        *,
        model: str,
        members: dict[str, list[str]] | None = None,
        tags: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.mod = mod
        self.model = model
        self.members = members or {}
        self.tags = tags or {}
        self.env: dict[Any, Any] = {}
        self.recs: list[Rec] = []
        self.inputs: list[Ref] = []
        self._flops_cache: dict[Any, float] = {}
        self._kernel_cache: dict[str, float] = {}
        self._where = ""

    # ------------------------------------------------------------------ helpers
    def error(self, msg: str) -> GraphError:
        where = f" ({self._where})" if self._where else ""
        return GraphError(f"model {self.model!r}{where}: {msg}")

    def spec(self, ty: Any) -> tuple[tuple[int, ...], str]:
        """Static shape and dtype of a Relax tensor type."""
        shape = getattr(ty, "shape", None)
        dims = getattr(shape, "values", None)
        if dims is None:
            raise self.error(f"tensor of unknown shape ({ty}); only static shapes are supported")
        out = []
        for d in dims:
            v = getattr(d, "value", None)
            if not isinstance(v, int):
                raise self.error(
                    f"dynamic shape {ty}; give concrete input shapes (e.g. shapes={{...}} "
                    "for from_onnx, or example inputs of the right size)"
                )
            out.append(v)
        dtype = str(ty.dtype)
        if dtype not in DTYPE_BYTES:
            raise self.error(f"unsupported dtype {dtype!r}")
        return tuple(out), dtype

    def out_specs(self, ty: Any) -> list[dict[str, Any]] | None:
        """Output tensor specs of a call's type; None when it yields no tensor."""
        if isinstance(ty, relax.TensorType):
            shape, dtype = self.spec(ty)
            return [{"shape": list(shape), "dtype": dtype}]
        if isinstance(ty, relax.TupleType):
            specs = []
            for f in ty.fields:
                if not isinstance(f, relax.TensorType):
                    raise self.error(f"nested tuple result {ty} is not supported")
                specs.extend(self.out_specs(f) or [])
            return specs
        return None

    def const_ref(self, c: Any) -> Ref:
        shape, dtype = self.spec(c.ty)
        return Ref("param", ("const", c), 0, shape, dtype, scalar=not shape)

    def live_records(self, outputs: list[Ref]) -> list[Rec]:
        """The records that feed ``outputs`` (those :meth:`walk` returned), in binding
        order: a graph's nodes (work whose result nothing reads is dropped)."""
        live: set[int] = set()
        stack = [r.key for r in outputs if r.kind == "node"]
        while stack:
            i = stack.pop()
            if i not in live:
                live.add(i)
                stack.extend(r.key for r in self.recs[i].inputs if r.kind == "node")
        return [rec for rec in self.recs if rec.index in live]

    def flatten(self, value: Any) -> list[Ref]:
        if isinstance(value, Ref):
            return [value]
        if isinstance(value, tuple):
            return [r for v in value for r in self.flatten(v)]
        return []

    # --------------------------------------------------------------------- walk
    def walk(self) -> list[Ref]:
        """Walk ``main``; return the flattened graph outputs."""
        try:
            func = self.mod["main"]
        except Exception:  # TVM raises its own error type
            func = None
        if not isinstance(func, relax.Function):
            raise self.error("the IRModule has no Relax function 'main'")
        attrs = func.attrs or {}
        n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
        for i, p in enumerate(func.params):
            self._where = f"parameter {p.name!r}"
            if isinstance(p.ty, relax.TensorType):
                shape, dtype = self.spec(p.ty)
                if i < n_in:
                    self.env[p] = Ref("input", p.name, 0, shape, dtype)
                    self.inputs.append(self.env[p])
                else:  # a weight passed as a parameter (keep_params_as_input)
                    self.env[p] = Ref("param", ("var", p), 0, shape, dtype, scalar=not shape)
            else:
                raise self.error(f"parameter of type {p.ty} is not supported (tensors only)")
        body = func.body
        if not isinstance(body, relax.SeqExpr):
            raise self.error(f"main's body is a {type(body).__name__}, expected a SeqExpr")
        for block in body.blocks:
            for b in block.bindings:
                self._where = f"binding {b.var.name!r}"
                self.env[b.var] = self.value(b.value, b.var.name)
        self._where = "return value"
        return self.flatten(self.value(body.body, "return"))

    def value(self, expr: Any, var: str) -> Any:
        """Evaluate an expression to a Ref, a tuple of values, or None (non-tensor)."""
        if isinstance(expr, relax.Var):
            if expr not in self.env:
                raise self.error(f"variable {expr.name!r} is used before it is defined")
            return self.env[expr]
        if _is_tensor_const(expr):
            return self.const_ref(expr)
        if isinstance(expr, relax.Tuple):
            return tuple(self.value(f, var) for f in expr.fields)
        if isinstance(expr, relax.TupleGetItem):
            tup = self.value(expr.tuple_value, var)
            if not isinstance(tup, tuple):
                raise self.error(f"TupleGetItem on a non-tuple value {tup!r}")
            return tup[int(expr.index)]
        if isinstance(expr, relax.Call):
            return self.call(expr, var)
        if isinstance(expr, relax.If | relax.Function | relax.SeqExpr):
            raise self.error(
                f"control flow / nested functions ({type(expr).__name__}) are not supported; "
                "only straight-line dataflow graphs can be imported"
            )
        return None  # shapes, prim values, strings, dtypes: not tensors

    def call(self, call: relax.Call, var: str) -> Any:
        op = call.op
        what = getattr(op, "name", None) or getattr(op, "name_hint", None) or type(op).__name__
        self._where = f"binding {var!r} = {what}"
        if not isinstance(op, tvm.ir.Op):
            raise self.error(
                f"call to {what!r} is not a Relax operator; calls to sub-functions and "
                "packed functions are not supported"
            )
        if op.name in _CALL_TIR_OPS:
            return self.kernel(call, var)
        if op.name in _PACKED_OPS:
            raise self.error(
                f"{op.name} ({call.args[0]}) calls an external function: not supported"
            )
        outs = self.out_specs(call.ty)
        if outs is None:
            return None  # e.g. shape_of: bookkeeping
        name = short_op_name(op.name)
        vals = [self.value(a, var) for a in call.args]
        inputs = [r for v in vals for r in self.flatten(v)]
        attrs = attrs_to_dict(call.attrs)
        arg_names = _ARG_NAMES.get(name) or [a.name for a in op.arguments]
        for i, (a, v) in enumerate(zip(call.args, vals)):
            if isinstance(a, relax.Tuple):
                # a tuple of literals (strided_slice's begin/end/strides/axes) is an
                # attribute; a tuple holding tensors is an input and was flattened above
                if any(isinstance(f.ty, relax.TensorType | relax.TupleType) for f in a.fields):
                    continue
                j = to_json_value(list(a.fields))
            elif v is None:
                j = to_json_value(a)
            else:
                continue
            key = arg_names[i] if i < len(arg_names) else f"arg{i}"
            if j is not _DROP and key not in attrs:
                attrs[key] = j
        flops = self._op_flops(call, name, [r.spec for r in inputs], outs, attrs)
        rec = Rec(len(self.recs), name, name, var, inputs, outs, attrs, flops, tags=self.tags.get(var))
        return self._add(rec, call.ty)

    def kernel(self, call: relax.Call, var: str) -> Any:
        gv = call.args[0]
        name = gv.name_hint
        pf = self.mod[gv]
        inputs = self.flatten(self.value(call.args[1], var))
        outs = self.out_specs(call.ty)
        if outs is None:
            raise self.error(f"kernel {name!r} returns no tensor")
        if name not in self._kernel_cache:
            f = primfunc_flops(pf)
            self._kernel_cache[name] = 0.0 if f is None else f
        ops = list(self.members.get(name) or kernel_ops_from_name(name))
        attrs: dict[str, Any] = {"primfunc": name}
        view = all(o in VIEW_OPS for o in ops)
        try:
            view = view or bool(relax.analysis.has_reshape_pattern(pf))
        except Exception:  # analysis unavailable for this kernel
            pass
        if view:
            attrs["view"] = True
        flops = self._kernel_cache[name]
        tags = self.tags.get(var) or self.tags.get(name)
        rec = Rec(len(self.recs), name, "fused", var, inputs, outs, attrs, flops, ops, tags)
        return self._add(rec, call.ty)

    def _op_flops(
        self, call: relax.Call, name: str, ins: list[dict], outs: list[dict], attrs: dict
    ) -> float:
        if "transpose" in name and name.startswith("conv"):
            return formula_flops(name, ins, outs, attrs)
        args = tuple(self._arg_sig(a) for a in call.args)
        key = (call.op.name, str(call.attrs), args, str(call.ty_args))
        if key not in self._flops_cache:
            f = legalized_flops(call)
            self._flops_cache[key] = formula_flops(name, ins, outs, attrs) if f is None else f
        return self._flops_cache[key]

    def _arg_sig(self, arg: Any) -> Any:
        if isinstance(arg, relax.Tuple):
            return ("tuple", tuple(self._arg_sig(a) for a in arg.fields))
        ty = getattr(arg, "ty", None)
        if isinstance(ty, relax.TensorType | relax.TupleType):
            return ("tensor", str(ty))
        return ("expr", str(arg))

    def _add(self, rec: Rec, ty: Any) -> Any:
        self.recs.append(rec)
        refs = [
            Ref("node", rec.index, i, tuple(o["shape"]), o["dtype"])
            for i, o in enumerate(rec.outputs)
        ]
        return refs[0] if isinstance(ty, relax.TensorType) else tuple(refs)
