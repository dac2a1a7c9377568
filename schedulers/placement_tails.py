"""Lower bounds on what a placement's list schedule still has to do after each op.

In the list-scheduling estimator of :func:`schedulers.base.list_schedule` with one
stream per device and one host dispatch lane, every op starts no earlier than its
device's previous op finished, than the host dispatched the previous op, and
than each input's producer finished plus the input's contention-free transfer
time (a transfer that waits for a link, or a cached one made earlier, arrives no
sooner). These precedences depend on the placement and the order only, not on
the times, and hold whatever happened before: so once a re-run of the estimator
is past the nodes whose device changed, the makespan is at least ``t + tail``
for every time ``t`` of its state (a device or host free time, a finish, a cached
arrival), ``tail`` being the longest path of such precedences from what reads
it to the end. :class:`PlacementTails` keeps ``tail`` per op, computed backwards
and lazily (only down to the earliest position asked about), for the base
placement of an :class:`~schedulers.incremental_estimate.IncrementalListSchedule`.
O(in-degree + out-degree + log V) per op computed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.incremental_estimate import IncrementalListSchedule

__all__ = ["PlacementTails"]

NEG = float("-inf")


class PlacementTails:
    """Backward longest paths of a base placement's precedences (see the module).

    Parameters
    ----------
    est
        The estimator whose base placement and order are read; call :meth:`moved`
        after its placement changes.

    Attributes
    ----------
    valid_from : int
        :attr:`start` is computed for the positions from this one on.
    start : list[float]
        Per position, the longest path from the op's start to the end (``-inf``
        where not computed).
    """

    def __init__(self, est: IncrementalListSchedule) -> None:
        self.est = est
        v = len(est.order)
        self.lanes: list[list[int]] = [[] for _ in range(est.nd)]  # positions of the ops on each device
        self.dispatched: list[int] = []  # positions of the ops the host dispatches
        for p, d in enumerate(est.place):
            self._add(p, d)
        self.start = [NEG] * v
        self.valid_from = v

    def _add(self, p: int, d: int) -> None:
        est = self.est
        ds, w = est.disp[p][d], est.w[p][d]
        if ds != 0.0 or w != 0.0:
            insort(self.lanes[d], p)
        if ds > 0.0:
            insort(self.dispatched, p)

    def moved(self, old: dict[int, int]) -> None:
        """The ops at these positions left these devices (the base placement now has
        their new ones)."""
        for p, d in old.items():
            lane = self.lanes[d]
            j = bisect_left(lane, p)
            if j < len(lane) and lane[j] == p:
                del lane[j]
            j = bisect_left(self.dispatched, p)
            if j < len(self.dispatched) and self.dispatched[j] == p:
                del self.dispatched[j]
            self._add(p, self.est.place[p])
        self.valid_from = max(self.valid_from, max(old) + 1)

    def extend(self, p: int) -> None:
        """Compute :attr:`start` for every position from ``p`` on."""
        est = self.est
        place, outs, kbytes, readers = est.place, est.outs, est.kbytes, est.readers
        wt, dp, hop_time, host = est.w, est.disp, est.hop_time, est.host
        reads, start, lanes, dispatched = est.reads, self.start, self.lanes, self.dispatched
        for q in range(self.valid_from - 1, p - 1, -1):
            dv = place[q]
            tf = 0.0  # the finish is a contribution to the end
            if dv != host:
                for k in outs[q]:
                    t = hop_time(kbytes[k], dv, host)
                    if t > tf:
                        tf = t
            for c, j in readers[q]:
                dc = place[c]
                t = start[c] + (hop_time(kbytes[reads[c][j]], dv, dc) if dc != dv else 0.0)
                if t > tf:
                    tf = t
            ds, w = dp[q][dv], wt[q][dv]
            if ds == 0.0 and w == 0.0:
                start[q] = tf
                continue
            lane = lanes[dv]
            j = bisect_right(lane, q)
            if j < len(lane) and start[lane[j]] > tf:
                tf = start[lane[j]]
            tr = tf + ds + w
            if ds > 0.0:
                j = bisect_right(dispatched, q)
                if j < len(dispatched) and start[dispatched[j]] + ds > tr:
                    tr = start[dispatched[j]] + ds
            start[q] = tr
        if p < self.valid_from:
            self.valid_from = p

    def lane(self, d: int, p: int) -> float:
        """Longest path from device ``d``'s free time at position ``p`` to the end."""
        lane = self.lanes[d]
        j = bisect_left(lane, p)
        return self.start[lane[j]] if j < len(lane) else NEG

    def host(self, p: int) -> float:
        """Longest path from the host dispatcher's free time at position ``p`` to the end."""
        j = bisect_left(self.dispatched, p)
        return self.start[self.dispatched[j]] if j < len(self.dispatched) else NEG

    def node(self, n: int, d: int, p: int) -> float:
        """Longest path from the finish of the op at position ``n``, on device ``d``,
        through its readers at or after ``p``, to the end."""
        est = self.est
        best = NEG
        for c, j in est.readers[n]:
            if c >= p:
                dc = est.place[c]
                t = self.start[c] + (est.hop_time(est.kbytes[est.reads[c][j]], d, dc) if dc != d else 0.0)
                if t > best:
                    best = t
        return best

    def cached(self, kd: int, p: int) -> float:
        """Longest path from a cached transfer (tensor x device ``kd``) through its
        readers at or after ``p`` on that device, to the end."""
        est = self.est
        k, dst = divmod(kd, est.nd)
        best = NEG
        for c, _ in est.kreaders[k]:
            if c >= p and est.place[c] == dst and self.start[c] > best:
                best = self.start[c]
        return best
