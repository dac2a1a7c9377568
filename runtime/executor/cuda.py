"""The CUDA side of the executor: stream workers, CUDA graphs, copies, events.

* Each platform GPU stream gets a CUDA stream and a host thread that launches the
  work of its ready heap there (kernels are asynchronous: work counts as done for
  the scheduler once launched, with an event after it that consumers wait on).
* ``launch="graph"`` (static plans, torch backend): the heap holds the device's
  segments (:mod:`runtime.executor.segments`). Every segment of every request is
  warmed up and captured as a CUDA graph during set-up, one at a time, in the main
  thread, before any worker thread exists
  (:meth:`~runtime.executor.run.Engine.capture_segments`): a capture never overlaps
  another thread's CUDA work. Each graph reads its inputs from fixed buffers (copy
  destinations, other segments' outputs), and every run replays it: one launch per
  segment, on whichever stream of its GPU takes it. ``launch="eager"``: one launch per op (TVM
  kernels on the same stream through ``tvm_ffi.use_torch_stream``).
* Dependencies between streams stay on the GPU: the consumer's stream waits on
  the producer's event. A CPU consumer of a GPU tensor blocks on the event of its
  copy (in the CPU worker, no relay thread); the main thread blocks on the events
  of the graph outputs' copies before it stops the clock.
* Copies run on copy streams, each tensor once per destination memory, through
  pinned host buffers: to a GPU on its host-to-device stream, to the host on the
  device-to-host stream of the producer's compute stream (each compute stream has
  its own, so a copy never waits behind another stream's kernel); a CPU tensor is
  written into a pinned buffer by the producer's thread and copied asynchronously;
  a GPU tensor is copied into a pinned buffer after its producer's event. GPU to
  GPU: a peer copy on a stream of its own for that pair of GPUs and direction (the
  simulator's link from one GPU to the other), never behind the destination's copies
  from the host.
* Buffers, events and graphs are made in the first run and reused; the executor
  synchronises every GPU between runs, so reuse is safe, and keeps every tensor of
  a run referenced until the run ends (no cross-stream reuse by the caching
  allocator mid-run, and no reuse of a node's output inside a captured graph).
* Timed runs record no timing event. A traced run (``trace=True``) launches every
  op eagerly between two timing events, each op behind a short GPU spin
  (:data:`TRACE_LEAD_S`) so that its events time the kernels, not the launch, and
  times the copies likewise, placed on the host clock through an anchor event
  recorded when the run starts. Its dispatch records (worker pick to launch
  returned) are the host's cost of each op, the executor's bookkeeping included.

Every CUDA call goes through a :class:`~runtime.executor.device.CudaDevice`
(:class:`~runtime.executor.device.TorchCuda` unless one is given). This path needs
a CUDA GPU, or such a device; the executor builds it only when a plan uses a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetsim.runtime.executor.device import TorchCuda
from hetsim.runtime.executor.setup import ExecutionError
from hetsim.runtime.executor.view import torch_threads

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.executor.device import CudaDevice
    from hetsim.runtime.executor.run import Engine, RequestState
    from hetsim.runtime.executor.segments import SegmentRun

__all__ = ["TRACE_LEAD_S", "Captured", "CudaRuntime"]

#: Seconds of GPU spin queued ahead of each op of a traced run, before its start event:
#: longer than the host's launch of one op (20-55 us per op in eager PyTorch on an H200,
#: the executor's bookkeeping included), so that the op's events time its kernels alone,
#: not the launch that an idle GPU would wait for.
TRACE_LEAD_S = 200e-6


@dataclass
class Captured:
    """One segment captured for one request: the graph, every member's static
    outputs (index -> tuple), and the input buffers it reads (in ``SegmentRun.reads``
    order)."""

    graph: Any
    outs: dict[int, tuple[Any, ...]]
    inputs: list[Any]
    replays: int = 0


class CudaRuntime:
    """Streams, buffers, events and graphs of the GPUs of one execution.

    Parameters
    ----------
    backend
        ``"torch"`` or ``"tvm"`` (TVM tensors cross through DLPack).
    device
        The CUDA calls (default :class:`~runtime.executor.device.TorchCuda`).
    """

    def __init__(self, backend: str, device: CudaDevice | None = None) -> None:
        if device is None:
            device = TorchCuda()
        self.dev = device
        self.tvm = backend == "tvm"
        self.compute: dict[tuple[int, int], Any] = {}
        self.h2d: dict[int, Any] = {}
        #: compute stream -> the stream its outputs are copied to the host on
        self.d2h: dict[tuple[int, int], Any] = {}
        self.copies_of: dict[int, Any] = {}
        #: (source memory, destination memory) -> the stream of the peer copies between two GPUs
        self.peer: dict[tuple[int, int], Any] = {}
        self.index: dict[int, int] = {}
        self.bufs: dict[tuple, Any] = {}
        self.events: dict[tuple, Any] = {}
        #: (segment id, request) -> its captured graph
        self.graphs: dict[tuple[int, int], Captured] = {}
        self.anchor: dict[int, tuple[float, Any]] = {}
        self.xfers: list[tuple] = []
        self.tracing = False
        #: platform device -> the name of its last launch (an op, or ``graph first..last``)
        self.last_launch: dict[str, str] = {}
        #: whether a segment may still be captured (set-up, before the workers start)
        self.capturing = True

    # --------------------------------------------------------------- lifecycle
    def start(self, engine: Engine) -> None:
        """Create each GPU memory's host-to-device copy stream, each compute stream
        with the stream its outputs are copied to the host on, and a peer-copy stream per
        ordered pair of GPU memories: a copy waits on the GPU
        for its producer's kernel, so one device-to-host stream per GPU would hold a
        copy whose producer ended back behind one whose producer is still running (the
        simulator's transfer starts when its producer ends and the link is free)."""
        dev = self.dev
        for d, spec in enumerate(engine.specs):
            if spec.kind != "gpu" or engine.dev_names[d] not in engine.active:
                continue
            m = engine.dmem[d]
            if m not in self.h2d:
                self.index[m] = spec.index
                self.h2d[m] = dev.stream(spec.index)
            for s in range(engine.streams[d]):
                self.compute[(d, s)] = dev.stream(spec.index)
                self.d2h[(d, s)] = dev.stream(spec.index)
                self.copies_of[id(self.compute[(d, s)])] = self.d2h[(d, s)]
        for a in self.h2d:
            for b in self.h2d:
                if a != b:
                    self.peer[(a, b)] = dev.stream(self.index[b])

    def stop(self) -> None:
        """Drop the captured graphs (their memory pools go with them)."""
        self.graphs.clear()

    def begin(self, engine: Engine, *, trace: bool = False) -> None:
        """Start a run; a traced one anchors each GPU's event clock to the host clock
        (the GPUs are idle)."""
        self.xfers.clear()
        self.tracing = trace
        if not trace:
            return
        for m, stream in self.h2d.items():
            ev = self._event(("anchor", m), timing=True)
            with self.dev.using(self.index[m], stream):
                self.dev.record(ev, stream)
            self.anchor[m] = (engine.clock(), ev)

    def end(self, engine: Engine) -> None:
        """Wait for every GPU (all work of the run done)."""
        for m in self.h2d:
            self.dev.synchronize(self.index[m])

    def describe(self, engine: Engine) -> str:
        """Where the GPU work of ``engine``'s plan stood: for an error that surfaces at a
        synchronisation, after the launch that caused it."""
        last = ", ".join(f"{d!r}: {name!r}" for d, name in self.last_launch.items()) or "none"
        return f"plan {engine.plan_name!r}: the GPU work of a run (last launched: {last})"

    def _event(self, key: tuple, *, timing: bool = False) -> Any:
        ev = self.events.get(key)
        if ev is None:
            ev = self.events[key] = self.dev.event(timing=timing)
        return ev

    # ------------------------------------------------------------------ worker
    def worker(self, engine: Engine, d: int, s: int) -> None:
        """Launch the ready work of GPU device ``d`` on its stream ``s``, forever
        (:meth:`runtime.executor.run.Engine.serve` with :meth:`segment_item`)."""
        spec = engine.specs[d]
        stream = self.compute[(d, s)]
        try:
            torch_threads()  # initialise this thread's torch settings before configuring it
            engine.backend.configure(spec)
            with self.dev.using(spec.index, stream):
                if self.tvm:
                    import tvm_ffi

                    with tvm_ffi.use_torch_stream():
                        engine.serve(d, s, self.segment_item(engine, d, s, current=True))
                else:
                    engine.serve(d, s, self.segment_item(engine, d, s, current=True))
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            engine.fail(e, f"GPU worker {engine.dev_names[d]!r}")

    def segment_item(self, engine: Engine, d: int, s: int, *, current: bool = False) -> Any:
        """How GPU device ``d``'s stream ``s`` runs op ``u`` of a request: the launch of
        its segment (``launch="graph"``, ``u`` its head; captured first if it never ran
        for that request) or of the op alone. ``current``: the stream is already the
        calling thread's current one (a worker's); else each launch makes it so."""
        stream = self.compute[(d, s)]
        mine = engine.dmem[d]
        calls = engine.calls[mine]
        index = engine.specs[d].index

        def run(st: RequestState, u: int, d: int, s: int) -> tuple[int, ...] | None:
            seg = engine.segment_at[u] if engine.segmented else None
            if seg is not None:
                return self._launch_segment(engine, st, seg, d, s, stream, calls, mine)
            return (u,) if self._launch_op(engine, st, u, d, s, stream, calls, mine) else None

        if current:
            return run

        def run_here(st: RequestState, u: int, d: int, s: int) -> tuple[int, ...] | None:
            with self.dev.using(index, stream):
                return run(st, u, d, s)

        return run_here

    def _inputs(self, st: RequestState, reads: Any, stream: Any, mine: int) -> list[Any]:
        """The values of ``(producer, output)`` pairs in memory ``mine``; ``stream``
        waits (on the GPU) for those made on another stream."""
        out = []
        for p, k in reads:
            if st.mem[p] == mine:
                x, ev = st.vals[p][k], st.evs[p]
            else:
                x, ev = st.cvals[(p, k, mine)]
            out.append(x)
            if ev is not None and ev[1] is not stream:
                self.dev.wait(stream, ev[0])
        return out

    def _launch_op(self, engine: Engine, st: RequestState, u: int, d: int, s: int, stream: Any,
                   calls: list[Any], mine: int) -> bool:
        """Launch op ``u`` eagerly (between two timing events in a traced run)."""
        t_pick = engine.clock()
        call = calls[u]
        args = call.tmpl.copy()
        r, dev = st.r, self.dev
        for i, p, k in call.slots:  # as _inputs, inline: this is every eager launch's host path
            if st.mem[p] == mine:
                args[i], ev = st.vals[p][k], st.evs[p]
            else:
                args[i], ev = st.cvals[(p, k, mine)]
            if ev is not None and ev[1] is not stream:
                dev.wait(stream, ev[0])
        e0 = e1 = None
        if self.tracing:  # the op's device time: launched while a spin holds the stream
            e0 = self._event(("op0", r, u, d), timing=True)
            e1 = self._event(("op1", r, u, d), timing=True)
            dev.busy(stream, TRACE_LEAD_S)
            dev.record(e0, stream)
        try:
            out = call(args, r)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            engine.fail(e, f"node {engine.names[u]!r} on {engine.dev_names[d]!r}")
            return False
        if e1 is None and engine.needs_event[u]:
            e1 = self._event(("op", r, u, d))
        if e1 is not None:
            dev.record(e1, stream)
        t_enq = engine.clock()
        self.last_launch[engine.dev_names[d]] = engine.names[u]
        st.vals[u] = out
        st.evs[u] = (e1, stream) if e1 is not None else None
        if self.tracing:
            engine.op_recs.append((u, r, d, s, t_pick, t_enq, e0, e1))
        else:
            engine.op_recs.append(("launch", u, r, d, s, t_pick, t_enq, engine.names[u]))
        return True

    def _launch_segment(self, engine: Engine, st: RequestState, seg: SegmentRun, d: int, s: int,
                        stream: Any, calls: list[Any], mine: int) -> tuple[int, ...] | None:
        """Replay segment ``seg`` for request ``st`` (captured first if it never ran
        for it); its members, or None after a failure (reported to the main thread)."""
        t_pick = engine.clock()
        r = st.r
        where = (f"plan {engine.plan_name!r}: the CUDA graph of the segment from node {seg.first!r} "
                 f"({len(seg.members)} ops) on {engine.dev_names[d]!r}")
        try:
            inputs = self._inputs(st, seg.reads, stream, mine)
            cap = self.graphs.get((seg.id, r))
            if cap is None:
                if not self.capturing:
                    raise ExecutionError("not captured during set-up (a capture while workers run could collide)")
                try:
                    cap = self._capture(seg, calls, inputs, r, stream)
                except Exception as e:
                    text = (str(e).strip().splitlines() or [""])[0][:300]
                    raise ExecutionError(
                        f"capture failed: {type(e).__name__}: {text} (an op that waits for the host cannot be "
                        "captured: run this plan with launch 'eager')") from e
                self.graphs[(seg.id, r)] = cap
            elif any(x is not y for x, y in zip(inputs, cap.inputs)):
                raise ExecutionError("an input buffer moved since the capture")
            self.dev.replay(cap.graph, stream)
            cap.replays += 1
            ev = self._event(("segment", r, seg.id))
            self.dev.record(ev, stream)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            engine.fail(e, where)
            return None
        t_enq = engine.clock()
        self.last_launch[engine.dev_names[d]] = seg.name
        evs, vals, outs = st.evs, st.vals, cap.outs
        done = (ev, stream)
        for v in seg.members:
            vals[v] = outs[v]
            evs[v] = done
        engine.op_recs.append(("launch", seg.members[0], r, d, s, t_pick, t_enq, seg.name))
        return seg.members

    def _capture(self, seg: SegmentRun, calls: list[Any], inputs: list[Any], r: int, stream: Any) -> Captured:
        """Warm the segment up and capture it for request ``r``."""
        external = dict(zip(seg.reads, inputs))
        members = seg.members

        def body() -> dict[int, tuple[Any, ...]]:
            outs: dict[int, tuple[Any, ...]] = {}
            for v in members:
                call = calls[v]
                args = call.tmpl.copy()
                for i, p, k in call.slots:
                    args[i] = outs[p][k] if p in outs else external[(p, k)]
                outs[v] = call(args, r)
            return outs

        graph, outs = self.dev.capture(body, stream)
        return Captured(graph, outs, list(inputs))

    # ------------------------------------------------------------------- copies
    def _as_torch(self, x: Any) -> Any:
        if not self.tvm:
            return x
        import torch

        return x if isinstance(x, torch.Tensor) else torch.from_dlpack(x)

    def _native(self, t: Any) -> Any:
        if not self.tvm:
            return t
        import tvm

        return tvm.runtime.from_dlpack(t)

    def _buf(self, key: tuple, like: Any, *, device: str | None = None) -> Any:
        buf = self.bufs.get(key)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype:
            buf = self.dev.pinned(like) if device is None else self.dev.empty(like, device)
            self.bufs[key] = buf
        return buf

    def copy(self, engine: Engine, st: RequestState, key: tuple[int, int, int]) -> None:
        """Start the copy of output ``key[1]`` of node ``key[0]`` to memory ``key[2]``."""
        dev = self.dev
        p, k, m_dst = key
        m_src, r = st.mem[p], st.r
        x = self._as_torch(st.vals[p][k])
        src_ev = st.evs[p]
        d_src = st.loc[p]
        d_dst = engine.host if m_dst == engine.host_mem else engine.dmem.index(m_dst)
        nbytes = x.numel() * x.element_size()
        to_host = m_dst not in self.h2d
        m_gpu = m_src if to_host else m_dst
        if to_host:  # on the producer's stream's own copy stream (a GPU op always has its event here)
            stream = self.copies_of[id(src_ev[1])]
        elif m_src in self.h2d:  # GPU to GPU: that pair's own stream
            stream = self.peer[(m_src, m_dst)]
        else:
            stream = self.h2d[m_dst]
        if to_host:  # device -> pinned buffer; the consumer waits on the copy's event
            dst = self._buf(("d2h", r, p, k), x)
            src = x
        else:
            dst = self._buf(("dev", r, p, k, m_dst), x, device=engine.mem_names[m_dst])
            if m_src not in self.h2d:  # from the host: written into pinned memory, copied async
                src = self._buf(("stage", r, p, k), x)
                src.copy_(x)
            else:
                src = x
        e0 = self._event(("copy0", r, p, k, m_dst), timing=True) if self.tracing else None
        e1 = self._event(("copy1" if self.tracing else "copy", r, p, k, m_dst), timing=self.tracing)
        with dev.using(self.index[m_gpu], stream):
            if src_ev is not None:
                dev.wait(stream, src_ev[0])
            if e0 is not None:
                dev.record(e0, stream)
            dev.copy(dst, src, stream)
            dev.record(e1, stream)
        if self.tracing:
            self.xfers.append((p, k, r, d_src, d_dst, m_gpu, e0, e1, nbytes))
        with engine.lock:
            engine.arrive(st, key, self._native(dst), (e1, stream))

    # -------------------------------------------------------------------- times
    def _host_time(self, m: int, ev: Any) -> float:
        t_anchor, anchor = self.anchor[m]
        return t_anchor + self.dev.elapsed_s(anchor, ev)

    def op_times(self, engine: Engine) -> list[tuple]:
        """Op records of the last run with a traced run's CUDA events turned into host times."""
        out = []
        for rec in engine.op_recs:
            if len(rec) == 8 and rec[0] != "launch":
                u, r, d, s, t_pick, t_enq, e0, e1 = rec
                m = engine.dmem[d]
                rec = (u, r, d, s, t_pick, t_enq, self._host_time(m, e0), self._host_time(m, e1))
            out.append(rec)
        return out

    def xfer_times(self, engine: Engine) -> list[tuple]:
        """``(producer, output, request, src device, dst device, start, end, bytes)`` of
        a traced run's copies, times from the run's start (none in a timed run)."""
        return [(p, k, r, ds, dd, self._host_time(m, e0) - engine.t0, self._host_time(m, e1) - engine.t0, nb)
                for p, k, r, ds, dd, m, e0, e1, nb in self.xfers]
