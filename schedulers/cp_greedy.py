"""Critical-path greedy partitioning with greedy correction (CPU-GPU adaptive partitioning).

The operator-partitioning method of the CPU-GPU adaptive partitioning thesis this
project follows: the operators on the critical path of the model ("key
operators", path weighted by each op's best op time) decide the latency, so they
go to their fastest devices (the fastest execution of the whole path, transfers
between its operators included: a short dynamic program); every other
operator starts on its own fastest device and is then moved to another device
whenever the move lowers the predicted makespan, until no move helps (greedy
correction, first improvement, a bounded number of passes). A move takes one
operator, or a whole chain of them (a branch of an inception block), so that a
branch can leave the critical device without paying a transfer per operator.

Candidates are priced with the cheap list-scheduling estimator of
:func:`schedulers.eft_state.list_schedule` (cost-model op, dispatch and transfer
times, link and host contention, fixed upward-rank order), incrementally
(:class:`schedulers.incremental_estimate.IncrementalListSchedule`, its loops
compiled with numba): a move is re-run from its first node's position in the
order only until the schedule rejoins the current one or provably cannot beat
it, with the same makespan, bit for bit, as a full run, hence the same plans as
pricing every candidate from scratch. Worst case O(passes x V x D x (V + E)): a
move whose effect reaches the end of the schedule is re-run to the end, and the
accepted ones (about a third of the nodes on random layered DAGs) all do, while
the rejected ones are cut a few hundred positions after the move at most
(random layered DAGs of 5 000 nodes: 1 578 accepted moves re-run 3.4 M
positions, 17 000 rejected ones 4.8 M, about 0.4 us each). Measured
(``python benchmarks/scheduler_scaling.py --schedulers cp-greedy --sizes 100
1000 5000 --budget 2000 --kill 1000 --before DIR``, random layered DAGs on
xeon-p2200, CPU time, same run): 0.55 s at 100 nodes (0.04 s before: the first
call in a process imports numba and loads the compiled loops, about 0.5 s), 0.95 s
at 1 000 (1.50 s before), 3.9 s at 5 000 (100 s before); 63 s at 20 000 (a
separate run: x16 from 5 000, quadratic, the accepted moves' re-runs).
The initial placement, the
corrected one and the best single-device placement are then simulated
(:func:`sim.engine.simulator.simulate`) and the best simulated one is returned (a
candidate whose weights or tensors overflow a device's memory is skipped, and a
correction move that would overflow a device with weights is never tried);
``meta["predicted_makespan"]`` and ``meta["simulated_makespan"]`` report both
numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetsim.graphs.transforms import critical_path
from hetsim.schedulers.base import (
    CostTable,
    Scheduler,
    SchedulerError,
    quantize,
    topo_priority,
    upward_rank,
)
from hetsim.schedulers.eft_state import list_schedule
from hetsim.sim.engine.simulator import SimulationError, Simulator
from hetsim.sim.plan import Plan, PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph


def _units(graph: Graph, nodes: list[str]) -> list[list[str]]:
    """Move units of the correction: every node, and every maximal chain of two or
    more of them (``u -> v`` with one successor and one predecessor), which moves
    as a whole (a branch of an inception block, a cell of a recurrent layer)."""
    g = graph.nx
    inside = set(nodes)
    units = [[n] for n in nodes]
    seen: set[str] = set()
    for n in nodes:
        if n in seen:
            continue
        p = next(iter(g.predecessors(n)), None) if g.in_degree(n) == 1 else None
        if p in inside and g.out_degree(p) == 1:
            continue  # not the head of a chain
        chain = [n]
        while g.out_degree(chain[-1]) == 1:
            s = next(iter(g.successors(chain[-1])))
            if s not in inside or g.in_degree(s) != 1:
                break
            chain.append(s)
        seen.update(chain)
        if len(chain) > 1:
            units.append(chain)
    return units


def _path_devices(table: CostTable, path: list[str]) -> dict[str, str]:
    """Fastest execution of the critical path: a device per key operator minimising
    the path's op + dispatch + transfer time (dynamic programming along the path,
    O(len(path) x D^2)); per-op fastest devices would pay a transfer at every
    change of device."""
    devs = table.devices
    best = {d: table.w[path[0]][d] + table.disp[path[0]][d] for d in devs}
    back: list[dict[str, str]] = []
    for u, v in zip(path, path[1:]):
        nbytes = table.edge_bytes(u, v)
        step, arg = {}, {}
        for d in devs:
            prev = min(devs, key=lambda p: best[p] + table.comm(nbytes, p, d))
            step[d] = best[prev] + table.comm(nbytes, prev, d) + table.w[v][d] + table.disp[v][d]
            arg[d] = prev
        best = step
        back.append(arg)
    d = min(devs, key=best.__getitem__)
    out = {path[-1]: d}
    for i in range(len(path) - 1, 0, -1):
        d = back[i - 1][d]
        out[path[i - 1]] = d
    return out


def _fit_weights(table: CostTable, placement: dict[str, str], room: dict[str, int], keys: set[str]) -> dict[str, int]:
    """Move nodes off devices whose memory cannot hold the weights placed on them, the
    ones that lose least time per weight byte first (key operators last), each to the
    fastest device with room; returns the weights per device. A placement that cannot
    be repaired so is left overflowing (its simulation will say so)."""
    nodes = table.graph.nx.nodes
    weights = {d: 0 for d in table.devices}
    for n, d in placement.items():
        weights[d] += nodes[n]["param_bytes"]
    for d in table.devices:
        movable = [n for n in table.topo if placement[n] == d and nodes[n]["param_bytes"] > 0]

        def loss(n: str, d: str = d) -> tuple[bool, float]:
            alt = min((table.w[n][e] for e in table.devices if e != d), default=float("inf"))
            return n in keys, (alt - table.w[n][d]) / nodes[n]["param_bytes"]

        for n in sorted(movable, key=loss):
            if weights[d] <= room[d]:
                break
            b = nodes[n]["param_bytes"]
            to = [e for e in table.devices if e != d and weights[e] + b <= room[e] and table.w[n][e] < float("inf")]
            if to:
                e = min(to, key=lambda e: table.w[n][e])
                placement[n], weights[d], weights[e] = e, weights[d] - b, weights[e] + b
    return weights


class CPGreedy(Scheduler):
    """Key operators on their fastest device, greedy correction of the others.

    Parameters
    ----------
    max_passes
        Correction passes over the non-key operators (each pass tries every
        operator on every other device).
    verify
        Simulate the candidate plans and return the best simulated one; False
        trusts the estimator (no simulation).
    """

    name = "cp-greedy"

    def __init__(self, *, max_passes: int = 4, verify: bool = True) -> None:
        self.max_passes = max_passes
        self.verify = verify

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        # imported here: it loads numba (0.3 s), which nothing else of hetsim.schedulers needs
        # import cycle: hetsim.schedulers.incremental_estimate -> hetsim.schedulers -> hetsim.schedulers.cp_greedy
        from hetsim.schedulers.incremental_estimate import IncrementalListSchedule

        table = CostTable(graph, platform, cost)
        fastest = {n: table.fastest(n) for n in table.topo}
        _, key_ops = critical_path(graph, weight=lambda n: table.w[n][fastest[n]])
        keys = set(key_ops)
        q = quantize(upward_rank(table))
        prio = topo_priority(graph, sorted(table.topo, key=lambda n: -q[n]))
        order = sorted(prio, key=prio.__getitem__)

        initial = dict(fastest)
        initial.update(_path_devices(table, key_ops))
        room = {d: platform.device(d).memory_bytes for d in table.devices}
        weights = _fit_weights(table, initial, room, keys)  # weights resident per device
        placement = dict(initial)
        estimator = IncrementalListSchedule(table, placement, order)
        best = estimator.makespan
        units = _units(graph, [n for n in table.topo if n not in keys])
        units.sort(key=lambda u: -sum(table.wbar(n) for n in u))
        nodes = graph.nx.nodes
        moves, passes = 0, 0
        for passes in range(1, self.max_passes + 1):  # noqa: B007 - reported below
            improved = False
            for unit in units:
                here = [placement[n] for n in unit]
                for d in table.devices:
                    if all(placement[n] == d for n in unit) or any(table.w[n][d] == float("inf") for n in unit):
                        continue
                    extra = sum(nodes[n]["param_bytes"] for n, h in zip(unit, here) if h != d)
                    if weights[d] + extra > room[d]:
                        continue  # its weights would not fit: not a candidate
                    move = dict.fromkeys(unit, d)
                    m = estimator.evaluate(move, best * (1 - 1e-9))
                    if m < best * (1 - 1e-9):
                        for n, h in zip(unit, here):
                            weights[h] -= nodes[n]["param_bytes"]
                        weights[d] += sum(nodes[n]["param_bytes"] for n in unit)
                        estimator.commit(move)
                        placement.update(move)
                        best, here, improved = m, [d] * len(unit), True
                        moves += 1
            if not improved:
                break
        candidates = {"corrected": placement, "initial": initial}
        for d in table.devices:
            if all(table.w[n][d] < float("inf") for n in table.topo):
                candidates[f"all-{d}"] = dict.fromkeys(table.topo, d)
        chosen, sim_ms = "corrected", None
        results: dict[str, float] = {}
        rejected: dict[str, str] = {}
        if self.verify:
            simulator = Simulator(graph, platform, cost)  # the graph read once for every candidate
            for name, pl in candidates.items():
                prio = list_schedule(table, pl, order, presorted=True).priority()
                try:
                    results[name] = simulator.simulate(Plan(pl, prio)).makespan
                except (PlanError, SimulationError) as e:  # overflows a device's memory: skip it
                    rejected[name] = str(e)
            if not results:
                raise SchedulerError(
                    f"cp-greedy: every candidate placement of graph {graph.name!r} overflows a device's "
                    f"memory on {platform.name!r}, e.g. {next(iter(rejected))}: {next(iter(rejected.values()))}"
                )
            chosen = min(results, key=lambda k: (results[k], k != "corrected"))
            sim_ms = results[chosen]
        final = list_schedule(table, candidates[chosen], order, presorted=True)
        return final.to_plan(
            predicted_makespan=best if chosen == "corrected" else final.makespan,
            simulated_makespan=sim_ms,
            candidates_simulated=results,
            candidates_rejected=rejected,
            chosen=chosen,
            key_operators=key_ops,
            moves=moves,
            passes=passes,
        )
