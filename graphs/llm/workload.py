"""What an LLM graph is: :class:`LLMWorkload`, the typed description that
:func:`graphs.llm.llm_graph` attaches to its graph.

The graph keeps it in ``meta["llm"]`` as plain data (graphs are saved as JSON);
:meth:`LLMWorkload.of` reads it back as one object, so that policies and planners
read fields, not dictionary keys.

>>> from hetsim.graphs.llm import llm_graph
>>> w = LLMWorkload.of(llm_graph("tiny", kv_length=8, weights="Q8_0"))
>>> w.arch.name, w.phase, w.kv_length, w.weights.name
('tiny', 'decode', 8, 'Q8_0')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture
from hetsim.graphs.llm.config import WeightFormat

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = ["LLMWorkload"]


@dataclass(frozen=True)
class LLMWorkload:
    """One phase of a model: the architecture, the weights' format, the phase (``prefill`` of
    ``tokens`` tokens, or ``decode`` over ``kv_length`` cached tokens), ``batch`` sequences,
    a KV cache of ``context`` tokens of ``kv_dtype``; ``units``: the node groups a placement
    moves together; ``expert_read_fraction``: the routed experts a step reads (uniform
    routing); ``residency``, ``streamed``, ``window``: what a placement policy recorded."""

    arch: Architecture
    weights: WeightFormat
    phase: str
    batch: int
    tokens: int
    kv_length: int
    context: int
    kv_dtype: str
    units: dict[str, list[str]]
    expert_read_fraction: float = 1.0
    residency: dict[str, Any] | None = None
    streamed: tuple[str, ...] = field(default=())
    window: int = 0

    @classmethod
    def of(cls, graph: Graph) -> LLMWorkload:
        """The workload of ``graph``; :class:`GraphError` when it is no LLM graph."""
        m = graph.meta.get("llm")
        if not isinstance(m, Mapping) or "units" not in m or "config" not in m:
            raise GraphError(f"graph {graph.name!r} is not an LLM graph (build one with hetsim.graphs.llm.llm_graph)")
        fmt = m.get("format") or {}
        weights = WeightFormat(str(m["weights"]), float(fmt.get("bits_per_weight", 16.0)),
                               str(fmt.get("compute", "dequant")), str(fmt.get("source", "")))
        return cls(Architecture.from_dict(dict(m["config"])), weights, m["phase"], int(m["batch"]), int(m["tokens"]),
                   int(m["kv_length"]), int(m["context"]), str(m["kv_dtype"]), dict(m["units"]),
                   float(m.get("expert_read_fraction", 1.0)), m.get("residency"), tuple(m.get("streamed", ())),
                   int(m.get("window", 0)))

    def to_meta(self) -> dict[str, Any]:
        """The plain data ``meta["llm"]`` holds."""
        out: dict[str, Any] = {
            "config": self.arch.to_dict(), "phase": self.phase, "batch": self.batch, "tokens": self.tokens,
            "kv_length": self.kv_length, "context": self.context, "weights": self.weights.name,
            "format": {"bits_per_weight": self.weights.bits_per_weight, "compute": self.weights.compute,
                       "source": self.weights.source},
            "kv_dtype": self.kv_dtype, "units": self.units, "expert_read_fraction": self.expert_read_fraction,
        }
        if self.residency is not None:
            out["residency"] = self.residency
        if self.streamed:
            out["streamed"] = list(self.streamed)
            out["window"] = self.window
        return out
