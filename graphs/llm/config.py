"""Decoder-only LLM architectures, weight storage formats and KV-cache dtypes.

An :class:`LLMConfig` is the architecture of a decoder-only transformer (Llama /
Mistral family: RMSNorm, rotary attention with grouped KV heads, SwiGLU feed-forward
network, optionally a mixture of experts in place of the FFN). Named presets follow
published configurations; :data:`WEIGHT_FORMATS` are the storage formats of
llama.cpp's GGUF files, in bits per weight *including* the per-block scales.

>>> cfg = LLMConfig.preset("llama3-8b")
>>> round(cfg.parameters() / 1e9, 2)
8.03
>>> weight_format("q4").name
'q4_K'
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from hetsim.graphs.graph import GraphError

__all__ = [
    "KV_DTYPES",
    "LLMConfig",
    "WEIGHT_FORMATS",
    "WeightFormat",
    "kv_dtype_bytes",
    "require_positive_ints",
    "weight_format",
]


@dataclass(frozen=True)
class WeightFormat:
    """How weights are stored: ``bits_per_weight`` including block scales.

    ``compute`` says what the kernels do with them: ``"float"`` (read and multiply at
    the storage precision) or ``"dequant"`` (blocks dequantised on the fly inside the
    matrix kernels; llama.cpp's ``mul_mat`` / MMQ): the FLOPs of a matrix product
    are the same ``2 m n k`` either way, the bytes read are the storage bytes.
    """

    name: str
    bits_per_weight: float
    compute: str
    source: str

    @property
    def bytes_per_weight(self) -> float:
        return self.bits_per_weight / 8.0


# Bits per weight from the block structs of ggml (ggml/src/ggml-common.h):
# block_q8_0 = fp16 scale + 32 int8 = 34 bytes / 32 weights; block_q4_0 = fp16 scale +
# 16 bytes / 32 weights = 18 / 32; block_q4_K = 2 fp16 + 12 bytes of 6-bit scales +
# 128 bytes / 256 weights = 144 / 256; block_q5_K = 176 / 256; block_q6_K = 210 / 256;
# block_q3_K = 110 / 256; block_q2_K = 84 / 256.
_GGML = "ggml/src/ggml-common.h block structs (llama.cpp)"
WEIGHT_FORMATS: dict[str, WeightFormat] = {
    f.name: f
    for f in (
        WeightFormat("f32", 32.0, "float", "IEEE binary32"),
        WeightFormat("f16", 16.0, "float", "IEEE binary16"),
        WeightFormat("bf16", 16.0, "float", "bfloat16"),
        WeightFormat("q8_0", 34 * 8 / 32, "dequant", _GGML),
        WeightFormat("q6_K", 210 * 8 / 256, "dequant", _GGML),
        WeightFormat("q5_K", 176 * 8 / 256, "dequant", _GGML),
        WeightFormat("q4_K", 144 * 8 / 256, "dequant", _GGML),
        WeightFormat("q4_0", 18 * 8 / 32, "dequant", _GGML),
        WeightFormat("q3_K", 110 * 8 / 256, "dequant", _GGML),
        WeightFormat("q2_K", 84 * 8 / 256, "dequant", _GGML),
    )
}
_ALIASES = {"fp32": "f32", "fp16": "f16", "float16": "f16", "bfloat16": "bf16", "q8": "q8_0",
            "q6": "q6_K", "q5": "q5_K", "q4": "q4_K", "q3": "q3_K", "q2": "q2_K"}

#: KV-cache element types (llama.cpp ``--cache-type-k/-v``): bytes per element
KV_DTYPES: dict[str, float] = {"f32": 4.0, "f16": 2.0, "bf16": 2.0, "q8_0": 34 / 32, "q4_0": 18 / 32}


def weight_format(name: str | WeightFormat) -> WeightFormat:
    """The storage format called ``name`` (or an alias: ``fp16``, ``q8``, ``q4``...; a
    :class:`WeightFormat` is returned as it is).

    Raises
    ------
    GraphError
        naming the unknown format and listing the known ones.
    """
    if isinstance(name, WeightFormat):
        return name
    low = str(name).lower()
    key = _ALIASES.get(low, low).lower()
    for k, f in WEIGHT_FORMATS.items():
        if k.lower() == key:
            return f
    raise GraphError(
        f"unknown weight quantisation {name!r}; known: {', '.join(WEIGHT_FORMATS)} "
        f"(aliases: {', '.join(sorted(_ALIASES))})"
    )


def require_positive_ints(where: str, obj: object, names: tuple[str, ...]) -> None:
    """:class:`GraphError` naming the first of ``obj``'s attributes ``names`` that is not an int >= 1.

    >>> require_positive_ints("x", LLMConfig.preset("tiny"), ("layers",))
    """
    for k in names:
        v = getattr(obj, k)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise GraphError(f"{where}: {k!r} must be an int >= 1, got {v!r}")


def kv_dtype_bytes(name: str) -> float:
    """Bytes per KV-cache element of ``name``; :class:`GraphError` listing the known ones."""
    try:
        return KV_DTYPES[name]
    except KeyError:
        raise GraphError(f"unknown KV-cache dtype {name!r}; known: {', '.join(KV_DTYPES)}") from None


@dataclass(frozen=True)
class LLMConfig:
    """A decoder-only transformer architecture.

    Parameters
    ----------
    name
        Model name (preset name or the user's).
    hidden
        Model width ``d_model``.
    layers
        Decoder layers.
    heads, kv_heads
        Query heads and key/value heads (grouped-query attention: ``kv_heads`` divides
        ``heads``).
    ffn
        Hidden size of the SwiGLU feed-forward network (of one expert for MoE).
    vocab
        Vocabulary size (token embedding and output projection, untied).
    max_context
        Longest context the model supports (``max_position_embeddings``).
    experts, top_k
        Mixture of experts: experts per layer and experts each token is routed to;
        ``experts=0`` is a dense model.
    source
        Where the figures come from.
    head_size
        Size of one attention head where it is not ``hidden / heads`` (Qwen3, Mistral-Nemo);
        0: ``hidden / heads``.
    """

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_context: int
    experts: int = 0
    top_k: int = 0
    source: str = ""
    head_size: int = 0

    def __post_init__(self) -> None:
        where = f"LLM config {self.name!r}"
        require_positive_ints(where, self, ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab", "max_context"))
        if isinstance(self.head_size, bool) or not isinstance(self.head_size, int) or self.head_size < 0:
            raise GraphError(f"{where}: 'head_size' must be an int >= 0 (0: hidden / heads), got {self.head_size!r}")
        if not self.head_size and self.hidden % self.heads:
            raise GraphError(f"{where}: hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            raise GraphError(f"{where}: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.experts < 0 or (self.experts and not 1 <= self.top_k <= self.experts):
            raise GraphError(f"{where}: needs 1 <= top_k <= experts, got experts={self.experts}, top_k={self.top_k}")
        if not self.experts and self.top_k:
            raise GraphError(f"{where}: top_k={self.top_k} without experts")

    @property
    def head_dim(self) -> int:
        """Size of one attention head."""
        return self.head_size or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        """Width of the query projection (and the attention output's input): ``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    # --------------------------------------------------------------- counting
    def attention_parameters(self) -> int:
        """Weights of one layer's attention: Q, K, V, O projections and its norm."""
        h = self.hidden
        return 2 * h * self.q_dim + 2 * h * self.kv_dim + h

    def expert_parameters(self) -> int:
        """Weights of one SwiGLU FFN (one expert): gate, up, down."""
        return 3 * self.hidden * self.ffn

    def ffn_parameters(self) -> int:
        """Weights of one layer's FFN block: norm, router and every expert (MoE)."""
        n = max(self.experts, 1)
        router = self.hidden * self.experts
        return self.hidden + router + n * self.expert_parameters()

    def parameters(self) -> int:
        """Total weights: embeddings, layers, final norm and output projection."""
        per_layer = self.attention_parameters() + self.ffn_parameters()
        return 2 * self.vocab * self.hidden + self.layers * per_layer + self.hidden

    def kv_bytes_per_token(self, kv_dtype: str = "f16") -> float:
        """KV-cache bytes one token takes over all layers."""
        return 2 * self.layers * self.kv_dim * kv_dtype_bytes(kv_dtype)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    # ---------------------------------------------------------------- presets
    @staticmethod
    def presets() -> list[str]:
        """Names of the built-in architectures."""
        return sorted(PRESETS)

    @classmethod
    def preset(cls, name: str) -> LLMConfig:
        """A built-in architecture; :class:`GraphError` lists the names on a typo."""
        try:
            return PRESETS[name]
        except KeyError:
            raise GraphError(f"unknown LLM {name!r}; presets: {', '.join(sorted(PRESETS))}") from None


PRESETS: dict[str, LLMConfig] = {
    c.name: c
    for c in (
        # meta-llama/Meta-Llama-3-8B config.json: hidden_size 4096, num_hidden_layers 32,
        # num_attention_heads 32, num_key_value_heads 8, intermediate_size 14336,
        # vocab_size 128256, max_position_embeddings 8192 (rope_theta 500000, untied
        # embeddings); 8.03 B parameters. Checked against copies of that
        # config.json (the Meta-Llama-3-8B-Instruct config quoted in public code; the GGUF
        # metadata of meta-llama/Meta-Llama-3-8B: context 8192, feedforward 14336) and the
        # parameter count 8,030,261,248 of github.com/thamada/modelQuery (README).
        LLMConfig("llama3-8b", 4096, 32, 32, 8, 14336, 128256, 8192,
                  source="meta-llama/Meta-Llama-3-8B config.json (8.03 B parameters)"),
        # meta-llama/Meta-Llama-3-70B config.json: hidden 8192, 80 layers, 64 heads,
        # 8 KV heads, intermediate 28672, vocab 128256, context 8192 (rope_theta 500000).
        # Checked against a copy of the Meta-Llama-3-70B-Instruct config.json
        # (max_position_embeddings 8192, rope_scaling null) and oumi's Llama 3 tables.
        # github.com/thamada/modelQuery lists 70,562,938,880 parameters for
        # Meta-Llama-3-70B-Instruct (70.6 B); the count below gives 70,553,706,496.
        LLMConfig("llama3-70b", 8192, 80, 64, 8, 28672, 128256, 8192,
                  source="meta-llama/Meta-Llama-3-70B config.json (70.6 B parameters)"),
        # mistralai/Mixtral-8x7B-v0.1 config.json: hidden 4096, 32 layers, 32 heads, 8 KV
        # heads, intermediate 14336, 8 local experts, 2 per token, vocab 32000, context
        # 32768 (rope_theta 1e6); 46.7 B parameters, 12.9 B active per token (Mistral AI,
        # Jan 2024). Checked against a printed MixtralConfig of
        # Mixtral-8x7B-Instruct-v0.1 and a Mixtral-8x7B model config in public code
        # (num_local_experts 8, num_experts_per_tok 2, vocab_size 32000, rope_theta 1e6),
        # and the model card's 46.7 B total / 12.9 B active (Azure/azureml-assets).
        LLMConfig("mixtral-8x7b", 4096, 32, 32, 8, 14336, 32000, 32768, experts=8, top_k=2,
                  source="mistralai/Mixtral-8x7B-v0.1 config.json (46.7 B parameters, 12.9 B active)"),
        # Qwen/Qwen2.5-14B config.json: hidden_size 5120, num_hidden_layers 48,
        # num_attention_heads 40, num_key_value_heads 8, intermediate_size 13824,
        # vocab_size 152064, max_position_embeddings 131072, rope_theta 1e6,
        # tie_word_embeddings false; 14.7 B parameters (model card; the QKV biases, 0.3 M per
        # layer, are left out here). Checked against the copy of that config.json
        # in github.com/citsjtu2020/LLM-Prof sglang/Model_Config.md and the Qwen2.5-14B-Instruct
        # model card (48 layers, 40 Q / 8 KV heads, 14.7 B, context 131,072).
        # The Coder model has the same dimensions (Qwen2.5-Coder report: 48 layers, hidden
        # 5120, 40/8 heads) but a max_position_embeddings of its own; figure 7 runs at
        # context 4096, within both.
        LLMConfig("qwen2.5-14b", 5120, 48, 40, 8, 13824, 152064, 131072,
                  source="Qwen/Qwen2.5-14B config.json (14.7 B parameters)"),
        # facebook/opt-30b config.json: hidden_size 7168, num_hidden_layers 48,
        # num_attention_heads 56 (no GQA), ffn_dim 28672, vocab_size 50272,
        # max_position_embeddings 2048. Checked against FlexGen's own OPT-30B
        # config (FMInference/FlexLLMGen opt_config.py: max_seq_len 2048, 48 layers, 56 heads,
        # hidden 7168, ffn_embed_dim 7168 * 4 = 28672) and OPT's vocabulary 50272 (the
        # Embedding(50272, ...) of every OPT size); the facebook/opt-30b config.json itself
        # was not found in the stored corpus. OPT's FFN is two matrices (fc1, fc2: 2 x 7168 x
        # 28672 weights); as a SwiGLU of three, ffn 19115 gives the same weights and FLOPs
        # (3 x 19115 = 57345 ~ 2 x 28672.5). OPT ties its embeddings; counted twice here
        # (+0.36 B of 30 B). Used by experiments/fig7_llm_offload (FlexGen).
        LLMConfig("opt-30b", 7168, 48, 56, 56, 19115, 50272, 2048,
                  source="facebook/opt-30b config.json (FFN 2 x 7168 x 28672 as a SwiGLU of width 19115)"),
        # tiny architectures for tests and examples (not published models)
        LLMConfig("tiny", 64, 2, 4, 2, 128, 256, 256, source="hetsim test architecture"),
        LLMConfig("tiny-moe", 64, 2, 4, 2, 96, 256, 256, experts=4, top_k=2,
                  source="hetsim test architecture"),
    )
}
