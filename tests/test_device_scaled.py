"""costmodel.DeviceScaled: another model's op times, scaled on the devices it names."""

from __future__ import annotations

import pytest

from hetsim.costmodel import CostModelError, DeviceScaled, Roofline
from hetsim.graphs import Graph
from hetsim.sim import Plan, Platform, simulate


def _graph() -> Graph:
    g = Graph(name="pair")
    g.add_op("a", "matmul", flops=4e8, bytes=2_000_000)
    g.add_op("b", "relu", bytes=1_000_000)
    g.add_op("c", "add", bytes=1_000_000)
    g.add_edge("a", "b", bytes=500_000)
    g.add_edge("a", "c", bytes=500_000)
    return g


def test_only_the_named_devices_op_times_are_scaled_one_node_and_batched_alike() -> None:
    g, plat, base = _graph(), Platform.preset("cpu2"), Roofline()
    scaled = DeviceScaled(base, {"cpu1": 1.25})
    nodes = ["a", "b", "c"]
    for dev, f in ((plat.device("cpu0"), 1.0), (plat.device("cpu1"), 1.25)):
        want = [base.op_time(g, n, dev) * f for n in nodes]
        assert [scaled.op_time(g, n, dev) for n in nodes] == pytest.approx(want, rel=1e-12)
        assert scaled.op_times(g, nodes, dev) == pytest.approx(want, rel=1e-12)
        # host dispatch and transfers are the wrapped model's
        assert scaled.dispatch_times(g, nodes, dev) == [base.dispatch_time(g, n, dev) for n in nodes]
        assert scaled.dispatch_time(g, "a", dev) == base.dispatch_time(g, "a", dev)
    link = Platform.preset("xeon-p2200").links[0]
    assert scaled.transfer_time(1 << 20, link) == base.transfer_time(1 << 20, link)


def test_a_simulation_with_the_second_worker_slower_prices_its_ops_by_the_factor() -> None:
    """Everything on cpu1: the busy time there is the factor times the unscaled one."""
    g, plat = _graph(), Platform.preset("cpu2")
    plan = Plan(dict.fromkeys(["a", "b", "c"], "cpu1"))
    plain = simulate(g, plat, plan, Roofline(), record=True)
    slow = simulate(g, plat, plan, DeviceScaled(Roofline(), {"cpu1": 2.0}), record=True)

    def busy(res) -> float:  # noqa: ANN001
        return sum(r["end"] - r["start"] for r in res.records if r["kind"] == "op")

    assert busy(slow) == pytest.approx(2.0 * busy(plain), rel=1e-12)
    same = simulate(g, plat, Plan(dict.fromkeys(["a", "b", "c"], "cpu0")), DeviceScaled(Roofline(), {"cpu1": 2.0}))
    assert same.makespan == simulate(g, plat, Plan(dict.fromkeys(["a", "b", "c"], "cpu0")), Roofline()).makespan


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf"), "2", True])
def test_a_factor_that_is_not_a_finite_positive_number_is_refused_naming_the_device(factor) -> None:  # noqa: ANN001
    with pytest.raises(CostModelError, match="factor of device 'cpu1'"):
        DeviceScaled(Roofline(), {"cpu1": factor})


def test_a_simulation_prices_each_device_once_through_the_wrapped_model() -> None:
    """price_nodes (what the simulator calls) asks DeviceScaled for both op and dispatch
    times at once, and DeviceScaled asks the wrapped model once per device."""
    from hetsim.costmodel.base import price_nodes

    calls: list[str] = []

    class Counting(Roofline):
        def price_nodes(self, graph, nodes, device, *, attrs=None):  # noqa: ANN001, ANN202
            calls.append(device.name)
            return super().price_nodes(graph, nodes, device, attrs=attrs)

    g, plat = _graph(), Platform.preset("cpu2")
    scaled = DeviceScaled(Counting(), {"cpu1": 1.25})
    ops, disp = price_nodes(scaled, g, ["a", "b", "c"], plat.device("cpu1"))
    assert calls == ["cpu1"]
    assert ops == pytest.approx([Roofline().op_time(g, n, plat.device("cpu1")) * 1.25 for n in "abc"], rel=1e-12)
    assert disp == [Roofline().dispatch_time(g, n, plat.device("cpu1")) for n in "abc"]
    calls.clear()
    simulate(g, plat, Plan({"a": "cpu0", "b": "cpu1", "c": "cpu1"}), scaled)
    assert sorted(calls) == ["cpu0", "cpu1"]
