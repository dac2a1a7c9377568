"""Relax operator -> torch function table of the ``torch`` backend.

Each entry builds, once per node, a closure over the node's attributes that calls
the torch function computing what the Relax operator computes (oneDNN / MKL on the
CPU, cuBLAS / cuDNN on CUDA): ``OPS[op](attrs, inputs, outputs, device) -> fn`` and
``fn(*tensors)`` returns a tensor or a tuple of tensors, in the op's output order.

Conventions
-----------
* Reshape-like ops (``reshape``, ``expand_dims``, ``squeeze``, ``flatten``) return
  views, as TVM does at run time (zero-cost kernels).
* Other data movement (``permute_dims``, ``broadcast_to``, ``split``,
  ``strided_slice``, ``concat``, ``take``...) returns contiguous tensors, as the
  Relax operator (and the TVM kernel) does: the copy is part of its cost, and the
  consumers get the dense inputs they were profiled with.
* Layouts, asymmetric paddings and ``out_dtype`` are honoured; what torch cannot
  express (blocked layouts, asymmetric padding of a transposed convolution...)
  raises :class:`Unsupported`, which the backend reports naming the node.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["OPS", "Unsupported", "TORCH_DTYPES", "torch_dtype"]

Fn = Callable[..., Any]
Builder = Callable[[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], torch.device], Fn]

TORCH_DTYPES: dict[str, torch.dtype] = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}


class Unsupported(ValueError):
    """The op is mapped, but not with these attributes."""


def torch_dtype(name: str) -> torch.dtype:
    """``"float32"`` -> ``torch.float32``."""
    try:
        return TORCH_DTYPES[str(name)]
    except KeyError:
        raise Unsupported(f"dtype {name!r} has no torch equivalent here") from None


def _shape(spec: dict[str, Any]) -> tuple[int, ...]:
    return tuple(int(d) for d in spec["shape"])


def _axis(axis: Any, rank: int) -> int:
    a = int(axis)
    return a + rank if a < 0 else a


def _cast(fn: Fn, outs: list[dict[str, Any]], natural: str) -> Fn:
    """``fn`` followed by a cast to the declared output dtype when it differs."""
    want = outs[0]["dtype"] if outs else natural
    if want == natural:
        return fn
    dt = torch_dtype(want)
    return lambda *xs: fn(*xs).to(dt)


# ---------------------------------------------------------------- elementwise ops
#: same-named torch functions (``torch.relu`` for ``relu``...)
_SAME = ("relu sigmoid tanh exp log sqrt rsqrt abs erf sin cos tan floor ceil sign square "
         "logical_not isnan maximum minimum floor_divide logical_and logical_or logical_xor")
_UNARY: dict[str, Fn] = {
    **{k: getattr(torch, k) for k in _SAME.split()},
    "negative": torch.neg,
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
}
_BINARY: dict[str, Fn] = {
    "add": torch.add, "subtract": torch.sub, "multiply": torch.mul, "divide": torch.div,
    "power": torch.pow, "floor_mod": torch.remainder, "equal": torch.eq, "not_equal": torch.ne,
    "less": torch.lt, "less_equal": torch.le, "greater": torch.gt, "greater_equal": torch.ge,
}


def _elementwise(fn: Fn) -> Builder:
    return lambda attrs, ins, outs, dev: fn


def _softmax(log: bool) -> Builder:
    def build(attrs, ins, outs, dev):
        axis = int(attrs.get("axis", -1))
        f = F.log_softmax if log else F.softmax
        return lambda x: f(x, dim=axis)

    return build


def _matmul(attrs, ins, outs, dev):
    return _cast(torch.matmul, outs, ins[0]["dtype"])


# ------------------------------------------------------------ convolution, pooling
_SPATIAL = {1: "W", 2: "HW", 3: "DHW"}


def _perm(src: str, dst: str) -> list[int] | None:
    """Permutation taking a tensor in layout ``src`` to layout ``dst`` (None: same)."""
    if src == dst:
        return None
    if not (src.isalpha() and src.isupper() and sorted(src) == sorted(dst)):
        raise Unsupported(f"layout {src!r} (only plain permutations of {dst!r} are mapped)")
    return [src.index(c) for c in dst]


def _pads(attrs: dict[str, Any], nd: int) -> tuple[list[int], list[int]]:
    """Relax padding -> (before, after) per spatial dim."""
    p = [int(v) for v in attrs.get("padding", [0] * nd)]
    if len(p) == nd:
        return p, p
    if len(p) == 2 * nd:
        return p[:nd], p[nd:]
    if len(p) == 1:
        return p * nd, p * nd
    raise Unsupported(f"padding {p} for a {nd}-d op")


def _fpad(before: list[int], after: list[int]) -> list[int]:
    """(before, after) per dim -> F.pad's order (last dim first)."""
    out: list[int] = []
    for b, a in zip(reversed(before), reversed(after)):
        out += [b, a]
    return out


def _ints(v: Any, nd: int, default: int) -> list[int]:
    if v is None:
        return [default] * nd
    v = [int(x) for x in (v if isinstance(v, list | tuple) else [v])]
    return v * nd if len(v) == 1 else v


def _conv(nd: int, transpose: bool = False) -> Builder:
    fns = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
    tfns = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
    canon_x = "NC" + _SPATIAL[nd]
    canon_w = ("IO" if transpose else "OI") + _SPATIAL[nd]

    def build(attrs, ins, outs, dev):
        px = _perm(str(attrs.get("data_layout", canon_x)), canon_x)
        pw = _perm(str(attrs.get("kernel_layout", canon_w)), canon_w)
        out_layout = str(attrs.get("out_layout") or attrs.get("data_layout", canon_x))
        po = _perm(canon_x, out_layout)
        before, after = _pads(attrs, nd)
        stride = _ints(attrs.get("strides"), nd, 1)
        dilation = _ints(attrs.get("dilation"), nd, 1)
        groups = int(attrs.get("groups", 1))
        pre = None
        if before == after:
            pad = before
        elif transpose:
            raise Unsupported(f"asymmetric padding {before + after} of a transposed convolution")
        else:
            pre, pad = _fpad(before, after), [0] * nd
        if transpose:
            opad = _ints(attrs.get("output_padding"), nd, 0)
            conv = tfns[nd]

            def call(x, w):
                return conv(x, w, None, stride, pad, opad, groups, dilation)

        else:
            conv = fns[nd]

            def call(x, w):
                return conv(x, w, None, stride, pad, dilation, groups)

        def f(x, w):
            if px is not None:
                x = x.permute(px)
            if pw is not None:
                w = w.permute(pw)
            if pre is not None:
                x = F.pad(x, pre)
            y = call(x, w)
            return y if po is None else y.permute(po).contiguous()

        if px is None and pw is None and po is None and pre is None:
            f = call
        return _cast(f, outs, ins[0]["dtype"])

    return build


def _pool(nd: int, kind: str) -> Builder:
    canon = "NC" + _SPATIAL[nd]

    def build(attrs, ins, outs, dev):
        px = _perm(str(attrs.get("layout", canon)), canon)
        po = _perm(canon, str(attrs.get("out_layout") or attrs.get("layout", canon)))
        k = _ints(attrs.get("pool_size"), nd, 1)
        stride = _ints(attrs.get("strides"), nd, 1)
        dilation = _ints(attrs.get("dilation"), nd, 1)
        before, after = _pads(attrs, nd)
        ceil = bool(attrs.get("ceil_mode", False))
        include = bool(attrs.get("count_include_pad", False))
        pre, pad = None, before
        if before != after or any(2 * p > kk for p, kk in zip(before, k)):
            if kind == "avg" and not include and any(before + after):
                raise Unsupported(
                    f"avg pooling with padding {before + after} and count_include_pad=False"
                )
            pre, pad = _fpad(before, after), [0] * nd
        fill = float("-inf") if kind == "max" else 0.0
        if kind == "max":
            pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[nd]

            def call(x):
                return pool(x, k, stride, pad, dilation, ceil)

        else:
            if any(d != 1 for d in dilation):
                raise Unsupported(f"avg pooling with dilation {dilation}")
            pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[nd]

            def call(x):
                return pool(x, k, stride, pad, ceil, include)

        def f(x):
            if px is not None:
                x = x.permute(px)
            if pre is not None:
                x = F.pad(x, pre, value=fill)
            y = call(x)
            return y if po is None else y.permute(po).contiguous()

        return call if px is None and po is None and pre is None else f

    return build


def _adaptive_avg_pool(nd: int) -> Builder:
    canon = "NC" + _SPATIAL[nd]
    pool = {1: F.adaptive_avg_pool1d, 2: F.adaptive_avg_pool2d, 3: F.adaptive_avg_pool3d}[nd]

    def build(attrs, ins, outs, dev):
        px = _perm(str(attrs.get("layout", canon)), canon)
        po = _perm(canon, str(attrs.get("out_layout") or attrs.get("layout", canon)))
        size = attrs.get("output_size")
        if size is None:  # keep the spatial size
            shape = _shape(ins[0])
            size = [shape[str(attrs.get("layout", canon)).index(c)] for c in _SPATIAL[nd]]
        size = _ints(size, nd, 1)

        def f(x):
            if px is not None:
                x = x.permute(px)
            y = pool(x, size)
            return y if po is None else y.permute(po).contiguous()

        return f

    return build


# ------------------------------------------------------------------ normalisation
def _batch_norm(attrs, ins, outs, dev):
    if attrs.get("training"):
        raise Unsupported("batch_norm with training=True (inference graphs only)")
    axis = _axis(attrs.get("axis", 1), len(ins[0]["shape"]))
    eps = float(attrs.get("epsilon", 1e-5))
    center, scale = bool(attrs.get("center", True)), bool(attrs.get("scale", True))
    n_out = len(outs)

    def f(x, gamma, beta, mean, var):
        xx = x if axis == 1 else x.movedim(axis, 1)
        y = F.batch_norm(xx, mean, var, gamma if scale else None, beta if center else None, False, 0.0, eps)
        if axis != 1:
            y = y.movedim(1, axis)
        return (y, mean, var) if n_out == 3 else y

    return f


def _trailing(axes: Any, rank: int, op: str) -> int:
    """Number of normalised trailing dims; Unsupported unless ``axes`` are trailing."""
    axes = sorted(_axis(a, rank) for a in (axes if isinstance(axes, list) else [axes]))
    if axes != list(range(rank - len(axes), rank)):
        raise Unsupported(f"{op} over axes {axes} (only trailing axes are mapped)")
    return len(axes)


def _layer_norm(attrs, ins, outs, dev):
    shape = _shape(ins[0])
    n = _trailing(attrs.get("axes", [-1]), len(shape), "layer_norm")
    norm_shape = shape[len(shape) - n :]
    eps = float(attrs.get("epsilon", 1e-5))
    center, scale = bool(attrs.get("center", True)), bool(attrs.get("scale", True))
    return lambda x, g, b: F.layer_norm(x, norm_shape, g if scale else None, b if center else None, eps)


def _rms_norm(attrs, ins, outs, dev):
    shape = _shape(ins[0])
    n = _trailing(attrs.get("axes", [-1]), len(shape), "rms_norm")
    norm_shape = shape[len(shape) - n :]
    eps = float(attrs.get("epsilon", 1e-5))
    return lambda x, w: F.rms_norm(x, norm_shape, w, eps)


def _group_norm(attrs, ins, outs, dev):
    rank = len(ins[0]["shape"])
    if _axis(attrs.get("channel_axis", 1), rank) != 1:
        raise Unsupported(f"group_norm with channel_axis {attrs.get('channel_axis')}")
    groups = int(attrs["num_groups"])
    eps = float(attrs.get("epsilon", 1e-5))
    center, scale = bool(attrs.get("center", True)), bool(attrs.get("scale", True))
    return lambda x, g, b: F.group_norm(x, groups, g if scale else None, b if center else None, eps)


# ----------------------------------------------------------------------- reductions
def _reduce(name: str) -> Builder:
    def build(attrs, ins, outs, dev):
        rank = len(ins[0]["shape"])
        axis = attrs.get("axis")
        keep = bool(attrs.get("keepdims", False))
        dims = list(range(rank)) if axis is None else [_axis(a, rank) for a in (axis if isinstance(axis, list) else [axis])]
        if not dims:
            return lambda x: x.clone()
        if name == "prod":
            def f(x):
                for d in sorted(dims, reverse=True):
                    x = torch.prod(x, dim=d, keepdim=keep)
                return x

            return f
        fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[name]
        return lambda x: fn(x, dim=dims, keepdim=keep)

    return build


def _arg_reduce(largest: bool) -> Builder:
    def build(attrs, ins, outs, dev):
        axis = attrs.get("axis")
        keep = bool(attrs.get("keepdims", False))
        fn = torch.argmax if largest else torch.argmin
        dt = torch_dtype(outs[0]["dtype"])
        return lambda x: fn(x, dim=axis, keepdim=keep).to(dt)

    return build


def _topk(attrs, ins, outs, dev):
    k, axis = int(attrs["k"]), int(attrs.get("axis", -1))
    largest, ret = bool(attrs.get("largest", True)), str(attrs.get("ret_type", "both"))
    dt = torch_dtype(attrs.get("dtype", "int64"))

    def f(x):
        v, i = torch.topk(x, k, dim=axis, largest=largest, sorted=True)
        i = i.to(dt)
        return (v, i) if ret == "both" else v if ret == "values" else i

    return f


# --------------------------------------------------------------------- data movement
def _view(attrs, ins, outs, dev):
    shape = _shape(outs[0])
    return lambda x: x.reshape(shape)


def _permute(attrs, ins, outs, dev):
    axes = attrs.get("axes")
    rank = len(ins[0]["shape"])
    axes = list(reversed(range(rank))) if axes is None else [_axis(a, rank) for a in axes]
    return lambda x: x.permute(axes).contiguous()


def _broadcast_to(attrs, ins, outs, dev):
    shape = _shape(outs[0])
    return lambda x: x.expand(shape).contiguous()


def _concat(attrs, ins, outs, dev):
    axis = attrs.get("axis", 0)
    if axis is None:
        return lambda *xs: torch.cat([x.reshape(-1) for x in xs])
    return lambda *xs: torch.cat(xs, int(axis))


def _split(attrs, ins, outs, dev):
    axis = int(attrs.get("axis", 0))
    spec = attrs.get("indices_or_sections")
    arg = [int(i) for i in spec] if isinstance(spec, list) else int(spec)
    return lambda x: tuple(p.contiguous() for p in torch.tensor_split(x, arg, dim=axis))


def _strided_slice(attrs, ins, outs, dev):
    if not all(k in attrs for k in ("axes", "begin", "end")):
        raise Unsupported(
            "strided_slice without axes/begin/end in its attrs (the graph importer dropped "
            "them); re-import the model with an importer that records them"
        )
    rank = len(ins[0]["shape"])
    strides = attrs.get("strides") or [1] * len(attrs["axes"])
    index: list[Any] = [slice(None)] * rank
    for a, b, e, s in zip(attrs["axes"], attrs["begin"], attrs["end"], strides):
        a, s = _axis(a, rank), int(s)
        if s < 0:
            raise Unsupported(f"strided_slice with negative stride {s}")
        index[a] = slice(int(b), int(e), s)
    index_t = tuple(index)
    return lambda x: x[index_t].contiguous()


def _take(attrs, ins, outs, dev):
    axis = attrs.get("axis")
    mode = str(attrs.get("mode", "fast"))
    shape = _shape(outs[0])
    data_shape = _shape(ins[0])
    ax = 0 if axis is None else _axis(axis, len(data_shape))
    n = int(math.prod(data_shape)) if axis is None else data_shape[ax]

    def f(x, idx):
        if axis is None:
            x = x.reshape(-1)
        if mode == "clip":
            idx = idx.clamp(0, n - 1)
        elif mode == "wrap":
            idx = idx.remainder(n)
        flat = idx.reshape(-1)
        if flat.dtype not in (torch.int32, torch.int64):
            flat = flat.long()
        return torch.index_select(x, ax, flat).reshape(shape)

    return f


def _pad(attrs, ins, outs, dev):
    width = [int(w) for w in attrs.get("pad_width", [])]
    mode = str(attrs.get("pad_mode", "constant"))
    value = float(attrs.get("pad_value", 0.0) or 0.0)
    pads = _fpad(width[0::2], width[1::2])
    if mode != "constant":
        raise Unsupported(f"pad_mode {mode!r}")
    return lambda x: F.pad(x, pads, value=value)


def _full(attrs, ins, outs, dev):
    shape, dt = _shape(outs[0]), torch_dtype(outs[0]["dtype"])
    return lambda fill: fill.to(dt).expand(shape).contiguous()


def _const_fill(value: float) -> Builder:
    def build(attrs, ins, outs, dev):
        shape, dt = _shape(outs[0]), torch_dtype(outs[0]["dtype"])
        return lambda *xs: torch.full(shape, value, dtype=dt, device=dev)

    return build


def _cumulative(prod: bool) -> Builder:
    def build(attrs, ins, outs, dev):
        axis = attrs.get("axis")
        dt = torch_dtype(attrs["dtype"]) if attrs.get("dtype") else None
        fn = torch.cumprod if prod else torch.cumsum
        if attrs.get("exclusive"):
            if prod:
                raise Unsupported("exclusive cumprod")
            if axis is None:
                return lambda x: fn(x.reshape(-1), 0, dtype=dt) - x.reshape(-1).to(dt or x.dtype)
            return lambda x: fn(x, int(axis), dtype=dt) - x.to(dt or x.dtype)
        if axis is None:
            return lambda x: fn(x.reshape(-1), 0, dtype=dt)
        return lambda x: fn(x, int(axis), dtype=dt)

    return build


def _moment(std: bool) -> Builder:
    def build(attrs, ins, outs, dev):
        axis, keep = attrs.get("axis"), bool(attrs.get("keepdims", False))
        fn = torch.std if std else torch.var  # Relax: population statistics
        return lambda x: fn(x, dim=axis, correction=0, keepdim=keep)

    return build


def _like(value: float | None) -> Builder:
    def build(attrs, ins, outs, dev):
        shape, dt = _shape(outs[0]), torch_dtype(outs[0]["dtype"])
        if value is None:  # full_like(x, fill)
            return lambda x, fill: fill.to(dt).expand(shape).contiguous()
        return lambda x: torch.full(shape, value, dtype=dt, device=x.device)

    return build


def _attr_fn(make: Callable[[dict[str, Any], list[dict[str, Any]]], Fn]) -> Builder:
    """A builder from ``make(attrs, outs)`` (one-line entries of :data:`OPS`)."""
    return lambda attrs, ins, outs, dev: make(attrs, outs)


OPS: dict[str, Builder] = {
    **{k: _elementwise(v) for k, v in _UNARY.items()},
    **{k: _elementwise(v) for k, v in _BINARY.items()},
    "clip": _attr_fn(lambda a, o: lambda x: torch.clamp(x, a.get("min"), a.get("max"))),
    "leakyrelu": _attr_fn(lambda a, o: lambda x: F.leaky_relu(x, float(a.get("alpha", 0.01)))),
    "softmax": _softmax(False),
    "log_softmax": _softmax(True),
    "matmul": _matmul,
    "where": _elementwise(torch.where),
    "conv1d": _conv(1),
    "conv2d": _conv(2),
    "conv3d": _conv(3),
    "conv1d_transpose": _conv(1, True),
    "conv2d_transpose": _conv(2, True),
    "conv3d_transpose": _conv(3, True),
    "max_pool1d": _pool(1, "max"),
    "max_pool2d": _pool(2, "max"),
    "max_pool3d": _pool(3, "max"),
    "avg_pool1d": _pool(1, "avg"),
    "avg_pool2d": _pool(2, "avg"),
    "avg_pool3d": _pool(3, "avg"),
    "adaptive_avg_pool1d": _adaptive_avg_pool(1),
    "adaptive_avg_pool2d": _adaptive_avg_pool(2),
    "adaptive_avg_pool3d": _adaptive_avg_pool(3),
    "batch_norm": _batch_norm,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "group_norm": _group_norm,
    "sum": _reduce("sum"),
    "mean": _reduce("mean"),
    "max": _reduce("max"),
    "min": _reduce("min"),
    "prod": _reduce("prod"),
    "argmax": _arg_reduce(True),
    "argmin": _arg_reduce(False),
    "topk": _topk,
    "reshape": _view,
    "expand_dims": _view,
    "squeeze": _view,
    "flatten": _view,
    "permute_dims": _permute,
    "broadcast_to": _broadcast_to,
    "concat": _concat,
    "split": _split,
    "strided_slice": _strided_slice,
    "take": _take,
    "astype": _attr_fn(lambda a, o: (lambda dt: lambda x: x.to(dt))(torch_dtype(a.get("dtype") or o[0]["dtype"]))),
    "tile": _attr_fn(lambda a, o: lambda x: torch.tile(x, [int(r) for r in a["repeats"]])),
    "repeat": _attr_fn(
        lambda a, o: (lambda x: torch.repeat_interleave(x.reshape(-1), int(a["repeats"])))
        if a.get("axis") is None
        else (lambda x: torch.repeat_interleave(x, int(a["repeats"]), dim=int(a["axis"])))
    ),
    "flip": _attr_fn(lambda a, o: lambda x: torch.flip(x, [int(a.get("axis", 0))])),
    "pad": _pad,
    "full": _full,
    "zeros": _const_fill(0.0),
    "ones": _const_fill(1.0),
    "full_like": _like(None),
    "zeros_like": _like(0.0),
    "ones_like": _like(1.0),
    "cumsum": _cumulative(False),
    "cumprod": _cumulative(True),
    "variance": _moment(False),
    "std": _moment(True),
    "einsum": _attr_fn(lambda a, o: lambda *xs: torch.einsum(str(a["subscripts"]), *xs)),
}


def supported_ops() -> Sequence[str]:
    """Op kinds the torch backend maps, sorted."""
    return sorted(OPS)
