"""Device time of a GPU op as it runs in a stream, and the host cost of launching it.

An op timed alone between two CUDA events costs the events' own work and, when its
kernels are short, the launch gap in front of them: a 15 us convolution reads as
over 100 us that way. What the simulator needs are two separate numbers:

* **device time** (``op_time``): how long the op's kernels keep the GPU busy when
  they run back to back in a stream. :class:`CudaStreamTimer` captures ``calls``
  calls of the op into one CUDA graph, replays it between two events and divides
  by ``calls`` (method ``cuda_graph``): no launch gap, one pair of events per
  ``calls`` calls. An op that cannot be captured (it synchronises, or allocates in
  a way capture refuses) is timed as ``calls`` eager calls queued behind a
  ``torch.cuda._sleep`` that keeps the GPU busy while the host enqueues them, with
  one pair of events around the block (method ``cuda_stream``): the kernels then
  also run back to back.
* **launch time** (``dispatch_time``): host seconds per eager call, measured while
  the GPU is kept busy so that no call waits on the device.

The timer talks to CUDA only through the ``cuda`` object it is given (``torch.cuda``
by default), so that tests drive it with a fake.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["BusyWait", "CudaStreamTimer", "STREAM_METHODS", "calls_per_replay"]

#: ``timer`` values of profile rows this module measures
STREAM_METHODS = ("cuda_graph", "cuda_stream")
#: a replay of this many seconds makes its two events' cost negligible
TARGET_REPLAY_S = 1e-3
#: at most this many calls in one captured graph (memory of their outputs)
MAX_CALLS = 256


def calls_per_replay(device_time_s: float, *, target_s: float = TARGET_REPLAY_S, max_calls: int = MAX_CALLS) -> int:
    """Calls of an op of ``device_time_s`` per replay so that one replay lasts about
    ``target_s`` (at least 1, at most ``max_calls``).

    >>> calls_per_replay(10e-6), calls_per_replay(5e-3), calls_per_replay(1e-9)
    (100, 1, 256)
    """
    if not device_time_s > 0:
        return max_calls
    return int(max(1, min(max_calls, round(target_s / device_time_s))))


class BusyWait:
    """Keeps a CUDA device busy for a while with ``cuda._sleep`` (a spin kernel), so that
    what the host enqueues behind it runs back to back; the spin's cycles per second are
    measured once, on first use. Nothing happens where the CUDA API has no ``_sleep``."""

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        self._cycles_per_s: float | None = None

    def rate(self) -> float:
        """Cycles of ``_sleep`` per second on the current device (measured once)."""
        if self._cycles_per_s is None:
            start, end = self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)
            start.record()
            self.cuda._sleep(1_000_000)
            end.record()
            end.synchronize()
            self._cycles_per_s = 1e6 / max(start.elapsed_time(end) * 1e-3, 1e-9)
        return self._cycles_per_s

    def __call__(self, seconds: float, *, cap_s: float = 0.2) -> None:
        """Enqueue a spin of ``seconds`` (at most ``cap_s``)."""
        if hasattr(self.cuda, "_sleep"):
            self.cuda._sleep(int(min(seconds, cap_s) * self.rate()))


class CudaStreamTimer:
    """Stream device times and eager launch times of ops on one CUDA device.

    Parameters
    ----------
    index
        CUDA device index.
    cuda
        The CUDA API (``torch.cuda``; a fake in tests): ``device``, ``Stream``,
        ``stream``, ``current_stream``, ``CUDAGraph``, ``graph``, ``Event``,
        ``synchronize`` and, optionally, ``_sleep``.
    """

    def __init__(self, index: int = 0, *, cuda: Any = None) -> None:
        if cuda is None:
            import torch

            cuda = torch.cuda
        self.cuda = cuda
        self.index = index
        self._keep_busy = BusyWait(cuda)

    def _events(self) -> tuple[Any, Any]:
        return self.cuda.Event(enable_timing=True), self.cuda.Event(enable_timing=True)

    # -------------------------------------------------------------- device time
    def capture(self, fn: Callable[[], Any], calls: int) -> Any:
        """A CUDA graph of ``calls`` calls of ``fn`` (after three warm-up calls on a
        side stream, as capture requires); raises what the capture raises."""
        cuda = self.cuda
        side = cuda.Stream()
        side.wait_stream(cuda.current_stream())
        with cuda.stream(side):
            for _ in range(3):
                fn()
        cuda.current_stream().wait_stream(side)
        graph = cuda.CUDAGraph()
        with cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        cuda.synchronize()
        return graph

    def replay_times(self, graph: Any, calls: int, replays: int) -> list[float]:
        """Device seconds per call of each of ``replays`` replays of ``graph`` (a
        graph of ``calls`` calls)."""
        out = []
        for _ in range(replays):
            start, end = self._events()
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e-3 / calls)
        return out

    def queued_times(self, fn: Callable[[], Any], calls: int, replays: int, host_per_call: float) -> list[float]:
        """Device seconds per call of ``replays`` blocks of ``calls`` eager calls, each
        block queued behind a busy wait and bracketed by one pair of events."""
        out = []
        for _ in range(replays):
            start, end = self._events()
            self._keep_busy(2.0 * calls * max(host_per_call, 5e-6) + 50e-6)
            start.record()
            for _ in range(calls):
                fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) * 1e-3 / calls)
        return out

    def device_times(self, fn: Callable[[], Any], calls: int, replays: int, *,
                     host_per_call: float = 1e-5) -> tuple[list[float], str]:
        """``(seconds per call of each replay, method)``: ``cuda_graph`` when ``fn``
        can be captured, else ``cuda_stream`` (see the module docstring)."""
        with self.cuda.device(self.index):
            try:
                graph = self.capture(fn, calls)
            except RuntimeError:
                self.cuda.synchronize()
                return self.queued_times(fn, calls, replays, host_per_call), "cuda_stream"
            try:
                return self.replay_times(graph, calls, replays), "cuda_graph"
            finally:
                del graph

    # -------------------------------------------------------------- launch time
    def launch_time(self, fn: Callable[[], Any], calls: int = 50, rounds: int = 5) -> float:
        """Host seconds per eager call of ``fn`` (median of ``rounds`` blocks of
        ``calls``), each block issued while the GPU is kept busy: the host never
        waits on the device, so this is the launch path alone."""
        per = []
        with self.cuda.device(self.index):
            for _ in range(rounds):
                self.cuda.synchronize()
                self._keep_busy(calls * 1e-4 + 1e-3)
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                per.append((time.perf_counter() - t0) / calls)
            self.cuda.synchronize()
        per.sort()
        return per[len(per) // 2]
