"""Per-GPU calibrated roofline: ops the GPU data set has no rows for.

Pooling, batch norm, reductions, concatenations, the copies that transposes and
slices make, embedding gathers... are priced on a GPU as::

    call time = floor + max(flops / achieved_flops, moved_bytes / achieved_bandwidth)

with every constant fitted on that GPU's own measurements, not the datasheet:

* ``achieved_bandwidth`` and ``floor`` (the fixed cost of one call): a
  relative-error least-squares fit ``t = floor + bytes / B`` over the GPU's
  element-wise rows (memory-bound by construction: one or two reads and a write
  per element);
* ``achieved_flops``: the 95th percentile of the FLOP/s its GEMM rows reach.

A GPU with no element-wise rows (the data set measured only GEMMs on the H100)
takes ``floor`` from its smallest calls and its bandwidth as its published
bandwidth times the median fraction the measured GPUs achieve (``fraction``).

Views (``reshape`` and the moves that torch returns as views, see
:func:`costmodel.learned.xgb_features.copies`) cost no kernel: zero.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.learned.xgb_features import copies_column, moved_bytes, sum_fit

__all__ = ["MIN_FIT_ROWS", "CalibratedRoofline", "fit_calibrated_roofline", "fits_bandwidth", "views"]

#: call times below this percentile set a GPU's floor when it has no element-wise rows
FLOOR_PERCENTILE = 1.0
#: element-wise (GEMM) rows a GPU needs for its own bandwidth (peak FLOP/s) fit
MIN_FIT_ROWS = 10


@dataclass(frozen=True)
class CalibratedRoofline:
    """The fitted constants of one GPU (seconds, FLOP/s, bytes/s).

    ``floor_s``: fixed cost of one call as the data set measured it (the CUDA events
    bracket the PyTorch call, so this holds the launch as well); ``source``: how the
    bandwidth was found (``"element-wise rows"`` or ``"published x fraction"``).
    """

    floor_s: float
    bandwidth_bytes_per_s: float
    flops_per_s: float
    source: str

    def call_times(self, X: pd.DataFrame) -> np.ndarray:
        """Call time of each row of ``X`` (``graphs.features`` columns); views: 0."""
        flops = X["flops"].to_numpy(float)
        t = self.floor_s + np.maximum(flops / self.flops_per_s, moved_bytes(X) / self.bandwidth_bytes_per_s)
        return np.where(views(X), 0.0, t)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fits_bandwidth(ops: pd.DataFrame) -> bool:
    """True when ``ops`` (:func:`~costmodel.gpu.features.gpu_ops` rows of one GPU) has
    the element-wise rows :func:`fit_calibrated_roofline` fits a bandwidth on; without
    them it needs a ``fraction``."""
    return bool((ops["family"] == "elementwise").sum() >= MIN_FIT_ROWS)


def views(X: pd.DataFrame) -> np.ndarray:
    """Rows that torch runs as views of their input: no kernel, no time."""
    return copies_column(X) == 0.0


def fit_calibrated_roofline(
    ops: pd.DataFrame, times: np.ndarray, spec: Mapping[str, float] | None = None, *,
    fraction: float | None = None,
) -> CalibratedRoofline:
    """Fit :class:`CalibratedRoofline` on one GPU's rows.

    Parameters
    ----------
    ops
        :func:`costmodel.gpu.features.gpu_ops` of the GPU's profile rows.
    times
        Their call times (seconds).
    spec
        The GPU's published figures (needed when it has no element-wise rows, or no
        GEMM rows).
    fraction
        Achieved / published bandwidth to assume without element-wise rows.
    """
    t = np.asarray(times, dtype=float)
    if len(t) == 0:
        raise CostModelError("calibrated roofline: no rows to fit")
    fam = ops["family"].to_numpy()
    by, fl = ops["bytes"].to_numpy(float), ops["flops"].to_numpy(float)
    elem = fam == "elementwise"
    if elem.sum() >= MIN_FIT_ROWS:
        a, _, inv_bw = sum_fit(np.zeros(int(elem.sum())), by[elem], t[elem])
        floor, bw, source = float(a), 1.0 / max(float(inv_bw), 1e-30), "element-wise rows"
    else:
        if spec is None or fraction is None:
            raise CostModelError("calibrated roofline: no element-wise rows, and no published bandwidth "
                                 "and fraction to fall back on")
        floor = float(np.percentile(t, FLOOR_PERCENTILE))
        bw = float(spec["mem_bandwidth_bytes_per_s"]) * fraction
        source = f"published x {fraction:.2f}"
    gemm = fam == "gemm"
    if gemm.sum() >= MIN_FIT_ROWS:
        busy = np.maximum(t[gemm] - floor, 1e-9)
        peak = float(np.percentile(fl[gemm] / busy, 95))
    elif spec is not None:
        peak = 0.7 * float(spec["peak_flops"])
    else:
        raise CostModelError("calibrated roofline: no GEMM rows and no published peak")
    return CalibratedRoofline(floor_s=max(floor, 0.0), bandwidth_bytes_per_s=bw, flops_per_s=peak, source=source)
