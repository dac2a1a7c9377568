"""Tensor operators of the Relax -> torch table of the ``torch`` backend: those of the
operators TVM's PyTorch and ONNX frontends emit that are not neural-network layers (indexing, sorting, scatter/gather, creation,
elementwise math), merged into :data:`runtime.backends.torch_ops.OPS`.

Elementwise operators are *generated*: every Relax elementwise operator whose torch
function has the same name (``acos``, ``atan2``, ``trunc``, ``bitwise_and``...) or a
known other name (:data:`RENAMED`) maps to it. Which frontend operators the torch
backend leaves to the tvm backend, and why, is :data:`TVM_ONLY`
(``tests/test_torch_ops_audit.py`` audits the frontends' operator list against both).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from hetsim.runtime.backends.torch_ops import Builder, Unsupported, torch_dtype

__all__ = ["MORE_OPS", "RENAMED", "TVM_ONLY"]

#: Relax elementwise operators whose torch function has the same name
_SAME_NAME = (
    "acos acosh asin asinh atan atanh cosh sinh trunc round isfinite isinf bitwise_and "
    "bitwise_or bitwise_xor bitwise_not atan2 fmod exp2 log2 log10 log1p expm1 reciprocal "
    "hypot copysign nextafter".split()
)
#: Relax name -> torch function, where the names differ
RENAMED: dict[str, Any] = {
    "left_shift": torch.bitwise_left_shift,
    "right_shift": torch.bitwise_right_shift,
    "log_add_exp": torch.logaddexp,
    "mod": torch.fmod,  # Relax mod: truncated (C) remainder; floor_mod is torch.remainder
    "outer": torch.outer,
    "selu": F.selu,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "hard_swish": F.hardswish,
    "mish": F.mish,
    "elu": F.elu,
}

#: frontend operators the torch backend does not map, and why (the tvm backend runs them)
TVM_ONLY: dict[str, str] = {
    "affine_grid": "spatial transformer sampling: no shared convention with torch's",
    "grid_sample": "spatial transformer sampling: no shared convention with torch's",
    "resize2d": "TVM's coordinate-transform and rounding modes have no torch equivalent",
    "resize3d": "TVM's coordinate-transform and rounding modes have no torch equivalent",
    "quantize": "quantized models: TVM's quantization scheme",
    "dequantize": "quantized models: TVM's quantization scheme",
    "nll_loss": "training loss",
    "bucketize": "TVM's boundary convention (right=...) differs",
    "nonzero": "data-dependent shape: the importer takes static shapes only",
    "unique": "data-dependent shape: the importer takes static shapes only",
    "dynamic_strided_slice": "dynamic bounds: the importer takes static shapes only",
    "assert_op": "no tensor result: the importer makes no node",
    "null_value": "no tensor result: the importer makes no node",
    "shape_of": "no tensor result: the importer makes no node",
    "size": "no tensor result: the importer makes no node",
    "shape_to_tensor": "shape bookkeeping: folded at import",
    "tensor_to_shape": "no tensor result: the importer makes no node",
}


def _same(fn: Any) -> Builder:
    return lambda attrs, ins, outs, dev: fn


def _argsort(attrs, ins, outs, dev):
    axis, desc = int(attrs.get("axis", -1)), bool(attrs.get("descending", False))
    dt = torch_dtype(outs[0]["dtype"])
    return lambda x: torch.argsort(x, dim=axis, descending=desc, stable=True).to(dt)


def _sort(attrs, ins, outs, dev):
    axis, desc = int(attrs.get("axis", -1)), bool(attrs.get("descending", False))
    return lambda x: torch.sort(x, dim=axis, descending=desc, stable=True).values


def _index_put(attrs, ins, outs, dev):
    acc = bool(attrs.get("accumulate", False))
    return lambda x, *rest: x.index_put(tuple(i.long() for i in rest[:-1]), rest[-1], accumulate=acc)


def _index_tensor(attrs, ins, outs, dev):
    return lambda x, *idx: x[tuple(i.long() if not i.dtype == torch.bool else i for i in idx)]


def _gather_elements(attrs, ins, outs, dev):
    axis = int(attrs.get("axis", 0))
    return lambda x, idx: torch.gather(x, axis, idx.long())


def _gather_nd(attrs, ins, outs, dev):
    if int(attrs.get("batch_dims", 0)):
        raise Unsupported("gather_nd with batch_dims")

    def f(x, idx):  # idx: (M, ...) with M leading index dims
        return x[tuple(idx.long())]

    return f


def _scatter_elements(attrs, ins, outs, dev):
    axis = int(attrs.get("axis", 0))
    red = str(attrs.get("reduction", "update"))
    if red == "update":
        return lambda x, idx, upd: torch.scatter(x, axis, idx.long(), upd)
    reduce = {"add": "sum", "mul": "prod", "mean": "mean", "max": "amax", "min": "amin"}.get(red)
    if reduce is None:
        raise Unsupported(f"scatter_elements reduction {red!r}")
    return lambda x, idx, upd: torch.scatter_reduce(x, axis, idx.long(), upd, reduce)


def _scatter_nd(attrs, ins, outs, dev):
    red = str(attrs.get("reduction", "update"))
    if red not in ("update", "add"):
        raise Unsupported(f"scatter_nd reduction {red!r}")

    def f(x, idx, upd):
        return x.index_put(tuple(idx.long()), upd, accumulate=red == "add")

    return f


def _one_hot(attrs, ins, outs, dev):
    depth, axis = int(attrs["depth"]), int(attrs.get("axis", -1))
    on, off = attrs.get("on_value", 1), attrs.get("off_value", 0)
    dt = torch_dtype(outs[0]["dtype"])

    def f(idx):
        hot = F.one_hot(idx.long(), depth).to(dt)
        y = hot * on + (1 - hot) * off
        return y.to(dt) if axis in (-1, idx.dim()) else y.movedim(-1, axis).to(dt)

    return f


def _tri(upper: bool) -> Builder:
    def build(attrs, ins, outs, dev):
        k = int(attrs.get("k", 0) or 0)
        fn = torch.triu if upper else torch.tril
        return lambda x, *rest: fn(x, k)

    return build


def _stack(attrs, ins, outs, dev):
    axis = int(attrs.get("axis", 0) or 0)
    return lambda *xs: torch.stack(xs, axis)


def _meshgrid(attrs, ins, outs, dev):
    indexing = str(attrs.get("indexing", "ij"))
    return lambda *xs: tuple(t.contiguous() for t in torch.meshgrid(*xs, indexing=indexing))


def _prelu(attrs, ins, outs, dev):
    if int(attrs.get("axis", 1)) != 1:
        raise Unsupported(f"prelu over axis {attrs.get('axis')}")
    return lambda x, a: F.prelu(x, a)


def _softplus(attrs, ins, outs, dev):
    beta, threshold = float(attrs.get("beta", 1.0)), float(attrs.get("threshold", 20.0))
    return lambda x: F.softplus(x, beta, threshold)


def _pixel_shuffle(attrs, ins, outs, dev):
    r = int(attrs["upscale_factor"])
    return lambda x: F.pixel_shuffle(x, r)


def _instance_norm(attrs, ins, outs, dev):
    eps = float(attrs.get("epsilon", 1e-5))
    if int(attrs.get("channel_axis", 1)) != 1:
        raise Unsupported(f"instance_norm with channel_axis {attrs.get('channel_axis')}")
    return lambda x, g, b: F.instance_norm(x, weight=g, bias=b, eps=eps)


def _median(attrs, ins, outs, dev):
    axis, keep = attrs.get("axis"), bool(attrs.get("keepdims", False))
    if axis is None:
        return lambda x: torch.median(x)
    return lambda x: torch.median(x, dim=int(axis[0] if isinstance(axis, list) else axis), keepdim=keep).values


def _attention(attrs, ins, outs, dev):
    """relax.nn.attention: (batch, seq, heads, dim) layout, optional bias, causal mask."""
    scale = attrs.get("scale")
    causal = str(attrs.get("causal_mask") or "")
    if causal not in ("", "TopLeft"):
        raise Unsupported(f"attention causal_mask {causal!r}")

    def f(q, k, v, *bias):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        mask = bias[0] if bias else None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal == "TopLeft",
                                           scale=None if scale is None else float(scale))
        return y.transpose(1, 2).contiguous()

    return f


def _dropout(attrs, ins, outs, dev):
    return lambda x: (x, torch.ones_like(x)) if len(outs) == 2 else x  # inference: identity


def _arange(attrs, ins, outs, dev):
    start, end, step = attrs.get("start", 0), attrs.get("end"), attrs.get("step", 1)
    dt = torch_dtype(outs[0]["dtype"])
    return lambda *xs: torch.arange(start, end, step, dtype=dt, device=dev)


def _eye(attrs, ins, outs, dev):
    n, m = (int(d) for d in outs[0]["shape"])
    k = int(attrs.get("k", 0) or 0)
    dt = torch_dtype(outs[0]["dtype"])
    return lambda *xs: torch.eye(n, m, dtype=dt, device=dev).roll(k, 1) if k else torch.eye(n, m, dtype=dt, device=dev)


def _hamming(attrs, ins, outs, dev):
    n = int(outs[0]["shape"][0])
    periodic = bool(attrs.get("periodic", True))
    alpha, beta = float(attrs.get("alpha", 0.54)), float(attrs.get("beta", 0.46))
    dt = torch_dtype(outs[0]["dtype"])
    return lambda *xs: torch.hamming_window(n, periodic, alpha, beta, dtype=dt, device=dev)


def _slice_scatter(attrs, ins, outs, dev):
    axis = int(attrs.get("axis", 0))
    start, end, step = attrs.get("start"), attrs.get("end"), attrs.get("step", 1)
    return lambda x, src: torch.slice_scatter(x, src, axis, start, end, step)


MORE_OPS: dict[str, Builder] = {
    **{n: _same(getattr(torch, n)) for n in _SAME_NAME if hasattr(torch, n)},
    **{n: _same(fn) for n, fn in RENAMED.items()},
    "argsort": _argsort,
    "sort": _sort,
    "index_put": _index_put,
    "index_tensor": _index_tensor,
    "gather_elements": _gather_elements,
    "gather_nd": _gather_nd,
    "scatter_elements": _scatter_elements,
    "scatter_nd": _scatter_nd,
    "one_hot": _one_hot,
    "tril": _tri(False),
    "triu": _tri(True),
    "stack": _stack,
    "meshgrid": _meshgrid,
    "prelu": _prelu,
    "softplus": _softplus,
    "pixel_shuffle": _pixel_shuffle,
    "instance_norm": _instance_norm,
    "median": _median,
    "attention": _attention,
    "dropout": _dropout,
    "arange": _arange,
    "eye": _eye,
    "eye_like": _eye,
    "hamming_window": _hamming,
    "slice_scatter": _slice_scatter,
}
