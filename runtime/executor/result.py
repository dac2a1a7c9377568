"""What :func:`~runtime.executor.execute.execute` measured: :class:`RunResult`."""

from __future__ import annotations

import dataclasses
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.sim.result import RECORD_COLUMNS
from hetsim.sim.trace import write_chrome_trace

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["UNTRACED", "RunResult", "host_costs", "median_run"]

#: the note of a result whose GPU ops have no device times (no traced run)
UNTRACED = "timed runs record no GPU device time: the GPUs' busy times come from trace=True (--trace)"


@dataclass
class RunResult:
    """What :func:`execute` measured. Times in seconds.

    Attributes
    ----------
    graph, platform, backend, scheduler
        What ran (``scheduler`` from ``plan.meta``, None if unnamed).
    devices
        Platform device -> real device it ran on (``cpu@1``, ``cuda:0``).
    requests, warmup
        Requests per run; untimed runs before the timed ones.
    makespans
        Wall-clock makespan of each timed run (all requests' outputs on the host).
    records
        Per-op (``kind="op"``), dispatch and transfer records of the median run, in
        the simulator's record format (:data:`sim.result.RECORD_COLUMNS`); ``start``
        and ``end`` from the run's start. A CPU op's dispatch record spans the
        executor's work from taking the op off its device's queue to calling the
        kernel; its op record, the kernel call.
    device_busy
        Per platform device: kernel time in the median run.
    streams
        Per platform device: streams (workers).
    check
        The check of the first run: every node's outputs against the same node in a
        single-device run (all nodes in order on the host; ``node_error``), and the
        graph outputs against ``reference`` (``"torch module"``: the zoo model's own
        forward, else ``"single device"``; ``error``). Errors are the largest
        deviation over the allowed one (<= 1 passes) with ``rtol`` and ``atol``
        (relative to the largest reference magnitude). None when not checked.
    setup_s
        Seconds spent preparing (model import, kernels, weights, reference).
    decision_s
        A dynamic plan's median time per run-time placement (the policy's
        ``select`` and the bookkeeping after it, under the executor's lock) over
        every decision of the timed runs; None for a static plan.
    launch
        How GPU work was launched: ``"graph"`` (a CUDA graph per segment: one
        ``dispatch`` record per segment replay in ``records``), ``"eager"`` (one
        ``dispatch`` record per op launch), or None when no GPU took part. Timed
        runs record no GPU device times: their GPU ops have no ``op`` records.
    trace
        With ``trace=True``: the records of a traced run of its own (every GPU op
        launched eagerly between two CUDA timing events, copies timed likewise; CPU
        ops as in ``records``), in the same format; the GPUs' ``device_busy`` comes
        from it. None otherwise.
    placement
        Node -> the platform device it ran on in the median run (request 0): the
        plan's placement, or the decisions a dynamic plan's policy made in that run
        (timed GPU ops have no ``op`` record to read them from).
    """

    graph: str
    platform: str
    backend: str
    scheduler: str | None
    devices: dict[str, str]
    requests: int
    warmup: int
    makespans: list[float]
    records: list[dict[str, Any]]
    device_busy: dict[str, float]
    streams: dict[str, int]
    check: dict[str, Any] | None = None
    setup_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    decision_s: float | None = None
    launch: str | None = None
    trace: list[dict[str, Any]] | None = None
    placement: dict[str, str] = field(default_factory=dict)

    def with_trace(self, records: list[dict[str, Any]], gpus: list[str]) -> RunResult:
        """This result with a traced run's ``records``, and the busy time of the devices
        ``gpus`` taken from them."""
        busy = dict(self.device_busy)
        for d in gpus:
            busy[d] = sum(r["end"] - r["start"] for r in records if r["kind"] == "op" and r["resource"] == d)
        return dataclasses.replace(self, trace=records, device_busy=busy, notes=[n for n in self.notes if n != UNTRACED])

    # ------------------------------------------------------------------ stats
    @property
    def median(self) -> float:
        """Median makespan over the timed runs."""
        return float(statistics.median(self.makespans))

    makespan = median

    @property
    def p10(self) -> float:
        """10th percentile of the makespans."""
        return float(np.percentile(self.makespans, 10))

    @property
    def p90(self) -> float:
        """90th percentile of the makespans."""
        return float(np.percentile(self.makespans, 90))

    @property
    def spread(self) -> float:
        """``(p90 - p10) / median``: the run-to-run noise."""
        return (self.p90 - self.p10) / self.median if self.median > 0 else 0.0

    @property
    def device_utilisation(self) -> dict[str, float]:
        """Per device: busy time of the median run over its makespan x streams."""
        span = median_run(self.makespans)[1]
        return {d: (b / (span * self.streams[d]) if span > 0 else 0.0) for d, b in self.device_busy.items()}

    # ---------------------------------------------------------------- exports
    def to_dataframe(self) -> pd.DataFrame:
        """The median run's records, one row each (:data:`sim.result.RECORD_COLUMNS`)."""
        import pandas as pd

        return pd.DataFrame.from_records(self.records, columns=list(RECORD_COLUMNS))

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write the traced run's records (:attr:`trace`, every GPU op and copy timed),
        else the median run's, as Chrome trace JSON (as the simulator's
        :meth:`sim.SimResult.to_chrome_trace`; tracks in the same order)."""
        records = self.trace if self.trace is not None else self.records
        links = sorted({str(r["resource"]) for r in records if r["kind"] == "transfer"})
        return write_chrome_trace(records, path, resources=[*self.device_busy, *links, "dispatch"])

    def summary(self) -> dict[str, Any]:
        """One flat, JSON-safe row."""
        row: dict[str, Any] = {
            "graph": self.graph, "platform": self.platform, "backend": self.backend,
            "scheduler": self.scheduler, "requests": self.requests, "repeats": len(self.makespans),
            "warmup": self.warmup, "makespan_s": self.median, "makespan_p10_s": self.p10,
            "makespan_p90_s": self.p90, "makespan_min_s": min(self.makespans),
            "ops": sum(1 for r in self.records if r["kind"] == "op"), "setup_s": self.setup_s,
            "check_error": None if self.check is None else self.check["error"], "launch": self.launch,
        }
        if self.decision_s is not None:
            row["decision_s"] = self.decision_s
        for d, b in self.device_busy.items():
            row[f"busy:{d}"] = b
        for d, u in self.device_utilisation.items():
            row[f"util:{d}"] = u
        return row

    def __str__(self) -> str:
        ms = 1e3
        devs = ", ".join(f"{k}={v}" for k, v in self.devices.items())
        lines = [
            f"{self.graph} on {self.platform} ({devs}), backend {self.backend}"
            + (f", plan {self.scheduler}" if self.scheduler else "")
            + (f", GPU launch {self.launch}" if self.launch else ""),
            f"makespan (ms): median {self.median * ms:.3f}  p10 {self.p10 * ms:.3f}  p90 {self.p90 * ms:.3f}"
            f"  ({len(self.makespans)} runs after {self.warmup} warm-up, {self.requests} request(s))",
        ]
        util = self.device_utilisation
        for d, b in self.device_busy.items():
            lines.append(f"  {d:<16} busy {b * ms:10.3f} ms  util {util[d]:6.1%}")
        if self.decision_s is not None:
            lines.append(f"run-time placement: median {self.decision_s * 1e6:.1f} us per decision")
        if self.check is not None:
            c = self.check
            lines.append(f"output check vs {c['reference']}: error {c['error']:.3g} of the tolerance "
                         f"(rtol {c['rtol']:g}, atol {c['atol']:g} x max|ref|)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def median_run(makespans: list[float]) -> tuple[int, float]:
    """Index and makespan of the median run (the lower middle one for an even count)."""
    order = sorted(range(len(makespans)), key=makespans.__getitem__)
    i = order[(len(order) - 1) // 2]
    return i, makespans[i]


def host_costs(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """The host's cost of each GPU op of an eager run, the executor's work included:
    from its worker's pick of the op to its pick of the next one (the last op: to its
    launch's return). In an eager run the launching thread never waits for the GPU,
    so this is what each op costs the host, as the simulator's launch queue charges it."""
    by_worker: dict[Any, list[Mapping[str, Any]]] = {}
    for r in records:
        if r["kind"] == "dispatch":
            by_worker.setdefault(r["stream"], []).append(r)
    out: dict[str, float] = {}
    for recs in by_worker.values():
        recs.sort(key=lambda r: r["start"])
        for r, nxt in zip(recs, [*recs[1:], None]):
            out[r["node"]] = (nxt["start"] if nxt is not None else r["end"]) - r["start"]
    return out
