"""Exact minimum-makespan placement and order with OR-Tools CP-SAT: the yardstick.

The problem is the one the simulator (:mod:`sim.engine`) executes, for one request:

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
tensor on a 1 B/s link) is solved in a coarser unit, a power of ten larger
(``meta["time_unit_s"]`` is the unit used). The weights placed on a device fit
its memory (as :meth:`~sim.plan.Plan.validate` requires); a phase-2 candidate that
overflows a device's memory in the simulator is skipped
(``meta["candidates_skipped"]``). ``meta["solve_time_s"]`` is the wall time of
every solve, the ones that hit their time limit included.
Complexity: exponential in the worst case (the problem is strongly NP-hard);
phase 1 has O(V x D) op and O(T x D^2 x hops) transfer intervals (T tensors),
phase 2 adds O(J^2) literals per resource for its J jobs, which is why graphs above
``max_nodes`` are refused. Each phase stops at its share of ``time_limit_s``;
``meta`` reports ``status`` (OPTIMAL/FEASIBLE), objective, bound and the gap.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from hetsim.schedulers.base import INPUT_PREFIX, CostTable, Scheduler, SchedulerError
from hetsim.schedulers.heft import heft_state
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.graphs.graph import Graph
    from hetsim.sim.platform import Platform


#: largest value the model's keys may reach (2**62: headroom in int64 for the sums)
_INT_LIMIT = 1 << 62


class _TooLong(Exception):
    """The horizon in time units overflows CP-SAT's integers by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__(factor)
        self.factor = factor


class Optimal(Scheduler):
    """Exact placement and order by constraint programming (CP-SAT).

    Parameters
    ----------
    time_limit_s
        Solver wall-clock limit for both phases together.
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
    """

    name = "optimal"

    def __init__(
        self,
        *,
        time_limit_s: float = 10.0,
        max_nodes: int = 40,
        executable: bool = True,
        model_dispatch: bool = True,
        time_unit_s: float = 1e-9,
        workers: int = 2,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.max_nodes = max_nodes
        self.executable = executable
        self.model_dispatch = model_dispatch
        self.time_unit_s = time_unit_s
        self.workers = workers

    def why_not(self, graph: Graph, platform: Platform) -> str | None:
        if graph.number_of_nodes() > self.max_nodes:
            return (
                f"optimal: graph {graph.name!r} has {graph.number_of_nodes()} nodes, more than "
                f"max_nodes={self.max_nodes} (CP-SAT would not finish); use a heuristic"
            )
        return None

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        table = CostTable(graph, platform, cost)
        if not self.time_unit_s > 0:
            raise SchedulerError(f"optimal: time_unit_s must be > 0, got {self.time_unit_s!r}")
        unit = float(self.time_unit_s)
        while True:  # a graph whose times span more than int64 time units: coarser units
            try:
                mdl = _Model(table, unit, self.model_dispatch)
                break
            except _TooLong as e:
                unit = float(f"{unit * 10.0 ** math.ceil(math.log10(e.factor) + 1e-9):.3g}")
        tol = (len(table.topo) + len(table.tensors)) * unit
        hint = heft_state(table, contention=True)
        for (n, d), lit in mdl.x.items():
            mdl.m.AddHint(lit, hint.placement[n] == d)
        budget = float(self.time_limit_s)
        first = mdl.solve(budget * (0.5 if self.executable else 1.0), self.workers)
        if first is None:
            raise SchedulerError(
                f"optimal: CP-SAT found no schedule within {budget} s (or no placement fits the devices' "
                "memory with the weights); raise time_limit_s"
            )
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


def _simulated(graph: Graph, platform: Platform, plan: Plan, cost: CostModel) -> tuple[Any, str]:
    """The simulation of a candidate plan, or None and why it cannot run (it overflows a
    device's memory: :class:`~sim.plan.PlanError`, :class:`~sim.engine.SimulationError`)."""
    from hetsim.sim.engine import SimulationError, simulate
    from hetsim.sim.plan import PlanError

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


class _Model:
    """The CP-SAT model: phase 1 on construction, phase 2 by :meth:`add_simulator_rules`."""

    def __init__(self, table: CostTable, unit: float, model_dispatch: bool) -> None:
        self.table = table
        self.solve_times: list[float] = []  # wall time of every solve, found a solution or not
        platform, cost = table.platform, table.cost
        self.q = q = lambda t: int(round(t / unit))  # noqa: E731
        devs, topo = table.devices, table.topo
        self.m = m = cp_model.CpModel()
        self.dur = dur = {
            (n, d): q(table.w[n][d] + table.disp[n][d]) for n in topo for d in devs if math.isfinite(table.w[n][d])
        }
        host, nv = platform.host, len(topo)
        chains = sum(
            max((sum(q(cost.transfer_time(t.nbytes, lk)) for _, lk in table.hops(s, d)) for s in devs), default=0)
            for t in table.tensors.values() for d in [*devs, host]
        ) + len(table.tensors) * max((q(platform.device(d).handoff_s) for d in devs), default=0)
        # (n, d) -> [(producer, extra time units)]: inputs n reads slower when their
        # producer ran on another device of d's memory (Device.handoff_bandwidth_bytes_per_s)
        self.reads: dict[tuple[str, str], list[tuple[str, int]]] = {}
        for n, d in dur:
            peer = next((s2 for s2 in devs if s2 != d and platform.shares_memory(s2, d)), None)
            if peer is None or table.w[n][d] <= 0.0:
                continue  # nobody shares d's memory, or a zero-time view (it reads nothing)
            tensors = [table.tensors[k] for k in table.reads[n]]
            terms = [(tk.producer, q(table.read_time(tk.nbytes, peer, d))) for tk in tensors if tk.producer]
            if any(c > 0 for _, c in terms):
                self.reads[n, d] = [(pr, c) for pr, c in terms if c > 0]
        h_read = sum(max((sum(c for _, c in self.reads.get((n, d), ())) for d in devs), default=0) for n in topo)
        self.h = h = sum(max(dur[n, d] for d in devs if (n, d) in dur) for n in topo) + chains + h_read + 1
        self.key_scale = nv + 1
        self.big = (h + 1) * (nv + 1) + nv
        if 2 * self.big > _INT_LIMIT:  # CP-SAT's int64 arithmetic would overflow
            raise _TooLong(2 * self.big / _INT_LIMIT)
        self.x: dict[tuple[str, str], Any] = {}
        self.start = {n: m.NewIntVar(0, h, f"S[{n}]") for n in topo}
        self.end = {n: m.NewIntVar(0, h, f"E[{n}]") for n in topo}
        self.makespan = m.NewIntVar(0, h, "makespan")
        self.dev_jobs: dict[str, list[tuple]] = {d: [] for d in devs}
        #: (n, d) -> n's time on d: a constant, or a variable when it reads inputs of
        #: another device of d's memory (see ``reads``)
        self.size: dict[tuple[str, str], Any] = {}
        host_iv = []
        for n in topo:
            extra = []
            for d in devs:
                if (n, d) not in dur:
                    continue
                lit = self.x[n, d] = m.NewBoolVar(f"x[{n},{d}]")
                size, s = dur[n, d], self.start[n]
                terms = []
                for pr, c in self.reads.get((n, d), ()):
                    # z: n on d and its producer pr on another device sharing d's memory
                    away = [self.x[pr, s2] for s2 in devs
                            if s2 != d and (pr, s2) in self.x and platform.shares_memory(s2, d)]
                    if not away:
                        continue
                    z = m.NewBoolVar(f"r[{pr},{n},{d}]")
                    m.AddImplication(z, lit)
                    m.Add(sum(away) >= 1).OnlyEnforceIf(z)
                    m.Add(z >= lit + sum(away) - 1)
                    terms.append((c, z))
                if terms:
                    var = m.NewIntVar(size, size + sum(c for c, _ in terms), f"L[{n},{d}]")
                    m.Add(var == size + sum(c * z for c, z in terms))
                    extra += terms
                    size = var
                self.size[n, d] = size
                if terms:
                    e = m.NewIntVar(0, h, f"e[{n},{d}]")
                    m.Add(e == s + size)
                    iv = m.NewOptionalIntervalVar(s, size, e, lit, f"I[{n},{d}]")
                    self.dev_jobs[d].append((iv, lit, s, size, n))
                elif size > 0:
                    iv = m.NewOptionalIntervalVar(s, size, s + size, lit, f"I[{n},{d}]")
                    self.dev_jobs[d].append((iv, lit, s, size, n))
                dq = q(table.disp[n][d])
                if model_dispatch and dq > 0:
                    host_iv.append(m.NewOptionalIntervalVar(s, dq, s + dq, lit, f"D[{n},{d}]"))
            m.AddExactlyOne([self.x[n, d] for d in devs if (n, d) in self.x])
            m.Add(self.end[n] == self.start[n] + sum(dur[n, d] * self.x[n, d] for d in devs if (n, d) in self.x)
                  + sum(c * z for c, z in extra))
            m.Add(self.makespan >= self.end[n])
        nodes = table.graph.nx.nodes
        for d in devs:  # the weights placed on a device fit in its memory (Plan.validate)
            held = [(nodes[n]["param_bytes"], self.x[n, d]) for n in topo if (n, d) in self.x
                    and nodes[n]["param_bytes"] > 0]  # fmt: skip
            if sum(b for b, _ in held) > platform.device(d).memory_bytes:
                m.Add(sum(int(b) * lit for b, lit in held) <= int(platform.device(d).memory_bytes))
        for d in devs:
            ivs = [j[0] for j in self.dev_jobs[d]]
            if platform.device(d).streams == 1:
                m.AddNoOverlap(ivs)
            else:
                m.AddCumulative(ivs, [1] * len(ivs), platform.device(d).streams)
        if host_iv:
            m.AddCumulative(host_iv, [1] * len(host_iv), platform.dispatch_threads)
        for u, v in table.graph.nx.edges:
            m.Add(self.start[v] >= self.end[u])
        self.arrive: dict[tuple[tuple[str, int], str], Any] = {}
        self.link_jobs: dict[str, list[tuple]] = {}
        self.hops_out: list[tuple] = []
        for t in table.tensors.values():
            self._tensor(t)
        for jobs in self.link_jobs.values():
            m.AddNoOverlap([j[0] for j in jobs if j[0] is not None])
        m.Minimize(self.makespan)

    def _prio(self, n: str) -> Any:
        return self.start[n] * self.key_scale + self.table.index[n]

    def _tensor(self, t: Any) -> None:
        table, m, x, h = self.table, self.m, self.x, self.h
        host = table.platform.host
        sources = [host] if t.producer is None else table.devices
        dests = list(table.devices) + ([host] if t.is_output and host not in table.devices else [])
        for d in dests:
            cons = [c for c in t.consumers if (c, d) in x]
            to_host = t.is_output and d == host
            if not cons and not to_host:
                continue
            any_cons = m.NewBoolVar("") if cons else None
            if cons:
                for c in cons:
                    m.AddImplication(x[c, d], any_cons)
                m.AddBoolOr([x[c, d] for c in cons]).OnlyEnforceIf(any_cons)
            need = m.NewConstant(1) if to_host else any_cons
            arr = self.arrive[t.key, d] = m.NewIntVar(0, h, f"A[{t.key},{d}]")
            # queue key on links: the most urgent consumer there; else the producer
            terms = [self._prio(c) + self.big * (1 - x[c, d]) for c in cons]
            if t.producer is not None:
                terms.append(self._prio(t.producer) + (self.big * any_cons if cons else 0))
            key = m.NewIntVar(0, 2 * self.big, "")
            m.AddMinEquality(key, terms or [0])
            for s in sources:
                if t.producer is None:
                    src_lit, ready = m.NewConstant(1), 0
                elif (t.producer, s) in x:
                    src_lit, ready = x[t.producer, s], self.end[t.producer]
                else:
                    continue
                hops = table.hops(s, d) if s != d else []
                if not hops:
                    # shared memory: another device's output reaches d after d's handoff
                    wake = self.q(table.handoff(s, d)) if t.producer is not None and d in table.devices else 0
                    m.Add(arr == ready + wake).OnlyEnforceIf(src_lit)
                    continue
                pres = m.NewBoolVar(f"y[{t.key},{s},{d}]")
                m.AddBoolAnd([src_lit, need]).OnlyEnforceIf(pres)
                m.AddBoolOr([src_lit.Not(), need.Not()]).OnlyEnforceIf(pres.Not())
                prev: Any = ready
                for i, (res, lk) in enumerate(hops):
                    size = self.q(table.cost.transfer_time(t.nbytes, lk))
                    ts = m.NewIntVar(0, h, f"T[{t.key},{s},{d},{i}]")
                    m.Add(ts >= prev).OnlyEnforceIf(pres)
                    iv = m.NewOptionalIntervalVar(ts, size, ts + size, pres, "") if size > 0 else None
                    self.link_jobs.setdefault(res, []).append((iv, pres, ts, size, prev, key))
                    self.hops_out.append((pres, t.key, s, d, res, ts, size, i))
                    prev = ts + size
                m.Add(arr == prev).OnlyEnforceIf(src_lit)
                if to_host:
                    m.Add(self.makespan >= prev).OnlyEnforceIf(pres)
            for c in cons:
                m.Add(self.start[c] >= arr).OnlyEnforceIf(x[c, d])

    # ------------------------------------------------------------- phase 2
    def add_simulator_rules(self) -> None:
        """Non-delay devices and links, link order by key (see the module docstring)."""
        table, m, h = self.table, self.m, self.h
        for d in table.devices:
            jobs = []
            for n in table.topo:
                if (n, d) not in self.x:
                    continue
                reads = [self.arrive[k, d] for k in table.reads[n]]
                rel = m.NewIntVar(0, h, "")
                m.AddMaxEquality(rel, reads or [0])
                if self.dur[n, d] == 0:
                    m.Add(self.start[n] == rel).OnlyEnforceIf(self.x[n, d])
                else:
                    jobs.append((self.x[n, d], self.start[n], self.size[n, d], rel, None))
            if table.platform.device(d).streams == 1:
                self._non_delay(jobs)
        for jobs in self.link_jobs.values():
            live = []
            for _, pres, ts, size, rel, key in jobs:
                if size == 0:
                    m.Add(ts == rel).OnlyEnforceIf(pres)
                else:
                    live.append((pres, ts, size, rel, key))
            self._non_delay(live)
            self._queue_order(live)

    def _non_delay(self, jobs: list[tuple]) -> None:
        m, h = self.m, self.h
        block = [m.NewIntVar(0, h, "") for _ in jobs]
        for j, (pj, sj, _, rj, _) in enumerate(jobs):
            adj = []
            for i, (pi, si, di, _, _) in enumerate(jobs):
                if i == j:
                    continue
                a = m.NewBoolVar("")
                m.AddImplication(a, pi)
                m.AddImplication(a, pj)
                m.Add(si + di == sj).OnlyEnforceIf(a)
                m.Add(block[j] == block[i]).OnlyEnforceIf(a)
                adj.append(a)
            first = m.NewBoolVar("")
            m.Add(sum(adj) + first == 1)
            m.Add(block[j] == sj).OnlyEnforceIf(first)
            m.Add(rj >= block[j]).OnlyEnforceIf(pj)

    def _queue_order(self, jobs: list[tuple]) -> None:
        m = self.m

        def wins(a: tuple, b: tuple) -> Any:
            # a starts while b waits only if a's key is lower (ties: a released first)
            lt, tie, late = m.NewBoolVar(""), m.NewBoolVar(""), m.NewBoolVar("")
            m.Add(a[4] + 1 <= b[4]).OnlyEnforceIf(lt)
            m.Add(a[4] == b[4]).OnlyEnforceIf(tie)
            m.Add(a[3] <= b[3]).OnlyEnforceIf(tie)
            m.Add(b[3] >= a[1] + 1).OnlyEnforceIf(late)
            return [lt, tie, late]

        for i, a in enumerate(jobs):
            for b in jobs[i + 1 :]:
                both = [a[0], b[0]]
                first = m.NewBoolVar("")  # a before b
                m.Add(a[1] + a[2] <= b[1]).OnlyEnforceIf([first, *both])
                m.Add(b[1] + b[2] <= a[1]).OnlyEnforceIf([first.Not(), *both])
                m.AddBoolOr([first.Not(), a[0].Not(), b[0].Not(), *wins(a, b)])
                m.AddBoolOr([first, a[0].Not(), b[0].Not(), *wins(b, a)])

    def hint_from_records(self, placement: dict[str, str], records: list[dict[str, Any]]) -> None:
        """Hint a complete schedule: the simulator's run of a plan (a feasible
        solution of phase 2, up to rounding)."""
        m, q = self.m, self.q
        m.ClearHints()
        for (n, d), lit in self.x.items():
            m.AddHint(lit, placement[n] == d)
        starts: dict[str, float] = {}
        hops: dict[tuple[str, int, str, int], float] = {}
        for r in records:
            if r["kind"] == "dispatch" or (r["kind"] == "op" and r["node"] not in starts):
                starts[r["node"]] = r["start"]
            elif r["kind"] == "transfer":
                hops[(r["node"], r["output"], r["dst"], r["hop"])] = r["start"]
        for n, var in self.start.items():
            if n in starts:
                m.AddHint(var, q(starts[n]))
        for pres, key, s, d, _, ts, _, i in self.hops_out:
            producer = key[0]
            if producer not in self.start:  # a graph input: records name it without the prefix
                producer = producer.removeprefix(INPUT_PREFIX)
            elif placement[producer] != s:
                m.AddHint(pres, False)
                continue
            hit = hops.get((producer, key[1], d, i))
            m.AddHint(pres, hit is not None)
            if hit is not None:
                m.AddHint(ts, q(hit))

    # ------------------------------------------------------------- solving
    def solve(self, seconds: float, workers: int) -> dict[str, Any] | None:
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = float(seconds)
        solver.parameters.num_search_workers = int(workers)
        status = solver.Solve(self.m)
        self.solve_times.append(solver.WallTime())
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        topo, devs = self.table.topo, self.table.devices
        return {
            "status": "OPTIMAL" if status == cp_model.OPTIMAL else "FEASIBLE",
            "objective": solver.ObjectiveValue(),
            "bound": solver.BestObjectiveBound(),
            "time": solver.WallTime(),
            "placement": {n: next(d for d in devs if (n, d) in self.x and solver.Value(self.x[n, d])) for n in topo},
            "start": {n: solver.Value(self.start[n]) for n in topo},
            "end": {n: solver.Value(self.end[n]) for n in topo},
            "transfers": [
                [k[0], k[1], s, d, res, solver.Value(ts), solver.Value(ts) + size]
                for pres, k, s, d, res, ts, size, _ in self.hops_out
                if solver.Value(pres)
            ],
        }
