"""The kernel model's constants fitted on public kernel measurements.

A :class:`KernelSet` is one GPU's measured kernels from one data set, with what the
fit needs to price them: the GPU's spec sheet, each kernel's dims and dtype, the
measured times and how they were taken. Two kinds of times are read:

* call times (the NeuSight profiles, :func:`bank_sets`): a PyTorch call bracketed by
  CUDA events; the GPU's smallest call (``floor_s``, the measuring host's launch
  path) is added to each prediction;
* device times (Vidur's profiles, :func:`~costmodel.gpu.vidur.vidur_sets`): the
  kernels alone, so no host floor; the kernel model's ``launch_floor_s`` is the
  per-launch floor they are fitted with.

:func:`fit_constants` fits :data:`FITTED` by least squares on the log of the times
(a soft-L1 loss so that a throttled campaign does not pull), up to ``per_family``
kernels of each family of each set; :func:`write_constants` fits them on every
built-in set and writes ``costmodel/data/gpu-kernel.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.features import GPU_FAMILIES
from hetsim.costmodel.gpu.kernel import CONSTANTS_FILE, KernelConstants, KernelGPU, kernel_times
from hetsim.costmodel.gpu.model import GPUBank
from hetsim.costmodel.platform import Platform
from hetsim.graphs.graph import atomic_write

__all__ = ["FITTED", "KernelSet", "bank_gpus", "bank_sets", "builtin_sets", "fit_constants", "write_constants"]

#: the constants the fit moves (the rest stay at their defaults), and their bounds
FITTED = {"compute_efficiency": (0.2, 1.0), "tensor_efficiency": (0.1, 1.0), "tf32_speedup": (1.0, 8.0),
          "tile_efficiency": (0.3, 1.0), "fp32_flops_per_watt": (1e10, 5e11), "subwave": (0.02, 1.0),
          "dram_fraction": (0.3, 1.0), "l2_speedup": (1.0, 6.0), "row_bytes_per_cycle": (0.5, 64.0),
          "fused_bytes_per_cycle": (0.5, 64.0), "winograd_efficiency": (0.2, 2.0), "tile_overhead_k": (1.0, 1024.0),
          "board_power_w": (1.0, 35.0), "launch_floor_s": (5e-7, 5e-5), "watt_exponent": (0.01, 2.0)}


@dataclass(frozen=True)
class KernelSet:
    """One GPU's measured kernels from one data set.

    ``gpu``: the GPU's name (what leave one GPU out leaves out); ``rows``: each
    kernel's ``source_op``, ``signature`` and ``split``; ``ops``: its
    :func:`~costmodel.gpu.features.gpu_ops` columns; ``times``: measured seconds;
    ``dtypes``: each kernel's tensor dtype; ``floor_s``: added to each prediction
    (the host's part of a call; 0 for device times); ``launch_s``: the per-launch
    floor (None: the constants' ``launch_floor_s``).
    """

    dataset: str
    gpu: str
    spec: KernelGPU
    rows: pd.DataFrame
    ops: pd.DataFrame
    times: np.ndarray
    dtypes: np.ndarray
    floor_s: float = 0.0
    launch_s: float | None = None

    def __len__(self) -> int:
        return len(self.times)

    def predict(self, constants: KernelConstants) -> np.ndarray:
        """Predicted time of each kernel (seconds, as measured: with ``floor_s``)."""
        return self.floor_s + kernel_times(self.ops, self.spec, constants, dtypes=self.dtypes, floor_s=self.launch_s)

    def family(self, family: str) -> KernelSet:
        """The kernels of one family."""
        return self.take(np.flatnonzero(self.ops["family"].to_numpy() == family))

    def take(self, idx: np.ndarray) -> KernelSet:
        return replace(self, rows=self.rows.iloc[idx], ops=self.ops.iloc[idx], times=self.times[idx],
                       dtypes=self.dtypes[idx])

    def sample(self, per_family: int, rng: np.random.Generator) -> KernelSet:
        """Up to ``per_family`` kernels of each family (drawn without replacement)."""
        fam = self.ops["family"].to_numpy()
        pick = []
        for f in GPU_FAMILIES:
            idx = np.flatnonzero(fam == f)
            pick.append(np.sort(rng.choice(idx, per_family, replace=False)) if len(idx) > per_family else idx)
        return self.take(np.concatenate(pick))


def bank_gpus(bank: GPUBank) -> dict[str, KernelGPU]:
    """The bank's GPUs as the kernel model prices them: the spec sheet of the GPU's
    preset (the preset whose default cost is the GPU's profile, ``gpu-NAME``: the
    figures the cost model prices it from, with its tensor-core peaks), else the
    figures of the profile's manifest (no tensor cores). The data set's own figures
    are not the spec sheet everywhere: its L4 has 60 SMs and 31.3 TFLOP/s FP32 (the
    L4's datasheet: 58 SMs, 7424 CUDA cores, 30.3 TFLOP/s)."""
    presets: dict[str, KernelGPU] = {}
    for name in Platform.presets():
        for d in Platform.preset(name).devices:
            if d.kind == "gpu" and d.cost and d.cost.startswith("gpu-") and d.cost[4:] not in presets:
                presets[d.cost[4:]] = KernelGPU.from_device(d)
    return {g: replace(presets[g], name=g) if g in presets else KernelGPU.from_spec(g, bank.spec(g))
            for g in bank.gpus}


def bank_sets(bank: GPUBank, gpus: Sequence[str] | None = None, *, dataset: str = "neusight") -> list[KernelSet]:
    """A set of call times per GPU of ``bank`` (default: all): every row of a kernel
    family measured as itself (``via == "own"``), FP32, the GPU's smallest call as
    its floor."""
    specs = bank_gpus(bank)
    out = []
    for g in (list(gpus) if gpus is not None else list(bank.gpus)):
        rows, ops, t = bank.gpus[g].load()
        on = np.flatnonzero(np.isin(ops["family"].to_numpy(), GPU_FAMILIES) & (ops["via"].to_numpy() == "own"))
        out.append(KernelSet(dataset, g, specs[g], rows.iloc[on], ops.iloc[on], np.asarray(t, dtype=float)[on],
                             np.full(len(on), "float32", dtype=object), floor_s=bank.floor(g)))
    return out


def builtin_sets(bank: GPUBank | None = None) -> list[KernelSet]:
    """Every built-in set: the NeuSight profiles (``bank``, default
    :meth:`GPUBank.builtin`) and Vidur's tables."""
    # import cycle: hetsim.costmodel.gpu.vidur -> hetsim.costmodel.gpu.kernel_fit
    from hetsim.costmodel.gpu.vidur import vidur_sets

    return [*bank_sets(bank if bank is not None else GPUBank.builtin()), *vidur_sets()]


def fit_constants(sets: Sequence[KernelSet], *, start: KernelConstants | None = None, per_family: int = 1500,
                  seed: int = 0) -> KernelConstants:
    """Fit :data:`FITTED` on up to ``per_family`` kernels of each family of each of
    ``sets``: least squares on ``log(predicted) - log(measured)`` (soft L1). A constant
    that moves no prediction of the sets (moved to its far bound) keeps its ``start``
    value."""
    from scipy.optimize import least_squares

    if not sets:
        raise CostModelError("fitting the kernel model needs at least one set of measured kernels")
    rng = np.random.default_rng(seed)
    rows = [s.sample(per_family, rng) for s in sets]
    logs = [np.log(s.times) for s in rows]
    start = start or KernelConstants()
    keys = list(FITTED)
    lo = np.log([FITTED[k][0] for k in keys])
    hi = np.log([FITTED[k][1] for k in keys])
    x0 = np.clip(np.log([getattr(start, k) for k in keys]), lo + 1e-9, hi - 1e-9)

    def residuals(x: np.ndarray) -> np.ndarray:
        c = KernelConstants(**{**start.to_dict(), **dict(zip(keys, np.exp(x)))})
        return np.concatenate([np.log(s.predict(c)) - lt for s, lt in zip(rows, logs)])

    # a constant no kernel of the sets depends on (TF32's speedup when no set has a TF32
    # kernel) keeps its start value instead of drifting where nothing holds it
    r0 = residuals(x0)
    free = []
    for i in range(len(keys)):
        step = x0.copy()
        step[i] = hi[i] - 1e-9 if x0[i] - lo[i] < hi[i] - x0[i] else lo[i] + 1e-9
        if not np.allclose(residuals(step), r0, rtol=0.0, atol=1e-9):
            free.append(i)
    if not free:
        return start

    def free_residuals(xf: np.ndarray) -> np.ndarray:
        x = x0.copy()
        x[free] = xf
        return residuals(x)

    fit = least_squares(free_residuals, x0[free], bounds=(lo[free], hi[free]), loss="soft_l1", f_scale=0.2,
                        diff_step=1e-3)
    x = x0.copy()
    x[free] = fit.x
    return KernelConstants(**{**start.to_dict(), **dict(zip(keys, np.exp(x).tolist()))})


def write_constants(sets: Sequence[KernelSet] | None = None, path: Any = None) -> KernelConstants:
    """Fit the constants on ``sets`` (default: :func:`builtin_sets`) and write them,
    with what they were fitted on, to ``path`` (default: the shipped
    ``costmodel/data/gpu-kernel.json``)."""
    sets = builtin_sets() if sets is None else sets
    constants = fit_constants(sets)
    out = Path(path) if path is not None else Path(__file__).resolve().parents[1] / "data" / CONSTANTS_FILE
    doc = {"constants": {k: float(f"{v:.6g}") for k, v in constants.to_dict().items()},
           "fitted_on": sorted({f"{s.dataset}:{s.gpu}" for s in sets}),
           "method": "least squares on log times (soft L1), up to 1500 kernels per family of each GPU of each "
                     "data set: the NeuSight profiles' call times (each GPU's floor its own smallest calls) "
                     "and Vidur's FP16 device times (launch_floor_s as the floor)"}
    atomic_write(out, lambda fh: fh.write(json.dumps(doc, indent=1) + "\n"))
    return KernelConstants.from_dict(doc["constants"])
