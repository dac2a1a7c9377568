"""A GPU kernel's time from the GPU's physics, for a GPU that nobody measured.

Each GPU is described by its spec sheet (:class:`KernelGPU`: SMs, peak FLOP/s per
math mode, DRAM bandwidth, L2, board power); a handful of constants
(:class:`KernelConstants`), the same for every GPU, are fitted on the public kernel
measurements (the NeuSight profiles of eight GPUs, Vidur's LLM layer kernels of
three: :mod:`costmodel.gpu.kernel_fit`). A kernel's device time is::

    t = launch_floor_s + max(t_compute, t_memory)

* ``launch_floor_s``: what the smallest kernel costs (a few microseconds: the
  grid's launch, its blocks' start, the write-back).
* GEMMs and convolutions (as the implicit GEMM cuDNN runs) compute in output tiles,
  one thread block each: ``tiles = b x ceil(m / TM) x ceil(n / TN)`` spread over the
  SMs in ``waves = ceil(tiles / SMs)``. A grid smaller than one wave is split along
  ``k`` to fill the idle SMs (split-K), down to a sub-wave floor of ``subwave`` of a
  wave. A tile's time is ``2 TM TN (k + tile_overhead_k)`` FLOPs (each wave also
  fills and drains the tiles' pipeline) at the SM's sustained rate, the GPU's
  peak of the math mode times its efficiency (``compute_efficiency`` on the CUDA
  cores, ``tensor_efficiency`` in FP16/BF16/FP8; in TF32, the FP32 rate times
  ``tf32_speedup``, at most the TF32 peak: the only TF32 kernels measured, the
  NeuSight A100's convolutions, run at about the FP32 rate; ``tile_efficiency`` for
  the 64-wide tiles of small problems), on the CUDA cores capped by the board power
  (:meth:`KernelGPU.power_cap`: a 70 W T4 sustains half its FP32 peak): the board's
  power less what it draws whatever it runs (``board_power_w``), a GPU whose spec
  sheet rates more FLOP per watt (a newer process) sustaining more per watt, as that
  rating to the power ``watt_exponent``. The
  tile shape is the fastest of :data:`TILES`, as cuBLAS's heuristics pick.
* The math mode is PyTorch's (:mod:`costmodel.math_mode`): FP32 convolutions in
  TF32 on a GPU with TF32 tensor cores (cuDNN's default), FP32 matmuls in FP32
  unless ``matmul_precision`` says otherwise, FP16/BF16 on tensor cores; a GPU that
  lacks the mode an op needs (BF16 on a T4) is an error, not a silent FP32.
* ``t_memory``: the bytes the kernel moves at the achieved DRAM bandwidth
  (``dram_fraction`` of the published one); a kernel whose bytes fit in half the L2
  runs from the L2, ``l2_speedup`` times faster. Row kernels (layer norm, softmax)
  and fused element-wise kernels (rotary embedding, SiLU-and-multiply) keep fewer
  bytes in flight per SM than a plain element-wise kernel: they move at most
  ``row_bytes_per_cycle`` (``fused_bytes_per_cycle``) bytes per SM and clock cycle,
  which binds on the GPUs whose DRAM is fast for their SMs (A100, H100: about 0.35-0.6
  of DRAM) and not on the others (T4, L4, A40).
* cuDNN runs an FP32 3x3 stride-1 convolution as the implicit GEMM or as Winograd
  F(4x4, 3x3), whichever is faster: the input and output transformed in 6 x 6 tiles
  (a kernel each, their bytes written and read once), then 36 batched GEMMs of
  (tiles x channels in) by (channels in x channels out), a quarter of the implicit
  GEMM's multiplications, on the CUDA cores at ``winograd_efficiency`` of their rate.
  Few channels leave the transforms' bytes to dominate: the implicit GEMM wins.

The time PyTorch reports for one call adds the host's launch path (the NeuSight
data: the smallest call of a GPU, 12-39 us, set by its host); the fit takes each
GPU's floor from its own smallest calls (the host's part), and ``launch_floor_s``
holds what the data set's calls pay above that floor (7 us: the events around each
call as well as the launch). The cost model (:mod:`costmodel.gpu.kernel_cost`)
charges the device's own ``launch_overhead_s`` (a few microseconds) as the floor
instead, the host's launch being the simulator's dispatch.

The fitted constants ship as ``costmodel/data/gpu-kernel.json``
(:func:`shipped_constants`); :func:`~costmodel.gpu.kernel_fit.fit_constants`
refits them in under a minute once the measurements are read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.math_mode import math_mode

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Device

__all__ = ["CONSTANTS_FILE", "KERNEL_FIELDS", "RATED_FLOPS_PER_WATT", "TILES", "KernelConstants", "KernelGPU", "kernel_times",
           "shipped_constants"]

#: the spec-sheet fields the kernel model prices a GPU from
KERNEL_FIELDS = ("sm_count", "clock_hz", "peak_flops", "mem_bandwidth_bytes_per_s", "l2_bytes", "tdp_w")
#: the FP32 peak per watt at which ``fp32_flops_per_watt`` is what a GPU sustains per watt
RATED_FLOPS_PER_WATT = 1e11
#: output tile shapes (rows x cols) of cuBLAS / cuDNN GEMM kernels; the last two are the
#: small tiles (``tile_efficiency``)
TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (64, 32))
_SMALL_TILES = {(64, 64), (64, 32)}
#: cuDNN's Winograd F(4x4, 3x3): output tiles of 4 x 4 points from input tiles of 6 x 6
WINOGRAD_TILE, WINOGRAD_ALPHA = 4, 6
#: the shipped constants, in ``costmodel/data``
CONSTANTS_FILE = "gpu-kernel.json"


@dataclass(frozen=True)
class KernelConstants:
    """The fitted constants of the kernel model (see the module docstring)."""

    compute_efficiency: float = 0.8
    tensor_efficiency: float = 0.6
    tf32_speedup: float = 1.0
    tile_efficiency: float = 0.7
    fp32_flops_per_watt: float = 6e10
    subwave: float = 0.3
    dram_fraction: float = 0.85
    l2_speedup: float = 2.0
    row_bytes_per_cycle: float = 5.0
    fused_bytes_per_cycle: float = 6.0
    winograd_efficiency: float = 0.8
    tile_overhead_k: float = 16.0
    board_power_w: float = 10.0
    launch_floor_s: float = 5e-6
    watt_exponent: float = 0.5

    def to_dict(self) -> dict[str, float]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, where: str = "kernel constants") -> KernelConstants:
        names = [f.name for f in fields(cls)]
        missing = [n for n in names if n not in data]
        unknown = sorted(set(data) - set(names))
        if missing or unknown:
            raise CostModelError(f"{where}: missing {missing}, unknown {unknown} (known: {names})")
        values = {}
        for n in names:
            v = data[n]
            if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v <= 0:
                raise CostModelError(f"{where}: {n} must be a positive number, got {v!r}")
            values[n] = float(v)
        return cls(**values)


@dataclass(frozen=True)
class KernelGPU:
    """A GPU as its spec sheet describes it.

    ``tensor_flops``: peak FLOP/s per tensor-core mode (``tf32``, ``fp16``, ``bf16``...;
    empty: none); ``matmul_precision``: PyTorch's for FP32 matmuls (None: ``highest``).
    """

    name: str
    sm_count: float
    clock_hz: float
    peak_flops: float
    mem_bandwidth_bytes_per_s: float
    l2_bytes: float
    tdp_w: float
    tensor_flops: Mapping[str, float] | None = None
    matmul_precision: str | None = None

    @classmethod
    def from_spec(cls, name: str, spec: Mapping[str, Any], *, tensor_flops: Mapping[str, float] | None = None,
                  matmul_precision: str | None = None) -> KernelGPU:
        """From a mapping of :data:`KERNEL_FIELDS`; a missing or non-positive field is a
        :class:`CostModelError` naming it and the GPU."""
        values = {}
        for key in KERNEL_FIELDS:
            v = spec.get(key)
            if v is None:
                raise CostModelError(f"GPU {name!r} has no {key!r}: the kernel model prices a GPU from "
                                     f"{', '.join(KERNEL_FIELDS)} (add it to the GPU's [[devices]] entry)")
            if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0:
                raise CostModelError(f"GPU {name!r}: {key} must be a positive number, got {v!r}")
            values[key] = float(v)
        return cls(name=name, tensor_flops=dict(tensor_flops or {}), matmul_precision=matmul_precision, **values)

    @classmethod
    def from_device(cls, device: Device) -> KernelGPU:
        """The GPU of a platform :class:`~costmodel.platform.Device`."""
        if device.kind != "gpu":
            raise CostModelError(f"the kernel model prices GPUs, not {device.kind} device {device.name!r}")
        return cls.from_spec(device.name, {k: getattr(device, k, None) for k in KERNEL_FIELDS},
                             tensor_flops=device.tensor_flops, matmul_precision=device.matmul_precision)

    def power_cap(self, constants: KernelConstants) -> float:
        """The FP32 FLOP/s the board's power sustains on the CUDA cores:
        ``fp32_flops_per_watt x (tdp_w - board_power_w) x (rated / RATED_FLOPS_PER_WATT)
        ** watt_exponent``: what the board draws whatever it runs (memory, regulators,
        leakage: ``board_power_w``, at most half the board's) is not the SMs' to spend;
        ``rated`` is the spec sheet's FP32 peak per watt (a newer process rates more and
        sustains more per watt: the 72 W L4 rates 421 GFLOP/W, the 70 W T4 116)."""
        rated = self.peak_flops / self.tdp_w
        spend = max(self.tdp_w - constants.board_power_w, 0.5 * self.tdp_w)
        return constants.fp32_flops_per_watt * spend * (rated / RATED_FLOPS_PER_WATT) ** constants.watt_exponent

    def mode_peak(self, mode: str) -> float:
        """Peak FLOP/s of a math mode. FP32 is ``peak_flops``; TF32 on a GPU without
        it is FP32 (PyTorch falls back); an FP16/BF16 (or other) mode the GPU lacks is
        a :class:`CostModelError`."""
        table = self.tensor_flops or {}
        if mode == "fp32":
            return self.peak_flops
        if mode in table:
            return float(table[mode])
        if mode == "tf32":
            return self.peak_flops
        raise CostModelError(f"GPU {self.name!r} has no {mode} math (its tensor_flops: "
                             f"{sorted(table) or 'none'}): an op in that precision cannot run on it")


def shipped_constants() -> KernelConstants:
    """The constants fitted on the built-in profiles (``costmodel/data/gpu-kernel.json``)."""
    path = resources.files("hetsim.costmodel") / "data" / CONSTANTS_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise CostModelError(f"{CONSTANTS_FILE}: cannot read the kernel model's constants ({e})") from None
    return KernelConstants.from_dict(data.get("constants", {}), where=CONSTANTS_FILE)


def _modes(ops: pd.DataFrame, dtypes: Sequence[str] | np.ndarray, gpu: KernelGPU) -> np.ndarray:
    """The math mode of each row (``fp32`` for non-GEMM families)."""
    fam = ops["family"].to_numpy()
    conv = (ops["via"].to_numpy() == "conv-as-gemm") | (fam == "conv")
    out = np.full(len(ops), "fp32", dtype=object)
    cache: dict[tuple[bool, str], str] = {}
    for i in np.flatnonzero((fam == "gemm") | (fam == "conv")):
        key = (bool(conv[i]), str(dtypes[i]))
        if key not in cache:
            cache[key] = math_mode("conv2d" if key[0] else "matmul", key[1], gpu.matmul_precision)
        out[i] = cache[key]
    return out


def kernel_times(ops: pd.DataFrame, gpu: KernelGPU, constants: KernelConstants, *,
                 dtypes: Sequence[str] | np.ndarray | None = None, moved: np.ndarray | None = None,
                 floor_s: float | None = None) -> np.ndarray:
    """Device time (seconds, with the per-launch floor) of each row of ``ops``
    (:func:`~costmodel.gpu.features.gpu_ops` rows) on ``gpu``.

    ``dtypes``: each row's tensor dtype (default ``float32``); ``moved``: the bytes
    each row moves (default ``ops["bytes"]``); ``floor_s``: the per-launch floor
    (default ``constants.launch_floor_s``).
    """
    c = constants
    n = len(ops)
    dtypes = np.full(n, "float32", dtype=object) if dtypes is None else np.asarray(dtypes, dtype=object)
    nbytes = ops["bytes"].to_numpy(float) if moved is None else np.asarray(moved, dtype=float)
    fam = ops["family"].to_numpy()
    sms = gpu.sm_count
    # memory: DRAM, or the L2 for what fits in half of it
    bw = gpu.mem_bandwidth_bytes_per_s * c.dram_fraction
    bw = np.where(nbytes <= 0.5 * gpu.l2_bytes, bw * c.l2_speedup, bw)
    # row kernels (layer norm, softmax) and fused element-wise kernels keep few bytes in
    # flight per SM: at most `*_bytes_per_cycle` per SM and clock cycle
    rows = (fam == "norm") | (fam == "softmax")
    fused = (fam == "elementwise") & (ops["kind"].to_numpy() == "fused") if "kind" in ops else np.zeros(n, bool)
    per_cycle = gpu.sm_count * gpu.clock_hz
    bw = np.where(rows, np.minimum(bw, per_cycle * c.row_bytes_per_cycle), bw)
    bw = np.where(fused, np.minimum(bw, per_cycle * c.fused_bytes_per_cycle), bw)
    t_mem = nbytes / bw
    # compute: GEMM-like rows in tiles and waves; the rest at the CUDA cores' rate
    modes = _modes(ops, dtypes, gpu)
    rate = np.empty(n)
    for mode in set(modes):
        on = modes == mode
        peak = gpu.mode_peak(mode)
        fp32 = min(gpu.peak_flops * c.compute_efficiency, gpu.power_cap(c))
        if mode == "fp32":
            rate[on] = fp32
        elif mode == "tf32":  # cuDNN / cuBLAS in TF32: the FP32 rate times tf32_speedup, at most the peak
            rate[on] = min(peak * c.compute_efficiency, fp32 * c.tf32_speedup) if peak > gpu.peak_flops else fp32
        else:
            rate[on] = peak * c.tensor_efficiency
    t_comp = ops["flops"].to_numpy(float) / rate
    floor = c.launch_floor_s if floor_s is None else floor_s
    mm = (fam == "gemm") | (fam == "conv")
    if mm.any():
        b, m, nn, k = (ops[col].to_numpy(float)[mm] for col in ("b", "m", "n", "k"))
        t_comp[mm] = _tile_time(b, m, nn, k, rate[mm] / sms, sms, c)
    # Winograd on the CUDA cores: FP32 convolutions (TF32 ones too: the only TF32
    # convolutions measured, NeuSight's A100's, run at the speed of the FP32 pipes)
    conv = np.flatnonzero((fam == "conv") & ((modes == "fp32") | (modes == "tf32")))
    if len(conv):
        t_comp[conv] = np.minimum(t_comp[conv], _winograd_time(ops.iloc[conv], gpu, c, bw[conv], floor))
    return floor + np.maximum(t_comp, t_mem)


def _tile_time(b: np.ndarray, m: np.ndarray, n: np.ndarray, k: np.ndarray, per_sm: np.ndarray, sms: float,
               c: KernelConstants) -> np.ndarray:
    """Compute time of ``b`` GEMMs ``m x k`` by ``k x n`` in output tiles over ``sms`` SMs
    of ``per_sm`` FLOP/s each: the fastest of :data:`TILES`."""
    best = np.full(len(m), np.inf)
    for tm, tn in TILES:
        tiles = b * np.ceil(m / tm) * np.ceil(n / tn)
        # a grid under one wave is split along k over the idle SMs, down to `subwave`
        # of a wave (the partial sums' reduction, each SM's pipeline fill)
        waves = np.where(tiles >= sms, np.ceil(tiles / sms), np.maximum(tiles / sms, c.subwave))
        eff = c.tile_efficiency if (tm, tn) in _SMALL_TILES else 1.0
        # each wave's tiles also fill and drain their pipeline: `tile_overhead_k` steps of k
        steps = waves * np.maximum(k, 1.0) + np.ceil(waves) * c.tile_overhead_k
        best = np.minimum(best, steps * 2.0 * tm * tn / (per_sm * eff))
    return best


def _winograd_time(ops: pd.DataFrame, gpu: KernelGPU, c: KernelConstants, bw: np.ndarray,
                   floor: float) -> np.ndarray:
    """Time of 3x3 stride-1 convolutions run as cuDNN's Winograd F(4x4, 3x3) on the CUDA
    cores (FP32): the input and output transformed in tiles of ``WINOGRAD_ALPHA`` squared
    points (a kernel each, their bytes written and read once at ``bw``), and
    ``WINOGRAD_ALPHA`` squared batched GEMMs of (tiles x channels in) by (channels in x
    channels out), 4x fewer multiplications than the implicit GEMM, at the CUDA cores'
    rate times ``winograd_efficiency``."""
    batch, cin, cout = (ops[col].to_numpy(float) for col in ("batch", "cin", "cout"))
    hout = np.maximum(ops["hout"].to_numpy(float), 1.0)
    wout = ops["m"].to_numpy(float) / np.maximum(batch * hout, 1.0)
    tiles = batch * np.ceil(hout / WINOGRAD_TILE) * np.ceil(wout / WINOGRAD_TILE)
    points = WINOGRAD_ALPHA**2
    fp32 = min(gpu.peak_flops * c.compute_efficiency, gpu.power_cap(c))
    gemm = _tile_time(np.full(len(ops), points), tiles, cout, cin, np.full(len(ops), fp32 / gpu.sm_count),
                      gpu.sm_count, c) / c.winograd_efficiency
    transformed = 4.0 * points * tiles * (cin + cout)  # FP32 transformed input and output
    return gemm + 2.0 * transformed / bw + 2.0 * floor
