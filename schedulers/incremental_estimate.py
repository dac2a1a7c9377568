"""The list-scheduling estimator, re-run only where a change of placement reaches.

:func:`schedulers.base.list_schedule` (``insertion=False, contention=True``)
takes the nodes in a fixed order and places each at its earliest start on its
device's streams, after its inputs' transfers (serialised on link directions,
cached per (tensor, device)) and a host dispatch lane. A local search such as
cp-greedy prices thousands of placements that differ from a base one in a few
nodes; re-running the whole estimator for each is O(V + E) per candidate.

:class:`IncrementalListSchedule` keeps the base schedule per position of the
order (each node's device and finish, the transfers it cached, the resource
free times it changed) and prices a change from the first changed position
``i`` onwards only, with the base state at ``i``:

* **rejoin** (exact): once every changed node is placed, the re-run stops at
  the first position where no difference is pending (every node or cached
  transfer that differs from the base has no consumer left, every resource
  still used later is free at the same time as in the base): the rest of the
  schedule is the base's, and the makespan is the larger of the re-run's and
  the base's remaining finishes. The result equals the full estimator's bit for
  bit.
* **dominance** (a bound, with ``threshold``): when every pending difference is
  later than the base (no node, transfer or resource earlier, nothing placed or
  cached differently, no multi-lane group different: the single-lane schedule is
  monotone in its inputs), the rest finishes no earlier than the base's, so the
  makespan is at least the larger of the re-run's and the base's remaining
  finishes; a candidate whose bound (or whose re-run alone) reaches
  ``threshold`` is abandoned.
* **tails** (a bound, with ``threshold``, one stream per device and one
  dispatch lane): past the changed nodes, the makespan is at least each time of
  the re-run's state (device and host free times, finishes and cached arrivals
  that differ from the base) plus the longest chain of precedences the base
  placement puts after it (:class:`~schedulers.placement_tails.PlacementTails`),
  checked 1, 2, 3, 5, 8, 12 ... positions past the changed nodes (half as far
  again each time). This is the bound that cuts most candidates a few
  positions after the move.

Bounds computed in floating point are lowered by more than their rounding
error, so a candidate is only cut when its exact makespan reaches
``threshold``: a search that accepts a candidate only below the threshold
makes the same decisions as with full re-runs.

A candidate costs what it changes: the positions from ``i`` to where its effect
dies out or is shown not to pay, not the graph.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from hetsim.schedulers.placement_tails import PlacementTails

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.base import CostTable

__all__ = ["IncrementalListSchedule"]

_STRUCT, _BETTER, _WORSE = 0, 1, 2


class _Window:
    """What a re-run from position ``start`` to ``stop`` computed (positions
    ``start .. stop - 1``), kept so that an accepted change is spliced in."""

    __slots__ = ("changed", "contrib", "created", "finish", "makespan", "place", "start", "stop", "writes")

    def __init__(self, start: int) -> None:
        self.start = start
        self.stop = start
        self.place: list[int] = []
        self.finish: list[float] = []
        self.contrib: list[float] = []
        self.writes: list[list[tuple[int, float]]] = []
        self.created: list[list[tuple[int, float]]] = []
        self.makespan = math.inf
        self.changed: dict[int, int] = {}


class IncrementalListSchedule:
    """A base placement's list schedule that prices changes of placement incrementally.

    Parameters
    ----------
    table
        The priced graph and platform.
    placement
        Base placement, node -> device name.
    order
        Topological order the estimator takes the nodes in (as
        ``list_schedule(table, placement, order, presorted=True)``).

    Notes
    -----
    :meth:`evaluate` costs O(positions re-run x in-degree x hops), plus an
    O(log V) look-up per resource to restore the base state and the tail
    checks (O(log V) each, per differing time); :meth:`commit` splices the
    re-run in (O(window) plus vectorised O(V) prefix and suffix maxima) and
    makes the tails before the moved nodes stale (recomputed lazily, O(in- +
    out-degree + log V) per op). The base build is one full run, O(V + E).

    Examples
    --------
    >>> from hetsim import zoo
    >>> from hetsim.costmodel import Roofline
    >>> from hetsim.sim import Platform
    >>> from hetsim.schedulers.base import CostTable, list_schedule
    >>> g = zoo.load("googlenet")
    >>> table = CostTable(g, Platform.preset("xeon-p2200"), Roofline())
    >>> base = dict.fromkeys(table.topo, "gpu")
    >>> est = IncrementalListSchedule(table, base, table.topo)
    >>> n = table.topo[10]
    >>> est.evaluate({n: "cpu"}) == list_schedule(table, {**base, n: "cpu"}, table.topo, presorted=True).makespan
    True
    """

    def __init__(self, table: CostTable, placement: Mapping[str, str], order: list[str]) -> None:
        plat = table.platform
        self.table = table
        self.order = list(order)
        self.pos = {n: p for p, n in enumerate(self.order)}
        devs = table.devices
        self.dev_index = {d: k for k, d in enumerate(devs)}
        nd = len(devs)
        self.nd = nd
        self.host = self.dev_index[plat.host]
        # resources: link directions, host dispatch lanes, device stream lanes
        names: list[str] = [r for r, _ in plat.link_resources()]
        self.link_res = {r: k for k, r in enumerate(dict.fromkeys(names))}
        nres = len(self.link_res)
        groups: list[list[int]] = [[k] for k in range(nres)]
        self.hlanes = list(range(nres, nres + plat.dispatch_threads))
        groups.append(self.hlanes)
        nres += plat.dispatch_threads
        self.dlanes: list[list[int]] = []
        for d in plat.devices:
            lanes = list(range(nres, nres + d.streams))
            self.dlanes.append(lanes)
            groups.append(lanes)
            nres += d.streams
        self.nres = nres
        self.group = [0] * nres
        for g, members in enumerate(groups):
            for r in members:
                self.group[r] = g
        self.groups = groups
        self.mono = [len(groups[self.group[r]]) == 1 for r in range(nres)]
        # tensors: id, producer position (-1: graph input on the host), bytes, last use
        keys = list(table.tensors)
        kid = {k: j for j, k in enumerate(keys)}
        tens = table.tensors
        self.kprod = [self.pos[tens[k].producer] if tens[k].producer is not None else -1 for k in keys]
        self.kbytes = [tens[k].nbytes for k in keys]
        self.klast = [max((self.pos[c] for c in tens[k].consumers), default=-1) for k in keys]
        order_ = self.order
        self.reads = [[kid[k] for k in table.reads[n]] for n in order_]
        self.outs = [[kid[k] for k in table.outputs.get(n, ())] for n in order_]
        self.w = [[table.w[n][d] for d in devs] for n in order_]
        self.disp = [[table.disp[n][d] for d in devs] for n in order_]
        succ = table.graph.nx.succ
        self.nlast = [max((self.pos[s] for s in succ[n]), default=-1) for n in order_]
        self._hops: dict[tuple[int, int, int], tuple[tuple[int, float], ...]] = {}
        self._hop_times: dict[tuple[int, int, int], float] = {}
        # who reads what: (position, read index) per tensor and per producing node
        self.kreaders: list[list[tuple[int, int]]] = [[] for _ in keys]
        self.readers: list[list[tuple[int, int]]] = [[] for _ in order_]
        for c, rk in enumerate(self.reads):
            for j, k in enumerate(rk):
                self.kreaders[k].append((c, j))
                if self.kprod[k] >= 0:
                    self.readers[self.kprod[k]].append((c, j))
        # a bound summed in floating point, lowered by more than its rounding error
        hops = max((len(plat.link_directions(a, b)) for a in devs for b in devs if a != b), default=0)
        self.tail_slack = 1.0 - 4 * ((3 + 2 * hops) * len(order_) + 16) * 2.0**-53
        # the base schedule
        v = len(order_)
        self.place = [self.dev_index[placement[n]] for n in order_]
        self.finish = [0.0] * v
        self.contrib = np.zeros(v)
        self.writes: list[list[tuple[int, float]]] = [[] for _ in range(v)]
        self.created: list[list[tuple[int, float]]] = [[] for _ in range(v)]
        self.entry: dict[int, tuple[int, float]] = {}
        self.hpos: list[list[int]] = [[] for _ in range(nres)]
        self.hval: list[list[float]] = [[] for _ in range(nres)]
        self.glast = [-1] * len(groups)
        self.premax = np.zeros(v + 1)
        self.sufmax = np.zeros(v + 1)
        self._last: _Window | None = None
        self._splice(self._run(0, {}, -1, math.inf, compare=False))
        single = all(len(g) == 1 for g in groups)
        self.tails = PlacementTails(self) if single else None

    # ------------------------------------------------------------------ queries
    @property
    def makespan(self) -> float:
        """The base placement's estimated makespan (``list_schedule(...).makespan``)."""
        return float(self.premax[-1])

    def placement(self) -> dict[str, str]:
        """The base placement, node -> device name."""
        devs = self.table.devices
        return {n: devs[d] for n, d in zip(self.order, self.place)}

    def evaluate(self, changes: Mapping[str, str], threshold: float = math.inf) -> float:
        """Makespan of the base placement with ``changes`` (node -> device) applied.

        Parameters
        ----------
        changes
            New devices of some nodes (a node on its base device is no change).
        threshold
            Give up as soon as the makespan is shown to be at least this.

        Returns
        -------
        float
            The estimator's makespan, bit for bit, when it is below ``threshold``;
            else a number ``>= threshold`` that bounds it from below.
        """
        chg = self._positions(changes)
        if not chg:
            return self.makespan
        win = self._run(min(chg), chg, max(chg), threshold, compare=True)
        win.changed = chg
        self._last = win if win.makespan < threshold else None
        return win.makespan

    def commit(self, changes: Mapping[str, str]) -> float:
        """Make the base placement the one with ``changes`` applied; returns its makespan."""
        chg = self._positions(changes)
        if not chg:
            return self.makespan
        win = self._last
        if win is None or win.changed != chg:
            win = self._run(min(chg), chg, max(chg), math.inf, compare=True)
        self._last = None
        old = {p: self.place[p] for p in chg}
        self._splice(win)
        if self.tails is not None:
            self.tails.moved(old)
        return self.makespan

    # ------------------------------------------------------------------ internals
    def _positions(self, changes: Mapping[str, str]) -> dict[int, int]:
        """``changes`` as position -> device index, without the nodes already there."""
        chg = {}
        for n, d in changes.items():
            p, k = self.pos[n], self.dev_index[d]
            if self.place[p] != k:
                chg[p] = k
        return chg

    def _hop_list(self, nbytes: int, src: int, dst: int) -> tuple[tuple[int, float], ...]:
        key = (nbytes, src, dst)
        hit = self._hops.get(key)
        if hit is None:
            devs = self.table.devices
            cost = self.table.cost
            hit = tuple(
                (self.link_res[res], float(cost.transfer_time(nbytes, link)))
                for res, link in self.table.hops(devs[src], devs[dst])
            )
            self._hops[key] = hit
        return hit

    def hop_time(self, nbytes: int, src: int, dst: int) -> float:
        """Contention-free seconds of ``nbytes`` from device ``src`` to ``dst`` (indices)."""
        key = (nbytes, src, dst)
        hit = self._hop_times.get(key)
        if hit is None:
            hit = self._hop_times[key] = sum(tt for _, tt in self._hop_list(nbytes, src, dst))
        return hit

    def _state_at(self, i: int) -> list[float]:
        out = []
        for hp, hv in zip(self.hpos, self.hval):
            j = bisect_left(hp, i) - 1
            out.append(hv[j] if j >= 0 else 0.0)
        return out

    def _run(self, i: int, chg: dict[int, int], unit_last: int, thr: float, *, compare: bool) -> _Window:
        """Re-run the estimator from position ``i`` with the devices ``chg`` (position
        -> device index); ``compare=False`` builds from scratch (no base yet)."""
        win = _Window(i)
        v = len(self.order)
        cur = self._state_at(i) if compare else [0.0] * self.nres
        bcur = list(cur)
        new_end = float(self.premax[i]) if compare else 0.0
        place, finish, writes, created = self.place, self.finish, self.writes, self.created
        kprod, kbytes, klast, nlast = self.kprod, self.kbytes, self.klast, self.nlast
        reads, outs, wt, dp = self.reads, self.outs, self.w, self.disp
        hops_cache, hop_list, entry = self._hops, self._hop_list, self.entry
        hlanes, dlanes, host = self.hlanes, self.dlanes, self.host
        group, glast, mono = self.group, self.glast, self.mono
        sufmax = self.sufmax
        nd = self.nd
        wplace, wfin, wcontrib, wwrites, wcreated = win.place, win.finish, win.contrib, win.writes, win.created
        overlay: dict[int, float] = {}
        counts = [0, 0, 0]
        expire: dict[int, list[int]] = {}
        resources = range(self.nres)
        watch: list[tuple[int, int, float, int, int]] = []  # (0 node / 1 cached, id, time, device, last)
        tails = self.tails if compare and thr < math.inf else None
        tail_slack = self.tail_slack
        next_check = unit_last + 1

        def arrive(k: int, src: int, t0: float, dst: int, mine: list, made: list) -> float:
            # tensor k, ready on src at t0, on dst: cached, or over each hop in turn
            hl = hops_cache.get((kbytes[k], src, dst))
            if hl is None:
                hl = hop_list(kbytes[k], src, dst)
            if not hl:
                return t0
            kd = k * nd + dst
            a = overlay.get(kd)
            if a is not None:
                return a
            e = entry.get(kd) if compare else None
            if e is not None and e[0] < i:
                return e[1]
            a = t0
            for r, tt in hl:
                if cur[r] > a:
                    a = cur[r]
                a += tt
                cur[r] = a
                mine.append((r, a))
            overlay[kd] = a
            made.append((kd, a))
            return a

        p = i
        while p < v:
            if compare:
                gone = expire.pop(p, None)
                if gone:
                    for c in gone:
                        counts[c] -= 1
                if new_end >= thr:
                    break
                if tails is not None and p == next_check:  # 1, 2, 3, 5, 8, 12 ... past the changed nodes
                    next_check = p + 1 + (p - unit_last) // 2
                    watch = [x for x in watch if x[4] >= p]
                    if p < tails.valid_from:
                        tails.extend(p)
                    lb = new_end
                    for d, lanes in enumerate(dlanes):
                        t = cur[lanes[0]] + tails.lane(d, p)
                        if t > lb:
                            lb = t
                    t = cur[hlanes[0]] + tails.host(p)
                    if t > lb:
                        lb = t
                    for kind, x, val, d, _ in watch:
                        t = val + (tails.node(x, d, p) if kind == 0 else tails.cached(x, p))
                        if t > lb:
                            lb = t
                    if lb * tail_slack >= thr:  # what is left after one of these times is too long
                        new_end = lb * tail_slack
                        break
                if p > unit_last and counts[_STRUCT] == 0 and counts[_BETTER] == 0:
                    live = [r for r in resources if cur[r] != bcur[r] and glast[group[r]] >= p]
                    if counts[_WORSE] == 0 and not live:  # rejoined the base schedule
                        new_end = max(new_end, float(sufmax[p]))
                        break
                    if all(mono[r] and cur[r] > bcur[r] for r in live):  # dominates the base
                        lb = max(new_end, float(sufmax[p]))
                        if lb >= thr:
                            new_end = lb
                            break
            dv = chg.get(p, place[p]) if compare else place[p]
            mine: list[tuple[int, float]] = []
            made: list[tuple[int, float]] = []
            ready = 0.0
            for k in reads[p]:
                q = kprod[k]
                if q < 0:
                    src, t0 = host, 0.0
                elif q >= i:
                    src, t0 = wplace[q - i], wfin[q - i]
                else:
                    src, t0 = place[q], finish[q]
                if src != dv:
                    t0 = arrive(k, src, t0, dv, mine, made)
                if t0 > ready:
                    ready = t0
            ds, w = dp[p][dv], wt[p][dv]
            if ds == 0.0 and w == 0.0:
                f = ready
            else:
                hl_ = hlanes[0]
                for r in hlanes:
                    if cur[r] < cur[hl_]:
                        hl_ = r
                if ds > 0.0 and cur[hl_] > ready:
                    ready = cur[hl_]
                lanes = dlanes[dv]
                s, li = math.inf, lanes[0]
                for r in lanes:
                    t = cur[r] if cur[r] > ready else ready
                    if t < s:
                        s, li = t, r
                f = s + ds + w
                cur[li] = f
                mine.append((li, f))
                if ds > 0.0:
                    t = s + ds
                    if t > cur[hl_]:
                        cur[hl_] = t
                    mine.append((hl_, cur[hl_]))
            contrib = f
            if dv != host:
                for k in outs[p]:
                    a = arrive(k, dv, f, host, mine, made)
                    if a > contrib:
                        contrib = a
            if contrib > new_end:
                new_end = contrib
            wplace.append(dv)
            wfin.append(f)
            wcontrib.append(contrib)
            wwrites.append(mine)
            wcreated.append(made)
            if compare:
                # differences this position leaves pending, each until its last reader
                if dv != place[p]:
                    c = _STRUCT
                else:
                    bf = finish[p]
                    c = -1 if f == bf else _BETTER if f < bf else _WORSE
                if c >= 0 and nlast[p] > p:
                    counts[c] += 1
                    expire.setdefault(nlast[p] + 1, []).append(c)
                    if c != _BETTER:
                        watch.append((0, p, f, dv, nlast[p]))
                theirs = created[p]
                if made or theirs:
                    base_made = dict(theirs)
                    for kd, a in made:
                        b = base_made.pop(kd, None)
                        c = _STRUCT if b is None else -1 if a == b else _BETTER if a < b else _WORSE
                        last = klast[kd // nd]
                        if c >= 0 and last > p:
                            counts[c] += 1
                            expire.setdefault(last + 1, []).append(c)
                            if c != _BETTER:
                                watch.append((1, kd, a, 0, last))
                    for kd in base_made:
                        last = klast[kd // nd]
                        if last > p:
                            counts[_STRUCT] += 1
                            expire.setdefault(last + 1, []).append(_STRUCT)
                for r, a in writes[p]:
                    bcur[r] = a
            p += 1
        win.stop = p
        win.makespan = new_end
        return win

    def _splice(self, win: _Window) -> None:
        """Make the re-run ``win`` part of the base schedule."""
        i, j = win.start, win.stop
        for p in range(i, j):
            for kd, _ in self.created[p]:
                del self.entry[kd]
        touched = {r for p in range(i, j) for r, _ in self.writes[p]}
        self.place[i:j] = win.place
        self.finish[i:j] = win.finish
        self.contrib[i:j] = win.contrib
        self.writes[i:j] = win.writes
        self.created[i:j] = win.created
        for p in range(i, j):
            for kd, a in self.created[p]:
                self.entry[kd] = (p, a)
        new: dict[int, tuple[list[int], list[float]]] = {}
        for p in range(i, j):
            for r, a in self.writes[p]:
                ps, vs = new.setdefault(r, ([], []))
                if ps and ps[-1] == p:
                    vs[-1] = a
                else:
                    ps.append(p)
                    vs.append(a)
                touched.add(r)
        for r in touched:
            hp, hv = self.hpos[r], self.hval[r]
            lo, hi = bisect_left(hp, i), bisect_left(hp, j)
            ps, vs = new.get(r, ([], []))
            hp[lo:hi] = ps
            hv[lo:hi] = vs
        for g, members in enumerate(self.groups):
            self.glast[g] = max((self.hpos[r][-1] for r in members if self.hpos[r]), default=-1)
        c = self.contrib
        self.premax[1:] = np.maximum.accumulate(c) if len(c) else c
        np.maximum(self.premax, 0.0, out=self.premax)
        self.sufmax[:-1] = np.maximum.accumulate(c[::-1])[::-1] if len(c) else c
