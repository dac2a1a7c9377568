"""A model as users have it, for the simulated placement policies.

The simulated policies (:func:`experiments.llm_plan.plan_llm`) and llama.cpp's planner
read the same :class:`~graphs.llm.architecture.Architecture`: a preset of the one
registry (:mod:`graphs.llm.presets`), a GGUF file, a ``config.json`` or a model folder.
:func:`simulated_model` resolves what a user names and a weight type into the
``(architecture, format)`` the graph takes: a ggml type (``Q4_K``) as it is, a llama.cpp
file type (``Q4_K_M``, the default) counted as llama.cpp writes it (4.8-4.9 bits per
weight on a Llama, not Q4_K's 4.5); a GGUF file has its own.

>>> arch, fmt = simulated_model("llama3-8b", "Q4_K_M")
>>> arch.name, fmt.name, round(fmt.bits_per_weight, 2)
('llama-3-8b', 'Q4_K_M', 4.89)
"""

from __future__ import annotations

from pathlib import Path

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture, ModelWeights
from hetsim.graphs.llm.build import check_simulated, graph_weight_format
from hetsim.graphs.llm.config import WeightFormat
from hetsim.graphs.llm.model_source import default_file_type, load_model

__all__ = ["simulated_model", "weight_format_of"]


def weight_format_of(model: ModelWeights) -> WeightFormat:
    """The weights of ``model`` as one format: its file type at the file's bits per weight."""
    return WeightFormat(model.weights, model.bits_per_weight(), "float" if model.float_weights else "dequant",
                        model.origin)


def simulated_model(source: str | Path | Architecture, weights: str | WeightFormat | None = None,
                    ) -> tuple[Architecture, WeightFormat]:
    """``(architecture, format)`` for the simulated policies of a model and a weight type.

    ``source``: an :class:`Architecture`, a preset name, a GGUF file, a ``config.json`` or
    model folder. ``weights``: a ggml type or llama.cpp file type (default
    :func:`graphs.llm.model_source.default_file_type`; a GGUF file has its own).

    Raises
    ------
    GraphError
        unknown model or weight type; an architecture the simulated graph does not express.
    """
    if isinstance(source, Architecture):
        check_simulated(source)
        return source, graph_weight_format(source, weights or default_file_type(source))
    p = Path(source)
    if p.suffix.lower() == ".gguf" or p.is_file() or p.is_dir():
        if isinstance(weights, WeightFormat):
            raise GraphError(f"{source}: give llama.cpp's file type by name, not a format")
        model = load_model(source, weights)
        check_simulated(model.arch)
        return model.arch, weight_format_of(model)
    arch = Architecture.preset(str(source))
    check_simulated(arch)
    return arch, graph_weight_format(arch, weights or default_file_type(arch))
