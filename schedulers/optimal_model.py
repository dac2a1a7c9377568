"""The CP-SAT model behind :class:`schedulers.optimal.Optimal` (the module docstring
there describes the problem): op, transfer and dispatch intervals of phase 1, and
the simulator's dispatch rules that phase 2 adds."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from typing import Any

from hetsim.schedulers.base import INPUT_PREFIX, CostTable

__all__ = ["INT_LIMIT", "CPSATModel", "HorizonTooLong", "ModelInvalid", "build_model"]

#: largest value the model's keys may reach (2**62: headroom in int64 for the sums)
INT_LIMIT = 1 << 62


def _cp_model() -> Any:
    """OR-Tools' CP-SAT module, imported when a model is built (not when the schedulers
    are: it costs ~45 ms of every ``import hetsim.schedulers``)."""
    from ortools.sat.python import cp_model

    return cp_model


class HorizonTooLong(Exception):
    """The horizon in time units overflows CP-SAT's integers by ``factor``."""

    def __init__(self, factor: float) -> None:
        super().__init__(factor)
        self.factor = factor



class ModelInvalid(Exception):
    """CP-SAT refuses the model in every time unit tried (its message says why)."""


#: the coarsest time unit :func:`build_model` tries, in seconds
COARSEST_UNIT_S = 1e3


class CPSATModel:
    """The CP-SAT model of :mod:`schedulers.optimal`: phase 1 on construction, phase 2 by
    :meth:`add_simulator_rules`.

    Parameters
    ----------
    table
        The priced graph.
    unit
        Seconds per integer time unit.
    model_dispatch
        Model the host dispatcher as a shared resource.
    release
        Earliest start in seconds, by node id or graph-input name (a request that
        arrives later); default 0.
    weights_of
        The nodes whose ``param_bytes`` count against a device's memory (default
        all; a graph that repeats one request's nodes counts one copy).

    Raises
    ------
    HorizonTooLong
        when the horizon in ``unit`` overflows CP-SAT's integers.
    """

    def __init__(
        self,
        table: CostTable,
        unit: float,
        model_dispatch: bool,
        *,
        release: Mapping[str, float] | None = None,
        weights_of: Collection[str] | None = None,
    ) -> None:
        self.table = table
        self.solve_times: list[float] = []  # wall time of every solve, found a solution or not
        #: the solver's status after :meth:`solve` (``OPTIMAL``, ``UNKNOWN``, ``MODEL_INVALID: ...``)
        self.status = ""
        platform, cost = table.platform, table.cost
        self.q = q = lambda t: int(round(t / unit))  # noqa: E731
        self.release = {k: q(v) for k, v in (release or {}).items() if v > 0}
        devs, topo = table.devices, table.topo
        self.m = m = _cp_model().CpModel()
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
        self.h = h = (sum(max(dur[n, d] for d in devs if (n, d) in dur) for n in topo) + chains + h_read + 1
                      + max(self.release.values(), default=0))
        self.key_scale = nv + 1
        self.big = (h + 1) * (nv + 1) + nv
        if 2 * self.big > INT_LIMIT:  # CP-SAT's int64 arithmetic would overflow
            raise HorizonTooLong(2 * self.big / INT_LIMIT)
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
            if n in self.release:
                m.Add(self.start[n] >= self.release[n])
        nodes = table.graph.nx.nodes
        counted = set(topo) if weights_of is None else set(weights_of)
        for d in devs:  # the weights placed on a device fit in its memory (Plan.validate)
            held = [(nodes[n]["param_bytes"], self.x[n, d]) for n in topo if (n, d) in self.x
                    and nodes[n]["param_bytes"] > 0 and n in counted]  # fmt: skip
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
                if t.producer is None:  # a graph input: on the host from its request's arrival
                    src_lit, ready = m.NewConstant(1), self.release.get(t.key[0].removeprefix(INPUT_PREFIX), 0)
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
    def domain_sum(self) -> int:
        """The sum of every variable's largest magnitude: CP-SAT refuses a model where
        it exceeds int64 (:meth:`ortools.sat.python.cp_model.CpModel.Validate`)."""
        return sum(max(abs(v) for v in var.domain) for var in self.m.Proto().variables if var.domain)

    def solve(self, seconds: float, workers: int) -> dict[str, Any] | None:
        """The best solution found within ``seconds``, or None; :attr:`status` names the
        solver's status then (``UNKNOWN``: out of time, ``INFEASIBLE``, ``MODEL_INVALID:
        reason``)."""
        cp_model = _cp_model()
        problem = self.m.Validate()
        if problem:
            self.status = f"MODEL_INVALID: {problem}"
            return None
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = float(seconds)
        solver.parameters.num_search_workers = int(workers)
        status = solver.Solve(self.m)
        self.solve_times.append(solver.WallTime())
        self.status = solver.StatusName(status)
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


def build_model(table: CostTable, unit: float, model_dispatch: bool, **options: Any) -> tuple[CPSATModel, float]:
    """The CP-SAT model of ``table`` in time unit ``unit`` or, when its horizon or the sum
    of its variables' domains would overflow CP-SAT's integers (``CpModel.Validate``), in
    the smallest power-of-ten multiple that fits; returns the model and the unit used.
    ``options``: those of :class:`CPSATModel`.

    Raises
    ------
    ModelInvalid
        when no unit up to :data:`COARSEST_UNIT_S` gives a model CP-SAT accepts."""
    def coarser(unit: float, factor: float) -> float:
        return float(f"{unit * 10.0 ** max(1, math.ceil(math.log10(factor) + 1e-9)):.3g}")

    while True:
        try:
            mdl = CPSATModel(table, unit, model_dispatch, **options)
        except HorizonTooLong as e:
            unit = coarser(unit, e.factor)
        except OverflowError:  # a time beyond float range in this unit
            raise ModelInvalid(f"a time of the graph is beyond float range in units of {unit:g} s") from None
        else:
            problem = mdl.m.Validate()
            if not problem:
                return mdl, unit
            # the sum of the variables' domains overflows int64: coarsen by the excess
            unit = coarser(unit, mdl.domain_sum() / INT_LIMIT)
            if unit > COARSEST_UNIT_S:
                raise ModelInvalid(f"CP-SAT refuses the model ({problem})")
        if unit > COARSEST_UNIT_S:
            raise ModelInvalid(f"the horizon overflows CP-SAT's integers even in units of {COARSEST_UNIT_S:g} s")
