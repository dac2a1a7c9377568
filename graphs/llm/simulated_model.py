"""A model as users have it, for the simulated placement policies.

The simulated policies (:func:`experiments.llm_plan.plan_llm`) build their graphs from
an :class:`~graphs.llm.config.LLMConfig` and a :class:`~graphs.llm.config.WeightFormat`;
llama.cpp's planner reads GGUF files, ``config.json`` files and published presets into
an :class:`~graphs.llm.architecture.Architecture` with its tensors. This module goes
between the two:

* :func:`llm_config_of` is the :class:`LLMConfig` of an architecture the simulated
  graph expresses (grouped-query attention with any head size, SwiGLU feed-forward,
  routed experts); DeepSeek's latent attention, shared experts, leading dense layers
  and sliding-window layers are refused by name;
* :func:`architecture_of` is the llama-architecture :class:`Architecture` of an
  :class:`LLMConfig`, so llama.cpp's quantisation recipes apply to simulator presets;
* :func:`simulated_model` resolves what a user names (a simulator preset, a GGUF file,
  a ``config.json`` or model folder, a published preset) and a weight type (a simulator
  format such as ``q4_K``, or llama.cpp's ``Q4_K_M``) into the pair the graph takes. A
  llama.cpp file type is counted as llama.cpp writes it (Q4_K_M is 4.8-4.9 bits per
  weight on a Llama, not Q4_K's 4.5).

>>> cfg, fmt = simulated_model("llama3-8b", "Q4_K_M")
>>> fmt.name, round(fmt.bits_per_weight, 2)
('Q4_K_M', 4.89)
"""

from __future__ import annotations

from pathlib import Path

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture, ModelWeights
from hetsim.graphs.llm.config import WEIGHT_FORMATS, LLMConfig, WeightFormat, weight_format
from hetsim.graphs.llm.quant_recipe import FILE_TYPES, file_type, recipe_tensors

__all__ = ["architecture_of", "llm_config_of", "simulated_model", "weight_format_of"]

#: what the simulated graph cannot express, as (test, what it is)
_UNSUPPORTED = (
    (lambda a: a.is_mla, "multi-head latent attention"),
    (lambda a: a.shared_experts > 0, "shared experts"),
    (lambda a: a.dense_layers > 0, "leading dense layers"),
    (lambda a: bool(a.swa_layers and a.sliding_window), "sliding-window layers"),
    (lambda a: a.head_dim_v != a.head_dim, "value heads of another size than key heads"),
)


def llm_config_of(arch: Architecture) -> LLMConfig:
    """The :class:`LLMConfig` of ``arch`` (a tied output head is counted as its own matrix).

    Raises
    ------
    GraphError
        naming the model and what the simulated graph does not express.
    """
    missing = [what for test, what in _UNSUPPORTED if test(arch)]
    if missing:
        raise GraphError(f"model {arch.name!r} ({arch.arch}) has {', '.join(missing)}, which the simulated "
                         "policies do not express; plan it as llama.cpp runs it (without --policy)")
    return LLMConfig(arch.name, arch.hidden, arch.layers, arch.heads, arch.kv_heads,
                     arch.expert_ffn if arch.is_moe else arch.ffn, arch.vocab, arch.max_context,
                     experts=arch.experts, top_k=arch.top_k, source=arch.source,
                     head_size=0 if arch.head_dim * arch.heads == arch.hidden else arch.head_dim)


def architecture_of(cfg: LLMConfig) -> Architecture:
    """The llama-architecture :class:`Architecture` of ``cfg`` (Mixtral's for experts)."""
    return Architecture(cfg.name, "llama", layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads,
                        kv_heads=cfg.kv_heads, head_dim=cfg.head_dim, ffn=cfg.ffn, vocab=cfg.vocab,
                        max_context=cfg.max_context, experts=cfg.experts, top_k=cfg.top_k,
                        expert_ffn=cfg.ffn if cfg.experts else 0, source=cfg.source)


def weight_format_of(model: ModelWeights) -> WeightFormat:
    """The weights of ``model`` as one format: its file type at the file's bits per weight."""
    return WeightFormat(model.weights, model.bits_per_weight(), "float" if model.float_weights else "dequant",
                        model.origin)


def _is_simulator_format(weights: str) -> bool:
    try:
        weight_format(weights)
    except GraphError:
        return False
    return True


def simulated_model(source: str | Path | LLMConfig, weights: str | WeightFormat | None = None,
                    ) -> tuple[LLMConfig, WeightFormat]:
    """``(config, format)`` for the simulated policies of a model and a weight type.

    ``source``: an :class:`LLMConfig`, a simulator preset (``LLMConfig.presets()``), a GGUF
    file, a ``config.json`` or model folder, or a published preset (``graphs/llm/configs``).
    ``weights``: a simulator format (``q4_K``, ``f16``...) or llama.cpp file type (``Q4_K_M``;
    a GGUF file has its own); default ``q4_K`` for a simulator preset, otherwise
    :func:`graphs.llm.model_source.default_file_type`.

    Raises
    ------
    GraphError
        unknown model or weight type; an architecture the simulated graph does not express.
    """
    from hetsim.graphs.llm.model_source import load_model

    if isinstance(source, LLMConfig) or (isinstance(source, str) and source in LLMConfig.presets()):
        cfg = source if isinstance(source, LLMConfig) else LLMConfig.preset(source)
        if weights is None or isinstance(weights, WeightFormat) or _is_simulator_format(weights):
            return cfg, weight_format("q4_K" if weights is None else weights)
        try:
            ftype = file_type(weights)
        except GraphError:
            raise GraphError(f"unknown weight type {weights!r}; simulator formats: {', '.join(WEIGHT_FORMATS)}; "
                             f"llama.cpp file types: {', '.join(FILE_TYPES)}") from None
        tensors = recipe_tensors(architecture_of(cfg), ftype)
        model = ModelWeights(architecture_of(cfg), tensors, ftype, f"llama-quantize's {ftype} recipe for {cfg.name}")
        return cfg, weight_format_of(model)
    if isinstance(weights, WeightFormat):
        raise GraphError(f"{source}: give llama.cpp's file type by name (one of {', '.join(FILE_TYPES)}), "
                         f"not a format")
    model = load_model(source, weights)
    return llm_config_of(model.arch), weight_format_of(model)
