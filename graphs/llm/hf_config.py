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
GptOssForCausalLM                         gpt-oss     ``num_local_experts``, ``layer_types``
========================================  ==========  ==========================================

Anything else (state-space or hybrid layers, encoder-decoders, unknown classes) is
refused naming what is missing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture

__all__ = ["HF_ARCHITECTURES", "architecture_from_hf", "read_hf_config"]

#: transformers class -> llama.cpp architecture
HF_ARCHITECTURES: dict[str, str] = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "llama", "MixtralForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3", "Qwen3MoeForCausalLM": "qwen3moe",
    "Gemma2ForCausalLM": "gemma2", "Gemma3ForCausalLM": "gemma3", "Gemma3ForConditionalGeneration": "gemma3",
    "Phi3ForCausalLM": "phi3", "DeepseekV2ForCausalLM": "deepseek2", "DeepseekV3ForCausalLM": "deepseek2",
    "GptOssForCausalLM": "gpt-oss",
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


def architecture_from_hf(cfg: dict[str, Any], name: str = "") -> Architecture:
    """The :class:`Architecture` a Hugging Face config describes.

    Raises
    ------
    GraphError
        an architecture the planner cannot express (naming it and what is missing),
        or a required key absent (naming the key).
    """
    classes = cfg.get("architectures") or []
    cls = classes[0] if classes else cfg.get("model_type", "?")
    where = f"config {name or cls!r}"
    hybrid = [k for k in _HYBRID_KEYS if k in cfg]
    layer_types = cfg.get("layer_types") or []
    odd = sorted({t for t in layer_types if t not in ("full_attention", "sliding_attention")})
    if hybrid or odd:
        raise GraphError(f"{where}: {cls} has state-space or hybrid layers ({', '.join(hybrid + odd)}); "
                         "the planner expresses attention-only decoders")
    if cls not in HF_ARCHITECTURES:
        raise GraphError(f"{where}: architecture {cls!r} is not expressible; known: "
                         f"{', '.join(sorted(HF_ARCHITECTURES))}")
    arch = HF_ARCHITECTURES[cls]
    if "text_config" in cfg:  # Gemma 3 multimodal: the language model's config
        cfg = {**cfg["text_config"], "architectures": classes}
    h = int(_get(cfg, where, "hidden_size"))
    heads = int(_get(cfg, where, "num_attention_heads"))
    n = int(_get(cfg, where, "num_hidden_layers"))
    kw: dict[str, Any] = dict(
        name=name or str(cfg.get("_name_or_path") or cls), arch=arch, layers=n, hidden=h, heads=heads,
        kv_heads=int(cfg.get("num_key_value_heads") or heads),
        head_dim=int(cfg.get("head_dim") or h // heads),
        ffn=int(_get(cfg, where, "intermediate_size")), vocab=int(_get(cfg, where, "vocab_size")),
        max_context=int(_get(cfg, where, "max_position_embeddings")),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", arch.startswith("gemma"))),
        source=f"Hugging Face config ({cls})",
    )
    if cls.startswith("Mixtral") or cls == "GptOssForCausalLM":
        kw.update(experts=int(_get(cfg, where, "num_local_experts")),
                  top_k=int(_get(cfg, where, "num_experts_per_tok")))
    if cls == "Qwen3MoeForCausalLM":
        kw.update(experts=int(_get(cfg, where, "num_experts")), top_k=int(_get(cfg, where, "num_experts_per_tok")),
                  expert_ffn=int(_get(cfg, where, "moe_intermediate_size")))
    if cls.startswith("Deepseek"):
        rope = int(_get(cfg, where, "qk_rope_head_dim"))
        kw.update(experts=int(_get(cfg, where, "n_routed_experts")), top_k=int(_get(cfg, where, "num_experts_per_tok")),
                  expert_ffn=int(_get(cfg, where, "moe_intermediate_size")),
                  shared_experts=int(cfg.get("n_shared_experts") or 0),
                  shared_ffn=int(_get(cfg, where, "moe_intermediate_size")),
                  dense_layers=int(cfg.get("first_k_dense_replace") or 0),
                  kv_lora_rank=int(_get(cfg, where, "kv_lora_rank")), q_lora_rank=int(cfg.get("q_lora_rank") or 0),
                  rope_head_dim=rope, head_dim=int(_get(cfg, where, "qk_nope_head_dim")) + rope,
                  head_dim_v=int(_get(cfg, where, "v_head_dim")), kv_heads=heads)
    if cls == "Phi3ForCausalLM":
        kw["fused_qkv"] = True
    window = int(cfg.get("sliding_window") or 0)
    if window and (arch.startswith("gemma") or arch == "gpt-oss"):
        if layer_types:
            swa = tuple(i for i, t in enumerate(layer_types) if t == "sliding_attention")
        elif arch == "gemma2":
            swa = tuple(range(0, n, 2))  # Gemma 2 alternates: even layers slide
        else:
            period = int(cfg.get("sliding_window_pattern") or 6)  # Gemma 3: 5 local, then 1 global
            swa = tuple(i for i in range(n) if (i + 1) % period)
        kw.update(sliding_window=window, swa_layers=swa)
    return Architecture(**kw)
