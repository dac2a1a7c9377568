"""GGUF headers, Hugging Face configs and model presets as llama.cpp sees them (hetsim.graphs.llm)."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf_files import TINY_CONFIGS, write_gguf

from hetsim.graphs import GraphError
from hetsim.graphs.llm.gguf_header import read_gguf_header, tensor_nbytes
from hetsim.graphs.llm.hf_config import architecture_from_hf
from hetsim.graphs.llm.model_source import load_model
from hetsim.graphs.llm.quant_recipe import file_type, recipe_tensors, use_more_bits

FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "head_dim_v", "ffn", "vocab", "max_context", "experts",
          "top_k", "expert_ffn", "shared_experts", "dense_layers", "kv_lora_rank", "q_lora_rank", "rope_head_dim",
          "sliding_window", "swa_layers", "tied_embeddings", "fused_qkv")


def _one_tensor_file(path: Path) -> Path:
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_uint32("llama.block_count", 1)
    w.add_tensor("output.weight", np.zeros((2, 144), dtype=np.uint8), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_header_gives_shapes_types_and_exact_bytes(tmp_path: Path) -> None:
    h = read_gguf_header(_one_tensor_file(tmp_path / "m.gguf"))
    assert h.version == 3 and h.architecture == "llama" and h.metadata["llama.block_count"] == 1
    (t,) = h.tensors
    assert (t.name, t.shape, t.type_name, t.nbytes) == ("output.weight", (256, 2), "Q4_K", 288)
    assert tensor_nbytes("Q6_K", 512) == 420 and tensor_nbytes("MXFP4", 64) == 34


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_every_architecture_plans_from_config_and_from_gguf(tmp_path: Path, name: str) -> None:
    a = architecture_from_hf(TINY_CONFIGS[name], name=name)
    ftype = "MXFP4_MOE" if name == "gpt-oss" else "Q4_K_M"
    tensors = recipe_tensors(a, ftype)
    path = write_gguf(tmp_path / f"{name}.gguf", a, tensors, 38 if name == "gpt-oss" else 15)
    m = load_model(path)
    assert {f: getattr(m.arch, f) for f in FIELDS} == {f: getattr(a, f) for f in FIELDS}
    assert m.weights == ftype and m.tensors == tensors
    assert m.file_bytes == sum(t.nbytes for t in tensors)


def test_architecture_specifics() -> None:
    qwen3 = architecture_from_hf(TINY_CONFIGS["qwen3"])
    assert qwen3.head_dim == 128 and qwen3.hidden // qwen3.heads == 64
    assert qwen3.kv_bytes(0, cells=10) == 10 * 2 * (128 + 128) * 2
    assert architecture_from_hf(TINY_CONFIGS["gemma2"]).swa_layers == (0, 2)
    g3 = architecture_from_hf(TINY_CONFIGS["gemma3"])
    assert g3.swa_layers == (0, 1, 2, 3, 4) and g3.tied_embeddings
    assert g3.kv_cells(0, context=1000, ubatch=32) == 96 and g3.kv_cells(5, context=1000, ubatch=32) == 1000
    ds = architecture_from_hf(TINY_CONFIGS["deepseek2"])
    assert (ds.is_mla, ds.head_dim, ds.head_dim_v, ds.dense_layers, ds.shared_experts) == (True, 96, 64, 1, 1)
    assert ds.kv_bytes(1, cells=10) == 10 * (256 + 32) * 2  # compressed latent + rotary key, F16
    assert not ds.is_moe_layer(0) and ds.is_moe_layer(1)
    names = {t.name for t in recipe_tensors(ds, "Q8_0")}
    assert "blk.0.ffn_gate.weight" in names and "blk.1.ffn_gate_exps.weight" in names
    assert "blk.1.ffn_up_shexp.weight" in names and "blk.1.attn_kv_a_mqa.weight" in names
    oss = {t.name: t.type_name for t in recipe_tensors(architecture_from_hf(TINY_CONFIGS["gpt-oss"]), "MXFP4")}
    assert oss["blk.0.ffn_up_exps.weight"] == "MXFP4" and oss["blk.0.attn_q.weight"] == "Q8_0"
    phi = {t.name: t.shape for t in recipe_tensors(architecture_from_hf(TINY_CONFIGS["phi3"]), "F16")}
    assert phi["blk.0.attn_qkv.weight"] == (256, 768) and phi["blk.0.ffn_up.weight"] == (256, 1024)


def test_q4_k_m_recipe_is_llama_cpps() -> None:
    assert [i for i in range(28) if use_more_bits(i, 28)] == [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27]
    llama3 = load_model("llama-3-8b", "Q4_K_M")
    types = {t.name: t.type_name for t in llama3.tensors}
    assert types["blk.0.attn_v.weight"] == "Q6_K" and types["blk.5.attn_v.weight"] == "Q4_K"
    assert types["blk.6.ffn_down.weight"] == "Q6_K" and types["output.weight"] == "Q6_K"
    # llama-bench prints these sizes for these files: 4.58 GiB, 3.56 GiB, 39.59 GiB
    assert round(llama3.file_bytes / 2**30, 2) == 4.58
    assert round(load_model("llama-2-7b", "Q4_0").file_bytes / 2**30, 2) == 3.56
    assert round(load_model("llama-3-70b", "q4").file_bytes / 2**30, 2) == 39.59
    assert round(llama3.bits_per_weight(), 2) == 4.89
    small = architecture_from_hf({**TINY_CONFIGS["llama"], "hidden_size": 96, "num_attention_heads": 2,
                                  "num_key_value_heads": 2, "intermediate_size": 96})
    t = {x.name: x.type_name for x in recipe_tensors(small, "Q4_K_M")}
    assert t["blk.1.attn_q.weight"] == "Q5_0" and t["output.weight"] == "Q8_0"  # rows of 96: no K-quants


def test_truncated_file_names_what_was_read(tmp_path: Path) -> None:
    p = _one_tensor_file(tmp_path / "t.gguf")
    data = p.read_bytes()
    p.write_bytes(data[:40])
    with pytest.raises(GraphError, match=r"t\.gguf: truncated GGUF file: ended after the version \(3\) and counts \(1 tensors, 2 metadata entries\)$"):
        read_gguf_header(p)
    p.write_bytes(data[:data.index(b"output.weight") + 3])
    with pytest.raises(GraphError, match=r"ended after 2 of 2 metadata entries \(last 'llama\.block_count'\)$"):
        read_gguf_header(p)
    p.write_bytes(data[:6])
    with pytest.raises(GraphError, match=r"truncated GGUF file: ended after the magic"):
        read_gguf_header(p)


def test_unknown_version_and_not_gguf(tmp_path: Path) -> None:
    p = _one_tensor_file(tmp_path / "v.gguf")
    data = bytearray(p.read_bytes())
    data[4:8] = struct.pack("<I", 7)
    p.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"v\.gguf: GGUF version 7 is not supported \(read versions 2, 3\)"):
        read_gguf_header(p)
    q = tmp_path / "x.gguf"
    q.write_bytes(b"PK\x03\x04rest")
    with pytest.raises(GraphError, match=r"x\.gguf: not a GGUF file \(starts with b'PK\\x03\\x04'"):
        load_model(q)


def test_unknown_quantisation_type_names_the_tensor(tmp_path: Path) -> None:
    p = _one_tensor_file(tmp_path / "q.gguf")
    data = bytearray(p.read_bytes())
    at = data.index(b"output.weight") + len("output.weight") + 4 + 2 * 8  # n_dims, two dims
    assert struct.unpack("<I", data[at:at + 4])[0] == gguf.GGMLQuantizationType.Q4_K
    data[at:at + 4] = struct.pack("<I", 999)
    p.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"q\.gguf: tensor 'output\.weight' has unknown quantisation type 999"):
        read_gguf_header(p)


def test_inexpressible_architectures_are_refused(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match=r"architecture 'BertModel' is not expressible; known: "):
        architecture_from_hf({"architectures": ["BertModel"]})
    with pytest.raises(GraphError, match=r"has state-space or hybrid layers \(mamba_d_state\)"):
        architecture_from_hf({"architectures": ["JambaForCausalLM"], "mamba_d_state": 16})
    with pytest.raises(GraphError, match=r"config has no 'intermediate_size'"):
        architecture_from_hf({k: v for k, v in TINY_CONFIGS["llama"].items() if k != "intermediate_size"})
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "mamba")
    w.add_uint32("mamba.ssm.state_size", 16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(GraphError, match=r"architecture 'mamba' has state-space layers"):
        load_model(tmp_path / "m.gguf")


def test_config_folder_preset_and_weight_names(tmp_path: Path) -> None:
    import json

    (tmp_path / "tiny-qwen3").mkdir()
    (tmp_path / "tiny-qwen3" / "config.json").write_text(json.dumps(TINY_CONFIGS["qwen3"]))
    m = load_model(tmp_path / "tiny-qwen3", "q8_0")
    assert m.arch.name == "tiny-qwen3" and m.weights == "Q8_0" and m.arch.arch == "qwen3"
    assert load_model(tmp_path / "tiny-qwen3" / "config.json").weights == "Q4_K_M"
    assert file_type("q4_k_m") == "Q4_K_M" and file_type("fp16") == "F16"
    with pytest.raises(GraphError, match=r"unknown llama.cpp weight type 'Q7_K'; known: F32, F16"):
        load_model("llama-3-8b", "Q7_K")
    with pytest.raises(GraphError, match=r"unknown model 'nope'; known: codellama-7b, "):
        load_model("nope")
    moe = load_model("qwen3-30b-a3b", "Q4_K_M")
    assert moe.arch.is_moe and round(moe.parameters() / 1e9, 2) == 30.53
    # gpt-oss is planned as it is published: MXFP4 experts (the 120B file is 59 GiB; a Q4_K_M recipe, 82 GiB)
    oss = load_model("gpt-oss-120b")
    assert oss.weights == "MXFP4_MOE" and round(oss.file_bytes / 2**30) == 59


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_every_architecture_plans_on_a_machine(tmp_path: Path, name: str) -> None:
    from hetsim.experiments.llm_llamacpp_plan import plan_llamacpp
    from hetsim.experiments.llm_machine import machine_from_flags

    a = architecture_from_hf(TINY_CONFIGS[name], name=name)
    ftype = "MXFP4_MOE" if name == "gpt-oss" else "Q4_K_M"
    m = load_model(write_gguf(tmp_path / f"{name}.gguf", a, recipe_tensors(a, ftype), 38 if name == "gpt-oss" else 15))
    plan = plan_llamacpp(m, machine_from_flags("RTX 4090", ram_gb=64, ram_bw=90, threads=16), context=512)
    # a tiny model fits whole: every layer and the output layer on the GPU
    assert plan.evaluation.flags() == f"-ngl {a.layers + 1}" and plan.evaluation.fits
    assert plan.evaluation.pp.tokens_per_s > 0 and plan.evaluation.tg.tokens_per_s > 0
    assert plan.to_dict()["file_bytes"] == m.file_bytes


def test_duplicate_tensor_names_and_absurd_counts_are_corrupt(tmp_path: Path) -> None:
    p = _one_tensor_file(tmp_path / "d.gguf")
    data = bytearray(p.read_bytes())
    # a second record of the same tensor: the count says two, the table holds output.weight twice
    start = data.index(b"output.weight") - 8
    record = bytes(data[start:start + 8 + len("output.weight") + 4 + 2 * 8 + 4 + 8])
    twice = bytearray(data[:start]) + record + record + data[start + len(record):]
    twice[8:16] = struct.pack("<Q", 2)
    p.write_bytes(bytes(twice))
    with pytest.raises(GraphError, match=r"d\.gguf: corrupt GGUF file: tensor name 'output\.weight' appears twice"):
        read_gguf_header(p)
    # a tensor count no file could hold: refused before anything is allocated for it
    data[8:16] = struct.pack("<Q", 1 << 60)
    p.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"corrupt GGUF file: a tensor table of 1152921504606846976 items"):
        read_gguf_header(p)


def test_an_absurd_array_length_is_corrupt(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(str(tmp_path / "a.gguf"), "llama")
    w.add_array("tokenizer.ggml.scores", [0.0] * 100)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = tmp_path / "a.gguf"
    data = bytearray(p.read_bytes())
    at = data.index(b"tokenizer.ggml.scores") + len("tokenizer.ggml.scores") + 4 + 4  # value type, item type
    assert struct.unpack("<Q", data[at:at + 8])[0] == 100
    data[at:at + 8] = struct.pack("<Q", 1 << 62)
    p.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"a\.gguf: corrupt GGUF file: an array of 4611686018427387904 items"):
        read_gguf_header(p)


def test_glm4_moe_and_a_vision_language_model_s_text_tower(tmp_path: Path) -> None:
    import dataclasses

    glm = architecture_from_hf(TINY_CONFIGS["glm4moe"], name="tiny-glm")
    assert (glm.arch, glm.experts, glm.top_k, glm.expert_ffn, glm.shared_experts, glm.dense_layers) == (
        "glm4moe", 8, 2, 256, 1, 1)
    names = {t.name for t in recipe_tensors(glm, "Q4_K_M")}
    assert "blk.0.ffn_gate.weight" in names and "blk.1.ffn_gate_exps.weight" in names
    assert "blk.1.ffn_up_shexp.weight" in names
    air = load_model("glm-4.5-air")
    assert air.arch.arch == "glm4moe" and round(air.parameters() / 1e9) == 107  # 106 B + the head's rounding
    # a vision-language config: its language model (text_config) is what llama.cpp's text GGUF holds
    vlm = {"architectures": ["Qwen2_5_VLForConditionalGeneration"], "vision_config": {"depth": 32},
           "text_config": {k: v for k, v in TINY_CONFIGS["qwen2"].items() if k != "architectures"}}
    a = architecture_from_hf(vlm, name="tiny-vl")
    assert a.arch == "qwen2" and a.layers == 2 and a.tied_embeddings
    # a vision-language GGUF (architecture qwen2vl) reads as its text tower
    gg = write_gguf(tmp_path / "vl.gguf", dataclasses.replace(a, arch="qwen2vl"), recipe_tensors(a, "Q8_0"), 7)
    m = load_model(gg)
    assert m.arch.arch == "qwen2" and m.arch.layers == 2 and m.weights == "Q8_0"


def test_a_config_integer_of_another_type_names_the_key() -> None:
    for bad in (True, 4.0, "4"):
        with pytest.raises(GraphError, match=r"'num_attention_heads' must be an integer, got"):
            architecture_from_hf({**TINY_CONFIGS["llama"], "num_attention_heads": bad})
    with pytest.raises(GraphError, match=r"'heads' must be an int >= 1, got 0"):
        architecture_from_hf({**TINY_CONFIGS["llama"], "num_attention_heads": 0})


def test_a_model_too_large_to_list_is_refused_before_allocating(tmp_path: Path) -> None:
    for name in ("llama", "gemma2", "gemma3", "gpt-oss"):  # gemma's and gpt-oss's list their sliding layers
        huge = {**TINY_CONFIGS[name], "num_hidden_layers": 2**40}
        with pytest.raises(GraphError, match=r"'num_hidden_layers' is 1,099,511,627,776 layers \(at most 125,000\)"):
            architecture_from_hf(huge, name="huge")
    gg = write_gguf(tmp_path / "m.gguf", architecture_from_hf(TINY_CONFIGS["gemma2"], name="g"), ())
    data = bytearray(gg.read_bytes())
    key = b"gemma2.block_count"
    at = data.index(key) + len(key) + 4  # the key's name, its value's type, then the value
    data[at:at + 4] = struct.pack("<I", 2**32 - 1)
    gg.write_bytes(bytes(data))
    with pytest.raises(GraphError, match=r"block_count is 4,294,967,295 layers \(at most 125,000\)"):
        load_model(gg)
    a = dataclasses.replace(architecture_from_hf(TINY_CONFIGS["llama"], name="huge"), layers=10**9)
    with pytest.raises(GraphError, match=r"model 'huge': 1000000000 layers would list about 16,000,000,000 tensors"):
        recipe_tensors(a, "Q4_K_M")
    from hetsim.graphs.llm import llm_graph

    with pytest.raises(GraphError, match=r"model 'huge': 1000000000 layers would make a graph of about"):
        llm_graph(a, kv_length=8)


TINY_HYBRID = {"architectures": ["Qwen3_5ForConditionalGeneration"], "vision_config": {"depth": 2},
               "text_config": {"hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
                               "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 256,
                               "max_position_embeddings": 4096, "full_attention_interval": 4,
                               "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                               "linear_value_head_dim": 16, "linear_conv_kernel_dim": 4}}


def test_a_linear_attention_hybrid_caches_keys_only_in_its_full_attention_layers() -> None:
    from hetsim.graphs.llm.build import check_simulated

    a = architecture_from_hf(TINY_HYBRID, name="tiny-hybrid")
    assert a.arch == "qwen35" and a.linear_layers == (0, 1, 2, 4, 5, 6) and a.attn_output_gate
    # a full-attention layer's cache grows with the context; a linear one holds its F32 state whatever the context
    assert a.kv_bytes(3, 100) == 100 * 2 * (16 + 16) * 2
    state = 4 * (4 * 16 * 16 + 3 * (2 * 2 * 16 + 4 * 16))
    assert a.kv_bytes(0, 100) == a.kv_bytes(0, 1) == a.recurrent_state_bytes() == state
    assert a.kv_bytes_per_token() == 2 * 2 * (16 + 16) * 2  # two full-attention layers
    assert a.attended_cells(0, 500) == 0 and a.attended_cells(3, 500) == 500
    t = {x.name: x for x in recipe_tensors(a, "Q4_K_M")}
    assert "blk.0.ssm_out.weight" in t and "blk.0.attn_q.weight" not in t and "blk.3.ssm_out.weight" not in t
    assert t["blk.3.attn_q.weight"].shape == (64, 2 * 4 * 16)  # the query and the output's gate
    assert t["blk.0.attn_qkv.weight"].shape == (64, 2 * 2 * 16 + 4 * 16)
    assert t["blk.0.ssm_conv1d.weight"].type_name == "F32"
    with pytest.raises(GraphError, match=r"layers of different attention .* which the simulated policies"):
        check_simulated(a)
    types = ["linear_attention"] * 3 + ["full_attention"]
    listed = architecture_from_hf({**TINY_HYBRID, "text_config": {**TINY_HYBRID["text_config"], "layer_types": types * 2}})
    assert listed.linear_layers == a.linear_layers
    with pytest.raises(GraphError, match=r"'layer_types' lists 4 layers, the model has 8"):
        architecture_from_hf({**TINY_HYBRID, "text_config": {**TINY_HYBRID["text_config"], "layer_types": types}})
    with pytest.raises(GraphError, match=r"'linear_num_value_heads' must be an integer, got str"):
        architecture_from_hf({**TINY_HYBRID, "text_config": {**TINY_HYBRID["text_config"],
                                                             "linear_num_value_heads": "4"}})
    # the published 27B: llama-bench prints 26.90 B parameters for its GGUF
    q = load_model("qwen3.5-27b", "Q4_K_M")
    assert round(q.parameters() / 1e9, 2) == 26.90 and len(q.arch.linear_layers) == 48
    assert q.arch.parameters() == pytest.approx(q.parameters(), rel=1e-5)  # the closed form counts the same


def test_gemma4_global_layers_have_their_own_heads_and_experts_beside_the_mlp() -> None:
    text = {"hidden_size": 64, "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_global_key_value_heads": 1, "head_dim": 16, "global_head_dim": 32, "attention_k_eq_v": True,
            "intermediate_size": 96, "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2,
            "moe_intermediate_size": 32, "vocab_size": 256, "max_position_embeddings": 4096, "sliding_window": 8,
            "layer_types": ["sliding_attention"] * 5 + ["full_attention"]}
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "text_config": text}
    a = architecture_from_hf(cfg, name="tiny-gemma4")
    assert a.arch == "gemma4" and a.swa_layers == (0, 1, 2, 3, 4) and a.tied_embeddings
    assert (a.layer_head_dim(5), a.layer_kv_heads(5), a.layer_head_dim(0), a.layer_kv_heads(0)) == (32, 1, 16, 2)
    assert a.kv_bytes(5, 10) == 10 * 1 * (32 + 32) * 2 and a.kv_bytes(0, 10) == 10 * 2 * (16 + 16) * 2
    assert (a.experts, a.top_k, a.expert_ffn, a.shared_experts, a.shared_ffn) == (4, 2, 32, 1, 96)
    t = {x.name: x for x in recipe_tensors(a, "Q8_0")}
    assert "blk.5.attn_v.weight" not in t and "blk.0.attn_v.weight" in t  # the global layers' key is the value
    assert t["blk.5.attn_q.weight"].shape == (64, 4 * 32) and "blk.0.ffn_up_shexp.weight" in t
    for key, value in (("num_kv_shared_layers", 2), ("hidden_size_per_layer_input", 16)):
        with pytest.raises(GraphError, match=rf"Gemma4ForCausalLM with {key} .* is not expressible"):
            architecture_from_hf({**cfg, "text_config": {**text, key: value}})
    with pytest.raises(GraphError, match=r"'attention_k_eq_v' must be true or false, got str"):
        architecture_from_hf({**cfg, "text_config": {**text, "attention_k_eq_v": "yes"}})
    g = load_model("gemma-4-26b-a4b", "Q4_0")
    assert g.arch.global_head_dim == 512 and g.arch.parameters() == pytest.approx(g.parameters(), rel=1e-5)
