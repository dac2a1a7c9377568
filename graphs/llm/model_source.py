"""A model as users have it: a GGUF file, a ``config.json`` or model folder, or a preset.

:func:`load_model` returns :class:`~graphs.llm.architecture.ModelWeights`:

* ``*.gguf``: the header's metadata gives the :class:`Architecture` (keys
  ``{arch}.block_count``, ``.embedding_length``, ``.attention.head_count[_kv]``,
  ``.attention.key_length`` / ``value_length``, ``.feed_forward_length``,
  ``.expert_count`` / ``expert_used_count`` / ``expert_feed_forward_length`` /
  ``expert_shared_count``, ``.leading_dense_block_count``, ``.attention.kv_lora_rank`` /
  ``q_lora_rank``, ``.rope.dimension_count``, ``.attention.sliding_window``,
  ``.context_length``) and its tensor table the weights, exact per tensor;
* a ``config.json`` or a folder holding one: :func:`graphs.llm.hf_config.architecture_from_hf`
  and the tensors of :func:`graphs.llm.quant_recipe.recipe_tensors` for ``weights``;
* a preset name: the ``config.json`` fields of a published model kept in
  ``graphs/llm/configs/NAME.json`` (each with its ``_source``).
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture, ModelWeights, check_layer_count
from hetsim.graphs.llm.gguf_header import GGUFHeader, read_gguf_header
from hetsim.graphs.llm.hf_config import architecture_from_hf, read_hf_config
from hetsim.graphs.llm.presets import canonical_preset, preset_architecture, preset_names
from hetsim.graphs.llm.quant_recipe import file_type, recipe_tensors

__all__ = ["GGUF_ARCHITECTURES", "GGUF_TEXT_TOWERS", "architecture_from_gguf", "default_file_type", "load_model", "model_presets"]

#: llama.cpp architectures the planner expresses from a GGUF header
GGUF_ARCHITECTURES = ("llama", "mistral", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "gemma2", "gemma3", "phi3",
                      "deepseek2", "gpt-oss", "mixtral", "glm4moe", "qwen2vl", "qwen3vl", "qwen3vlmoe", "mistral3")
#: vision-language GGUFs (the language model's file; the vision tower is a separate mmproj file)
#: -> the architecture of their text tower
GGUF_TEXT_TOWERS = {"qwen2vl": "qwen2", "qwen3vl": "qwen3", "qwen3vlmoe": "qwen3moe", "mistral3": "llama"}


def model_presets() -> list[str]:
    """Names of the model presets (``graphs/llm/configs/*.json``)."""
    return preset_names()


def _scalar(v: Any) -> Any:
    """A per-layer array (GGUF allows one for head counts and FFN widths) as its maximum."""
    return max(v) if isinstance(v, list) and v else v


def architecture_from_gguf(header: GGUFHeader) -> Architecture:
    """The :class:`Architecture` in a GGUF header's metadata.

    Raises
    ------
    GraphError
        an architecture the planner cannot express (named, with what is missing), or a
        required key absent (named).
    """
    arch, md, path = header.architecture, header.metadata, header.path
    if f"{arch}.ssm.state_size" in md or f"{arch}.ssm.d_state" in md:
        hybrid = " from its config.json" if arch in ("qwen35", "qwen35moe", "qwen3next") else ""
        raise GraphError(f"{path}: architecture {arch!r} has state-space layers; the planner expresses "
                         f"attention-only decoders from a GGUF file{', and this hybrid' + hybrid if hybrid else ''}")
    if arch not in GGUF_ARCHITECTURES:
        raise GraphError(f"{path}: architecture {arch!r} is not expressible; known: {', '.join(GGUF_ARCHITECTURES)}")

    def get(key: str, default: Any = None, *, least: int = 0) -> int:
        """The integer ``{arch}.{key}`` (absent: ``default``; a per-layer array: its
        maximum), at least ``least``: anything else is an error naming the key."""
        v = md.get(f"{arch}.{key}", default)
        v = _scalar(v) if isinstance(v, list) and all(isinstance(x, numbers.Integral) for x in v) else v
        if v is None:
            raise GraphError(f"{path}: GGUF metadata has no {arch}.{key}")
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < least:
            raise GraphError(f"{path}: GGUF metadata {arch}.{key} must be an integer >= {least}, "
                             f"got {type(v).__name__} {v!r:.40}")
        return int(v)

    h, heads, n = get("embedding_length", least=1), get("attention.head_count", least=1), get("block_count", least=1)
    check_layer_count(str(path), f"GGUF metadata {arch}.block_count", n)
    embd = next((t for t in header.tensors if t.name == "token_embd.weight"), None)
    tokens = md.get("tokenizer.ggml.tokens")
    vocab = ((get("vocab_size") if f"{arch}.vocab_size" in md else None) or (embd.shape[1] if embd else None)
             or (len(tokens) if isinstance(tokens, list) else None))
    if not vocab:
        raise GraphError(f"{path}: GGUF file has neither {arch}.vocab_size nor token_embd.weight")
    kw: dict[str, Any] = dict(
        name=str(md.get("general.name") or Path(path).stem), arch=GGUF_TEXT_TOWERS.get(arch, arch), layers=n, hidden=h, heads=heads,
        kv_heads=get("attention.head_count_kv", heads),
        head_dim=get("attention.key_length", h // heads),
        head_dim_v=get("attention.value_length", 0),
        ffn=get("feed_forward_length", 0) or get("expert_feed_forward_length", 0) or 1,
        vocab=int(vocab), max_context=get("context_length"),
        experts=get("expert_count", 0), top_k=get("expert_used_count", 0),
        expert_ffn=get("expert_feed_forward_length", 0), shared_experts=get("expert_shared_count", 0),
        dense_layers=get("leading_dense_block_count", 0),
        kv_lora_rank=get("attention.kv_lora_rank", 0), q_lora_rank=get("attention.q_lora_rank", 0),
        tied_embeddings=not any(t.name == "output.weight" for t in header.tensors),
        fused_qkv=any(t.name.endswith("attn_qkv.weight") for t in header.tensors),
        source=f"GGUF header of {Path(path).name}",
    )
    if kw["kv_lora_rank"]:
        kw.update(rope_head_dim=get("rope.dimension_count"), kv_heads=heads)
    window = get("attention.sliding_window", 0)
    if window:
        pattern = md.get(f"{arch}.attention.sliding_window_pattern")
        if isinstance(pattern, list):
            swa = tuple(i for i, slides in enumerate(pattern) if slides)
        elif arch == "gemma3":
            period = get("attention.sliding_window_pattern", 6) or 6  # 5 local layers, then 1 global
            swa = tuple(i for i in range(n) if (i + 1) % period)
        else:  # Gemma 2, gpt-oss: every other layer, starting with the first
            swa = tuple(range(0, n, 2))
        kw.update(sliding_window=window, swa_layers=swa)
    return Architecture(**kw)


def _gguf_file_type(header: GGUFHeader) -> str:
    import gguf

    code = header.metadata.get("general.file_type")
    try:
        return gguf.LlamaFileType(code).name.replace("MOSTLY_", "").replace("ALL_", "")
    except ValueError:
        return "mixed"


def load_model(source: str | Path, weights: str | None = None) -> ModelWeights:
    """The model ``source`` names: a ``.gguf`` file, a ``config.json`` or folder, or a preset.

    Parameters
    ----------
    source
        Path or preset name (:func:`model_presets`).
    weights
        llama.cpp file type for a config or preset (default: the type its publisher ships,
        :func:`default_file_type`); a GGUF file has its own, and giving a different one is
        an error.

    Raises
    ------
    GraphError
        a source that is none of these (naming it), or any error of the readers.
    """
    p = Path(source)
    if p.suffix.lower() == ".gguf" or (p.is_file() and p.open("rb").read(4) == b"GGUF"):
        header = read_gguf_header(p)
        arch = architecture_from_gguf(header)
        ftype = _gguf_file_type(header)
        if weights is not None and file_type(weights) != ftype:
            raise GraphError(f"{p}: the file holds {ftype} weights; --weights {weights} describes another file")
        return ModelWeights(arch, header.tensors, ftype, str(p))
    if p.is_dir() or p.suffix.lower() == ".json":
        cfg = read_hf_config(p)
        arch = architecture_from_hf(cfg, name=p.parent.name if p.suffix == ".json" else p.name)
        origin = str(p)
    else:
        arch = preset_architecture(str(source))  # "unknown model ..." listing the presets
        origin = f"preset {canonical_preset(str(source))}"
    ftype = file_type(weights) if weights is not None else default_file_type(arch)
    return ModelWeights(arch, recipe_tensors(arch, ftype), ftype, origin)


def default_file_type(arch: Architecture) -> str:
    """The llama.cpp file type a model is planned at when none is given: MXFP4_MOE for gpt-oss
    (its experts are published in MXFP4), Q4_K_M otherwise."""
    return "MXFP4_MOE" if arch.arch == "gpt-oss" else "Q4_K_M"
