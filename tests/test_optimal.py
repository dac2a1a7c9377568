"""The CP-SAT yardstick: its model agrees with the simulator, and no heuristic's
simulated makespan beats its proven optimum."""

from __future__ import annotations

import random

import pytest
from test_schedulers import GRAPHS, lstm_graph

from hetsim import schedulers
from hetsim.costmodel.platform import Device, Link, Platform
from hetsim.costmodel.roofline import Roofline
from hetsim.graphs.graph import Graph
from hetsim.sim.engine.simulator import simulate

HEURISTICS = [n for n in schedulers.names() if n != "optimal"]


class TableCost:
    """Op time per (node, device kind); one hop costs ``latency + bytes / bandwidth``;
    no dispatch time."""

    def __init__(self, times: dict[tuple[str, str], float]) -> None:
        self.times = times

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return self.times[node, device.kind]

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return 0.0


class ZeroDispatch(Roofline):
    """Roofline op and transfer times, no host dispatch."""

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return 0.0


def random_case(rng: random.Random) -> tuple[Graph, TableCost]:
    """A random DAG of 3-12 nodes, tensors of 10 kB-4 MB (some read by several
    nodes), op times 10 us-1 ms with GPU speed-ups 0.5x-10x, sometimes graph
    inputs and outputs."""
    n = rng.randint(3, 12)
    g = Graph(name=f"rand{n}")
    for i in range(n):
        g.add_op(f"v{i}", "op", outputs=[([1000], "float32")] * 2, bytes=1000)
    for j in range(1, n):
        k = rng.randint(1, min(j, 3)) if rng.random() < 0.9 else 0
        for i in rng.sample(range(j), k):
            g.add_edge(f"v{i}", f"v{j}", bytes=rng.choice([10_000, 100_000, 1_000_000, 4_000_000]),
                       output=rng.randint(0, 1))
    if rng.random() < 0.5:
        g.meta["inputs"] = [{"name": "x", "bytes": 400_000,
                             "consumers": [v for v in g.nx if g.nx.in_degree(v) == 0]}]
        g.meta["outputs"] = [{"node": v, "output": 0, "bytes": 4000} for v in g.nx if g.nx.out_degree(v) == 0]
    times = {}
    for v in g.nx:
        c = rng.uniform(1e-5, 1e-3)
        times[v, "cpu"] = c
        times[v, "gpu"] = c * rng.choice([0.1, 0.3, 1.0, 2.0])
    return g, TableCost(times)


def tolerance(graph: Graph, plan: object) -> float:
    """Rounding: every duration is rounded once to the model's time unit."""
    return 4 * (graph.number_of_nodes() + graph.number_of_edges() + 2) * plan.meta["time_unit_s"]


@pytest.mark.parametrize("platform_name", [pytest.param("xeon-p2200", marks=pytest.mark.slow), "cpu2"])
def test_no_heuristic_beats_optimal_on_random_graphs(platform_name: str) -> None:
    """30 random graphs of <= 12 nodes (seeded): (1) the simulator reproduces the
    optimal plan: simulated makespan == objective (within rounding); (2) every
    heuristic's simulated makespan is >= the phase-1 lower bound, and >= the
    objective when it is proven OPTIMAL. On cpu2 in the quick suite, on xeon-p2200 (a CPU
    and a GPU) in the slow set: half a minute to a minute each on two busy cores."""
    rng = random.Random(2024 if platform_name == "cpu2" else 7)
    platform = Platform.preset(platform_name)
    proven = 0
    for _ in range(30):
        g, cost = random_case(rng)
        plan = schedulers.get("optimal", time_limit_s=2.0).schedule(g, platform, cost)
        tol = tolerance(g, plan)
        meta = plan.meta
        assert meta["lower_bound_s"] <= meta["objective_s"] + tol
        sim = simulate(g, platform, plan, cost).makespan
        assert sim == pytest.approx(meta["objective_s"], abs=tol), meta
        proven += meta["status"] == "OPTIMAL"
        for name in HEURISTICS:
            s = schedulers.get(name)
            if not s.applies_to(g, platform):
                continue
            hrun = s.run(g, platform, cost)
            g2, ms = hrun.graph, hrun.result.makespan
            if name == "tensor-split" and g2 is not g and g2.meta["tensor_split"]:
                continue  # another graph: optimal did not see the split
            assert ms >= meta["lower_bound_s"] - tol, (name, ms, meta)
            if meta["status"] == "OPTIMAL":
                assert ms >= meta["objective_s"] - tol, (name, ms, meta)
    assert proven >= 25


@pytest.mark.parametrize("graph_name", ["chain", "diamond", "fork-join", "inception"])
@pytest.mark.parametrize("platform_name", ["xeon-p2200", "multi-gpu-4"])
def test_optimal_matches_the_simulator_on_fixture_graphs(graph_name: str, platform_name: str) -> None:
    graph, platform, cost = GRAPHS[graph_name](), Platform.preset(platform_name), ZeroDispatch()
    plan = schedulers.get("optimal", time_limit_s=4.0).schedule(graph, platform, cost)
    res = simulate(graph, platform, plan, cost)
    assert res.makespan == pytest.approx(plan.meta["objective_s"], abs=tolerance(graph, plan))
    assert plan.meta["executable"]
    for name in ("all-gpu", "heft", "cp-greedy"):
        other = schedulers.get(name).schedule(graph, platform, cost)
        assert simulate(graph, platform, other, cost).makespan >= plan.meta["lower_bound_s"] - tolerance(graph, plan)


def test_executable_phase_is_needed_sometimes() -> None:
    """A case where the unconstrained optimum idles a device on purpose: the
    simulator cannot follow it, phase 2 finds the best plan it can follow."""
    rng = random.Random(1)
    for _ in range(13):
        g, cost = random_case(rng)
    platform = Platform.preset("xeon-p2200")
    plan = schedulers.get("optimal", time_limit_s=5.0).schedule(g, platform, cost)
    meta = plan.meta
    assert meta["phase1_simulated_s"] > meta["phase1_objective_s"] * 1.01
    assert meta["lower_bound_s"] == pytest.approx(meta["phase1_objective_s"])
    assert meta["lower_bound_s"] < meta["objective_s"] < meta["phase1_simulated_s"]
    assert simulate(g, platform, plan, cost).makespan == pytest.approx(meta["objective_s"], abs=tolerance(g, plan))
    relaxed = schedulers.get("optimal", time_limit_s=5.0, executable=False).schedule(g, platform, cost)
    assert relaxed.meta["objective_s"] == pytest.approx(meta["phase1_objective_s"])
    assert not relaxed.meta["executable"]


def test_dispatch_is_modelled_as_a_lower_bound() -> None:
    """With host dispatch (Roofline), the phase-1 bound still bounds every plan."""
    graph, platform, cost = GRAPHS["inception"](), Platform.preset("xeon-p2200"), Roofline()
    plan = schedulers.get("optimal", time_limit_s=4.0).schedule(graph, platform, cost)
    tol = tolerance(graph, plan)
    sim = simulate(graph, platform, plan, cost).makespan
    assert sim >= plan.meta["lower_bound_s"] - tol
    assert sim <= plan.meta["objective_s"] + tol
    for name in ("all-cpu", "all-gpu", "heft", "peft", "by-path"):
        other = schedulers.get(name).schedule(graph, platform, cost)
        assert simulate(graph, platform, other, cost).makespan >= plan.meta["lower_bound_s"] - tol


def test_time_limit_reports_status_and_gap() -> None:
    graph = lstm_graph(layers=2, steps=3)  # 31 nodes
    platform, cost = Platform.preset("xeon-p2200"), ZeroDispatch()
    plan = schedulers.get("optimal", time_limit_s=1.0).schedule(graph, platform, cost)
    meta = plan.meta
    assert meta["status"] in ("OPTIMAL", "FEASIBLE")
    assert 0.0 <= meta["gap"] <= 1.0
    assert meta["bound_s"] <= meta["objective_s"] + tolerance(graph, plan)
    if meta["status"] == "FEASIBLE":
        assert meta["gap"] > 0 or meta["bound_s"] < meta["objective_s"]
    assert meta["scheduling_time_s"] < 10.0
    tol = tolerance(graph, plan)
    sim = simulate(graph, platform, plan, cost).makespan
    assert sim == pytest.approx(meta["objective_s"], abs=tol)
    assert sim >= meta["lower_bound_s"] - tol
    # stopped early, it still returns the best simulated plan it knows, HEFT's included
    heft = schedulers.get("heft", contention=True).schedule(graph, platform, cost)
    assert sim <= simulate(graph, platform, heft, cost).makespan + tol


def test_times_beyond_int64_nanoseconds_solve_in_a_coarser_unit() -> None:
    # a 10 GB tensor over a 1 B/s link: 1e10 s, 1e19 ns, more than CP-SAT's int64
    g = Graph(name="huge-transfer")
    g.add_op("a", "matmul", flops=1e9, bytes=100)
    g.add_op("b", "relu", bytes=10)
    g.add_edge("a", "b", bytes=10**10)
    devices = (Device("cpu", "cpu", 1e11, 1e10, 10**12), Device("gpu", "gpu", 1e13, 1e11, 10**12))
    platform = Platform("slow-link", devices, (Link("cpu", "gpu", bandwidth_bytes_per_s=1.0),))
    run = schedulers.get("optimal", time_limit_s=5.0).run(g, platform, Roofline())
    meta = run.plan.meta
    assert meta["time_unit_s"] == 1e-7  # 1e10 s x 3 nodes in 2**62 units: 100 ns
    assert run.plan.placement["a"] == run.plan.placement["b"]  # never over that link
    assert run.result.makespan == pytest.approx(meta["objective_s"], abs=3 * meta["time_unit_s"])
    assert meta["status"] == "OPTIMAL"


def test_solve_time_counts_a_phase_that_found_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from hetsim.schedulers import optimal as opt_mod
    from hetsim.schedulers.optimal_model import CPSATModel

    real_simulated, real_solve = opt_mod._simulated, CPSATModel.solve
    calls: list[float] = []

    def unreproduced(graph, platform, plan, cost):  # noqa: ANN001, ANN202 - phase 1 not reproduced: phase 2 runs
        res, why = real_simulated(graph, platform, plan, cost)
        res.makespan *= 2
        return res, why

    def solve(self, seconds, workers):  # noqa: ANN001, ANN202 - phase 2 finds nothing in its time
        out = real_solve(self, seconds, workers)
        calls.append(self.solve_times[-1])
        return out if len(calls) == 1 else None

    monkeypatch.setattr(opt_mod, "_simulated", unreproduced)
    monkeypatch.setattr(CPSATModel, "solve", solve)
    g = GRAPHS["diamond"]()
    meta = schedulers.get("optimal", time_limit_s=2.0).schedule(g, Platform.preset("xeon-p2200"), Roofline()).meta
    assert len(calls) == 2
    assert meta["phase_solve_times_s"] == calls
    assert meta["solve_time_s"] == pytest.approx(sum(calls))


# --------------------------------------------------------- objective and several requests
def two_matmuls() -> tuple[Graph, Platform]:
    """a -> b, each 1.25 ms on the CPU and 1 ms on the GPU, a 10 us copy: one request
    is fastest on one device, four are fastest pipelined across both."""
    g = Graph(name="two")
    g.add_op("a", "matmul", flops=2e9, bytes=1_000_000)
    g.add_op("b", "matmul", flops=2e9, bytes=1_000_000)
    g.add_edge("a", "b", bytes=100_000)
    cpu = Device("cpu", "cpu", peak_flops=1.6e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=10**10)
    gpu = Device("gpu", "gpu", peak_flops=2e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=10**10)
    return g, Platform("two-devices", (cpu, gpu), (Link("cpu", "gpu", bandwidth_bytes_per_s=1e10),), host="cpu")


def test_optimal_states_its_objective() -> None:
    g, platform = two_matmuls()
    run = schedulers.get("optimal", time_limit_s=2.0).run(g, platform, ZeroDispatch())
    meta = run.plan.meta
    assert meta["status"] == "OPTIMAL" and meta["params"]["requests"] == 1
    assert meta["objective"] == ("makespan of one request, over plans of one placement and one priority "
                                 "order for the graph as given; proven optimal")


def test_optimal_optimises_the_makespan_of_the_requests_it_serves() -> None:
    """With 4 requests the one-request optimum (both matmuls on one device) is not the
    best plan: pipelining them across both devices is, and optimal finds it."""
    g, platform = two_matmuls()
    cost = ZeroDispatch()
    one = schedulers.get("optimal", time_limit_s=2.0).schedule(g, platform, cost)
    assert len(set(one.placement.values())) == 1
    run = schedulers.get("optimal", time_limit_s=4.0).run(g, platform, cost, requests=4)
    meta = run.plan.meta
    assert meta["params"]["requests"] == 4 and meta["requests"] == 4
    one_at_4 = simulate(g, platform, one, cost, requests=4).makespan
    assert run.result.makespan < 0.7 * one_at_4
    assert run.plan.placement == {"a": "gpu", "b": "cpu"}
    assert run.result.makespan == pytest.approx(meta["objective_s"])
    assert meta["candidates_s"]["one-request optimum"] == pytest.approx(one_at_4)
    assert meta["status"] == "OPTIMAL" and meta["lower_bound_s"] <= meta["objective_s"] + tolerance(g, run.plan)
    assert meta["objective"].startswith("makespan of 4 requests, over plans of one placement and one "
                                        "priority order for the graph as given; proven optimal")


@pytest.mark.parametrize("graph_name", ["chain", "diamond", "fork-join", "inception"])
def test_no_static_heuristic_beats_optimal_with_several_requests(graph_name: str) -> None:
    """3 requests on xeon-p2200: every heuristic with one placement for all requests is
    at least the bound (and the objective when proven); dynamic (run-time placement)
    and tensor-split (another graph) are other kinds of plans."""
    g, platform, cost = GRAPHS[graph_name](), Platform.preset("xeon-p2200"), ZeroDispatch()
    run = schedulers.get("optimal", time_limit_s=4.0).run(g, platform, cost, requests=3)
    meta = run.plan.meta
    tol = tolerance(g, run.plan) * 3
    assert meta["lower_bound_s"] <= run.result.makespan + tol
    assert run.result.makespan == pytest.approx(meta["objective_s"])
    for name in HEURISTICS:
        s = schedulers.get(name)
        if name in ("dynamic", "tensor-split") or not s.applies_to(g, platform):
            continue
        ms = s.run(g, platform, cost, requests=3).result.makespan
        assert ms >= meta["lower_bound_s"] - tol, (name, ms, meta)
        if name == "heft":
            assert run.result.makespan <= ms + tol  # HEFT is one of its candidates
        if meta["status"] == "OPTIMAL":
            assert ms >= meta["objective_s"] - tol, (name, ms, meta)


# --------------------------------------------------------- models CP-SAT would refuse
def slow_chain(n: int, nbytes: int, bandwidth: float) -> tuple[Graph, Platform]:
    """``n`` ops in a chain, each 0.1 ms on the GPU and 10 ms on the CPU, whose tensors
    would cross a very slow link: every plan worth having keeps them on the GPU."""
    g = Graph(name="slow-chain")
    for i in range(n):
        g.add_op(f"o{i}", "relu", flops=1e9, bytes=1000)
        if i:
            g.add_edge(f"o{i - 1}", f"o{i}", bytes=nbytes)
    devices = (Device("cpu", "cpu", 1e11, 1e10, 10**14), Device("gpu", "gpu", 1e13, 1e11, 10**14))
    return g, Platform("slow-link", devices, (Link("cpu", "gpu", bandwidth_bytes_per_s=bandwidth),))


def test_a_model_whose_domains_overflow_int64_is_solved_in_a_coarser_unit() -> None:
    """12 ops, 1 GB tensors over 1 B/s: the horizon fits int64 in 10 ns units but the sum of
    the variables' domains does not (CP-SAT's Validate); 10 us units fit both."""
    g, platform = slow_chain(12, 10**9, 1.0)
    run = schedulers.get("optimal", time_limit_s=5.0).run(g, platform, Roofline())
    meta = run.plan.meta
    assert meta["status"] == "OPTIMAL" and "fallback" not in meta
    assert meta["time_unit_s"] == 1e-5
    assert set(run.plan.placement.values()) == {"gpu"}
    assert run.result.makespan == pytest.approx(12 * 2e-4)  # each op 1e9 FLOP at half the 1e13 FLOP/s peak
    assert run.result.makespan == pytest.approx(meta["objective_s"], abs=12 * meta["time_unit_s"])


def test_a_unit_too_coarse_for_the_schedule_returns_heft_with_a_note() -> None:
    g, platform = slow_chain(10, 10**10, 1e-3)
    run = schedulers.get("optimal", time_limit_s=5.0).run(g, platform, Roofline())
    meta = run.plan.meta
    heft = schedulers.get("heft", contention=True).schedule(g, platform, Roofline())
    assert meta["fallback"] == "heft" and meta["status"] == "FEASIBLE" and meta["bound_s"] == 0.0
    assert run.plan.placement == heft.placement
    assert meta["note"] == ("CP-SAT's model fits its 64-bit integers only in units of 0.1 s, too coarse for a "
                            "schedule of 0.002 s; the plan is HEFT's (the solver's hint), not proven optimal")
    assert meta["objective"].endswith(meta["note"])
    assert meta["objective_s"] == run.result.makespan


def test_a_model_invalid_in_every_unit_returns_heft_with_a_note() -> None:
    g, platform = slow_chain(12, 10**12, 1e-9)
    meta = schedulers.get("optimal", time_limit_s=5.0).schedule(g, platform, Roofline()).meta
    assert meta["fallback"] == "heft"
    assert meta["note"].startswith("the horizon overflows CP-SAT's integers even in units of 1000 s; the plan is HEFT's")
    assert meta["solve_time_s"] == 0.0


def test_no_solution_in_time_returns_heft_not_a_misleading_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from hetsim.schedulers.optimal_model import CPSATModel

    def out_of_time(self, seconds, workers):  # noqa: ANN001, ANN202
        self.status = "UNKNOWN"
        self.solve_times.append(seconds)
        return None

    monkeypatch.setattr(CPSATModel, "solve", out_of_time)
    g = GRAPHS["diamond"]()
    plan = schedulers.get("optimal", time_limit_s=2.0).schedule(g, Platform.preset("xeon-p2200"), Roofline())
    assert plan.meta["note"] == ("CP-SAT found no schedule within 1 s; the plan is HEFT's (the solver's hint), "
                                 "not proven optimal")
    assert plan.meta["solve_time_s"] == 1.0
