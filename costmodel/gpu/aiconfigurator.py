"""GPU kernel times measured by NVIDIA's AIConfigurator, as a cost model for LLM graphs.

The tables (ai-dynamo/aiconfigurator, ``aic-core/src/aiconfigurator_core/systems/``,
Apache License 2.0, collected with vLLM) hold GPU kernel latencies of bf16 GEMMs
and of FlashAttention prefill and decode on H100, H200, A100 and L40S. :func:`convert`
keeps the rows an LLM's placement needs (bf16 GEMMs of ``torch.nn.functional.linear``;
bf16 attention with a bf16 KV cache and no sliding window; the median of duplicate
keys) and writes them compactly under ``costmodel/data/aiconfigurator/<gpu>/`` with
the licence and a notice that they were changed.

:class:`AIConfiguratorCostModel` prices, on GPU devices:

* ``matmul`` nodes from the GEMM table, interpolated in ``log(m), log(n), log(k)``
  (beyond the table's largest ``m``, ``n`` or ``k``, linearly in that size); a
  mixture-of-experts expert (``expert`` attribute) at its expectation, the GEMM of
  the rows it gets when it gets any times the chance that it does; weights stored
  narrower than bf16 (``meta["llm"]["weights"]``) scale a memory-bound GEMM (``m``
  below the GPU's ridge point) by its bytes at that width over its bytes at bf16;
* ``attention`` nodes of LLM graphs (``meta["llm"]``) from the decode
  (``generation_attention``) or prefill (``context_attention``) table of their head
  counts and head size, interpolated in ``log(batch)`` and ``log(tokens)``;

plus the device's launch overhead; every other op, every CPU op, transfers and
dispatch by the ``fallback`` model (the analytic roofline by default): stated, not
measured.

>>> from hetsim.costmodel.gpu.aiconfigurator import AIConfiguratorCostModel
>>> m = AIConfiguratorCostModel("h100_sxm")
>>> round(m.gemm_time(1, 4096, 4096) * 1e6, 1)   # one token through a 4096 x 4096 bf16 projection, us
15.0
"""

from __future__ import annotations

import bisect
import csv
import gzip
import json
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.base import CostModelBase, CostModelError, host_dispatch
from hetsim.costmodel.roofline import Roofline
from hetsim.graphs.llm.config import weight_format

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device, Link
    from hetsim.graphs.graph import Graph

__all__ = ["AIConfiguratorCostModel", "DATA", "GPUS", "GridTable", "convert"]

#: converted tables shipped with hetsim
DATA = Path(__file__).parent.parent / "data" / "aiconfigurator"
#: GPUs of the AIConfigurator tables
GPUS = ("h100_sxm", "h200_sxm", "a100_sxm", "l40s")
_ATTN_KEYS = ("batch", "tokens", "heads", "kv_heads", "head_dim")
NOTICE = """Derived from the kernel latency tables of NVIDIA AIConfigurator
(https://github.com/ai-dynamo/aiconfigurator, aic-core/src/aiconfigurator_core/systems/),
Copyright (c) 2025-2026 NVIDIA CORPORATION & AFFILIATES, licensed under the Apache
License 2.0 (LICENSE). Changed by hetsim (costmodel/gpu/aiconfigurator.py, convert): only
the bf16 GEMM rows and the bf16 attention rows with a bf16 KV cache and no sliding
window are kept, duplicate keys reduced to their median, columns renamed, latency in
milliseconds.
"""


# ------------------------------------------------------------------ conversion
def convert(source: str | Path, out: str | Path = DATA, gpus: Sequence[str] = GPUS) -> list[Path]:
    """Convert AIConfigurator's parquet tables (``source/<gpu>/``) into hetsim's compact form.

    Writes ``out/<gpu>/gemm.csv.gz`` (``m, n, k, latency_ms``),
    ``generation_attention.csv.gz`` and ``context_attention.csv.gz`` (``batch, tokens,
    heads, kv_heads, head_dim, latency_ms``; ``tokens`` the KV length of a decode step
    or the prompt of a prefill), ``system.json`` (bandwidth, bf16 peak, memory), and
    ``LICENSE`` and ``NOTICE`` in ``out``. Needs pandas and pyarrow.
    """
    import pandas as pd

    source, out = Path(source), Path(out)
    written: list[Path] = []
    for gpu in gpus:
        src = source / gpu
        if not src.is_dir():
            raise CostModelError(f"{src}: no AIConfigurator tables for GPU {gpu!r}")
        dst = out / gpu
        dst.mkdir(parents=True, exist_ok=True)
        g = pd.read_parquet(src / "gemm_perf.parquet")
        # bf16 GEMMs: torch's linear (vLLM 0.24 tables), vLLM's default kernel (A100's 0.14 tables)
        g = g[(g.gemm_dtype == "bfloat16") & g.kernel_source.isin(["torch.nn.functional.linear", "vllm_default"])]
        g = g.groupby(["m", "n", "k"], as_index=False)["latency"].median()
        written.append(_write(dst / "gemm.csv.gz", ["m", "n", "k", "latency_ms"], g.to_numpy()))
        for name, tokens in (("generation_attention", "isl + step"), ("context_attention", "isl")):
            a = pd.read_parquet(src / f"{name}_perf.parquet")
            full = a.window_size == 0 if "window_size" in a else True  # A100's tables have no windows
            a = a[(a.attn_dtype == "bfloat16") & (a.kv_cache_dtype == "bfloat16") & full & (a.beam_width == 1)].copy()
            a["tokens"] = a.eval(tokens)
            a = a.groupby(["batch_size", "tokens", "num_heads", "num_key_value_heads", "head_dim"],
                          as_index=False)["latency"].median()
            written.append(_write(dst / f"{name}.csv.gz", [*_ATTN_KEYS, "latency_ms"], a.to_numpy()))
        import yaml  # noqa: PLC0415 - only the converter reads YAML

        sysd = yaml.safe_load((src / "system.yaml").read_text())["gpu"]
        info = {"mem_bandwidth_bytes_per_s": sysd["mem_bw"], "bf16_flops": sysd["bfloat16_tc_flops"],
                "memory_bytes": sysd["mem_capacity"]}
        (dst / "system.json").write_text(json.dumps(info, indent=1) + "\n")
        written.append(dst / "system.json")
    shutil.copyfile(source / "LICENSE", out / "LICENSE")
    (out / "NOTICE").write_text(NOTICE)
    return written + [out / "LICENSE", out / "NOTICE"]


def _write(path: Path, header: list[str], rows: np.ndarray) -> Path:
    with gzip.open(path, "wt", newline="", compresslevel=9) as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([int(v) for v in r[:-1]] + [f"{float(r[-1]):.6g}"])
    return path


def _read(path: Path, header: list[str]) -> tuple[list[str], np.ndarray]:
    """A converted table whose columns are ``header``; any other format is an error
    naming the file and the column (or the row and column of a cell that is no number)."""
    if not path.is_file():
        raise CostModelError(f"{path}: no such AIConfigurator table (convert it with costmodel.gpu.aiconfigurator.convert)")
    try:
        with gzip.open(path, "rt", newline="") as fh:
            rows = list(csv.reader(fh))
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as e:
        raise CostModelError(f"{path}: not a gzip CSV table ({type(e).__name__}: {e})") from None
    got = rows[0] if rows else []
    if got != header:
        wrong = next((f"column {i + 1} is {c!r}, expected {h!r}" for i, (c, h) in enumerate(zip(got, header))
                      if c != h), f"columns {got}, expected {header}")
        raise CostModelError(f"{path}: unknown table format: {wrong}")
    for i, row in enumerate(rows[1:], start=2):
        for name, cell in zip(header, row):
            try:
                float(cell)
            except ValueError:
                raise CostModelError(f"{path}: row {i}, column {name!r}: {cell!r} is not a number") from None
        if len(row) != len(header):
            raise CostModelError(f"{path}: row {i} has {len(row)} cells, the columns are {header}")
    return got, np.array(rows[1:], dtype=float).reshape(-1, len(header))


# --------------------------------------------------------------- interpolation
class GridTable:
    """Latencies on a grid of keys, interpolated in log space.

    Parameters
    ----------
    keys
        ``(rows, d)`` key values (positive).
    latency_s
        ``(rows,)`` latencies in seconds.

    A missing grid cell is filled from its nearest filled neighbour along the last
    axis, scaled in proportion to the key (work grows linearly in each size). A
    query outside the grid is clamped to it and scaled linearly in each size beyond
    the largest.
    """

    def __init__(self, keys: np.ndarray, latency_s: np.ndarray) -> None:
        if len(keys) == 0:
            raise CostModelError("AIConfigurator table: no rows")
        self.axes = [np.unique(keys[:, j]) for j in range(keys.shape[1])]
        grid = np.full([len(a) for a in self.axes], np.nan)
        idx = tuple(np.searchsorted(a, keys[:, j]) for j, a in enumerate(self.axes))
        grid[idx] = latency_s
        self.grid = np.log(_fill(grid, self.axes[-1]))
        self.log_axes = [np.log(a) for a in self.axes]

    def __call__(self, *point: float) -> float:
        scale, corners = 1.0, []
        for x, a, la in zip(point, self.axes, self.log_axes, strict=True):
            x = float(x)
            if x > a[-1]:
                scale *= x / a[-1]
                x = a[-1]
            lx = math.log(max(x, a[0]))
            i = min(max(bisect.bisect_right(la.tolist(), lx) - 1, 0), len(a) - 2) if len(a) > 1 else 0
            t = 0.0 if len(a) == 1 else (lx - la[i]) / (la[i + 1] - la[i])
            corners.append((i, min(max(t, 0.0), 1.0), len(a) > 1))
        value = 0.0
        for bits in range(1 << len(corners)):
            w, ix = 1.0, []
            for j, (i, t, two) in enumerate(corners):
                hi = (bits >> j) & 1
                if hi and not two:
                    w = 0.0
                    break
                w *= t if hi else 1.0 - t
                ix.append(i + hi)
            if w:
                value += w * self.grid[tuple(ix)]
        return float(np.exp(value) * scale)


def _fill(grid: np.ndarray, last_axis: np.ndarray) -> np.ndarray:
    """NaN cells from the nearest filled cell along the last axis, scaled by the key ratio."""
    flat = grid.reshape(-1, grid.shape[-1])
    for row in flat:
        have = np.flatnonzero(~np.isnan(row))
        if len(have) == 0:
            continue
        for j in np.flatnonzero(np.isnan(row)):
            near = have[np.argmin(np.abs(np.log(last_axis[have]) - np.log(last_axis[j])))]
            row[j] = row[near] * last_axis[j] / last_axis[near]
    if np.isnan(flat).any():  # whole rows missing: from the nearest filled row of the same shape
        filled = ~np.isnan(flat).any(axis=1)
        for r in np.flatnonzero(~filled):
            flat[r] = flat[np.flatnonzero(filled)[np.argmin(np.abs(np.flatnonzero(filled) - r))]]
    return flat.reshape(grid.shape)


# ---------------------------------------------------------------- cost model
class AIConfiguratorCostModel(CostModelBase):
    """GPU GEMM and attention times from AIConfigurator's tables; the rest by ``fallback``.

    Parameters
    ----------
    gpu
        One of :data:`GPUS` (every GPU device of the platform is priced as this GPU).
    fallback
        The cost model of everything the tables do not cover (default: :class:`Roofline`).
    data
        Folder of converted tables (default: those shipped, :data:`DATA`).
    """

    def __init__(self, gpu: str = "h100_sxm", *, fallback: Any = None, data: str | Path | None = None) -> None:
        if gpu not in GPUS:
            raise CostModelError(f"unknown AIConfigurator GPU {gpu!r}; known: {', '.join(GPUS)}")
        if fallback is None:
            fallback = Roofline()
        self.gpu, self.fallback = gpu, fallback
        folder = Path(data) if data is not None else DATA / gpu
        _, g = _read(folder / "gemm.csv.gz", ["m", "n", "k", "latency_ms"])
        self.gemm = GridTable(g[:, :3], g[:, 3] * 1e-3)
        self.attention: dict[str, dict[tuple[int, int, int], GridTable]] = {}
        for name in ("generation_attention", "context_attention"):
            _, a = _read(folder / f"{name}.csv.gz", [*_ATTN_KEYS, "latency_ms"])
            tables: dict[tuple[int, int, int], GridTable] = {}
            for key in {tuple(int(v) for v in r[2:5]) for r in a}:
                rows = a[(a[:, 2] == key[0]) & (a[:, 3] == key[1]) & (a[:, 4] == key[2])]
                tables[key] = GridTable(rows[:, :2], rows[:, 5] * 1e-3)
            self.attention[name] = tables
        self.system = json.loads((folder / "system.json").read_text())

    def __repr__(self) -> str:
        return f"AIConfiguratorCostModel({self.gpu!r}, fallback={self.fallback!r})"

    # ------------------------------------------------------------ kernels
    def gemm_time(self, m: float, n: float, k: float) -> float:
        """Seconds of a bf16 ``(m x k) @ (k x n)`` GEMM on this GPU (kernel only)."""
        return self.gemm(max(m, 1.0), n, k)

    def attention_time(self, phase: str, batch: int, tokens: int, heads: int, kv_heads: int,
                       head_dim: int) -> float | None:
        """Seconds of a decode step (``tokens``: KV length) or a prefill (``tokens``:
        prompt) of FlashAttention; None when the table has no such head shape."""
        table = self.attention["generation_attention" if phase == "decode" else "context_attention"]
        t = table.get((heads, kv_heads, head_dim))
        return None if t is None else t(batch, tokens)

    # --------------------------------------------------------- protocol
    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        """Kernel time from the tables for GEMMs and attention on a GPU, else ``fallback``."""
        if device.kind == "gpu":
            t = self._table_time(graph, node)
            if t is not None:
                return t + device.launch_overhead_s
        return self.fallback.op_time(graph, node, device)

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return self.fallback.transfer_time(nbytes, link)

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return host_dispatch(self.fallback, graph, node, device)

    def _table_time(self, graph: Graph, node: str) -> float | None:
        d = graph.nx.nodes[node]
        llm = graph.meta.get("llm") or {}
        if d["op"] == "matmul" and d["outputs"]:
            shape = d["outputs"][0]["shape"]
            n = float(d["attrs"].get("n", shape[-1]))
            k = d["attrs"].get("k")
            rows = float(d["flops"]) / (2.0 * n * k) if k else float(np.prod(shape[:-1]))
            k = float(k) if k else float(d["flops"]) / (2.0 * max(rows, 1.0) * n)
            if rows <= 0 or k <= 0:
                return None
            p = float(llm.get("expert_read_fraction", 1.0)) if "moe_block" in d else 1.0
            groups = float(d["attrs"].get("groups", 1))  # routed experts: one product per expert used
            m = rows / groups / p
            t = groups * p * self.gemm_time(m, n, k)
            wb = _weight_bytes(llm.get("weights"))
            ridge = self.system["bf16_flops"] / self.system["mem_bandwidth_bytes_per_s"]
            if wb < 2.0 and m < ridge:
                act = 2.0 * m * (n + k)
                t *= (act + wb * n * k) / (act + 2.0 * n * k)
            return t
        if d["op"] == "attention" and "config" in llm:
            c = llm["config"]
            return self.attention_time(llm["phase"], int(llm["batch"]),
                                       int(llm["kv_length"] if llm["phase"] == "decode" else llm["tokens"]),
                                       int(c["heads"]), int(c["kv_heads"]), int(c["hidden"] // c["heads"]))
        return None


def _weight_bytes(fmt: str | None) -> float:
    if not fmt:
        return 2.0

    return weight_format(fmt).bytes_per_weight
