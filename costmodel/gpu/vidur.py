"""LLM layer kernels measured by Microsoft's Vidur on A100, H100 and A40 GPUs.

Vidur's profiles (microsoft/vidur, ``data/profiling/compute/<gpu>/<org>/<model>/mlp.csv``,
MIT License) hold the device time (the CUDA kernels under a profiler's record
function, FP16) of each operator of one transformer layer of seven LLMs (Llama-2 7B
and 70B, Llama-3 8B and 70B, CodeLlama-34B, InternLM-20B, Qwen-72B, Phi-2) at 1 to
4096 tokens (up to 16384 for Llama-3) and 1 to 8 tensor-parallel workers. The
repository's ``attention.csv`` tables are not part of the stored snapshot this
converter read, so only the layer's non-attention kernels are here.

:func:`convert` keeps each row's layer shape and the median time of each operator
and writes ``costmodel/data/vidur/<gpu>.csv.gz`` with the licence and a notice.
:func:`vidur_kernels` turns a GPU's rows into kernel rows of the kernel model's
families (:mod:`costmodel.gpu.kernel`):

==================  ==========  ============================================================
operator            family      shape (``T`` tokens, ``H`` hidden, ``I`` MLP width, ``P`` workers)
==================  ==========  ============================================================
``attn_pre_proj``   gemm        ``T x H`` by ``H x (heads + 2 kv heads) x head_dim / P``
``attn_post_proj``  gemm        ``T x heads x head_dim / P`` by ``... x H``
``mlp_up_proj``     gemm        ``T x H`` by ``H x (2 if gated) I / P``
``mlp_down_proj``   gemm        ``T x I / P`` by ``I / P x H``
``*_layernorm``     norm        ``T`` rows of ``H`` (RMSNorm; Phi-2's LayerNorm)
``attn_rope``       elementwise rotary embedding of the ``T x (heads + kv heads) / P`` heads
``mlp_act``         elementwise SiLU-and-multiply (gated) or GELU of ``T x I / P``
``add``             elementwise the residual add of ``T x H`` (one kernel: not Phi-2's three-way add)
==================  ==========  ============================================================

The GPUs are named as hetsim's presets name them (:data:`GPUS`): Vidur's ``a100``
is an A100 80GB (``a100-80gb``, preset ``a100-server``), its ``h100`` an H100 SXM
(``h100``, preset ``h100-server``); the A40, which no preset describes, has its
spec sheet in ``costmodel/data/vidur/gpus.json``.
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.kernel import KernelGPU
from hetsim.costmodel.gpu.kernel_fit import KernelSet
from hetsim.costmodel.platform import Platform

__all__ = ["DATA", "FUSED", "LAYER_COLUMNS", "OPS", "VidurGPU", "convert", "read_vidur", "vidur_gpus", "vidur_kernels", "vidur_sets"]

#: converted tables shipped with hetsim
DATA = Path(__file__).parent.parent / "data" / "vidur"
#: the layer shape columns of a converted table (``model`` first)
LAYER_COLUMNS = ("model", "n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp", "num_tokens",
                 "num_tensor_parallel_workers")
#: the operators kept (median device time, ms), and their kernel family
OPS = {"input_layernorm": "norm", "post_attention_layernorm": "norm", "attn_pre_proj": "gemm",
       "attn_rope": "elementwise", "attn_post_proj": "gemm", "mlp_up_proj": "gemm", "mlp_act": "elementwise",
       "mlp_down_proj": "gemm", "add": "elementwise"}
#: operators that are one fused kernel of several element-wise steps (kind ``fused``)
FUSED = ("attn_rope", "mlp_act")
#: FLOPs per output element of the element-wise operators
_ELEM_FLOPS = {"attn_rope": 4.0, "mlp_act": 8.0, "add": 1.0}
NOTICE = """Derived from the operator profiles of Vidur
(https://github.com/microsoft/vidur, data/profiling/compute/<gpu>/<org>/<model>/mlp.csv),
Copyright (c) Microsoft Corporation, licensed under the MIT License (LICENSE).
Changed by hetsim (costmodel/gpu/vidur.py, convert): one file per GPU, the model named
in a column, only the layer shape columns and the median time (ms) of each operator kept.
"""


# ------------------------------------------------------------------ conversion
def convert(source: str | Path, out: str | Path = DATA) -> list[Path]:
    """Convert Vidur's ``mlp.csv`` profiles (``source``: a checkout of the repository,
    or its ``data/profiling/compute`` folder) into ``out/<gpu>.csv.gz`` (the
    :data:`LAYER_COLUMNS` and one column per :data:`OPS` operator, ms; empty where a
    model has no such operator), with ``LICENSE`` and ``NOTICE`` in ``out``."""
    source, out = Path(source), Path(out)
    compute = source / "data" / "profiling" / "compute" if (source / "data").is_dir() else source
    licence = next((p for p in (source / "LICENSE", compute.parents[2] / "LICENSE") if p.is_file()), None)
    if not compute.is_dir() or licence is None:
        raise CostModelError(f"{source}: not a Vidur checkout (needs data/profiling/compute/ and LICENSE)")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for gpu_dir in sorted(p for p in compute.iterdir() if p.is_dir()):
        frames = []
        for f in sorted(gpu_dir.glob("*/*/mlp.csv")):
            raw = pd.read_csv(f)
            shape = [c for c in LAYER_COLUMNS[1:] if c not in raw]
            if shape:
                raise CostModelError(f"{f}: no column {shape[0]!r} (a Vidur mlp.csv has {', '.join(LAYER_COLUMNS[1:])})")
            keep = raw[list(LAYER_COLUMNS[1:])].copy()
            keep.insert(0, "model", f"{f.parent.parent.name}/{f.parent.name}")
            for op in OPS:
                col = f"time_stats.{op}.median"
                keep[op] = raw[col] if col in raw else np.nan
            frames.append(keep)
        if not frames:
            continue
        table = pd.concat(frames, ignore_index=True)
        path = out / f"{gpu_dir.name}.csv.gz"
        with gzip.open(path, "wt", newline="", compresslevel=9) as fh:
            w = csv.writer(fh)
            w.writerow([*LAYER_COLUMNS, *OPS])
            for r in table.itertuples(index=False):
                w.writerow([r[0], *(int(v) for v in r[1:5]), bool(r[5]), int(r[6]), int(r[7]),
                            *("" if pd.isna(v) else f"{float(v):.6g}" for v in r[8:])])
        written.append(path)
    if not written:
        raise CostModelError(f"{compute}: no <gpu>/<org>/<model>/mlp.csv profiles")
    shutil.copyfile(licence, out / "LICENSE")
    (out / "NOTICE").write_text(NOTICE)
    return written + [out / "LICENSE", out / "NOTICE"]


def read_vidur(gpu: str, data: str | Path = DATA) -> pd.DataFrame:
    """The converted table of Vidur GPU ``gpu`` (``a100``, ``h100``, ``a40``); a file
    without a column :func:`convert` writes, or with a value that is not a positive
    number, is a :class:`CostModelError` naming the file and the column."""
    path = Path(data) / f"{gpu}.csv.gz"
    if not path.is_file():
        known = sorted(p.name.split(".")[0] for p in Path(data).glob("*.csv.gz"))
        raise CostModelError(f"no Vidur table for GPU {gpu!r} in {data} (known: {known})")
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError, EOFError) as e:
        raise CostModelError(f"{path}: not a readable CSV ({e})") from None
    for col in (*LAYER_COLUMNS, *OPS):
        if col not in table:
            raise CostModelError(f"{path}: no column {col!r} (a converted Vidur table has "
                                 f"{', '.join((*LAYER_COLUMNS, *OPS))})")
    for col in (*LAYER_COLUMNS[1:5], *LAYER_COLUMNS[6:], *OPS):
        v = pd.to_numeric(table[col], errors="coerce")
        bad = ~(v > 0) & ~(table[col].isna() if col in OPS else False)
        if bad.any():
            raise CostModelError(f"{path}: column {col!r} row {int(np.flatnonzero(bad)[0]) + 2}: "
                                 f"{table[col].iloc[int(np.flatnonzero(bad)[0])]!r} is not a positive number")
        table[col] = v
    return table


def vidur_kernels(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, np.ndarray]:
    """Kernel rows of a :func:`read_vidur` table: ``(rows, ops, times_s)`` with ``rows``
    naming each (``source_op``: ``vidur:<operator>``, ``signature``: model, tokens,
    workers; ``split``: ``all``), ``ops`` the kernel model's columns
    (``family, kind, via, b, m, n, k, rows, cols, elems, flops, bytes``; FP16 tensors;
    ``kind`` ``fused`` for :data:`FUSED`), ``times_s`` the
    measured device times."""
    T = table["num_tokens"].to_numpy(float)
    H = table["n_embd"].to_numpy(float)
    P = table["num_tensor_parallel_workers"].to_numpy(float)
    heads, kv = table["n_head"].to_numpy(float), table["n_kv_head"].to_numpy(float)
    hd = H / heads
    gated = table["use_gated_mlp"].astype(str).str.lower().isin(["true", "1"]).to_numpy()
    width = table["n_expanded_embd"].to_numpy(float) / P
    # Phi-2's layer (no post-attention norm) adds three tensors in two kernels: left out
    three_way = table["post_attention_layernorm"].isna().to_numpy()
    gemm_dims = {"attn_pre_proj": (H, (heads + 2 * kv) * hd / P), "attn_post_proj": (heads * hd / P, H),
                 "mlp_up_proj": (H, np.where(gated, 2.0, 1.0) * width), "mlp_down_proj": (width, H)}
    elems = {"attn_rope": T * (heads + kv) * hd / P, "mlp_act": T * width, "add": T * H}
    elem_bytes = {"attn_rope": 2.0 * 2.0 * elems["attn_rope"] + 8.0 * T,
                  "mlp_act": 2.0 * np.where(gated, 3.0, 2.0) * elems["mlp_act"], "add": 2.0 * 3.0 * elems["add"]}
    frames = []
    for op, family in OPS.items():
        t = table[op].to_numpy(float) * 1e-3
        keep = np.isfinite(t) & (t > 0) & ~((op == "add") & three_way)
        zeros = np.zeros(len(table))
        if family == "gemm":
            k, n = gemm_dims[op]
            m = T
            flops, nbytes = 2.0 * m * n * k, 2.0 * (m * k + k * n + m * n)
        elif family == "norm":
            m, n, k = T, H, zeros + 1.0
            flops, nbytes = 5.0 * T * H, 2.0 * (2.0 * T * H + H)
        else:
            m, n, k = elems[op], zeros + 1.0, zeros + 1.0
            flops, nbytes = _ELEM_FLOPS[op] * elems[op], elem_bytes[op]
        kind = "fused" if op in FUSED else "layer_norm" if family == "norm" else "matmul" if family == "gemm" else "add"
        ops = pd.DataFrame({"family": family, "kind": kind, "via": "own", "b": 1.0, "m": m, "n": n, "k": k,
                            "rows": m if family == "norm" else zeros, "cols": n if family == "norm" else zeros,
                            "elems": m * n if family != "gemm" else zeros, "flops": flops, "bytes": nbytes})
        sig = (table["model"].astype(str) + f" {op} tokens=" + table["num_tokens"].astype(int).astype(str)
               + " tp=" + table["num_tensor_parallel_workers"].astype(int).astype(str))
        rows = pd.DataFrame({"source_op": f"vidur:{op}", "signature": sig, "split": "all"})
        frames.append((rows[keep], ops[keep], t[keep]))
    rows = pd.concat([f[0] for f in frames], ignore_index=True)
    ops = pd.concat([f[1] for f in frames], ignore_index=True)
    return rows, ops, np.concatenate([f[2] for f in frames])


@dataclass(frozen=True)
class VidurGPU:
    """A Vidur GPU as hetsim names it: ``gpu`` (a preset's profile name, e.g.
    ``a100-80gb``), its spec sheet and its per-launch floor (the device's
    ``launch_overhead_s``)."""

    vidur: str
    gpu: str
    spec: KernelGPU
    launch_s: float


def vidur_gpus(data: str | Path = DATA) -> dict[str, VidurGPU]:
    """Vidur's GPUs (``gpus.json``): each either a preset's GPU (``preset``) or a spec
    sheet of its own (``spec``, ``tensor_flops``, ``launch_overhead_s``)."""
    path = Path(data) / "gpus.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CostModelError(f"{path}: cannot read Vidur's GPU table ({e})") from None
    out = {}
    for vidur, entry in doc.get("gpus", {}).items():
        if "preset" in entry:
            device = Platform.preset(entry["preset"]).device("gpu")
            out[vidur] = VidurGPU(vidur, entry["gpu"], KernelGPU.from_device(device), device.launch_overhead_s)
        elif "spec" in entry:
            spec = KernelGPU.from_spec(entry["gpu"], entry["spec"], tensor_flops=entry.get("tensor_flops"))
            out[vidur] = VidurGPU(vidur, entry["gpu"], spec, float(entry.get("launch_overhead_s", 4e-6)))
        else:
            raise CostModelError(f"{path}: GPU {vidur!r} has neither 'preset' nor 'spec'")
    return out


def vidur_sets(data: str | Path = DATA) -> list[KernelSet]:
    """One :class:`~costmodel.gpu.kernel_fit.KernelSet` per Vidur GPU: FP16 device
    times, no host floor; the per-launch floor is the kernel model's own
    ``launch_floor_s`` (these device times are what it is fitted on)."""
    out = []
    for vidur, gpu in vidur_gpus(data).items():
        rows, ops, t = vidur_kernels(read_vidur(vidur, data))
        out.append(KernelSet("vidur", gpu.gpu, gpu.spec, rows, ops, t, np.full(len(t), "float16", dtype=object),
                             floor_s=0.0))
    return out
