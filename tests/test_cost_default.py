"""One meaning of ``cost=None`` (costmodel.as_cost_model): each device priced by its
own source (``Device.cost``), the roofline where a device names none; the same on
every path that takes a ``cost``."""

from __future__ import annotations

import dataclasses
import importlib

import pytest
from test_host_model import chain

from hetsim.costmodel import Roofline, as_cost_model
from hetsim.costmodel.composite import PlatformCostModel
from hetsim.graphs import Graph
from hetsim.schedulers import get as get_scheduler
from hetsim.schedulers import run_plan
from hetsim.sim import Plan, Platform, Simulator, simulate

US = 1e-6


class PerOp:
    """Every op ``us`` microseconds, transfers free."""

    def __init__(self, us: float) -> None:
        self.us = us

    def op_time(self, graph: Graph, node: str, device: object) -> float:
        return self.us * US

    def transfer_time(self, nbytes: int, link: object) -> float:
        return 0.0


@pytest.fixture
def sourced(monkeypatch: pytest.MonkeyPatch) -> Platform:
    """``cpu2`` whose first CPU names the source ``per-op:100`` (every op 100 us);
    the second names none (the roofline)."""
    from hetsim.costmodel import register_cost_source

    monkeypatch.setattr(importlib.import_module("hetsim.costmodel.spec"), "_SOURCES", {})
    register_cost_source("per-op", lambda arg, platform=None: PerOp(float(arg)))
    pl = Platform.preset("cpu2")
    first = pl.devices[0]
    return dataclasses.replace(pl, devices=[dataclasses.replace(first, cost="per-op:100"), *pl.devices[1:]])


def test_none_is_each_devices_own_source(sourced: Platform) -> None:
    cost = as_cost_model(None, platform=sourced)
    assert isinstance(cost, PlatformCostModel)
    first, second = sourced.devices
    assert cost.op_time(chain("abc"), "a", first) == pytest.approx(100 * US)
    assert cost.op_time(chain("abc"), "a", second) == Roofline().op_time(chain("abc"), "a", second)


def test_every_path_prices_a_plan_alike_without_a_cost(sourced: Platform) -> None:
    from hetsim.experiments.compare import compare

    g = chain("abc")
    first = sourced.devices[0].name
    plan = Plan(dict.fromkeys("abc", first))
    # three ops of 100 us on the first CPU, each after its dispatch
    expected = 3 * (100 * US + sourced.devices[0].dispatch_s)
    assert simulate(g, sourced, plan).makespan == pytest.approx(expected)
    assert Simulator(g, sourced).simulate(plan).makespan == pytest.approx(expected)
    assert run_plan(g, sourced, plan).result.makespan == pytest.approx(expected)
    run = get_scheduler("all-cpu").run(g, sourced)
    assert set(run.plan.placement.values()) == {first}
    assert run.result.makespan == pytest.approx(expected)
    table = compare(g, sourced, schedulers=["all-cpu"], record=False).runs
    assert table["all-cpu"].result.makespan == pytest.approx(expected)


class FirstDevice:
    """A dynamic policy that places every node on the platform's first device and
    keeps the cost model its view offers."""

    name = "first-device"

    def __init__(self) -> None:
        self.costs: list[object] = []

    def select(self, node: str, view: object) -> str:
        self.costs.append(view.cost)
        return view.platform.device_names[0]

    def to_dict(self) -> dict:
        return {"name": self.name, "params": {}}


def test_execute_predicts_with_each_devices_own_source(sourced: Platform) -> None:
    np = pytest.importorskip("numpy")
    pytest.importorskip("torch")
    from hetsim.runtime.executor.execute import execute_wired
    from hetsim.runtime.executor.setup import Wiring

    g = Graph(name="one")
    t = ([4, 4], "float32")
    g.add_op("a", "matmul", inputs=[t, t], outputs=[t], flops=128.0, param_bytes=64)
    g.meta["inputs"] = [{"name": "x", "shape": [4, 4], "dtype": "float32", "bytes": 64, "consumers": ["a"]}]
    g.meta["outputs"] = [{"node": "a", "output": 0, "shape": [4, 4], "dtype": "float32", "bytes": 64}]
    wiring = Wiring({"a": [("input", "x"), ("const", 0)]}, {0: np.eye(4, dtype=np.float32)}, {},
                    {"x": np.ones((4, 4), dtype=np.float32)})
    policy = FirstDevice()
    execute_wired(g, Plan({}, policy=policy), sourced, wiring, warmup=0, repeats=1, check=False)
    assert policy.costs
    assert all(c.op_time(g, "a", sourced.devices[0]) == pytest.approx(100 * US) for c in policy.costs)
