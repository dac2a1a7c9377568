"""The host and launch figures a profiler trace shows, and a platform with them
(``hetsim calibrate --from-trace``)."""

from __future__ import annotations

import dataclasses
import os
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelError
from hetsim.graphs.graph import GraphError
from hetsim.graphs.trace import build_graph, read_kineto, runtime_role, select_step

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform

__all__ = ["TraceFigures", "calibrated_from_trace", "trace_figures"]


@dataclass(frozen=True)
class TraceFigures:
    """Medians over one traced step (seconds; None where the step holds no sample).

    ``host_per_launch_s``: the host time per GPU launch, the launch call and the
    work since the thread's previous call (CPU op, framework); ``launch_call_s``:
    the launch call alone; ``launch_latency_s``: from a launch call to its kernel's
    start on an idle stream; ``queue_gap_s``: between back-to-back kernels of a busy
    stream; ``event_s``: an event record or wait call; ``copy_issue_s``: an
    asynchronous copy call; ``sync_return_s``: from the end of the awaited work to
    the synchronisation's return.
    """

    trace: str
    step: str
    device: str | None
    launches: int
    host_per_launch_s: float | None
    launch_call_s: float | None
    launch_latency_s: float
    queue_gap_s: float
    event_s: float | None
    copy_issue_s: float | None
    sync_return_s: float | None

    def rows(self) -> list[tuple[str, str]]:
        """(figure, value) rows for printing, microseconds."""
        out = [("trace", self.trace), ("step", self.step), ("device", str(self.device)),
               ("launches", str(self.launches))]
        for f in dataclasses.fields(self):
            if f.name.endswith("_s"):
                v = getattr(self, f.name)
                out.append((f.name[:-2] + "_us", "-" if v is None else f"{v * 1e6:.2f}"))
        return out

    def __str__(self) -> str:
        return "\n".join(f"{k:20} {v}" for k, v in self.rows())


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def trace_figures(path: str | os.PathLike[str], *, step: str | None = None) -> TraceFigures:
    """The figures of ``step`` of the trace at ``path`` (see :class:`TraceFigures`).

    Examples
    --------
    >>> f = trace_figures("tests/data/traces/alexnet-a100-forward.json.gz",
    ...                   step="[param|pytorch.model.alex_net|0|0|0|measure|forward]")
    >>> f.launches, round(f.launch_call_s * 1e6, 1)
    (40, 8.0)
    """
    try:
        trace = read_kineto(path)
        window = select_step(trace, step)
        graph = build_graph(trace, window)
    except GraphError as e:
        raise CostModelError(f"calibrate from trace: {e}") from None
    host, call, copy, ret = [], [], [], []
    for _, d in graph.nodes(data=True):
        a = d["attrs"]
        if d["op"] == "sync":
            ret.append(a["post_s"])
        elif a["kind"] == "memcpy":
            if not a.get("blocking"):
                copy.append(a["call_s"])
        elif a["call_s"] > 0:
            host.append(a["host_s"] + a["call_s"])
            call.append(a["call_s"])
    events = [c.end - c.start for lst in trace.calls for c in lst
              if window.start <= c.start <= window.end and runtime_role(c.name) in ("record", "wait")]
    return TraceFigures(
        trace=os.path.basename(os.fspath(path)), step=window.name, device=trace.device, launches=len(call),
        host_per_launch_s=_median(host), launch_call_s=_median(call),
        launch_latency_s=float(graph.meta["launch_latency_s"]), queue_gap_s=float(graph.meta["queue_gap_s"]),
        event_s=_median(events), copy_issue_s=_median(copy), sync_return_s=_median(ret))


def calibrated_from_trace(platform: Platform, figures: TraceFigures, *, gpu: str | None = None) -> Platform:
    """``platform`` with its GPU's host figures taken from a trace: ``dispatch_s`` the
    host time per launch, ``launch = "eager"`` (how a profiled PyTorch program
    launches), ``launch_overhead_s`` the gap between queued kernels, ``event_s`` and
    ``copy_issue_s`` where the trace has such calls; a ``[calibration]`` table names
    the trace. ``gpu``: the device to set (default the platform's first GPU).
    """
    gpus = [d for d in platform.devices if d.kind == "gpu"]
    if gpu is not None:
        gpus = [d for d in gpus if d.name == gpu]
    if not gpus:
        raise CostModelError(f"platform {platform.name!r}: no GPU device{f' named {gpu!r}' if gpu else ''} "
                             "to take the trace's figures")
    dev = gpus[0]
    changes: dict[str, Any] = {"launch": "eager", "launch_overhead_s": figures.queue_gap_s}
    if figures.host_per_launch_s is not None:
        changes["dispatch_s"] = figures.host_per_launch_s
    if figures.event_s is not None:
        changes["event_s"] = figures.event_s
    if figures.copy_issue_s is not None:
        changes["copy_issue_s"] = figures.copy_issue_s
    new = dataclasses.replace(dev, **changes)
    devices = [new if d.name == dev.name else d for d in platform.devices]
    cal = {"source": "profiler trace", "trace": figures.trace, "step": figures.step,
           "traced_device": str(figures.device), "launches": str(figures.launches)}
    cal.update({k: v for k, v in figures.rows() if k.endswith("_us")})
    return dataclasses.replace(platform, name=f"{platform.name}-traced", devices=devices, calibration=cal)
