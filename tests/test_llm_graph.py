"""LLM workloads (hetsim.graphs.llm): configs, formats, closed-form FLOPs and bytes, streaming."""

from __future__ import annotations

import pytest

from hetsim.graphs import GraphError, validate
from hetsim.graphs.llm import (
    ACT_BYTES,
    Architecture,
    kv_dtype_bytes,
    llm_graph,
    stream_weights,
    weight_format,
)


@pytest.mark.parametrize(
    ("name", "billions"),
    [("llama3-8b", 8.03), ("llama3-70b", 70.55), ("mixtral-8x7b", 46.70)],
)
def test_presets_match_their_published_parameter_counts(name: str, billions: float) -> None:
    assert Architecture.preset(name).parameters() / 1e9 == pytest.approx(billions, abs=0.01)


def test_mixtral_active_parameters_are_12_9_billion() -> None:
    c = Architecture.preset("mixtral-8x7b")
    active = c.parameters() - c.layers * (c.experts - c.top_k) * c.expert_parameters()
    assert active / 1e9 == pytest.approx(12.88, abs=0.01)


def test_weight_formats_are_llama_cpp_block_sizes() -> None:
    assert weight_format("q4_0").bits_per_weight == 4.5
    assert weight_format("q4").name == "Q4_K" and weight_format("q4_K").bits_per_weight == 4.5
    assert weight_format("q8").bits_per_weight == 8.5
    assert weight_format("fp16").bytes_per_weight == 2
    assert weight_format("q6_K").bits_per_weight == 6.5625
    assert kv_dtype_bytes("q8_0") == 34 / 32


def test_unknown_quantisation_lists_the_known_ones() -> None:
    with pytest.raises(GraphError, match=r"unknown weight type 'q7'; ggml types: F32, F16, BF16, Q8_0.*file types: F32"):
        llm_graph("tiny", weights="q7")
    with pytest.raises(GraphError, match="unknown KV-cache dtype 'f8'; known: f32, f16"):
        llm_graph("tiny", kv_dtype="f8")


def test_a_context_beyond_the_trained_maximum_builds_as_llama_cpp_runs_it() -> None:
    g = llm_graph("tiny", kv_length=300)  # rope scaling: llama.cpp runs it
    assert g.meta["llm"]["kv_length"] == 300
    with pytest.raises(GraphError, match="unknown model 'llama9'; known: codellama-7b, "):
        llm_graph("llama9")


def test_bad_config_names_the_field() -> None:
    with pytest.raises(GraphError, match="hidden 65 is not a multiple of heads 4"):
        Architecture("x", "llama", layers=1, hidden=65, heads=4, kv_heads=2, head_dim=0, ffn=8, vocab=8,
                     max_context=8)
    with pytest.raises(GraphError, match="needs 1 <= experts per token <= experts, got 3 of 2"):
        Architecture("x", "llama", layers=1, hidden=64, heads=4, kv_heads=2, head_dim=0, ffn=8, vocab=8,
                     max_context=8, experts=2, top_k=3)


def closed_form_flops(c: Architecture, phase: str, B: int, T: int, L: int) -> float:
    """FLOPs of one pass written independently of the builder."""
    N, h, f, H, d = B * T, c.hidden, c.ffn, c.heads, c.head_dim
    pairs = T * (T + 1) / 2 if phase == "prefill" else L
    attn = 2 * N * h * (2 * h + 2 * c.kv_dim) + (4 * d + 5) * B * H * pairs
    elementwise = 4 * N * h * 2 + 3 * N * (h + c.kv_dim) + 2 * N * h
    if c.experts:
        ffn = 2 * N * h * c.experts + N * c.experts + (6 * h * f + 5 * f) * N * c.top_k + 2 * N * c.top_k * h
    else:
        ffn = 6 * N * h * f + 5 * N * f
    return c.layers * (attn + elementwise + ffn) + 4 * B * h + 2 * B * h * c.vocab


@pytest.mark.parametrize("model", ["tiny", "tiny-moe"])
@pytest.mark.parametrize(("phase", "B", "T", "L"), [("decode", 1, 1, 100), ("decode", 3, 1, 37), ("prefill", 2, 17, 17)])
def test_flops_match_closed_form(model: str, phase: str, B: int, T: int, L: int) -> None:
    c = Architecture.preset(model)
    g = llm_graph(c, phase=phase, batch=B, tokens=T, kv_length=L, context=128)
    assert g.total_flops == pytest.approx(closed_form_flops(c, phase, B, T, L), rel=1e-12)
    validate(g)


@pytest.mark.parametrize("model", ["tiny", "tiny-moe"])
def test_resident_bytes_are_weights_plus_kv_cache(model: str) -> None:
    c = Architecture.preset(model)
    g = llm_graph(c, batch=2, kv_length=50, context=100, weights="q8_0")
    wb = 8.5 / 8
    matrices = c.parameters() - c.layers * 2 * c.hidden - c.hidden  # norms are float32
    kv = 2 * 100 * c.kv_bytes_per_token("f16")
    expected = matrices * wb + (c.layers * 2 + 1) * c.hidden * 4 + kv
    assert g.param_bytes == pytest.approx(expected, abs=len(g))  # rounded per node


def test_decode_matmul_reads_its_weights_at_storage_width() -> None:
    g = llm_graph("tiny", kv_length=10, weights="q4_0")
    d = g.nodes["blk.0.ffn_down"]
    assert d["flops"] == 2 * 128 * 64
    assert d["bytes"] == 128 * ACT_BYTES + 64 * ACT_BYTES + 128 * 64 * 4.5 / 8
    att = g.nodes["blk.1.attn"]
    # reads the query, L cached keys and values, writes the output and the new K/V
    assert att["bytes"] == 2 * 64 * 4 + 10 * 2 * 32 * 2 + 2 * 32 * 2 + 32 * 4
    assert att["param_bytes"] == 10 * 2 * 32 * 2


def test_moe_experts_are_one_grouped_operation_per_layer() -> None:
    g = llm_graph("tiny-moe", kv_length=8)
    up = g.nodes["blk.1.ffn_up_exps"]
    assert up["moe_block"] == 1 and "expert" not in up and up["attrs"]["groups"] == 4
    # one token to 2 of 4 experts: 2 routed rows; all 4 experts' weights held, half of them read
    assert up["flops"] == 2 * 2 * 64 * 96 and up["param_bytes"] == 4 * 64 * 96 * 2
    assert up["bytes"] == 2 * 64 * ACT_BYTES + 2 * 96 * ACT_BYTES + 4 * 64 * 96 * 2 * 0.5
    assert len([n for n in g.nx if "_exps" in n]) == 2 * 4  # gate, up, act, down per layer
    assert g.nodes["blk.1.ffn_topk"]["top_k"] == 2
    assert g.nodes["blk.0.attn_q"]["layer"] == 0
    units = g.meta["llm"]["units"]
    assert set(units) == {"token_embd", "blk.0.attn", "blk.0.ffn", "blk.0.ffn_exps", "blk.1.attn",
                          "blk.1.ffn", "blk.1.ffn_exps", "output"}
    assert sorted(n for ns in units.values() for n in ns) == sorted(g.nx)
    # one token routed to 2 of 4 experts: each expert's weights are read half the time
    assert g.meta["llm"]["expert_read_fraction"] == 0.5


def test_70b_builds_without_weights() -> None:
    g = llm_graph("llama3-70b", kv_length=8192, weights="Q4_K")
    assert len(g) == 3 + 80 * 14
    assert g.param_bytes == pytest.approx(70.55e9 * 0.5625 + 8192 * 80 * 2 * 1024 * 2, rel=1e-3)


def test_stream_weights_moves_weights_to_a_source_node() -> None:
    g = llm_graph("tiny", kv_length=8)
    s = stream_weights(g, ["blk.1.ffn_up", "blk.0.attn_q"], window=1)
    assert s.nodes["blk.1.ffn_up.weight"]["param_bytes"] == 64 * 128 * 2
    assert s.nodes["blk.1.ffn_up"]["param_bytes"] == 0
    assert s.edges["blk.1.ffn_up.weight", "blk.1.ffn_up"]["bytes"] == 64 * 128 * 2
    # prefetch window: layer 1's weights wait for the start of layer 0, layer 0's for nothing
    assert s.edges["blk.0.attn_norm", "blk.1.ffn_up.weight"]["bytes"] == 0
    assert list(s.predecessors("blk.0.attn_q.weight")) == []
    assert s.param_bytes == g.param_bytes and g.nodes["blk.1.ffn_up"]["param_bytes"] > 0
    assert s.meta["llm"]["streamed"] == ["blk.0.attn_q", "blk.1.ffn_up"]
    validate(s)
    # a weight source runs no kernel: free, no launch, no dispatch
    from hetsim.costmodel import Roofline
    from hetsim.costmodel.platform import Platform

    cpu = Platform.preset("desktop-rtx4090").device("cpu")
    assert Roofline().op_time(s, "blk.1.ffn_up.weight", cpu) == 0.0
    assert Roofline().dispatch_time(s, "blk.1.ffn_up.weight", cpu) == 0.0


def test_streamed_experts_move_as_one_transfer_of_their_expected_bytes() -> None:
    g = stream_weights(llm_graph("tiny-moe", kv_length=8), ["blk.0.ffn_up_exps"])
    assert g.edges["blk.0.ffn_up_exps.weight", "blk.0.ffn_up_exps"]["bytes"] == 4 * 64 * 96 * 2 // 2


def test_stream_weights_refuses_bad_nodes() -> None:
    g = llm_graph("tiny", kv_length=8)
    with pytest.raises(GraphError, match="has no node 'nope'"):
        stream_weights(g, ["nope"])
    with pytest.raises(GraphError, match="'blk.0.rope' has no weights"):
        stream_weights(g, ["blk.0.rope"])
    with pytest.raises(GraphError, match="window must be an int >= 1"):
        stream_weights(g, [], window=0)


def test_layer_weight_work_matches_the_tvm_import_of_a_torch_layer() -> None:
    """One decoder layer's projections and SwiGLU FFN imported through TVM Relax at the
    tiny config's real dimensions: TVM's FLOPs of its matmuls and its weight bytes are
    the builder's (attention over the cache, priced in closed form, is left out)."""
    torch = pytest.importorskip("torch")
    from torch import nn

    from hetsim.graphs import from_torch

    c = Architecture.preset("tiny")

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            h, kv, f = c.hidden, c.kv_dim, c.ffn
            self.q, self.o = nn.Linear(h, h, bias=False), nn.Linear(h, h, bias=False)
            self.k, self.v = nn.Linear(h, kv, bias=False), nn.Linear(h, kv, bias=False)
            self.gate, self.up, self.down = (nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False),
                                             nn.Linear(f, h, bias=False))

        def forward(self, x):
            y = self.o(self.q(x)) + self.k(x).sum() + self.v(x).sum()
            return self.down(nn.functional.silu(self.gate(y)) * self.up(y))

    tvm = from_torch(Layer(), (torch.randn(1, c.hidden),))
    ours = llm_graph(c, kv_length=8, weights="f32")
    mine = [d for _, d in ours.nodes(data=True) if d["op"] == "matmul" and d.get("layer") == 0]
    theirs = [d for _, d in tvm.nodes(data=True) if d["op"] == "matmul"]
    assert len(theirs) == len(mine) == 7
    assert sum(d["flops"] for d in theirs) == sum(d["flops"] for d in mine) == 2 * (
        2 * c.hidden**2 + 2 * c.hidden * c.kv_dim + 3 * c.hidden * c.ffn)
    assert tvm.param_bytes == sum(d["param_bytes"] for d in mine)


def test_llm_workload_strings() -> None:
    from hetsim.graphs.llm import llm_graph_from_spec, parse_llm_spec

    assert parse_llm_spec("llm:tiny-moe,phase=prefill,tokens=8") == ("tiny-moe", {"phase": "prefill", "tokens": 8})
    g = llm_graph_from_spec("llm:tiny,context=64,weights=q8", batch=2)
    assert g.meta["llm"]["context"] == 64 and g.meta["llm"]["weights"] == "Q8_0" and g.meta["batch"] == 2
    with pytest.raises(GraphError, match=r"'llm:tiny,ctx=4': 'ctx=4' is not key=value with key one of tokens"):
        parse_llm_spec("llm:tiny,ctx=4")
    with pytest.raises(GraphError, match="context must be an integer, got 'big'"):
        parse_llm_spec("llm:tiny,context=big")
