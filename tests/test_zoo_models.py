"""Tests of the model zoo (``graphs.zoo``): the torch architectures, then their graphs.

The torch-only tests check each architecture against its published numbers
(parameters, multiply-accumulates) and against the reference layer it mirrors. The
import tests run every model through TVM at both granularities once per session
(``_imported`` is cached) and pin node counts, FLOPs, weight bytes and step tags.

Import times on the 2-core dev machine under load (op / fused, seconds): alexnet
3.7/1.1, bert_base(16) 3.9/4.2, densenet121 7.7/8.4, efficientnet_b0 4.6/3.6,
googlenet 5.3/3.2, gpt2(16) 6.6/8.2, gru(4x32) 0.7/0.8, inception_v3 6.1/6.5,
lstm(4x32) 1.1/0.7, mobilenet_v2 4.0/4.4, mobilenet_v3_large 3.8/3.5, resnet18 2.0/1.3,
resnet50 2.7/2.5, shufflenet_v2_x1_0 3.9/4.2, squeezenet1_1 1.1/0.9, vgg16 1.1/3.7.
Imports over 3 s, and full-size forward passes over 2 s, are marked slow (``-m slow``).
"""

from __future__ import annotations

import functools
import json
import math
import stat
from collections import Counter

import networkx as nx
import pytest
import torch
from torch import nn

from hetsim import graphs
from hetsim.graphs import Graph, GraphError, relax_import, zoo
from hetsim.graphs.zoo import rnn, transformer

CNNS = [
    "alexnet", "densenet121", "efficientnet_b0", "googlenet", "inception_v3", "mobilenet_v2",
    "mobilenet_v3_large", "resnet18", "resnet50", "shufflenet_v2_x1_0", "squeezenet1_1",
    "vgg16",
]  # fmt: skip
#: default input sizes other than 224x224.
IMAGE_SIZE = {"inception_v3": 299}
ALL = sorted(CNNS + ["bert_base", "gpt2", "gru", "lstm", "vit_b_16"])

#: exact parameter counts of the reference implementations (torchvision, Hugging Face).
EXACT_PARAMS = {
    "alexnet": 61_100_840, "bert_base": 109_482_240, "densenet121": 7_978_856,
    "efficientnet_b0": 5_288_548, "googlenet": 6_624_904, "gpt2": 124_439_808,
    "gru": 855_296, "inception_v3": 23_834_568, "lstm": 1_118_464,
    "mobilenet_v2": 3_504_872, "mobilenet_v3_large": 5_483_032, "resnet18": 11_689_512,
    "resnet50": 25_557_032, "shufflenet_v2_x1_0": 2_278_604, "squeezenet1_1": 1_235_496,
    "vgg16": 138_357_544, "vit_b_16": 86_567_656,
}  # fmt: skip
#: torchvision's inception_v3 (27,161,264) counts its auxiliary classifier, which runs
#: only in training: conv 768->128 1x1 + BN, conv 128->768 5x5 + BN, fc 768->1000.
INCEPTION_AUX_PARAMS = (768 * 128 + 2 * 128) + (128 * 768 * 25 + 2 * 768) + (768 * 1000 + 1000)
#: published parameter counts as rounded in the papers / model tables.
PUBLISHED_PARAMS = {
    "alexnet": 61.10e6, "bert_base": 110e6, "densenet121": 7.98e6, "efficientnet_b0": 5.29e6,
    "googlenet": 6.62e6, "gpt2": 124.4e6, "inception_v3": 23.83e6, "mobilenet_v2": 3.50e6,
    "mobilenet_v3_large": 5.48e6, "resnet18": 11.69e6, "resnet50": 25.56e6,
    "shufflenet_v2_x1_0": 2.28e6, "squeezenet1_1": 1.235e6, "vgg16": 138.36e6, "vit_b_16": 86.6e6,
}  # fmt: skip
#: torchvision's "GFLOPS" column (multiply-accumulates at the default image size),
#: rounded to two decimals: shufflenet_v2_x1_0's 0.1449 reads 0.14.
PUBLISHED_GMACS = {
    "alexnet": 0.71, "densenet121": 2.83, "efficientnet_b0": 0.39, "googlenet": 1.50,
    "inception_v3": 5.71, "mobilenet_v2": 0.30, "mobilenet_v3_large": 0.22, "resnet18": 1.81,
    "resnet50": 4.09, "shufflenet_v2_x1_0": 0.14, "squeezenet1_1": 0.35, "vgg16": 15.47,
}  # fmt: skip
#: FLOPs the element-wise ops (BN, activations, adds, squeeze-excitation) add to the
#: conv and matmul FLOPs, at most (observed: 0.1-1.5 % except these thin networks:
#: mobilenet_v2 6.5 %, mobilenet_v3_large 7.4 %, efficientnet_b0 4.9 %,
#: shufflenet_v2_x1_0 3.5 %).
ELEMENTWISE_SHARE = {
    "mobilenet_v2": 0.07, "mobilenet_v3_large": 0.08, "efficientnet_b0": 0.055,
    "shufflenet_v2_x1_0": 0.04,
}  # fmt: skip
#: small sizes for the import tests (CNNs run at their default size).
SMALL = {
    "lstm": {"seq_len": 4, "hidden": 32},
    "gru": {"seq_len": 4, "hidden": 32},
    "bert_base": {"seq_len": 16},
    "gpt2": {"seq_len": 16},
    "vit_b_16": {"image_size": 64},  # 17 tokens; the same nodes as at 224 (197 tokens)
}
#: node counts observed with apache-tvm 0.27.0.post1 / torch 2.13 (op, fused), weight-only
#: operators folded (before folding, at op granularity: alexnet 36, bert_base 704,
#: densenet121 429, efficientnet_b0 354, googlenet 198, gpt2 602, gru 135, inception_v3
#: 315, lstm 127, mobilenet_v2 154, mobilenet_v3_large 330, resnet18 71, resnet50 177,
#: shufflenet_v2_x1_0 231, squeezenet1_1 117, vgg16 70, vit_b_16 589).
NODES = {
    "alexnet": (28, 13), "bert_base": (623, 294), "densenet121": (428, 243),
    "efficientnet_b0": (321, 100), "googlenet": (197, 82), "gpt2": (549, 259),
    "gru": (128, 27), "inception_v3": (314, 121), "lstm": (122, 39),
    "mobilenet_v2": (153, 55), "mobilenet_v3_large": (312, 74), "resnet18": (70, 24),
    "resnet50": (176, 57), "shufflenet_v2_x1_0": (230, 75), "squeezenet1_1": (91, 39),
    "vgg16": (54, 23), "vit_b_16": (538, 257),
}  # fmt: skip
#: op-granularity node kinds of the models that bring depthwise convolutions,
#: clip (ReLU6, hardswish = x * clip(x + 3) / 6, hardsigmoid), sigmoid gates, channel
#: split and shuffle (reshape, permute_dims) and stride-1 average pooling to the zoo.
#: Weight transposes and bias reshapes are folded: the permute_dims and reshapes left
#: move activations (the classifier's flatten, ShuffleNet's channel shuffle).
OP_KINDS = {
    "mobilenet_v3_large": {
        "add": 57, "batch_norm": 46, "clip": 58, "conv2d": 62, "divide": 29, "matmul": 2,
        "mean": 9, "multiply": 29, "relu": 19, "reshape": 1,
    },
    "efficientnet_b0": {
        "add": 42, "batch_norm": 49, "conv2d": 81, "matmul": 1, "mean": 17, "multiply": 65,
        "reshape": 1, "sigmoid": 65,
    },
    "shufflenet_v2_x1_0": {
        "add": 1, "batch_norm": 56, "concat": 16, "conv2d": 56, "matmul": 1, "max_pool2d": 1,
        "mean": 1, "permute_dims": 16, "relu": 37, "reshape": 32, "split": 13,
    },
    "inception_v3": {
        "add": 1, "avg_pool2d": 9, "batch_norm": 94, "concat": 15, "conv2d": 94, "matmul": 1,
        "max_pool2d": 4, "mean": 1, "relu": 94, "reshape": 1,
    },
}  # fmt: skip
#: depthwise convolutions (groups == input channels): one per block, plus ShuffleNet's
#: second depthwise conv in each of its three stride-2 units.
DEPTHWISE = {
    "mobilenet_v2": 17, "mobilenet_v3_large": 15, "efficientnet_b0": 16,
    "shufflenet_v2_x1_0": 19, "inception_v3": 0,
}  # fmt: skip
#: (model, granularity) imports that take over 3 s on 2 cores: run with ``-m slow``.
SLOW_IMPORTS = {
    ("densenet121", "op"), ("densenet121", "fused"), ("gpt2", "op"), ("gpt2", "fused"),
    ("inception_v3", "op"), ("inception_v3", "fused"), ("alexnet", "op"), ("bert_base", "op"),
    ("bert_base", "fused"), ("efficientnet_b0", "op"), ("efficientnet_b0", "fused"), ("googlenet", "op"),
    ("mobilenet_v2", "op"), ("mobilenet_v2", "fused"), ("mobilenet_v3_large", "op"),
    ("mobilenet_v3_large", "fused"), ("shufflenet_v2_x1_0", "op"), ("shufflenet_v2_x1_0", "fused"),
    ("vgg16", "fused"),
}  # fmt: skip
#: models whose full-size torch forward pass takes over 2 s on 2 cores: run with ``-m slow``
SLOW_FORWARD = {"densenet121", "inception_v3", "mobilenet_v3_large", "resnet50", "shufflenet_v2_x1_0", "vgg16",
                "alexnet", "mobilenet_v2", "resnet18", "bert_base"}  # fmt: skip


#: full-size exports over 5 s on 2 cores whose per-layer calls a quicker export checks
#: (squeezenet1_1's for the CNN count, two narrow layers of the transformer classes)
SLOW_EXPORT = SLOW_FORWARD | {"efficientnet_b0", "googlenet", "gpt2"}


def _models(models: list[str], slow: set[str] = SLOW_FORWARD) -> list:
    """MODELS as parameters, those of ``slow`` marked slow."""
    return [pytest.param(m, marks=[pytest.mark.slow] if m in slow else []) for m in models]


def _cases(models: list[str], granularities: tuple[str, ...] = ("op", "fused"), *, with_op: bool = False) -> list:
    """(model, granularity) parameters, marked slow where an import they need is in
    :data:`SLOW_IMPORTS` (``with_op``: the case reads the op-granularity graph too)."""
    return [
        pytest.param(m, g, marks=[pytest.mark.slow] if (m, g) in SLOW_IMPORTS
                     or (with_op and (m, "op") in SLOW_IMPORTS) else [])
        for m in models
        for g in granularities
    ]


@functools.cache
def _imported(name: str, granularity: str) -> Graph:
    return zoo.load(name, granularity=granularity, cache=False, **SMALL.get(name, {}))


def count_macs(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> int:
    """Multiply-accumulates of the Conv2d and Linear layers in one forward pass."""
    total = 0

    def hook(mod: nn.Module, _inp: tuple, out: torch.Tensor) -> None:
        nonlocal total
        if isinstance(mod, nn.Conv2d):
            kh, kw = mod.kernel_size
            total += out.numel() * (mod.in_channels // mod.groups) * kh * kw
        elif isinstance(mod, nn.Linear):
            total += out.numel() * mod.in_features

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return total


def _weight_bytes(model: nn.Module) -> int:
    """Bytes of the parameters and the buffers a forward pass reads (not BN's counter)."""
    tensors = list(model.parameters()) + [
        b for n, b in model.named_buffers() if not n.endswith("num_batches_tracked")
    ]
    return sum(t.numel() * t.element_size() for t in tensors)


# ------------------------------------------------------------------------ registry
def test_names_sorted_and_complete():
    assert zoo.names() == ALL


@pytest.mark.parametrize("name", _models(ALL))
def test_params_match_reference(name):
    assert zoo.params(name) == EXACT_PARAMS[name]
    if name in PUBLISHED_PARAMS:
        assert zoo.params(name) == pytest.approx(PUBLISHED_PARAMS[name], rel=0.005)


def test_inception_v3_params_are_torchvision_without_aux_logits():
    assert zoo.params("inception_v3") == 27_161_264 - INCEPTION_AUX_PARAMS


def test_params_of_options():
    # 4 gates * hidden * (input + hidden + 2 biases), per layer, plus the head
    assert zoo.params("lstm", hidden=32, layers=3, input_size=8, out_features=5) == (
        4 * 32 * (8 + 32 + 2) + 2 * 4 * 32 * (32 + 32 + 2) + 32 * 5 + 5
    )
    assert zoo.params("gru", hidden=32, layers=1) == 3 * 32 * (32 + 32 + 2) + 32 * 32 + 32
    assert zoo.params("resnet18", num_classes=10) == EXACT_PARAMS["resnet18"] - 990 * 513
    # position embeddings are sized by max positions, not seq_len
    assert zoo.params("gpt2", seq_len=16) == EXACT_PARAMS["gpt2"]


def test_unknown_model_lists_known_names():
    with pytest.raises(GraphError, match="resnet18") as e:
        zoo.build("resnet19")
    assert "vgg16" in str(e.value) and "lstm" in str(e.value)
    with pytest.raises(GraphError, match="unknown zoo model"):
        zoo.load("nope")
    with pytest.raises(GraphError, match="unknown zoo model"):
        zoo.params("nope")


def test_unknown_or_bad_option_is_named():
    with pytest.raises(GraphError, match="seq_len"):
        zoo.build("resnet18", seq_len=4)
    with pytest.raises(GraphError, match="hiden"):
        zoo.params("lstm", hiden=4)
    with pytest.raises(GraphError, match="hiden"):
        zoo.load("lstm", hiden=4)
    with pytest.raises(GraphError, match="seq_len"):
        zoo.build("bert_base", seq_len=513)
    with pytest.raises(GraphError, match="batch"):
        zoo.build("lstm", batch=0)
    with pytest.raises(GraphError, match="granularity"):
        zoo.load("lstm", granularity="kernel")


# --------------------------------------------------------------- torch: structure
@pytest.mark.parametrize("name", _models(CNNS))
def test_cnn_macs_match_published(name):
    model, inputs = zoo.build(name)
    size = IMAGE_SIZE.get(name, 224)
    assert inputs[0].shape == (1, 3, size, size)
    published = pytest.approx(PUBLISHED_GMACS[name], rel=0.02, abs=0.005)
    assert count_macs(model, inputs) / 1e9 == published


@pytest.mark.slow
def test_inception_v3_needs_75_pixels():
    with pytest.raises(GraphError, match=">= 75"):
        zoo.build("inception_v3", image_size=74)
    model, (x,) = zoo.build("inception_v3", image_size=75, num_classes=3)
    with torch.no_grad():
        assert model(x).shape == (1, 3)


@pytest.mark.parametrize("name", _models(CNNS))
def test_cnn_forward_shapes(name):
    model, inputs = zoo.build(name, batch=2, image_size=160, num_classes=10)
    assert inputs[0].shape == (2, 3, 160, 160)
    with torch.no_grad():
        out = model(*inputs)
    assert out.shape == (2, 10)
    assert torch.isfinite(out).all()


@pytest.mark.slow
def test_sequence_models_forward_shapes():
    model, (x,) = zoo.build("lstm", batch=3, seq_len=5, hidden=16, input_size=7, out_features=4)
    assert x.shape == (3, 5, 7) and model(x).shape == (3, 4)
    model, (x,) = zoo.build("gru", batch=2)
    assert x.shape == (2, 16, 256) and model(x).shape == (2, 256)
    model, (ids,) = zoo.build("bert_base", batch=2, seq_len=8)
    assert ids.shape == (2, 8) and ids.dtype == torch.int64
    with torch.no_grad():
        seq, pooled = model(ids)
    assert seq.shape == (2, 8, 768) and pooled.shape == (2, 768)
    model, (ids,) = zoo.build("gpt2", seq_len=8)
    with torch.no_grad():
        assert model(ids).shape == (1, 8, 50257)


@pytest.mark.parametrize("name", _models(ALL, SLOW_EXPORT))
def test_exports_with_one_call_per_layer(name):
    model, inputs = zoo.build(name, **SMALL.get(name, {}))
    ep = torch.export.export(model, inputs)
    calls = Counter(str(n.target) for n in ep.graph_module.graph.nodes if n.op == "call_function")
    if name in CNNS:
        convs = sum(isinstance(m, nn.Conv2d) for m in model.modules())
        linears = sum(isinstance(m, nn.Linear) for m in model.modules())
        assert calls["aten.conv2d.default"] == convs
        assert calls["aten.linear.default"] == linears
    elif name in ("lstm", "gru"):
        t, layers = SMALL[name]["seq_len"], 2
        assert calls["aten.select.int"] == t  # one x[:, t] per step
        assert calls["aten.matmul.default"] == 2 * t * layers  # W_ih and W_hh per cell
        assert calls["aten.linear.default"] == 1  # the head
    else:
        per_layer = 6 if name == "bert_base" else 4  # q,k,v,out,ffn x2 / qkv,proj,ffn x2
        assert calls["aten.linear.default"] == 12 * per_layer + 1  # + pooler / lm head
        assert calls["aten.matmul.default"] == 2 * 12  # scores and context per layer


@pytest.mark.parametrize("cls", ["Bert", "GPT2"])
def test_transformer_layers_export_one_call_each(cls):
    """The per-layer calls of the zoo's BERT and GPT-2 classes, on two narrow layers (the
    full-size models' exports, 12 layers each, are slow tests above)."""
    model = getattr(transformer, cls)(16, layers=2, d=64, heads=4, vocab=1000).eval()
    ep = torch.export.export(model, (torch.randint(0, 1000, (1, 16)),))
    calls = Counter(str(n.target) for n in ep.graph_module.graph.nodes if n.op == "call_function")
    per_layer = 6 if cls == "Bert" else 4  # q,k,v,out,ffn x2 / qkv,proj,ffn x2
    assert calls["aten.linear.default"] == 2 * per_layer + 1  # + pooler / lm head
    assert calls["aten.matmul.default"] == 2 * 2  # scores and context per layer


def test_build_is_seeded_and_leaves_global_rng_alone():
    state = torch.random.get_rng_state()
    m1, (x1,) = zoo.build("lstm", seq_len=3, hidden=8, seed=5)
    m2, (x2,) = zoo.build("lstm", seq_len=3, hidden=8, seed=5)
    m3, (x3,) = zoo.build("lstm", seq_len=3, hidden=8, seed=6)
    assert torch.equal(torch.random.get_rng_state(), state)
    for (k, a), b in zip(m1.state_dict().items(), m2.state_dict().values()):
        assert torch.equal(a, b), k
    assert torch.equal(x1, x2) and not torch.equal(x1, x3)
    assert not torch.equal(m1.cells[0].weight_ih, m3.cells[0].weight_ih)
    assert not m1.training


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_cells_compute_what_torch_rnn_computes(kind):
    model, (x,) = zoo.build(kind, batch=3, seq_len=5, hidden=12, layers=3, input_size=7)
    ref = (nn.LSTM if kind == "lstm" else nn.GRU)(7, 12, 3, batch_first=True)
    with torch.no_grad():
        for i, cell in enumerate(model.cells):
            getattr(ref, f"weight_ih_l{i}").copy_(cell.weight_ih.T)
            getattr(ref, f"weight_hh_l{i}").copy_(cell.weight_hh.T)
            getattr(ref, f"bias_ih_l{i}").copy_(cell.bias_ih)
            getattr(ref, f"bias_hh_l{i}").copy_(cell.bias_hh)
        out, _ = ref(x)
        expected = model.head(out[:, out.shape[1] - 1])
        torch.testing.assert_close(model(x), expected, rtol=1e-5, atol=1e-6)


def test_gpt2_is_causal_and_bert_is_not():
    # the zoo's classes on two narrow layers: the mask is per layer, not per size
    torch.manual_seed(0)
    gpt = transformer.GPT2(6, layers=2, d=64, heads=4, vocab=1000).eval()
    bert = transformer.Bert(6, layers=2, d=64, heads=4, ffn=128, vocab=1000).eval()
    ids, bids = torch.randint(0, 1000, (1, 6)), torch.randint(0, 1000, (1, 6))
    ids2, bids2 = ids.clone(), bids.clone()
    ids2[0, 4] = (ids[0, 4] + 1) % 1000
    bids2[0, 4] = (bids[0, 4] + 1) % 1000
    with torch.no_grad():
        a, b = gpt(ids), gpt(ids2)
        torch.testing.assert_close(a[:, :4], b[:, :4])  # earlier positions unaffected
        assert not torch.allclose(a[:, 4], b[:, 4])
        assert not torch.allclose(bert(bids)[0][:, 0], bert(bids2)[0][:, 0])


def test_gpt2_head_is_tied():
    model = transformer.GPT2(4, layers=1, d=64, heads=4, vocab=1000)
    assert model.lm_head.weight is model.wte.weight


# ----------------------------------------------------------------------- tag_steps
def _toy_rnn_graph(index_attrs: bool) -> Graph:
    """x -> take_t (t = 0..2) -> cell_t, cell_t -> cell_{t+1}; cell_2 -> head; w -> head."""
    g = Graph(name="toy")
    spec = ([1, 4], "float32")
    for t in range(3):
        g.add_op(f"take{t}", "take", inputs=[([1, 3, 4], "float32")], outputs=[spec],
                 attrs={"axis": 1, "indices": t} if index_attrs else {"axis": 1})  # fmt: skip
        g.add_op(f"cell{t}", "add", inputs=[spec, spec], outputs=[spec])
        g.add_edge(f"take{t}", f"cell{t}")
        if t:
            g.add_edge(f"cell{t - 1}", f"cell{t}")
    g.add_op("w", "permute_dims", inputs=[spec], outputs=[spec])
    g.add_op("head", "matmul", inputs=[spec, spec], outputs=[spec])
    g.add_edge("cell2", "head")
    g.add_edge("w", "head")
    g.meta["inputs"] = [{"name": "x", "consumers": ["take2", "take0", "take1"]}]
    return g


@pytest.mark.parametrize("index_attrs", [True, False])
def test_tag_steps_is_pure_and_follows_ancestors(index_attrs):
    g = _toy_rnn_graph(index_attrs)
    before = g.to_dict()
    tagged = rnn.tag_steps(g)
    assert g.to_dict() == before  # input untouched
    steps = {n: tagged.nodes[n]["step"] for n in tagged}
    assert steps == {
        "take0": 0, "cell0": 0, "take1": 1, "cell1": 1, "take2": 2, "cell2": 2,
        "w": 0, "head": 2,
    }  # fmt: skip


def test_tag_steps_needs_a_consumed_input():
    g = _toy_rnn_graph(True)
    g.meta["inputs"] = []
    with pytest.raises(GraphError, match="no input"):
        rnn.tag_steps(g)


# ------------------------------------------------------------------ import: graphs
@pytest.mark.parametrize(("name", "granularity"), _cases(ALL))
def test_import_node_count_and_meta(name, granularity):
    g = _imported(name, granularity)
    assert g.number_of_nodes() == NODES[name][granularity == "fused"]
    assert g.meta["model"] == name
    assert g.meta["zoo_kwargs"] == SMALL.get(name, {})
    assert g.meta["granularity"] == granularity
    assert nx.is_directed_acyclic_graph(g.nx)


@pytest.mark.parametrize(("name", "granularity"), _cases(ALL))
def test_import_no_node_does_only_weight_work(name, granularity):
    """Work on weights alone (a transposed weight, a reshaped bias, a position gather, a
    causal mask) is folded at import, as a deployment does once: a graph input reaches
    every node."""
    assert graphs.weight_only_nodes(_imported(name, granularity)) == []


@pytest.mark.parametrize("name", [pytest.param(m, marks=[pytest.mark.slow] if (m, "op") in SLOW_IMPORTS else [])
                                  for m in ["bert_base", "gpt2", "vit_b_16", "alexnet"]])
def test_import_folded_weights_are_parameters_of_their_readers(name):
    """A linear layer's transposed weight is a parameter of its matmul, with its bytes:
    no node transposes or reshapes a weight on every inference (GPT-2's tied LM head
    reads the token embedding transposed once)."""
    g = _imported(name, "op")
    readers = [g.nodes[n] for n in g if g.nodes[n]["param_bytes"]]
    assert all(d["op"] not in ("permute_dims", "reshape") for d in readers)
    matmuls = [d for d in readers if d["op"] == "matmul"]
    linears = sum(isinstance(m, nn.Linear) for m in zoo.build(name, **SMALL.get(name, {}))[0].modules())
    assert len(matmuls) == linears
    for d in matmuls:
        weight = d["inputs"][1]
        assert d["param_bytes"] == 4 * math.prod(weight["shape"])
        assert d["bytes"] == 4 * sum(math.prod(t["shape"]) for t in d["inputs"] + d["outputs"])


@pytest.mark.parametrize(("name", "granularity"), _cases(ALL))
def test_import_weight_bytes(name, granularity):
    g = _imported(name, granularity)
    model, _ = zoo.build(name, **SMALL.get(name, {}))
    # every weight once: parameters (tied ones once) plus buffers (BN statistics,
    # position ids, causal mask, zero initial state)
    assert g.param_bytes == _weight_bytes(model)
    if name == "densenet121":  # 83,648 BN running statistics on 7.98 M weights: +1.05 %
        assert g.param_bytes == 4 * (EXACT_PARAMS[name] + 83_648)
    else:
        params = zoo.params(name, **SMALL.get(name, {}))
        assert g.param_bytes == pytest.approx(4 * params, rel=0.01)


@pytest.mark.parametrize(("name", "granularity"), _cases(CNNS, with_op=True))
def test_import_cnn_flops_match_published(name, granularity):
    g, op = _imported(name, granularity), _imported(name, "op")
    macs_flops = sum(op.nodes[n]["flops"] for n in op if op.nodes[n]["op"] in ("conv2d", "matmul"))
    published = pytest.approx(PUBLISHED_GMACS[name], rel=0.02, abs=0.005)
    assert macs_flops / 2e9 == published
    elementwise = g.total_flops / macs_flops - 1
    assert 0 < elementwise < ELEMENTWISE_SHARE.get(name, 0.02)
    assert g.total_flops == pytest.approx(op.total_flops, rel=1e-3)


@pytest.mark.parametrize(("name", "granularity"), _cases(sorted(DEPTHWISE), ("op",)))
def test_import_op_kinds_of_mobile_and_inception_models(name, granularity):
    g = _imported(name, granularity)
    if name in OP_KINDS:
        assert Counter(g.nodes[n]["op"] for n in g) == OP_KINDS[name]
    convs = [g.nodes[n] for n in g if g.nodes[n]["op"] == "conv2d"]
    grouped = [c for c in convs if c["attrs"]["groups"] != 1]
    assert len(grouped) == DEPTHWISE[name]
    assert all(c["attrs"]["groups"] == c["inputs"][0]["shape"][1] for c in grouped)
    if name == "inception_v3":  # the pool branches: 3x3 stride 1, zeros counted
        pools = [g.nodes[n]["attrs"] for n in g if g.nodes[n]["op"] == "avg_pool2d"]
        assert all(p["strides"] == [1, 1] and p["count_include_pad"] for p in pools)


@pytest.mark.parametrize(("name", "granularity"), _cases(["bert_base", "gpt2"]))
def test_import_transformer_matmul_flops_exact(name, granularity):
    g = _imported(name, granularity)
    n, d, f = SMALL[name]["seq_len"], 768, 3072
    attention = 2 * 2 * n * n * d  # scores and context, all heads
    if name == "bert_base":
        expected = 12 * (4 * 2 * n * d * d + 2 * 2 * n * d * f + attention) + 2 * d * d
    else:
        expected = 12 * (2 * n * d * 4 * d + 2 * 2 * n * d * f + attention) + 2 * n * d * 50257
    if granularity == "op":
        matmul = sum(g.nodes[v]["flops"] for v in g if g.nodes[v]["op"] == "matmul")
        assert matmul == expected
    assert expected < g.total_flops < 1.01 * expected


def _vit_flops(image_size: int) -> tuple[int, int]:
    """(matmul, patch-conv) FLOPs of ViT-B/16: per block the fused q/k/v projection and
    the output projection (4 d x d), the MLP (2 d x f), scores and context; then the head."""
    n, d, f = (image_size // 16) ** 2 + 1, 768, 3072
    matmul = 12 * (2 * n * d * 4 * d + 2 * 2 * n * d * f + 2 * 2 * n * n * d) + 2 * d * 1000
    return matmul, 2 * (n - 1) * d * 3 * 16 * 16


def test_vit_flops_formula_matches_published():
    # torchvision lists 17.56 GFLOPS (multiply-accumulates) for vit_b_16 at 224x224
    matmul, conv = _vit_flops(224)
    assert (matmul + conv) / 2e9 == pytest.approx(17.56, abs=0.005)


@pytest.mark.parametrize("granularity", ["op", "fused"])
def test_import_vit_flops_exact(granularity):
    g = _imported("vit_b_16", granularity)
    matmul, conv = _vit_flops(SMALL["vit_b_16"]["image_size"])
    if granularity == "op":
        kinds = Counter(g.nodes[v]["op"] for v in g)
        assert kinds["conv2d"] == 1 and kinds["softmax"] == 12 and kinds["layer_norm"] == 25
        assert sum(g.nodes[v]["flops"] for v in g if g.nodes[v]["op"] == "matmul") == matmul
        assert sum(g.nodes[v]["flops"] for v in g if g.nodes[v]["op"] == "conv2d") == conv
    assert matmul + conv < g.total_flops < 1.01 * (matmul + conv)


@pytest.mark.parametrize(("name", "granularity"), _cases(["lstm", "gru"]))
def test_import_rnn_steps(name, granularity):
    g = _imported(name, granularity)
    seq_len = SMALL[name]["seq_len"]
    steps = {n: g.nodes[n].get("step") for n in g}
    assert all(isinstance(s, int) for s in steps.values())
    assert set(steps.values()) == set(range(seq_len))
    per_step = Counter(steps.values())
    middle = {per_step[t] for t in range(1, seq_len - 1)}
    assert len(middle) == 1
    (count,) = middle
    # every node is reached from the input: the recurrent projection of the constant
    # zero initial state and the head's weight transpose are folded at import
    assert graphs.weight_only_nodes(g) == []
    assert per_step[0] == count
    assert per_step[seq_len - 1] <= count + 3  # minus the next step's projection, plus head


@pytest.mark.slow
def test_import_lstm_default_size_steps():
    g = zoo.load("lstm", granularity="fused", cache=False)
    per_step = Counter(g.nodes[n]["step"] for n in g)
    assert sorted(per_step) == list(range(16))
    assert len({per_step[t] for t in range(15)}) == 1


# -------------------------------------------------------------------------- cache
def test_load_cache_roundtrip(tmp_path, monkeypatch):
    kw = {"seq_len": 3, "hidden": 8}
    first = zoo.load("gru", cache=tmp_path, **kw)
    files = list(tmp_path.glob("gru-b1-op-*.json"))
    assert len(files) == 1
    assert files[0] == zoo.cache_path(tmp_path, "gru", **kw)

    def no_import(*args, **kwargs):
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(relax_import, "from_torch", no_import)
    again = zoo.load("gru", cache=tmp_path, **kw)
    assert again.to_dict() == first.to_dict()
    assert {again.nodes[n]["step"] for n in again} == {0, 1, 2}
    # same key whether a default is spelled out or not
    assert zoo.load("gru", cache=tmp_path, layers=2, **kw).number_of_nodes() == len(first)
    # the environment variable is the default directory; False ignores it
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path))
    assert zoo.load("gru", **kw).to_dict() == first.to_dict()
    with pytest.raises(AssertionError, match="cache was not used"):
        zoo.load("gru", cache=False, **kw)
    # other arguments are other entries
    with pytest.raises(AssertionError, match="cache was not used"):
        zoo.load("gru", cache=tmp_path, seed=1, **kw)
    with pytest.raises(AssertionError, match="cache was not used"):
        zoo.load("gru", cache=tmp_path, batch=2, **kw)


def test_load_cache_rebuilds_a_corrupt_entry(tmp_path):
    kw = {"seq_len": 2, "hidden": 4, "layers": 1}
    path = zoo.cache_path(tmp_path, "lstm", **kw)
    path.write_text('{"hetsim_graph": 1, "nodes": [')
    g = zoo.load("lstm", cache=tmp_path, **kw)
    assert {g.nodes[n]["step"] for n in g} == {0, 1}
    assert zoo.load("lstm", cache=tmp_path, **kw).to_dict() == g.to_dict()
    assert math.isclose(g.total_flops, Graph.from_dict(g.to_dict()).total_flops)


def test_a_cached_graph_another_user_could_edit_is_never_read(tmp_path, monkeypatch):
    """The zoo cache had no owner or mode check (folders 0755, files 0644): a cached graph
    edited by another user was read back as it was."""
    import os
    import warnings

    from hetsim.graphs.private_cache import CacheWarning

    kw = {"seq_len": 2, "hidden": 4, "layers": 1}
    first = zoo.load("gru", cache=tmp_path, **kw)
    path = zoo.cache_path(tmp_path, "gru", **kw)
    edited = first.to_dict()
    edited["name"] = "edited by someone else"
    path.write_text(json.dumps(edited))
    assert zoo.load("gru", cache=tmp_path, **kw).name == "edited by someone else"  # the user's own edit: read

    path.chmod(0o666)  # others may write it: not read, rebuilt and replaced
    assert zoo.load("gru", cache=tmp_path, **kw).name == "gru"
    assert stat.S_IMODE(path.stat().st_mode) & 0o022 == 0

    path.unlink()
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps(edited))
    path.symlink_to(elsewhere)  # a link planted under the cached name: not followed
    with pytest.raises(OSError, match="symbolic link"):  # nor written through
        zoo.load("gru", cache=tmp_path, **kw)
    path.unlink()

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(CacheWarning, match=r"zoo graph cache .*shared may be written by other users"):
        zoo.load("gru", cache=shared, **kw)
    assert list(shared.iterdir()) == []
    monkeypatch.setattr(os, "getuid", lambda: os.stat(tmp_path).st_uid + 1)  # as if another user's folder
    with pytest.warns(CacheWarning, match="belongs to user id"):
        assert zoo.load("gru", cache=tmp_path, **kw).name == "gru"
    monkeypatch.undo()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        zoo.load("gru", cache=tmp_path / "fresh", **kw)
    assert stat.S_IMODE((tmp_path / "fresh").stat().st_mode) == 0o700
