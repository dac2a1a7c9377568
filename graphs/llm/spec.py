"""LLM workloads named by one string, as sweeps and model lists take them.

``llm:NAME`` is the decode step of preset ``NAME`` at its full context;
comma-separated ``key=value`` pairs set :func:`~graphs.llm.llm_graph`'s arguments:
``llm:llama-3-70b,phase=decode,context=4096,weights=Q4_K_M`` (integers for ``tokens``,
``kv_length``, ``context``; strings for ``phase``, ``weights``, ``kv_dtype``).

>>> parse_llm_spec("llm:tiny,context=64,weights=q8")
('tiny', {'context': 64, 'weights': 'q8'})
"""

from __future__ import annotations

from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.llm.architecture import Architecture
from hetsim.graphs.llm.build import llm_graph

__all__ = ["LLM_PREFIX", "is_llm_spec", "llm_graph_from_spec", "parse_llm_spec"]

LLM_PREFIX = "llm:"
_INTS = ("tokens", "kv_length", "context")
_STRS = ("phase", "weights", "kv_dtype")


def is_llm_spec(model: str) -> bool:
    """True when ``model`` names an LLM workload (``llm:...``)."""
    return isinstance(model, str) and model.startswith(LLM_PREFIX)


def parse_llm_spec(model: str) -> tuple[str, dict[str, Any]]:
    """``(preset, keyword arguments)`` of an ``llm:`` string; :class:`GraphError` naming
    the bad part."""
    if not is_llm_spec(model):
        raise GraphError(f"{model!r} is not an LLM workload (llm:NAME[,key=value...])")
    name, *pairs = model[len(LLM_PREFIX):].split(",")
    Architecture.preset(name)
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or key not in _INTS + _STRS:
            raise GraphError(f"{model!r}: {pair!r} is not key=value with key one of {', '.join(_INTS + _STRS)}")
        if key in _INTS:
            try:
                kwargs[key] = int(value)
            except ValueError:
                raise GraphError(f"{model!r}: {key} must be an integer, got {value!r}") from None
        else:
            kwargs[key] = value.strip()
    return name, kwargs


def llm_graph_from_spec(model: str, *, batch: int = 1, **overrides: Any) -> Graph:
    """The graph of an ``llm:`` string (``overrides``: further :func:`llm_graph` arguments)."""
    name, kwargs = parse_llm_spec(model)
    return llm_graph(name, batch=batch, **{**kwargs, **overrides})
