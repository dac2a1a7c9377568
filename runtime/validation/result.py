"""One plan simulated and executed: :class:`ValidationResult` (errors, band, traces)."""

from __future__ import annotations

import json
import math
import os
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.runtime.validation.replay import as_static
from hetsim.runtime.validation.table import in_band

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hetsim.graphs.graph import Graph
    from hetsim.runtime.executor.execute import RunResult
    from hetsim.sim.plan import Plan
    from hetsim.sim.result import SimResult

__all__ = ["STATISTICS", "ValidationResult", "check_statistic"]

#: the statistics of the measured makespans a simulation may be compared with
STATISTICS = ("median", "mean")


@dataclass
class ValidationResult:
    """A plan simulated and executed. Times in seconds.

    Attributes
    ----------
    graph
        The graph planned and run (rewritten by the scheduler's ``transform`` if any).
    plan
        The plan.
    sim
        The simulation (with records).
    run
        The execution.
    cost
        Name of the cost model the plan was simulated with.
    inputs
        Where each input of the simulation came from: ``{"op times": ..., "host
        costs": ..., "plan": ...}``, each a phrase that says whether it was measured
        in this run or read from a file (printed, and in ``summary.json``).
    statistic
        The statistic of the measured makespans set beside the simulated one
        (:data:`STATISTICS`): the one the simulation's inputs add up to.
    launch
        How the plan's GPU ops were launched (``"graph"``, ``"eager"``; None: no GPU).
    """

    graph: Graph
    plan: Plan
    sim: SimResult
    run: RunResult
    cost: str
    inputs: dict[str, str] = field(default_factory=dict)
    statistic: str = "median"
    launch: str | None = None

    def __post_init__(self) -> None:
        check_statistic(self.statistic)

    @property
    def scheduler(self) -> str:
        return str(self.plan.meta.get("scheduler", "plan"))

    @property
    def simulated_s(self) -> float:
        return float(self.sim.makespan)

    @property
    def measured_s(self) -> float:
        """The measured makespans' :attr:`statistic` (median or mean)."""
        return float(self.run.median if self.statistic == "median" else statistics.fmean(self.run.makespans))

    @property
    def error_pct(self) -> float:
        """``(simulated - measured) / measured`` in percent (negative: the simulator
        predicts faster than the machine runs)."""
        m = self.measured_s
        return 100.0 * (self.simulated_s - m) / m if m > 0 else math.nan

    @property
    def in_band(self) -> bool:
        """Whether the simulated makespan falls inside the measured p10-p90 band."""
        return in_band(self.simulated_s, self.run.p10, self.run.p90)

    def busy(self) -> pd.DataFrame:
        """Per device: simulated and measured busy (kernel) time and the error."""
        import pandas as pd

        rows = []
        for d in self.sim.device_busy:
            s, m = self.sim.device_busy[d], self.run.device_busy.get(d, 0.0)
            rows.append({"device": d, "simulated_busy_s": s, "measured_busy_s": m,
                         "error_pct": 100.0 * (s - m) / m if m > 0 else (0.0 if s == 0 else math.nan)})
        return pd.DataFrame(rows)

    def row(self) -> dict[str, Any]:
        """One row of the :func:`validate_all` table."""
        run = self.run
        return {
            "model": str(self.graph.meta.get("model") or self.graph.name), "scheduler": self.scheduler,
            "status": "ok", "simulated_s": self.simulated_s, "measured_s": self.measured_s,
            "error_pct": self.error_pct, "measured_p10_s": run.p10, "measured_p90_s": run.p90,
            "spread_pct": 100.0 * run.spread, "in_band": self.in_band, "ops": self.graph.number_of_nodes(),
            "requests": run.requests, "platform": run.platform, "backend": run.backend,
            "launch": self.launch or "", "statistic": self.statistic, "cost": self.cost, "note": "",
            **{f"sim_busy:{d}": b for d, b in self.sim.device_busy.items()},
            **{f"run_busy:{d}": b for d, b in run.device_busy.items()},
        }

    def write(self, out: str | os.PathLike[str]) -> Path:
        """Write ``sim_trace.json``, ``run_trace.json``, ``plan.json`` and
        ``summary.json`` into the folder ``out`` (a dynamic plan's ``plan.json``: the
        placements and order its run made, as a static plan)."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.sim.to_chrome_trace(out / "sim_trace.json")
        self.run.to_chrome_trace(out / "run_trace.json")
        as_static(self.plan).to_json(out / "plan.json")
        summary = {"row": _jsonable(self.row()), "inputs": self.inputs, "run": _jsonable(self.run.summary()),
                   "sim": _jsonable(self.sim.summary()), "makespans_s": self.run.makespans,
                   "check": self.run.check}
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return out

    def __str__(self) -> str:
        ms = 1e3
        run = self.run
        lines = [
            f"{self.graph.name} on {run.platform}: plan {self.scheduler}, backend {run.backend}, "
            f"cost {self.cost}, {run.requests} request(s)",
            f"makespan  simulated {self.simulated_s * ms:9.3f} ms   measured {self.measured_s * ms:9.3f} ms "
            f"({self.statistic}{', ' + self.launch + ' launch' if self.launch else ''}) "
            f"(p10 {run.p10 * ms:.3f}, p90 {run.p90 * ms:.3f}, {len(run.makespans)} runs)   "
            f"error {self.error_pct:+.1f}%",
            f"the simulation is {'inside' if self.in_band else 'outside'} the measured p10-p90 band"
            f" (band width {100 * run.spread:.1f}% of the median: this machine's noise in this run)",
        ]
        lines += [f"{what + ':':<12}{where}" for what, where in self.inputs.items()]
        lines.append(f"{'device':<12}{'sim busy ms':>14}{'run busy ms':>14}{'error':>9}")
        for r in self.busy().itertuples(index=False):
            err = "-" if r.error_pct != r.error_pct else f"{r.error_pct:+.1f}%"
            lines.append(f"{r.device:<12}{r.simulated_busy_s * ms:>14.3f}{r.measured_busy_s * ms:>14.3f}{err:>9}")
        if run.check is not None:
            lines.append(f"outputs match the {run.check['reference']} reference "
                         f"(error {run.check['error']:.2g} of the tolerance)")
        return "\n".join(lines)


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


def check_statistic(statistic: str | None) -> str | None:
    """``statistic`` if it is None or one of :data:`STATISTICS`, else :class:`ValueError` naming it."""
    if statistic is not None and statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; statistics: {list(STATISTICS)}")
    return statistic
