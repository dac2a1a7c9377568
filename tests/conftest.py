"""Shared pytest configuration: hypothesis profiles and small fixture graphs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from hetsim.graphs.graph import Graph


def share_the_cores() -> None:
    """Under pytest-xdist (``-n N``), each worker runs torch's OpenMP kernels on its share
    of the cores, unless ``OMP_NUM_THREADS`` says otherwise: with each worker on every
    core, their threads contend (the per-node check of squeezenet1_1 in two processes at
    once, two cores, load average 4-6: 24-32 s with one thread each, 35-50 s with two).
    A thread count that a test or the code under test sets is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers <= 1 or "OMP_NUM_THREADS" in os.environ:
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    threads = max(1, cores // workers)
    os.environ["OMP_NUM_THREADS"] = str(threads)
    torch = sys.modules.get("torch")  # loaded already: it read the variable at load
    if torch is not None:
        torch.set_num_threads(threads)


share_the_cores()

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", max_examples=10_000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: the checkout under test
ROOT = Path(__file__).resolve().parents[1]
#: folders of the checkout that commands write into by default (git ignores them): a
#: user's own files live there, so tests run where these are folders of their own
WRITTEN = ("out", "results")


@pytest.fixture(scope="session")
def checkout_view(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that shows the checkout (each top-level entry a link to the checkout's)
    but has ``out/`` and ``results/`` of its own: every test runs there, so a command
    that writes ``out/...`` by default, or a documented block, leaves the checkout's
    ``out/`` (a user's files) alone."""
    view = tmp_path_factory.mktemp("checkout")
    for entry in ROOT.iterdir():
        if entry.name not in (*WRITTEN, ".git"):
            (view / entry.name).symlink_to(entry)
    return view


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    """path -> (size, mtime in ns) of every file under FOLDER."""
    if not folder.is_dir():
        return {}
    return {str(p): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in folder.rglob("*")}


@pytest.fixture(scope="session", autouse=True)
def checkout_out_untouched() -> Iterator[None]:
    """The checkout's ``out/`` and ``results/`` are as they were when the tests end."""
    before = {name: _listing(ROOT / name) for name in WRITTEN}
    yield
    after = {name: _listing(ROOT / name) for name in WRITTEN}
    changed = {name: sorted(set(before[name].items()) ^ set(after[name].items()))[:5] for name in WRITTEN
               if before[name] != after[name]}  # fmt: skip
    assert not changed, f"tests wrote into the checkout's {sorted(changed)}: {changed}"


@pytest.fixture(autouse=True)
def run_in_checkout_view(checkout_view: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test's working folder is :func:`checkout_view`."""
    monkeypatch.chdir(checkout_view)


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
