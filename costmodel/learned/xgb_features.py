"""Derived inputs and per-family baselines of :class:`~costmodel.learned.xgb.XGBoost`.

Everything here is computed from profile or feature rows (``graphs.features``
columns, ``signature`` included): the ratios and structural facts trees cannot
form themselves (:func:`derived_features`), the bytes a roofline charges
(:func:`moved_bytes`), which ops move no data (:func:`view_like`), and the kernel
family baselines of ``baseline="family"`` (:func:`fit_group_baselines`,
:func:`group_baseline`).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from hetsim.costmodel.families import family_column
from hetsim.costmodel.roofline import VIEW_OPS, op_key

#: ops whose roofline baseline is the per-call floor alone: views, no data moves
#: (``broadcast_to`` is a view in torch; with TVM the trees learn its copy time)
VIEW_OPS_BASELINE = frozenset({*VIEW_OPS, "broadcast_to"})
#: gathers: only the rows they pick move, not the whole table their bytes count
GATHER_OPS = frozenset({"take", "gather", "gather_elements", "gather_nd", "embedding"})
#: data movement that a torch kernel may return as a (contiguous) view: see :func:`copies`
MAYBE_VIEW_OPS = frozenset({"split", "strided_slice", "permute_dims", "transpose", "broadcast_to"})
#: ops that call a math-library function (exp, tanh, erf...) per output element
MATH_CALL_OPS = frozenset({"sigmoid", "tanh", "exp", "log", "log1p", "expm1", "erf", "gelu", "gelu_tanh",
                           "silu", "softplus", "mish", "softmax", "log_softmax", "sin", "cos", "tan", "power"})
#: names of the derived inputs, in design-matrix order (the module docstring of
#: :mod:`costmodel.learned.xgb` describes them); saved models list the ones they use
DERIVED_FEATURES = ["flops_per_out", "bytes_per_out", "out_rows", "out_last", "in0_last", "log_intensity",
                    "moves_last_axis", "log2_gemm_m", "log2_gemm_n", "pool_window", "math_calls_per_out",
                    "log_math_calls", "copies", "dw_channel_align"]

#: ``baseline="family"``: families whose baseline is additive, ``a + flops/P + bytes/B``
#: (oneDNN reorders data and weights on every call, serially with the compute)
SUM_FAMILIES = ("gemm", "dwconv", "norm")
#: families (and, for ``pool``, op kinds) with their own compute peak and fixed cost
#: in a roofline ``c + max(work/P, bytes/B)`` (B: the device's bandwidth)
MAX_FAMILIES = ("pool", "transcendental")
OP_LEVEL_FAMILIES = ("pool",)
#: training rows a family (an op kind) needs for its own baseline
MIN_FAMILY_ROWS, MIN_OP_ROWS = 20, 10
#: rows well above the fixed cost (time > BUSY_FACTOR x it) that set a compute peak, and how many
BUSY_FACTOR, MIN_BUSY_ROWS = 3.0, 5


# ---------------------------------------------------------------- signatures
@functools.lru_cache(maxsize=65536)
def _sig_parts(sig: str) -> tuple[dict[str, Any], list[list[int]]]:
    """``(attrs, input shapes)`` of a ``graphs.signature`` string (empty if unparsable)."""
    try:
        _, attrs, ins = sig.split("|", 2)
        a = json.loads(attrs)
        shapes = [[int(d) for d in t[0]] for t in json.loads(ins)]
    except (ValueError, TypeError, IndexError, KeyError):
        return {}, []
    return (a if isinstance(a, dict) else {}), shapes


def _signatures(X: pd.DataFrame) -> list[tuple[dict[str, Any], list[list[int]]]]:
    if "signature" not in X:
        return [({}, [])] * len(X)
    return [_sig_parts(s) for s in X["signature"].astype(str)]


def copies(op: str, attrs: Mapping[str, Any], shapes: Sequence[Sequence[int]]) -> float:
    """1.0 when the torch kernel of ``op`` copies data, 0.0 when it returns a view.

    ``split`` (``tensor_split`` + ``.contiguous()``) is a view when every dim before
    its axis is 1; ``strided_slice`` when, besides, it slices one axis with stride 1;
    ``permute_dims`` when it only moves size-1 dims; ``broadcast_to`` when the
    shape does not grow. Reshape-like ops never copy; all other ops do."""
    if op in VIEW_OPS:
        return 0.0
    if op not in MAYBE_VIEW_OPS or not shapes:
        return 1.0
    try:
        return _copies(op, attrs, list(shapes[0]))
    except (TypeError, ValueError, IndexError, KeyError):  # attrs this op should not have
        return 1.0


def _copies(op: str, attrs: Mapping[str, Any], x: list[int]) -> float:
    r = len(x)
    if r == 0:
        return 0.0
    if op == "split":
        axis = int(attrs.get("axis", 0)) % r
        return float(int(np.prod(x[:axis])) > 1)
    if op == "strided_slice":
        axes = [int(a) % r for a in attrs.get("axes", [])]
        strides = attrs.get("strides") or [1] * len(axes)
        if not axes:
            return 0.0
        return float(any(int(s) != 1 for s in strides) or len(set(axes)) > 1 or int(np.prod(x[:min(axes)])) > 1)
    if op in ("permute_dims", "transpose"):
        axes = attrs.get("axes")
        axes = list(reversed(range(r))) if axes is None else [int(a) % r for a in axes]
        moved = [a for a in axes if x[a] != 1]
        return float(moved != sorted(moved))
    shape = attrs.get("shape")  # broadcast_to
    return float(not isinstance(shape, list) or int(np.prod(shape)) != int(np.prod(x)))


# ------------------------------------------------------------ derived inputs
def derived_features(X: pd.DataFrame, names: Sequence[str] = DERIVED_FEATURES) -> np.ndarray:
    """The derived inputs ``names`` (default :data:`DERIVED_FEATURES`) of profile or
    feature rows ``X``, one column each."""
    flops = X["flops"].to_numpy(float)
    nbytes = X["bytes"].to_numpy(float)
    out = np.maximum(X["out_elems"].to_numpy(float), 1.0)
    last = np.maximum(X["out0_d3"].to_numpy(float), 1.0)
    cols = {
        "flops_per_out": lambda: flops / out,
        "bytes_per_out": lambda: nbytes / out,
        "out_rows": lambda: out / last,
        "out_last": lambda: last,
        "in0_last": lambda: X["in0_d3"].to_numpy(float),
        "log_intensity": lambda: np.log1p(flops) - np.log1p(nbytes),
        "moves_last_axis": lambda: _moves_last_axis(X),
        "log2_gemm_m": lambda: _gemm_mn(X)[0],
        "log2_gemm_n": lambda: _gemm_mn(X)[1],
        "pool_window": lambda: _pool_window(X),
        "math_calls_per_out": lambda: math_calls(X),
        "log_math_calls": lambda: np.log10(1.0 + math_calls(X) * X["out_elems"].to_numpy(float)),
        "copies": lambda: copies_column(X),
        "dw_channel_align": lambda: _dw_channel_align(X),
    }
    return np.column_stack([cols[n]() for n in names]) if len(names) else np.empty((len(X), 0))


def math_calls(X: pd.DataFrame) -> np.ndarray:
    """Math-library calls per output element: 1 for :data:`MATH_CALL_OPS`, else 0
    (the FLOP counts of such ops say little: 0 for ``sigmoid``, 8 for ``gelu_tanh``)."""
    return np.array([1.0 if op_key(o) in MATH_CALL_OPS else 0.0 for o in X["op"].astype(str)])


def copies_column(X: pd.DataFrame) -> np.ndarray:
    """:func:`copies` of every row (1.0 for a move whose signature is unknown)."""
    ops = [op_key(o) for o in X["op"].astype(str)]
    return np.array([copies(o, a, s) for o, (a, s) in zip(ops, _signatures(X))])


def _dw_channel_align(X: pd.DataFrame) -> np.ndarray:
    """Of a grouped (depthwise) convolution, how many of the low bits of its channel
    count are 0, up to 4 (a multiple of 16 fills the AVX-512 lanes); -1 elsewhere."""
    dw = family_column(X) == "dwconv"
    c = np.maximum(X["in0_d1"].to_numpy(float), 0).astype(np.int64)
    bits = np.zeros(len(X))
    for k in range(1, 5):
        bits += (c % (1 << k) == 0) & (c > 0)
    return np.where(dw, bits, -1.0)


def _gemm_mn(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """log2 of the GEMM dims M and N of matmul and convolution rows (0 elsewhere):
    a matmul's N is its output's last dim and M the rest of the output; a
    convolution's N is the output channels of one group (weight dim 0 / groups) and
    M the batch x output pixels of one group."""
    fam = family_column(X)
    out = np.maximum(X["out_elems"].to_numpy(float), 1.0)
    is_conv = X["op"].astype(str).map(lambda o: op_key(o).startswith("conv")).to_numpy(bool)
    groups = np.maximum(X["groups"].to_numpy(float), 1.0) if "groups" in X else np.ones(len(X))
    n_conv = np.maximum(X["in1_d0"].to_numpy(float), 1.0) / groups
    n = np.where(is_conv, n_conv, np.maximum(X["out0_d3"].to_numpy(float), 1.0))
    m = np.where(is_conv, out / np.maximum(X["in1_d0"].to_numpy(float), 1.0), out / n)
    gemm = np.isin(fam, ["gemm", "dwconv"])
    return np.where(gemm, np.log2(np.maximum(m, 1.0)), 0.0), np.where(gemm, np.log2(np.maximum(n, 1.0)), 0.0)


def _pool_window(X: pd.DataFrame) -> np.ndarray:
    """Input elements a pooling op reads per output element (its window; for an
    adaptive pool, input / output elements); 0 for other ops."""
    pool = family_column(X) == "pool"
    kh, kw = X["kernel_h"].to_numpy(float), X["kernel_w"].to_numpy(float)
    ratio = X["in_elems"].to_numpy(float) / np.maximum(X["out_elems"].to_numpy(float), 1.0)
    window = np.where((kh > 0) & (kw > 0), kh * kw, ratio)
    return np.where(pool, window, 0.0)


def _moves_last_axis(X: pd.DataFrame) -> np.ndarray:
    """1 for a transpose that moves the innermost axis (a strided copy), else 0."""
    out = np.zeros(len(X))
    if "signature" not in X:
        return out
    ops = X["op"].astype(str).to_numpy()
    for i in np.flatnonzero((ops == "permute_dims") | (ops == "transpose")):
        try:
            axes = json.loads(str(X["signature"].iloc[i]).split("|")[1]).get("axes")
        except (IndexError, ValueError, AttributeError):
            continue
        if isinstance(axes, list) and axes and axes[-1] not in (-1, len(axes) - 1):
            out[i] = 1.0
    return out


# ------------------------------------------------------------------ baselines
def moved_bytes(X: pd.DataFrame) -> np.ndarray:
    """Bytes the roofline baseline charges: ``bytes``, but for a gather twice the
    bytes of what it picks (its table is counted whole in ``bytes``)."""
    nbytes = X["bytes"].to_numpy(float)
    gather = X["op"].astype(str).isin(GATHER_OPS).to_numpy()
    if gather.any():
        elems = np.maximum(X["in_elems"].to_numpy(float) + X["out_elems"].to_numpy(float), 1.0)
        picked = 2.0 * X["out_elems"].to_numpy(float) * nbytes / elems
        nbytes = np.where(gather, picked, nbytes)
    return nbytes


def view_like(X: pd.DataFrame, *, copies_known: bool) -> np.ndarray:
    """Rows whose baseline is the per-call floor: :data:`VIEW_OPS_BASELINE`, or, with
    ``copies_known``, the views and the moves that :func:`copies` finds copy nothing."""
    if not copies_known:
        return X["op"].astype(str).isin(VIEW_OPS_BASELINE).to_numpy()
    return copies_column(X) == 0.0


def group_keys(X: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its kernel family and ``family:op`` (the keys of group baselines)."""
    fam = family_column(X)
    return fam, np.array([f"{f}:{op_key(o)}" for f, o in zip(fam, X["op"].astype(str))], dtype=object)


def sum_fit(work: np.ndarray, nbytes: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``[a, b, c]`` >= 0 of ``t ~ a + b*work + c*bytes``, least relative squares."""
    A = np.column_stack([np.ones(len(t)), work, nbytes])
    scale = np.where(A.max(axis=0) > 0, A.max(axis=0), 1.0)
    # lazy: scipy.optimize takes a second to import, and pricing a graph never fits
    from scipy.optimize import nnls

    coef, _ = nnls((A / scale) / t[:, None], np.ones(len(t)))
    return coef / scale


def fit_group_baselines(X: pd.DataFrame, t: np.ndarray, moving: np.ndarray, c0: float,
                        bandwidth: float) -> dict[str, dict[str, Any]]:
    """The group baselines of ``baseline="family"`` on one device's rows.

    Each family of :data:`SUM_FAMILIES` with :data:`MIN_FAMILY_ROWS` moving rows
    gets ``{"kind": "sum", "coef": [a, b, c]}``: ``t0 = a + b*flops + c*bytes``.
    Each family of :data:`MAX_FAMILIES` (and each op kind of
    :data:`OP_LEVEL_FAMILIES` with :data:`MIN_OP_ROWS` rows) gets
    ``{"kind": "max", "coef": [a, 1/P, 1/B]}``: ``t0 = a + max(flops/P, bytes/B)``,
    ``a`` the intercept of the additive fit, ``P`` the 95th percentile of the
    FLOP/s of its rows slower than :data:`BUSY_FACTOR` x ``a`` (at least
    :data:`MIN_BUSY_ROWS` of them), ``B`` the device's ``bandwidth``. Intercepts
    are at least the device floor ``c0``."""
    work, nbytes = X["flops"].to_numpy(float), moved_bytes(X)
    fam, opk = group_keys(X)
    groups: dict[str, dict[str, Any]] = {}
    for f in SUM_FAMILIES:
        on = (fam == f) & moving
        if on.sum() >= MIN_FAMILY_ROWS:
            a, b, c = sum_fit(work[on], nbytes[on], t[on])
            groups[f] = {"kind": "sum", "coef": [max(float(a), c0), float(b), float(c)]}
    cands = [(f, fam == f, MIN_FAMILY_ROWS) for f in MAX_FAMILIES if f not in groups]
    cands += [(g, opk == g, MIN_OP_ROWS) for g in sorted(set(opk)) if g.split(":")[0] in OP_LEVEL_FAMILIES]
    for g, sel, n_min in cands:
        on = sel & moving
        if on.sum() < n_min:
            continue
        a = max(float(sum_fit(work[on], nbytes[on], t[on])[0]), c0)
        busy = t[on] > BUSY_FACTOR * a
        if busy.sum() < MIN_BUSY_ROWS:
            continue
        peak = float(np.percentile(work[on][busy] / (t[on][busy] - a), 95))
        if peak > 0:
            groups[g] = {"kind": "max", "coef": [a, 1.0 / peak, 1.0 / bandwidth]}
    return groups


def group_baseline(X: pd.DataFrame, t0: np.ndarray, groups: Mapping[str, Mapping[str, Any]],
                   view: np.ndarray) -> np.ndarray:
    """``t0`` with the rows of each group in ``groups`` (not views) priced by its
    baseline; an op kind's overrides its family's."""
    if not groups:
        return t0
    t0 = t0.copy()
    work, nbytes = X["flops"].to_numpy(float), moved_bytes(X)
    for keys in group_keys(X):
        for g, spec in groups.items():
            on = (keys == g) & ~view
            if not on.any():
                continue
            a, b, c = spec["coef"]
            if spec["kind"] == "sum":
                t0[on] = a + b * work[on] + c * nbytes[on]
            else:
                t0[on] = a + np.maximum(b * work[on], c * nbytes[on])
    return t0
