"""Exact minimum-makespan placement and order with OR-Tools CP-SAT: the yardstick.

The problem is the one the simulator (:mod:`sim.engine.simulator`) executes, for one request:

* op ``n`` on device ``d``: an optional interval of ``dispatch + op_time`` (the
  simulator's stream is held while the host dispatches) on ``d``'s no-overlap
  (cumulative when ``streams > 1``) resource; exactly one device per op; an op of
  zero cost takes no resource and completes when its inputs are there;
* a tensor (producer output) read on another memory domain crosses, once per
  destination device, the links of ``platform.route`` hop by hop (store and
  forward); every hop is an optional interval on its link-direction resource
  (one per direction of a duplex link, one shared by a half-duplex link), present
  iff the producer is on the source and some consumer on the destination;
* a tensor read on another device of its producer's memory domain moves for free
  but arrives ``handoff_s`` (the reader's device's) after its producer ended, and
  its reader (unless a zero-time view) takes ``bytes / handoff_bandwidth_bytes_per_s``
  longer: its interval's size is a variable there;
* a consumer starts after its tensors have arrived; graph inputs leave the host at
  time 0 and graph outputs travel back to it; the makespan is the end of the last
  op or output transfer;
* host dispatch (``model_dispatch=True``): an interval of ``dispatch_time`` at the
  start of every op on a cumulative host resource of ``dispatch_threads``.

Two solves. Phase 1 solves that model as is: its optimum (or best bound) is a
lower bound on the simulated makespan of *every* plan (``meta["lower_bound_s"]``),
because any simulation is one of its feasible schedules. But its optimum may wait
on purpose (leave a device or link idle for a more urgent op), which the
simulator never does: it starts the ready op of lowest priority whenever a device
is free and moves the waiting tensor whose consumer has the lowest priority
whenever a link is free. Phase 2 (``executable=True``) adds exactly those rules,
with priority = planned start order: on every single-stream device and link
direction, a job that waits is preceded by a gap-free block of jobs that started
before it became ready (non-delay), zero-cost ops complete when ready, and a
transfer that starts while another one waits on its link has the lower key (the
consumer's priority; ties: released first). Its optimum is the best makespan a
plan can reach in the simulator, and the simulator reproduces the returned plan's
schedule. The rules assume zero dispatch time (with dispatch, a stream waiting for
the host looks idle to the model); ``meta["objective_s"]`` is phase 2's makespan.

Times are integers in units of ``time_unit_s`` (1 ns by default); durations are
rounded once, so the model and a simulation agree to within ``V x time_unit_s``. A
graph whose times would overflow CP-SAT's 64-bit integers in that unit (a 10 GB
tensor on a 1 B/s link), or whose variables' domains sum beyond them (CP-SAT's
``CpModel.Validate``), is solved in a coarser unit, a power of ten larger
(``meta["time_unit_s"]`` is the unit used). When no unit up to 1000 s gives a valid
model, when the unit that does is too coarse to resolve the schedule, or when CP-SAT
finds no schedule in its time, the plan is HEFT's (the solver's hint), with
``meta["fallback"] = "heft"`` and ``meta["note"]`` saying why and claiming no optimality. The weights placed on a device fit
its memory (as :meth:`~sim.plan.Plan.validate` requires); a phase-2 candidate that
overflows a device's memory in the simulator is skipped
(``meta["candidates_skipped"]``). ``meta["solve_time_s"]`` is the wall time of
every solve, the ones that hit their time limit included.
Complexity: exponential in the worst case (the problem is strongly NP-hard);
phase 1 has O(V x D) op and O(T x D^2 x hops) transfer intervals (T tensors),
phase 2 adds O(J^2) literals per resource for its J jobs, which is why graphs above
``max_nodes`` are refused. Each phase stops at its share of ``time_limit_s``;
``meta`` reports ``status`` (OPTIMAL/FEASIBLE), objective, bound and the gap.

The objective is the makespan of the requests the plan will serve
(``requests``, ``interval_s``; :meth:`Scheduler.run` passes its own), over plans of
one placement and one priority order for the graph as given; ``meta["objective"]``
says it in words, with the status (``hetsim compare`` prints it under the table).
With several requests the one-request optimum need not be the best plan (pipelining
may want another placement): :mod:`schedulers.optimal_requests` solves the
requests' relaxation for a bound and returns the best plan it finds. Plans of other
kinds can beat the yardstick: ``dynamic`` places each request at run time, the
pipelines run stages, ``tensor-split`` rewrites the graph.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from hetsim.schedulers.base import CostTable, Scheduler, SchedulerError
from hetsim.schedulers.heft import heft_state
from hetsim.schedulers.optimal_model import ModelInvalid, build_model
from hetsim.schedulers.optimal_requests import PLANS, optimise_requests, standing
from hetsim.sim.engine.simulator import SimulationError, simulate
from hetsim.sim.plan import Plan, PlanError

__all__ = ["Optimal"]

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph


class Optimal(Scheduler):
    """Exact placement and order by constraint programming (CP-SAT).

    Parameters
    ----------
    time_limit_s
        Solver wall-clock limit for both phases together (with ``requests`` > 1,
        half for the one-request optimum and half for the requests' relaxation).
    max_nodes
        Larger graphs raise :class:`SchedulerError`.
    executable
        Run phase 2 (the simulator's dispatch rules); False returns phase 1's
        schedule (a lower bound the simulator may not reach).
    model_dispatch
        Model the host dispatcher as a shared resource.
    time_unit_s
        Integer time unit of the model.
    workers
        CP-SAT search workers.
    requests, interval_s
        The workload whose makespan is minimised (None: that of
        :meth:`Scheduler.run`; 1 request when scheduled alone).
    """

    name = "optimal"
    minimum = {"requests": 1}

    def __init__(
        self,
        *,
        time_limit_s: float = 10.0,
        max_nodes: int = 40,
        executable: bool = True,
        model_dispatch: bool = True,
        time_unit_s: float = 1e-9,
        workers: int = 2,
        requests: int | None = None,
        interval_s: float | None = None,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.max_nodes = max_nodes
        self.executable = executable
        self.model_dispatch = model_dispatch
        self.time_unit_s = time_unit_s
        self.workers = workers
        self.requests = requests
        self.interval_s = interval_s

    def why_not(self, graph: Graph, platform: Platform) -> str | None:
        if graph.number_of_nodes() > self.max_nodes:
            return (
                f"optimal: graph {graph.name!r} has {graph.number_of_nodes()} nodes, more than "
                f"max_nodes={self.max_nodes} (CP-SAT would not finish); use a heuristic"
            )
        return None

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        for key in ("time_unit_s", "time_limit_s"):
            if not getattr(self, key) > 0:
                raise SchedulerError(f"optimal: {key} must be > 0, got {getattr(self, key)!r}")
        requests, interval = int(self.requests or 1), float(self.interval_s or 0.0)
        if requests < 1 or interval < 0:
            raise SchedulerError(f"optimal: requests must be >= 1 and interval_s >= 0, got "
                                 f"{self.requests!r} and {self.interval_s!r}")  # fmt: skip
        budget = float(self.time_limit_s)
        one = self._one_request(graph, platform, cost, budget if requests == 1 else budget / 2)
        meta = one.meta
        if requests == 1:
            meta["objective"] = f"makespan of one request, over {PLANS}; {standing(meta)}"
            return one
        return optimise_requests(graph, platform, cost, one, requests=requests, interval_s=interval,
                                 time_limit_s=budget / 2, model_dispatch=self.model_dispatch,
                                 time_unit_s=float(self.time_unit_s), workers=self.workers)  # fmt: skip

    def _one_request(self, graph: Graph, platform: Platform, cost: CostModel, budget: float) -> Plan:
        """The exact optimum for one request (the two phases of the module docstring)."""
        table = CostTable(graph, platform, cost)
        hint = heft_state(table, contention=True)
        try:
            mdl, unit = build_model(table, float(self.time_unit_s), self.model_dispatch)
        except ModelInvalid as e:
            return self._hint_plan(graph, platform, cost, hint.to_plan(), str(e), float(self.time_unit_s), [])
        tol = (len(table.topo) + len(table.tensors)) * unit
        if unit != float(self.time_unit_s):  # coarsened: does the unit still resolve the schedule?
            span = _simulated_hint(graph, platform, cost, hint.to_plan(), f"CP-SAT's model needs units of {unit:g} s")
            if tol >= span:
                why = (f"CP-SAT's model fits its 64-bit integers only in units of {unit:g} s, too coarse for a "
                       f"schedule of {span:.6g} s")  # fmt: skip
                return self._hint_plan(graph, platform, cost, hint.to_plan(), why, unit, [])
        for (n, d), lit in mdl.x.items():
            mdl.m.AddHint(lit, hint.placement[n] == d)
        first = mdl.solve(budget * (0.5 if self.executable else 1.0), self.workers)
        if first is None:
            if mdl.status == "INFEASIBLE":
                raise SchedulerError(f"optimal: no placement of graph {graph.name!r} fits the devices' memory "
                                     "with its weights (CP-SAT proved it)")  # fmt: skip
            why = (f"CP-SAT found no schedule within {budget * (0.5 if self.executable else 1.0):g} s"
                   if mdl.status == "UNKNOWN" else f"CP-SAT stopped with {mdl.status}")  # fmt: skip
            return self._hint_plan(graph, platform, cost, hint.to_plan(), why, unit, mdl.solve_times)
        result, lower, executable, sim_s = first, first["bound"], False, None
        skipped: dict[str, str] = {}
        if self.executable:
            plan1 = _plan(table, first)
            simulated = {}  # candidate -> (makespan, order, plan, records); those that run
            for order, (key, plan) in enumerate((("phase 1", plan1), ("heft", hint.to_plan()))):
                res, why = _simulated(graph, platform, plan, cost)
                if res is None:
                    skipped[key] = why
                else:
                    simulated[key] = (res.makespan, order, plan, res.records)
            if "phase 1" in simulated:
                sim_s, executable = simulated["phase 1"][0], True
            reproduced = sim_s is not None and sim_s <= first["objective"] * unit + tol
            heft_s = simulated["heft"][0] if "heft" in simulated else math.inf
            if simulated and not (reproduced and (first["status"] == "OPTIMAL" or sim_s <= heft_s)):
                # phase 2, warm-started from the better simulated plan: phase 1's or HEFT's
                incumbent = min(simulated.values(), key=lambda c: c[:2])
                executable = True
                mdl.add_simulator_rules()
                mdl.hint_from_records(incumbent[2].placement, incumbent[3])
                second = mdl.solve(max(0.5, budget - first["time"]), self.workers)
                if second is not None and second["objective"] * unit <= incumbent[0] + tol:
                    result = second
                elif incumbent[1] == 1 or not reproduced:  # keep the simulated incumbent
                    result = _from_records(table, incumbent[2], incumbent[3], unit)
        obj = result["objective"]
        proven = result["status"] == "OPTIMAL" and (executable or not self.executable)
        bound = max(result["bound"], lower)
        return _plan(
            table,
            result,
            {
                "status": "OPTIMAL" if proven and obj <= bound + tol / unit else "FEASIBLE",
                "objective_s": obj * unit,
                "bound_s": bound * unit,
                "gap": max(0.0, (obj - bound) / obj) if obj > 0 else 0.0,
                "lower_bound_s": lower * unit,
                "phase1_status": first["status"],
                "phase1_objective_s": first["objective"] * unit,
                "phase1_simulated_s": sim_s,
                "executable": executable,
                "candidates_skipped": skipped,
                "makespan_estimate": obj * unit,
                "solve_time_s": sum(mdl.solve_times),
                "phase_solve_times_s": list(mdl.solve_times),
                "time_unit_s": unit,
                "model_dispatch": self.model_dispatch,
            },
        )

    def _hint_plan(self, graph: Graph, platform: Platform, cost: CostModel, plan: Plan, why: str, unit: float,
                   solve_times: list[float]) -> Plan:
        """HEFT's plan (CP-SAT's hint), with ``meta["fallback"]`` and ``meta["note"]`` saying
        why CP-SAT gave no schedule: no optimality is claimed (the bound is 0)."""
        span = _simulated_hint(graph, platform, cost, plan, why)
        note = f"{why}; the plan is HEFT's (the solver's hint), not proven optimal"
        plan.meta = {
            "status": "FEASIBLE", "fallback": "heft", "note": note, "objective_s": span, "bound_s": 0.0,
            "gap": 1.0 if span > 0 else 0.0, "lower_bound_s": 0.0, "executable": True, "candidates_skipped": {},
            "makespan_estimate": span, "solve_time_s": sum(solve_times), "phase_solve_times_s": list(solve_times),
            "time_unit_s": unit, "model_dispatch": self.model_dispatch,
        }  # fmt: skip
        return plan



def _simulated_hint(graph: Graph, platform: Platform, cost: CostModel, plan: Plan, why: str) -> float:
    """The makespan of HEFT's plan, the one :class:`Optimal` returns when CP-SAT gives
    nothing; :class:`SchedulerError` saying ``why`` CP-SAT gave nothing when that plan
    does not run either."""
    res, failed = _simulated(graph, platform, plan, cost)
    if res is None:
        raise SchedulerError(f"optimal: {why}, and HEFT's plan does not run ({failed})")
    return res.makespan


def _simulated(graph: Graph, platform: Platform, plan: Plan, cost: CostModel) -> tuple[Any, str]:
    """The simulation of a candidate plan, or None and why it cannot run (it overflows a
    device's memory: :class:`~sim.plan.PlanError`, :class:`~sim.engine.simulator.SimulationError`)."""
    try:
        return simulate(graph, platform, plan, cost, requests=1, record=True), ""
    except (PlanError, SimulationError) as e:
        return None, str(e)


def _plan(table: CostTable, result: dict[str, Any], meta: dict[str, Any] | None = None) -> Plan:
    """Placement and priorities (planned start order) of a CP-SAT solution."""
    index, topo = table.index, table.topo
    ordered = sorted(topo, key=lambda n: (result["start"][n], index[n]))
    priority = result.get("priority") or {n: float(i) for i, n in enumerate(ordered)}
    meta = dict(meta or {})
    if meta:
        unit = meta["time_unit_s"]
        meta["schedule"] = {
            n: [result["placement"][n], result["start"][n] * unit, result["end"][n] * unit] for n in topo
        }
        meta["transfers"] = [[*t[:5], t[5] * unit, t[6] * unit] for t in result["transfers"]]
    return Plan(
        placement=dict(result["placement"]),
        priority=dict(priority),
        meta=meta,
    )


def _from_records(table: CostTable, plan: Plan, records: list[dict[str, Any]], unit: float) -> dict[str, Any]:
    """A solution-like dict from a simulated plan (when CP-SAT found nothing better)."""
    start: dict[str, int] = {}
    end: dict[str, int] = {}
    for r in records:
        n = r["node"]
        if r["kind"] == "dispatch" or (r["kind"] == "op" and n not in start):
            start[n] = int(round(r["start"] / unit))
        if r["kind"] == "op":
            end[n] = int(round(r["end"] / unit))
    last = max(r["end"] for r in records)
    transfers = [
        [r["node"], r["output"], r["resource"].split("->")[0] if "->" in r["resource"] else "", r["dst"], r["resource"],
         int(round(r["start"] / unit)), int(round(r["end"] / unit))]
        for r in records if r["kind"] == "transfer"
    ]
    return {
        "status": "FEASIBLE",
        "objective": last / unit,
        "bound": 0.0,
        "time": 0.0,
        "placement": dict(plan.placement),
        "priority": dict(plan.priority),
        "start": {n: start.get(n, 0) for n in table.topo},
        "end": {n: end.get(n, start.get(n, 0)) for n in table.topo},
        "transfers": transfers,
    }
