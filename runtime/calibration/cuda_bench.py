"""Micro-benchmarks of a CUDA GPU's host costs: an eager launch per op family, a
CUDA-graph replay, an event record and wait, a copy issue, and the GPU-to-CPU
hand-over.

They talk to the GPU through a small interface, :class:`CudaDevice`, which
:class:`TorchCuda` implements with ``torch.cuda``; tests implement it with fake
events, streams and graphs on a fake clock. Every figure is host time: what the
launching thread spends, not what the GPU does.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

from hetsim.runtime.calibration.host_bench import (
    FAMILIES,
    Clock,
    cpu_ops,
    op_call_costs,
    per_call_s,
)

__all__ = ["GRAPH_OPS", "CudaDevice", "TorchCuda", "cuda_device", "measure_cuda"]

#: ops per family in the CUDA graph whose replay :func:`measure_cuda` times
GRAPH_OPS = 4


class CudaDevice(Protocol):
    """What the GPU benchmarks need of a CUDA device."""

    name: str

    def ops(self) -> dict[str, Callable[[], Any]]:
        """Family -> a call that enqueues one tiny op of that family on the device."""

    def synchronize(self) -> None:
        """Wait until the device has run everything enqueued."""

    def event(self) -> Any:
        """A timing event: ``record()``, ``synchronize()``, ``elapsed_time(other)`` (ms)."""

    def stream(self) -> Any:
        """A side stream: ``wait_event(event)``."""

    def capture(self, fn: Callable[[], Any]) -> Any:
        """``fn``'s ops captured as a CUDA graph: ``replay()``."""

    def copy_issuer(self, nbytes: int) -> Callable[[], Any]:
        """A call that enqueues one asynchronous copy of ``nbytes`` from pinned host memory."""


class TorchCuda:
    """:class:`CudaDevice` of ``torch.cuda`` device ``index``."""

    def __init__(self, index: int = 0) -> None:
        import torch

        self.torch = torch
        self.device = f"cuda:{index}"
        torch.cuda.set_device(index)
        self.name = torch.cuda.get_device_name(index)

    def ops(self) -> dict[str, Callable[[], Any]]:
        return cpu_ops(self.device)

    def synchronize(self) -> None:
        self.torch.cuda.synchronize(self.device)

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True)

    def stream(self) -> Any:
        return self.torch.cuda.Stream(self.device)

    def capture(self, fn: Callable[[], Any]) -> Any:
        torch = self.torch
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up on a side stream, as capture requires
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph

    def copy_issuer(self, nbytes: int) -> Callable[[], Any]:
        torch = self.torch
        src = torch.empty(max(nbytes // 4, 1), dtype=torch.float32).pin_memory()
        dst = torch.empty_like(src, device=self.device)
        return lambda: dst.copy_(src, non_blocking=True)


def cuda_device(index: int = 0) -> tuple[CudaDevice | None, str | None]:
    """The :class:`TorchCuda` of GPU ``index``, or None with the reason there is none."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return None, "torch is not installed"
    if not torch.cuda.is_available():
        return None, "no CUDA GPU on this machine (torch.cuda.is_available() is False)"
    if index >= torch.cuda.device_count():
        return None, f"no CUDA GPU {index} on this machine ({torch.cuda.device_count()} GPU(s))"
    return TorchCuda(index), None


def measure_cuda(dev: CudaDevice, *, calls: int = 100, repeats: int = 9, samples: int = 50,
                 copy_bytes: int = 4096, clock: Clock = time.perf_counter,
                 step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The host costs of ``dev``'s launches, graphs, events and copies.

    Parameters
    ----------
    dev
        The device (:func:`cuda_device`, or a fake).
    calls, repeats
        As :func:`~runtime.calibration.host_bench.per_call_s`; the device is
        synchronised after every block.
    samples
        Round trips of the hand-over measurement.
    copy_bytes
        Size of the copy whose issue is timed.
    clock
        The host clock.
    step
        Called with the name of each measurement as it starts (progress).

    Returns
    -------
    dict
        ``name``; ``launch_s`` (family -> eager launch, host time per op);
        ``graph_launch_s`` (one replay of a graph of :data:`GRAPH_OPS` ops per
        family) and ``graph_ops``; ``event_record_s``, ``event_wait_s``;
        ``copy_issue_s``; ``handoff_gpu_to_cpu_s``: the median over ``samples`` of
        the time from the end of a tiny kernel on an idle GPU (placed on the host
        clock through an event recorded just before it, taken to run when its
        record call returns: a few microseconds early, so the figure is an upper
        bound) to the host thread waiting on its event running again.
    """
    say = step or (lambda _: None)
    ops = dev.ops()
    sync = dev.synchronize
    say("GPU launch per op family")
    launch = op_call_costs(ops, calls=calls, repeats=repeats, clock=clock, after=sync)

    say("CUDA-graph replay")

    def segment() -> None:
        for f in FAMILIES:
            for _ in range(GRAPH_OPS):
                ops[f]()

    graph = dev.capture(segment)
    sync()
    graph_launch = per_call_s(graph.replay, calls=max(calls // 10, 1), repeats=repeats, clock=clock, after=sync)

    say("event record and wait")
    events = [dev.event() for _ in range(calls)]
    it = iter(events * repeats)
    record = per_call_s(lambda: next(it).record(), calls=calls, repeats=repeats, clock=clock, after=sync)
    side = dev.stream()
    it = iter(events * repeats)
    wait = per_call_s(lambda: side.wait_event(next(it)), calls=calls, repeats=repeats, clock=clock, after=sync)

    say("copy issue")
    copy_issue = per_call_s(dev.copy_issuer(copy_bytes), calls=calls, repeats=repeats, clock=clock, after=sync)

    say("GPU-to-CPU hand-over")
    op = ops["elementwise"]
    gaps = []
    for _ in range(samples):
        sync()
        anchor, done = dev.event(), dev.event()
        anchor.record()
        t0 = clock()  # the GPU, idle, reaches the anchor no earlier than this
        op()
        done.record()
        done.synchronize()
        woke = clock()
        gaps.append(max(woke - (t0 + anchor.elapsed_time(done) / 1e3), 0.0))
    return {"name": dev.name, "launch_s": launch, "graph_launch_s": graph_launch,
            "graph_ops": GRAPH_OPS * len(FAMILIES), "event_record_s": record, "event_wait_s": wait,
            "copy_issue_s": copy_issue, "handoff_gpu_to_cpu_s": float(statistics.median(gaps))}
