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
from hetsim.schedulers.base import CostTable, list_schedule, topo_priority
from hetsim.schedulers.incremental_estimate import IncrementalListSchedule

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
