"""Fuzz: random DAGs of many shapes through every registered scheduler and the simulator.

Each case draws a graph (a chain, forks and joins, a dense DAG, layers, independent
ops, or a windowed random DAG; FLOPs zero, tiny, ordinary, huge or extreme and bytes
zero, tiny, ordinary or huge; view ops; two-output ops), a scheduler with some of its
hyper-parameters drawn from their declared types, a platform (``cpu2``, ``xeon-p2200``,
``multi-gpu-4``, and the host model of sim/engine/host.py: ``xeon-p2200`` launching
eagerly under the interpreter lock or as CUDA graphs with free launches,
``multi-gpu-4`` as CUDA graphs) whose links run at their speed or a thousandth or a
billionth of it, and 1 or 3 requests, plans and simulates it through
:meth:`Scheduler.run <schedulers.base.Scheduler.run>` and checks the run:

* every node runs once per request, on its planned device (dynamic plans: once);
* an op starts after its inputs are on its device: the producer's end, plus the
  handoff within a memory domain, or the last hop of the tensor's transfer;
* no two records overlap on a device stream, a link direction or a dispatch lane;
* a tensor moves to a destination device at most once per request;
* the makespan is at least the critical path and the work per stream (each op at
  its fastest device's time) and equals the end of the last record;
* every utilisation is at most 1.

A case may also end cleanly: the scheduler declines (``SchedulerError``: it does not
apply, or a drawn hyper-parameter is out of its range), or the plan does not fit a
device's memory (``PlanError``/``SimulationError`` saying so); anything else fails, and
so does ``optimal`` declining for another reason (it returns HEFT's plan with a note
when CP-SAT gives nothing). ``ci`` runs 300 cases (about a minute);
``HYPOTHESIS_PROFILE=thorough`` runs 10 000 (``HETSIM_FUZZ_CASES`` overrides both).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
from collections import defaultdict
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hetsim import schedulers
from hetsim.costmodel import Roofline
from hetsim.graphs import Graph
from hetsim.schedulers.hyperparams import declared_types
from hetsim.sim import PlanError, Platform, SimulationError

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
CASES = int(os.environ.get("HETSIM_FUZZ_CASES", 10_000 if PROFILE == "thorough" else 300))


def launching(preset: str, launch: str, *, lock: bool, host_s: float) -> Platform:
    """``preset`` with its GPUs launching kernels ``launch``-wise (sim/engine/host.py): a
    short launch queue, graph-launch, event and copy-issue host costs of about
    ``host_s`` (0: free), and the interpreter lock or not."""
    pl = Platform.preset(preset)
    devices = [dataclasses.replace(d, launch=launch, launch_queue_depth=2, graph_launch_s=2 * host_s,
                                   event_s=0.75 * host_s, copy_issue_s=host_s) if d.kind == "gpu" else d
               for d in pl.devices]
    return dataclasses.replace(pl, name=f"{preset}-{launch}", devices=devices, interpreter_lock=lock)


PLATFORMS = {name: Platform.preset(name) for name in ("cpu2", "xeon-p2200", "multi-gpu-4")}
PLATFORMS["xeon-p2200-eager"] = launching("xeon-p2200", "eager", lock=True, host_s=4e-6)
PLATFORMS["xeon-p2200-graph"] = launching("xeon-p2200", "graph", lock=False, host_s=0.0)
PLATFORMS["multi-gpu-4-graph"] = launching("multi-gpu-4", "graph", lock=False, host_s=4e-6)
SHAPES = ("chain", "fork-join", "dense", "layered", "independent", "windowed")
#: FLOPs of a compute op, bytes of a tensor: zero, ordinary, huge (beyond a GPU's memory)
FLOPS = {"zero": (0.0, 0.0), "tiny": (1e-6, 1.0), "ordinary": (1e6, 1e10), "huge": (1e14, 1e16),
         "extreme": (1e18, 1e22)}
ELEMS = {"zero": (0, 0), "tiny": (1, 4), "ordinary": (1, 10**6), "huge": (10**8, 2 * 10**9)}
#: link bandwidth multipliers: as built, slow, and slow enough to overflow int64 nanoseconds
LINK_SCALES = (1.0, 1e-3, 1e-9)
OPS = ("matmul", "conv2d", "relu", "add", "softmax", "reshape")
#: a clean end of a case: the scheduler declines, or the plan does not fit memory
MEMORY = re.compile(r"out of memory|needs .* but device|weights placed on device|fits in the memory of no device"
                    r"|overflows a device's memory|fits the devices' memory|within its device's memory")
EPS = 1e-9
#: hyper-parameters that keep a case short (CP-SAT's budget), whatever else is drawn
FAST = {"optimal": {"time_limit_s": 0.5, "workers": 1}, "refine": {"time_budget_s": 0.5}}
#: why optimal may decline: a graph beyond max_nodes, a drawn hyper-parameter out of range
OPTIMAL_DECLINES = re.compile(r"more than max_nodes|must be > 0|hyper-parameter '")
#: what optimal said when CP-SAT refused its model at once, although HEFT's plan ran
MISLEADING = "raise time_limit_s"


def platform_at(name: str, link_scale: float) -> Platform:
    key = (name, link_scale)
    if key not in SCALED:
        SCALED[key] = PLATFORMS[name].scaled(link_bandwidth=link_scale)
    return SCALED[key]


SCALED: dict[tuple[str, float], Platform] = {}


@st.composite
def hyper_parameters(draw: Any, name: str) -> dict[str, Any]:
    """Some of a scheduler's declared hyper-parameters, drawn from their types (small
    ints and numbers: each case stays short); the others keep their defaults."""
    cls = type(schedulers.get(name))
    out: dict[str, Any] = {}
    for key, types in declared_types(cls.__init__.__wrapped__).items():
        if not draw(st.integers(0, 2)) == 0:
            continue
        options = []
        if bool in types:
            options.append(st.booleans())
        elif int in types:
            options.append(st.integers(0, 4))
        elif float in types:
            options.append(st.sampled_from([0.0, 1e-9, 1e-6, 1e-3, 0.25]))
        if type(None) in types:
            options.append(st.none())
        if options:
            out[key] = draw(st.one_of(options))
    return {**out, **FAST.get(name, {})}


def _edges(shape: str, n: int, draw: Any) -> list[tuple[int, int]]:
    if shape == "chain":
        return [(i, i + 1) for i in range(n - 1)]
    if shape == "independent":
        return []
    if shape == "fork-join":  # a root, branches of chains, a join
        branches = draw(st.integers(1, max(1, (n - 2) // 2)))
        body = list(range(1, n - 1))
        out = []
        for b in range(branches):
            chain = body[b::branches]
            if not chain:
                continue
            out += [(0, chain[0]), *itertools.pairwise(chain), (chain[-1], n - 1)]
        return out if n > 2 else [(0, 1)] if n == 2 else []
    if shape == "dense":
        return [(u, v) for v in range(n) for u in range(v) if draw(st.integers(0, 3)) > 0]
    if shape == "layered":
        width = draw(st.integers(1, 5))
        layers = [list(range(i, min(i + width, n))) for i in range(0, n, width)]
        return [(u, v) for a, b in itertools.pairwise(layers) for v in b
                for u in draw(st.lists(st.sampled_from(a), min_size=1, max_size=len(a), unique=True))]
    # windowed: each node reads 0-3 of the 6 before it
    return [(u, v) for v in range(1, n)
            for u in draw(st.lists(st.integers(max(0, v - 6), v - 1), max_size=3, unique=True))]


@st.composite
def graphs(draw: Any, min_nodes: int = 1, max_nodes: int = 30) -> Graph:
    """A random DAG: a shape, a size, op kinds, FLOPs and tensor sizes of a regime."""
    shape = draw(st.sampled_from(SHAPES))
    n = draw(st.integers(min_nodes, max_nodes))
    flops_regime = draw(st.sampled_from(sorted(FLOPS)))
    bytes_regime = draw(st.sampled_from(sorted(ELEMS)))
    edges = _edges(shape, n, draw)
    g = Graph(name=f"{shape}-{n}", meta={"granularity": "op"})
    outs: list[list[int]] = []
    for i in range(n):
        op = draw(st.sampled_from(OPS))
        n_out = 2 if draw(st.integers(0, 5)) == 0 else 1
        lo, hi = ELEMS[bytes_regime]
        elems = [draw(st.integers(lo, hi)) for _ in range(n_out)]
        outs.append(elems)
        flo, fhi = FLOPS[flops_regime]
        flops = 0.0 if op == "reshape" else draw(st.floats(flo, fhi))
        params = 4 * draw(st.integers(0, hi)) if op in ("matmul", "conv2d") else 0
        g.add_op(f"n{i:02d}", op, inputs=[([max(e, 1)], "float32") for e in elems[:1]],
                 outputs=[([e], "float32") for e in elems], flops=flops, param_bytes=params,
                 bytes=4 * (2 * sum(elems)) + params)  # fmt: skip
    for u, v in edges:
        g.add_edge(f"n{u:02d}", f"n{v:02d}", output=draw(st.integers(0, len(outs[u]) - 1)))
    sources = [x for x in g.nx if g.nx.in_degree(x) == 0]
    sinks = [x for x in g.nx if g.nx.out_degree(x) == 0]
    if draw(st.booleans()):  # graph inputs on the host, outputs back to it
        g.meta["inputs"] = [{"name": "x", "bytes": 4 * draw(st.integers(0, ELEMS[bytes_regime][1])),
                             "consumers": sources}]  # fmt: skip
        g.meta["outputs"] = [{"node": x, "output": 0, "bytes": 4 * outs[int(x[1:])][0]} for x in sinks]
    return g


def check_run(run: Any, requests: int) -> None:
    """The invariants of the module docstring on one :class:`~schedulers.PlanRun`."""
    graph, platform, plan, res = run.graph, run.platform, run.plan, run.result
    recs = res.records
    ops: dict[tuple[str, int], dict] = {}
    for r in recs:
        if r["kind"] == "op":
            key = (r["node"], r["request"])
            assert key not in ops, f"{key} ran twice"
            ops[key] = r
    assert len(ops) == requests * graph.number_of_nodes()
    if plan.policy is None:
        for (n, _), r in ops.items():
            assert r["resource"] == plan.placement[n], (n, r["resource"], plan.placement[n])
    begin = dict(ops)  # an op begins with its dispatch, when it has one
    for r in recs:
        if r["kind"] == "dispatch":
            begin[(r["node"], r["request"])] = r
    hops: dict[tuple, list[dict]] = defaultdict(list)
    for r in recs:
        if r["kind"] == "transfer":
            hops[(r["node"], r["output"], r["dst"], r["request"])].append(r)
    for key, chain in hops.items():  # at most once per destination and request
        assert sorted(h["hop"] for h in chain) == list(range(len(chain))), f"{key} moved {len(chain)} hops"
        for a, b in itertools.pairwise(sorted(chain, key=lambda h: h["hop"])):
            assert b["start"] >= a["end"] - EPS
    for u, v, d in graph.nx.edges(data=True):
        for q in range(requests):
            prod, cons = ops[(u, q)], ops[(v, q)]
            du, dv = prod["resource"], cons["resource"]
            start = begin[(v, q)]["start"]
            if du == dv:
                assert start >= prod["end"] - EPS
            elif platform.shares_memory(du, dv):
                assert start >= prod["end"] + platform.device(dv).handoff_s - EPS
            else:
                chain = sorted(hops[(u, d["output"], dv, q)], key=lambda h: h["hop"])
                assert len(chain) == len(platform.route(du, dv)), (u, v, du, dv)
                assert chain[0]["start"] >= prod["end"] - EPS and start >= chain[-1]["end"] - EPS
    lanes: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    for r in recs:
        if r["end"] > r["start"]:
            lanes[(r["resource"], r["stream"])].append((r["start"], r["end"]))
    for lane, spans in lanes.items():
        spans.sort()
        for (_, e1), (s2, _) in itertools.pairwise(spans):
            assert s2 >= e1 - EPS * max(1.0, e1), f"overlap on {lane}"
    # bounds: each op at its fastest device's time (a device it fits on)
    cost = run.cost
    fastest = {n: min(cost.op_time(graph, n, dev) for dev in platform.devices
                      if graph.nx.nodes[n]["bytes"] <= dev.memory_bytes) for n in graph.nx}  # fmt: skip
    longest: dict[str, float] = {}
    for n in graph.topological_order():
        longest[n] = fastest[n] + max((longest[p] for p in graph.nx.predecessors(n)), default=0.0)
    tol = EPS * max(1.0, res.makespan)
    assert res.makespan >= max(longest.values(), default=0.0) - tol
    streams = sum(d.streams for d in platform.devices)
    assert res.makespan >= requests * sum(fastest.values()) / streams - tol
    assert res.makespan == pytest.approx(max((r["end"] for r in recs), default=0.0), rel=1e-12, abs=1e-15)
    for u in [*res.device_utilisation.values(), *res.link_utilisation.values()]:
        assert u <= 1.0 + 1e-9


@settings(max_examples=CASES, deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=graphs(), name=st.sampled_from(schedulers.names()), platform=st.sampled_from(sorted(PLATFORMS)),
       link_scale=st.sampled_from(LINK_SCALES), requests=st.sampled_from([1, 3]), data=st.data())  # fmt: skip
def test_every_scheduler_on_random_dags(graph: Graph, name: str, platform: str, link_scale: float, requests: int,
                                        data: st.DataObject) -> None:
    params = data.draw(hyper_parameters(name))
    try:
        s = schedulers.get(name, **params)
        run = s.run(graph, platform_at(platform, link_scale), Roofline(), requests=requests, record=True)
    except schedulers.SchedulerError as e:
        assert name != "optimal" or ((OPTIMAL_DECLINES.search(str(e)) or MEMORY.search(str(e)))
                                     and MISLEADING not in str(e)), str(e)
        event("declined")  # with its reason
        return
    except (PlanError, SimulationError) as e:
        assert MEMORY.search(str(e)), f"{name} on {platform}: {e}"
        event("does not fit memory")
        return
    event("checked")
    check_run(run, requests)
    assert math.isfinite(run.result.makespan)


@settings(max_examples=max(10, CASES // 40), deadline=None, suppress_health_check=list(HealthCheck))
@given(graph=graphs(min_nodes=8, max_nodes=14), platform=st.sampled_from(sorted(PLATFORMS)),
       link_scale=st.sampled_from(LINK_SCALES[1:]))  # fmt: skip
def test_optimal_over_slow_links(graph: Graph, platform: str, link_scale: float) -> None:
    """The yardstick where its integer model is hardest to keep valid: a graph of 8-14 ops
    over links a thousand or a billion times slower. It plans (CP-SAT's schedule, or HEFT's
    plan with a note when CP-SAT gives nothing), or the graph does not fit memory."""
    try:
        run = schedulers.get("optimal", **FAST["optimal"]).run(graph, platform_at(platform, link_scale), Roofline(),
                                                              record=True)  # fmt: skip
    except (schedulers.SchedulerError, PlanError, SimulationError) as e:
        assert MEMORY.search(str(e)) and MISLEADING not in str(e), str(e)
        event("does not fit memory")
        return
    meta = run.plan.meta
    event("heft's plan" if meta.get("fallback") else meta["status"])
    assert meta["status"] in ("OPTIMAL", "FEASIBLE")
    assert bool(meta.get("fallback")) == ("note" in meta)
    check_run(run, 1)
