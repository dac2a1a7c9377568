"""``optimal`` for several requests: the best static plan for the makespan of all of them.

A plan serves every request with one placement and one priority per node; the
simulator runs the requests' ready ops in (request, priority) order, so the plan
that is best for one request (its latency) need not be best for several in flight:
pipelining them may want another placement (:class:`schedulers.optimal.Optimal`
with ``requests > 1`` calls :func:`optimise_requests`).

The requests' problem is the one-request model of :mod:`schedulers.optimal` over
the graph repeated once per request, every copy's placement tied to the first
copy's (one plan), request ``r``'s nodes and graph inputs released at its arrival
``r x interval_s``, and the weights counted once. Its phase-1 optimum (or CP-SAT's
best bound) is a lower bound on the simulated makespan of every static plan for
those requests, as one request's is; the makespan is also at least the last
arrival plus one request's lower bound. The plans taken from it (the placement,
ordered by the first request's planned starts or by the mean over the requests),
the one-request optimum and HEFT are simulated with the requests, and the
shortest is returned: ``meta["status"]`` is ``OPTIMAL`` when it meets the bound
(within the time unit's rounding), else ``FEASIBLE`` with the ``gap`` to it, and
``meta["objective"]`` says so in words. The simulator's dispatch rules across
requests (phase 2 of one request) are not modelled: the returned plan is the best
of the candidates, not a proven optimum, unless the status says OPTIMAL.
Complexity: phase 1 on R x V nodes, plus one simulation per candidate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import Graph
from hetsim.schedulers.base import CostTable
from hetsim.schedulers.heft import heft_state
from hetsim.schedulers.optimal_model import ModelInvalid, build_model
from hetsim.sim.engine.simulator import SimulationError, Simulator
from hetsim.sim.plan import Plan, PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform

__all__ = ["PLANS", "optimise_requests", "repeat_requests", "standing"]

#: the plans ``optimal`` chooses among (pipelined stages, run-time placement and
#: rewritten graphs are other kinds of plans, which can beat it)
PLANS = "plans of one placement and one priority order for the graph as given"


def standing(meta: dict[str, Any]) -> str:
    """``"proven optimal"``, or ``"FEASIBLE, within 3.1 % of the CP-SAT lower bound"``."""
    if meta.get("fallback"):
        return meta["note"]
    if meta["status"] == "OPTIMAL":
        return "proven optimal"
    return f"FEASIBLE, within {meta['gap']:.1%} of the CP-SAT lower bound"


def repeat_requests(graph: Graph, requests: int) -> tuple[Graph, list[dict[str, str]]]:
    """``graph`` repeated ``requests`` times (node ``n`` of request ``r`` is ``"r{r}/n"``,
    graph input ``x`` is ``"r{r}/x"``), and per request its node -> copy map."""
    out = Graph(name=f"{graph.name}x{requests}", meta={k: v for k, v in graph.meta.items()
                                                          if k not in ("inputs", "outputs")})  # fmt: skip
    copies: list[dict[str, str]] = []
    inputs, outputs = [], []
    for r in range(requests):
        ids = {n: f"r{r}/{n}" for n in graph.nx.nodes}
        for n, data in graph.nx.nodes(data=True):
            out.nx.add_node(ids[n], **data)
        for u, v, data in graph.nx.edges(data=True):
            out.nx.add_edge(ids[u], ids[v], **data)
        for j, spec in enumerate(graph.meta.get("inputs") or []):
            inputs.append({**spec, "name": f"r{r}/{spec.get('name', f'input{j}')}",
                           "consumers": [ids[c] for c in spec.get("consumers") or [] if c in ids]})  # fmt: skip
        for spec in graph.meta.get("outputs") or []:
            if spec.get("node") in ids:
                outputs.append({**spec, "node": ids[spec["node"]]})
        copies.append(ids)
    out.meta["inputs"], out.meta["outputs"] = inputs, outputs
    return out, copies


def optimise_requests(
    graph: Graph,
    platform: Platform,
    cost: CostModel,
    one: Plan,
    *,
    requests: int,
    interval_s: float,
    time_limit_s: float,
    model_dispatch: bool,
    time_unit_s: float,
    workers: int,
) -> Plan:
    """The best static plan found for the makespan of ``requests`` requests arriving
    every ``interval_s`` (module docstring); ``one`` is the one-request optimum."""
    many, copies = repeat_requests(graph, requests)
    table = CostTable(many, platform, cost)
    release = {}
    for r, ids in enumerate(copies):
        release.update(dict.fromkeys(ids.values(), r * interval_s))
        release.update({spec["name"]: r * interval_s for spec in many.meta["inputs"]
                        if spec["name"].startswith(f"r{r}/")})  # fmt: skip
    try:
        mdl, unit = build_model(table, time_unit_s, model_dispatch, release=release, weights_of=copies[0].values())
    except ModelInvalid:  # no relaxation: the candidates below without it
        mdl, unit, solved = None, float(one.meta.get("time_unit_s", time_unit_s)), None
    else:
        for ids in copies[1:]:  # one plan: every request's node on the first request's device
            for n, c in ids.items():
                for d in table.devices:
                    if (c, d) in mdl.x and (copies[0][n], d) in mdl.x:
                        mdl.m.Add(mdl.x[c, d] == mdl.x[copies[0][n], d])
        for (c, d), lit in mdl.x.items():
            mdl.m.AddHint(lit, one.placement[c.split("/", 1)[1]] == d)
        solved = mdl.solve(time_limit_s, workers)

    candidates: dict[str, Plan] = {
        "one-request optimum": Plan(dict(one.placement), dict(one.priority)),
        "heft": heft_state(CostTable(graph, platform, cost), contention=True).to_plan(),
    }
    if solved is not None:
        placement = {n: solved["placement"][c] for n, c in copies[0].items()}
        first = {n: solved["start"][c] for n, c in copies[0].items()}
        mean = {n: sum(solved["start"][ids[n]] for ids in copies) / requests for n in graph.nx.nodes}
        index = {n: i for i, n in enumerate(graph.topological_order())}
        for key, start in (("requests' relaxation, first request's order", first),
                           ("requests' relaxation, mean order", mean)):  # fmt: skip
            order = sorted(graph.nx.nodes, key=lambda n, s=start: (s[n], index[n]))
            candidates[key] = Plan(placement, {n: float(i) for i, n in enumerate(order)})
    spans: dict[str, float] = {}
    skipped: dict[str, str] = {}
    simulator = Simulator(graph, platform, cost)  # the graph read once for every candidate
    for key, plan in candidates.items():
        try:
            spans[key] = simulator.simulate(plan, requests=requests, interval_s=interval_s).makespan
        except (PlanError, SimulationError) as e:
            skipped[key] = str(e)
    if not spans:
        return one  # nothing runs with several requests: the one-request plan, as it is
    best = min(spans, key=lambda k: (spans[k], list(candidates).index(k)))
    tol = (len(table.topo) + len(table.tensors)) * unit
    bound = max(solved["bound"] * unit if solved is not None else 0.0,
                (requests - 1) * interval_s + one.meta.get("lower_bound_s", 0.0))  # fmt: skip
    span = spans[best]
    meta = {
        "status": "OPTIMAL" if span <= bound + tol else "FEASIBLE",
        "objective_s": span,
        "bound_s": bound,
        "lower_bound_s": bound,
        "gap": max(0.0, (span - bound) / span) if span > 0 else 0.0,
        "requests": requests,
        "interval_s": interval_s,
        "chosen": best,
        "candidates_s": spans,
        "candidates_skipped": skipped,
        "relaxation_status": None if solved is None else solved["status"],
        "one_request": {k: one.meta.get(k) for k in ("status", "objective_s", "lower_bound_s", "gap")},
        "makespan_estimate": span,
        "solve_time_s": one.meta.get("solve_time_s", 0.0) + (sum(mdl.solve_times) if mdl is not None else 0.0),
        "time_unit_s": unit,
        "model_dispatch": model_dispatch,
    }
    every = f" arriving every {interval_s * 1e3:g} ms" if interval_s > 0 else ""
    meta["objective"] = (f"makespan of {requests} requests{every}, over {PLANS}; {standing(meta)} "
                         f"(best of its CP-SAT relaxation's plans, the one-request optimum and HEFT)")  # fmt: skip
    chosen = candidates[best]
    return Plan(chosen.placement, chosen.priority, meta=meta)
