"""Refine: contention-aware local search with the simulator as the objective.

The best of several fast list schedulers is improved by iterated local search
whose objective is the simulated makespan (one request), so that link and
host-dispatch contention, which the list schedulers' estimates ignore or
approximate, is priced exactly as the simulator prices it.

Builds on
---------
* list scheduling: HEFT and CPOP (Topcuoglu, Hariri, Wu, IEEE TPDS 13(3), 2002),
  PEFT (Arabnejad, Barbosa, IEEE TPDS 25(3), 2014) and its contention-aware
  variant, which serialises transfers on links (Sinnen, Sousa, "Communication
  contention in task scheduling", IEEE TPDS 16(6), 2005): the starting plans;
* simulation-based local search: the objective is a full simulation of each
  candidate (simulation optimisation; Kwok, Ahmad, "Static scheduling algorithms
  for allocating directed task graphs to multiprocessors", ACM Computing Surveys
  31(4), 1999, section on local-search refinement), with the critical-path
  neighbourhood of job-shop local search (van Laarhoven, Aarts, Lenstra, 1992;
  Nowicki, Smutnicki, 1996; :mod:`schedulers.critical_path`) and iterated local
  search's kicks out of local optima (Lourenco, Martin, Stuetzle, "Iterated Local
  Search", Handbook of Metaheuristics, 2003).

Algorithm
---------
1. Start: HEFT, contention-aware HEFT, CPOP, PEFT, by-path and every single-device plan
   are simulated; the best is the incumbent.
2. Iteration: take the incumbent's critical path from the records of its
   simulation. Candidate moves touch only its nodes: re-place a node, or the
   chain through it, on another device; co-locate a node's consumers (or
   producers) with it; run an op (or a transfer's reader) before the op
   (transfer) it waited for on its device stream (link direction), carrying
   along the ops it depends on. Moves are pruned twice before any simulation: a
   local score (op-time and transfer-time change around the moved nodes,
   O(degree)) keeps the ``width`` most promising placement moves, and the
   contention-aware list-scheduling estimate
   (:func:`schedulers.eft_state.list_schedule`, O(V + E x hops), 5-7 x cheaper than
   a simulation) ranks those and the priority moves; the ``width`` best are
   simulated in that order and the first that shortens the makespan is taken.
   A move that overflows a device's weights memory is never tried; a plan seen
   before is not simulated again.
   When none of them improves, the next ``width`` placement moves by local
   score (and the next priority moves) are tried, until the neighbourhood is
   exhausted.
3. At a local optimum, a kick moves a few critical nodes (drawn with ``seed``)
   to other devices and the search goes on from there; the best plan ever
   simulated is kept.

Per iteration: the critical path, O(R log R) for R records, the local scores, O(C x D x degree) for C
critical nodes and D devices, at most ``1.5 x width`` estimates, O(V + E x
hops) each, and at most ``width`` simulations (with records),
O((V + E x hops) log V) each.

The search stops after ``evaluations`` simulations or ``patience`` kicks
without a new best, whichever comes first: both deterministic, so that one
seed gives one plan on any machine. ``time_budget_s`` (CPU seconds of this
process, so that other load on the machine does not cut the search short) is
only an upper bound: with the defaults, the evaluation budget or patience
stops the search first on the zoo models (``benchmarks/refine_gap.py``), and
``meta["stopped_by"]`` says which rule stopped it. The plan returned is never
worse, in simulation, than the best start.

With the evaluation budget fixed, the whole search is near-linear in the graph's
size. Measured (``python benchmarks/scheduler_scaling.py --schedulers refine``,
random layered DAGs on ``xeon-p2200``, CPU time): 1.78 s at 1 000 nodes, 4.20 s at
5 000, 14.5 s at 20 000, 79.6 s at 100 000 (x5.5 from 20k to 100k).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.schedulers.base import (
    CostTable,
    Scheduler,
    SchedulerError,
    quantize,
    ready_order,
    upward_rank,
)
from hetsim.schedulers.by_path import ByPath
from hetsim.schedulers.cpop import CPOP
from hetsim.schedulers.critical_path import CriticalPath, critical_path_of
from hetsim.schedulers.eft_state import list_schedule
from hetsim.schedulers.heft import heft_state
from hetsim.schedulers.peft import PEFT
from hetsim.sim.engine.simulator import SimulationError, Simulator
from hetsim.sim.plan import Plan, PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.sim.result import SimResult

Move = tuple[str, tuple[str, ...], str]  # ("place", nodes, device) or ("before", (node,), other node)


def default_evaluations(nodes: int) -> int:
    """Simulations the search may run on a graph of ``nodes`` nodes by default:
    ``25 000 / nodes`` within [30, 300]: 1-3 s of CPU time in all on the zoo
    models (``benchmarks/refine_gap.py``)."""
    return int(min(300, max(30, 25_000 // max(nodes, 1))))


def chain_through(graph: Graph, node: str) -> list[str]:
    """The maximal chain of single-successor/single-predecessor edges through
    ``node`` (a branch of an inception block, a recurrent cell), in order."""
    g = graph.nx
    head = node
    while g.in_degree(head) == 1:
        p = next(iter(g.predecessors(head)))
        if g.out_degree(p) != 1:
            break
        head = p
    chain = [head]
    while g.out_degree(chain[-1]) == 1:
        s = next(iter(g.successors(chain[-1])))
        if g.in_degree(s) != 1:
            break
        chain.append(s)
    return chain


def move_before(graph: Graph, order: list[str], a: str, b: str) -> list[str]:
    """Topological ``order`` with ``a`` run just before ``b``: the nodes between
    them that ``a`` depends on move up with it (in their order), the others after
    it. ``a`` must come after ``b`` in ``order``. O(window x in-degree)."""
    i, j = order.index(b), order.index(a)
    succ = graph.nx.succ
    need = {a}
    window = order[i:j]
    for x in reversed(window):
        if any(y in need for y in succ[x]):
            need.add(x)
    return [*order[:i], *(x for x in window if x in need), a, *(x for x in window if x not in need), *order[j + 1:]]


class Refine(Scheduler):
    """Best fast heuristic, then simulation-in-the-loop local search.

    Parameters
    ----------
    evaluations
        Simulations the search may run after the starts (None:
        :func:`default_evaluations` of the graph's size). The stopping rule that
        makes the result depend on the seed only.
    time_budget_s
        Upper bound on the CPU time of the whole scheduling (starts included),
        in seconds; hitting it makes the result depend on the machine's speed
        (``meta["stopped_by"]`` says ``"time"`` then).
    seed
        Seeds the kicks out of local optima and the order of tied moves.
    width
        Candidates simulated per iteration (the best by estimate).
    patience
        Kicks without a new best plan before the search stops.

    Examples
    --------
    >>> from hetsim.graphs.graph import Graph
    >>> g = Graph()
    >>> g.add_op("a", "matmul", flops=2e9, bytes=12_000_000)
    >>> g.add_op("b", "relu", bytes=8_000_000)
    >>> g.add_edge("a", "b", bytes=4_000_000)
    >>> run = Refine(seed=1).run(g, "xeon-p2200")
    >>> run.plan.placement, run.result.makespan <= run.plan.meta["start_makespan"]
    ({'a': 'gpu', 'b': 'gpu'}, True)
    """

    name = "refine"
    minimum = {"width": 1}

    def __init__(
        self,
        *,
        evaluations: int | None = None,
        time_budget_s: float = 4.0,
        seed: int = 0,
        width: int = 6,
        patience: int = 5,
    ) -> None:
        for key, val, low in (("evaluations", evaluations, 0), ("width", width, 1), ("patience", patience, 0),
                              ("time_budget_s", time_budget_s, 0)):  # fmt: skip
            if val is not None and not val >= low:
                raise SchedulerError(f"refine: {key} must be >= {low}, got {val!r}")
        self.evaluations = evaluations
        self.time_budget_s = time_budget_s
        self.seed = seed
        self.width = width
        self.patience = patience

    # ------------------------------------------------------------------ starts
    def starts(self, table: CostTable) -> dict[str, tuple[dict[str, str], list[str]]]:
        """Starting (placement, topological order) by heuristic name."""
        graph, platform, cost = table.graph, table.platform, table.cost
        out: dict[str, tuple[dict[str, str], list[str]]] = {}

        def add(name: str, plan: Plan) -> None:
            out[name] = (dict(plan.placement), sorted(plan.priority, key=plan.priority.__getitem__))

        add("heft", heft_state(table).to_plan())
        add("heft-contention", heft_state(table, contention=True).to_plan())
        for name, sched in (("cpop", CPOP()), ("peft", PEFT()), ("by-path", ByPath())):
            try:
                add(name, sched.schedule(graph, platform, cost))
            except (SchedulerError, PlanError):
                continue
        q = quantize(upward_rank(table))
        rank_order = ready_order(graph, lambda n: -q[n])
        for d in table.devices:
            if all(math.isfinite(table.w[n][d]) for n in table.topo):
                out[f"all-{d}"] = (dict.fromkeys(table.topo, d), rank_order)
        return out

    # -------------------------------------------------------------- scheduling
    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        t0 = time.process_time()
        table = CostTable(graph, platform, cost)
        search = _Search(self, table, t0)
        return search.run()


class _Search:
    """State of one refinement: incumbent, best, budget, the plans seen."""

    def __init__(self, params: Refine, table: CostTable, t0: float) -> None:
        self.p = params
        self.table = table
        self.graph = table.graph
        self.t0 = t0
        n = len(table.topo)
        self.budget = params.evaluations if params.evaluations is not None else default_evaluations(n)
        self.rng = np.random.default_rng(params.seed)
        self.seen: dict[tuple[tuple[str, ...], tuple[str, ...]], float] = {}
        self.used = 0
        self.last: tuple[Any, SimResult | None] = (None, None)  # its record dicts made when asked
        self.simulator = Simulator(self.graph, table.platform, table.cost)  # reads the graph once
        self.paths: dict[tuple[tuple[str, ...], tuple[str, ...]], CriticalPath] = {}
        self.stopped_by = "patience"
        nodes = self.graph.nx.nodes
        self.param_bytes = {v: int(nodes[v]["param_bytes"]) for v in table.topo}
        self.room = {d: platform_dev.memory_bytes for d, platform_dev in
                     ((d, table.platform.device(d)) for d in table.devices)}  # fmt: skip

    # -------------------------------------------------------------- objective
    def out_of_time(self) -> bool:
        return time.process_time() - self.t0 > self.p.time_budget_s

    def key(self, pl: dict[str, str], order: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        return tuple(pl[n] for n in self.table.topo), tuple(order)

    def evaluate(self, pl: dict[str, str], order: list[str], *, count: bool = True) -> float:
        """Simulated makespan of (placement, order); inf when it overflows memory.
        The simulation keeps its records until the next one, for :meth:`critical_path`."""
        key = self.key(pl, order)
        hit = self.seen.get(key)
        if hit is not None:
            return hit
        if count:
            self.used += 1
        try:
            ms = self.simulate(key, pl, order)
        except (PlanError, SimulationError):
            ms = math.inf
        self.seen[key] = ms
        return ms

    def simulate(self, key: tuple[tuple[str, ...], tuple[str, ...]], pl: dict[str, str], order: list[str]) -> float:
        """Simulate (placement, order) (one request, with records); its makespan. The
        records stay in :attr:`last`, under ``key``, until the next simulation."""
        res = self.simulator.simulate(self.plan(pl, order), requests=1, record=True)
        self.last = (key, res)
        return res.makespan

    def critical_path(self, pl: dict[str, str], order: list[str]) -> CriticalPath:
        """Critical path of (placement, order): from the last simulation when it was
        this plan's, from a cache, else from a new (counted) simulation."""
        key = self.key(pl, order)
        path = self.paths.get(key)
        if path is not None:
            return path
        if self.last[0] != key:
            self.used += 1
            self.simulate(key, pl, order)
        path = critical_path_of(self.last[1].records, self.graph)
        if len(self.paths) >= 32:
            del self.paths[next(iter(self.paths))]
        self.paths[key] = path
        return path

    def plan(self, pl: dict[str, str], order: list[str]) -> Plan:
        return Plan(dict(pl), {n: float(i) for i, n in enumerate(order)})

    def estimate(self, pl: dict[str, str], order: list[str]) -> float:
        return list_schedule(self.table, pl, order, presorted=True).makespan

    def weights(self, pl: dict[str, str]) -> dict[str, int]:
        """Weight bytes resident per device under ``pl``."""
        held = dict.fromkeys(self.table.devices, 0)
        for v, b in self.param_bytes.items():
            held[pl[v]] += b
        return held

    def fits(self, pl: dict[str, str], held: dict[str, int], nodes: tuple[str, ...], dev: str) -> bool:
        """Whether moving ``nodes`` to ``dev`` keeps ``dev``'s weights (``held``) within memory."""
        extra = sum(self.param_bytes[n] for n in nodes if pl[n] != dev)
        return not extra or held[dev] + extra <= self.room[dev]

    # ------------------------------------------------------------------ moves
    def apply(self, move: Move, pl: dict[str, str], order: list[str]) -> tuple[dict[str, str], list[str]]:
        kind, nodes, arg = move
        if kind == "place":
            new = dict(pl)
            for n in nodes:
                new[n] = arg
            return new, order
        if kind == "before":  # nodes[0] just before arg, with its ancestors between them
            return pl, move_before(self.graph, order, nodes[0], arg)
        raise ValueError(kind)

    def local_score(self, pl: dict[str, str], nodes: tuple[str, ...], dev: str) -> float:
        """Op-time plus transfer-time change of moving ``nodes`` to ``dev`` (O(degree))."""
        t = self.table
        g = self.graph.nx
        inside = set(nodes)
        delta = 0.0
        for n in nodes:
            old = pl[n]
            delta += t.w[n][dev] + t.disp[n][dev] - t.w[n][old] - t.disp[n][old]
            for u in g.predecessors(n):
                if u not in inside:
                    b = t.edge_bytes(u, n)
                    delta += self.comm(b, pl[u], dev) - self.comm(b, pl[u], old)
            for v in g.successors(n):
                if v not in inside:
                    b = t.edge_bytes(n, v)
                    delta += self.comm(b, dev, pl[v]) - self.comm(b, old, pl[v])
        return delta

    def comm(self, nbytes: int, src: str, dst: str) -> float:
        return 0.0 if src == dst else self.table.comm(nbytes, src, dst)

    def candidates(self, pl: dict[str, str], order: list[str], depth: int = 0) -> list[Move]:
        """Moves around the incumbent's critical path, pruned and ranked by estimate:
        the ``depth``-th slice of ``width`` placement moves by local score (and of
        ``width / 2`` priority moves); empty when the neighbourhood is exhausted."""
        t = self.table
        g = self.graph.nx
        path = self.critical_path(pl, order)
        crit = [n for n in path.nodes if n in pl]
        groups: dict[tuple[str, ...], None] = {}
        for n in crit:
            groups[(n,)] = None
            chain = chain_through(self.graph, n)
            if len(chain) > 1:
                groups[tuple(chain)] = None
            for nbrs in (g.successors(n), g.predecessors(n)):
                away = tuple(v for v in nbrs if pl[v] != pl[n])
                if away:
                    groups[away] = None
        place: list[tuple[float, float, Move]] = []
        held = self.weights(pl)
        for grp in groups:
            for d in t.devices:
                if all(pl[n] == d for n in grp) or any(math.isinf(t.w[n][d]) for n in grp):
                    continue
                if not self.fits(pl, held, grp, d):
                    continue
                place.append((self.local_score(pl, grp, d), float(self.rng.random()), ("place", grp, d)))
        place.sort(key=lambda x: (x[0], x[1]))
        w, h = self.p.width, max(1, self.p.width // 2)
        moves: list[Move] = [m for _, _, m in place[depth * w:(depth + 1) * w]]
        pos = {n: i for i, n in enumerate(order)}
        waits: dict[Move, None] = {}
        for rec, blocker in path.waits:
            a, b = self.reader(rec, pl, pos), self.reader(blocker, pl, pos)
            if a is not None and b is not None and a != b and pos[a] > pos[b]:
                waits[("before", (a,), b)] = None
                if len(waits) >= (depth + 1) * h:
                    break
        moves += list(waits)[depth * h:]
        ranked = []
        for m in dict.fromkeys(moves):
            npl, nord = self.apply(m, pl, order)
            ranked.append((self.estimate(npl, nord), float(self.rng.random()), m))
        ranked.sort(key=lambda x: (x[0], x[1]))
        return [m for _, _, m in ranked[: self.p.width]]

    def reader(self, rec: Any, pl: dict[str, str], pos: dict[str, int]) -> str | None:
        """The node whose priority orders ``rec``: an op's node, a transfer's most
        urgent reader on its destination device (the engine's queue key)."""
        node = rec["node"]
        if node is None:
            return None
        if rec["kind"] != "transfer":
            return node
        key = (node, int(rec.get("output") or 0))
        tensor = self.table.tensors.get(key)
        if tensor is None:
            return None
        readers = [c for c in tensor.consumers if pl.get(c) == rec["dst"]] or tensor.consumers
        return min(readers, key=pos.__getitem__) if readers else None

    def kick(self, pl: dict[str, str], order: list[str]) -> dict[str, str]:
        """Move 2-4 critical-path nodes (drawn with the seed) to other devices."""
        t = self.table
        crit = [n for n in self.critical_path(pl, order).nodes if n in pl] or list(t.topo)
        new = dict(pl)
        held = self.weights(pl)
        k = min(len(crit), 2 + int(self.rng.integers(3)))
        for i in self.rng.choice(len(crit), size=k, replace=False):
            n = crit[int(i)]
            devs = [d for d in t.devices if d != new[n] and math.isfinite(t.w[n][d]) and self.fits(new, held, (n,), d)]
            if devs:
                d = devs[int(self.rng.integers(len(devs)))]
                held[new[n]] -= self.param_bytes[n]
                held[d] += self.param_bytes[n]
                new[n] = d
        return new

    # ------------------------------------------------------------------ search
    def run(self) -> Plan:
        starts = self.p.starts(self.table)
        results = {name: self.evaluate(pl, order, count=False) for name, (pl, order) in starts.items()}
        start = min(results, key=lambda k: (results[k], list(results).index(k)))
        if math.isinf(results[start]):
            raise SchedulerError(
                f"refine: every start plan of graph {self.graph.name!r} overflows a device's memory "
                f"on {self.table.platform.name!r}"
            )
        start_time = time.process_time() - self.t0
        cur_pl, cur_order = starts[start]
        cur = best = results[start]
        best_pl, best_order = cur_pl, cur_order
        accepted = kicks = stale = depth = 0
        tried: dict[str, int] = {}
        taken: dict[str, int] = {}
        while True:
            if self.used >= self.budget:
                self.stopped_by = "evaluations"
                break
            if self.out_of_time():
                self.stopped_by = "time"
                break
            improved = False
            moves = self.candidates(cur_pl, cur_order, depth) if self.used < self.budget else []
            for m in moves:
                if self.used >= self.budget or self.out_of_time():
                    break
                npl, nord = self.apply(m, cur_pl, cur_order)
                ms = self.evaluate(npl, nord)
                kind = m[0] if m[0] != "place" or len(m[1]) == 1 else "place-group"
                tried[kind] = tried.get(kind, 0) + 1
                if ms < cur * (1 - 1e-9):
                    cur_pl, cur_order, cur, improved = npl, nord, ms, True
                    taken[kind] = taken.get(kind, 0) + 1
                    accepted += 1
                    break
            if improved:
                depth = 0
                if cur < best * (1 - 1e-9):
                    best, best_pl, best_order, stale = cur, cur_pl, cur_order, 0
                continue
            if self.used >= self.budget or self.out_of_time():
                continue  # the loop's head says which budget ran out
            if moves:  # the next slice of the neighbourhood
                depth += 1
                continue
            depth = 0
            stale += 1
            if stale > self.p.patience:
                break
            kicks += 1
            cur_pl = self.kick(best_pl, best_order)
            cur_order = best_order
            cur = self.evaluate(cur_pl, cur_order)
        plan = self.plan(best_pl, best_order)
        plan.meta = {
            "start": start,
            "start_makespan": results[start],
            "starts_simulated": results,
            "simulated_makespan": best,
            "evaluations": self.used,
            "evaluation_budget": self.budget,
            "accepted_moves": accepted,
            "kicks": kicks,
            "moves_tried": tried,
            "moves_accepted": taken,
            "stopped_by": self.stopped_by,
            "start_cpu_time_s": start_time,
        }
        return plan
