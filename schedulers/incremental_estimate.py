"""The list-scheduling estimator, re-run only where a change of placement reaches.

:func:`schedulers.eft_state.list_schedule` (``insertion=False, contention=True``)
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
dies out or is shown not to pay, not the graph. The re-run and the splice are
compiled (:mod:`schedulers.incremental_kernel`, numba) over flat arrays indexed
by position; this class prepares them and keeps the base schedule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from hetsim.schedulers.incremental_kernel import run_window, splice_window
from hetsim.schedulers.placement_tails import PlacementTails

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.schedulers.base import CostTable


__all__ = ["IncrementalListSchedule"]


def _csr(rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Row pointers and flat values of a list of integer lists."""
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    flat = np.fromiter((x for r in rows for x in r), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


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

    Attributes
    ----------
    place : numpy.ndarray
        Base device index per position of the order.
    finish : numpy.ndarray
        Base finish time per position.
    state : numpy.ndarray
        ``(V + 1, R)``: each resource's free time before each position (link
        directions, then the host dispatch lanes, then each device's stream lanes,
        as :attr:`hlanes` and :attr:`dlanes` number them).
    tails : PlacementTails or None
        The tail bounds (one stream per device and one dispatch lane only).

    Notes
    -----
    :meth:`evaluate` costs O(positions re-run x in-degree x hops x R) (R
    resources, a handful) plus the tail checks (O(readers) per differing time);
    :meth:`commit` splices the re-run in, O(window x R + V x groups), and makes
    the tails before the moved nodes stale (recomputed lazily, O(in- +
    out-degree) per op). The base build is one full run, O(V + E); the tables
    take O((V + 1) x R) floats. The loops are compiled: a position re-run costs
    well under a microsecond on random layered DAGs.

    Examples
    --------
    >>> from hetsim import zoo
    >>> from hetsim.costmodel import Roofline
    >>> from hetsim.sim import Platform
    >>> from hetsim.schedulers.base import CostTable
    >>> from hetsim.schedulers.eft_state import list_schedule
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
        link_of = dict(plat.link_resources())
        self.link_res = {r: k for k, r in enumerate(link_of)}
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
        group = np.zeros(nres, dtype=np.int64)
        for g, members in enumerate(groups):
            group[members] = g
        mono = np.array([len(groups[g]) == 1 for g in group], dtype=np.bool_)
        # tensors: producer position (-1: graph input on the host), last use, size class
        keys = list(table.tensors)
        kid = {k: j for j, k in enumerate(keys)}
        tens = table.tensors
        pos = self.pos
        kprod = np.array([pos[tens[k].producer] if tens[k].producer is not None else -1 for k in keys], dtype=np.int64)
        klast = np.array([max((pos[c] for c in tens[k].consumers), default=-1) for k in keys], dtype=np.int64)
        sizes = sorted({tens[k].nbytes for k in keys})
        size_id = {b: u for u, b in enumerate(sizes)}
        self.ksz = np.array([size_id[tens[k].nbytes] for k in keys], dtype=np.int64)
        self._hop_tables(sizes, link_of)
        order_ = self.order
        reads = [[kid[k] for k in table.reads[n]] for n in order_]
        outs = [[kid[k] for k in table.outputs.get(n, ())] for n in order_]
        self.reads_ptr, self.reads_k = _csr(reads)
        self.outs_ptr, self.outs_k = _csr(outs)
        v = len(order_)
        self.w = np.array([[table.w[n][d] for d in devs] for n in order_], dtype=np.float64).reshape(v, nd)
        self.disp = np.array([[table.disp[n][d] for d in devs] for n in order_], dtype=np.float64).reshape(v, nd)
        succ = table.graph.nx.succ
        nlast = np.array([max((pos[s] for s in succ[n]), default=-1) for n in order_], dtype=np.int64)
        # who reads what: positions per tensor, and (position, tensor) per producing position
        kreaders: list[list[int]] = [[] for _ in keys]
        readers: list[list[int]] = [[] for _ in order_]
        reader_k: list[list[int]] = [[] for _ in order_]
        for c, rk in enumerate(reads):
            for k in rk:
                kreaders[k].append(c)
                if kprod[k] >= 0:
                    readers[kprod[k]].append(c)
                    reader_k[kprod[k]].append(k)
        self.kreaders_ptr, self.kreaders_c = _csr(kreaders)
        self.readers_ptr, self.readers_c = _csr(readers)
        _, self.readers_k = _csr(reader_k)
        # slots of the transfers each position may make: one per read and per output
        cptr = np.zeros(v + 1, dtype=np.int64)
        cptr[1:] = np.cumsum(np.diff(self.reads_ptr) + np.diff(self.outs_ptr))
        # a bound summed in floating point, lowered by more than its rounding error
        hops = max((len(plat.link_directions(a, b)) for a in devs for b in devs if a != b), default=0)
        self.tail_slack = 1.0 - 4 * ((3 + 2 * hops) * len(order_) + 16) * 2.0**-53
        dl_ptr, dl = _csr(self.dlanes)
        self._static = (self.reads_ptr, self.reads_k, self.outs_ptr, self.outs_k, kprod, klast, nlast,
                        self.ksz, self.hop_n, self.hop_r, self.hop_t, self.hop_sum, self.w, self.disp,
                        np.array(self.hlanes, dtype=np.int64), dl_ptr, dl, group, mono, self.host, cptr,
                        self.readers_ptr, self.readers_c, self.readers_k, self.kreaders_ptr, self.kreaders_c)
        self._cptr = cptr
        # the base schedule, and the buffers a re-run writes (same layout)
        ng, nslots, nkd = len(groups), int(cptr[-1]), len(keys) * nd
        self.place = np.array([self.dev_index[placement[n]] for n in order_], dtype=np.int64)
        self.finish = np.zeros(v)
        self.state = np.zeros((v + 1, nres))
        self._base = (self.place, self.finish, np.zeros(v), self.state, np.zeros((v, ng), dtype=np.uint8),
                      np.full(ng, -1, dtype=np.int64), np.full(nkd, -1, dtype=np.int64), np.zeros(nkd),
                      np.zeros(v, dtype=np.int64), np.zeros(nslots, dtype=np.int64), np.zeros(nslots),
                      np.zeros(v + 1), np.zeros(v + 1))
        self._chgdev = np.full(v, -1, dtype=np.int64)
        nwatch = v + nslots + 1
        self._scratch = (self._chgdev, np.zeros(v, dtype=np.int64), np.zeros(v), np.zeros(v),
                         np.zeros((v + 1, nres)), np.zeros((v, ng), dtype=np.uint8), np.zeros(v, dtype=np.int64),
                         np.zeros(nslots, dtype=np.int64), np.zeros(nslots),
                         np.zeros(nkd), np.zeros(nkd, dtype=np.int64),
                         np.zeros((v + 2, 3), dtype=np.int64), np.zeros(v + 2, dtype=np.int64),
                         np.zeros(nwatch, dtype=np.int8), np.zeros(nwatch, dtype=np.int64), np.zeros(nwatch),
                         np.zeros(nwatch, dtype=np.int64), np.zeros(nwatch, dtype=np.int64), np.zeros(nres))
        self._runs = 0
        self._last: tuple[dict[int, int], int, int, float] | None = None
        single = all(len(g) == 1 for g in groups)
        self.tails: PlacementTails | None = None
        # the tail arrays the kernel reads (placeholders of the same types without tails);
        # PlacementTails updates its arrays in place, so this tuple stays current
        self._tail_arrays = (np.zeros(1), np.zeros(1, dtype=np.int64), np.zeros((1, 1), dtype=np.int64),
                             np.zeros(1, dtype=np.int64))
        stop, _ = self._run(0, {}, -1, math.inf, compare=False)
        splice_window(0, stop, cptr, self._base, self._scratch)
        if single:
            self.tails = PlacementTails(self)
            self._tail_arrays = (self.tails.start, self.tails.tvalid, self.tails.nxt_lane, self.tails.nxt_disp)

    def _hop_tables(self, sizes: list[int], link_of: dict) -> None:
        """Resource and contention-free seconds of each hop, per (size class,
        source, destination), and their sums."""
        table, devs, nd = self.table, self.table.devices, self.nd
        routes = [[[(self.link_res[res], res) for res, _ in table.hops(a, b)] if a != b else []
                   for b in devs] for a in devs]
        nh = max((len(r) for row in routes for r in row), default=0)
        nu = len(sizes)
        self.hop_n = np.zeros((nu, nd, nd), dtype=np.int64)
        self.hop_r = np.zeros((nu, nd, nd, max(nh, 1)), dtype=np.int64)
        self.hop_t = np.zeros((nu, nd, nd, max(nh, 1)))
        self.hop_sum = np.zeros((nu, nd, nd))
        used = {res for row in routes for r in row for _, res in r}
        cost = table.cost
        tt = {res: [float(cost.transfer_time(b, link_of[res])) for b in sizes] for res in used}
        for a in range(nd):
            for b in range(nd):
                route = routes[a][b]
                self.hop_n[:, a, b] = len(route)
                for h, (r, res) in enumerate(route):
                    self.hop_r[:, a, b, h] = r
                    self.hop_t[:, a, b, h] = tt[res]
                for u in range(nu):
                    s = 0.0
                    for h in range(len(route)):
                        s += float(self.hop_t[u, a, b, h])
                    self.hop_sum[u, a, b] = s

    # ------------------------------------------------------------------ queries
    @property
    def makespan(self) -> float:
        """The base placement's estimated makespan (``list_schedule(...).makespan``)."""
        return float(self._base[-2][-1])

    def placement(self) -> dict[str, str]:
        """The base placement, node -> device name."""
        devs = self.table.devices
        return {n: devs[d] for n, d in zip(self.order, self.place.tolist())}

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
        start = min(chg)
        stop, makespan = self._run(start, chg, max(chg), threshold, compare=True)
        self._last = (chg, start, stop, makespan) if makespan < threshold else None
        return makespan

    def commit(self, changes: Mapping[str, str]) -> float:
        """Make the base placement the one with ``changes`` applied; returns its makespan."""
        chg = self._positions(changes)
        if not chg:
            return self.makespan
        last = self._last
        if last is not None and last[0] == chg:
            _, start, stop, _ = last
        else:
            start = min(chg)
            stop, _ = self._run(start, chg, max(chg), math.inf, compare=True)
        self._last = None
        splice_window(start, stop, self._cptr, self._base, self._scratch)
        if self.tails is not None:
            self.tails.moved(max(chg))
        return self.makespan

    # ------------------------------------------------------------------ internals
    def _positions(self, changes: Mapping[str, str]) -> dict[int, int]:
        """``changes`` as position -> device index, without the nodes already there."""
        chg = {}
        place, pos, dev_index = self.place, self.pos, self.dev_index
        for n, d in changes.items():
            p, k = pos[n], dev_index[d]
            if place[p] != k:
                chg[p] = k
        return chg

    def _run(self, i: int, chg: dict[int, int], unit_last: int, thr: float, *, compare: bool) -> tuple[int, float]:
        """Re-run the estimator from position ``i`` with the devices ``chg`` (position
        -> device index) into the scratch buffers; ``compare=False`` builds from
        scratch (no base yet). Returns the stop position and the makespan (or bound)."""
        self._runs += 1
        chgdev = self._chgdev
        for p, d in chg.items():
            chgdev[p] = d
        try:
            stop, makespan = run_window(i, unit_last, float(thr), compare, self.tails is not None, self._runs,
                                        self.tail_slack, self._static, self._base, self._tail_arrays,
                                        self._scratch)
        finally:
            for p in chg:
                chgdev[p] = -1
        return int(stop), float(makespan)
