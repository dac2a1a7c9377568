"""What a sweep worker keeps between points: imported graphs, cost models, platforms.

Three small, bounded LRU caches per process, so that a worker that runs many
points of one model imports and compiles that model once, fits a learned cost
model once, and a long sweep cannot grow its memory. With a ``cache_dir`` the
zoo's on-disk graph cache is shared by the processes of a machine, under a file
lock, so that each model is imported once per machine.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.platform import Platform
from hetsim.graphs.files import open_own_file
from hetsim.graphs.graph import load
from hetsim.graphs.llm import llm_graph_from_spec

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph

__all__ = [
    "GRAPH_CACHE_SIZE", "graph_cache_info", "canonical", "clear_caches", "load_graph", "make_cost",
    "make_platform",
]  # fmt: skip

#: how many imported graphs one process keeps (graphs of a few MB each)
GRAPH_CACHE_SIZE = 8


def canonical(args: Mapping[str, Any]) -> str:
    """Keyword arguments as canonical JSON (sorted keys, no spaces): how a row and a
    cache key spell them."""
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"))


@contextmanager
def _file_lock(directory: Path, key: str) -> Iterator[None]:
    """Exclusive lock on ``directory/.locks/key`` (no-op where ``fcntl`` is missing).

    Two workers that need the same uncached model at once: one imports it, the
    other waits and then reads the zoo's on-disk cache instead of importing again.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    locks = directory / ".locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = open_own_file(locks / key, os.O_RDWR | os.O_CREAT, 0o600)  # never through a link planted there
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=GRAPH_CACHE_SIZE)
def _graph(model: str, batch: int, granularity: str, args_json: str, cache_dir: str | None) -> Graph:
    if model.endswith(".json"):
        return load(model)
    if model.startswith("llm:"):  # an LLM workload, built in well under a second

        return llm_graph_from_spec(model, batch=batch, **json.loads(args_json))
    # lazy: at the top it would load torch with this module
    from hetsim.graphs import zoo

    kwargs = json.loads(args_json)
    directory = None if cache_dir is None else Path(cache_dir)
    if directory is not None:
        try:  # a Dask worker on another machine may not be able to create it
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            directory = None
    if directory is None:
        return zoo.load(model, batch=batch, granularity=granularity, **kwargs)
    key = hashlib.sha256(f"{model}|{batch}|{granularity}|{args_json}".encode()).hexdigest()[:16]
    with _file_lock(directory, key):
        return zoo.load(model, batch=batch, granularity=granularity, cache=directory, **kwargs)


def load_graph(
    model: str,
    *,
    batch: int = 1,
    granularity: str = "op",
    model_args: Mapping[str, Any] | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Graph:
    """The graph of a zoo model (or graph JSON file), cached in this process.

    Up to :data:`GRAPH_CACHE_SIZE` graphs are kept (least recently used dropped).
    With ``cache_dir`` the zoo's on-disk cache is used as well, under a file lock,
    so that the processes of one machine import each model once.
    Callers must not mutate the returned graph (it is shared between points).
    """
    cache = None if cache_dir is None else str(Path(cache_dir).resolve())
    return _graph(model, int(batch), granularity, canonical(model_args or {}), cache)


@functools.lru_cache(maxsize=8)
def make_cost(spec: str, platform: str | None = None) -> Any:
    """The cost model of a ``cost`` spec for the platform preset or TOML ``platform``
    (:func:`costmodel.as_cost_model`), cached.

    At most 8 (spec, platform) pairs per process are kept: a learned model is
    fitted once per worker and platform (the platform tells it which device is
    which; the override multipliers of a sweep leave that alone).
    """
    return as_cost_model(spec, platform=None if platform is None else make_platform(platform))


@functools.lru_cache(maxsize=32)
def make_platform(
    name: str,
    link_bandwidth: float = 1.0,
    gpu_peak: float = 1.0,
    cpu_peak: float = 1.0,
    gpu_bandwidth: float = 1.0,
) -> Platform:
    """A preset or TOML platform with the override multipliers applied (cached)."""
    base = Platform.load(name)
    scale = dict(link_bandwidth=link_bandwidth, gpu_peak=gpu_peak, cpu_peak=cpu_peak,
                 gpu_bandwidth=gpu_bandwidth)  # fmt: skip
    if all(float(v) == 1.0 for v in scale.values()):
        return base
    return base.scaled(**{k: float(v) for k, v in scale.items()})


def clear_caches() -> None:
    """Empty this process's graph, cost-model and platform caches."""
    _graph.cache_clear()
    make_cost.cache_clear()
    make_platform.cache_clear()


def graph_cache_info() -> Any:
    """Hits, misses, size and bound of this process's graph cache (``functools`` cache info)."""
    return _graph.cache_info()
