"""What a GPU cost model sees of an operator: its kernel family and canonical dims.

A node reaches the GPU models as a row of :func:`graphs.features` (or a profile
row, which carries the same columns). :func:`gpu_ops` turns rows into the dims a
GPU kernel's time depends on, whatever the rank of the tensors the graph used:

============  ==================================================================
family        rows and dims
============  ==================================================================
``gemm``      matmuls: ``b`` independent ``m x k`` by ``k x n`` GEMMs (a matmul
              with a 2-D right operand is one GEMM over all the left rows)
``conv``      dense 3x3 stride-1 convolutions (what the data set measured):
              batch, channels in/out, input and output size, and the implicit
              GEMM ``m = batch x output pixels``, ``n`` = channels out,
              ``k = channels in x kernel``
``norm``      layer norm: ``rows`` of ``cols`` elements
``softmax``   softmax, log-softmax: ``rows`` of ``cols``
``elementwise`` element-wise ops: ``elems`` outputs, ``tensor`` operand or not
============  ==================================================================

Other dense convolutions (1x1, strided, 7x7) are priced as the implicit GEMM they
run as (``gemm`` with ``via = "conv-as-gemm"``). Element-wise op kinds the data set
lacks take the model of their nearest measured kind (:data:`ELEMENTWISE_PROXY`:
``subtract`` prices as ``add``, ``sigmoid`` as ``tanh``...). Everything else
(pooling, batch norm, reductions, copies, gathers) has no family: the per-GPU
calibrated roofline prices it (:mod:`costmodel.gpu.roofline`); views cost nothing.

:func:`design` builds the input matrix of one family, optionally with the GPU's
published figures (:data:`SPEC_KEYS`) for the cross-GPU model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from hetsim.costmodel.roofline import CONV_OPS, MATMUL_OPS, op_key

__all__ = [
    "ELEMENTWISE_OPS_MEASURED",
    "ELEMENTWISE_PROXY",
    "GPU_FAMILIES",
    "SPEC_KEYS",
    "design",
    "gpu_ops",
    "spec_roofline",
]

#: families the data set measured (each gets its own model per GPU)
GPU_FAMILIES = ("gemm", "conv", "norm", "softmax", "elementwise")
#: the published figures a GPU is priced from (Device fields / manifest ``spec``)
SPEC_KEYS = ("sm_count", "clock_hz", "peak_flops", "mem_bandwidth_bytes_per_s", "l2_bytes", "tdp_w")
#: element-wise kinds with rows in the data set
ELEMENTWISE_OPS_MEASURED = ("add", "multiply", "divide", "power", "relu", "gelu", "tanh")
#: element-wise kinds priced by the model of a measured relative (same kernel template,
#: same operands; math-library calls for the transcendental ones)
ELEMENTWISE_PROXY: dict[str, str] = {
    **dict.fromkeys(("subtract", "maximum", "minimum", "bias_add", "floor_divide", "floor_mod", "where",
                     "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                     "logical_and", "logical_or"), "add"),
    **dict.fromkeys(("relu6", "clip", "leaky_relu", "negative", "abs", "astype", "square", "round", "floor",
                     "ceil", "sign", "logical_not", "hardswish", "hardsigmoid"), "relu"),
    **dict.fromkeys(("sigmoid", "exp", "log", "sqrt", "rsqrt", "erf", "silu", "sin", "cos", "tan"), "tanh"),
    "gelu_tanh": "gelu",
}
_NORM = ("layer_norm",)
_SOFTMAX = ("softmax", "log_softmax")
#: GEMM tile shapes of cuBLAS / CUTLASS SIMT kernels (rows x cols of the output)
_TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (32, 128), (256, 128))
#: output tiles of cuDNN's Winograd F(4x4, 3x3)
_WINOGRAD_TILE = 4


def _col(X: pd.DataFrame, name: str) -> np.ndarray:
    return X[name].to_numpy(dtype=float) if name in X else np.zeros(len(X))


def gpu_ops(X: pd.DataFrame) -> pd.DataFrame:
    """One row per row of ``X`` (``graphs.features`` / profile columns): ``family``
    (a :data:`GPU_FAMILIES` name, or ``""``: none), ``kind`` (the measured op kind
    whose model prices it), ``via`` (``own``, ``proxy`` or ``conv-as-gemm``) and the
    canonical dims ``b, m, n, k`` (GEMMs), ``cin, cout, hin, hout, kh`` (convs),
    ``rows, cols, elems`` and ``tensor_operand``, with ``flops`` and ``bytes``."""
    n_rows = len(X)
    keys = np.array([op_key(o) for o in X["op"].astype(str)], dtype=object)
    groups = np.maximum(_col(X, "groups"), 1.0) if "groups" in X else np.ones(n_rows)
    in0 = np.column_stack([_col(X, f"in0_d{i}") for i in range(4)])
    in1 = np.column_stack([_col(X, f"in1_d{i}") for i in range(4)])
    out0 = np.column_stack([_col(X, f"out0_d{i}") for i in range(4)])
    out_elems = np.maximum(_col(X, "out_elems"), 1.0)
    stride = np.maximum(_col(X, "stride"), 1.0)
    kh, kw = _col(X, "kernel_h"), _col(X, "kernel_w")

    family = np.full(n_rows, "", dtype=object)
    kind = keys.copy()
    via = np.full(n_rows, "own", dtype=object)
    gemm = np.isin(keys, list(MATMUL_OPS))
    conv = np.isin(keys, list(CONV_OPS)) & (groups == 1) & (in0[:, 0] > 0) & (in1[:, 0] > 0)
    conv3 = conv & (kh == 3) & (kw == 3) & (stride == 1) & (keys == "conv2d")
    family[gemm] = "gemm"
    family[conv3] = "conv"
    family[conv & ~conv3] = "gemm"
    via[conv & ~conv3] = "conv-as-gemm"
    kind[conv & ~conv3] = "matmul"
    family[np.isin(keys, _NORM)] = "norm"
    family[np.isin(keys, _SOFTMAX)] = "softmax"
    kind[keys == "log_softmax"] = "softmax"
    via[keys == "log_softmax"] = "proxy"
    elem = np.isin(keys, ELEMENTWISE_OPS_MEASURED)
    family[elem] = "elementwise"
    proxy = np.array([k in ELEMENTWISE_PROXY for k in keys])
    family[proxy] = "elementwise"
    via[proxy] = "proxy"
    kind[proxy] = [ELEMENTWISE_PROXY[k] for k in keys[proxy]]

    # GEMM dims: k = last dim of the left operand, n = last of the right one
    k = np.maximum(in0[:, 3], 1.0)
    n = np.maximum(in1[:, 3], 1.0)
    in0_elems = np.prod(np.where(in0 > 0, in0, 1.0), axis=1)
    right_2d = (in1[:, 0] == 0) & (in1[:, 1] == 0)
    m = np.where(right_2d, in0_elems / k, np.maximum(in0[:, 2], 1.0))
    b = np.where(right_2d, 1.0, np.maximum(out_elems / np.maximum(m * n, 1.0), 1.0))
    # convolutions: NCHW x OIHW -> implicit GEMM
    batch, cin, hin = in0[:, 0], in0[:, 1], in0[:, 2]
    cout, hout = in1[:, 0], out0[:, 2]
    conv_m = batch * out0[:, 2] * out0[:, 3]
    conv_k = in1[:, 1] * in1[:, 2] * in1[:, 3]
    is_conv = conv
    b = np.where(is_conv, 1.0, b)
    m = np.where(is_conv, conv_m, m)
    n = np.where(is_conv, cout, n)
    k = np.where(is_conv, conv_k, k)
    cols = np.maximum(in0[:, 3], 1.0)
    out = pd.DataFrame({
        "family": family, "kind": kind, "via": via,
        "b": b, "m": np.maximum(m, 1.0), "n": n, "k": k,
        "batch": np.where(is_conv, batch, 0.0), "cin": np.where(is_conv, cin, 0.0),
        "cout": np.where(is_conv, cout, 0.0), "hin": np.where(is_conv, hin, 0.0),
        "hout": np.where(is_conv, hout, 0.0), "kh": np.where(is_conv, kh, 0.0),
        "rows": out_elems / cols, "cols": cols, "elems": out_elems,
        "tensor_operand": (_col(X, "n_inputs") >= 2) & (np.prod(np.where(in1 > 0, in1, 1.0), axis=1) >= out_elems)
        & (in1.max(axis=1) > 0),
        "flops": _col(X, "flops"), "bytes": _col(X, "bytes"),
    }, index=X.index)
    # a conv priced as a GEMM: its FLOPs are the GEMM's (unchanged) and its bytes the conv's
    return out


def spec_roofline(ops: pd.DataFrame, spec: Mapping[str, float], *, flops_per_watt: float | None = None,
                  bandwidth_fraction: float = 1.0) -> np.ndarray:
    """``max(flops / P, bytes / (B x bandwidth_fraction))`` of each row on a GPU with
    published figures ``spec`` (seconds, no fixed cost): ``B`` its memory bandwidth,
    ``P`` its FP32 peak, or, with ``flops_per_watt``, the power-limited
    ``min(peak, flops_per_watt x tdp_w)`` (a 70 W T4 sustains half its peak)."""
    peak = float(spec["peak_flops"])
    if flops_per_watt is not None:
        peak = min(peak, flops_per_watt * float(spec["tdp_w"]))
    return np.maximum(ops["flops"].to_numpy(float) / peak,
                      ops["bytes"].to_numpy(float) / (float(spec["mem_bandwidth_bytes_per_s"]) * bandwidth_fraction))


def _log2(v: np.ndarray) -> np.ndarray:
    return np.log2(np.maximum(v, 1.0))


def _pow2(v: np.ndarray, cap: int = 7) -> np.ndarray:
    """How many low bits of each (whole) value are 0, up to ``cap``."""
    iv = np.maximum(v, 1).astype(np.int64)
    return np.minimum(np.log2((iv & -iv).astype(float)), cap)


def design(ops: pd.DataFrame, family: str, spec: Mapping[str, float] | None = None,
           *, with_spec: bool = False) -> tuple[np.ndarray, list[str]]:
    """The input matrix of ``family`` rows of :func:`gpu_ops` and its column names.

    ``spec`` (the GPU's :data:`SPEC_KEYS`) gives the SM count that sets the wave
    counts of GEMM tiles; ``with_spec`` adds the figures themselves and ratios of
    the op to them (bytes / L2, work per SM...), the inputs of the cross-GPU model.
    """
    sms = float(spec["sm_count"]) if spec and spec.get("sm_count") else 80.0
    fl, by = ops["flops"].to_numpy(float), ops["bytes"].to_numpy(float)
    cols: dict[str, np.ndarray] = {"log_flops": _log2(fl), "log_bytes": _log2(by),
                                   "log_intensity": _log2(fl + 1.0) - _log2(by + 1.0)}
    if family in ("gemm", "conv"):
        b, m, n, k = (ops[c].to_numpy(float) for c in ("b", "m", "n", "k"))
        cols.update({"log_b": _log2(b), "log_m": _log2(m), "log_n": _log2(n), "log_k": _log2(k),
                     "align_m": _pow2(m), "align_n": _pow2(n), "align_k": _pow2(k)})
        best = np.full(len(ops), np.inf)
        for tm, tn in _TILES:
            tiles = b * np.ceil(m / tm) * np.ceil(n / tn)
            waves = tiles / sms
            pad = np.ceil(m / tm) * tm * np.ceil(n / tn) * tn / np.maximum(m * n, 1.0)
            quant = np.ceil(waves) / np.maximum(waves, 1e-9) * pad
            cols[f"log_waves_{tm}x{tn}"] = np.log2(np.maximum(waves, 1e-3))
            cols[f"quant_{tm}x{tn}"] = quant
            best = np.minimum(best, quant)
        cols["quant_best"] = best
    if family == "conv":
        batch, cin, cout = (ops[c].to_numpy(float) for c in ("batch", "cin", "cout"))
        hin, hout = ops["hin"].to_numpy(float), ops["hout"].to_numpy(float)
        wino = batch * np.ceil(hout / _WINOGRAD_TILE) ** 2
        cols.update({"log_batch": _log2(batch), "log_cin": _log2(cin), "log_cout": _log2(cout),
                     "log_hin": _log2(hin), "log_hout": _log2(hout), "log_wino_tiles": _log2(wino),
                     "wino_pad": np.ceil(hout / _WINOGRAD_TILE) * _WINOGRAD_TILE / np.maximum(hout, 1.0),
                     "align_cin": _pow2(cin), "align_cout": _pow2(cout)})
    if family in ("norm", "softmax"):
        rows, c = ops["rows"].to_numpy(float), ops["cols"].to_numpy(float)
        cols.update({"log_rows": _log2(rows), "log_cols": _log2(c), "align_cols": _pow2(c),
                     "log_rows_per_sm": np.log2(np.maximum(rows / sms, 1e-3))})
    if family == "elementwise":
        elems = ops["elems"].to_numpy(float)
        kinds = ops["kind"].to_numpy()
        cols.update({"log_elems": _log2(elems), "bytes_per_elem": by / np.maximum(elems, 1.0),
                     "tensor_operand": ops["tensor_operand"].to_numpy(float),
                     "log_elems_per_sm": np.log2(np.maximum(elems / sms, 1e-3))})
        for op in ELEMENTWISE_OPS_MEASURED:
            cols[f"op={op}"] = (kinds == op).astype(float)
    if with_spec:
        if spec is None:
            raise ValueError("design(with_spec=True) needs the GPU's spec")
        peak, bw = float(spec["peak_flops"]), float(spec["mem_bandwidth_bytes_per_s"])
        l2 = float(spec["l2_bytes"])
        cols.update({"log_sm_count": np.full(len(ops), np.log2(sms)),
                     "clock_ghz": np.full(len(ops), float(spec["clock_hz"]) / 1e9),
                     "log_peak": np.full(len(ops), np.log2(peak)),
                     "log_bandwidth": np.full(len(ops), np.log2(bw)),
                     "log_l2": np.full(len(ops), np.log2(l2)),
                     "log_ridge": np.full(len(ops), np.log2(peak / bw)),
                     "flops_per_core_cycle": np.full(len(ops), peak / sms / float(spec["clock_hz"])),
                     "log_tdp": np.full(len(ops), np.log2(float(spec["tdp_w"]))),
                     "log_flops_per_watt": np.full(len(ops), np.log2(peak / float(spec["tdp_w"]))),
                     "log_bytes_over_l2": np.log2(np.maximum(by, 1.0) / l2),
                     "log_compute_s": np.log2(np.maximum(fl, 1.0) / peak),
                     "log_memory_s": np.log2(np.maximum(by, 1.0) / bw)})
    names = list(cols)
    return np.column_stack([cols[c] for c in names]), names
