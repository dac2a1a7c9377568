"""Simulator invariants on random DAGs (hypothesis).

Examples per test come from the hypothesis profile (``tests/conftest.py``: ``ci``
200, ``HYPOTHESIS_PROFILE=thorough`` 3000); the ``slow``-marked test runs 2000.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hetsim.graphs import Graph
from hetsim.sim import Device, Link, Plan, Platform, simulate
from hetsim.sim.engine.prep import index_graph, prepare

EPS = 1e-9


class TableCost:
    """Op time per (node, device) from a dict; exact link times; fixed dispatch."""

    def __init__(self, times: dict[tuple[str, str], float], dispatch: float) -> None:
        self.times, self.dispatch = times, dispatch

    def op_time(self, graph, node, device):  # noqa: ANN001, ANN201
        return self.times[(node, device.name)]

    def transfer_time(self, nbytes, link):  # noqa: ANN001, ANN201
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def dispatch_time(self, graph, node, device):  # noqa: ANN001, ANN201
        return self.dispatch


@st.composite
def scenarios(draw, max_nodes: int = 40):  # noqa: ANN001, ANN201
    """A random DAG, platform, placement, costs and request pattern."""
    n_dev = draw(st.integers(2, 3))
    names = [f"d{i}" for i in range(n_dev)]
    shared = n_dev == 3 and draw(st.booleans())  # d1 and d2 share memory
    devices = tuple(
        Device(
            name,
            "cpu" if i == 0 else "gpu",
            peak_flops=1e12,
            mem_bandwidth_bytes_per_s=1e11,
            memory_bytes=10**12,
            streams=draw(st.integers(1, 2)),
            memory_domain="shared" if shared and i > 0 else None,
        )
        for i, name in enumerate(names)
    )
    pairs = list(itertools.combinations(names, 2))
    if draw(st.booleans()):  # a chain d0 - d1 - d2: multi-hop routes
        pairs = [(names[i], names[i + 1]) for i in range(n_dev - 1)]
    links = tuple(
        Link(
            a,
            b,
            bandwidth_bytes_per_s=draw(st.sampled_from([1e3, 4e3])),
            latency_s=draw(st.sampled_from([0.0, 0.125])),
            duplex=draw(st.booleans()),
        )
        for a, b in pairs
    )
    platform = Platform(
        name="rand", devices=devices, links=links, dispatch_threads=draw(st.integers(1, 2))
    )

    n = draw(st.integers(2, max_nodes))
    g = Graph(name="rand")
    sizes: dict[tuple[str, int], int] = {}
    for i in range(n):
        g.add_op(f"n{i}", "relu", bytes=8)
    for v in range(1, n):
        srcs = draw(st.lists(st.integers(0, v - 1), max_size=3, unique=True))
        for u in srcs:
            k = draw(st.integers(0, 1))
            size = sizes.setdefault((f"n{u}", k), draw(st.sampled_from([0, 500, 1000, 3000])))
            g.add_edge(f"n{u}", f"n{v}", bytes=size, output=k)
    placement = {f"n{i}": names[draw(st.integers(0, n_dev - 1))] for i in range(n)}
    times = {
        (f"n{i}", d): draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]))
        for i in range(n)
        for d in names
    }
    dispatch = draw(st.sampled_from([0.0, 0.0625]))
    requests = draw(st.integers(1, 3))
    interval = draw(st.sampled_from([0.0, 0.5, 4.0]))
    return g, platform, Plan(placement), TableCost(times, dispatch), requests, interval


def check_invariants(
    g: Graph, platform: Platform, plan: Plan, cost: TableCost, requests: int, interval: float
) -> None:
    res = simulate(g, platform, plan, cost, requests=requests, interval_s=interval, record=True)
    again = simulate(g, platform, plan, cost, requests=requests, interval_s=interval, record=True)
    assert res.records == again.records and res.summary() == again.summary()  # bit for bit

    t = {n: cost.times[(n, plan.placement[n])] for n in g}
    # --- lower bounds: critical path of one request, total work over all streams
    longest: dict[str, float] = {}
    for n in g.topological_order():
        longest[n] = t[n] + max((longest[p] for p in g.predecessors(n)), default=0.0)
    last_arrival = (requests - 1) * interval
    assert res.makespan >= last_arrival + max(longest.values()) - EPS
    streams = sum(d.streams for d in platform.devices)
    assert res.makespan >= requests * sum(t.values()) / streams - EPS
    for d in platform.device_names:
        work = requests * sum(t[n] for n in g if plan.placement[n] == d)
        assert res.device_busy[d] == pytest.approx(work, abs=EPS)

    ops = {(r["node"], r["request"]): r for r in res.records if r["kind"] == "op"}
    assert len(ops) == requests * len(g)
    dispatches = {(r["node"], r["request"]): r for r in res.records if r["kind"] == "dispatch"}
    transfers: dict[tuple, list[dict]] = defaultdict(list)
    for r in res.records:
        if r["kind"] == "transfer":
            transfers[(r["node"], r["output"], r["dst"], r["request"])].append(r)

    # --- every dependency respected, through the transfers it needs
    for (n, req), rec in ops.items():
        assert rec["start"] >= res.arrivals[req] - EPS
        assert rec["end"] - rec["start"] == pytest.approx(t[n], abs=EPS)
        if (n, req) in dispatches:
            assert rec["start"] >= dispatches[(n, req)]["end"] - EPS
    for u, v, d in g.edges(data=True):
        du, dv = plan.placement[u], plan.placement[v]
        for req in range(requests):
            prod, cons = ops[(u, req)], ops[(v, req)]
            assert cons["start"] >= prod["end"] - EPS
            if platform.shares_memory(du, dv):
                continue
            hops = sorted(transfers[(u, d["output"], dv, req)], key=lambda r: r["hop"])
            route = platform.route(du, dv)
            assert len(hops) == len(route)
            assert hops[0]["start"] >= prod["end"] - EPS
            for a, b in itertools.pairwise(hops):
                assert b["start"] >= a["end"] - EPS
            assert cons["start"] >= hops[-1]["end"] - EPS

    # --- no two records overlap on one resource stream
    lanes: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for r in res.records:
        if r["end"] > r["start"]:
            lanes[(r["resource"], r["stream"])].append((r["start"], r["end"]))
    for (resource, stream), spans in lanes.items():
        if resource in platform:
            assert 0 <= stream < platform.device(resource).streams
        elif resource == "dispatch":
            assert 0 <= stream < platform.dispatch_threads
        spans.sort()
        for (_, e1), (s2, _) in itertools.pairwise(spans):
            assert s2 >= e1 - EPS, f"overlap on {resource} stream {stream}"

    # --- bytes moved: each (tensor, destination device) once per hop and request
    expected = 0
    seen = set()
    for u, v, d in g.edges(data=True):
        du, dv = plan.placement[u], plan.placement[v]
        key = (u, d["output"], dv)
        if not platform.shares_memory(du, dv) and key not in seen:
            seen.add(key)
            expected += d["bytes"] * len(platform.route(du, dv))
    assert res.total_bytes_moved == requests * expected
    assert len(transfers) == requests * len(seen)

    # --- memory: weights resident, peaks cover them; every request completed
    assert all(res.peak_memory[d] >= res.weights[d] for d in platform.device_names)
    assert len(res.latencies) == requests and all(lat >= 0 for lat in res.latencies)
    assert res.makespan == max(res.completions)


@given(scenarios())
def test_invariants_on_random_dags(case):  # noqa: ANN001
    check_invariants(*case)


@pytest.mark.slow
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_invariants_on_random_dags_thorough(case):  # noqa: ANN001
    check_invariants(*case)


@given(
    st.integers(1, 30).flatmap(
        lambda n: st.tuples(
            st.permutations(range(n)),
            st.sets(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))),
        )
    )
)
def test_integer_order_matches_graph_topological_order(case):  # noqa: ANN001
    order, pairs = case  # nodes inserted in a random order; edges from lower to higher id
    g = Graph(name="perm")
    for i in order:
        g.add_op(f"n{i}", "relu", bytes=8)
    for a, b in sorted(pairs):
        if a < b:
            g.add_edge(f"n{a}", f"n{b}", bytes=1)
    platform = Platform("p", (Device("d", "cpu", 1.0, 1.0, 1),))
    prep = prepare(index_graph(g), platform, Plan(dict.fromkeys(g, "d")))
    assert prep.names[: prep.n_ops] == g.topological_order()
    assert prep.order == list(range(len(g)))  # no priorities: rank = topological index


class RandomPolicy:
    """Places each dynamic node on a device drawn from the view's seeded generator."""

    name = "random"

    def select(self, node, view):  # noqa: ANN001, ANN201
        names = view.platform.device_names
        return names[int(view.rng.integers(len(names)))]

    def to_dict(self):  # noqa: ANN201
        return {"name": self.name, "params": {}}


@given(scenarios(max_nodes=30), st.integers(0, 2**16), st.data())
def test_invariants_with_a_dynamic_policy(case, seed, data):  # noqa: ANN001
    g, platform, plan, cost, requests, interval = case
    static = {n: d for n, d in plan.placement.items() if data.draw(st.booleans())}
    dyn_plan = Plan(static, policy=RandomPolicy())
    runs = [
        simulate(
            g,
            platform,
            dyn_plan,
            cost,
            requests=requests,
            interval_s=interval,
            record=True,
            seed=seed,
        )
        for _ in range(2)
    ]
    assert runs[0].records == runs[1].records
    res = runs[0]
    ops = {(r["node"], r["request"]): r for r in res.records if r["kind"] == "op"}
    assert len(ops) == requests * len(g)
    where = {key: rec["resource"] for key, rec in ops.items()}
    for (n, _), d in where.items():
        assert d == static.get(n, d)  # static nodes stay where the plan put them
    expected = 0
    for req in range(requests):
        seen = set()
        for u, v, d in g.edges(data=True):
            du, dv = where[(u, req)], where[(v, req)]
            assert ops[(v, req)]["start"] >= ops[(u, req)]["end"] - EPS
            if not platform.shares_memory(du, dv) and (u, d["output"], dv) not in seen:
                seen.add((u, d["output"], dv))
                expected += d["bytes"] * len(platform.route(du, dv))
    # a tensor moves to a device at most once per request: its copy there lives until
    # every reader has been placed (a later reader reuses it)
    assert res.total_bytes_moved == expected
    lanes: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    for r in res.records:
        if r["end"] > r["start"]:
            lanes[(r["resource"], r["stream"])].append((r["start"], r["end"]))
    for spans in lanes.values():
        spans.sort()
        assert all(s2 >= e1 - EPS for (_, e1), (s2, _) in itertools.pairwise(spans))
