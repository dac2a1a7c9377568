"""Every registered scheduler on small fixture graphs and platforms, the registry,
bad input, and the helpers of ``schedulers.base``."""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest

from hetsim import schedulers
from hetsim.costmodel.platform import Device, Link, Platform
from hetsim.costmodel.roofline import Roofline
from hetsim.graphs.graph import Graph, tensor_bytes
from hetsim.schedulers.base import CostTable, SchedulerError, topo_priority, upward_rank
from hetsim.schedulers.by_path import fork_regions
from hetsim.schedulers.eft_state import EFTState, list_schedule
from hetsim.schedulers.heft import heft_state
from hetsim.schedulers.timeslice import partition_chain
from hetsim.sim.engine.simulator import simulate
from hetsim.sim.plan import Plan

F32 = "float32"


# ------------------------------------------------------------------ fixture graphs
def _conv(g: Graph, name: str, cin: int, cout: int, k: int, hw: int, **extra: object) -> None:
    w = [cout, cin, k, k]
    g.add_op(
        name,
        "conv2d",
        inputs=[([1, cin, hw, hw], F32), (w, F32)],
        outputs=[([1, cout, hw, hw], F32)],
        flops=2.0 * cin * cout * k * k * hw * hw,
        param_bytes=tensor_bytes(w, F32),
        **extra,
    )


def _eltwise(g: Graph, name: str, op: str, shape: list[int], n_in: int = 1, **extra: object) -> None:
    size = math.prod(shape)
    g.add_op(name, op, inputs=[(shape, F32)] * n_in, outputs=[(shape, F32)], flops=float(size * n_in), **extra)


def _io(g: Graph, first: str, last: str) -> None:
    shp = g.nodes[first]["inputs"][0]["shape"]
    out = g.nodes[last]["outputs"][0]
    g.meta["inputs"] = [{"name": "x", "shape": shp, "dtype": F32, "bytes": tensor_bytes(shp, F32), "consumers": [first]}]
    g.meta["outputs"] = [{"node": last, "output": 0, "shape": out["shape"], "dtype": F32,
                          "bytes": tensor_bytes(out["shape"], F32)}]


def chain_graph() -> Graph:
    """conv -> relu -> conv -> relu -> pool: a sequential CNN piece."""
    g = Graph(name="chain", meta={"granularity": "op"})
    _conv(g, "conv1", 64, 64, 3, 56)
    _eltwise(g, "relu1", "relu", [1, 64, 56, 56])
    _conv(g, "conv2", 64, 64, 3, 56)
    _eltwise(g, "relu2", "relu", [1, 64, 56, 56])
    _eltwise(g, "pool", "avg_pool2d", [1, 64, 56, 56])
    for u, v in itertools.pairwise(["conv1", "relu1", "conv2", "relu2", "pool"]):
        g.add_edge(u, v)
    _io(g, "conv1", "pool")
    return g


def diamond_graph() -> Graph:
    """stem -> (heavy conv, light conv) -> add."""
    g = Graph(name="diamond", meta={"granularity": "op"})
    _conv(g, "stem", 32, 64, 3, 56)
    _conv(g, "heavy", 64, 64, 3, 56)
    _conv(g, "light", 64, 64, 1, 56)
    _eltwise(g, "add", "add", [1, 64, 56, 56], n_in=2)
    for u, v in [("stem", "heavy"), ("stem", "light"), ("heavy", "add"), ("light", "add")]:
        g.add_edge(u, v)
    return g


def fork_join_graph() -> Graph:
    """fork -> 3 paths of 2 ops -> join."""
    g = Graph(name="fork-join", meta={"granularity": "op"})
    _conv(g, "fork", 64, 64, 1, 28)
    for b in range(3):
        _conv(g, f"p{b}a", 64, 64, 3, 28)
        _eltwise(g, f"p{b}b", "relu", [1, 64, 28, 28])
        g.add_edge("fork", f"p{b}a")
        g.add_edge(f"p{b}a", f"p{b}b")
    g.add_op("join", "concat", inputs=[([1, 64, 28, 28], F32)] * 3, outputs=[([1, 192, 28, 28], F32)])
    for b in range(3):
        g.add_edge(f"p{b}b", "join")
    return g


def inception_graph() -> Graph:
    """GoogLeNet inception 3a by hand (Szegedy et al. 2015, Table 1): 192x28x28 in,
    four branches (1x1 | 1x1-3x3 | 1x1-3x3 | pool-1x1), concat to 256x28x28."""
    g = Graph(name="inception3a", meta={"granularity": "op"})
    hw = 28
    _conv(g, "stem", 64, 192, 3, hw)
    _conv(g, "b1_1x1", 192, 64, 1, hw)
    _conv(g, "b2_1x1", 192, 96, 1, hw)
    _conv(g, "b2_3x3", 96, 128, 3, hw)
    _conv(g, "b3_1x1", 192, 16, 1, hw)
    _conv(g, "b3_3x3", 16, 32, 3, hw)
    _eltwise(g, "b4_pool", "max_pool2d", [1, 192, hw, hw])
    _conv(g, "b4_1x1", 192, 32, 1, hw)
    g.add_op("concat", "concat",
             inputs=[([1, c, hw, hw], F32) for c in (64, 128, 32, 32)], outputs=[([1, 256, hw, hw], F32)])
    _eltwise(g, "relu_out", "relu", [1, 256, hw, hw])
    for u, v in [("stem", "b1_1x1"), ("stem", "b2_1x1"), ("b2_1x1", "b2_3x3"), ("stem", "b3_1x1"),
                 ("b3_1x1", "b3_3x3"), ("stem", "b4_pool"), ("b4_pool", "b4_1x1")]:
        g.add_edge(u, v)
    for b in ("b1_1x1", "b2_3x3", "b3_3x3", "b4_1x1"):
        g.add_edge(b, "concat")
    g.add_edge("concat", "relu_out")
    _io(g, "stem", "relu_out")
    return g


def lstm_graph(layers: int = 2, steps: int = 4, hidden: int = 512, batch: int = 8) -> Graph:
    """An unrolled LSTM, explicit cells, nodes tagged with their ``step``; per cell
    x-matmul, h-matmul, gate add, gate activations and the cell update; a dense
    head after the last step (no step: it inherits one)."""
    g = Graph(name=f"lstm{layers}x{steps}", meta={"granularity": "op"})
    hs, gs = [batch, hidden], [batch, 4 * hidden]
    w = [hidden, 4 * hidden]
    mm_flops = 2.0 * batch * hidden * 4 * hidden
    inputs = []
    for t in range(steps):
        for layer in range(layers):
            c = f"l{layer}t{t}"
            for kind in ("mmx", "mmh"):
                g.add_op(f"{c}/{kind}", "matmul", inputs=[(hs, F32), (w, F32)], outputs=[(gs, F32)],
                         flops=mm_flops, param_bytes=tensor_bytes(w, F32), step=t)
            _eltwise(g, f"{c}/gates", "add", gs, n_in=2, step=t)
            _eltwise(g, f"{c}/act", "sigmoid", gs, step=t)
            g.add_op(f"{c}/cell", "fused", ops=["mul", "add", "tanh", "mul"],
                     inputs=[(gs, F32), (hs, F32)], outputs=[(hs, F32), (hs, F32)],
                     flops=float(8 * batch * hidden), step=t)
            g.add_edge(f"{c}/mmx", f"{c}/gates")
            g.add_edge(f"{c}/mmh", f"{c}/gates")
            g.add_edge(f"{c}/gates", f"{c}/act")
            g.add_edge(f"{c}/act", f"{c}/cell")
            if t > 0:
                p = f"l{layer}t{t - 1}"
                g.add_edge(f"{p}/cell", f"{c}/mmh", output=0)  # h
                g.add_edge(f"{p}/cell", f"{c}/cell", output=1)  # c
            if layer > 0:
                g.add_edge(f"l{layer - 1}t{t}/cell", f"{c}/mmx", output=0)
            else:
                inputs.append({"name": f"x{t}", "shape": hs, "dtype": F32,
                               "bytes": tensor_bytes(hs, F32), "consumers": [f"{c}/mmx"]})
    g.add_op("head", "dense", inputs=[(hs, F32), ([hidden, 10], F32)], outputs=[([batch, 10], F32)],
             flops=2.0 * batch * hidden * 10, param_bytes=tensor_bytes([hidden, 10], F32))
    g.add_edge(f"l{layers - 1}t{steps - 1}/cell", "head", output=0)
    g.meta["inputs"] = inputs
    g.meta["outputs"] = [{"node": "head", "output": 0, "shape": [batch, 10], "dtype": F32,
                          "bytes": tensor_bytes([batch, 10], F32)}]
    return g


GRAPHS = {
    "chain": chain_graph,
    "diamond": diamond_graph,
    "fork-join": fork_join_graph,
    "inception": inception_graph,
    "lstm": lstm_graph,
}
PLATFORMS = ["xeon-p2200", "cpu2", "multi-gpu-4"]


def one_device_platform() -> Platform:
    return Platform("solo", (Device("cpu", "cpu", 1e12, 1e11, 2**34),))


def fast_kw(name: str) -> dict[str, object]:
    """Keep the optimal solver short in the parametrised sweep."""
    return {"time_limit_s": 2.0} if name == "optimal" else {}


def run(name: str, graph: Graph, platform: Platform, cost: object) -> tuple[Graph, Plan]:
    s = schedulers.get(name, **fast_kw(name))
    r = s.run(graph, platform, cost, simulate=False)
    return r.graph, r.plan


# ------------------------------------------------------------------ checks
def check_records(graph: Graph, plan: Plan, res: object) -> None:
    """Dependencies respected, one op per device stream at a time, every op once."""
    ops = {r["node"]: r for r in res.records if r["kind"] == "op" and r["request"] == 0}
    assert set(ops) == set(graph.nx)
    for u, v in graph.nx.edges:
        assert ops[u]["end"] <= ops[v]["start"] + 1e-12, (u, v)
    if plan.policy is None:
        for n, r in ops.items():
            assert r["resource"] == plan.placement[n]
    by_stream: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in res.records:
        if r["kind"] == "op" and r["stream"] >= 0 and r["end"] > r["start"]:
            by_stream.setdefault((r["resource"], r["stream"]), []).append((r["start"], r["end"]))
    for spans in by_stream.values():
        spans.sort()
        for (_, e0), (s1, _) in itertools.pairwise(spans):
            assert e0 <= s1 + 1e-12


@pytest.mark.parametrize("platform_name", PLATFORMS)
@pytest.mark.parametrize("graph_name", list(GRAPHS))
@pytest.mark.parametrize("name", schedulers.names())
def test_every_scheduler(name: str, graph_name: str, platform_name: str) -> None:
    graph = GRAPHS[graph_name]()
    platform = Platform.preset(platform_name)
    s = schedulers.get(name, **fast_kw(name))
    if not s.applies_to(graph, platform):
        with pytest.raises(SchedulerError):
            s.schedule(graph, platform, Roofline())
        return
    r = s.run(graph, platform, Roofline(), requests=1, record=True)
    g2, plan, res = r.graph, r.plan, r.result
    assert plan.meta["scheduler"] == name
    assert plan.meta["scheduling_time_s"] >= 0
    assert set(plan.meta["params"]) == set(s.get_params())
    plan.validate(g2, platform)
    if plan.policy is None:
        assert set(plan.placement) == set(g2.nx)
    else:
        assert plan.placement == {}
    if plan.stages is not None:
        assert sorted(n for st in plan.stages for n in st) == sorted(g2.nx)
    assert r.scheduler == name and r.result.requests == 1 and r.metrics()["nodes"] == len(g2)
    check_records(g2, plan, res)
    assert res.makespan > 0
    # same plan twice: deterministic
    again = schedulers.get(name, **fast_kw(name)).run(graph, platform, Roofline(), simulate=False).plan
    if name != "optimal":
        assert again.placement == plan.placement and again.priority == plan.priority


def test_pipelines_run_several_requests() -> None:
    graph, platform = lstm_graph(), Platform.preset("xeon-p2200")
    for name in ("timeslice-pipeline", "antichain-dp"):
        plan = schedulers.get(name).schedule(graph, platform, Roofline())
        assert len(plan.stages) == 2
        assert {plan.placement[st[0]] for st in plan.stages} == {"cpu", "gpu"}
        one = simulate(graph, platform, plan, Roofline(), requests=1)
        four = simulate(graph, platform, plan, Roofline(), requests=4)
        assert four.makespan < 4 * one.makespan  # the stages overlap
    plan = schedulers.get("antichain-dp").schedule(graph, platform, Roofline())
    assert plan.microbatches == 4


def test_timeslice_slices_follow_steps() -> None:
    graph = lstm_graph(steps=6)
    plan = schedulers.get("timeslice-pipeline").schedule(graph, Platform.preset("cpu2"), Roofline())
    assert plan.meta["slice_by"] == "step"
    (a0, a1, _), (b0, b1, _) = plan.meta["slices"]
    assert a0 == 0 and b0 == a1 + 1 and b1 == 5
    # two identical CPUs: equal halves
    assert a1 == 2
    steps = {n: graph.nodes[n].get("step", 5) for n in graph.nx}
    for n in plan.stages[0]:
        assert steps[n] <= 2


def test_antichain_dp_exact_and_linear_agree_on_a_chain() -> None:
    graph, platform = chain_graph(), Platform.preset("xeon-p2200")
    exact = schedulers.get("antichain-dp").schedule(graph, platform, Roofline())
    linear = schedulers.get("antichain-dp", max_states=1).schedule(graph, platform, Roofline())
    assert exact.meta["mode"] == "antichain" and linear.meta["mode"] == "linear"
    # a chain's downsets are its prefixes: same optimum
    assert exact.meta["stage_time_estimate"] == pytest.approx(linear.meta["stage_time_estimate"])
    assert exact.stages == linear.stages


def test_antichain_dp_uses_branch_cuts() -> None:
    """On the inception block the exact DP sees cuts a topological prefix cannot."""
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    exact = schedulers.get("antichain-dp").schedule(graph, platform, Roofline())
    linear = schedulers.get("antichain-dp", max_states=1).schedule(graph, platform, Roofline())
    assert exact.meta["states"] > graph.number_of_nodes() + 1
    assert exact.meta["stage_time_estimate"] <= linear.meta["stage_time_estimate"] * (1 + 1e-12)
    assert exact.meta["stage_devices"] == ["gpu", "cpu"]


def test_by_path_keeps_branches_whole() -> None:
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    ((fork, join, branches),) = fork_regions(graph)
    assert (fork, join) == ("stem", "concat")
    assert sorted(map(sorted, branches)) == sorted(
        [["b1_1x1"], ["b2_1x1", "b2_3x3"], ["b3_1x1", "b3_3x3"], ["b4_1x1", "b4_pool"]]
    )
    plan = schedulers.get("by-path").schedule(graph, platform, Roofline())
    for br in branches:
        assert len({plan.placement[n] for n in br}) == 1
    assert len({plan.placement[b[0]] for b in branches}) == 2  # both devices used
    fast = plan.meta["fastest_device"]
    for n in ("stem", "concat", "relu_out"):
        assert plan.placement[n] == fast


def test_by_op_spreads_parallel_levels() -> None:
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    plan = schedulers.get("by-op").schedule(graph, platform, Roofline())
    level1 = ["b1_1x1", "b2_1x1", "b3_1x1", "b4_pool"]
    assert plan.meta["parallel_levels"] >= 1
    assert plan.placement["stem"] == plan.meta["fastest_device"]
    assert {plan.placement[n] for n in level1} == {"cpu", "gpu"}  # the level is spread
    nothing = schedulers.get("by-op", min_parallel_s=1.0).schedule(graph, platform, Roofline())
    assert set(nothing.placement.values()) == {nothing.meta["fastest_device"]}


def test_tensor_split_splits_the_heaviest_ops() -> None:
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    s = schedulers.get("tensor-split", top_k=2, only_if_faster=False)  # every split tried is kept
    g2 = s.transform(graph, platform, Roofline())
    assert g2 is not graph and "tensor_split" not in graph.meta
    split = g2.meta["tensor_split"]
    assert len(split) == 2 and "stem" in split  # the stem conv is the heaviest
    plan = s.schedule(g2, platform, Roofline())
    cost = Roofline()
    for node, info in split.items():
        assert node not in g2.nx
        assert [plan.placement[f"{node}/part{i}"] for i in range(2)] == info["devices"] == ["cpu", "gpu"]
        cpu_f, gpu_f = info["fractions"]
        t_cpu, t_gpu = (cost.op_time(graph, node, platform.device(d)) for d in ("cpu", "gpu"))
        assert cpu_f + gpu_f == pytest.approx(1.0)
        assert cpu_f / gpu_f == pytest.approx(t_gpu / t_cpu)  # in proportion to speed
        assert g2.nodes[f"{node}/part0"]["flops"] + g2.nodes[f"{node}/part1"]["flops"] == pytest.approx(
            graph.nodes[node]["flops"])
    # a graph no transform rewrote is planned whole, with HEFT
    whole = s.schedule(graph, platform, Roofline())
    assert whole.placement == schedulers.get("heft").schedule(graph, platform, Roofline()).placement
    assert whole.meta["split_nodes"] == []


@pytest.mark.parametrize("requests", [1, 3])
@pytest.mark.parametrize("graph_name", list(GRAPHS))
def test_tensor_split_is_never_slower_than_heft(graph_name: str, requests: int) -> None:
    """Splitting costs a transfer, a join and a second launch: a split that does not
    pay is not kept, so tensor-split's plan is never slower than plain HEFT's on the
    graph it was given (it used to be, by up to 2.3x: diamond on multi-gpu-4)."""
    graph = GRAPHS[graph_name]()
    for platform_name in ("xeon-p2200", "cpu2", "multi-gpu-4"):
        split = schedulers.get("tensor-split").run(graph, platform_name, requests=requests)
        heft = schedulers.get("heft").run(graph, platform_name, requests=requests)
        assert split.result.makespan <= heft.result.makespan * (1 + 1e-12), (platform_name, split.plan.meta)
        assert split.plan.meta["params"]["requests"] == requests  # judged on the run's requests
        if split.graph is graph:  # no split paid: HEFT's own plan
            assert split.plan.placement == heft.plan.placement and split.plan.meta["split_nodes"] == []
        else:
            assert split.plan.meta["heft_makespan_s"] == pytest.approx(heft.result.makespan)
            trials = split.graph.meta["tensor_split_trials"]
            kept = split.graph.meta["tensor_split"]
            assert set(kept) <= set(trials["splits"]) and split.result.makespan == pytest.approx(min(
                trials["splits"][n] for n in kept))


def test_tensor_split_of_a_small_mlp_is_heft() -> None:
    """On a small MLP a split's transfer and join cost more than it saves: HEFT's plan."""
    g = Graph(name="mlp", meta={"granularity": "op"})
    prev = None
    for i in range(3):
        w = [256, 256]
        g.add_op(f"fc{i}", "matmul", inputs=[([8, 256], F32), (w, F32)], outputs=[([8, 256], F32)],
                 flops=2.0 * 8 * 256 * 256, param_bytes=tensor_bytes(w, F32))  # fmt: skip
        _eltwise(g, f"relu{i}", "relu", [8, 256])
        g.add_edge(f"fc{i}", f"relu{i}")
        if prev:
            g.add_edge(prev, f"fc{i}")
        prev = f"relu{i}"
    _io(g, "fc0", prev)
    for platform_name in ("xeon-p2200", "h100-server"):
        split = schedulers.get("tensor-split").run(g, platform_name)
        forced = schedulers.get("tensor-split", only_if_faster=False).run(g, platform_name)
        heft = schedulers.get("heft").run(g, platform_name)
        assert forced.result.makespan > heft.result.makespan  # what splitting every matmul costs
        assert split.graph is g and split.result.makespan == heft.result.makespan


def test_dynamic_plan_round_trips(tmp_path) -> None:  # noqa: ANN001
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    plan = schedulers.get("dynamic", include_dispatch=False).schedule(graph, platform, Roofline())
    path = plan.to_json(tmp_path / "plan.json")
    back = schedulers.load_plan(path)
    assert back.policy is not None and back.policy.to_dict() == plan.policy.to_dict()
    assert "policy" not in back.meta
    a = simulate(graph, platform, plan, Roofline())
    b = simulate(graph, platform, back, Roofline())
    assert a.makespan == b.makespan
    static = schedulers.load_plan(schedulers.get("heft").schedule(graph, platform, Roofline()).to_json(tmp_path / "h.json"))
    assert static.policy is None


def test_dynamic_policy_picks_earliest_finish() -> None:
    graph, platform = chain_graph(), Platform.preset("xeon-p2200")
    policy = schedulers.get("dynamic").make_policy()

    class View:
        def __init__(self, free: dict[str, float]) -> None:
            self.graph, self.platform, self.cost, self.now, self.free = graph, platform, Roofline(), 0.0, free

        def device_free_at(self, device: str) -> float:
            return self.free[device]

        def location(self, node: str) -> str | None:
            return "gpu" if node == "conv1" else None

    assert policy.select("relu1", View({"cpu": 0.0, "gpu": 0.0})) == "gpu"  # input already there
    assert policy.select("relu1", View({"cpu": 0.0, "gpu": 1.0})) == "cpu"  # gpu busy for 1 s


# ------------------------------------------------------------------ single-device, bad input
def test_single_device_baselines() -> None:
    graph = chain_graph()
    plan = schedulers.get("all-gpu").schedule(graph, Platform.preset("multi-gpu-4"), Roofline())
    assert set(plan.placement.values()) == {"gpu0"}
    plan = schedulers.get("all-cpu").schedule(graph, Platform.preset("xeon-p2200"), Roofline())
    assert set(plan.placement.values()) == {"cpu"}
    assert plan.priority == topo_priority(graph)
    with pytest.raises(SchedulerError, match="no GPU"):
        schedulers.get("all-gpu").schedule(graph, Platform.preset("cpu2"), Roofline())


def test_round_robin_and_random() -> None:
    graph, platform = fork_join_graph(), Platform.preset("cpu2")
    rr = schedulers.get("round-robin").schedule(graph, platform, Roofline())
    topo = graph.topological_order()
    assert [rr.placement[n] for n in topo[:3]] == ["cpu0", "cpu1", "cpu0"]
    a = schedulers.get("random", seed=1).schedule(graph, platform, Roofline())
    b = schedulers.get("random", seed=1).schedule(graph, platform, Roofline())
    c = schedulers.get("random", seed=2).schedule(graph, platform, Roofline())
    assert a.placement == b.placement
    assert any(schedulers.get("random", seed=s).schedule(graph, platform, Roofline()).placement != a.placement
               for s in range(2, 6)) or c.placement != a.placement


def test_unknown_scheduler_lists_names() -> None:
    with pytest.raises(SchedulerError) as err:
        schedulers.get("hefty")
    for name in ("heft", "optimal", "cp-greedy"):
        assert name in str(err.value)
    with pytest.raises(SchedulerError, match="accepted"):
        schedulers.get("heft", bogus=1)
    with pytest.raises(SchedulerError, match="fixed"):
        schedulers.get("all-cpu", kind="gpu")


@pytest.mark.parametrize("name", ["by-op", "by-path", "tensor-split"])
def test_two_device_algorithms_refuse_one_device(name: str) -> None:
    s = schedulers.get(name)
    solo = one_device_platform()
    assert not s.applies_to(chain_graph(), solo)
    with pytest.raises(SchedulerError, match="at least 2 devices"):
        s.run(chain_graph(), solo, Roofline())


@pytest.mark.parametrize("name", [n for n in schedulers.names() if n not in ("by-op", "by-path", "tensor-split", "all-gpu")])
def test_one_device_platform(name: str) -> None:
    solo = one_device_platform()
    g2, plan = run(name, diamond_graph(), solo, Roofline())
    if plan.policy is None:
        assert set(plan.placement.values()) == {"cpu"}
    res = simulate(g2, solo, plan, Roofline(), requests=1)
    cost = Roofline()
    assert res.makespan == pytest.approx(
        sum(cost.op_time(g2, n, solo.devices[0]) + cost.dispatch_time(g2, n, solo.devices[0]) for n in g2.nx)
    )


@pytest.mark.parametrize("name", schedulers.names())
def test_empty_graph(name: str) -> None:
    with pytest.raises(SchedulerError, match="empty"):
        schedulers.get(name).schedule(Graph(name="nothing"), Platform.preset("xeon-p2200"), Roofline())


def test_optimal_refuses_big_graphs() -> None:
    with pytest.raises(SchedulerError, match="max_nodes"):
        schedulers.get("optimal", max_nodes=10).schedule(lstm_graph(), Platform.preset("cpu2"), Roofline())


# ------------------------------------------------------------------ helpers
def test_upward_rank_of_a_chain_is_the_remaining_mean_work() -> None:
    graph, platform = chain_graph(), Platform.preset("cpu2")
    table = CostTable(graph, platform, Roofline())
    rank = upward_rank(table)
    # cpu2 shares memory: no transfer, but every edge between the two workers costs the
    # consumer's handoff and its slower read of the other core's output (the same on
    # both), so c-bar of an edge of b bytes is handoff + b / read rate
    handoff = platform.device("cpu1").handoff_s
    bw = platform.device("cpu1").handoff_bandwidth_bytes_per_s
    assert handoff > 0 and platform.device("cpu0").handoff_s == handoff
    assert bw and platform.device("cpu0").handoff_bandwidth_bytes_per_s == bw
    topo = graph.topological_order()
    edge = [graph.nx.edges[u, v]["bytes"] for u, v in zip(topo, topo[1:])]
    for i, n in enumerate(topo):
        cbar = sum(handoff + b / bw for b in edge[i:])
        assert rank[n] == pytest.approx(sum(table.wbar(m) for m in topo[i:]) + cbar)
    assert table.comm(4096, "cpu0", "cpu1") == pytest.approx(handoff + 4096 / bw)
    assert table.comm(4096, "cpu1", "cpu1") == 0.0


def test_tensors_move_once_per_device() -> None:
    """Two consumers of one tensor on the other device: one transfer."""
    graph, platform = fork_join_graph(), Platform.preset("xeon-p2200")
    table = CostTable(graph, platform, Roofline())
    placement = dict.fromkeys(graph.nx, "cpu")
    for b in range(3):
        placement[f"p{b}a"] = "gpu"
    state = list_schedule(table, placement)
    assert list(state.arrival) == [(("fork", 0), "gpu")] + [((f"p{b}a", 0), "cpu") for b in range(3)]
    res = simulate(graph, platform, Plan(placement, state.priority()), Roofline())
    assert res.bytes_moved["cpu->gpu"] == graph.edges["fork", "p0a"]["bytes"]


def test_insertion_fills_gaps() -> None:
    graph = chain_graph()
    table = CostTable(graph, Platform.preset("xeon-p2200"), Roofline())
    state = EFTState(table, insertion=True)
    lane = state.lanes["gpu"][0]
    for start, end in [(0.0, 1.0), (5.0, 6.0)]:
        lane.insert(lane.tail(), start, end)
    s, _ = state.eft("conv1", "gpu")
    assert s == 1.0 + table.disp["conv1"]["gpu"] * 0  # fits in the gap [1, 5)
    state.insertion = False
    assert state.eft("conv1", "gpu")[0] == 6.0


def test_partition_chain_minimises_the_bottleneck() -> None:
    w = [4, 1, 1, 1, 1, 4]
    val, segs = partition_chain(6, ["a", "b"], lambda i, j, d, k: float(sum(w[i:j])))
    assert val == 6.0 and segs == [(0, 3, "a"), (3, 6, "b")]
    # brute force on random inputs
    rng = random.Random(5)
    for _ in range(30):
        n, m = rng.randint(1, 7), rng.randint(1, 3)
        w = [rng.random() for _ in range(n)]
        devs = [f"d{i}" for i in range(m)]
        speed = {d: 1 + i for i, d in enumerate(devs)}
        val, segs = partition_chain(n, devs, lambda i, j, d, k, w=w, speed=speed: sum(w[i:j]) * speed[d])
        k = min(m, n)
        best = min(
            max(sum(w[a:b]) * speed[devs[i]] for i, (a, b) in enumerate(itertools.pairwise((0, *cuts, n))))
            for cuts in itertools.combinations(range(1, n), k - 1)
        )
        assert val == pytest.approx(best)
        assert [s[2] for s in segs] == devs[:k] and segs[0][0] == 0 and segs[-1][1] == n


def test_heft_estimate_matches_simulation_without_contention() -> None:
    """On the chain (no parallelism, nothing to contend for), HEFT's own estimate
    is exactly what the simulator measures."""
    graph, platform = chain_graph(), Platform.preset("xeon-p2200")
    state = heft_state(CostTable(graph, platform, Roofline()))
    res = simulate(graph, platform, state.to_plan(), Roofline())
    assert res.makespan == pytest.approx(state.makespan, rel=1e-12)


def test_cp_greedy_reports_and_is_fast() -> None:
    """200-node layered graph: a few seconds at most; the final number is simulated."""
    rng = random.Random(0)
    g = Graph(name="layered200")
    layers = [[f"n{i}_{j}" for j in range(rng.randint(1, 4))] for i in range(120)]
    names = [n for layer in layers for n in layer][:200]
    alive = set(names)
    for n in names:
        _conv(g, n, 32, 32, rng.choice([1, 3]), rng.choice([7, 14, 28]))
    prev: list[str] = []
    for layer in layers:
        cur = [n for n in layer if n in alive]
        for n in cur:
            for p in rng.sample(prev, min(len(prev), rng.randint(1, 2))):
                g.add_edge(p, n)
        if cur:
            prev = cur
    assert g.number_of_nodes() == 200
    platform = Platform.preset("xeon-p2200")
    t0 = time.perf_counter()
    plan = schedulers.get("cp-greedy").schedule(g, platform, Roofline())
    assert time.perf_counter() - t0 < 10.0
    res = simulate(g, platform, plan, Roofline())
    assert plan.meta["simulated_makespan"] == pytest.approx(res.makespan)
    assert res.makespan <= min(plan.meta["candidates_simulated"].values()) * (1 + 1e-12)
    assert set(plan.meta["key_operators"]) <= set(g.nx)


def test_heterogeneous_schedulers_beat_one_device_on_inception() -> None:
    graph, platform = inception_graph(), Platform.preset("xeon-p2200")
    ms = {}
    for name in ("all-cpu", "all-gpu", "heft", "cp-greedy", "by-path"):
        _, plan = run(name, graph, platform, Roofline())
        ms[name] = simulate(graph, platform, plan, Roofline()).makespan
    best_single = min(ms["all-cpu"], ms["all-gpu"])
    assert ms["cp-greedy"] <= best_single * (1 + 1e-12)
    assert ms["heft"] <= best_single * 1.05


def test_links_named_like_the_simulator() -> None:
    p = Platform("hop", (Device("a", "cpu", 1e12, 1e11, 2**34), Device("b", "gpu", 1e12, 1e11, 2**34),
                         Device("c", "gpu", 1e12, 1e11, 2**34)),
                 (Link("a", "b", 1e9), Link("c", "b", 1e9, duplex=False)))
    table = CostTable(chain_graph(), p, Roofline())
    assert [r for r, _ in table.hops("a", "c")] == ["a->b", "c--b"]
    assert [r for r, _ in table.hops("c", "a")] == ["c--b", "b->a"]


# ------------------------------------------------------- memory and cost-model defects
def weighty_chain(n: int = 6) -> tuple[Graph, Platform]:
    """A chain of matmuls with 500 bytes of weights each, on a CPU and a GPU whose 1300
    bytes hold the weights of two of them: a placement with more on the GPU overflows."""
    g = Graph(name="weighty")
    for i in range(n):
        g.add_op(f"n{i}", "matmul", flops=1e10, bytes=600, param_bytes=500)
        if i:
            g.add_edge(f"n{i - 1}", f"n{i}", bytes=100)
    cpu = Device("cpu", "cpu", peak_flops=1e11, mem_bandwidth_bytes_per_s=1e10, memory_bytes=10**9)
    gpu = Device("gpu", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=1e11, memory_bytes=1300)
    return g, Platform("small-gpu", (cpu, gpu), (Link("cpu", "gpu", bandwidth_bytes_per_s=1e9),))


@pytest.mark.parametrize("name", ["cp-greedy", "optimal", "antichain-dp"])
def test_candidates_that_overflow_memory_are_skipped(name: str) -> None:
    g, platform = weighty_chain()
    run = schedulers.get(name, **fast_kw(name)).run(g, platform, Roofline())
    on_gpu = [n for n, d in run.plan.placement.items() if d == "gpu"]
    assert 1 <= len(on_gpu) <= 2  # the GPU is used, within its memory
    assert run.result.ok and run.result.peak_memory["gpu"] <= 1300
    if name == "cp-greedy":  # all-gpu overflows: simulated and skipped
        assert set(run.plan.meta["candidates_rejected"]) == {"all-gpu"}
        assert "weights placed on device 'gpu' take 3000 bytes" in run.plan.meta["candidates_rejected"]["all-gpu"]


def test_cp_greedy_with_no_candidate_that_fits_says_so() -> None:
    # a 3-op chain of 400-byte tensors on two 500-byte devices: wherever n1 runs, its
    # input (or the input's copy) and its output take 800 bytes
    g = Graph(name="fat-tensors")
    for i in range(3):
        g.add_op(f"n{i}", "relu", bytes=300)
    g.add_edge("n0", "n1", bytes=400)
    g.add_edge("n1", "n2", bytes=400)
    small = [Device(n, k, peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=500)
             for n, k in (("cpu", "cpu"), ("gpu", "gpu"))]
    platform = Platform("small", tuple(small), (Link("cpu", "gpu", bandwidth_bytes_per_s=1e9),))
    with pytest.raises(SchedulerError, match=r"cp-greedy: every candidate placement of graph 'fat-tensors' "
                       r"overflows a device's memory on 'small', e.g. corrected: device '(cpu|gpu)' out of memory"):
        schedulers.get("cp-greedy").schedule(g, platform, Roofline())


def test_antichain_dp_names_the_node_that_fits_no_stage() -> None:
    g = Graph(name="a-first")
    g.add_op("a", "matmul", flops=1e9, bytes=5000)
    g.add_op("b", "relu", bytes=10)
    g.add_edge("a", "b", bytes=4)
    _, platform = weighty_chain()
    with pytest.raises(SchedulerError, match=r"antichain-dp: no split of graph 'a-first' into stages on gpu, cpu "
                       r"\(in that order\) fits the devices' memory: node 'a' needs 5000 bytes, more than "
                       r"'gpu' has \(1300 bytes\)"):
        schedulers.get("antichain-dp").schedule(g, platform, Roofline())


class OpAndTransfer:
    """A cost model with the two methods the design names, and no ``dispatch_time``."""

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return 1e-3 if device.kind == "cpu" else 4e-4

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s


@pytest.mark.parametrize("name", schedulers.names())
def test_a_cost_model_without_dispatch_time_works_everywhere(name: str) -> None:
    graph, platform = GRAPHS["diamond"](), Platform.preset("xeon-p2200")
    s = schedulers.get(name, **fast_kw(name))
    run = s.run(graph, platform, OpAndTransfer(), requests=1, record=True)
    dispatches = [r for r in run.result.records if r["kind"] == "dispatch"]
    # the host dispatch is the platform's dispatch_s, as the docs promise
    ops = {(r["node"], r["request"]): r["resource"] for r in run.result.records if r["kind"] == "op"}
    for r in dispatches:
        assert r["end"] - r["start"] == pytest.approx(platform.device(ops[r["node"], r["request"]]).dispatch_s)
    assert run.result.makespan > 0


def test_an_object_that_is_no_cost_model_is_refused_up_front() -> None:
    with pytest.raises(Exception, match=r"dict is not a cost model: it lacks op_time and transfer_time"):
        schedulers.get("heft").run(GRAPHS["diamond"](), "xeon-p2200", {"op_time": 1})
