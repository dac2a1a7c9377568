"""Tests for graphs.relax_import: PyTorch / ONNX / Relax import at op and fused granularity."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("tvm")

from onnx import TensorProto, helper  # noqa: E402
from torch import nn  # noqa: E402

from hetsim.graphs.graph import GraphError, load, tensor_bytes  # noqa: E402
from hetsim.graphs.relax_import import from_onnx, from_relax, from_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning"
)


# ----------------------------------------------------------------------------- models
class ConvBNReLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, stride=2, padding=1, groups=2, bias=False)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class TwoBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.b = nn.Conv2d(3, 6, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.cat([self.a(x), self.b(x)], dim=1))


class SplitMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = torch.relu(self.fc1(x)).split(16, dim=1)
        return a, self.fc2(b)


class CellLoop(nn.Module):
    """An LSTMCell unrolled over time (explicit cell, as TVM_NOTES recommends)."""

    def __init__(self, steps: int = 3) -> None:
        super().__init__()
        self.steps = steps
        self.cell = nn.LSTMCell(4, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.zeros(x.shape[1], 8)
        c = torch.zeros(x.shape[1], 8)
        for t in range(self.steps):
            h, c = self.cell(x[t], (h, c))
        return self.head(h)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.max_pool2d(torch.relu(self.c1(x)), 2)
        y = torch.relu(self.c2(y))
        return self.fc(nn.functional.adaptive_avg_pool2d(y, 1).flatten(1))


def weight_bytes(m: nn.Module) -> int:
    """Parameters plus buffers (BN running stats), as the importer binds them."""
    ps = sum(p.numel() * p.element_size() for p in m.parameters())
    bs = sum(b.numel() * b.element_size() for n, b in m.named_buffers() if "num_batches" not in n)
    return ps + bs


def ops_of(g) -> list[str]:
    return [g.nodes[n]["op"] for n in g.topological_order()]


def nodes_with(g, op: str) -> list[str]:
    return [n for n in g if g.nodes[n]["op"] == op]


@pytest.fixture(scope="module")
def convbn():
    torch.manual_seed(0)
    m = ConvBNReLU()
    x = torch.randn(2, 4, 10, 10)
    return m, x, from_torch(m, (x,)), from_torch(m, (x,), granularity="fused")


@pytest.fixture(scope="module")
def cnn_onnx(tmp_path_factory):
    torch.manual_seed(0)
    m = SmallCNN().eval()
    x = torch.randn(2, 3, 16, 16)
    path = tmp_path_factory.mktemp("onnx") / "cnn.onnx"
    torch.onnx.export(
        m, (x,), str(path), dynamo=False, opset_version=17, input_names=["x"],
        dynamic_axes={"x": {0: "batch"}},
    )  # fmt: skip
    return m, x, path


# -------------------------------------------------------------------------- op level
def test_conv_bn_relu_op_graph(convbn):
    m, x, g, _ = convbn
    assert ops_of(g) == ["conv2d", "batch_norm", "relu"]
    conv = nodes_with(g, "conv2d")[0]
    d = g.nodes[conv]
    # 2 * N * K * Cin/groups * kh * kw * OH * OW
    assert d["flops"] == 2 * 2 * 8 * (4 // 2) * 3 * 3 * 5 * 5
    assert d["attrs"]["strides"] == [2, 2] and d["attrs"]["groups"] == 2
    assert d["inputs"] == [
        {"shape": [2, 4, 10, 10], "dtype": "float32"},
        {"shape": [8, 2, 3, 3], "dtype": "float32"},
    ]
    assert d["outputs"] == [{"shape": [2, 8, 5, 5], "dtype": "float32"}]
    assert d["param_bytes"] == 8 * 2 * 3 * 3 * 4
    assert d["bytes"] == tensor_bytes([2, 4, 10, 10], "float32") + 576 + 1600
    bn = nodes_with(g, "batch_norm")[0]
    assert g.edges[conv, bn] == {"bytes": 2 * 8 * 5 * 5 * 4, "output": 0}
    # batch_norm returns (y, mean, var); relu reads output 0
    relu = nodes_with(g, "relu")[0]
    assert g.edges[bn, relu]["output"] == 0
    assert g.param_bytes == weight_bytes(m)
    assert g.meta["inputs"] == [
        {"name": "x", "shape": [2, 4, 10, 10], "dtype": "float32", "bytes": 3200,
         "consumers": [conv]},
    ]  # fmt: skip
    assert g.meta["outputs"] == [
        {"node": relu, "output": 0, "shape": [2, 8, 5, 5], "dtype": "float32", "bytes": 1600}
    ]
    for key, val in (
        ("source", "torch"),
        ("granularity", "op"),
        ("dtype", "float32"),
        ("batch", 2),
    ):
        assert g.meta[key] == val
    assert g.name == "convbnrelu"


def test_training_flag_is_restored():
    m = SplitMLP().train()
    from_torch(m, (torch.randn(4, 16),))
    assert m.training


def test_two_branch_concat():
    g = from_torch(TwoBranch(), (torch.randn(1, 3, 8, 8),))
    assert Counter(ops_of(g)) == Counter({"conv2d": 2, "concat": 1, "relu": 1})
    (cat,) = nodes_with(g, "concat")
    convs = nodes_with(g, "conv2d")
    assert sorted(g.predecessors(cat)) == sorted(convs)
    assert {g.edges[c, cat]["bytes"] for c in convs} == {4 * 64 * 4, 6 * 64 * 4}
    assert g.nodes[cat]["attrs"]["axis"] == 1
    assert g.meta["inputs"][0]["consumers"] == convs
    assert g.nodes[convs[1]]["flops"] == 2 * 1 * 6 * 3 * 1 * 1 * 8 * 8


def test_split_tuple_outputs_and_linear_flops():
    m = SplitMLP()
    g = from_torch(m, (torch.randn(4, 16),))
    assert Counter(ops_of(g)) == Counter(
        {"permute_dims": 2, "matmul": 2, "add": 2, "relu": 1, "split": 1}
    )
    mm1, mm2 = nodes_with(g, "matmul")
    assert g.nodes[mm1]["flops"] == 2 * 4 * 32 * 16  # 2*M*N*K
    assert g.nodes[mm2]["flops"] == 2 * 4 * 8 * 16
    (split,) = nodes_with(g, "split")
    assert len(g.nodes[split]["outputs"]) == 2
    assert g.edges[split, mm2] == {"bytes": 4 * 16 * 4, "output": 1}
    outs = g.meta["outputs"]
    assert [(o["node"], o["output"]) for o in outs] == [(split, 0), (nodes_with(g, "add")[1], 0)]
    assert outs[1]["shape"] == [4, 8]
    assert g.param_bytes == weight_bytes(m)


def test_lstm_cell_loop_counts_weights_once():
    steps = 3
    m = CellLoop(steps)
    g = from_torch(m, (torch.randn(steps, 2, 4),))
    ops = Counter(ops_of(g))
    assert ops["matmul"] == 2 * steps + 1
    assert ops["split"] == steps and ops["sigmoid"] == 3 * steps and ops["tanh"] == 2 * steps
    assert g.param_bytes == weight_bytes(m)
    # every step reads the cell's weights again
    assert sum(d["param_bytes"] for _, d in g.nodes(data=True)) > g.param_bytes
    f = from_torch(m, (torch.randn(steps, 2, 4),), granularity="fused")
    assert f.number_of_nodes() < g.number_of_nodes()
    assert f.param_bytes == weight_bytes(m)
    # constant folding removes step 0's h0 @ W_hh (h0 is a constant zero tensor)
    hh0 = 2 * 2 * 32 * 8 + 2 * 32  # matmul + bias add
    assert math.isclose(f.total_flops, g.total_flops - hh0, rel_tol=0.05)


# ------------------------------------------------------------------------ fused level
def test_fused_conv_bn_relu_is_one_kernel(convbn):
    _, _, g, f = convbn
    assert f.number_of_nodes() == 1 < g.number_of_nodes()
    (n,) = list(f)
    d = f.nodes[n]
    assert d["op"] == "fused"
    assert d["ops"][0] == "conv2d" and d["ops"][-1] == "relu"
    assert d["attrs"]["primfunc"].startswith("fused_conv2d")
    conv_flops = g.nodes[nodes_with(g, "conv2d")[0]]["flops"]
    # the conv, then one FLOP per output element for each elementwise member
    out_elems = 2 * 8 * 5 * 5
    assert d["ops"] == ["conv2d", "subtract", "divide", "multiply", "add", "relu"]
    assert d["flops"] == conv_flops + 5 * out_elems
    assert f.meta["granularity"] == "fused"
    assert f.param_bytes == g.param_bytes


def test_fused_fewer_nodes_and_view_kernels():
    m, x = SmallCNN(), torch.randn(2, 3, 16, 16)
    g = from_torch(m, (x,))
    f = from_torch(m, (x,), granularity="fused")
    assert f.number_of_nodes() < g.number_of_nodes()
    assert Counter(tuple(d["ops"]) for _, d in f.nodes(data=True))[("conv2d", "add", "relu")] == 2
    views = [n for n, d in f.nodes(data=True) if d["attrs"].get("view")]
    assert [f.nodes[n]["ops"] for n in views] == [["reshape"]]
    assert f.total_flops == pytest.approx(g.total_flops, rel=0.01)


def test_shape_fold_matches_tvm_fold_constant():
    from tvm.relax.frontend.torch import from_exported_program

    from hetsim.graphs import relax_import

    m = nn.Sequential(ConvBNReLU(), nn.Flatten(), nn.Linear(8 * 5 * 5, 3)).eval()
    mod = from_exported_program(torch.export.export(m, (torch.randn(1, 4, 10, 10),)))
    exact, exact_members = relax_import._fuse(mod, "m", exact_fold=True)
    fast, fast_members = relax_import._fuse(mod, "m")
    assert fast_members == exact_members
    assert fast["main"].script(show_meta=False) == exact["main"].script(show_meta=False)


# ------------------------------------------------------------- determinism, round trip
def test_deterministic_and_json_round_trip(tmp_path):
    m, x = SplitMLP(), torch.randn(4, 16)
    for gran in ("op", "fused"):
        g1 = from_torch(m, (x,), granularity=gran)
        g2 = from_torch(m, (x,), granularity=gran)
        assert g1.to_dict() == g2.to_dict()
        p = g1.to_json(tmp_path / f"g_{gran}.json")
        assert load(p).to_dict() == g1.to_dict()


# ----------------------------------------------------------------------------- ONNX
def test_onnx_matches_torch(cnn_onnx):
    m, x, path = cnn_onnx
    shapes = {"x": list(x.shape)}
    for gran in ("op", "fused"):
        gt = from_torch(m, (x,), granularity=gran)
        go = from_onnx(path, shapes=shapes, granularity=gran)
        assert go.meta["source"] == "onnx" and go.name == "cnn"
        assert go.number_of_nodes() == gt.number_of_nodes()
        if gran == "op":
            ct, co = Counter(ops_of(gt)), Counter(ops_of(go))
            assert co["conv2d"] == ct["conv2d"] == 2 and co["matmul"] == ct["matmul"] == 1
        assert go.total_flops == pytest.approx(gt.total_flops, rel=0.01)
        assert go.param_bytes == gt.param_bytes == weight_bytes(m)
        assert go.meta["batch"] == 2


def test_onnx_dynamic_batch_needs_shapes(cnn_onnx):
    _, _, path = cnn_onnx
    with pytest.raises(GraphError, match="dynamic shape.*shapes="):
        from_onnx(path)
    g = from_onnx(path, shapes={"x": [5, 3, 16, 16]})
    assert g.meta["batch"] == 5


def test_onnx_weights_as_params(cnn_onnx):
    from tvm.relax.frontend.onnx import from_onnx as tvm_from_onnx

    m, x, path = cnn_onnx
    model = onnx.load(str(path))
    mod = tvm_from_onnx(model, shape_dict={"x": list(x.shape)}, keep_params_in_input=True)
    const = from_onnx(model, shapes={"x": list(x.shape)})
    for gran in ("op", "fused"):
        g = from_relax(mod, granularity=gran, name="cnn")
        assert g.param_bytes == weight_bytes(m)
        assert [i["name"] for i in g.meta["inputs"]] == ["x"]
    assert ops_of(from_relax(mod)) == ops_of(const)
    raw = from_relax(mod, params_dedup=False)  # the sum over nodes, no deduplication
    assert raw.param_bytes == sum(d["param_bytes"] for _, d in raw.nodes(data=True))
    assert from_relax(mod, granularity="fused").number_of_nodes() == 6


# ------------------------------------------------------------------------ bad inputs
def test_onnx_rejects_non_onnx_file(tmp_path):
    p = tmp_path / "notes.onnx"
    p.write_text("this is not a model\n")
    with pytest.raises(GraphError, match="notes.onnx"):
        from_onnx(p)
    with pytest.raises(GraphError, match="no such"):
        from_onnx(tmp_path / "missing.onnx")


def test_onnx_unsupported_op_is_named():
    hidden, feat = 4, 3
    w = helper.make_tensor(
        "W", TensorProto.FLOAT, [1, 4 * hidden, feat], np.zeros(4 * hidden * feat).tolist()
    )
    r = helper.make_tensor(
        "R", TensorProto.FLOAT, [1, 4 * hidden, hidden], np.zeros(4 * hidden * hidden).tolist()
    )
    graph = helper.make_graph(
        [helper.make_node("LSTM", ["X", "W", "R"], ["Y", "Yh"], hidden_size=hidden)],
        "lstm_model",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 1, feat])],
        [helper.make_tensor_value_info("Yh", TensorProto.FLOAT, [1, 1, hidden])],
        [w, r],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match=r"'lstm_model'.*LSTM"):
        from_onnx(model)


class Svd(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.svd(x)[1]


def test_torch_unsupported_op_is_named():
    with pytest.raises(GraphError, match=r"'svd'.*_linalg_svd"):
        from_torch(Svd(), (torch.rand(4, 4),))
    with pytest.raises(GraphError, match=r"'my_svd'"):
        from_torch(Svd(), (torch.rand(4, 4),), name="my_svd")


class LastColumn(nn.Module):
    def __init__(self, explicit: bool) -> None:
        super().__init__()
        self.explicit = explicit

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return y[:, y.shape[1] - 1] if self.explicit else y[:, -1]


def test_negative_index_bug_is_guarded():
    with pytest.raises(GraphError, match=r"negative.*y\.shape\[1\] - 1"):
        from_torch(LastColumn(explicit=False), (torch.rand(2, 5),))
    g = from_torch(LastColumn(explicit=True), (torch.rand(2, 5),))
    assert ops_of(g) == ["take"]


def test_unknown_granularity_and_non_module():
    with pytest.raises(GraphError, match="granularity"):
        from_torch(SplitMLP(), (torch.randn(4, 16),), granularity="layer")
    with pytest.raises(GraphError, match="IRModule"):
        from_relax("not a module")  # type: ignore[arg-type]


# ------------------------------------------------------------------------- helpers
def test_kernel_names_and_transposed_conv_formula():
    from hetsim.graphs.relax_ops import formula_flops, kernel_ops_from_name

    assert kernel_ops_from_name("fused_conv2d1_add_max_pool2d_relu2") == [
        "conv2d", "add", "max_pool2d", "relu",
    ]  # fmt: skip
    assert kernel_ops_from_name("fused_reshape1_transpose_concatenate") == [
        "reshape", "permute_dims", "concat",
    ]  # fmt: skip
    m = nn.ConvTranspose2d(8, 4, 2, stride=2, bias=False)
    g = from_torch(m, (torch.randn(1, 8, 5, 5),))
    (n,) = nodes_with(g, "conv2d_transpose")
    # TIR estimation would count the zeros of the stride-dilated input (x stride**2)
    assert g.nodes[n]["flops"] == 2 * 1 * 8 * 5 * 5 * 4 * 2 * 2
    assert (
        formula_flops("matmul", [{"shape": [3, 5]}, {"shape": [5, 7]}], [{"shape": [3, 7]}], {})
        == 210
    )


def test_strided_slice_keeps_its_bounds() -> None:
    """Literal tuple arguments (begin/end/strides/axes) are attributes: two different
    slices of one tensor must not look identical (signature, torch backend)."""
    import torch

    from hetsim import graphs

    class Slices(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x[:, 1:5:2] + x[:, 0:2]

    g = graphs.from_torch(Slices(), (torch.randn(2, 8),))
    a, b = (g.nodes[n] for n in g if g.nodes[n]["op"] == "strided_slice")
    assert (a["attrs"]["axes"], a["attrs"]["begin"], a["attrs"]["end"], a["attrs"]["strides"]) == ([1], [1], [5], [2])
    assert (b["attrs"]["begin"], b["attrs"]["end"], b["attrs"]["strides"]) == ([0], [2], [1])
    assert graphs.signature(a) != graphs.signature(b)
