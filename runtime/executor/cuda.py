"""The CUDA side of the executor: stream workers, copies, events, host synchronisation.

* Each platform GPU stream gets a CUDA stream and a host thread that enqueues the
  ops of its ready heap there (kernels are asynchronous: an op counts as done for
  the scheduler once enqueued, with an event after it that the streams of its
  consumers wait on). TVM kernels are launched on the same stream
  (``tvm_ffi.use_torch_stream``).
* Copies run on two copy streams per GPU (host-to-device, device-to-host), each
  tensor once per destination memory, through pinned host buffers: a CPU tensor is
  staged into a pinned buffer and copied asynchronously (the consumer's stream
  waits on the copy's event); a GPU tensor is copied into a pinned buffer after its
  producer's event, and a synchronisation thread per GPU waits for each such copy
  (in order) before its CPU consumers become ready. GPU to GPU: a peer copy on the
  destination's host-to-device stream.
* Buffers and events are allocated during the first (warm-up) run and reused; the
  executor synchronises every GPU between runs, so reuse is safe, and keeps every
  tensor of a run referenced until the run ends (no cross-stream reuse by the
  caching allocator mid-run).
* Op and copy times come from CUDA events, placed on the host clock through an
  anchor event recorded when the run starts.

This path needs a CUDA GPU; the executor only builds it when a plan uses one.
"""

from __future__ import annotations

import queue
import threading
import time
from heapq import heappop
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.executor.run import Engine, RequestState

__all__ = ["CudaRuntime"]


class CudaRuntime:
    """Streams, buffers, events and helper threads of the GPUs of one execution.

    Parameters
    ----------
    backend
        ``"torch"`` or ``"tvm"`` (TVM tensors cross through DLPack).
    """

    def __init__(self, backend: str) -> None:
        import torch

        self.torch = torch
        self.tvm = backend == "tvm"
        self.compute: dict[tuple[int, int], Any] = {}
        self.h2d: dict[int, Any] = {}
        self.d2h: dict[int, Any] = {}
        self.index: dict[int, int] = {}
        self.sync_q: dict[int, queue.SimpleQueue] = {}
        self.sync_threads: list[threading.Thread] = []
        self.bufs: dict[tuple, Any] = {}
        self.events: dict[tuple, tuple[Any, Any]] = {}
        self.anchor: dict[int, tuple[float, Any]] = {}
        self.xfers: list[tuple] = []

    # --------------------------------------------------------------- lifecycle
    def start(self, engine: Engine) -> None:
        """Create the streams and start one synchronisation thread per GPU memory."""
        torch = self.torch
        for d, spec in enumerate(engine.specs):
            if spec.kind != "gpu" or engine.dev_names[d] not in engine.active:
                continue
            m = engine.dmem[d]
            if m not in self.h2d:
                self.index[m] = spec.index
                self.h2d[m] = torch.cuda.Stream(device=spec.torch_device)
                self.d2h[m] = torch.cuda.Stream(device=spec.torch_device)
                q: queue.SimpleQueue = queue.SimpleQueue()
                self.sync_q[m] = q
                t = threading.Thread(target=self._sync_loop, args=(q,), name=f"hetsim-sync-{spec.name}", daemon=True)
                self.sync_threads.append(t)
                t.start()
            for s in range(engine.streams[d]):
                self.compute[(d, s)] = torch.cuda.Stream(device=spec.torch_device)

    def stop(self) -> None:
        for q in self.sync_q.values():
            q.put(None)
        for t in self.sync_threads:
            t.join(timeout=30)
        self.sync_threads = []

    def begin(self, engine: Engine) -> None:
        """Anchor each GPU's event clock to the host clock (the GPUs are idle)."""
        self.xfers.clear()
        for m, stream in self.h2d.items():
            ev = self._event(("anchor", m))[0]
            with self.torch.cuda.device(self.index[m]):
                ev.record(stream)
            self.anchor[m] = (time.perf_counter(), ev)

    def end(self, engine: Engine) -> None:
        """Wait for every GPU (all events of the run complete)."""
        for m in self.h2d:
            self.torch.cuda.synchronize(self.index[m])

    def _event(self, key: tuple) -> tuple[Any, Any]:
        ev = self.events.get(key)
        if ev is None:
            Event = self.torch.cuda.Event
            ev = self.events[key] = (Event(enable_timing=True), Event(enable_timing=True))
        return ev

    # ------------------------------------------------------------------ worker
    def worker(self, engine: Engine, d: int, s: int) -> None:
        """Enqueue the ready ops of GPU device ``d`` on its stream ``s``, forever."""
        torch = self.torch
        spec = engine.specs[d]
        stream = self.compute[(d, s)]
        try:
            from hetsim.runtime.executor.view import torch_threads

            torch_threads()  # initialise this thread's torch settings before configuring it
            engine.backend.configure(spec)
            with torch.cuda.device(spec.index), torch.cuda.stream(stream):
                if self.tvm:
                    import tvm_ffi

                    with tvm_ffi.use_torch_stream():
                        self._loop(engine, d, s, stream)
                else:
                    self._loop(engine, d, s, stream)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            engine.fail(e, f"GPU worker {engine.dev_names[d]!r}")

    def _loop(self, engine: Engine, d: int, s: int, stream: Any) -> None:
        lock, heap, idle = engine.lock, engine.heaps[d], engine.idle[d]
        wake = threading.Lock()
        wake.acquire()
        mine = engine.dmem[d]
        calls = engine.calls[mine]
        order, n, reqs = engine.order, engine.n, engine.reqs
        pc = time.perf_counter
        recs = engine.op_recs
        while True:
            lock.acquire()
            if not heap:
                idle.append(wake)
                lock.release()
                wake.acquire()
                continue
            key = heappop(heap)
            if key < 0:
                lock.release()
                return
            r, rk = divmod(key, n)
            u = order[rk]
            if engine.dynamic:
                t = engine._price(u, d)
                engine.queued[d] -= t
                engine.stream_end[d][s] = pc() - engine.t0 + t
            st = reqs[r]
            lock.release()
            t_pick = pc()
            call = calls[u]
            args = call.tmpl.copy()
            for i, p, k in call.slots:
                if st.mem[p] == mine:
                    x, ev = st.vals[p][k], st.evs[p]
                else:
                    x, ev = st.cvals[(p, k, mine)]
                args[i] = x
                if ev is not None and ev[1] is not stream:
                    stream.wait_event(ev[0])
            e0, e1 = self._event(("op", r, u, d))
            e0.record(stream)
            out = call(args, r)
            e1.record(stream)
            t_enq = pc()
            st.vals[u] = out
            st.evs[u] = (e1, stream)
            recs.append((u, r, d, s, t_pick, t_enq, e0, e1))
            lock.acquire()
            jobs = engine._finish(st, u, mine)
            lock.release()
            if jobs:
                engine._run_jobs(st, jobs)

    # ------------------------------------------------------------------- copies
    def _as_torch(self, x: Any) -> Any:
        return x if isinstance(x, self.torch.Tensor) else self.torch.from_dlpack(x)

    def _native(self, t: Any) -> Any:
        if not self.tvm:
            return t
        import tvm

        return tvm.runtime.from_dlpack(t)

    def _buf(self, key: tuple, like: Any, *, device: str | None = None, pinned: bool = False) -> Any:
        buf = self.bufs.get(key)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype:
            torch = self.torch
            if pinned:
                buf = torch.empty(like.shape, dtype=like.dtype, pin_memory=True)
            else:
                buf = torch.empty(like.shape, dtype=like.dtype, device=device)
            self.bufs[key] = buf
        return buf

    def copy(self, engine: Engine, st: RequestState, key: tuple[int, int, int]) -> None:
        """Start the copy of output ``key[1]`` of node ``key[0]`` to memory ``key[2]``."""
        torch = self.torch
        p, k, m_dst = key
        m_src, r = st.mem[p], st.r
        x = self._as_torch(st.vals[p][k])
        src_ev = st.evs[p]
        d_src = st.loc[p]
        d_dst = engine.host if m_dst == engine.host_mem else engine.dmem.index(m_dst)
        e0, e1 = self._event(("copy", r, p, k, m_dst))
        nbytes = x.numel() * x.element_size()
        if m_dst not in self.h2d:  # to the host: device -> pinned buffer, then wait for it
            buf = self._buf(("d2h", r, p, k), x, pinned=True)
            stream = self.d2h[m_src]
            with torch.cuda.device(self.index[m_src]), torch.cuda.stream(stream):
                if src_ev is not None:
                    stream.wait_event(src_ev[0])
                e0.record(stream)
                buf.copy_(x, non_blocking=True)
                e1.record(stream)
            self.xfers.append((p, k, r, d_src, d_dst, m_src, e0, e1, nbytes))
            self.sync_q[m_src].put((engine, st, key, self._native(buf), e1))
            return
        stream = self.h2d[m_dst]
        dst = self._buf(("dev", r, p, k, m_dst), x, device=engine.mem_names[m_dst])
        if m_src not in self.h2d:  # from the host: stage in pinned memory, copy async
            stage = self._buf(("stage", r, p, k), x, pinned=True)
            stage.copy_(x)
            src = stage
        else:
            src = x
        with torch.cuda.device(self.index[m_dst]), torch.cuda.stream(stream):
            if src_ev is not None:
                stream.wait_event(src_ev[0])
            e0.record(stream)
            dst.copy_(src, non_blocking=True)
            e1.record(stream)
        self.xfers.append((p, k, r, d_src, d_dst, m_dst, e0, e1, nbytes))
        with engine.lock:
            engine.arrive(st, key, self._native(dst), (e1, stream))

    def _sync_loop(self, q: queue.SimpleQueue) -> None:
        while True:
            item = q.get()
            if item is None:
                return
            engine, st, key, value, ev = item
            try:
                ev.synchronize()
                with engine.lock:
                    engine.arrive(st, key, value, None)
            except BaseException as e:  # noqa: BLE001 - reported to the main thread
                engine.fail(e, f"waiting for the copy of {engine.names[key[0]]!r} to the host")

    # -------------------------------------------------------------------- times
    def _host_time(self, m: int, ev: Any) -> float:
        t_anchor, anchor = self.anchor[m]
        return t_anchor + anchor.elapsed_time(ev) * 1e-3

    def op_times(self, engine: Engine) -> list[tuple]:
        """Op records of the last run with CUDA events turned into host times."""
        out = []
        for rec in engine.op_recs:
            if len(rec) == 8:
                u, r, d, s, t_pick, t_enq, e0, e1 = rec
                m = engine.dmem[d]
                rec = (u, r, d, s, t_pick, t_enq, self._host_time(m, e0), self._host_time(m, e1))
            out.append(rec)
        return out

    def xfer_times(self, engine: Engine) -> list[tuple]:
        """``(producer, output, request, src device, dst device, start, end, bytes)``,
        times from the run's start."""
        return [(p, k, r, ds, dd, self._host_time(m, e0) - engine.t0, self._host_time(m, e1) - engine.t0, nb)
                for p, k, r, ds, dd, m, e0, e1, nb in self.xfers]
