"""The host as it runs (sim/engine/host.py): closed-form cases computed by hand.

Times are in microseconds in the comments; every op time, dispatch time and hop
time comes from :class:`Fixed`, so each case is a few additions.
"""

from __future__ import annotations

import pytest

from hetsim.costmodel.platform import Device, Link
from hetsim.graphs import Graph
from hetsim.sim import Plan, Platform, simulate
from hetsim.sim.engine.host_costs import edge_host_costs, partition_segments
from hetsim.sim.engine.prep import index_graph, prepare

US = 1e-6


class Fixed:
    """Op times by node (microseconds), one hop time for every transfer."""

    def __init__(self, times: dict[str, float], hop_us: float = 0.0) -> None:
        self.times, self.hop_us = times, hop_us

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return self.times[node] * US

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return self.hop_us * US


def platform(launch: str | None = "eager", *, gpu_dispatch_us: float = 2.0, cpu_dispatch_us: float = 0.0,
             depth: int = 1024, graph_launch_us: float = 0.0, event_us: float = 0.0, copy_issue_us: float = 0.0,
             handoff_us: float = 0.0, second_cpu: bool = False, lock: bool = False) -> Platform:
    cpus = [Device("cpu", "cpu", 1e12, 1e11, 2**34, dispatch_s=cpu_dispatch_us * US, handoff_s=handoff_us * US,
                   memory_domain="host")]
    if second_cpu:
        cpus.append(Device("cpu1", "cpu", 1e12, 1e11, 2**34, dispatch_s=cpu_dispatch_us * US,
                           memory_domain="host"))
    gpu = Device("gpu", "gpu", 1e13, 1e12, 2**34, dispatch_s=gpu_dispatch_us * US, launch=launch,
                 launch_queue_depth=depth, graph_launch_s=graph_launch_us * US, event_s=event_us * US,
                 copy_issue_s=copy_issue_us * US)
    links = [Link(c.name, "gpu", 1e10) for c in cpus]
    return Platform("p", [*cpus, gpu], links, host="cpu", interpreter_lock=lock)


def chain(names: str) -> Graph:
    g = Graph(name="chain")
    for n in names:
        g.add_op(n, "relu", bytes=0)
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b, bytes=0)
    return g


def spans(res, kind: str) -> list[tuple[str, str, float, float]]:  # noqa: ANN001
    return [(r["name"], r["resource"], round(r["start"] / US, 9), round(r["end"] / US, 9))
            for r in res.records if r["kind"] == kind]


def run(g: Graph, pl: Platform, placement: dict[str, str], times: dict[str, float], hop_us: float = 0.0):  # noqa: ANN201
    return simulate(g, pl, Plan(placement), Fixed(times, hop_us), record=True)


def test_host_bound_chain():
    # launch 5 each: launches end at 5, 10, 15; kernels of 1 start when launched
    res = run(chain("abc"), platform(gpu_dispatch_us=5), dict.fromkeys("abc", "gpu"), dict.fromkeys("abc", 1.0))
    assert spans(res, "op") == [("a", "gpu", 5, 6), ("b", "gpu", 10, 11), ("c", "gpu", 15, 16)]
    assert spans(res, "launch") == [("a", "gpu.host", 0, 5), ("b", "gpu.host", 5, 10), ("c", "gpu.host", 10, 15)]
    assert res.makespan == pytest.approx(16 * US)
    assert res.dispatch_busy == pytest.approx(15 * US)


def test_device_bound_chain():
    # launches end at 1, 2, 3; kernels of 5 back to back from 1
    res = run(chain("abc"), platform(gpu_dispatch_us=1), dict.fromkeys("abc", "gpu"), dict.fromkeys("abc", 5.0))
    assert spans(res, "op") == [("a", "gpu", 1, 6), ("b", "gpu", 6, 11), ("c", "gpu", 11, 16)]
    assert res.makespan == pytest.approx(16 * US)


def test_mixed_chain_follows_the_launch_queue_recurrence():
    # launch_i = launch_{i-1} + 2; start_i = max(launch_i, end_{i-1}); end_i = start_i + kernel_i
    kernels = {"a": 1.0, "b": 5.0, "c": 1.0, "d": 3.0}
    res = run(chain("abcd"), platform(gpu_dispatch_us=2), dict.fromkeys("abcd", "gpu"), kernels)
    launch = end = 0.0
    expected = []
    for n in "abcd":
        launch += 2.0
        start = max(launch, end)
        end = start + kernels[n]
        expected.append((n, "gpu", start, end))
    assert spans(res, "op") == expected == [("a", "gpu", 2, 3), ("b", "gpu", 4, 9), ("c", "gpu", 9, 10),
                                            ("d", "gpu", 10, 13)]


@pytest.mark.parametrize(("depth", "ops", "makespan"), [
    # depth 1: b is launched only when a's kernel ends (6): 6-7 launch, 7-12 b, 12-13 launch, 13-18 c
    (1, [("a", "gpu", 1, 6), ("b", "gpu", 7, 12), ("c", "gpu", 13, 18)], 18),
    (2, [("a", "gpu", 1, 6), ("b", "gpu", 6, 11), ("c", "gpu", 11, 16)], 16),
    (1024, [("a", "gpu", 1, 6), ("b", "gpu", 6, 11), ("c", "gpu", 11, 16)], 16),
])
def test_launch_queue_depth_bounds_the_run_ahead(depth: int, ops: list, makespan: float):
    res = run(chain("abc"), platform(gpu_dispatch_us=1, depth=depth), dict.fromkeys("abc", "gpu"),
              dict.fromkeys("abc", 5.0))
    assert spans(res, "op") == ops
    assert res.makespan == pytest.approx(makespan * US)


def test_graph_mode_launches_a_segment_once():
    # one segment a..c: one launch of 3, then the kernels back to back
    res = run(chain("abc"), platform("graph", graph_launch_us=3), dict.fromkeys("abc", "gpu"),
              {"a": 1.0, "b": 5.0, "c": 1.0})
    assert spans(res, "launch") == [("graph a..c", "gpu.host", 0, 3)]
    assert spans(res, "op") == [("a", "gpu", 3, 4), ("b", "gpu", 4, 9), ("c", "gpu", 9, 10)]


def test_graph_mode_one_launch_per_segment_around_a_cpu_op():
    # a b on the GPU, c on the CPU, d e on the GPU: segments [a, b] and [d, e]
    g = chain("abcde")
    placement = {"a": "gpu", "b": "gpu", "c": "cpu", "d": "gpu", "e": "gpu"}
    res = run(g, platform("graph", graph_launch_us=3), placement, dict.fromkeys("abcde", 1.0))
    # a..b launched at arrival [0, 3]: a 3-4, b 4-5, c 5-6 on the CPU; d..e reads c's output, so
    # its launch waits for c to finish (the event to wait on exists only then): [6, 9], d 9-10, e 10-11
    assert spans(res, "launch") == [("graph a..b", "gpu.host", 0, 3), ("graph d..e", "gpu.host", 6, 9)]
    assert spans(res, "op") == [("a", "gpu", 3, 4), ("b", "gpu", 4, 5), ("c", "cpu", 5, 6), ("d", "gpu", 9, 10),
                                ("e", "gpu", 10, 11)]


def segments_of(g: Graph, placement: dict[str, str], pl: Platform) -> list[list[str]]:
    prep = prepare(index_graph(g), pl, Plan(placement))
    return [[prep.names[u] for u in seg] for seg in partition_segments(prep, prep.loc0, prep.dev_names.index("gpu"))]


def test_segment_partition_of_chains_forks_and_alternating_placements():
    pl = platform("graph")
    assert segments_of(chain("abcd"), dict.fromkeys("abcd", "gpu"), pl) == [["a", "b", "c", "d"]]
    fork = chain("ab")
    fork.add_op("c", "relu", bytes=0)
    fork.add_edge("a", "c", bytes=0)
    assert segments_of(fork, dict.fromkeys("abc", "gpu"), pl) == [["a", "b", "c"]]
    # a's reader c on the CPU cuts after a
    assert segments_of(fork, {"a": "gpu", "b": "gpu", "c": "cpu"}, pl) == [["a"], ["b"]]
    alternating = {n: "gpu" if i % 2 == 0 else "cpu" for i, n in enumerate("abcde")}
    assert segments_of(chain("abcde"), alternating, pl) == [["a"], ["c"], ["e"]]
    # graph inputs and outputs do not cut a segment
    io = chain("abc")
    io.meta["inputs"] = [{"name": "x", "bytes": 64, "consumers": ["b"]}]
    io.meta["outputs"] = [{"node": "a", "output": 0, "bytes": 0}]
    assert segments_of(io, dict.fromkeys("abc", "gpu"), pl) == [["a", "b", "c"]]


def test_gpu_to_cpu_edge_charges_event_copy_issue_and_hand_over():
    pl = platform(gpu_dispatch_us=2, cpu_dispatch_us=4, event_us=1, copy_issue_us=3, handoff_us=10)
    res = run(chain("ab"), pl, {"a": "gpu", "b": "cpu"}, {"a": 5.0, "b": 7.0}, hop_us=20)
    # GPU host: launch 2 = [0, 2], then event record 1 + copy issue 3 = [2, 6]; a [2, 7];
    # copy [7, 27]; hand-over 10: b's input at 37; CPU host: event wait 1 + dispatch 4 = [37, 42]; b [42, 49]
    assert spans(res, "launch") == [("a", "gpu.host", 0, 2)]
    assert spans(res, "host") == [("a", "gpu.host", 2, 6), ("b", "cpu.host", 37, 42)]
    assert spans(res, "transfer") == [("a[0]->cpu", "gpu->cpu", 7, 27)]
    assert spans(res, "op") == [("a", "gpu", 2, 7), ("b", "cpu", 42, 49)]
    assert res.makespan == pytest.approx(49 * US)
    assert res.dispatch_busy == pytest.approx(11 * US)


def test_cpu_to_gpu_edge_charges_copy_issue_on_the_producer():
    pl = platform(gpu_dispatch_us=2, cpu_dispatch_us=4, event_us=1, copy_issue_us=3)
    res = run(chain("ab"), pl, {"a": "cpu", "b": "gpu"}, {"a": 5.0, "b": 7.0}, hop_us=20)
    # CPU: dispatch [0, 4], a [4, 9], event record [9, 10], copy issue [10, 13]; copy [13, 33];
    # b's launch waits for a's copy to be issued: event wait 1 + dispatch 2 = [13, 16]; b [33, 40]
    assert spans(res, "launch") == [("b", "gpu.host", 13, 16)]
    assert spans(res, "host") == [("a", "cpu.host", 0, 4), ("a", "cpu.host", 9, 10), ("a", "cpu.host", 10, 13)]
    assert spans(res, "transfer") == [("a[0]->gpu", "cpu->gpu", 13, 33)]
    assert spans(res, "op") == [("a", "cpu", 4, 9), ("b", "gpu", 33, 40)]


def test_edge_host_costs_count_events_per_device_and_copies_per_tensor():
    g = chain("ab")
    g.add_op("c", "relu", bytes=0)
    g.add_edge("a", "c", bytes=0)
    pl = platform(event_us=1, copy_issue_us=3, second_cpu=True)
    prep = prepare(index_graph(g), pl, Plan({"a": "gpu", "b": "cpu", "c": "cpu1"}))
    a, b = prep.index["a"], prep.index["b"]
    # two reading devices: two event records; two copies (one per destination device)
    assert edge_host_costs(prep, pl.devices, a, prep.loc0[a], prep.loc0) == (0.0, pytest.approx(8 * US))
    assert edge_host_costs(prep, pl.devices, b, prep.loc0[b], prep.loc0) == (pytest.approx(1 * US), 0.0)


@pytest.mark.parametrize(("lock", "ops"), [
    (False, [("x", "cpu", 4, 14), ("y", "cpu1", 4, 14)]),
    # the second worker's call waits for the first's: [4, 8], then y [8, 18]
    (True, [("x", "cpu", 4, 14), ("y", "cpu1", 8, 18)]),
])
def test_interpreter_lock_serialises_host_parts_of_two_cpu_workers(lock: bool, ops: list):
    g = Graph(name="pair")
    g.add_op("x", "relu", bytes=0)
    g.add_op("y", "relu", bytes=0)
    pl = platform(cpu_dispatch_us=4, second_cpu=True, lock=lock)
    res = run(g, pl, {"x": "cpu", "y": "cpu1"}, {"x": 10.0, "y": 10.0})
    assert sorted(spans(res, "op")) == ops


def test_two_requests_share_the_launch_queue_in_request_order():
    # request 0 then 1: launches at 2, 4 (request 0), 6, 8 (request 1); kernels of 3
    res = simulate(chain("ab"), platform(gpu_dispatch_us=2), Plan(dict.fromkeys("ab", "gpu")),
                   Fixed({"a": 3.0, "b": 3.0}), requests=2, record=True)
    ops = [(r["name"], r["request"], round(r["start"] / US, 9), round(r["end"] / US, 9))
           for r in res.records if r["kind"] == "op"]
    assert ops == [("a", 0, 2, 5), ("b", 0, 5, 8), ("a", 1, 8, 11), ("b", 1, 11, 14)]


def test_without_a_launch_mode_the_host_is_a_dispatch_slot_in_series():
    res = run(chain("abc"), platform(None, gpu_dispatch_us=2), dict.fromkeys("abc", "gpu"),
              {"a": 1.0, "b": 5.0, "c": 1.0})
    assert spans(res, "op") == [("a", "gpu", 2, 3), ("b", "gpu", 5, 10), ("c", "gpu", 12, 13)]
    assert not spans(res, "launch")


class OnGPU:
    """A dynamic policy that places every node on the GPU."""

    name = "on-gpu"

    def select(self, node: str, view: object) -> str:
        return "gpu"

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


@pytest.mark.parametrize("launch", ["eager", "graph"])
def test_a_dynamic_plan_places_a_reader_when_its_gpu_producer_is_launched(launch: str):
    # one launch per op (graph falls back to eager); as the executor's GPU worker does,
    # the readers of a launched op are placed (and may be launched) at once, their
    # kernels waiting on the GPU for it: a launched [0, 2], runs [2, 3]; b placed at 2,
    # launched [2, 4], runs [4, 9]
    res = simulate(chain("ab"), platform(launch, gpu_dispatch_us=2), Plan({}, policy=OnGPU()),
                   Fixed({"a": 1.0, "b": 5.0}), record=True)
    assert spans(res, "launch") == [("a", "gpu.host", 0, 2), ("b", "gpu.host", 2, 4)]
    assert spans(res, "op") == [("a", "gpu", 2, 3), ("b", "gpu", 4, 9)]


def test_a_reader_placed_before_its_gpu_producer_ends_waits_for_it():
    # b is placed and launched while a runs: its kernel starts when a's ends
    res = simulate(chain("ab"), platform("eager", gpu_dispatch_us=1), Plan({}, policy=OnGPU()),
                   Fixed({"a": 5.0, "b": 1.0}), record=True)
    assert spans(res, "launch") == [("a", "gpu.host", 0, 1), ("b", "gpu.host", 1, 2)]
    assert spans(res, "op") == [("a", "gpu", 1, 6), ("b", "gpu", 6, 7)]


class Placed:
    """A dynamic policy that places each node where a table says."""

    name = "placed"

    def __init__(self, where: dict[str, str]) -> None:
        self.where = where

    def select(self, node: str, view: object) -> str:
        return self.where[node]

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


def test_a_cpu_reader_placed_while_its_gpu_producer_runs_gets_the_copy_when_it_ends():
    # a launched [0, 1], runs [1, 6]; b placed on the CPU at 1; a's output crosses
    # [6, 8]; b runs [8, 11]
    res = simulate(chain("ab"), platform("eager", gpu_dispatch_us=1), Plan({}, policy=Placed({"a": "gpu", "b": "cpu"})),
                   Fixed({"a": 5.0, "b": 3.0}, hop_us=2.0), record=True)
    assert spans(res, "op") == [("a", "gpu", 1, 6), ("b", "cpu", 8, 11)]
    assert [(s, e) for _, _, s, e in spans(res, "transfer")] == [(6, 8)]


def test_a_cpu_op_places_its_readers_before_it_issues_their_copies():
    # as the executor's CPU worker: a runs [0, 3], places b on the GPU at 3, then
    # issues its copy [3, 5]; the copy crosses [5, 6]; b, ready once its copy is
    # issued, is launched [5, 7] and runs [7, 8]
    res = simulate(chain("ab"), platform("eager", gpu_dispatch_us=2, copy_issue_us=2),
                   Plan({}, policy=Placed({"a": "cpu", "b": "gpu"})), Fixed({"a": 3.0, "b": 1.0}, hop_us=1.0),
                   record=True)
    assert spans(res, "host") == [("a", "cpu.host", 3, 5)]
    assert spans(res, "launch") == [("b", "gpu.host", 5, 7)]
    assert [(s, e) for _, _, s, e in spans(res, "transfer")] == [(5, 6)]
    assert spans(res, "op") == [("a", "cpu", 0, 3), ("b", "gpu", 7, 8)]


def test_host_work_shows_in_the_chrome_trace():
    from hetsim.sim.trace import chrome_trace

    res = run(chain("ab"), platform(gpu_dispatch_us=2), dict.fromkeys("ab", "gpu"), {"a": 1.0, "b": 1.0})
    events = chrome_trace(res)["traceEvents"]
    pids = {e["args"]["name"]: e["pid"] for e in events if e["name"] == "process_name"}
    threads = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert (pids["gpu.host"], "host thread 0") in threads
    launches = [(e["name"], e["ts"], e["dur"]) for e in events if e.get("cat") == "launch"]
    assert launches == [("a", 0.0, pytest.approx(2.0)), ("b", pytest.approx(2.0), pytest.approx(2.0))]


@pytest.mark.parametrize("launch", ["eager", "graph"])
def test_launches_of_no_host_time_do_not_nest(launch: str):
    # 3000 GPU ops alternating with CPU ops, launches free: each GPU op its own segment
    names = [f"n{i}" for i in range(6000)]
    g = Graph(name="long")
    for a in names:
        g.add_op(a, "relu", bytes=0)
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b, bytes=0)
    placement = {n: "gpu" if i % 2 == 0 else "cpu" for i, n in enumerate(names)}
    res = simulate(g, platform(launch, gpu_dispatch_us=0), Plan(placement), Fixed(dict.fromkeys(names, 1.0)))
    assert res.makespan == pytest.approx(6000 * US)


def test_a_launch_waiting_for_another_device_lets_free_launches_go_first():
    # a on the CPU feeds b on the GPU; c on the GPU reads nothing and comes after b in
    # priority order: as in the executor's ready heap, c is launched while b waits for a
    g = Graph(name="fork")
    t = ([4], "float32")
    for n in "abc":
        g.add_op(n, "relu", inputs=[t], outputs=[t])
    g.add_edge("a", "b")
    pl = platform(gpu_dispatch_us=2, cpu_dispatch_us=4)
    res = run(g, pl, {"a": "cpu", "b": "gpu", "c": "gpu"}, {"a": 5.0, "b": 1.0, "c": 1.0}, hop_us=20)
    # c launched [0, 2], runs [2, 3]; CPU: dispatch [0, 4], a [4, 9]; copy [9, 29];
    # b launched once a has finished [9, 11], runs when its input is there [29, 30]
    assert spans(res, "launch") == [("c", "gpu.host", 0, 2), ("b", "gpu.host", 9, 11)]
    assert spans(res, "op") == [("c", "gpu", 2, 3), ("a", "cpu", 4, 9), ("b", "gpu", 29, 30)]


def test_a_launch_waits_for_the_launch_of_its_own_device_it_reads():
    # b reads a (GPU) and x (CPU); c reads b: c's launch waits for b's, which waits for x
    g = Graph(name="join")
    t = ([4], "float32")
    for n in "axbc":
        g.add_op(n, "relu", inputs=[t], outputs=[t])
    for u, v in ("ab", "xb", "bc"):
        g.add_edge(u, v)
    pl = platform(gpu_dispatch_us=2, cpu_dispatch_us=4)
    res = run(g, pl, {"a": "gpu", "x": "cpu", "b": "gpu", "c": "gpu"}, dict.fromkeys("axbc", 1.0), hop_us=3)
    # a launched [0, 2], runs [2, 3]; x: dispatch [0, 4], runs [4, 5], copy [5, 8];
    # b launched [5, 7], c [7, 9]; b runs [8, 9], c [9, 10]
    assert spans(res, "launch") == [("a", "gpu.host", 0, 2), ("b", "gpu.host", 5, 7), ("c", "gpu.host", 7, 9)]
    assert spans(res, "op") == [("a", "gpu", 2, 3), ("x", "cpu", 4, 5), ("b", "gpu", 8, 9), ("c", "gpu", 9, 10)]
