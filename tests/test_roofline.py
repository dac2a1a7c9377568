"""The analytic roofline cost model."""

from __future__ import annotations

import json
import math

import pytest

from hetsim.costmodel import CostModel, CostModelError, Roofline
from hetsim.costmodel.roofline import DEFAULT_EFFICIENCY, op_key
from hetsim.graphs import Graph
from hetsim.sim import Device, Link, Platform

GPU = Device(
    "gpu",
    "gpu",
    peak_flops=1e13,
    mem_bandwidth_bytes_per_s=1e12,
    memory_bytes=2**34,
    launch_overhead_s=5e-6,
    dispatch_s=7e-6,
)
CPU = Device(
    "cpu",
    "cpu",
    peak_flops=1e12,
    mem_bandwidth_bytes_per_s=1e11,
    memory_bytes=2**34,
    launch_overhead_s=2e-6,
    dispatch_s=4e-6,
)


def one(op: str, *, flops: float = 0.0, nbytes: int = 0, ops: list[str] | None = None) -> Graph:
    g = Graph(name="one")
    g.add_op("n", op, flops=flops, bytes=nbytes, ops=ops)
    return g


def test_is_a_cost_model_and_deterministic():
    rf = Roofline()
    assert isinstance(rf, CostModel)
    g = one("matmul", flops=3e9, nbytes=10**6)
    assert rf.op_time(g, "n", GPU) == Roofline().op_time(g, "n", GPU)


def test_compute_bound_matmul():
    # gpu:matmul has a breakpoint (1e10, 0.7): 1e10 / (1e13 * 0.7) + 5 us
    g = one("matmul", flops=1e10, nbytes=10**6)
    assert Roofline().op_time(g, "n", GPU) == pytest.approx(1e10 / 7e12 + 5e-6, rel=1e-12)


def test_memory_bound_elementwise():
    g = one("add", flops=1e6, nbytes=4 * 10**8)
    assert Roofline().op_time(g, "n", GPU) == pytest.approx(4e8 / 1e12 + 5e-6, rel=1e-12)
    half = Roofline(bandwidth_efficiency=0.5).op_time(g, "n", GPU)
    assert half == pytest.approx(8e8 / 1e12 + 5e-6, rel=1e-12)
    per_kind = Roofline(bandwidth_efficiency={"gpu": 0.5, "default": 1.0})
    assert per_kind.op_time(g, "n", GPU) == half
    assert per_kind.memory_efficiency(CPU) == 1.0


def test_efficiency_rises_with_size_and_interpolates_in_log_flops():
    rf = Roofline()
    effs = [
        rf.compute_efficiency("matmul", f, GPU) for f in (1e4, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e13)
    ]
    assert effs == sorted(effs) and effs[0] < 0.05 < 0.75 < effs[-1]
    assert effs[0] == effs[1] == 0.03  # clamped below the first breakpoint
    assert effs[-2] == effs[-1] == 0.8  # and above the last
    # halfway between 1e8 (0.2) and 1e9 (0.45) in log10 flops
    assert rf.compute_efficiency("matmul", math.sqrt(1e8 * 1e9), GPU) == pytest.approx(
        0.325, rel=1e-12
    )
    assert rf.compute_efficiency("conv2d", 1e10, CPU) == 0.6
    assert rf.compute_efficiency("softmax", 1e9, GPU) == DEFAULT_EFFICIENCY["default"]


def test_op_classes_and_fused_nodes():
    rf = Roofline()
    assert rf.compute_efficiency("dense", 1e9, GPU) == rf.compute_efficiency("matmul", 1e9, GPU)
    assert rf.compute_efficiency("relax.nn.conv2d_transpose", 1e9, GPU) == rf.compute_efficiency(
        "conv2d", 1e9, GPU
    )
    assert op_key("fused", ["conv2d", "add", "relu"]) == "conv2d"
    assert op_key("fused", ["matmul", "add"]) == "matmul"
    assert op_key("fused", ["add", "relu"]) == "elementwise"
    assert op_key("fused:matmul+gelu") == "matmul"
    f = 5e9
    fused = one("fused", flops=f, nbytes=1000, ops=["conv2d", "add", "relu"])
    conv = one("conv2d", flops=f, nbytes=1000)
    assert rf.op_time(fused, "n", GPU) == rf.op_time(conv, "n", GPU)
    tuned = Roofline(efficiency={"elementwise": 0.1})
    ew = one("fused", flops=1e9, nbytes=8, ops=["add", "relu"])
    assert tuned.op_time(ew, "n", GPU) == pytest.approx(1e9 / 1e12 + 5e-6, rel=1e-12)


def test_view_ops_are_free_and_permute_is_not():
    rf = Roofline()
    for op in ("reshape", "expand_dims", "squeeze", "flatten"):
        g = one(op, nbytes=10**6)
        assert rf.op_time(g, "n", GPU) == 0.0 and rf.dispatch_time(g, "n", GPU) == 0.0
    views = one("fused", nbytes=10**6, ops=["reshape", "squeeze"])
    assert rf.op_time(views, "n", GPU) == 0.0
    perm = one("permute_dims", nbytes=10**6)
    assert rf.op_time(perm, "n", GPU) == pytest.approx(1e6 / 1e12 + 5e-6, rel=1e-12)
    assert rf.dispatch_time(perm, "n", GPU) == 7e-6


def test_transfer_and_dispatch_time():
    rf = Roofline()
    link = Link("cpu", "gpu", bandwidth_bytes_per_s=1.2e10, latency_s=1e-5)
    assert rf.transfer_time(12_000_000, link) == pytest.approx(1e-5 + 1e-3, rel=1e-12)
    assert rf.transfer_time(0, link) == 1e-5
    assert rf.dispatch_time(one("add", nbytes=8), "n", CPU) == 4e-6


def test_table_precedence_device_then_kind_then_any():
    rf = Roofline(
        efficiency={"gpu:softmax": 0.2, "softmax": 0.4, "gpu:matmul": 0.9, "gpu0:matmul": 0.3}
    )
    gpu0 = Device("gpu0", "gpu", 1e13, 1e12, 2**30)
    assert rf.compute_efficiency("softmax", 1e9, GPU) == 0.2
    assert rf.compute_efficiency("softmax", 1e9, CPU) == 0.4
    assert rf.compute_efficiency("matmul", 1e9, GPU) == 0.9
    assert rf.compute_efficiency("matmul", 1e9, gpu0) == 0.3
    # an op-specific entry beats a device-specific class entry
    rf2 = Roofline(efficiency={"batch_matmul": 0.11})
    assert rf2.compute_efficiency("batch_matmul", 1e9, GPU) == 0.11


@pytest.mark.parametrize(
    ("table", "match"),
    [
        ({"matmul": 1.5}, r"efficiency\['matmul'\] must be a fraction"),
        ({"matmul": 0}, "must be a fraction"),
        ({"matmul": [(1e9, 0.5), (1e8, 0.6)]}, "increasing"),
        ({"matmul": []}, "no breakpoints"),
        ({"matmul": "fast"}, "must be a fraction or a list"),
    ],
)
def test_bad_tables_raise(table: dict, match: str):
    with pytest.raises(CostModelError, match=match):
        Roofline(efficiency=table)
    with pytest.raises(CostModelError, match="bandwidth_efficiency"):
        Roofline(bandwidth_efficiency=2.0)


def test_to_dict_round_trip_is_json_safe():
    rf = Roofline(efficiency={"gpu:softmax": 0.2}, bandwidth_efficiency={"cpu": 0.8})
    data = json.loads(json.dumps(rf.to_dict()))
    back = Roofline.from_dict(data)
    assert back.to_dict() == rf.to_dict()
    g = one("softmax", flops=1e9, nbytes=10**6)
    assert back.op_time(g, "n", GPU) == rf.op_time(g, "n", GPU)
    with pytest.raises(CostModelError, match="unknown key"):
        Roofline.from_dict({"efficency": {}})


def test_calibrate_recovers_a_known_table():
    p = Platform.preset("xeon-p2200")
    gpu, cpu = p.device("gpu"), p.device("cpu")
    truth = Roofline(
        efficiency={"gpu:matmul": [(1e8, 0.1), (1e10, 0.6)]}, bandwidth_efficiency={"cpu": 0.7}
    )
    rows = []
    for f in (1e8, 1e9, 1e10):
        g = one("matmul", flops=f, nbytes=1000)
        rows.append(
            {
                "op": "matmul",
                "device": "gpu",
                "flops": f,
                "bytes": 1000,
                "time_s": truth.op_time(g, "n", gpu),
            }
        )
    g = one("add", nbytes=10**8)
    rows.append(
        {
            "op": "add",
            "device": "cpu",
            "flops": 0.0,
            "bytes": 10**8,
            "time_s": truth.op_time(g, "n", cpu),
        }
    )
    rows.append(
        {"op": "reshape", "device": "cpu", "flops": 0.0, "bytes": 10**8, "time_s": 1e-9}
    )  # ignored
    fitted = Roofline().calibrate(rows, p)
    for f in (1e8, 1e9, 1e10, 3e9):
        assert fitted.compute_efficiency("matmul", f, gpu) == pytest.approx(
            truth.compute_efficiency("matmul", f, gpu), rel=1e-9
        )
    assert fitted.memory_efficiency(cpu) == pytest.approx(0.7, rel=1e-9)
    # entries without data keep the defaults
    assert fitted.compute_efficiency("conv2d", 1e9, gpu) == Roofline().compute_efficiency(
        "conv2d", 1e9, gpu
    )
    import pandas as pd

    assert Roofline().calibrate(pd.DataFrame(rows), p).to_dict() == fitted.to_dict()
    with pytest.raises(CostModelError, match="row 1"):
        Roofline().calibrate([{"op": "matmul"}], p)


def test_prices_every_preset():
    g = one("conv2d", flops=2e9, nbytes=10**7)
    for name in Platform.presets():
        for d in Platform.preset(name).devices:
            t = Roofline().op_time(g, "n", d)
            assert d.launch_overhead_s < t < 1.0


def test_a_subclass_overriding_one_node_pricing_is_priced_by_it() -> None:
    """A subclass of Roofline that redefines op_time or dispatch_time (and not
    price_nodes) is priced by them: Roofline's array pricing never hides the override."""
    from hetsim.costmodel.base import price_nodes

    class NoDispatch(Roofline):
        def dispatch_time(self, graph, node, device):
            return 0.0

    class Slow(Roofline):
        def op_time(self, graph, node, device):
            return 2 * super().op_time(graph, node, device)

    g = Graph()
    g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    gpu = Platform.preset("xeon-p2200").device("gpu")
    ops, disp = price_nodes(Roofline(), g, ["mm"], gpu)
    assert disp == [gpu.dispatch_s] and disp[0] > 0
    assert price_nodes(NoDispatch(), g, ["mm"], gpu) == (ops, [0.0])
    assert price_nodes(Slow(), g, ["mm"], gpu)[0] == [2 * ops[0]]


def test_price_nodes_are_the_one_node_prices_and_a_subclass_may_override_them() -> None:
    """Roofline prices a device's nodes in one pass (price_nodes), with the numbers of
    op_time and dispatch_time; op_times and dispatch_times are its two lists; a
    subclass that overrides price_nodes is priced by its own."""
    from hetsim.costmodel.base import price_nodes

    g = Graph()
    g.add_op("mm", "matmul", flops=2e9, bytes=12_000_000)
    g.add_op("view", "reshape", bytes=0)
    g.add_op("add", "add", bytes=4_000)
    g.add_op("f", "fused:conv2d+relu", flops=1e8, bytes=10**6)
    nodes = list(g)
    cost = Roofline()
    for dev in Platform.preset("xeon-p2200").devices:
        ops, disp = cost.price_nodes(g, nodes, dev)
        assert ops == [cost.op_time(g, n, dev) for n in nodes] == cost.op_times(g, nodes, dev)
        assert disp == [cost.dispatch_time(g, n, dev) for n in nodes] == cost.dispatch_times(g, nodes, dev)
        assert price_nodes(cost, g, nodes, dev) == (ops, disp)

    class HalfBatch(Roofline):
        def price_nodes(self, graph, nodes, device, *, attrs=None):
            ops, disp = super().price_nodes(graph, nodes, device, attrs=attrs)
            return [t / 2 for t in ops], disp

    class HalfOne(HalfBatch):  # its one-node change is its pricing, below HalfBatch's
        def op_time(self, graph, node, device):
            return Roofline.op_time(self, graph, node, device) / 4

    gpu = Platform.preset("xeon-p2200").device("gpu")
    ops, disp = price_nodes(cost, g, nodes, gpu)
    assert price_nodes(HalfBatch(), g, nodes, gpu) == ([t / 2 for t in ops], disp)
    assert HalfBatch().op_times(g, nodes, gpu) == [t / 2 for t in ops]
    assert price_nodes(HalfOne(), g, nodes, gpu) == ([t / 4 for t in ops], disp)


def test_array_pricing_is_the_one_node_pricing_bit_for_bit() -> None:
    """The array path of price_nodes (many nodes) gives op_time's and
    dispatch_time's numbers exactly, on every device of every preset, for ints,
    floats, zero and huge sizes, views, fused ops and size-dependent efficiencies;
    with ``attrs`` too; and a bad node still raises op_time's error, for the first one."""
    import numpy as np

    rng = np.random.default_rng(7)
    kinds = ["matmul", "conv2d", "add", "relu", "softmax", "reshape", "fused:conv2d+relu", "dense", "layer_norm"]
    g = Graph()
    for i in range(300):
        op = kinds[i % len(kinds)]
        flops = [0, 1, int(rng.integers(1, 10**6)), float(10 ** rng.uniform(3, 12)), 2**70][i % 5]
        nbytes = [0, int(rng.integers(1, 10**8)), float(10 ** rng.uniform(2, 9))][i % 3]
        g.add_op(f"n{i}", op, flops=flops, bytes=nbytes)
    nodes = list(g)
    cost = Roofline(efficiency={"gpu:matmul": [[4.0, 0.1], [9.0, 0.6], [11.0, 0.8]]})
    for name in Platform.presets():
        for dev in Platform.preset(name).devices:
            ops, disp = cost.price_nodes(g, nodes, dev)
            assert ops == [cost.op_time(g, n, dev) for n in nodes]
            assert disp == [cost.dispatch_time(g, n, dev) for n in nodes]
            attrs = [g.nx.nodes[n] for n in nodes]
            assert cost.price_nodes(g, nodes, dev, attrs=attrs) == (ops, disp)
    g.nx.nodes["n40"]["flops"] = "lots"
    gpu = Platform.preset("xeon-p2200").device("gpu")
    with pytest.raises(ValueError, match="could not convert string to float: 'lots'"):
        cost.price_nodes(g, nodes, gpu)


# ------------------------------------------------------------------ math modes
def _mode_graph(n: int = 1) -> Graph:
    """``n`` copies of: an FP32 conv, FP32 / FP16 / BF16 matmuls (1e10 FLOPs, 1e6 bytes each)."""
    g = Graph()
    for i in range(n):
        g.add_op(f"conv{i}", "conv2d", inputs=[([1, 8, 8, 8], "float32"), ([8, 8, 3, 3], "float32")],
                 outputs=[([1, 8, 8, 8], "float32")], flops=1e10, bytes=1e6)
        for dt in ("float32", "float16", "bfloat16"):
            g.add_op(f"mm_{dt}{i}", "matmul", inputs=[([64, 64], dt), ([64, 64], dt)],
                     outputs=[([64, 64], dt)], flops=1e10, bytes=1e6)
    return g


def _tensor_gpu(**kw) -> Device:
    return Device("g", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=1e12, memory_bytes=1 << 30, **kw)


HALF = {"gpu:conv2d": 0.5, "gpu:matmul": 0.5}


def test_convolutions_run_tf32_and_matmuls_fp32_unless_the_precision_says_otherwise():
    import warnings

    from hetsim.costmodel.learned.measured import CostModelWarning

    g = _mode_graph()
    gpu = _tensor_gpu(tensor_flops={"tf32": 1e14, "fp16": 2e14})
    r = Roofline(efficiency=HALF)
    assert r.op_time(g, "conv0", gpu) == pytest.approx(1e10 / (1e14 * 0.5))
    assert r.op_time(g, "mm_float320", gpu) == pytest.approx(1e10 / (1e13 * 0.5))
    assert r.op_time(g, "mm_float160", gpu) == pytest.approx(1e10 / (2e14 * 0.5))
    assert Roofline(efficiency=HALF, matmul_precision="high").op_time(g, "mm_float320", gpu) == pytest.approx(2e-4)
    high = _tensor_gpu(tensor_flops={"tf32": 1e14}, matmul_precision="high")
    assert r.op_time(g, "mm_float320", high) == pytest.approx(2e-4)
    with pytest.warns(CostModelWarning, match=r"GPU 'g' states no tensor_flops.bf16: .* FP32 peak_flops"):
        assert r.op_time(g, "mm_bfloat160", gpu) == pytest.approx(2e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # stated once per device and mode
        r.op_time(g, "mm_bfloat160", gpu)
        # a GPU without TF32 (a stated table without it) runs FP32 convs in FP32, silently
        assert r.op_time(g, "conv0", _tensor_gpu(tensor_flops={"fp16": 2e14})) == pytest.approx(2e-3)
        # no table: peak_flops prices every op, whatever its dtype
        plain = _tensor_gpu()
        assert [r.op_time(g, n, plain) for n in ("conv0", "mm_float160")] == pytest.approx([2e-3, 2e-3])
    assert Roofline.from_dict(Roofline(matmul_precision="medium").to_dict()).matmul_precision == "medium"
    with pytest.raises(CostModelError, match="unknown matmul_precision 'fast'"):
        Roofline(matmul_precision="fast")


def test_math_modes_agree_between_the_node_and_the_array_path():
    g = _mode_graph(5)
    gpu = _tensor_gpu(tensor_flops={"tf32": 1e14, "fp16": 2e14, "bf16": 2e14})
    r = Roofline(efficiency=HALF)
    nodes = list(g.nx)
    assert r.op_times(g, nodes, gpu) == [r.op_time(g, n, gpu) for n in nodes]
    assert sorted(set(r.op_times(g, nodes, gpu))) == pytest.approx([1e-4, 2e-4, 2e-3])


@pytest.mark.parametrize(("kw", "match"), [
    ({"tensor_flops": {"tf64": 1e14}}, r"unknown tensor_flops mode 'tf64'"),
    ({"tensor_flops": {"tf32": -1.0}}, r"tensor_flops.tf32"),
    ({"tensor_flops": 1e14}, r"'tensor_flops' must be a table"),
    ({"matmul_precision": "fast"}, r"unknown 'matmul_precision' 'fast'"),
])
def test_bad_tensor_keys_are_platform_errors(kw, match):
    from hetsim.costmodel.platform import PlatformError

    with pytest.raises(PlatformError, match=match):
        _tensor_gpu(**kw)
    with pytest.raises(PlatformError, match="GPU devices only"):
        Device("c", "cpu", peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=1 << 30,
               tensor_flops={"tf32": 1e14})
