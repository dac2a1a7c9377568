"""Memory-bandwidth contention (sim.contention): hand-computed makespans, off by default.

Times and rates are chosen so that the float arithmetic is exact or compared with
``pytest.approx``.
"""

from __future__ import annotations

import pytest
from test_engine import ConstantCost

from hetsim import zoo
from hetsim.costmodel import Roofline
from hetsim.costmodel.memory_domain import MemoryDomain
from hetsim.graphs import Graph
from hetsim.schedulers import get as get_scheduler
from hetsim.sim import Device, Link, Plan, Platform, PlatformError, simulate


def cpus(*domains: MemoryDomain, link: bool = False) -> Platform:
    """Two workers of one memory (``c0``, ``c1``) and, with ``link``, a GPU behind a
    link of 1000 bytes/s."""
    def d(name: str, kind: str = "cpu", domain: str = "host") -> Device:
        return Device(name, kind, peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=10**9,
                      memory_domain=domain)
    devs = (d("c0"), d("c1")) + ((d("gpu", "gpu", "gpu"),) if link else ())
    links = (Link("c0", "gpu", bandwidth_bytes_per_s=1000.0),) if link else ()
    return Platform("box", devs, links, memory_domains=domains)


def chains(a: list[str], b: list[str]) -> Graph:
    g = Graph(name="two-chains")
    for chain in (a, b):
        for i, n in enumerate(chain):
            g.add_op(n, "relu", bytes=100)
            if i:
                g.add_edge(chain[i - 1], n, bytes=0)
    return g


HOST = MemoryDomain("dram", 15.0, {"c0": 10.0, "c1": 10.0})  # both busy: 15 / 20 = 0.75


def test_two_busy_workers_share_the_bandwidth():
    g = chains(["a"], ["b"])
    plan = Plan({"a": "c0", "b": "c1"})
    cost = ConstantCost({"a": 1.0, "b": 1.0})
    assert simulate(g, cpus(), plan, cost).makespan == 1.0
    res = simulate(g, cpus(HOST), plan, cost)
    assert res.makespan == pytest.approx(1 / 0.75)
    assert res.device_busy == pytest.approx({"c0": 1 / 0.75, "c1": 1 / 0.75})


def test_progress_is_re_timed_when_a_member_starts_or_finishes():
    # c1 runs b0 (0.5 s) then b1 (1 s) while c0 runs a (1 s): both busy at 0.75 until
    # b0 ends at 0.5/0.75; a (0.5 left) ends at 2/3 + 0.5/0.75 = 4/3; b1 has done 0.5
    # by then and runs its last 0.5 alone: 4/3 + 0.5 = 11/6.
    g = chains(["a"], ["b0", "b1"])
    plan = Plan({"a": "c0", "b0": "c1", "b1": "c1"})
    res = simulate(g, cpus(HOST), plan, ConstantCost({"a": 1.0, "b0": 0.5, "b1": 1.0}), record=True)
    ends = {r["node"]: (r["start"], r["end"]) for r in res.records if r["kind"] == "op"}
    assert ends["b0"] == pytest.approx((0.0, 2 / 3))
    assert ends["a"] == pytest.approx((0.0, 4 / 3))
    assert ends["b1"] == pytest.approx((2 / 3, 11 / 6))
    assert res.makespan == pytest.approx(11 / 6)


def test_demand_within_the_bandwidth_slows_nothing_and_off_changes_nothing():
    g = zoo.load("squeezenet1_1", image_size=64)  # parallel fire-module branches, 91 ops
    base = Platform.preset("cpu2")
    plan = get_scheduler("heft").schedule(g, base, Roofline())
    ref = simulate(g, base, plan, record=True)
    roomy = base.replace(memory_domains=(MemoryDomain("host", 1e12, {"cpu0": 1e10, "cpu1": 1e10}),))
    same = simulate(g, roomy, plan, record=True)
    assert same.records == ref.records and same.makespan == ref.makespan
    tight = base.replace(memory_domains=(
        MemoryDomain.from_slowdown("host", ["cpu0", "cpu1"], slowdown=1.1, bandwidth_bytes_per_s=1.5e10),))
    slow = simulate(g, tight, plan)
    assert ref.makespan < slow.makespan <= 1.1 * ref.makespan + 1e-12
    assert simulate(g, tight, plan).makespan == slow.makespan  # deterministic


def test_a_copy_engine_and_a_worker_contend_for_host_memory():
    # the copy c0->gpu (1000 bytes at 1000 B/s: 1 s alone) draws its own rate, 1000 B/s;
    # c1's op draws 1000 B/s; the memory serves 1000 B/s: both at half speed.
    dom = MemoryDomain("dram", 1000.0, {"c1": 1000.0, "c0->gpu": "rate"})
    g = Graph(name="copy-and-compute")
    g.add_op("src", "relu", bytes=8)
    g.add_op("dst", "relu", bytes=8)
    g.add_op("other", "relu", bytes=8)
    g.add_edge("src", "dst", bytes=1000)
    plan = Plan({"src": "c0", "dst": "gpu", "other": "c1"})
    cost = ConstantCost({"src": 0.0625, "dst": 0.0625, "other": 2.0})
    alone = simulate(g, cpus(link=True), plan, cost, record=True)
    both = simulate(g, cpus(dom, link=True), plan, cost, record=True)
    hop = [r for r in both.records if r["kind"] == "transfer"][0]
    assert [r for r in alone.records if r["kind"] == "transfer"][0]["end"] == 1.0625
    # the copy runs 0.0625 .. 0.0625 + 2 (half speed while `other` runs)
    assert hop["end"] == pytest.approx(2.0625)
    # other: 0.0625 s alone, then 1.9375 s of work at 0.5 while the copy runs (to 2.0625,
    # doing 1 s), then 0.9375 s alone
    other = [r for r in both.records if r["node"] == "other"][0]
    assert other["end"] == pytest.approx(3.0)
    assert both.link_busy["c0->gpu"] == pytest.approx(2.0)


def test_duplex_link_name_draws_both_directions():
    dom = MemoryDomain("dram", 1000.0, {"c0<->gpu": 500.0})
    p = cpus(dom, link=True)
    from hetsim.sim.contention import Contention

    c = Contention(None, p, p.device_names, [n for n, _ in p.link_resources()])
    assert c.device == [None, None, None]
    assert c.link == [[(0, 500.0)], [(0, 500.0)]]


def test_platform_toml_round_trip(tmp_path):
    p = cpus(MemoryDomain("dram", 15.0, {"c0": 10.0, "c1": "rate"}))
    data = p.to_dict()
    assert data["memory_domains"] == [{"name": "dram", "bandwidth_bytes_per_s": 15.0,
                                       "demand_bytes_per_s": {"c0": 10.0, "c1": "rate"}}]
    assert Platform.from_dict(data) == p
    assert "memory_domains" not in cpus().to_dict()
    text = (
        'name = "box"\nhost = "c0"\n'
        + "".join(f'[[devices]]\nname = "{n}"\nkind = "cpu"\npeak_flops = 1e12\n'
                  f'mem_bandwidth_bytes_per_s = 1e11\nmemory_bytes = 1000000000\nmemory_domain = "host"\n'
                  for n in ("c0", "c1"))
        + '[[memory_domains]]\nname = "dram"\nbandwidth_bytes_per_s = 15.0\n'
        + '[memory_domains.demand_bytes_per_s]\nc0 = 10.0\nc1 = "rate"\n'
    )
    (tmp_path / "box.toml").write_text(text)
    assert Platform.from_toml(tmp_path / "box.toml").memory_domains == p.memory_domains


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ({"name": "d", "bandwidth_bytes_per_s": 1.0, "demand_bytes_per_s": {"c9": 1.0}},
         "memory domain 'd' names unknown member 'c9'"),
        ({"name": "d", "bandwidth_bytes_per_s": -1.0, "demand_bytes_per_s": {"c0": 1.0}},
         "'bandwidth_bytes_per_s' must be a positive number, got -1.0"),
        ({"name": "d", "bandwidth_bytes_per_s": 1.0, "demand_bytes_per_s": {"c0": "fast"}},
         "demand of 'c0' must be a positive number of bytes/s or 'rate', got 'fast'"),
        ({"name": "d", "bandwidth_bytes_per_s": 1.0, "demand_bytes_per_s": {}},
         "'demand_bytes_per_s' must be a non-empty table"),
        ({"name": "d", "bandwidth_bytes_per_s": 1.0}, "memory_domains[0] misses ['demand_bytes_per_s']"),
        ({"name": "d", "bandwidth_bytes_per_s": 1.0, "demand_bytes_per_s": {"c0": 1.0}, "x": 1},
         "memory_domains[0] has unknown key(s) ['x']"),
    ],
)
def test_malformed_memory_domain_is_a_one_line_error(domain: dict, message: str):
    data = cpus().to_dict()
    data["memory_domains"] = [domain]
    with pytest.raises(PlatformError) as e:
        Platform.from_dict(data, source="box.toml")
    assert message in str(e.value) and "\n" not in str(e.value)


def test_from_slowdown_reproduces_the_measured_slowdown():
    dom = MemoryDomain.from_slowdown("host", ["c0", "c1"], slowdown=1.25, bandwidth_bytes_per_s=16.0)
    assert dict(dom.demand) == {"c0": 10.0, "c1": 10.0}
    assert dom.rate({"c0", "c1"}) == 0.8 and dom.rate({"c0"}) == 1.0
    # a slowdown below one (noise) models no contention
    assert MemoryDomain.from_slowdown("host", ["c0", "c1"], slowdown=0.9,
                                      bandwidth_bytes_per_s=16.0).rate({"c0", "c1"}) == 1.0


def test_a_worker_lingers_after_its_op_and_slows_the_other_meanwhile():
    # a (c0, 1 s) hands to b (c1, 1 s). With linger_s = 0.5, c0 keeps drawing until
    # 1.5: b runs at 0.75 for 0.5 s (0.375 done), then alone: ends at 1.5 + 0.625.
    g = chains(["a", "b"], [])
    plan = Plan({"a": "c0", "b": "c1"})
    cost = ConstantCost({"a": 1.0, "b": 1.0})
    assert simulate(g, cpus(HOST), plan, cost).makespan == 2.0
    lingering = MemoryDomain("dram", 15.0, {"c0": 10.0, "c1": 10.0}, linger_s=0.5)
    res = simulate(g, cpus(lingering), plan, cost, record=True)
    ends = {r["node"]: (r["start"], r["end"]) for r in res.records if r["kind"] == "op"}
    assert ends["a"] == (0.0, 1.0)
    assert ends["b"] == pytest.approx((1.0, 2.125))
    # the same worker's next op ends its linger: a chain on one worker never slows itself
    one = Plan({"a": "c0", "b": "c0"})
    assert simulate(g, cpus(lingering), one, cost).makespan == 2.0
    # a linger longer than the gap: c1's op starts while c0 lingers, c0's next op
    # (a2, after b) starts while c1 lingers: both slowed for their first 0.5 s
    g3 = chains(["a", "b", "a2"], [])
    res3 = simulate(g3, cpus(lingering), Plan({"a": "c0", "b": "c1", "a2": "c0"}),
                    ConstantCost({"a": 1.0, "b": 1.0, "a2": 1.0}))
    assert res3.makespan == pytest.approx(2.125 + 1.125)


def test_linger_round_trips_and_rejects_a_negative_time():
    p = cpus(MemoryDomain("dram", 15.0, {"c0": 10.0, "c1": 10.0}, linger_s=0.002))
    data = p.to_dict()
    assert data["memory_domains"][0]["linger_s"] == 0.002
    assert Platform.from_dict(data) == p
    data["memory_domains"][0]["linger_s"] = -1
    with pytest.raises(PlatformError, match=r"'linger_s' must be a number of seconds >= 0, got -1"):
        Platform.from_dict(data, source="box.toml")
