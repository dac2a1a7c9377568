"""A partial schedule built one node at a time: earliest-finish-time bookkeeping.

:class:`EFTState` keeps per-device timelines (with or without insertion into idle
gaps, :class:`~schedulers.timeline.Timeline`), tensor arrival times (a tensor crosses
to a device once, however many consumers read it there) and, optionally, link and
host-dispatch contention. HEFT, CPOP, PEFT and DONF build their schedule with it;
with ``insertion=False, contention=True`` it is the cheap list-scheduling estimator
(:func:`list_schedule`: placement + node ordering -> estimated schedule and integer
priorities) that cp-greedy, by-op, by-path and refine use to predict a placement's
makespan.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hetsim.schedulers.base import SchedulerError, topo_priority
from hetsim.schedulers.timeline import Timeline
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.base import CostTable

__all__ = ["EFTState", "list_schedule"]


class EFTState:
    """A partial schedule built one node at a time (earliest-finish-time bookkeeping).

    Parameters
    ----------
    table
        Priced graph and platform.
    insertion
        Let an op fill an idle gap of its device's timeline (HEFT's insertion
        policy); else it goes after the last op of the device.
    contention
        Serialise transfers on link-direction resources and dispatches on the host
        (``platform.dispatch_threads`` lanes), append-only, like the simulator.
        Without it transfers never wait for a link and dispatch is a plain delay
        (the classic contention-free model of HEFT).

    Notes
    -----
    :meth:`eft` costs O(in-degree x hops) plus, with insertion, a search of each
    stream's :class:`~schedulers.timeline.Timeline` (O(log n) when the op goes
    after the last interval, O(sqrt-ish n) at worst: see its docstring).
    """

    def __init__(self, table: CostTable, *, insertion: bool = True, contention: bool = False) -> None:
        self.table = table
        self.insertion = insertion
        self.contention = contention
        plat = table.platform
        self.lanes: dict[str, list[Timeline]] = {
            d.name: [Timeline() for _ in range(d.streams)] for d in plat.devices
        }
        self.placement: dict[str, str] = {}
        self.start: dict[str, float] = {}
        self.finish: dict[str, float] = {}
        self.sequence: list[str] = []
        self.arrival: dict[tuple[tuple[str, int], str], float] = {}
        self.link_free: dict[str, float] = {}
        self.host_free: list[float] = [0.0] * plat.dispatch_threads
        self.end = 0.0

    # ------------------------------------------------------------------ pricing
    def _arrive(self, key: tuple[str, int], dst: str, commit: bool) -> float:
        t = self.table.tensors[key]
        if t.producer is None:
            src, t0 = self.table.platform.host, 0.0
        else:
            src, t0 = self.placement[t.producer], self.finish[t.producer]
        hops = self.table.hops(src, dst) if src != dst else ()
        if not hops:
            return t0
        hit = self.arrival.get((key, dst))
        if hit is not None:
            return hit
        now = t0
        cost = self.table.cost
        for res, link in hops:
            if self.contention:
                now = max(now, self.link_free.get(res, 0.0))
            now += float(cost.transfer_time(t.nbytes, link))
            if commit and self.contention:
                self.link_free[res] = now
        if commit:
            self.arrival[(key, dst)] = now
        return now

    def ready_time(self, n: str, device: str, *, commit: bool = False) -> float:
        """When all of ``n``'s inputs can be on ``device``."""
        return max((self._arrive(k, device, commit) for k in self.table.reads[n]), default=0.0)

    def _slot(self, device: str, ready: float, dur: float) -> tuple[float, int, tuple[int, int]]:
        best: tuple[float, int, tuple[int, int]] = (math.inf, 0, (0, 0))
        for li, lane in enumerate(self.lanes[device]):
            if self.insertion:
                s, pos = lane.earliest(ready, dur)
            else:
                s, pos = max(ready, lane.end), lane.tail()
            if s < best[0]:
                best = (s, li, pos)
        return best

    def eft(self, n: str, device: str) -> tuple[float, float]:
        """(start, finish) of ``n`` if it were placed on ``device`` now.

        The device is held for dispatch + op time (the simulator's stream waits
        for the host dispatcher); with ``contention`` the dispatch also waits for
        a free host dispatch lane. A zero-cost op (a view) takes no device time.
        """
        disp, w = self.table.disp[n][device], self.table.w[n][device]
        if math.isinf(w):
            return math.inf, math.inf
        ready = self.ready_time(n, device)
        if disp == 0.0 and w == 0.0:
            return ready, ready
        if self.contention and disp > 0.0:
            ready = max(ready, min(self.host_free))
        s = self._slot(device, ready, disp + w)[0]
        return s, s + disp + w

    def assign(self, n: str, device: str) -> tuple[float, float]:
        """Place ``n`` on ``device`` at its earliest start; returns (start, finish)."""
        disp, w = self.table.disp[n][device], self.table.w[n][device]
        if math.isinf(w):
            raise SchedulerError(f"node {n!r} does not fit in the memory of device {device!r}")
        ready = self.ready_time(n, device, commit=True)
        if disp == 0.0 and w == 0.0:
            s, f = ready, ready
        else:
            lane = min(range(len(self.host_free)), key=self.host_free.__getitem__)
            if self.contention and disp > 0.0:
                ready = max(ready, self.host_free[lane])
            s, li, pos = self._slot(device, ready, disp + w)
            f = s + disp + w
            self.lanes[device][li].insert(pos, s, f)
            if self.contention and disp > 0.0:
                self.host_free[lane] = max(self.host_free[lane], s + disp)
        self.placement[n] = device
        self.start[n] = s
        self.finish[n] = f
        self.sequence.append(n)
        self.end = max(self.end, f)
        for k in self.table.outputs.get(n, ()):
            self.end = max(self.end, self._arrive(k, self.table.platform.host, True))
        return s, f

    def best_device(self, n: str, devices: Iterable[str] | None = None) -> tuple[str, float, float]:
        """Device with the earliest finish for ``n`` (first in order on ties)."""
        best = ("", math.inf, math.inf)
        for d in devices if devices is not None else self.table.devices:
            s, f = self.eft(n, d)
            if f < best[2]:
                best = (d, s, f)
        if not best[0]:
            raise SchedulerError(f"node {n!r} fits on none of the candidate devices")
        return best

    # ------------------------------------------------------------------ results
    @property
    def makespan(self) -> float:
        """Latest finish (graph outputs delivered to the host included)."""
        return self.end

    def priority(self) -> dict[str, float]:
        """Integer priorities: planned start order (ties: assignment order)."""
        pos = {n: i for i, n in enumerate(self.sequence)}
        ordered = sorted(self.sequence, key=lambda n: (self.start[n], pos[n]))
        return {n: float(i) for i, n in enumerate(ordered)}

    def to_plan(self, **meta: Any) -> Plan:
        """The plan: placement, planned start order, ``meta["makespan_estimate"]``."""
        return Plan(
            placement=dict(self.placement),
            priority=self.priority(),
            meta={"makespan_estimate": self.makespan, **meta},
        )


def list_schedule(
    table: CostTable,
    placement: Mapping[str, str],
    order: Sequence[str] | None = None,
    *,
    insertion: bool = False,
    contention: bool = True,
    presorted: bool = False,
) -> EFTState:
    """Schedule a fixed placement in a fixed order; the cheap makespan estimator.

    Nodes are taken in ``order`` (made topological: a stable topological sort on
    position), each at its earliest start on its device. With the defaults this
    mirrors the simulator (link and host contention, no reordering), in
    O(V + E x hops). ``state.priority()`` gives the plan's priorities.
    ``presorted=True``: ``order`` is already topological (skips the sort).
    """
    if not (presorted and order is not None):
        prio = topo_priority(table.graph, order)
        order = sorted(prio, key=prio.__getitem__)
    state = EFTState(table, insertion=insertion, contention=contention)
    for n in order:
        state.assign(n, placement[n])
    return state
