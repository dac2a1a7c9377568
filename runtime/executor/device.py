"""The CUDA calls of the executor, behind one small interface.

:class:`~runtime.executor.cuda.CudaRuntime` makes every CUDA call through a
:class:`CudaDevice`: streams, events (recorded, waited on by a stream, waited on by
the host), buffers (device, pinned host), asynchronous copies, CUDA-graph capture
and replay, device synchronisation. :class:`TorchCuda` is the real one
(``torch.cuda``); a test passes its own object with the same methods, which runs
the "GPU" work on CPU tensors and records what was called, so that the capture
logic, the events and the copies are tested on machines without a GPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from hetsim.runtime.stream_timer import BusyWait

__all__ = ["CudaDevice", "TorchCuda"]


class CudaDevice(Protocol):
    """What the executor asks of a CUDA device (see :class:`TorchCuda`)."""

    def stream(self, index: int) -> Any: ...
    def event(self, *, timing: bool) -> Any: ...
    def record(self, event: Any, stream: Any) -> None: ...
    def wait(self, stream: Any, event: Any) -> None: ...
    def wait_host(self, event: Any) -> None: ...
    def done(self, event: Any) -> bool: ...
    def elapsed_s(self, start: Any, end: Any) -> float: ...
    def empty(self, like: Any, device: str) -> Any: ...
    def pinned(self, like: Any) -> Any: ...
    def copy(self, dst: Any, src: Any, stream: Any) -> None: ...
    def busy(self, stream: Any, seconds: float) -> None: ...
    def capture(self, body: Callable[[], Any], stream: Any) -> tuple[Any, Any]: ...
    def replay(self, graph: Any, stream: Any) -> None: ...
    def synchronize(self, index: int) -> None: ...
    def using(self, index: int, stream: Any) -> contextlib.AbstractContextManager[Any]: ...


class TorchCuda:
    """:class:`CudaDevice` over ``torch.cuda``."""

    def __init__(self) -> None:
        import torch

        self.torch = torch
        #: GPU -> the stream captured bodies are warmed up on (made once)
        self.side: dict[Any, Any] = {}
        self.spin: Any = None

    def stream(self, index: int) -> Any:
        """A new CUDA stream on GPU ``index``."""
        return self.torch.cuda.Stream(device=index)

    def event(self, *, timing: bool) -> Any:
        """A new CUDA event; ``timing``: one whose times :meth:`elapsed_s` can read
        (costlier to record than a plain one)."""
        return self.torch.cuda.Event(enable_timing=timing)

    def record(self, event: Any, stream: Any) -> None:
        """Record ``event`` on ``stream``."""
        event.record(stream)

    def wait(self, stream: Any, event: Any) -> None:
        """Make ``stream`` wait for ``event`` on the GPU (no host round trip)."""
        stream.wait_event(event)

    def wait_host(self, event: Any) -> None:
        """Block the calling thread until ``event`` has happened (the GIL released)."""
        event.synchronize()

    def done(self, event: Any) -> bool:
        """Whether the work before ``event`` has run (a query: never blocks)."""
        return bool(event.query())

    def elapsed_s(self, start: Any, end: Any) -> float:
        """Seconds from timing event ``start`` to ``end``."""
        return start.elapsed_time(end) * 1e-3

    def empty(self, like: Any, device: str) -> Any:
        """An uninitialised tensor shaped like ``like`` on ``device``."""
        return self.torch.empty(like.shape, dtype=like.dtype, device=device)

    def pinned(self, like: Any) -> Any:
        """An uninitialised pinned (page-locked) host tensor shaped like ``like``."""
        return self.torch.empty(like.shape, dtype=like.dtype, pin_memory=True)

    def copy(self, dst: Any, src: Any, stream: Any) -> None:
        """Copy ``src`` into ``dst`` asynchronously on ``stream`` (the current device's)."""
        with self.torch.cuda.stream(stream):
            dst.copy_(src, non_blocking=True)

    def busy(self, stream: Any, seconds: float) -> None:
        """Keep ``stream`` busy for about ``seconds`` (a spin kernel), so that what the
        host enqueues behind it meanwhile starts when the spin ends, not when the host
        has launched it."""
        if self.spin is None:
            self.spin = BusyWait(self.torch.cuda)
        with self.torch.cuda.stream(stream):
            self.spin(seconds)

    def capture(self, body: Callable[[], Any], stream: Any) -> tuple[Any, Any]:
        """Warm ``body`` up on this GPU's side stream (as torch requires before a
        capture: cuBLAS handles, cuDNN plans and workspaces are made outside it), then
        capture it as a CUDA graph on ``stream``; the graph and what the captured
        ``body`` returned (its static outputs, rewritten in place by each replay).

        The caller captures one segment at a time with no other thread doing CUDA work
        (entering a capture synchronises the device and empties the caching allocator).
        The side stream is made once per GPU and kept (``torch.cuda.Stream`` hands out
        streams round-robin from a fixed pool, so making one per capture aliases them).
        cuBLAS keeps a workspace per handle and stream: the workspaces are dropped
        before the capture, so that the graph allocates its own from its private pool,
        and after it, so that no later work, eager or captured, shares that one; two
        graphs replayed at once on two streams never share a workspace."""
        torch = self.torch
        side = self.side.get(stream.device)
        if side is None:
            side = self.side[stream.device] = torch.cuda.Stream(device=stream.device)
        side.wait_stream(stream)
        with torch.cuda.stream(side):
            body()
        stream.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        torch._C._cuda_clearCublasWorkspaces()
        with torch.cuda.graph(graph, stream=stream, capture_error_mode="thread_local"):
            out = body()
        torch._C._cuda_clearCublasWorkspaces()
        return graph, out

    def replay(self, graph: Any, stream: Any) -> None:
        """Launch a captured graph on ``stream``."""
        with self.torch.cuda.stream(stream):
            graph.replay()

    def synchronize(self, index: int) -> None:
        """Wait for every stream of GPU ``index``."""
        self.torch.cuda.synchronize(index)

    @contextlib.contextmanager
    def using(self, index: int, stream: Any) -> Iterator[None]:
        """Make GPU ``index`` and ``stream`` the calling thread's current ones."""
        torch = self.torch
        with torch.cuda.device(index), torch.cuda.stream(stream):
            yield
