"""A transformer as llama.cpp loads it: hyper-parameters and every weight tensor.

:class:`Architecture` holds what llama.cpp reads from a GGUF file's metadata (or
:mod:`graphs.llm.hf_config` from a Hugging Face ``config.json``): layer count, width,
query and key/value heads with an explicit head size (Qwen3, Gemma, gpt-oss and
Mistral-Nemo do not use ``hidden / heads``), the feed-forward width, a mixture of
experts (routed experts, experts per token, shared experts, leading dense layers),
DeepSeek's multi-head latent attention (MLA: a compressed KV of ``kv_lora_rank +
rope_head_dim`` per token and layer), sliding-window attention (the layers that
attend to the last ``sliding_window`` tokens only; Gemma 4's full-attention layers with
a head size and KV-head count of their own) and the linear-attention layers of hybrid
models (Qwen3.5, Qwen3-Next: gated delta-net layers that keep a fixed recurrent state
instead of a KV cache, so only the full-attention layers' cache grows with the context).

:class:`ModelWeights` adds the tensor table (:class:`~graphs.llm.gguf_header.TensorInfo`:
GGUF name, shape, ggml type), exact per tensor, and groups its bytes the way llama.cpp
places them: ``token_embd`` (always in host memory), per layer the attention tensors,
the dense FFN tensors (router and shared experts included) and the routed expert
tensors (``ffn_*_exps``), and the output head.

>>> a = Architecture("t", "llama", layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, ffn=128,
...                  vocab=256, max_context=256)
>>> a.kv_bytes(0, cells=10, type_k="F16", type_v="F16")   # 10 tokens x 2 heads x (16 + 16) x 2 bytes
1280
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.config import kv_dtype_bytes, require_positive_ints
from hetsim.graphs.llm.gguf_header import TensorInfo, tensor_nbytes

__all__ = ["MAX_LAYERS", "Architecture", "LayerBytes", "ModelWeights", "check_layer_count"]

#: layers a model may have: each lists about 16 tensors (graphs.llm.quant_recipe.MAX_TENSORS,
#: 2 x 10^6), and a per-layer table beyond would exhaust memory
MAX_LAYERS = 125_000

_BLOCK = re.compile(r"^blk\.(\d+)\.(.+)$")


def check_layer_count(where: str, key: str, layers: int) -> None:
    """Refuse a layer count (``key`` of the model described at ``where``) above
    :data:`MAX_LAYERS`, before any per-layer list is made."""
    if layers > MAX_LAYERS:
        raise GraphError(f"{where}: {key} is {layers:,} layers (at most {MAX_LAYERS:,}): too large to plan")


@dataclass(frozen=True)
class Architecture:
    """Hyper-parameters of a decoder-only transformer: the one description of a model that
    the llama.cpp planner, the simulated graph (:func:`graphs.llm.llm_graph`) and the
    placement policies read.

    ``arch`` is llama.cpp's architecture name (``llama``, ``qwen3``, ``gemma3``,
    ``phi3``, ``qwen3moe``, ``deepseek2``, ``glm4moe``, ``gpt-oss``...). ``head_dim`` /
    ``head_dim_v`` are the key and value head sizes (``head_dim`` 0: ``hidden / heads``). ``expert_ffn`` is one routed expert's width,
    ``shared_experts`` x ``shared_ffn`` the always-active shared experts, and the
    first ``dense_layers`` layers have a dense FFN of width ``ffn``. ``swa_layers``
    attend to the last ``sliding_window`` tokens; where ``global_head_dim`` /
    ``global_kv_heads`` are given, the other (full-attention) layers have that head size and
    KV-head count, and ``global_k_eq_v`` layers project one tensor that is both key and
    value (Gemma 4). ``linear_layers`` are gated delta-net (linear-attention) layers: no KV
    cache, a recurrent state of ``linear_value_heads x linear_key_dim x linear_value_dim``
    F32 values and a convolution over the last ``linear_conv_kernel`` projections of the
    ``2 x linear_key_heads x linear_key_dim + linear_value_heads x linear_value_dim`` wide
    query/key/value input; ``attn_output_gate``: the full-attention layers' query
    projection also yields a gate of the output (Qwen3.5, Qwen3-Next: twice as wide).
    """

    name: str
    arch: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    max_context: int
    head_dim_v: int = 0
    experts: int = 0
    top_k: int = 0
    expert_ffn: int = 0
    shared_experts: int = 0
    shared_ffn: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    rope_head_dim: int = 0
    sliding_window: int = 0
    swa_layers: tuple[int, ...] = ()
    tied_embeddings: bool = False
    fused_qkv: bool = False
    source: str = ""
    global_head_dim: int = 0
    global_kv_heads: int = 0
    global_k_eq_v: bool = False
    linear_layers: tuple[int, ...] = ()
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_kernel: int = 0
    attn_output_gate: bool = False

    def __post_init__(self) -> None:
        where = f"model {self.name!r} ({self.arch})"
        require_positive_ints(where, self, ("layers", "hidden", "heads", "kv_heads", "vocab", "max_context"))
        ints = ("head_dim", "ffn", "head_dim_v", "experts", "top_k", "expert_ffn", "shared_experts", "shared_ffn",
                "dense_layers", "kv_lora_rank", "q_lora_rank", "rope_head_dim", "sliding_window", "global_head_dim",
                "global_kv_heads", "linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                "linear_conv_kernel")
        for k in ints:
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise GraphError(f"{where}: {k!r} must be an int >= 0, got {v!r}")
        if not self.head_dim:
            if self.hidden % self.heads:
                raise GraphError(f"{where}: hidden {self.hidden} is not a multiple of heads {self.heads}")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        for k in ("swa_layers", "linear_layers"):
            if not isinstance(getattr(self, k), tuple):
                object.__setattr__(self, k, tuple(getattr(self, k)))
            bad = [i for i in getattr(self, k) if isinstance(i, bool) or not isinstance(i, int)
                   or not 0 <= i < self.layers]
            if bad:
                raise GraphError(f"{where}: {k!r} must list layers 0..{self.layers - 1}, got {bad[0]!r}")
        for k in ("tied_embeddings", "fused_qkv", "global_k_eq_v", "attn_output_gate"):
            if not isinstance(getattr(self, k), bool):
                raise GraphError(f"{where}: {k!r} must be true or false, got {getattr(self, k)!r}")
        if self.linear_layers:
            require_positive_ints(f"{where}, linear-attention layers", self,
                                  ("linear_key_heads", "linear_value_heads", "linear_key_dim", "linear_value_dim",
                                   "linear_conv_kernel"))
            if len(self.linear_layers) == self.layers:
                raise GraphError(f"{where}: every layer is a linear-attention layer; a hybrid model has "
                                 "full-attention layers too")
        object.__setattr__(self, "_linear", frozenset(self.linear_layers))  # derived, not a field
        object.__setattr__(self, "_swa", frozenset(self.swa_layers) if self.sliding_window else frozenset())
        if not self.experts and self.top_k:
            raise GraphError(f"{where}: top_k={self.top_k} without experts")
        if self.heads % self.kv_heads:
            raise GraphError(f"{where}: heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        if self.experts and not 1 <= self.top_k <= self.experts:
            raise GraphError(f"{where}: needs 1 <= experts per token <= experts, got {self.top_k} of {self.experts}")
        if not self.head_dim_v:
            object.__setattr__(self, "head_dim_v", self.head_dim)
        if self.experts and not self.expert_ffn:
            object.__setattr__(self, "expert_ffn", self.ffn)

    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.experts > 0

    @property
    def q_dim(self) -> int:
        """Width of the query projection: ``heads * head_dim``."""
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        """Width of the K projection: ``kv_heads * head_dim``."""
        return self.kv_heads * self.head_dim

    @property
    def routed_ffn(self) -> int:
        """Width of the FFN a token's routed expert (or the dense FFN) has."""
        return self.expert_ffn if self.is_moe else self.ffn

    # --------------------------------------------------------------- counting
    def attention_parameters(self, i: int = -1) -> int:
        """Weights of one (non-MLA) layer's attention: Q, K, V, O projections and its norm (layer
        ``i``'s, where layers differ: a linear-attention layer's projections, convolution and
        per-head gates; a global layer's own head sizes)."""
        h = self.hidden
        if i >= 0 and self.is_linear_layer(i):
            vd = self.linear_value_heads * self.linear_value_dim
            return (h * self.linear_conv_dim + h * vd + 2 * h * self.linear_value_heads
                    + self.linear_conv_kernel * self.linear_conv_dim + vd * h + h)
        hd, hd_v, kv = (self.layer_head_dim(i), self.layer_head_dim_v(i), self.layer_kv_heads(i)) if i >= 0 else (
            self.head_dim, self.head_dim_v, self.kv_heads)
        q = self.heads * hd * (2 if self.attn_output_gate else 1)
        v = 0 if i >= 0 and self.layer_shares_kv(i) else h * kv * hd_v
        return h * q + h * kv * hd + v + self.heads * hd_v * h + h

    def expert_parameters(self) -> int:
        """Weights of one SwiGLU FFN of the routed width (one expert): gate, up, down."""
        return 3 * self.hidden * self.routed_ffn

    def ffn_parameters(self) -> int:
        """Weights of one layer's FFN block: norm, router, every expert (MoE) and the shared ones."""
        n = max(self.experts, 1)
        shared = 3 * self.hidden * self.shared_experts * self.shared_ffn
        return self.hidden + self.hidden * self.experts + n * self.expert_parameters() + shared

    def parameters(self) -> int:
        """Weights in closed form: embeddings, layers, final norm and output projection
        (the simulated graph's count; :meth:`ModelWeights.parameters` counts a file's tensors).

        >>> round(Architecture.preset("llama-3-8b").parameters() / 1e9, 2)
        8.03
        """
        heads = 1 if self.tied_embeddings else 2
        if self.has_layer_kinds:
            layers = sum(self.attention_parameters(i) for i in range(self.layers)) + self.layers * self.ffn_parameters()
        else:
            layers = self.layers * (self.attention_parameters() + self.ffn_parameters())
        return heads * self.vocab * self.hidden + layers + self.hidden

    def kv_bytes_per_token(self, kv_dtype: str = "f16") -> float:
        """KV-cache bytes one token takes over all layers (no sliding window; a linear-attention
        layer holds none)."""
        if self.is_mla:
            return self.layers * (self.kv_lora_rank + self.rope_head_dim) * kv_dtype_bytes(kv_dtype)
        if not self.has_layer_kinds:
            return self.layers * self.kv_heads * (self.head_dim + self.head_dim_v) * kv_dtype_bytes(kv_dtype)
        per = sum(self.layer_kv_heads(i) * (self.layer_head_dim(i) + self.layer_head_dim_v(i))
                  for i in range(self.layers) if not self.is_linear_layer(i))
        return per * kv_dtype_bytes(kv_dtype)

    # ------------------------------------------------------- per-layer attention
    def is_linear_layer(self, i: int) -> bool:
        """Whether layer ``i`` is a linear-attention (gated delta-net) layer."""
        return i in self._linear

    def is_global_layer(self, i: int) -> bool:
        """Whether layer ``i`` is a full-attention layer of a sliding-window model."""
        return bool(self._swa) and i not in self._swa and not self.is_linear_layer(i)

    def layer_head_dim(self, i: int) -> int:
        """Key head size of layer ``i`` (Gemma 4's global layers: ``global_head_dim``)."""
        return self.global_head_dim if self.global_head_dim and self.is_global_layer(i) else self.head_dim

    def layer_head_dim_v(self, i: int) -> int:
        """Value head size of layer ``i``."""
        return self.global_head_dim if self.global_head_dim and self.is_global_layer(i) else self.head_dim_v

    def layer_kv_heads(self, i: int) -> int:
        """KV heads of layer ``i`` (Gemma 4's global layers: ``global_kv_heads``)."""
        return self.global_kv_heads if self.global_kv_heads and self.is_global_layer(i) else self.kv_heads

    def layer_shares_kv(self, i: int) -> bool:
        """Whether layer ``i`` projects one tensor as both key and value (no V projection)."""
        return self.global_k_eq_v and self.is_global_layer(i)

    @property
    def linear_conv_dim(self) -> int:
        """Width of a linear-attention layer's query/key/value input (what its convolution runs over)."""
        return 2 * self.linear_key_heads * self.linear_key_dim + self.linear_value_heads * self.linear_value_dim

    def recurrent_state_bytes(self) -> int:
        """Bytes of one sequence's state in a linear-attention layer (F32, as llama.cpp keeps it):
        the delta-rule matrix per value head and the convolution's last ``kernel - 1`` inputs."""
        return 4 * (self.linear_value_heads * self.linear_key_dim * self.linear_value_dim
                    + (self.linear_conv_kernel - 1) * self.linear_conv_dim)

    def attended_cells(self, i: int, kv_len: int) -> int:
        """Cached tokens a query of layer ``i`` attends to at ``kv_len`` tokens: a sliding-window
        layer its window, a linear-attention layer none (it reads its fixed state)."""
        if self.is_linear_layer(i):
            return 0
        return min(kv_len, self.sliding_window) if i in self._swa else kv_len

    @staticmethod
    def presets() -> list[str]:
        """Names of the model presets (:mod:`graphs.llm.presets`)."""
        # import cycle: hetsim.graphs.llm.presets -> hetsim.graphs.llm.architecture
        from hetsim.graphs.llm.presets import preset_names

        return preset_names()

    @classmethod
    def preset(cls, name: str) -> Architecture:
        """The preset ``name`` (spelling variants such as ``llama3-70b`` for ``llama-3-70b``
        accepted); :class:`GraphError` "unknown model" listing the known names."""
        # import cycle: hetsim.graphs.llm.presets -> hetsim.graphs.llm.architecture
        from hetsim.graphs.llm.presets import preset_architecture

        return preset_architecture(name)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Architecture:
        """The architecture :meth:`to_dict` wrote."""
        return cls(**{**data, "swa_layers": tuple(data.get("swa_layers", ())),
                      "linear_layers": tuple(data.get("linear_layers", ()))})

    @property
    def is_mla(self) -> bool:
        """Whether attention is DeepSeek's multi-head latent attention."""
        return self.kv_lora_rank > 0

    def is_moe_layer(self, i: int) -> bool:
        """Whether layer ``i`` has routed experts (after the leading dense layers)."""
        return self.is_moe and i >= self.dense_layers

    def kv_cells(self, i: int, context: int, ubatch: int) -> int:
        """KV-cache cells layer ``i`` allocates for ``context`` tokens: a sliding-window
        layer keeps its window plus one micro-batch (llama.cpp's SWA cache)."""
        if self.is_linear_layer(i):
            return 1  # one sequence's recurrent state
        if i in self._swa:
            return min(context, self.sliding_window + ubatch)
        return context

    def kv_bytes(self, i: int, cells: int, type_k: str = "F16", type_v: str = "F16") -> int:
        """Bytes of ``cells`` KV-cache cells of layer ``i`` (MLA: the compressed latent
        and the rotary key, no separate V; a linear-attention layer: its recurrent state,
        whatever ``cells``)."""
        if self.is_mla:
            return tensor_nbytes(type_k, cells * (self.kv_lora_rank + self.rope_head_dim))
        if self.is_linear_layer(i):
            return self.recurrent_state_bytes()
        kv = self.layer_kv_heads(i)
        return (tensor_nbytes(type_k, cells * kv * self.layer_head_dim(i))
                + tensor_nbytes(type_v, cells * kv * self.layer_head_dim_v(i)))

    def attention_flops_per_token(self, i: int, kv_len: int) -> int:
        """FLOPs of one query token's scores and weighted values over ``kv_len`` keys in layer ``i``
        (a linear-attention layer: its state's decay, delta-rule update and read-out, three
        products of the ``key x value`` matrix of each value head, whatever ``kv_len``)."""
        if self.is_linear_layer(i):
            return 6 * self.linear_value_heads * self.linear_key_dim * self.linear_value_dim
        cells = self.attended_cells(i, kv_len)
        return 2 * self.heads * cells * (self.layer_head_dim(i) + self.layer_head_dim_v(i))

    def to_dict(self) -> dict[str, Any]:
        """The hyper-parameters as a dict."""
        return dataclasses.asdict(self)

    @property
    def has_layer_kinds(self) -> bool:
        """Whether layers differ in their attention (linear-attention layers, or global layers with
        head sizes of their own): what only the llama.cpp planner expresses."""
        return bool(self.linear_layers) or bool(self.global_head_dim or self.global_kv_heads or self.global_k_eq_v)


@dataclass(frozen=True)
class LayerBytes:
    """Weight bytes of one layer by what llama.cpp places separately: ``attn`` (attention
    and its norms), ``ffn`` (dense FFN, norm, router, shared experts), ``exps`` (the routed
    experts, every one)."""

    attn: int = 0
    ffn: int = 0
    exps: int = 0

    @property
    def total(self) -> int:
        """All bytes of the layer."""
        return self.attn + self.ffn + self.exps


@dataclass(frozen=True)
class ModelWeights:
    """An :class:`Architecture` and its tensors (from a GGUF header: exact; from a config:
    :func:`graphs.llm.quant_recipe.recipe_tensors`). ``weights`` names the file type
    (``Q4_K_M``...) and ``origin`` where the description came from."""

    arch: Architecture
    tensors: tuple[TensorInfo, ...]
    weights: str
    origin: str

    def __post_init__(self) -> None:
        if self.arch.layers > len(self.tensors):  # before a list per layer is made
            raise GraphError(f"{self.origin}: {self.arch.layers} layers, but {len(self.tensors)} tensors: every "
                             "layer holds at least one")
        layers = [dict(attn=0, ffn=0, exps=0) for _ in range(self.arch.layers)]
        elements = [dict(attn=0, ffn=0, exps=0) for _ in range(self.arch.layers)]
        embd = output = 0
        for t in self.tensors:
            m = _BLOCK.match(t.name)
            if m is None:
                if t.name.startswith("token_embd"):
                    embd += t.nbytes
                elif t.name.startswith("output"):
                    output += t.nbytes
                continue
            i, rest = int(m.group(1)), m.group(2)
            if i >= self.arch.layers:
                raise GraphError(f"{self.origin}: tensor {t.name!r} is in layer {i} of a "
                                 f"{self.arch.layers}-layer model")
            kind = "exps" if "_exps" in rest else ("ffn" if rest.startswith("ffn") else "attn")
            layers[i][kind] += t.nbytes
            elements[i][kind] += t.elements
        if self.output_is_embedding:
            output += embd  # the head is token_embd, duplicated onto the output's device when that is the GPU
        groups = {"layers": tuple(LayerBytes(**d) for d in layers), "token_embd": embd, "output": output,
                  "elements": tuple(LayerBytes(**d) for d in elements)}
        object.__setattr__(self, "_groups", groups)  # derived from the tensors, not a field

    @property
    def output_is_embedding(self) -> bool:
        """Whether the output head is the token embedding (tied, no ``output.weight``)."""
        return self.arch.tied_embeddings and not any(t.name == "output.weight" for t in self.tensors)

    @property
    def layer_bytes(self) -> tuple[LayerBytes, ...]:
        """Weight bytes of each layer by group (attention, FFN, routed experts)."""
        return self._groups["layers"]

    @property
    def layer_elements(self) -> tuple[LayerBytes, ...]:
        """Weights (elements, not bytes) of each layer, grouped as :attr:`layer_bytes`."""
        return self._groups["elements"]

    @property
    def float_weights(self) -> bool:
        """Whether the layers' matrices are stored unquantised (F16/BF16/F32)."""
        mats = [t for t in self.tensors if t.name.startswith("blk.") and len(t.shape) >= 2]
        return bool(mats) and all(t.type_name in ("F16", "BF16", "F32") for t in mats)

    @property
    def token_embd_bytes(self) -> int:
        """Bytes of the token embedding (always in host memory)."""
        return self._groups["token_embd"]

    @property
    def output_bytes(self) -> int:
        """The output head and final norm (the embeddings again when tied)."""
        return self._groups["output"]

    @property
    def file_bytes(self) -> int:
        """Bytes of every tensor in the file (a tied head counted once)."""
        return sum(t.nbytes for t in self.tensors)

    def bits_per_weight(self) -> float:
        """File bits per weight, as llama-bench's ``size`` over ``params``."""
        return 8 * self.file_bytes / sum(t.elements for t in self.tensors)

    def active_layer_bytes(self, i: int, tokens: int = 1) -> float:
        """Bytes of layer ``i`` that ``tokens`` tokens read: every routed expert that gets a
        token under uniform routing, expected (``1 - (1 - k/E)^tokens`` of them)."""
        lb = self.layer_bytes[i]
        return lb.attn + lb.ffn + lb.exps * self.expert_read_fraction(tokens)

    def expert_read_fraction(self, tokens: int) -> float:
        """Expected fraction of routed experts that ``tokens`` tokens touch (uniform routing)."""
        a = self.arch
        if not a.is_moe:
            return 1.0
        return 1.0 - (1.0 - a.top_k / a.experts) ** max(tokens, 1)

    def parameters(self) -> int:
        """Weights (elements) of every tensor."""
        return sum(t.elements for t in self.tensors)
