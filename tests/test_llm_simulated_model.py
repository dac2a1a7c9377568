"""Any model for the simulated placement policies (graphs.llm.simulated_model): GGUF files,
configs and presets as one Architecture; llama.cpp's file types counted as it writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gguf_files import TINY_CONFIGS, write_gguf

from hetsim.experiments.cli import main
from hetsim.experiments.llm_plan import plan_llm
from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm import Architecture, llm_graph
from hetsim.graphs.llm.build import check_simulated
from hetsim.graphs.llm.hf_config import architecture_from_hf
from hetsim.graphs.llm.model_source import load_model
from hetsim.graphs.llm.quant_recipe import recipe_tensors
from hetsim.graphs.llm.simulated_model import simulated_model


def test_a_llama_cpp_file_type_is_counted_as_llama_cpp_writes_it() -> None:
    cfg, fmt = simulated_model("llama3-8b", "Q4_K_M")
    # output Q6_K and the use_more_bits layers' attn_v / ffn_down Q6_K: 4.58 GiB, as llama-bench reports
    assert fmt.name == "Q4_K_M" and fmt.bits_per_weight == pytest.approx(4.894, abs=1e-3)
    assert fmt.compute == "dequant" and "Q4_K_M recipe" in fmt.source
    assert simulated_model("llama3-8b", None)[1].name == "Q4_K_M"  # one default for both engines
    assert simulated_model("llama3-8b", "q4_K")[1].bits_per_weight == 4.5  # a ggml type as it is
    assert simulated_model("llama3-8b", "q8")[1].bits_per_weight == 8.5
    g = llm_graph(cfg, phase="decode", kv_length=16, weights=fmt)
    assert g.meta["llm"]["weights"] == "Q4_K_M"
    # the graph's weights are the file's: every parameter at the recipe's mean bits per weight
    assert g.nodes["blk.0.attn_q"]["param_bytes"] == pytest.approx(4096 * 4096 * fmt.bytes_per_weight)
    with pytest.raises(GraphError, match=r"unknown weight type 'Q9'; ggml types: .*llama.cpp file types: "):
        simulated_model("llama3-8b", "Q9")


def test_published_presets_and_files_become_configs(tmp_path: Path) -> None:
    cfg, fmt = simulated_model("qwen3-30b-a3b", None)
    # Qwen3's heads are 128 wide on a 2048-wide model: the query projection is 4096 wide
    assert (cfg.hidden, cfg.head_dim, cfg.q_dim, cfg.kv_dim, cfg.routed_ffn, cfg.experts, cfg.top_k) == (
        2048, 128, 4096, 512, 768, 128, 8)
    assert fmt.name == "Q4_K_M" and 4.7 < fmt.bits_per_weight < 5.0
    g = llm_graph(cfg, phase="prefill", tokens=4, weights=fmt)
    assert g.nodes["blk.0.attn_q"]["flops"] == 2 * 4 * 2048 * 4096
    assert g.nodes["blk.0.attn_output"]["flops"] == 2 * 4 * 4096 * 2048
    # the simulated graph counts the weights the file holds, to within the norms and the router
    model = load_model("qwen3-30b-a3b")
    assert cfg.parameters() == pytest.approx(model.parameters(), rel=2e-3)
    a = architecture_from_hf(TINY_CONFIGS["mixtral"], name="tiny-mixtral")
    gg = write_gguf(tmp_path / "m.gguf", a, recipe_tensors(a, "Q8_0"), file_type=7)  # LLAMA_FTYPE_MOSTLY_Q8_0
    cfg, fmt = simulated_model(str(gg))
    assert (cfg.experts, cfg.top_k, cfg.routed_ffn, fmt.name) == (4, 2, 512, "Q8_0")
    assert Architecture.preset("mixtral-8x7b").expert_ffn == 14336


@pytest.mark.parametrize(("arch", "missing"), [
    ("deepseek2", "multi-head latent attention, shared experts, leading dense layers, value heads of another size"),
    ("gemma3", "sliding-window layers"),
])
def test_what_the_simulated_graph_cannot_express_is_named(arch: str, missing: str) -> None:
    a = architecture_from_hf(TINY_CONFIGS[arch], name=f"tiny-{arch}")
    with pytest.raises(GraphError, match=rf"model 'tiny-{arch}' \({a.arch}\) has {missing}.*, which the simulated"):
        check_simulated(a)


def test_head_size_is_checked() -> None:
    kw = dict(layers=2, heads=4, kv_heads=2, ffn=128, vocab=256, max_context=256)
    with pytest.raises(GraphError, match=r"'head_dim' must be an int >= 0"):
        Architecture("x", "llama", hidden=64, head_dim=-1, **kw)
    # an explicit head size frees the width from being a multiple of the heads
    assert Architecture("x", "llama", hidden=62, head_dim=16, **kw).q_dim == 64
    with pytest.raises(GraphError, match=r"hidden 62 is not a multiple of heads 4"):
        Architecture("x", "llama", hidden=62, head_dim=0, **kw)


def test_plan_llm_and_the_cli_simulate_any_model(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    report = plan_llm("llama-3-8b", "desktop-rtx4090", context=1024, policies=["ngl", "weight-streaming"])
    assert report.weights == "Q4_K_M" and [p.policy for p in report.predictions] == ["ngl", "weight-streaming"]
    monkeypatch.chdir(tmp_path)
    rc = main(["llm", "plan", "llama-3-8b", "--platform", "desktop-rtx4090", "--context", "1024",
               "--policy", "ngl"])
    out = capsys.readouterr().out
    assert rc == 0 and "llama-3-8b (Q4_K_M, KV f16) on desktop-rtx4090" in out
    assert json.loads((tmp_path / "out" / "llm-plan.json").read_text())["best"]["policy"] == "ngl"
    # a simulator flag without --policy is refused rather than ignored
    assert main(["llm", "plan", "llama-3-8b", "--platform", "desktop-rtx4090", "--batch", "4"]) == 2
    assert "--batch applies to the simulated policies: add --policy NAME" in capsys.readouterr().err
    # one preset registry: both engines answer, each row says which, and they are compared
    assert main(["llm", "plan", "mixtral-8x7b", "--platform", "desktop-rtx4090", "--context", "1024",
                 "--objective", "ttft", "--policy", "ngl", "--out", "out/m.json"]) == 0
    data = json.loads((tmp_path / "out" / "m.json").read_text())
    assert data["objective"] == "ttft" and data["llama_cpp"]["flags"].startswith("-ngl")
    out = capsys.readouterr().out
    assert "best (ttft)" in out and "engine llama.cpp (achieved rates of its cuda backend" in out
    assert "engine simulated (placement policies" in out and data["engines"]["agree"] is True
    assert main(["llm", "plan", "llama-3-8b", "--policy", "ngl"]) == 2
    assert "the simulated policies need --platform" in capsys.readouterr().err
