"""Micro-benchmarks of the host: an op call per family, a worker's wake-up, and the
interpreter lock between two worker threads.

Each measurement is a median over ``repeats`` blocks of ``calls`` back-to-back calls
(:func:`per_call_s`), on a clock given as an argument (``time.perf_counter`` by
default), so that the arithmetic is testable with a fake clock. The ops are tiny
(a few hundred elements): their time is the host's cost of one call, the part of
an op that does not shrink with a faster device.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["FAMILIES", "Clock", "cpu_ops", "interpreter_slowdown", "op_call_costs", "per_call_s", "python_work",
           "thread_wake_s"]

#: the op families whose host cost a calibration measures, in order
FAMILIES = ("elementwise", "matmul", "conv", "reduction")

Clock = Callable[[], float]


def per_call_s(fn: Callable[[], Any], *, calls: int = 100, repeats: int = 9, clock: Clock = time.perf_counter,
               after: Callable[[], Any] | None = None) -> float:
    """Median over ``repeats`` blocks of the time of ``calls`` back-to-back calls of
    ``fn``, per call (seconds). ``after`` runs after each block, untimed (a device
    synchronisation, so that one block's queued work does not slow the next).

    Examples
    --------
    >>> t = iter(range(0, 100, 5))
    >>> per_call_s(lambda: None, calls=5, repeats=3, clock=lambda: float(next(t)))
    1.0
    """
    if calls < 1 or repeats < 1:
        raise ValueError(f"calls and repeats must be >= 1, got calls={calls!r}, repeats={repeats!r}")
    blocks = []
    for _ in range(repeats):
        t0 = clock()
        for _ in range(calls):
            fn()
        blocks.append((clock() - t0) / calls)
        if after is not None:
            after()
    return float(statistics.median(blocks))


def op_call_costs(ops: Mapping[str, Callable[[], Any]], *, calls: int = 100, repeats: int = 9,
                  clock: Clock = time.perf_counter, after: Callable[[], Any] | None = None,
                  warmup: int = 10) -> dict[str, float]:
    """Family -> :func:`per_call_s` of its op, each called ``warmup`` times first."""
    out = {}
    for family, fn in ops.items():
        for _ in range(warmup):
            fn()
        if after is not None:
            after()
        out[family] = per_call_s(fn, calls=calls, repeats=repeats, clock=clock, after=after)
    return out


def cpu_ops(device: str = "cpu") -> dict[str, Callable[[], Any]]:
    """One tiny torch op per :data:`FAMILIES` on ``device`` (``"cpu"`` or ``"cuda:K"``):
    an add of 256 floats, a 16x16 matmul, a 3x3 convolution of 4 channels on 8x8, a
    sum of 256 floats."""
    import torch

    x = torch.rand(256, device=device)
    a = torch.rand(16, 16, device=device)
    img = torch.rand(1, 4, 8, 8, device=device)
    w = torch.rand(4, 4, 3, 3, device=device)
    fns = {"elementwise": lambda: torch.add(x, x), "matmul": lambda: torch.mm(a, a),
           "conv": lambda: torch.nn.functional.conv2d(img, w, padding=1), "reduction": lambda: torch.sum(x)}
    return {f: fns[f] for f in FAMILIES}


def thread_wake_s(samples: int = 200, *, clock: Clock = time.perf_counter) -> float:
    """Median time from one thread setting a :class:`threading.Event` to another,
    blocked on it, running again: what a worker waiting for an input from another
    worker loses before it starts (seconds)."""
    go, done = threading.Event(), threading.Event()
    woke: list[float] = []

    def waiter() -> None:
        for _ in range(samples):
            go.wait()
            woke.append(clock())
            go.clear()
            done.set()

    t = threading.Thread(target=waiter, daemon=True)
    t.start()
    gaps = []
    for _ in range(samples):
        time.sleep(0.0002)  # the waiter is blocked, not spinning
        t0 = clock()
        go.set()
        done.wait()
        done.clear()
        gaps.append(woke[-1] - t0)
    t.join()
    return float(statistics.median(gaps))


def python_work(n: int = 2000) -> int:
    """Pure-Python host work (what a worker's bookkeeping between ops is): a loop of
    dictionary updates that holds the interpreter lock throughout."""
    d: dict[int, int] = {}
    for i in range(n):
        d[i & 63] = d.get(i & 63, 0) + i
    return len(d)


def interpreter_slowdown(work: Callable[[], Any] = python_work, *, rounds: int = 200,
                         clock: Clock = time.perf_counter) -> dict[str, float]:
    """How much one worker's host work slows while a second thread runs Python host
    work: ``rounds`` calls of ``work`` timed alone, then again while another thread
    calls ``work`` in a loop.

    Returns
    -------
    dict
        ``alone_s`` and ``both_s`` (mean per call: the lock is handed over every
        switch interval, so most calls run whole and a few wait a whole interval),
        ``slowdown`` (their ratio, at least 1): about 2 where one interpreter lock
        serialises the two threads, about 1 where they run in parallel.
    """
    def timed() -> float:
        t0 = clock()
        for _ in range(rounds):
            work()
        return (clock() - t0) / rounds

    alone = timed()
    stop = threading.Event()

    def other() -> None:
        while not stop.is_set():
            work()

    t = threading.Thread(target=other, daemon=True)
    t.start()
    try:
        both = timed()
    finally:
        stop.set()
        t.join()
    return {"alone_s": alone, "both_s": both, "slowdown": max(both / alone, 1.0) if alone > 0 else 1.0}
