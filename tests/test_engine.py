"""The SimPy engine on tiny graphs whose makespans are computed by hand.

Times are dyadic fractions (0.25, 0.5, 1, 1.5 ...) so that float sums are exact
and the expected numbers can be compared with ``==``.

Test platform (``two_dev``): devices ``cpu`` and ``gpu``, one link with latency
0.5 s and 1000 bytes/s, so a 1000-byte tensor takes 1.5 s per hop.
"""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest

from hetsim.graphs import Graph
from hetsim.sim import (
    Device,
    Link,
    Plan,
    PlanError,
    Platform,
    SimulationError,
    SystemView,
    simulate,
)
from hetsim.sim.engine import run as engine_run
from hetsim.sim.result import RECORD_COLUMNS

KB = 1000  # bytes of every test tensor: 1.5 s over the test link


class ConstantCost:
    """Op times from a dict (``node`` or ``(node, device)``); exact link times."""

    def __init__(self, times: dict, *, dispatch: float = 0.0, default: float = 0.0) -> None:
        self.times = times
        self.dispatch = dispatch
        self.default = default

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return float(self.times.get((node, device.name), self.times.get(node, self.default)))

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return self.dispatch


def dev(
    name: str,
    kind: str = "cpu",
    *,
    memory: int = 10**9,
    streams: int = 1,
    domain: str | None = None,
) -> Device:
    return Device(
        name,
        kind,
        peak_flops=1e12,
        mem_bandwidth_bytes_per_s=1e11,
        memory_bytes=memory,
        streams=streams,
        memory_domain=domain,
    )


def two_dev(
    *, duplex: bool = True, gpu_memory: int = 10**9, dispatch_threads: int = 1, gpu_streams: int = 1
) -> Platform:
    return Platform(
        name="two",
        devices=(dev("cpu"), dev("gpu", "gpu", memory=gpu_memory, streams=gpu_streams)),
        links=(Link("cpu", "gpu", bandwidth_bytes_per_s=1000.0, latency_s=0.5, duplex=duplex),),
        dispatch_threads=dispatch_threads,
    )


def graph(nodes: list[str], edges: list[tuple], **meta) -> Graph:  # noqa: ANN003
    """Ops named ``nodes``; edges ``(u, v)`` or ``(u, v, output)`` carrying KB bytes."""
    g = Graph(name="t", meta=meta)
    for n in nodes:
        g.add_op(n, "relu", bytes=8)
    for e in edges:
        g.add_edge(e[0], e[1], bytes=KB, output=e[2] if len(e) > 2 else 0)
    return g


def by_kind(res, kind: str) -> list[dict]:  # noqa: ANN001
    return [r for r in res.records if r["kind"] == kind]


def op_times(res) -> dict[tuple[str, int], tuple[float, float]]:  # noqa: ANN001
    return {(r["node"], r["request"]): (r["start"], r["end"]) for r in by_kind(res, "op")}


# ------------------------------------------------------------------ makespans
def test_chain_on_one_device():
    g = graph(["a", "b", "c"], [("a", "b"), ("b", "c")])
    res = simulate(
        g, two_dev(), Plan(dict.fromkeys("abc", "cpu")), ConstantCost({"a": 1, "b": 2, "c": 3})
    )
    assert res.makespan == 6.0
    assert res.latencies == [6.0]
    assert res.device_busy == {"cpu": 6.0, "gpu": 0.0}
    assert res.device_utilisation["cpu"] == 1.0
    assert res.total_bytes_moved == 0


def test_chain_with_transfer():
    g = graph(["a", "b"], [("a", "b")])
    res = simulate(
        g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 2}), record=True
    )
    # a 0-1, copy 1-2.5, b 2.5-4.5
    assert res.makespan == 4.5
    assert res.bytes_moved == {"cpu->gpu": KB, "gpu->cpu": 0}
    assert res.link_busy["cpu->gpu"] == 1.5
    (x,) = by_kind(res, "transfer")
    assert (x["start"], x["end"], x["resource"], x["dst"], x["bytes"]) == (
        1.0,
        2.5,
        "cpu->gpu",
        "gpu",
        KB,
    )
    assert op_times(res)[("b", 0)] == (2.5, 4.5)
    # every record has the RECORD_COLUMNS keys, in that order (result.py spells them out)
    assert {tuple(r) for r in res.records} == {RECORD_COLUMNS}
    assert [r["kind"] for r in res.records] == ["op", "transfer", "op"]


def test_records_are_kept_as_rows_and_made_dicts_on_first_access():
    g = graph(["a", "b"], [("a", "b")])
    res = simulate(
        g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 2}), record=True
    )
    assert "_record_dicts" not in vars(res)  # simulate() leaves the dicts to the first access
    assert [r[:3] for r in res.record_rows] == [("op", "a", "a"), ("transfer", "a[0]->gpu", "a"),
                                                ("op", "b", "b")]
    assert res.records == [dict(zip(RECORD_COLUMNS, row)) for row in res.record_rows]
    assert res.records is res.records  # made once, then kept
    frame = res.to_dataframe()
    assert list(frame.columns) == list(RECORD_COLUMNS) and frame["end"].tolist() == [1.0, 2.5, 4.5]
    again = pickle.loads(pickle.dumps(res))  # pickled as rows only; dicts again on access
    assert "_record_dicts" not in vars(again) and again == res and again.records == res.records
    plain = simulate(g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 2}))
    assert plain.records is None and plain.record_rows is None


def test_diamond_with_transfers():
    # a(cpu 1) -> b(cpu 2), a -> c(gpu 3); b, c -> d(cpu 1)
    g = graph(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    plan = Plan({"a": "cpu", "b": "cpu", "c": "gpu", "d": "cpu"})
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 2, "c": 3, "d": 1}), record=True)
    # a 0-1; b 1-3; copy a->gpu 1-2.5; c 2.5-5.5; copy c->cpu 5.5-7; d 7-8
    assert res.makespan == 8.0
    assert op_times(res)[("c", 0)] == (2.5, 5.5)
    assert op_times(res)[("d", 0)] == (7.0, 8.0)
    assert res.bytes_moved == {"cpu->gpu": KB, "gpu->cpu": KB}


def test_fork_tensor_consumed_twice_on_other_device_moves_once():
    # a(cpu 1) -> b, c on gpu (same output 0) and d on cpu
    g = graph(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("a", "d")])
    plan = Plan({"a": "cpu", "b": "gpu", "c": "gpu", "d": "cpu"})
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 2, "c": 1, "d": 3}), record=True)
    # copy 1-2.5 once; b 2.5-4.5; c 4.5-5.5 (b first: lower topological index); d 1-4
    assert res.bytes_moved["cpu->gpu"] == KB
    assert len(by_kind(res, "transfer")) == 1
    assert res.makespan == 5.5
    assert op_times(res)[("c", 0)] == (4.5, 5.5)


def test_fork_two_outputs_move_separately():
    g = graph(["a", "b", "c"], [("a", "b", 0), ("a", "c", 1)])
    plan = Plan({"a": "cpu", "b": "gpu", "c": "gpu"})
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1, "c": 1}))
    # two tensors queue on one link direction: 1-2.5, 2.5-4; b 2.5-3.5; c 4-5
    assert res.bytes_moved["cpu->gpu"] == 2 * KB
    assert res.makespan == 5.0


@pytest.mark.parametrize(("duplex", "makespan"), [(True, 3.5), (False, 5.0)])
def test_duplex_and_half_duplex_links(duplex: bool, makespan: float):
    # a(cpu) -> b(gpu) and c(gpu) -> d(cpu) cross the link in opposite directions at t=1
    g = graph(["a", "b", "c", "d"], [("a", "b"), ("c", "d")])
    plan = Plan({"a": "cpu", "b": "gpu", "c": "gpu", "d": "cpu"})
    res = simulate(
        g, two_dev(duplex=duplex), plan, ConstantCost(dict.fromkeys("abcd", 1)), record=True
    )
    # duplex: both copies 1-2.5, b and d 2.5-3.5. half duplex: copy for b (more
    # urgent consumer) 1-2.5, copy for d 2.5-4, d 4-5
    assert res.makespan == makespan
    resources = {r["resource"] for r in by_kind(res, "transfer")}
    assert resources == ({"cpu->gpu", "gpu->cpu"} if duplex else {"cpu--gpu"})


def test_two_requests_pipeline():
    g = graph(["a", "b"], [("a", "b")])
    plan = Plan({"a": "cpu", "b": "gpu"})
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1}), requests=2, record=True)
    # r0: a 0-1, copy 1-2.5, b 2.5-3.5; r1: a 1-2, copy 2.5-4 (link busy), b 4-5
    assert res.makespan == 5.0
    assert res.latencies == [3.5, 5.0]
    assert res.throughput == 1 / 1.5
    assert op_times(res)[("a", 1)] == (1.0, 2.0)
    assert res.ops == 4
    # pipelining beats running the requests one after the other
    single = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1}))
    assert res.makespan < 2 * single.makespan


def test_requests_arriving_at_an_interval():
    g = graph(["a", "b"], [("a", "b")])
    plan = Plan({"a": "cpu", "b": "gpu"})
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1}), requests=3, interval_s=4.0)
    assert res.arrivals == [0.0, 4.0, 8.0]
    assert res.latencies == [3.5, 3.5, 3.5]
    assert res.throughput == 0.25  # one request per interval in steady state


def test_microbatches_set_the_number_of_requests():
    g = graph(["a", "b"], [("a", "b")])
    plan = Plan({"a": "cpu", "b": "gpu"}, microbatches=2)
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1}))
    assert res.requests == 2 and res.makespan == 5.0
    assert simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 1}), requests=1).requests == 1


def test_priority_orders_ready_ops():
    g = graph(["a", "b", "c"], [])
    cost = ConstantCost({"a": 1, "b": 2, "c": 4})
    res = simulate(
        g,
        two_dev(),
        Plan(dict.fromkeys("abc", "cpu"), priority={"a": 3, "b": 2, "c": 1}),
        cost,
        record=True,
    )
    assert [op_times(res)[(n, 0)][0] for n in "cba"] == [0.0, 4.0, 6.0]


def test_dispatch_serialises_parallel_ops():
    # two independent 1 s kernels on two devices, 0.25 s host dispatch each
    g = graph(["a", "b"], [])
    plan = Plan({"a": "cpu", "b": "gpu"})
    cost = ConstantCost({"a": 1, "b": 1}, dispatch=0.25)
    res = simulate(g, two_dev(), plan, cost, record=True)
    # a: dispatch 0-0.25, kernel 0.25-1.25; b: dispatch 0.25-0.5, kernel 0.5-1.5
    assert res.makespan == 1.5
    assert res.makespan > max(1.0, 1.0) + 0.25
    assert res.dispatch_busy == 0.5
    assert [(d["start"], d["end"]) for d in by_kind(res, "dispatch")] == [(0.0, 0.25), (0.25, 0.5)]
    two_threads = simulate(g, two_dev(dispatch_threads=2), plan, cost)
    assert two_threads.makespan == 1.25


def test_dispatch_defaults_to_device_dispatch_s():
    class NoDispatch:
        def op_time(self, graph, node, device):  # noqa: ANN001, ANN202
            return 1.0

        def transfer_time(self, nbytes, link):  # noqa: ANN001, ANN202
            return 0.0

    p = two_dev()
    p = p.replace(devices=tuple(Device(**{**d.__dict__, "dispatch_s": 0.5}) for d in p.devices))
    res = simulate(graph(["a", "b"], [("a", "b")]), p, Plan({"a": "cpu", "b": "cpu"}), NoDispatch())
    assert res.makespan == 3.0 and res.dispatch_busy == 1.0


def test_streams_run_ops_concurrently():
    g = graph(["a", "b", "c"], [])
    cost = ConstantCost({"a": 2, "b": 2, "c": 1})
    one = simulate(g, two_dev(), Plan(dict.fromkeys("abc", "gpu")), cost)
    two = simulate(g, two_dev(gpu_streams=2), Plan(dict.fromkeys("abc", "gpu")), cost, record=True)
    assert one.makespan == 5.0
    assert two.makespan == 3.0  # a, b on streams 0, 1 at 0-2; c 2-3
    assert {r["stream"] for r in two.records} == {0, 1}
    assert two.device_utilisation["gpu"] == 5.0 / (3.0 * 2)


def test_multi_hop_route_and_shared_memory():
    # gpu0 -- cpu -- gpu1; cpu and cpu1 share memory
    p = Platform(
        name="hops",
        devices=(
            dev("cpu", domain="host"),
            dev("cpu1", domain="host"),
            dev("gpu0", "gpu"),
            dev("gpu1", "gpu"),
        ),
        links=(Link("cpu", "gpu0", 1000.0, 0.5), Link("gpu1", "cpu", 1000.0, 0.5)),
    )
    g = graph(["a", "b", "c"], [("a", "b"), ("b", "c")])
    res = simulate(
        g,
        p,
        Plan({"a": "gpu0", "b": "gpu1", "c": "cpu1"}),
        ConstantCost(dict.fromkeys("abc", 1)),
        record=True,
    )
    # a 0-1; hop gpu0->cpu 1-2.5, hop cpu->gpu1 2.5-4; b 4-5; copy gpu1->cpu 5-6.5 (cpu1 shares it); c 6.5-7.5
    assert res.makespan == 7.5
    hops = [(r["resource"], r["hop"]) for r in by_kind(res, "transfer")]
    assert hops == [("gpu0->cpu", 0), ("cpu->gpu1", 1), ("gpu1->cpu", 0)]
    free = simulate(
        g, p, Plan({"a": "cpu", "b": "cpu1", "c": "cpu"}), ConstantCost(dict.fromkeys("abc", 1))
    )
    assert free.makespan == 3.0 and free.total_bytes_moved == 0


class Placed:
    """A dynamic policy that places each node where ``placement`` says (``default``
    for the others), whatever the view: the engine's timing of placed ops, alone."""

    name = "placed"

    def __init__(self, placement: dict, default: str = "cpu0") -> None:
        self.placement, self.default = placement, default

    def select(self, node: str, view) -> str:  # noqa: ANN001
        return self.placement.get(node, self.default)

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


def shared_pair(handoff: float, bandwidth: float | None = None) -> Platform:
    """Two workers of one memory (cpu0, cpu1); cpu1 wakes ``handoff`` s after an input
    from cpu0 and reads it at ``bandwidth`` bytes/s."""
    d0 = dev("cpu0", domain="host")
    d1 = Device("cpu1", "cpu", peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=10**9,
                memory_domain="host", handoff_s=handoff, handoff_bandwidth_bytes_per_s=bandwidth)
    return Platform(name="pair", devices=(d0, d1), host="cpu0")


def test_reading_another_workers_output_lengthens_the_op():
    # a (cpu0) feeds b and v (cpu1) with KB bytes each; v is a zero-time view: it reads
    # nothing. b (1 s) reads KB at KB/4 bytes/s: 4 s more, after the 0.25 s handoff;
    # c on cpu1 reads b on its own worker (nothing more); d on cpu0 reads c: cpu0 has
    # no handoff bandwidth (nothing more either)
    g = graph(["a", "b", "v", "c", "d"], [("a", "b"), ("a", "v"), ("b", "c"), ("c", "d")])
    plan = Plan({"a": "cpu0", "b": "cpu1", "v": "cpu1", "c": "cpu1", "d": "cpu0"})
    cost = ConstantCost({"a": 1, "b": 1, "v": 0, "c": 1, "d": 1})
    res = simulate(g, shared_pair(0.25, KB / 4), plan, cost, record=True)
    t = op_times(res)
    assert t[("b", 0)] == (1.25, 6.25) and t[("v", 0)] == (1.25, 1.25) and t[("c", 0)] == (6.25, 7.25)
    assert t[("d", 0)] == (7.25, 8.25) and res.makespan == 8.25
    assert res.device_busy == {"cpu0": 2.0, "cpu1": 6.0} and res.total_bytes_moved == 0
    # the same plan placed by a policy pays the same, priced when each op is ready
    dyn = simulate(g, shared_pair(0.25, KB / 4), Plan({}, policy=Placed(plan.placement)), cost, record=True)
    assert op_times(dyn) == t and dyn.device_busy == res.device_busy
    # two requests: each one's b pays its own read
    two = simulate(g, shared_pair(0.25, KB / 4), plan, cost, requests=2)
    assert two.device_busy["cpu1"] == 12.0


def test_handoff_delays_an_input_from_another_worker_of_the_same_memory():
    # a (cpu0, 1 s) -> b (cpu1, 1 s) -> c (cpu1, 1 s): b starts 0.25 s after a ends;
    # c reads b on its own worker (no handoff); d on cpu0 reads a on cpu0 (none either)
    g = graph(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("a", "d")])
    plan = Plan({"a": "cpu0", "b": "cpu1", "c": "cpu1", "d": "cpu0"})
    res = simulate(g, shared_pair(0.25), plan, ConstantCost(dict.fromkeys("abcd", 1)), record=True)
    t = op_times(res)
    assert t[("b", 0)] == (1.25, 2.25) and t[("c", 0)] == (2.25, 3.25) and t[("d", 0)] == (1.0, 2.0)
    assert res.makespan == 3.25 and res.total_bytes_moved == 0
    # graph inputs are in place when the request starts: no handoff for a root on cpu1
    root = simulate(graph(["a"], []), shared_pair(0.25), Plan({"a": "cpu1"}), ConstantCost({"a": 1}))
    assert root.makespan == 1.0
    # without a handoff the same plan is the plain chain
    assert simulate(g, shared_pair(0.0), plan, ConstantCost(dict.fromkeys("abcd", 1))).makespan == 3.0


def test_handoff_applies_to_dynamically_placed_ops():
    g = graph(["a", "b", "c"], [("a", "b"), ("b", "c")])
    res = simulate(g, shared_pair(0.5), Plan({}, policy=Placed({"b": "cpu1"})), ConstantCost(dict.fromkeys("abc", 1)),
                   record=True)
    t = op_times(res)
    # a 0-1 on cpu0; b on cpu1 from 1.5; c back on cpu0 (cpu0 has no handoff) from 2.5
    assert t[("b", 0)] == (1.5, 2.5) and t[("c", 0)] == (2.5, 3.5)
    # the platform's decision time delays every dynamically placed op, the root included
    slow = dataclasses.replace(shared_pair(0.5), decision_s=0.125)
    t = op_times(simulate(g, slow, Plan({}, policy=Placed({"b": "cpu1"})), ConstantCost(dict.fromkeys("abc", 1)),
                          record=True))
    assert t[("a", 0)] == (0.125, 1.125) and t[("b", 0)] == (1.75, 2.75) and t[("c", 0)] == (2.875, 3.875)
    # a static plan asks no policy: no decision time
    static = simulate(g, slow, Plan({"a": "cpu0", "b": "cpu1", "c": "cpu0"}), ConstantCost(dict.fromkeys("abc", 1)))
    assert static.makespan == 3.5


def test_the_worker_that_finished_an_op_places_its_successors_holding_the_dispatcher():
    """As the executor does: the worker whose op made others placeable runs the policy
    for each of them, one decision_s apiece, holding the host dispatcher (the
    interpreter) meanwhile; they are ready when it is done."""
    g = graph(["a", "b", "c"], [("a", "b"), ("a", "c")])
    plat = dataclasses.replace(shared_pair(0.0), decision_s=0.125)
    cost = ConstantCost(dict.fromkeys("abc", 1), dispatch=0.0625)
    res = simulate(g, plat, Plan({}, policy=Placed({"c": "cpu1"})), cost, record=True)
    t = op_times(res)
    # a: placed on arrival (0.125), dispatched 0.125-0.1875, runs to 1.1875; cpu0 then decides
    # b and c until 1.4375; b's dispatch 1.4375-1.5, c's waits for the slot: 1.5-1.5625
    assert t[("a", 0)] == (0.1875, 1.1875)
    assert t[("b", 0)] == (1.5, 2.5) and t[("c", 0)] == (1.5625, 2.5625)
    (held,) = by_kind(res, "decision")
    assert (held["node"], held["resource"], held["start"], held["end"]) == ("a", "dispatch", 1.1875, 1.4375)
    assert res.makespan == 2.5625 and res.dispatch_busy == 3 * 0.0625 + 0.25
    assert simulate(g, plat, Plan({}, policy=Placed({"c": "cpu1"})), cost).makespan == 2.5625


def test_zero_cost_view_op_skips_the_busy_device():
    # a(cpu 1) -> v(cpu, 0 s) -> w(gpu 1); L is a 5 s op on the cpu behind a
    g = graph(["a", "L", "v", "w"], [("a", "v"), ("v", "w")])
    plan = Plan({"a": "cpu", "L": "cpu", "v": "cpu", "w": "gpu"})
    res = simulate(
        g,
        two_dev(),
        plan,
        ConstantCost({"a": 1, "L": 5, "v": 0, "w": 1}, dispatch=0.0),
        record=True,
    )
    times = op_times(res)
    assert times[("v", 0)] == (1.0, 1.0)  # while L runs 1-6
    assert times[("w", 0)] == (2.5, 3.5)
    assert res.makespan == 6.0
    (view,) = [r for r in by_kind(res, "op") if r["node"] == "v"]
    assert view["stream"] == -1


def test_graph_inputs_and_outputs_cross_to_and_from_the_host():
    g = graph(["a", "b"], [("a", "b")])
    g.meta["inputs"] = [{"name": "x", "bytes": KB, "consumers": ["a", "b"]}]
    g.meta["outputs"] = [{"node": "b", "output": 0, "bytes": KB}]
    res = simulate(
        g, two_dev(), Plan({"a": "gpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 1}), record=True
    )
    # x to gpu once 0-1.5 (two consumers); a 1.5-2.5; b 2.5-3.5; output back 3.5-5
    assert res.makespan == 5.0
    assert res.bytes_moved == {"cpu->gpu": KB, "gpu->cpu": KB}
    names = [r["name"] for r in by_kind(res, "transfer")]
    assert names == ["x[0]->gpu", "b[0]->cpu"]
    on_host = simulate(g, two_dev(), Plan({"a": "cpu", "b": "cpu"}), ConstantCost({"a": 1, "b": 1}))
    assert on_host.makespan == 2.0 and on_host.total_bytes_moved == 0


# -------------------------------------------------------------------- memory
def test_memory_peak_on_a_chain():
    g = Graph(name="chain")
    for n, w in [("a", 10), ("b", 20), ("c", 30)]:
        g.add_op(n, "relu", bytes=8, param_bytes=w, outputs=[([25], "float32")])  # 100-byte output
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    res = simulate(
        g, two_dev(), Plan(dict.fromkeys("abc", "cpu")), ConstantCost(dict.fromkeys("abc", 1))
    )
    # weights 60; a: +100; b: +100 (a's output is freed when b ends) -> 260; c: 60+100+100
    assert res.weights["cpu"] == 60
    assert res.peak_memory == {"cpu": 260, "gpu": 0}


def test_memory_counts_transferred_copies_and_frees_sources():
    g = Graph(name="x")
    g.add_op("a", "relu", bytes=8, outputs=[([250], "float32")])  # 1000 bytes
    g.add_op("b", "relu", bytes=8, outputs=[([25], "float32")])  # 100 bytes
    g.add_edge("a", "b")
    res = simulate(g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 1}))
    assert res.peak_memory == {"cpu": 1000, "gpu": 1100}


def test_memory_overflow_raises_naming_the_device():
    g = graph(["a", "b"], [("a", "b")])
    g.add_op("big", "relu", bytes=8, outputs=[([100], "float32")])  # 400 bytes
    g.add_edge("a", "big", bytes=KB)
    plan = Plan({"a": "cpu", "b": "gpu", "big": "gpu"})
    cost = ConstantCost({"a": 1, "b": 1, "big": 1})
    with pytest.raises(
        SimulationError,
        match=r"device 'gpu' out of memory.*1000 bytes.*capacity 600 bytes.*'a'\[0\]",
    ):
        simulate(g, two_dev(gpu_memory=600), plan, cost)
    res = simulate(g, two_dev(gpu_memory=600), plan, cost, check_memory=False)
    assert not res.ok and "gpu" in res.failures[0]
    assert res.peak_memory["gpu"] == 1400  # the copy of a's output and big's output
    with pytest.raises(SimulationError, match=r"device 'gpu' out of memory.*op 'big' started"):
        simulate(g, two_dev(gpu_memory=1200), plan, cost)


# --------------------------------------------------------------- dynamic plans
class EarliestFree:
    name = "earliest-free"

    def __init__(self) -> None:
        self.seen: list[tuple[str, float, str | None]] = []

    def select(self, node: str, view) -> str:  # noqa: ANN001
        assert isinstance(view, SystemView)
        self.seen.append((node, view.now, view.location("a")))
        return min(view.platform.device_names, key=view.device_free_at)

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


def test_dynamic_policy_places_ready_nodes():
    g = graph(["a", "b", "c"], [("a", "b"), ("a", "c")])
    policy = EarliestFree()
    plan = Plan({"a": "cpu"}, policy=policy)
    res = simulate(g, two_dev(), plan, ConstantCost({"a": 1, "b": 2, "c": 2}), record=True)
    # at t=1 b goes to the cpu (both free; first wins); cpu is then busy until 3,
    # so c goes to the gpu: copy 1-2.5, c 2.5-4.5
    assert policy.seen == [("b", 1.0, "cpu"), ("c", 1.0, "cpu")]
    devices = {r["node"]: r["resource"] for r in by_kind(res, "op")}
    assert devices == {"a": "cpu", "b": "cpu", "c": "gpu"}
    assert res.makespan == 4.5


class ToGpu(EarliestFree):
    def select(self, node, view):  # noqa: ANN001, ANN202
        return "gpu"


def test_dynamic_reader_placed_late_reuses_the_moved_copy():
    # c1 reads a at t=1 (copy 1-2.5, c1 2.5-3.5); c2 reads a too but waits for slow
    # (cpu 1-11; its copy 11-12.5): it must reuse a's copy on the gpu, not move a again
    g = graph(["a", "slow", "c1", "c2"], [("a", "c1"), ("a", "c2"), ("slow", "c2")])
    plan = Plan({"a": "cpu", "slow": "cpu"}, policy=ToGpu())
    cost = ConstantCost({"a": 1, "slow": 10, "c1": 1, "c2": 1})
    res = simulate(g, two_dev(), plan, cost, record=True)
    moved = [(r["name"], r["start"]) for r in by_kind(res, "transfer")]
    assert moved == [("a[0]->gpu", 1.0), ("slow[0]->gpu", 11.0)]
    assert res.bytes_moved["cpu->gpu"] == 2 * KB
    assert res.makespan == 13.5
    # a's copy is held from 1 until c2, placed at 11, has read it: both copies at once
    assert res.peak_memory["gpu"] == 2 * KB


def test_policy_returning_unknown_device_is_an_error():
    class Bad(EarliestFree):
        def select(self, node, view):  # noqa: ANN001, ANN202
            return "tpu"

    g = graph(["a", "b"], [("a", "b")])
    with pytest.raises(SimulationError, match="'b' on unknown device 'tpu'"):
        simulate(g, two_dev(), Plan({"a": "cpu"}, policy=Bad()), ConstantCost({}))


# ------------------------------------------------------------ errors and output
def test_invalid_plan_raises_plan_error():
    g = graph(["a", "b"], [("a", "b")])
    with pytest.raises(PlanError, match="'b' has no device"):
        simulate(g, two_dev(), Plan({"a": "cpu"}), ConstantCost({}))


@pytest.mark.parametrize("kw", [{"requests": 0}, {"interval_s": -1.0}, {"noise": -0.1}])
def test_bad_arguments(kw: dict):
    g = graph(["a"], [])
    with pytest.raises(SimulationError):
        simulate(g, two_dev(), Plan({"a": "cpu"}), ConstantCost({}), **kw)


def test_bad_cost_is_reported_with_the_op():
    g = graph(["a"], [])
    with pytest.raises(SimulationError, match="op 'a' on 'cpu'"):
        simulate(g, two_dev(), Plan({"a": "cpu"}), ConstantCost({"a": float("nan")}))


class BatchCost(ConstantCost):
    """Prices a device's ops in one call each (``price_nodes``), unconverted."""

    def price_nodes(self, graph: Graph, nodes: list[str], device: Device, *, attrs: object = None) -> tuple:
        return [self.times[n] for n in nodes], [self.dispatch] * len(nodes)


def test_batch_prices_are_converted_one_by_one_when_not_all_floats():
    import numpy as np

    g = graph(["a", "b"], [("a", "b")])
    res = simulate(g, two_dev(), Plan(dict.fromkeys("ab", "cpu")), BatchCost({"a": 1, "b": np.float64(2.5)}),
                   record=True)
    assert op_times(res) == {("a", 0): (0.0, 1.0), ("b", 0): (1.0, 3.5)}
    assert res.device_busy["cpu"] == 3.5 and type(res.device_busy["cpu"]) is float


def test_bad_batch_price_is_reported_with_the_first_op():
    g = graph(["a", "b", "c"], [("a", "b"), ("b", "c")])
    bad = BatchCost({"a": 1.0, "b": float("inf"), "c": "x"})
    with pytest.raises(SimulationError, match=r"returned inf for op 'b' on 'cpu' \(need a finite"):
        simulate(g, two_dev(), Plan(dict.fromkeys("abc", "cpu")), bad)


def test_deadlock_is_detected(monkeypatch: pytest.MonkeyPatch):
    # make the engine lose every transfer: the consumer can never start
    monkeypatch.setattr(engine_run.EngineRun, "queue_hop", lambda self, x: None)
    g = graph(["a", "b"], [("a", "b")])
    with pytest.raises(
        SimulationError, match=r"deadlock: request 0 .*op 'b' is stuck \(waiting for inputs"
    ):
        simulate(g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({"a": 1, "b": 1}))


def test_deterministic_and_seeded_noise():
    g = graph(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    plan = Plan({"a": "cpu", "b": "cpu", "c": "gpu", "d": "cpu"})
    cost = ConstantCost({"a": 1, "b": 2, "c": 3, "d": 1})
    runs = [simulate(g, two_dev(), plan, cost, requests=3, record=True) for _ in range(2)]
    assert runs[0].records == runs[1].records and runs[0].summary() == runs[1].summary()
    noisy = [
        simulate(g, two_dev(), plan, cost, requests=3, noise=0.2, seed=s, record=True)
        for s in (1, 1, 2)
    ]
    assert noisy[0].records == noisy[1].records
    assert noisy[0].makespan != noisy[2].makespan
    assert noisy[0].makespan != runs[0].makespan


def test_result_table_dataframe_and_chrome_trace(tmp_path):
    g = graph(["a", "b"], [("a", "b")])
    res = simulate(
        g,
        two_dev(),
        Plan({"a": "cpu", "b": "gpu"}),
        ConstantCost({"a": 1, "b": 2}, dispatch=0.25),
        record=True,
    )
    text = str(res)
    assert "makespan 5000.0000 ms" in text and "cpu->gpu" in text and "dispatch" in text
    df = res.to_dataframe()
    assert list(df["kind"]) == ["dispatch", "op", "transfer", "dispatch", "op"]
    assert df.loc[df["kind"] == "transfer", "end"].item() == 2.75
    summary = res.summary()
    assert (
        summary["makespan_s"] == 5.0 and summary["bytes_moved"] == KB and summary["util:gpu"] == 0.4
    )
    json.dumps(summary)
    path = res.to_chrome_trace(tmp_path / "t" / "trace.json")
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(names.values()) == ["cpu", "cpu->gpu", "dispatch", "gpu", "gpu->cpu"]
    xs = [e for e in events if e["ph"] == "X"]
    assert len(xs) == 5
    copy = next(e for e in xs if e["cat"] == "transfer")
    assert (names[copy["pid"]], copy["ts"], copy["dur"]) == ("cpu->gpu", 1.25e6, 1.5e6)
    no_records = simulate(g, two_dev(), Plan({"a": "cpu", "b": "gpu"}), ConstantCost({}))
    with pytest.raises(ValueError, match="record=True"):
        no_records.to_dataframe()


def test_roofline_is_the_default_cost():
    g = Graph(name="r")
    g.add_op("a", "matmul", flops=2e9, bytes=12_000_000)
    res = simulate(g, "xeon-p2200", Plan({"a": "gpu"}))
    # dispatch 6 us + 2e9 / (3.8e12 * 0.5259) + 5 us launch
    assert res.makespan == pytest.approx(6e-6 + 1007.04e-6, rel=1e-4)
