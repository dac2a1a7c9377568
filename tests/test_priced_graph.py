"""One priced graph (costmodel/priced.py): each op, dispatch and transfer time of a
(graph, platform, cost) asked of the cost model once, shared by the scheduler's
CostTable and the engine."""

from __future__ import annotations

from collections import Counter

import pytest
from test_host_model import chain

from hetsim.costmodel.platform import Device, Link
from hetsim.costmodel.priced import PricedGraph
from hetsim.graphs import Graph
from hetsim.schedulers import get as get_scheduler
from hetsim.schedulers.base import CostTable
from hetsim.sim import Plan, Platform, Simulator


class Counting:
    """1 us per op on the CPU, 2 on the GPU, 3 per transfer; counts every question."""

    def __init__(self) -> None:
        self.asked: Counter = Counter()

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        self.asked[("op", node, device.name)] += 1
        return 1e-6 if device.kind == "cpu" else 2e-6

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        self.asked[("dispatch", node, device.name)] += 1
        return 0.0

    def transfer_time(self, nbytes: int, link: Link) -> float:
        self.asked[("transfer", nbytes, link.name)] += 1
        return 3e-6


PLATFORM = Platform.preset("xeon-p2200")


def test_scheduler_run_prices_each_op_once_for_planning_and_simulation():
    cost = Counting()
    g = chain("abcd")
    run = get_scheduler("heft").run(g, PLATFORM, cost)
    assert isinstance(run.priced, PricedGraph) and run.priced.cost is cost
    assert run.result.makespan > 0
    assert max(cost.asked.values()) == 1
    assert {k for k in cost.asked if k[0] == "op"} == {("op", n, d) for n in "abcd" for d in ("cpu", "gpu")}
    again = run.simulate()  # the plan's own platform and cost: the same prices, nothing asked
    assert again.result.makespan == run.result.makespan and max(cost.asked.values()) == 1


def test_a_simulator_prices_each_op_once_over_plans():
    cost = Counting()
    g = chain("abc")
    sim = Simulator(g, PLATFORM, cost)
    makespans = [sim.simulate(Plan(dict.fromkeys("abc", d))).makespan for d in ("cpu", "gpu", "cpu")]
    assert makespans == pytest.approx([3e-6, 6e-6, 3e-6])
    assert max(cost.asked.values()) == 1
    assert sum(1 for k in cost.asked if k[0] == "op") == 6


def test_cost_table_and_simulator_share_a_priced_graph():
    cost = Counting()
    g = chain("ab")
    priced = PricedGraph(g, PLATFORM, cost)
    table = CostTable(g, PLATFORM, priced)
    assert table.cost is priced
    assert table.w == {"a": {"cpu": 1e-6, "gpu": 2e-6}, "b": {"cpu": 1e-6, "gpu": 2e-6}}
    assert table.comm(100, "cpu", "gpu") == 3e-6
    res = Simulator(g, PLATFORM, priced).simulate(Plan({"a": "cpu", "b": "gpu"}))
    assert res.makespan == pytest.approx(1e-6 + 3e-6 + 2e-6)
    assert max(cost.asked.values()) == 1


def test_a_priced_graph_asks_its_model_for_another_graph():
    cost = Counting()
    g, other = chain("ab"), chain("ab")
    priced = PricedGraph(g, PLATFORM, cost)
    cpu = PLATFORM.device("cpu")
    assert priced.op_time(g, "a", cpu) == priced.op_time(g, "a", cpu) == 1e-6
    assert priced.op_time(other, "a", cpu) == 1e-6
    assert cost.asked[("op", "a", "cpu")] == 2
