"""Lower bounds on what a placement's list schedule still has to do after each op.

In the list-scheduling estimator of :func:`schedulers.eft_state.list_schedule` with one
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
O(in-degree + out-degree) per op computed, compiled (numba); the next op of each
device lane and of the dispatch lane after every position is a table, rebuilt
below a moved op (O(position x devices), compiled).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numba import njit

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.incremental_estimate import IncrementalListSchedule

__all__ = ["PlacementTails"]

NEG = -np.inf


@njit(cache=True)
def rebuild_next(hi: int, place: np.ndarray, w: np.ndarray, disp: np.ndarray, nxt_lane: np.ndarray,
                 nxt_disp: np.ndarray) -> None:  # pragma: no cover - compiled
    """Rows ``hi .. 0`` of the next-op tables: ``nxt_lane[p, d]`` is the first
    position ``>= p`` whose op occupies device ``d``'s lane (``v``: none),
    ``nxt_disp[p]`` the first the host dispatches."""
    nd = nxt_lane.shape[1]
    for q in range(hi, -1, -1):
        for d in range(nd):
            nxt_lane[q, d] = nxt_lane[q + 1, d]
        nxt_disp[q] = nxt_disp[q + 1]
        dv = place[q]
        ds = disp[q, dv]
        if ds != 0.0 or w[q, dv] != 0.0:
            nxt_lane[q, dv] = q
        if ds > 0.0:
            nxt_disp[q] = q


@njit(cache=True)
def extend_tails(p: int, tvalid: np.ndarray, tstart: np.ndarray, place: np.ndarray, w: np.ndarray,
                 disp: np.ndarray, host: int, outs_ptr: np.ndarray, outs_k: np.ndarray, ksz: np.ndarray,
                 hop_sum: np.ndarray, readers_ptr: np.ndarray, readers_c: np.ndarray, readers_k: np.ndarray,
                 nxt_lane: np.ndarray, nxt_disp: np.ndarray) -> None:  # pragma: no cover - compiled
    """Compute ``tstart`` for the positions ``p .. tvalid[0] - 1`` (backwards)."""
    v = tstart.shape[0]
    for q in range(tvalid[0] - 1, p - 1, -1):
        dv = place[q]
        tf = 0.0  # the finish is a contribution to the end
        if dv != host:
            for e in range(outs_ptr[q], outs_ptr[q + 1]):
                t = hop_sum[ksz[outs_k[e]], dv, host]
                if t > tf:
                    tf = t
        for e in range(readers_ptr[q], readers_ptr[q + 1]):
            c = readers_c[e]
            dc = place[c]
            t = tstart[c] + (hop_sum[ksz[readers_k[e]], dv, dc] if dc != dv else 0.0)
            if t > tf:
                tf = t
        ds, wq = disp[q, dv], w[q, dv]
        if ds == 0.0 and wq == 0.0:
            tstart[q] = tf
            continue
        nx = nxt_lane[q + 1, dv]
        if nx < v and tstart[nx] > tf:
            tf = tstart[nx]
        tr = tf + ds + wq
        if ds > 0.0:
            nx = nxt_disp[q + 1]
            if nx < v and tstart[nx] + ds > tr:
                tr = tstart[nx] + ds
        tstart[q] = tr
    if p < tvalid[0]:
        tvalid[0] = p


@njit(cache=True)
def tail_lane(tstart: np.ndarray, nxt_lane: np.ndarray, d: int, p: int) -> float:  # pragma: no cover - compiled
    """Longest path from device ``d``'s free time at position ``p`` to the end."""
    q = nxt_lane[p, d]
    return tstart[q] if q < tstart.shape[0] else -np.inf


@njit(cache=True)
def tail_host(tstart: np.ndarray, nxt_disp: np.ndarray, p: int) -> float:  # pragma: no cover - compiled
    """Longest path from the host dispatcher's free time at position ``p`` to the end."""
    q = nxt_disp[p]
    return tstart[q] if q < tstart.shape[0] else -np.inf


@njit(cache=True)
def tail_node(tstart: np.ndarray, place: np.ndarray, readers_ptr: np.ndarray, readers_c: np.ndarray,
              readers_k: np.ndarray, ksz: np.ndarray, hop_sum: np.ndarray, n: int, d: int,
              p: int) -> float:  # pragma: no cover - compiled
    """Longest path from the finish of the op at position ``n``, on device ``d``,
    through its readers at or after ``p``, to the end."""
    best = -np.inf
    for e in range(readers_ptr[n], readers_ptr[n + 1]):
        c = readers_c[e]
        if c >= p:
            dc = place[c]
            t = tstart[c] + (hop_sum[ksz[readers_k[e]], d, dc] if dc != d else 0.0)
            if t > best:
                best = t
    return best


@njit(cache=True)
def tail_cached(tstart: np.ndarray, place: np.ndarray, kreaders_ptr: np.ndarray, kreaders_c: np.ndarray,
                nd: int, kd: int, p: int) -> float:  # pragma: no cover - compiled
    """Longest path from a cached transfer (tensor x device ``kd``) through its
    readers at or after ``p`` on that device, to the end."""
    k, dst = kd // nd, kd % nd
    best = -np.inf
    for e in range(kreaders_ptr[k], kreaders_ptr[k + 1]):
        c = kreaders_c[e]
        if c >= p and place[c] == dst and tstart[c] > best:
            best = tstart[c]
    return best


class PlacementTails:
    """Backward longest paths of a base placement's precedences (see the module).

    Parameters
    ----------
    est
        The estimator whose base placement and order are read; call :meth:`moved`
        after its placement changes.

    Attributes
    ----------
    start : numpy.ndarray
        Per position, the longest path from the op's start to the end (``-inf``
        where not computed).
    tvalid : numpy.ndarray
        ``[first]``: :attr:`start` is computed for the positions from ``first`` on
        (an array, so that the compiled loops update it in place).
    nxt_lane : numpy.ndarray
        ``(V + 1, D)``: the first position at or after each one whose op occupies
        each device's lane (``V``: none).
    nxt_disp : numpy.ndarray
        ``(V + 1,)``: the first position at or after each one that the host dispatches.
    """

    def __init__(self, est: IncrementalListSchedule) -> None:
        self.est = est
        v = len(est.order)
        self.start = np.full(v, NEG)
        self.tvalid = np.array([v], dtype=np.int64)
        self.nxt_lane = np.full((v + 1, est.nd), v, dtype=np.int64)
        self.nxt_disp = np.full(v + 1, v, dtype=np.int64)
        rebuild_next(v - 1, est.place, est.w, est.disp, self.nxt_lane, self.nxt_disp)

    def moved(self, hi: int) -> None:
        """Ops at positions up to ``hi`` (the last one moved) changed devices (the base
        placement now has their new ones)."""
        est = self.est
        rebuild_next(hi, est.place, est.w, est.disp, self.nxt_lane, self.nxt_disp)
        self.tvalid[0] = max(int(self.tvalid[0]), hi + 1)

    def extend(self, p: int) -> None:
        """Compute :attr:`start` for every position from ``p`` on."""
        est = self.est
        extend_tails(p, self.tvalid, self.start, est.place, est.w, est.disp, est.host, est.outs_ptr,
                     est.outs_k, est.ksz, est.hop_sum, est.readers_ptr, est.readers_c, est.readers_k,
                     self.nxt_lane, self.nxt_disp)

    def lane(self, d: int, p: int) -> float:
        """Longest path from device ``d``'s free time at position ``p`` to the end."""
        return float(tail_lane(self.start, self.nxt_lane, d, p))

    def node(self, n: int, d: int, p: int) -> float:
        """Longest path from the finish of the op at position ``n``, on device ``d``,
        through its readers at or after ``p``, to the end."""
        est = self.est
        return float(tail_node(self.start, est.place, est.readers_ptr, est.readers_c, est.readers_k,
                               est.ksz, est.hop_sum, n, d, p))
