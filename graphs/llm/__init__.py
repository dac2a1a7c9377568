"""Decoder-only LLM workloads: architectures, weight formats, the graph of a prefill or a
decode step, and weights streamed from host memory.

>>> from hetsim.graphs.llm import llm_graph
>>> g = llm_graph("llama-3-70b", phase="decode", kv_length=8192, weights="Q4_K")
>>> round(g.param_bytes / 2**30, 1)   # Q4_K weights + an 8192-token f16 KV cache
39.5
"""

from __future__ import annotations

from hetsim.graphs.llm.architecture import Architecture, ModelWeights
from hetsim.graphs.llm.build import ACT_BYTES, PHASES, llm_graph
from hetsim.graphs.llm.config import (
    KV_DTYPES,
    WEIGHT_FORMATS,
    WeightFormat,
    kv_dtype_bytes,
    weight_format,
)
from hetsim.graphs.llm.spec import LLM_PREFIX, is_llm_spec, llm_graph_from_spec, parse_llm_spec
from hetsim.graphs.llm.streaming import WEIGHT_SUFFIX, stream_weights
from hetsim.graphs.llm.workload import LLMWorkload

__all__ = [
    "ACT_BYTES",
    "KV_DTYPES",
    "LLM_PREFIX",
    "PHASES",
    "WEIGHT_FORMATS",
    "WEIGHT_SUFFIX",
    "Architecture",
    "LLMWorkload",
    "ModelWeights",
    "WeightFormat",
    "is_llm_spec",
    "kv_dtype_bytes",
    "llm_graph",
    "llm_graph_from_spec",
    "parse_llm_spec",
    "stream_weights",
    "weight_format",
]
