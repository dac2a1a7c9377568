"""The incremental list-scheduling estimator equals the full one, bit for bit.

Random DAGs of ``engine_cases.random_graph`` on every platform of
``engine_cases.platforms`` (presets and hand-made ones: shared memory, multi-hop
routes, half-duplex links, several streams and dispatch lanes), random changes of
one to five nodes, some of them accepted: each change priced incrementally must
equal ``list_schedule`` of the changed placement, and a threshold must only cut a
candidate whose makespan reaches it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from engine_cases import IntCost, platforms, random_graph

from hetsim.costmodel import Roofline
from hetsim.schedulers.base import CostTable, topo_priority
from hetsim.schedulers.eft_state import list_schedule
from hetsim.schedulers.incremental_estimate import IncrementalListSchedule
from hetsim.schedulers.placement_tails import PlacementTails

PLATFORMS = platforms()


def _full(table: CostTable, placement: dict[str, str], order: list[str]) -> float:
    return list_schedule(table, placement, order, presorted=True).makespan


def _devices(table: CostTable, n: str) -> list[str]:
    return [d for d in table.devices if table.w[n][d] < math.inf]


@pytest.mark.parametrize("pname", sorted(PLATFORMS))
def test_every_change_is_priced_as_the_full_estimator_prices_it(pname: str) -> None:
    platform = PLATFORMS[pname]
    checked = cut = 0
    for seed in range(6):
        rng = np.random.default_rng(100 + seed)
        g = random_graph(rng, int(rng.choice([3, 20, 45, 90])))
        cost = IntCost(seed) if pname == "int" else Roofline()
        try:
            table = CostTable(g, platform, cost)
        except ValueError:  # a node fits on no device of this platform
            continue
        order = list(table.topo)
        rng.shuffle(order)  # any order the estimator accepts: made topological below
        prio = topo_priority(g, order)
        order = sorted(prio, key=prio.__getitem__)
        base = {n: str(rng.choice(_devices(table, n))) for n in order}
        est = IncrementalListSchedule(table, base, order)
        assert est.makespan == _full(table, base, order)
        for _ in range(40):
            nodes = rng.choice(order, size=min(len(order), int(rng.choice([1, 1, 2, 5]))), replace=False)
            change = {str(n): str(rng.choice(_devices(table, str(n)))) for n in nodes}
            want = _full(table, {**est.placement(), **change}, order)
            assert est.evaluate(change) == want
            thr = want * float(rng.choice([0.5, 1.0, 1.0 + 1e-12, 2.0]))
            got = est.evaluate(change, thr)
            if want < thr:
                assert got == want
            else:
                assert thr <= got <= want
                cut += got != want
            if rng.random() < 0.3:
                assert est.commit(change) == want
                assert est.placement() == {**base, **est.placement(), **change}
                assert est.makespan == _full(table, est.placement(), order)
            checked += 1
    assert checked > 0
    if pname == "xeon-p2200":
        assert cut > 0  # the threshold does cut candidates short


def test_no_change_is_the_base_makespan_and_commit_without_evaluate_works() -> None:
    rng = np.random.default_rng(7)
    g = random_graph(rng, 45)
    table = CostTable(g, PLATFORMS["xeon-p2200"], Roofline())
    base = {n: "cpu" for n in table.topo}
    est = IncrementalListSchedule(table, base, table.topo)
    assert est.evaluate({}) == est.evaluate({table.topo[3]: "cpu"}) == est.makespan
    change = {n: "gpu" for n in table.topo[5:12]}
    want = _full(table, {**base, **change}, table.topo)
    assert est.commit(change) == want  # no evaluate before: the re-run is done here
    assert est.placement() == {**base, **change}


@pytest.mark.parametrize("pname", ["xeon-p2200", "multi-gpu-4", "cpu2"])
def test_tails_kept_across_commits_equal_fresh_ones_and_bound_the_base(pname: str) -> None:
    rng = np.random.default_rng(11)
    g = random_graph(rng, 90)
    table = CostTable(g, PLATFORMS[pname], Roofline())
    order = list(table.topo)
    est = IncrementalListSchedule(table, {n: table.fastest(n) for n in order}, order)
    assert est.tails is not None  # one stream per device, one dispatch lane
    for step in range(12):
        est.tails.extend(int(rng.integers(0, len(order))))  # computed lazily, partly
        n = order[int(rng.integers(len(order)))]
        est.commit({n: str(rng.choice(_devices(table, n)))})
        if step % 3 == 0:
            est.tails.extend(0)
            fresh = PlacementTails(est)
            fresh.extend(0)
            assert np.array_equal(est.tails.start, fresh.start)
            assert np.array_equal(est.tails.nxt_lane, fresh.nxt_lane)
            assert np.array_equal(est.tails.nxt_disp, fresh.nxt_disp)
    # the base schedule's own times plus their tails never exceed its makespan
    est.tails.extend(0)
    tails = est.tails
    for p in range(len(order)):
        for d in range(est.nd):
            free = est.state[p, est.dlanes[d][0]]
            assert free + tails.lane(d, p) <= est.makespan * (1 + 1e-12)
        for q in range(p):
            assert est.finish[q] + tails.node(q, est.place[q], p) <= est.makespan * (1 + 1e-12)


@pytest.mark.parametrize("pname", sorted(PLATFORMS))
def test_the_base_kept_across_commits_equals_a_fresh_build(pname: str) -> None:
    # splices keep every resource's free time per position (a resource the rest of
    # the schedule never uses again included) as a build from scratch computes it
    platform = PLATFORMS[pname]
    rng = np.random.default_rng(23)
    g = random_graph(rng, 60)
    cost = IntCost(3) if pname == "int" else Roofline()
    try:
        table = CostTable(g, platform, cost)
    except ValueError:  # a node fits on no device of this platform
        pytest.skip(f"{pname}: a node fits on no device")
    order = list(table.topo)
    est = IncrementalListSchedule(table, {n: str(rng.choice(_devices(table, n))) for n in order}, order)
    for _ in range(25):
        nodes = rng.choice(order, size=int(rng.choice([1, 2, 4])), replace=False)
        est.commit({str(n): str(rng.choice(_devices(table, str(n)))) for n in nodes})
        fresh = IncrementalListSchedule(table, est.placement(), order)
        assert est.makespan == fresh.makespan
        assert np.array_equal(est.place, fresh.place)
        assert np.array_equal(est.finish, fresh.finish)
        assert np.array_equal(est.state, fresh.state)
        n = order[int(rng.integers(len(order)))]
        change = {n: str(rng.choice(_devices(table, n)))}
        assert est.evaluate(change) == fresh.evaluate(change) == _full(table, {**est.placement(), **change}, order)
