"""Shared pytest configuration: hypothesis profiles and small fixture graphs."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from hetsim.graphs.graph import Graph

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _t(*shape: int) -> tuple[list[int], str]:
    return (list(shape), "float32")


@pytest.fixture
def diamond() -> Graph:
    """a -> (b, c) -> d, FLOPs 1, 5, 2, 1; every tensor 1x4 float32 (16 bytes)."""
    g = Graph(name="diamond", meta={"granularity": "op"})
    for n, f in [("a", 1.0), ("b", 5.0), ("c", 2.0), ("d", 1.0)]:
        g.add_op(n, "relu", inputs=[_t(1, 4)], outputs=[_t(1, 4)], flops=f)
    for u, v in [("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")]:
        g.add_edge(u, v)
    return g
