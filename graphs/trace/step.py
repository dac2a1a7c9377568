"""The part of a trace that is one step: a profiler step, a user annotation, or the
whole trace."""

from __future__ import annotations

from dataclasses import dataclass

from hetsim.graphs.graph import GraphError
from hetsim.graphs.trace.kineto import KinetoTrace

__all__ = ["WHOLE", "Window", "select_step"]

#: the step name that takes the whole trace
WHOLE = "all"


@dataclass(frozen=True)
class Window:
    """A step: its name, its host range (seconds from the trace's start) and the
    thread that ran its annotation (None: the whole trace)."""

    name: str
    start: float
    end: float
    thread: int | None


def select_step(trace: KinetoTrace, step: str | None = None) -> Window:
    """The window of ``step`` in ``trace``.

    ``None``: the last ``ProfilerStep#N`` that launched GPU work (the profiler's
    last step is often cut short), else the whole trace.
    ``"all"``: the whole trace. Any other name: the annotation (profiler step or
    ``record_function`` range) of that exact name; where several have it, the last
    to start (a range nested in another of its name is the inner one).

    Raises
    ------
    GraphError
        A named step the trace does not hold (listing some that it does).
    """
    anns = trace.annotations
    if step is None:
        steps = [a for a in anns if a.name.startswith("ProfilerStep#") and _launches_in(trace, a.start, a.end)]
        if steps:
            a = steps[-1]
            return Window(a.name, a.start, a.end, a.thread)
        step = WHOLE
    if step == WHOLE:
        starts = [c.start for lst in trace.calls for c in lst]
        ends = [c.end for lst in trace.calls for c in lst]
        if not starts:
            raise GraphError(f"{trace.path}: the trace holds no runtime calls (no launches to read)")
        return Window(WHOLE, min(starts), max(ends), None)
    named = [a for a in anns if a.name == step]
    if not named:
        names = list(dict.fromkeys(a.name for a in anns))
        shown = ", ".join(repr(n) for n in names[:8]) + (f", ... ({len(names)} names)" if len(names) > 8 else "")
        raise GraphError(f"{trace.path}: no step or annotation named {step!r}; the trace has "
                         f"{shown or 'none'} (or give 'all' for the whole trace)")
    a = named[-1]
    return Window(a.name, a.start, a.end, a.thread)


def _launches_in(trace: KinetoTrace, start: float, end: float) -> bool:
    """Whether a host call in ``[start, end]`` enqueued GPU work."""
    return any(start <= c.start <= end and c.correlation in trace.activities for lst in trace.calls for c in lst)
