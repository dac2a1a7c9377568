"""An :class:`~graphs.llm.architecture.Architecture` from a Hugging Face ``config.json``.

Reads the keys transformers' configurations use (``hidden_size``,
``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``,
``intermediate_size``, ``vocab_size``, ``max_position_embeddings``...) for the
architectures llama.cpp runs and this planner expresses:

========================================  ==========  ==========================================
``architectures[0]``                      llama.cpp   what is read besides the common keys
========================================  ==========  ==========================================
LlamaForCausalLM, MistralForCausalLM      llama       ``head_dim`` when given (Mistral-Nemo)
Qwen2ForCausalLM                          qwen2       ``tie_word_embeddings``
Qwen3ForCausalLM                          qwen3       ``head_dim``
Gemma2ForCausalLM, Gemma3ForCausalLM      gemma2/3    ``head_dim``, ``sliding_window``, which
                                                      layers slide (alternate in Gemma 2;
                                                      ``sliding_window_pattern`` / ``layer_types``
                                                      in Gemma 3), tied embeddings
Phi3ForCausalLM                           phi3        fused QKV and gate/up
MixtralForCausalLM                        llama       ``num_local_experts``, ``num_experts_per_tok``
Qwen3MoeForCausalLM                       qwen3moe    ``num_experts``, ``moe_intermediate_size``
DeepseekV2/V3ForCausalLM                  deepseek2   MLA ranks, shared experts, dense layers
Glm4MoeForCausalLM (GLM-4.5, 4.6)         glm4moe     ``n_routed_experts``, shared experts,
                                                      ``first_k_dense_replace``, ``head_dim``
GptOssForCausalLM                         gpt-oss     ``num_local_experts``, ``layer_types``
Qwen3_5ForCausalLM, Qwen3_5Moe...,        qwen35,     hybrid: ``layer_types`` (or
Qwen3NextForCausalLM                      qwen35moe,  ``full_attention_interval``): which layers
                                          qwen3next   are linear attention, ``linear_*`` sizes,
                                                      ``attn_output_gate``; MoE: ``num_experts``,
                                                      ``shared_expert_intermediate_size``
Gemma4ForCausalLM                         gemma4      Gemma 3's keys, and ``global_head_dim``,
                                                      ``num_global_key_value_heads``,
                                                      ``attention_k_eq_v`` of the full-attention
                                                      layers; ``enable_moe_block``: routed
                                                      experts beside the dense MLP (planned as
                                                      an always-active shared expert)
Qwen2/2.5-VL, Qwen3-VL (MoE), Mistral3,   the text    the language model of a vision-language
Glm4vMoe, Qwen3.5, Gemma 4 ...            tower's     model (``text_config``): its text tower
...ForConditionalGeneration
========================================  ==========  ==========================================

Anything else (state-space layers, other hybrids, Gemma 4's per-layer inputs and shared
KV layers, encoder-decoders, unknown classes) is refused naming what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture, check_layer_count

__all__ = ["HF_ARCHITECTURES", "LINEAR_ATTENTION_CLASSES", "VLM_TEXT_TOWERS", "architecture_from_hf",
           "read_hf_config"]

#: transformers class -> llama.cpp architecture
HF_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3moe",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3",
    "Phi3ForCausalLM": "phi3", "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2",
    "GptOssForCausalLM": "gpt-oss", "Glm4MoeForCausalLM": "glm4moe",
    "Qwen3_5ForCausalLM": "qwen35", "Qwen3_5MoeForCausalLM": "qwen35moe", "Qwen3NextForCausalLM": "qwen3next",
    "Gemma4ForCausalLM": "gemma4",
}
#: hybrid classes whose linear-attention (gated delta-net) layers are expressed
LINEAR_ATTENTION_CLASSES = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Qwen3NextForCausalLM")
#: vision-language classes -> the class of their text tower (``text_config``, or the top level)
VLM_TEXT_TOWERS: dict[str, str] = {
    "Qwen2VLForConditionalGeneration": "Qwen2ForCausalLM",
    "Qwen2_5_VLForConditionalGeneration": "Qwen2ForCausalLM",
    "Qwen3VLForConditionalGeneration": "Qwen3ForCausalLM",
    "Qwen3VLMoeForConditionalGeneration": "Qwen3MoeForCausalLM",
    "Mistral3ForConditionalGeneration": "MistralForCausalLM",
    "Glm4vMoeForConditionalGeneration": "Glm4MoeForCausalLM",
    "LlavaForConditionalGeneration": "LlamaForCausalLM",
    "Qwen3_5ForConditionalGeneration": "Qwen3_5ForCausalLM",
    "Qwen3_5MoeForConditionalGeneration": "Qwen3_5MoeForCausalLM",
    "Gemma4ForConditionalGeneration": "Gemma4ForCausalLM",
}
_HYBRID_KEYS = ("mamba_d_state", "ssm_state_size", "attn_layer_period", "linear_conv_kernel_dim")


def read_hf_config(path: str | Path) -> dict[str, Any]:
    """The JSON of ``path`` (a ``config.json`` or a folder holding one)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    if not p.is_file():
        raise GraphError(f"{path}: no config.json")
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise GraphError(f"{p}: not a JSON config: {e}") from None
    if not isinstance(data, dict):
        raise GraphError(f"{p}: a config.json must be a JSON object")
    return data


def _get(cfg: dict[str, Any], where: str, key: str, default: Any = None) -> Any:
    v = cfg.get(key, default)
    if v is None:
        raise GraphError(f"{where}: config has no {key!r}")
    return v


def _int(cfg: dict[str, Any], where: str, key: str, default: Any = None) -> int:
    """``cfg[key]`` as an int (absent or null: ``default``): a boolean, a float or a string there
    is an error naming the key."""
    v = cfg.get(key)
    v = _get({key: default if v is None else v}, where, key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise GraphError(f"{where}: {key!r} must be an integer, got {type(v).__name__} {v!r:.40}")
    return v


def _names(cfg: dict[str, Any], where: str, key: str) -> list[str]:
    """``cfg[key]`` as a list of strings (absent or null: empty): anything else there is
    an error naming the key."""
    v = cfg.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise GraphError(f"{where}: {key!r} must be a list of names, got {type(v).__name__} {v!r:.40}")
    return v


def _table(cfg: dict[str, Any], where: str, key: str) -> dict[str, Any]:
    """``cfg[key]`` as a JSON object (absent or null: empty)."""
    v = cfg.get(key)
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise GraphError(f"{where}: {key!r} must be a JSON object, got {type(v).__name__} {v!r:.40}")
    return v


def _flag(cfg: dict[str, Any], where: str, key: str) -> bool:
    """``cfg[key]`` as true or false (absent or null: false): anything else is an error naming the key."""
    v = cfg.get(key)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise GraphError(f"{where}: {key!r} must be true or false, got {type(v).__name__} {v!r:.40}")
    return v


def _linear_attention(cfg: dict[str, Any], where: str, n: int, layer_types: list[str]) -> dict[str, Any]:
    """The linear-attention fields of a Qwen3.5 / Qwen3-Next config: which layers (``layer_types``, or
    every layer but each ``full_attention_interval``-th) and the gated delta-net's sizes."""
    if layer_types:
        if len(layer_types) != n:
            raise GraphError(f"{where}: 'layer_types' lists {len(layer_types)} layers, the model has {n}")
        linear = tuple(i for i, t in enumerate(layer_types) if t == "linear_attention")
    else:
        every = _int(cfg, where, "full_attention_interval", 4)
        if every < 1:
            raise GraphError(f"{where}: 'full_attention_interval' must be >= 1, got {every}")
        linear = tuple(i for i in range(n) if (i + 1) % every)
    return dict(linear_layers=linear, linear_key_heads=_int(cfg, where, "linear_num_key_heads"),
                linear_value_heads=_int(cfg, where, "linear_num_value_heads"),
                linear_key_dim=_int(cfg, where, "linear_key_head_dim"),
                linear_value_dim=_int(cfg, where, "linear_value_head_dim"),
                linear_conv_kernel=_int(cfg, where, "linear_conv_kernel_dim"),
                attn_output_gate=_flag(cfg, where, "attn_output_gate") if cfg.get("attn_output_gate") is not None
                else True)


def architecture_from_hf(cfg: dict[str, Any], name: str = "") -> Architecture:
    """The :class:`Architecture` a Hugging Face config describes.

    Raises
    ------
    GraphError
        an architecture the planner cannot express (naming it and what is missing),
        or a required key absent (naming the key).
    """
    where = f"config {name!r}" if name else "config"
    classes = _names(cfg, where, "architectures")
    cls = classes[0] if classes else cfg.get("model_type", "?")
    if not isinstance(cls, str):
        raise GraphError(f"{where}: 'model_type' must be a name, got {type(cls).__name__} {cls!r:.40}")
    where = f"config {name or cls!r}"
    if cls in VLM_TEXT_TOWERS:  # a vision-language model: plan its language model
        text = _table(cfg, where, "text_config")
        cls = VLM_TEXT_TOWERS[cls]
        towers = _names(text, f"{where} text_config", "architectures")
        if towers:
            cls = towers[0] if towers[0] in HF_ARCHITECTURES else cls
        cfg = {**{k: v for k, v in cfg.items() if k != "text_config"}, **text, "architectures": [cls]}
        classes = [cls]
    linear = cls in LINEAR_ATTENTION_CLASSES
    hybrid = [k for k in _HYBRID_KEYS if k in cfg and not (linear and k == "linear_conv_kernel_dim")]
    layer_types = _names(cfg, where, "layer_types")
    kinds = ("full_attention", "sliding_attention") + (("linear_attention",) if linear else ())
    odd = sorted({t for t in layer_types if t not in kinds})
    if cls == "Gemma4ForCausalLM":
        extra = [k for k in ("num_kv_shared_layers", "hidden_size_per_layer_input") if cfg.get(k)]
        if extra:
            raise GraphError(f"{where}: {cls} with {', '.join(extra)} (layers that share another's KV cache, "
                             "per-layer input embeddings) is not expressible")
    if hybrid or odd:
        raise GraphError(f"{where}: {cls} has state-space or hybrid layers ({', '.join(hybrid + odd)}); the "
                         "planner expresses attention decoders and the linear-attention hybrids of Qwen3.5 and "
                         "Qwen3-Next")
    if cls not in HF_ARCHITECTURES:
        raise GraphError(f"{where}: architecture {cls!r} is not expressible; known: "
                         f"{', '.join(sorted(HF_ARCHITECTURES))}")
    arch = HF_ARCHITECTURES[cls]
    if "text_config" in cfg:  # Gemma 3 multimodal: the language model's config
        cfg = {**_table(cfg, where, "text_config"), "architectures": classes}
    h = _int(cfg, where, "hidden_size")
    heads = _int(cfg, where, "num_attention_heads")
    n = _int(cfg, where, "num_hidden_layers")
    check_layer_count(where, "'num_hidden_layers'", n)
    kw: dict[str, Any] = dict(
        name=name or str(cfg.get("_name_or_path") or cls), arch=arch, layers=n, hidden=h, heads=heads,
        kv_heads=_int(cfg, where, "num_key_value_heads", heads),
        head_dim=_int(cfg, where, "head_dim", 0),
        ffn=_int(cfg, where, "intermediate_size"), vocab=_int(cfg, where, "vocab_size"),
        max_context=_int(cfg, where, "max_position_embeddings"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", arch.startswith("gemma"))),
        source=f"Hugging Face config ({cls})",
    )
    if cls.startswith("Mixtral") or cls == "GptOssForCausalLM":
        kw.update(experts=_int(cfg, where, "num_local_experts"),
                  top_k=_int(cfg, where, "num_experts_per_tok"))
    if cls == "Qwen3MoeForCausalLM":
        kw.update(experts=_int(cfg, where, "num_experts"), top_k=_int(cfg, where, "num_experts_per_tok"),
                  expert_ffn=_int(cfg, where, "moe_intermediate_size"))
    if cls.startswith("Deepseek"):
        rope = _int(cfg, where, "qk_rope_head_dim")
        kw.update(experts=_int(cfg, where, "n_routed_experts"), top_k=_int(cfg, where, "num_experts_per_tok"),
                  expert_ffn=_int(cfg, where, "moe_intermediate_size"),
                  shared_experts=_int(cfg, where, "n_shared_experts", 0),
                  shared_ffn=_int(cfg, where, "moe_intermediate_size"),
                  dense_layers=_int(cfg, where, "first_k_dense_replace", 0),
                  kv_lora_rank=_int(cfg, where, "kv_lora_rank"), q_lora_rank=_int(cfg, where, "q_lora_rank", 0),
                  rope_head_dim=rope, head_dim=_int(cfg, where, "qk_nope_head_dim") + rope,
                  head_dim_v=_int(cfg, where, "v_head_dim"), kv_heads=heads)
    if cls == "Glm4MoeForCausalLM":
        kw.update(experts=_int(cfg, where, "n_routed_experts"), top_k=_int(cfg, where, "num_experts_per_tok"),
                  expert_ffn=_int(cfg, where, "moe_intermediate_size"),
                  shared_experts=_int(cfg, where, "n_shared_experts", 0),
                  shared_ffn=_int(cfg, where, "moe_intermediate_size"),
                  dense_layers=_int(cfg, where, "first_k_dense_replace", 0))
    if cls == "Phi3ForCausalLM":
        kw["fused_qkv"] = True
    if linear:
        kw.update(_linear_attention(cfg, where, n, layer_types))
    if cls in ("Qwen3_5MoeForCausalLM", "Qwen3NextForCausalLM"):
        shared = _int(cfg, where, "shared_expert_intermediate_size", 0)
        kw.update(experts=_int(cfg, where, "num_experts"), top_k=_int(cfg, where, "num_experts_per_tok"),
                  expert_ffn=_int(cfg, where, "moe_intermediate_size"), shared_experts=1 if shared else 0,
                  shared_ffn=shared)
    if cls == "Gemma4ForCausalLM":
        kw.update(global_head_dim=_int(cfg, where, "global_head_dim", 0),
                  global_kv_heads=_int(cfg, where, "num_global_key_value_heads", 0),
                  global_k_eq_v=_flag(cfg, where, "attention_k_eq_v"))
        if _flag(cfg, where, "enable_moe_block"):  # routed experts beside the dense MLP of every layer
            kw.update(experts=_int(cfg, where, "num_experts"), top_k=_int(cfg, where, "top_k_experts"),
                      expert_ffn=_int(cfg, where, "moe_intermediate_size"), shared_experts=1,
                      shared_ffn=kw["ffn"])
    window = _int(cfg, where, "sliding_window", 0)
    if window and (arch.startswith("gemma") or arch == "gpt-oss"):
        if layer_types:
            swa = tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention")
        elif arch == "gemma2":
            swa = tuple(range(0, n, 2))  # Gemma 2 alternates: even layers slide
        else:
            period = _int(cfg, where, "sliding_window_pattern", 6)  # Gemma 3: 5 local, then 1 global
            if period < 1:
                raise GraphError(f"{where}: 'sliding_window_pattern' must be >= 1, got {period}")
            swa = tuple(i for i in range(n) if (i + 1) % period)
        kw.update(sliding_window=window, swa_layers=swa)
    return Architecture(**kw)
