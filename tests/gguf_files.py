"""Small GGUF files and Hugging Face configs for the LLM tests (written with gguf's GGUFWriter)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from hetsim.graphs.llm.architecture import Architecture
from hetsim.graphs.llm.gguf_header import TensorInfo

#: tiny configs of every architecture the planner expresses (not published models)
TINY_CONFIGS: dict[str, dict] = {
    "llama": {"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 512,
              "max_position_embeddings": 1024},
    "mistral-nemo": {"architectures": ["MistralForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128,
                     "intermediate_size": 512, "vocab_size": 512, "max_position_embeddings": 1024},
    "qwen2": {"architectures": ["Qwen2ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 512,
              "max_position_embeddings": 1024, "tie_word_embeddings": True},
    "qwen3": {"architectures": ["Qwen3ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 512,
              "vocab_size": 512, "max_position_embeddings": 1024},
    "gemma2": {"architectures": ["Gemma2ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 512,
               "vocab_size": 512, "max_position_embeddings": 1024, "sliding_window": 64},
    "gemma3": {"architectures": ["Gemma3ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 6,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 128, "intermediate_size": 512,
               "vocab_size": 512, "max_position_embeddings": 1024, "sliding_window": 64,
               "sliding_window_pattern": 6},
    "phi3": {"architectures": ["Phi3ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
             "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 512,
             "max_position_embeddings": 1024},
    "mixtral": {"architectures": ["MixtralForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 512,
                "max_position_embeddings": 1024, "num_local_experts": 4, "num_experts_per_tok": 2},
    "qwen3moe": {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
                 "moe_intermediate_size": 256, "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 512,
                 "max_position_embeddings": 1024},
    "deepseek2": {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 256, "num_hidden_layers": 3,
                  "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512,
                  "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2,
                  "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 256, "q_lora_rank": 256,
                  "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64, "vocab_size": 512,
                  "max_position_embeddings": 1024},
    "glm4moe": {"architectures": ["Glm4MoeForCausalLM"], "hidden_size": 256, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
                "moe_intermediate_size": 256, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
                "first_k_dense_replace": 1, "vocab_size": 512, "max_position_embeddings": 1024},
    "gpt-oss": {"architectures": ["GptOssForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 256,
                "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 512, "max_position_embeddings": 1024,
                "sliding_window": 128, "layer_types": ["sliding_attention", "full_attention"]},
}


def write_gguf(path: Path, a: Architecture, tensors: tuple[TensorInfo, ...], file_type: int = 15) -> Path:
    """A GGUF file holding ``a``'s metadata and ``tensors`` (zeros), as llama.cpp's converter names them."""
    w = gguf.GGUFWriter(str(path), a.arch)
    p = a.arch
    w.add_uint32("general.file_type", file_type)
    w.add_string("general.name", a.name)
    for key, value in (("block_count", a.layers), ("embedding_length", a.hidden), ("attention.head_count", a.heads),
                       ("attention.head_count_kv", a.kv_heads), ("attention.key_length", a.head_dim),
                       ("attention.value_length", a.head_dim_v), ("feed_forward_length", a.ffn),
                       ("context_length", a.max_context), ("expert_count", a.experts),
                       ("expert_used_count", a.top_k), ("expert_feed_forward_length", a.expert_ffn if a.experts else 0),
                       ("expert_shared_count", a.shared_experts), ("leading_dense_block_count", a.dense_layers),
                       ("attention.kv_lora_rank", a.kv_lora_rank), ("attention.q_lora_rank", a.q_lora_rank),
                       ("rope.dimension_count", a.rope_head_dim), ("attention.sliding_window", a.sliding_window)):
        if value:
            w.add_uint32(f"{p}.{key}", value)
    if a.sliding_window and a.arch != "gemma3":
        w.add_array(f"{p}.attention.sliding_window_pattern", [i in a.swa_layers for i in range(a.layers)])
    for t in tensors:
        qtype = gguf.GGMLQuantizationType[t.type_name]
        outer = tuple(reversed(t.shape[1:]))
        if t.type_name in ("F32", "F16"):
            w.add_tensor(t.name, np.zeros((*outer, t.shape[0]), dtype=np.float32 if t.type_name == "F32"
                                          else np.float16))
        else:
            block, size = gguf.GGML_QUANT_SIZES[qtype]
            w.add_tensor(t.name, np.zeros((*outer, t.shape[0] // block * size), dtype=np.uint8), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
