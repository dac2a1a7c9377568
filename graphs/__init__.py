"""Dataflow graphs: the :class:`Graph` data model, TVM Relax import, model zoo, features
and transforms.

``from_torch``, ``from_onnx`` and ``from_relax`` import TVM on first use, so that
``import hetsim.graphs`` stays fast; ``from_trace`` reads a PyTorch profiler trace
(:mod:`graphs.trace`).
"""

from __future__ import annotations

from typing import Any

from hetsim.graphs.features import FEATURE_COLUMNS, dependency_matrix, features, signature
from hetsim.graphs.graph import (
    DTYPE_BYTES,
    SCHEMA_VERSION,
    VIEW_OPS,
    Graph,
    GraphError,
    load,
    tensor_bytes,
    validate,
)
from hetsim.graphs.model_spec import (
    InputSpec,
    ModelSpec,
    load_model_spec,
    parse_input_spec,
    parse_model_spec,
)
from hetsim.graphs.summary import format_summary, summary, to_dot
from hetsim.graphs.transforms import (
    critical_path,
    depths,
    split_op,
    weight_only_nodes,
    widest_antichain,
)

_LAZY = {"from_torch", "from_onnx", "from_relax"}

__all__ = [
    "DTYPE_BYTES",
    "FEATURE_COLUMNS",
    "SCHEMA_VERSION",
    "VIEW_OPS",
    "Graph",
    "GraphError",
    "InputSpec",
    "ModelSpec",
    "critical_path",
    "dependency_matrix",
    "depths",
    "features",
    "format_summary",
    "from_onnx",
    "from_relax",
    "from_torch",
    "from_trace",
    "load",
    "load_model_spec",
    "parse_input_spec",
    "parse_model_spec",
    "signature",
    "split_op",
    "summary",
    "tensor_bytes",
    "to_dot",
    "validate",
    "weight_only_nodes",
    "widest_antichain",
]


def __getattr__(name: str) -> Any:
    if name == "from_trace":
        # import cycle: hetsim.graphs.trace -> hetsim.graphs
        from hetsim.graphs.trace import from_trace

        return from_trace
    if name in _LAZY:
        # import cycle: hetsim.graphs.relax_import -> hetsim.graphs
        from hetsim.graphs import relax_import

        return getattr(relax_import, name)
    raise AttributeError(f"module 'graphs' has no attribute {name!r}")
