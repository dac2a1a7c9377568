"""The tensors of a GGUF file that llama.cpp's quantiser would write for an architecture.

A model described by a ``config.json`` has no file yet; :func:`recipe_tensors` lists
the tensors llama.cpp's converter names for it (``token_embd``, ``blk.N.attn_q`` ...,
``ffn_gate_exps`` ...) with the ggml type ``llama-quantize`` gives each under a file
type (``Q4_K_M``, ``Q8_0``...). The rules are the main ones of
``llama_tensor_get_type`` (llama.cpp ``src/llama-quant.cpp``):

* 1-D tensors (norms, biases) stay F32;
* ``output.weight`` (or ``token_embd`` when the head is tied) is Q6_K, except for F16,
  BF16 and Q8_0 files;
* ``attn_v`` and ``ffn_down`` get more bits in the layers ``use_more_bits`` picks
  (the first and last eighth and every third one between): Q6_K in Q4_K_M and Q5_K_M;
  Q3_K_M gives ``attn_v`` Q5_K in its first two layers and Q4_K elsewhere, ``ffn_down``
  Q5_K in the first sixteenth and Q4_K elsewhere; Q3_K_L gives both Q5_K;
  ``attn_v`` is Q8_0 in 8-expert models and at least Q5_K in 80-layer (70B) models;
* a K-quant whose row is not a multiple of 256 falls back (Q4_K -> Q5_0, Q5_K -> Q5_1,
  Q6_K -> Q8_0, Q2_K/Q3_K -> IQ4_NL); a row not a multiple of 32 is F16;
* MXFP4_MOE (gpt-oss): routed experts MXFP4, other matrices Q8_0;
* the i-quants (IQ4_XS ... IQ1_S) store every matrix at their base type, the output Q6_K
  (llama-quantize's further per-tensor choices for them are not modelled).

So Q4_K_M averages 4.8-4.9 bits per weight on a Llama, not Q4_K's 4.5.

>>> from hetsim.graphs.llm.architecture import MAX_LAYERS, Architecture
>>> a = Architecture("t", "llama", layers=8, hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512,
...                  vocab=512, max_context=256)
>>> t = {x.name: x.type_name for x in recipe_tensors(a, "Q4_K_M")}
>>> t["blk.0.attn_v.weight"], t["blk.1.attn_v.weight"], t["output.weight"], t["blk.0.attn_norm.weight"]
('Q6_K', 'Q4_K', 'Q6_K', 'F32')
"""

from __future__ import annotations

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import MAX_LAYERS, Architecture
from hetsim.graphs.llm.gguf_header import TensorInfo

__all__ = ["F32_MATRICES", "FILE_TYPES", "QK_NORM_ARCHITECTURES", "file_type", "recipe_tensors", "use_more_bits"]

#: llama.cpp file types (``llama-quantize`` names) and their base ggml type
FILE_TYPES: dict[str, str] = {
    "F32": "F32", "F16": "F16", "BF16": "BF16", "Q8_0": "Q8_0", "Q6_K": "Q6_K",
    "Q5_K_M": "Q5_K", "Q5_K_S": "Q5_K", "Q5_0": "Q5_0", "Q5_1": "Q5_1",
    "Q4_K_M": "Q4_K", "Q4_K_S": "Q4_K", "Q4_0": "Q4_0", "Q4_1": "Q4_1",
    "Q3_K_L": "Q3_K", "Q3_K_M": "Q3_K", "Q3_K_S": "Q3_K", "Q2_K": "Q2_K", "MXFP4_MOE": "MXFP4",
    "IQ4_XS": "IQ4_XS", "IQ4_NL": "IQ4_NL", "IQ3_M": "IQ3_S", "IQ3_S": "IQ3_S", "IQ3_XS": "IQ3_XXS",
    "IQ3_XXS": "IQ3_XXS", "IQ2_M": "IQ2_S", "IQ2_S": "IQ2_S", "IQ2_XS": "IQ2_XS", "IQ2_XXS": "IQ2_XXS",
    "IQ1_M": "IQ1_M", "IQ1_S": "IQ1_S",
}
_ALIASES = {"FP16": "F16", "FP32": "F32", "Q8": "Q8_0", "Q6": "Q6_K", "Q5": "Q5_K_M", "Q4": "Q4_K_M",
            "Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "Q3_K": "Q3_K_M", "Q3": "Q3_K_M", "MXFP4": "MXFP4_MOE"}
_FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "Q2_K": "IQ4_NL", "Q3_K": "IQ4_NL",
             "IQ4_XS": "IQ4_NL", "IQ3_S": "IQ4_NL", "IQ3_XXS": "IQ4_NL", "IQ2_S": "IQ4_NL", "IQ2_XS": "IQ4_NL",
             "IQ2_XXS": "IQ4_NL", "IQ1_M": "IQ4_NL", "IQ1_S": "IQ4_NL"}
_K_QUANTS = tuple(_FALLBACK)  # types of 256-weight blocks
#: tensors a recipe may list (about 16 per layer of at most MAX_LAYERS): beyond, the table would exhaust memory
MAX_TENSORS = 16 * MAX_LAYERS


def file_type(name: str) -> str:
    """The llama.cpp file type called ``name`` (case-insensitive; ``q4`` is Q4_K_M).

    Raises
    ------
    GraphError
        naming the unknown type and listing the known ones.
    """
    key = str(name).upper()
    key = _ALIASES.get(key, key)
    if key not in FILE_TYPES:
        raise GraphError(f"unknown llama.cpp weight type {name!r}; known: {', '.join(FILE_TYPES)}")
    return key


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's choice of layers that get more bits: first and last eighth, every third between."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _matrix_type(a: Architecture, ftype: str, name: str, layer: int) -> str:
    base = FILE_TYPES[ftype]
    if ftype in ("F32", "F16", "BF16", "Q8_0"):
        return base
    if ftype == "MXFP4_MOE":
        return "MXFP4" if "_exps" in name else "Q8_0"
    n = a.layers
    if name == "output" or (name == "token_embd" and a.tied_embeddings):
        return "Q6_K"
    if name == "attn_v":
        t = base
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, n):
            t = "Q6_K"
        elif ftype == "Q3_K_M":
            t = "Q5_K" if layer < 2 else "Q4_K"
        elif ftype == "Q3_K_L":
            t = "Q5_K"
        elif ftype == "Q4_K_S" and layer < 4:
            t = "Q5_K"
        if n == 80 and t in ("Q3_K", "Q4_K"):
            t = "Q5_K"
        if a.experts == 8:
            t = "Q8_0"
        return t
    if name.startswith("ffn_down"):
        if ftype in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, n):
            return "Q6_K"
        if ftype == "Q3_K_M":
            return "Q5_K" if layer < n // 16 else "Q4_K"
        if ftype == "Q3_K_L":
            return "Q5_K"
        if ftype == "Q4_K_S" and layer < n // 8:
            return "Q5_K"
    return base


def _with_fallback(t: str, row: int) -> str:
    if t in _K_QUANTS and row % 256:
        t = _FALLBACK[t]
    if t not in ("F32", "F16", "BF16") and row % 32:
        t = "F16"
    return t


#: llama.cpp architectures whose attention normalises queries and keys per head
QK_NORM_ARCHITECTURES = ("qwen3", "qwen3moe", "gemma2", "gemma3", "olmo2", "qwen35", "qwen35moe", "qwen3next", "gemma4")
#: 2-D tensors llama-quantize leaves in F32 (a linear-attention layer's convolution kernel)
F32_MATRICES = ("ssm_conv1d",)


def _layer_shapes(a: Architecture, i: int) -> list[tuple[str, tuple[int, ...]]]:
    """(short name, GGUF shape) of the tensors of layer ``i`` (GGUF shape: input first)."""
    h, q, kv = a.hidden, a.heads, a.layer_kv_heads(i)
    hd, hd_v = a.layer_head_dim(i), a.layer_head_dim_v(i)
    out: list[tuple[str, tuple[int, ...]]] = [("attn_norm", (h,))]
    if a.is_linear_layer(i):  # gated delta-net: llama.cpp's qwen35 / qwen3next tensors
        vd = a.linear_value_heads * a.linear_value_dim
        out += [("attn_qkv", (h, a.linear_conv_dim)), ("attn_gate", (h, vd)),
                ("ssm_beta", (h, a.linear_value_heads)), ("ssm_alpha", (h, a.linear_value_heads)),
                ("ssm_conv1d", (a.linear_conv_kernel, a.linear_conv_dim)), ("ssm_a", (a.linear_value_heads,)),
                ("ssm_dt", (a.linear_value_heads,)), ("ssm_norm", (a.linear_value_dim,)), ("ssm_out", (vd, h))]
    elif a.is_mla:
        qk = a.head_dim  # nope + rope
        if a.q_lora_rank:
            out += [("attn_q_a", (h, a.q_lora_rank)), ("attn_q_a_norm", (a.q_lora_rank,)),
                    ("attn_q_b", (a.q_lora_rank, q * qk))]
        else:
            out.append(("attn_q", (h, q * qk)))
        out += [("attn_kv_a_mqa", (h, a.kv_lora_rank + a.rope_head_dim)), ("attn_kv_a_norm", (a.kv_lora_rank,)),
                ("attn_kv_b", (a.kv_lora_rank, q * (qk - a.rope_head_dim + a.head_dim_v)))]
    elif a.fused_qkv:
        out.append(("attn_qkv", (h, q * a.head_dim + kv * (a.head_dim + a.head_dim_v))))
    else:
        out += [("attn_q", (h, q * hd * (2 if a.attn_output_gate else 1))), ("attn_k", (h, kv * hd))]
        if not a.layer_shares_kv(i):
            out.append(("attn_v", (h, kv * hd_v)))
        if a.arch in QK_NORM_ARCHITECTURES:
            out += [("attn_q_norm", (hd,)), ("attn_k_norm", (hd,))]
    if not a.is_linear_layer(i):
        out.append(("attn_output", (q * hd_v, h)))
    out.append(("ffn_norm", (h,)))
    if a.is_moe_layer(i):
        e, f = a.experts, a.expert_ffn
        out += [("ffn_gate_inp", (h, e)), ("ffn_gate_exps", (h, f, e)), ("ffn_up_exps", (h, f, e)),
                ("ffn_down_exps", (f, h, e))]
        if a.shared_experts:
            s = a.shared_experts * a.shared_ffn
            out += [("ffn_gate_shexp", (h, s)), ("ffn_up_shexp", (h, s)), ("ffn_down_shexp", (s, h))]
    elif a.fused_qkv:
        out += [("ffn_up", (h, 2 * a.ffn)), ("ffn_down", (a.ffn, h))]
    else:
        out += [("ffn_gate", (h, a.ffn)), ("ffn_up", (h, a.ffn)), ("ffn_down", (a.ffn, h))]
    return out


def recipe_tensors(a: Architecture, ftype: str) -> tuple[TensorInfo, ...]:
    """The tensors of ``a`` as a llama.cpp file of type ``ftype`` would hold them.

    Raises
    ------
    GraphError
        an unknown file type; a model whose tensor table would exhaust memory (estimated
        from its layer count before any is listed).
    """
    ftype = file_type(ftype)
    if a.layers * 16 > MAX_TENSORS:
        raise GraphError(f"model {a.name!r}: {a.layers} layers would list about {a.layers * 16:,} tensors (at most "
                         f"{MAX_TENSORS:,}): too large to plan")
    out = [TensorInfo("token_embd.weight", (a.hidden, a.vocab),
                      _with_fallback(_matrix_type(a, ftype, "token_embd", -1), a.hidden))]
    for i in range(a.layers):
        for short, shape in _layer_shapes(a, i):
            t = ("F32" if len(shape) == 1 or short in F32_MATRICES
                 else _with_fallback(_matrix_type(a, ftype, short, i), shape[0]))
            out.append(TensorInfo(f"blk.{i}.{short}.weight", shape, t))
    out.append(TensorInfo("output_norm.weight", (a.hidden,), "F32"))
    if not a.tied_embeddings:
        out.append(TensorInfo("output.weight", (a.hidden, a.vocab),
                              _with_fallback(_matrix_type(a, ftype, "output", -1), a.hidden)))
    return tuple(out)
