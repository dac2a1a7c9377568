"""Where the points of a sweep run: in this process, a pool of local processes, or Dask.

:func:`run_many` sends chunks of points to a task (by default
:func:`~experiments.sweep.point.run_chunk`) and hands every row back to this
process as it finishes. Any "point" works that has ``id`` (a stable string),
``params()`` (its parameter columns) and ``graph_key()`` (what identifies the
graph it loads): sweep :class:`~experiments.sweep.point.Point`\\ s, and the figure
scripts' own configurations with their own tasks.

Local workers exit when the process that started them dies, even by ``SIGKILL``
(Linux: ``PR_SET_PDEATHSIG``; elsewhere a thread that watches the parent's pid),
so that a killed sweep leaves no process behind.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import itertools
import multiprocessing
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, Protocol

from hetsim.experiments.sweep.point import run_chunk

__all__ = ["SweepPoint", "Task", "exit_with_parent", "run_many"]


class SweepPoint(Protocol):
    """What the runners need of a point."""

    @property
    def id(self) -> str: ...

    def params(self) -> dict[str, Any]: ...

    def graph_key(self) -> Hashable: ...


#: a task: a chunk of points (and the graph cache folder) -> their rows
Task = Callable[..., list[dict[str, Any]]]


def exit_with_parent(parent: int) -> None:
    """Make this (worker) process exit when process ``parent`` dies, however it dies.

    A pool initializer. On Linux the kernel sends ``SIGKILL`` when the parent
    exits (``prctl(PR_SET_PDEATHSIG)``); elsewhere a daemon thread checks the
    parent's pid twice a second. A parent already gone: exit now.
    """
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            pr_set_pdeathsig = 1
            if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) == 0:
                if os.getppid() != parent:  # died before the prctl took effect
                    os._exit(1)
                return
        except (OSError, AttributeError):  # pragma: no cover - no prctl in this libc
            pass

    def watch() -> None:  # pragma: no cover - non-Linux fallback
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="hetsim-exit-with-parent", daemon=True).start()


def _chunks(points: Sequence[SweepPoint], size: int) -> list[list[SweepPoint]]:
    """Chunks of consecutive points of one graph; the first chunk of every graph
    comes first, so that workers import different models in parallel."""
    groups: dict[Hashable, list[SweepPoint]] = {}
    for p in points:
        groups.setdefault(p.graph_key(), []).append(p)
    per_graph = [[g[i : i + size] for i in range(0, len(g), size)] for g in groups.values()]
    return [c[0] for c in per_graph] + [ch for c in per_graph for ch in c[1:]]


def _default_workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def run_many(
    points: Sequence[SweepPoint],
    emit: Callable[[dict[str, Any]], None],
    *,
    task: Task = run_chunk,
    workers: int | None = None,
    client: Any = None,
    cache_dir: str | os.PathLike[str] | None = None,
    chunksize: int = 1,
    mp_context: str | None = None,
) -> None:
    """Run ``points`` and call ``emit(row)`` in this process as each one finishes.

    Parameters
    ----------
    points
        What to run. Tasks are chunks of up to ``chunksize`` consecutive points of
        one graph; the first task of every graph goes first, so that workers
        import different models in parallel and then reuse their cached graphs.
    emit
        Called with every row, in completion order.
    task
        ``task(chunk, cache_dir=...) -> rows`` (default: sweep points,
        :func:`~experiments.sweep.point.run_chunk`); it must not raise for an
        error inside a point, and must be importable by the workers (a
        module-level function).
    workers
        Local worker processes (``None``: every core this process may use; ``0``:
        run in this process). Ignored when ``client`` is given.
    client
        A :class:`dask.distributed.Client`: run the tasks on its cluster.
    cache_dir
        The zoo's on-disk graph cache, passed to every task.
    chunksize
        Points per task.
    mp_context
        Start method of local processes (default ``fork`` on Linux, else ``spawn``;
        with ``spawn`` workers re-import hetsim and see only registered schedulers
        that their imports register).
    """
    if chunksize < 1:
        raise ValueError(f"chunksize must be >= 1, got {chunksize}")
    chunks = _chunks(points, chunksize)
    cache = None if cache_dir is None else str(cache_dir)
    if client is not None:
        _run_dask(chunks, task, cache, emit, client)
    elif workers == 0 or not chunks:
        for chunk in chunks:
            for row in task(chunk, cache_dir=cache):
                emit(row)
    else:
        n = min(workers or _default_workers(), len(chunks))
        _run_pool(chunks, task, cache, emit, n, mp_context)


def _crash_rows(chunk: list[SweepPoint], why: str) -> Iterator[dict[str, Any]]:
    for p in chunk:
        yield {**p.params(), "point_id": p.id, "status": "error", "error": why}


def _run_pool(
    chunks: list[list[SweepPoint]],
    task: Task,
    cache_dir: str | None,
    emit: Callable,
    workers: int,
    mp_context: str | None,
) -> None:
    """Local processes, at most ``2 * workers`` tasks in flight.

    A worker that dies (segfault, OOM kill) breaks the pool. The tasks that were
    running then are suspects: each of their points is run again alone, in a pool
    of one (a point that kills that one too gets an error row); the other tasks
    go back to the queue of a fresh pool. Finished rows are never lost.
    """
    if mp_context is None:
        mp_context = "fork" if sys.platform.startswith("linux") else "spawn"
    ctx = multiprocessing.get_context(mp_context)
    queue = collections.deque(chunks)
    suspects: collections.deque[list[SweepPoint]] = collections.deque()
    while queue or suspects:
        if suspects:
            for chunk in _pool_pass(suspects, task, 1, ctx, cache_dir, emit, window=1):
                for row in _crash_rows(chunk, "worker process died while running this point"):
                    emit(row)
            continue
        for chunk in _pool_pass(queue, task, workers, ctx, cache_dir, emit):
            suspects.extend([p] for p in chunk)
        if suspects:
            print(f"sweep: a worker process died; running {len(suspects)} suspect point(s) alone",
                  file=sys.stderr)  # fmt: skip


def _pool_pass(
    queue: collections.deque[list[SweepPoint]],
    task: Task,
    workers: int,
    ctx: Any,
    cache_dir: str | None,
    emit: Callable,
    window: int | None = None,
) -> list[list[SweepPoint]]:
    """Run tasks from ``queue`` on one pool until it is empty or the pool breaks.

    Returns the tasks running when the pool broke (all unfinished ones if none was
    seen running); the other unfinished tasks are put back at the queue's front.
    """
    window = window or 2 * workers
    pending: dict[cf.Future, list[SweepPoint]] = {}
    broken: list[tuple[list[SweepPoint], bool]] = []
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=exit_with_parent,
                                initargs=(os.getpid(),)) as pool:  # fmt: skip
        try:
            while (queue and not broken) or pending:
                while queue and len(pending) < window and not broken:
                    chunk = queue.popleft()
                    try:
                        pending[pool.submit(task, chunk, cache_dir=cache_dir)] = chunk
                    except cf.process.BrokenProcessPool:
                        queue.appendleft(chunk)
                        broken.append(([], False))
                running = {f for f in pending if f.running()}
                done, _ = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
                running |= {f for f in pending if f.running()}
                for fut in done:
                    chunk = pending.pop(fut)
                    try:
                        rows = fut.result()
                    except cf.process.BrokenProcessPool:
                        broken.append((chunk, fut in running))
                        continue
                    for row in rows:
                        emit(row)
        except BaseException:
            for fut in pending:
                fut.cancel()
            raise
    broken = [(c, r) for c, r in broken if c]
    suspect = [c for c, r in broken if r] or [c for c, _ in broken]
    queue.extendleft(reversed([c for c, _ in broken if c not in suspect]))
    return suspect


def _run_dask(
    chunks: list[list[SweepPoint]], task: Task, cache_dir: str | None, emit: Callable, client: Any
) -> None:
    from distributed import as_completed

    threads = sum(client.nthreads().values()) or 1
    window = max(8, 4 * threads)  # cover the round trip to the scheduler
    queue = iter(chunks)
    futures = {}

    def submit(n: int) -> list[Any]:
        new = []
        for chunk in itertools.islice(queue, n):
            key = f"hetsim-point-{chunk[0].id}-{uuid.uuid4().hex[:8]}"
            fut = client.submit(task, chunk, cache_dir=cache_dir, key=key, pure=False)
            futures[fut] = chunk
            new.append(fut)
        return new

    ac = as_completed(submit(window))
    try:
        for fut in ac:
            chunk = futures.pop(fut)
            try:
                rows = fut.result()
            except Exception as e:  # noqa: BLE001 - KilledWorker, lost scheduler...
                rows = list(_crash_rows(chunk, f"dask: {type(e).__name__}: {e}"))
            for row in rows:
                emit(row)
            ac.update(submit(1))
    except BaseException:
        client.cancel(list(futures))
        raise
