"""The real-model test set: Hugging Face Transformers architectures (small configs, random
weights, no downloads; ``tests/hf_architectures.py``) imported at both granularities and
checked, and executed under a two-worker plan on cpu2 with their outputs checked
against the module's own forward."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

import hf_architectures as hf  # noqa: E402

import hetsim  # noqa: E402
from hetsim.graphs import validate  # noqa: E402
from hetsim.graphs.relax_import import from_program, from_relax  # noqa: E402
from hetsim.graphs.torch_export import export_torch  # noqa: E402
from hetsim.graphs.transforms import weight_only_nodes  # noqa: E402

NAMES = sorted(hf.ARCHITECTURES)
#: variants whose family a sibling of the quick suite imports (llama: grouped-query
#: attention; gpt2 and llama: the dense decoder; vit: patch embedding and encoder; bert and
#: roberta: the encoder; t5: encoder-decoder; resnet: the CNN; wav2vec2: the audio encoder):
#: imported in the slow set only, 4-18 s each
SLOW_VARIANTS = {"qwen2", "mistral", "deit", "distilbert", "bart", "gemma", "phi3", "gpt_neox", "opt", "falcon",
                 "convnext", "clip_vision", "whisper_encoder"}
#: executed under a HEFT plan on cpu2 (two workers), outputs checked
EXECUTED = ["gpt2", "llama", "mixtral", "qwen2_moe", "t5", "bert", "roberta", "vit", "swin", "resnet", "wav2vec2"]

_PROGRAMS: dict[str, tuple] = {}


@pytest.fixture(scope="module", autouse=True)
def programs_dropped_after_the_module():
    """The exported programs (modules, weights, Relax modules) are freed once this
    module's tests are done: the rest of the suite does not carry them."""
    yield
    _PROGRAMS.clear()


def _program(name: str) -> tuple:
    """(module, inputs, exported program), once per architecture and module run."""
    if name not in _PROGRAMS:
        module, inputs = hf.build(name)
        _PROGRAMS[name] = (module, inputs, export_torch(module, inputs, name=name))
    return _PROGRAMS[name]


def test_the_set_covers_the_families_asked_for():
    assert len(NAMES) >= 20
    families = {a.family for a in hf.ARCHITECTURES.values()}
    for want in ("dense decoder", "MoE decoder", "encoder-decoder", "CNN", "audio encoder",
                 "vision transformer", "dense decoder (GQA)"):
        assert want in families
    assert hf.ARCHITECTURES["gpt2"].batch == 4  # GPT-2 batched: non-contiguous views
    assert len(EXECUTED) >= 8 and set(EXECUTED) <= set(NAMES)


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_VARIANTS else [])
                                  for n in NAMES])
def test_imports_at_both_granularities(name):
    module, inputs, program = _program(name)
    op = from_program(program, granularity="op", name=name)
    fused = from_relax(program.mod, granularity="fused", name=name, tags=program.tags)
    for g in (op, fused):
        validate(g)
        assert weight_only_nodes(g) == []  # weight-only work is folded at import
        assert [o["shape"] for o in g.meta["outputs"]] == [list(a.shape) for a in program.reference_outputs()]
    assert len(fused) < len(op)
    # fusion regroups the same work
    assert fused.total_flops == pytest.approx(op.total_flops, rel=0.02)
    try:
        closed = hf.closed_form_flops(name, module, inputs)
    except KeyError:  # no closed form (shifted windows, reduced keys)
        return
    products = sum(d["flops"] for _, d in op.nodes(data=True)
                   if d["op"] == "matmul" or d["op"].startswith("conv"))
    assert products == pytest.approx(closed, rel=0.02)


@pytest.mark.parametrize("name", ["mixtral", "qwen2_moe"])
def test_moe_graphs_carry_experts_and_top_k(name):
    arch = hf.ARCHITECTURES[name]
    blocks, top_k, hidden, inter = arch.moe
    _, _, program = _program(name)
    for gran in ("op", "fused"):
        g = from_relax(program.mod, granularity=gran, name=name, tags=program.tags)
        assert [b["block"] for b in program.moe] == list(range(blocks))
        for b in program.moe:
            assert b["top_k"] == top_k and b["experts"] == 4
            assert sum(b["tokens"]) == hf.B * hf.S * top_k  # every routed (token, expert) pair
            routers = [n for n, d in g.nodes(data=True) if d.get("moe_block") == b["block"] and "top_k" in d]
            assert len(routers) == 1 and g.nodes[routers[0]]["top_k"] == top_k
            for e, tokens in enumerate(b["tokens"]):
                nodes = [d for _, d in g.nodes(data=True)
                         if d.get("moe_block") == b["block"] and d.get("expert") == e]
                if gran == "op":  # a slice and a matmul for the up and the down projection
                    mm = [d for d in nodes if d["op"] == "matmul"]
                    assert len(mm) == (2 if tokens else 0)
                    assert sum(d["flops"] for d in mm) == 2.0 * tokens * 3 * hidden * inter
                else:
                    assert bool(nodes) == bool(tokens)


@pytest.mark.parametrize("name", EXECUTED)
def test_executes_two_workers_on_cpu2(name):
    _, _, program = _program(name)
    g = from_program(program, name=name)  # as from_torch gives it, its program kept: no import_module
    platform = hetsim.Platform.preset("cpu2")
    plan = hetsim.get_scheduler("heft").schedule(g, platform, hetsim.Roofline())
    assert set(plan.placement.values()) == {"cpu0", "cpu1"}
    run = hetsim.execute(g, plan, platform, warmup=1, repeats=1)
    assert run.check["reference"] == "torch module"
    assert run.check["error"] <= 1.0 and run.check["node_error"] <= 1.0


def test_a_decoder_with_its_default_key_value_cache_imports_and_runs():
    """GPT-2 as its config comes (``use_cache=True``) is exported without building the
    cache, which is no graph output: TVM's frontend refused the concatenation onto the
    cache's empty placeholders ("Concat expects all input tensors to have same ndim")."""
    import torch
    import transformers

    model = transformers.GPT2Model(transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=500,
                                                           n_positions=32))
    assert model.config.use_cache
    ids = torch.randint(0, 500, (2, 16))
    graph = hetsim.from_torch(model, (ids,))
    model.config.use_cache = False
    assert [d["op"] for _, d in graph.nodes(data=True)] == [
        d["op"] for _, d in hetsim.from_torch(model, (ids,)).nodes(data=True)]
    model.config.use_cache = True
    cpu2 = hetsim.Platform.preset("cpu2")
    run = hetsim.execute(graph, hetsim.get_scheduler("heft").schedule(graph, cpu2, hetsim.Roofline()), cpu2)
    assert run.check["reference"] == "torch module" and run.check["error"] <= 1.0
