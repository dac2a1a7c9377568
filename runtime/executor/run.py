"""The run-time engine of :func:`runtime.executor.execute.execute`: workers, ready queues, copies.

Model (the simulator's, on real devices)
----------------------------------------
* One worker thread per device stream. A CPU worker runs its kernels itself
  (synchronously; torch and TVM release the GIL inside kernels, so workers on
  different cores run in parallel while their Python overhead is serialised by
  the GIL: the simulator's single host dispatcher). A GPU worker launches work
  on its CUDA stream (:mod:`runtime.executor.cuda`): one op at a time
  (``launch="eager"``), or one segment at a time (``launch="graph"``: a
  :class:`~runtime.executor.segments.Segment` replayed as a CUDA graph, which is
  ready when every input it reads from outside is, and counts as all its ops).
* Each device has a ready heap keyed like the simulator's, ``request * n_ops +
  rank`` (rank: position in the plan's ``(priority, topological index)`` order):
  among ready ops a device runs the lowest first.
* An op is ready when each input is in its device's memory. Devices whose real
  devices share memory (every CPU worker) read each other's outputs in place; a
  tensor crossing to another memory (CPU <-> GPU, GPU <-> GPU) is copied once per
  destination memory, however many consumers read it there.
* Graph inputs start in the host's memory when a request starts; graph outputs
  must reach it: a request completes when every op has run and every output is on
  the host. Requests (micro-batches) all start together, as in the simulator.
* A dynamic policy places an op when all its predecessors have finished, through
  a :class:`sim.plan.SystemView` over the live state (:class:`RunView`).

Every scheduling decision happens under one lock, held for a few microseconds;
kernels run outside it.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from heapq import heapify, heappop, heappush
from typing import TYPE_CHECKING, Any

from hetsim.runtime.executor.segments import SegmentRun, segment_tables, successors
from hetsim.runtime.executor.setup import ExecutionError
from hetsim.runtime.executor.view import (
    CachedCost,
    RunView,
    link_resource,
    pin_cores,
    torch_threads,
)
from hetsim.sim.plan import policy_select

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.base import Backend, DeviceSpec
    from hetsim.runtime.executor.segments import Segment
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

__all__ = ["Engine"]

_OUT = -1  # consumer id of a graph output waiting for its copy to the host


class RequestState:
    """State of one request in one run."""

    __slots__ = ("r", "base", "vals", "pending", "loc", "mem", "cvals", "cseq", "inflight", "evs",
                 "remaining", "end", "refs")


class Engine:
    """One plan ready to run: indexed graph, prepared calls, worker threads.

    Parameters
    ----------
    graph, platform, plan
        What runs where.
    specs
        Platform device -> real device.
    calls
        Memory (torch device string) -> node -> prepared call.
    inputs
        Graph input name -> its value in the host's memory (backend tensor).
    backend
        The backend (``configure`` is called in each worker thread).
    cost
        Cost model for the dynamic policy's predictions.
    active
        Platform devices that may run ops (each gets its workers).
    requests
        Requests (micro-batches) per run.
    seed
        Seed of the dynamic policy's ``view.rng``.
    cuda
        :class:`runtime.executor.cuda.CudaRuntime` when a GPU is involved.
    pin
        Pin each CPU worker thread to its own cores (:func:`pin_cores`).
    segments
        GPU device -> its segments (:func:`runtime.executor.segments.gpu_segments`):
        launch each as a CUDA graph (``launch="graph"``); None launches op by op.
    plan_name
        How errors name the plan.
    spin_s
        A pinned CPU worker of a plan without GPU work whose queue is empty polls
        it this long (releasing the GIL between polls) before it blocks (with a GPU
        in the plan, CPU workers block at once: a polling worker would take the
        interpreter lock from the GPU's launching thread): it owns its core, and
        waking a blocked thread on an idle core costs tens of microseconds (an inter-processor
        interrupt; a VM exit on virtual machines) for every dependency between ops
        on different workers. Only while a run is in progress: once its last request
        has completed, the workers block at once, since a worker still polling would
        take its core (and the GIL) from whatever runs next, the next timed run
        first of all.
    """

    def __init__(
        self, graph: Graph, platform: Platform, plan: Plan, specs: dict[str, DeviceSpec],
        calls: dict[str, dict[str, Any]], inputs: dict[str, Any], backend: Backend, cost: Any,
        *, active: list[str], requests: int = 1, seed: int | None = None, cuda: Any = None,
        pin: bool = True, segments: Mapping[str, Sequence[Segment]] | None = None,
        plan_name: str = "plan", spin_s: float = 2e-3,
    ) -> None:
        self.graph, self.platform, self.plan, self.backend = graph, platform, plan, backend
        self.cost = CachedCost(cost)
        self.cuda = cuda
        #: the run's clock: the CUDA device's when it keeps one (a virtual-time device), else the host's
        self.clock = (getattr(cuda.dev, "clock", None) if cuda is not None else None) or time.perf_counter
        self.active = set(active)
        self.n_req = requests
        topo = graph.topological_order()
        n = len(topo)
        self.n = n
        in_names = [str(s.get("name")) for s in graph.meta.get("inputs") or []]
        self.names = topo + in_names
        self.index = {name: i for i, name in enumerate(self.names)}
        self.input_values = [inputs[name] for name in in_names]
        prio = plan.priority
        order = sorted(range(n), key=lambda i: (float(prio.get(topo[i], i)), i))
        self.order = order
        self.rank = [0] * n
        for r, i in enumerate(order):
            self.rank[i] = r
        # devices and memories
        self.dev_names = platform.device_names
        self.dev_index = {d: i for i, d in enumerate(self.dev_names)}
        self.specs = [specs[d] for d in self.dev_names]
        self.mem_names = list(dict.fromkeys(s.torch_device for s in self.specs))
        self.dmem = [self.mem_names.index(s.torch_device) for s in self.specs]
        self.host = self.dev_index[platform.host]
        self.host_mem = self.dmem[self.host]
        self.streams = [d.streams for d in platform.devices]
        # wiring: producers read by each op, and which outputs of each
        reads: list[dict[int, list[int]]] = [{} for _ in range(n)]
        self.calls: list[list[Any]] = [[None] * n for _ in self.mem_names]
        for m, name in enumerate(self.mem_names):
            for node, call in calls.get(name, {}).items():
                self.calls[m][self.index[node]] = call
        for v in range(n):
            call = next((c[v] for c in self.calls if c[v] is not None), None)
            if call is None:
                continue
            for _, p, k in call.slots:
                ks = reads[v].setdefault(p, [])
                if k not in ks:
                    ks.append(k)
        self.reads = reads
        self.succs = successors(reads, len(self.names))
        self.npred = [len(reads[v]) for v in range(n)]
        self.node_tables = (self.reads, self.succs, self.npred)
        self.plan_name = plan_name
        #: the dependency tables of a run that launches CUDA graphs, and the segment of
        #: each head op (index; None elsewhere): ``segments.segment_tables``
        self.segment_tables: tuple[list, list, list] | None = None
        self.segment_at: list[SegmentRun | None] = [None] * n
        if segments:
            self.segment_tables, self.segment_at = segment_tables(reads, segments, self.index, len(self.names))
        #: whether this run launches segments (a traced run launches op by op)
        self.segmented = False
        # Outputs in a run where every device shares one memory (cpu2) are dropped when
        # their last reader has run, as an eager framework does (memory is reused, the
        # allocator keeps its pages); elsewhere they live until the run ends (a GPU
        # consumer is only enqueued when it "finishes").
        self.nrefs = [len(c) for c in self.succs]
        self.free_early = False
        self.outs: list[list[int]] = [[] for _ in self.names]
        self.out_keys: list[tuple[int, int]] = []
        for spec in graph.meta.get("outputs") or []:
            u, k = self.index[spec["node"]], int(spec.get("output", 0))
            self.out_keys.append((u, k))
            if k not in self.outs[u]:
                self.outs[u].append(k)
        for u, _ in self.out_keys:
            self.nrefs[u] = 1 << 30  # graph outputs are kept
        self.loc0 = [self.dev_index[plan.placement[x]] if x in plan.placement else -1 for x in topo]
        self.loc0 += [self.host] * len(in_names)
        self.static = [d >= 0 for d in self.loc0]
        self.dynamic = plan.policy is not None
        # an op launched on a GPU records an event when something may wait for it: a
        # consumer on another device or stream, a copy, a graph output
        outputs = {u for u, _ in self.out_keys}
        self.needs_event = [
            self.dynamic or u in outputs or self.streams[self.loc0[u]] > 1
            or any(self.loc0[v] != self.loc0[u] for v in self.succs[u]) for u in range(n)]
        #: events of graph outputs' copies to the host in the current run (the main thread waits on them)
        self.output_events: list[Any] = []
        self.policy = plan.policy
        self.node_bytes = [int(graph.nx.nodes[x]["bytes"]) for x in topo]
        self.prices: dict[tuple[int, int], float] = {}
        self.view = RunView(self, seed)
        # run state
        self.lock = threading.Lock()
        self.heaps: list[list[int]] = [[] for _ in self.dev_names]
        self.idle: list[list[threading.Lock]] = [[] for _ in self.dev_names]
        self.queued = [0.0] * len(self.dev_names)
        self.stream_end = [[0.0] * s for s in self.streams]
        self.reqs: list[RequestState] = []
        self.t0 = 0.0
        self.t_end = 0.0
        self.left = 0
        self.done = threading.Lock()
        self.error: tuple[BaseException, str] | None = None
        self.op_recs: list[tuple] = []
        #: seconds each run-time placement of the last run took (``_place``, under the lock)
        self.decision_times: list[float] = []
        #: copies arrived so far (their issue numbers, ``RequestState.cseq``)
        self.copies = 0
        self.xfer_recs: list[tuple] = []
        self.threads: list[threading.Thread] = []
        self.spin_s = spin_s
        self.pins: dict[tuple[int, int], set[int]] = (
            pin_cores(self.specs, self.streams, {self.dev_index[x] for x in self.active}) if pin else {})

    @property
    def idle_spin_s(self) -> float:
        """How long an idle CPU worker of this engine polls for its next op before it
        blocks: ``spin_s`` when its workers are pinned (only pinned workers spin) and
        no GPU takes part, else 0."""
        return float(self.spin_s) if any(self.pins.values()) and self.cuda is None else 0.0

    # ----------------------------------------------------------------- pricing
    def price(self, u: int, d: int) -> float:
        """Predicted seconds of op ``u`` on device ``d`` (kernel and host dispatch), remembered."""
        key = (u, d)
        t = self.prices.get(key)
        if t is None:
            dev = self.platform.devices[d]
            name = self.names[u]
            t = self.cost.op_time(self.graph, name, dev) + self.cost.dispatch_time(self.graph, name, dev)
            self.prices[key] = t
        return t

    # ----------------------------------------------------------------- threads
    def start(self) -> None:
        """Create the CUDA streams, capture every GPU segment (:meth:`capture_segments`),
        then start one worker thread per device stream."""
        if self.cuda is not None:
            self.cuda.start(self)
        if self.segment_tables is not None:
            self.capture_segments()
        for d, streams in enumerate(self.streams):
            if self.dev_names[d] not in self.active:
                continue
            for s in range(streams):
                if self.specs[d].kind == "gpu":
                    target = self.cuda.worker
                    args: tuple = (self, d, s)
                else:
                    target, args = self._cpu_worker, (d, s)
                t = threading.Thread(target=target, args=args, name=f"hetsim-{self.dev_names[d]}-{s}", daemon=True)
                self.threads.append(t)
        for t in self.threads:
            t.start()

    def capture_segments(self) -> None:
        """Capture every GPU segment of every request, one at a time, in this thread,
        before any worker thread exists: one run of the plan in launch order, each ready
        op or segment in turn (the lowest key of any device first), its copies waited
        for, every GPU synchronised at the end. A capture then never overlaps another
        thread's CUDA work (a device synchronisation or an allocator flush from another
        thread invalidates a capture in progress; CUDA_NOTES in the GPU guide)."""
        self.begin_run(keep=False, trace=False)
        items = [None if self.dev_names[d] not in self.active else
                 (self.cuda.segment_item(self, d, 0) if spec.kind == "gpu" else self.cpu_item(d))
                 for d, spec in enumerate(self.specs)]
        heaps, order, n = self.heaps, self.order, self.n
        while self.left and self.error is None:
            ready = [(heap[0], d) for d, heap in enumerate(heaps) if heap]
            if not ready:
                raise ExecutionError(f"plan {self.plan_name!r}: the capture run stopped with nothing ready")
            _, d = min(ready)
            key = heappop(heaps[d])
            r, rk = divmod(key, n)
            st = self.reqs[r]
            self.backend.configure(self.specs[d])
            members = items[d](st, order[rk], d, 0)
            if members is None:
                break
            self.complete(st, members, d, 0)
        if self.error is not None:
            exc, where = self.error
            self.error = None
            raise Failure(exc, where)
        self.cuda.end(self)
        self.cuda.capturing = False

    def stop(self) -> None:
        """Stop the workers (each pops a sentinel, lowest key first)."""
        with self.lock:
            for d in range(len(self.dev_names)):
                for _ in range(self.streams[d]):
                    heappush(self.heaps[d], -1)
                while self.idle[d]:
                    self.idle[d].pop().release()
        if self.cuda is not None:
            self.cuda.stop()
        for t in self.threads:
            t.join(timeout=30)
        self.threads = []

    def fail(self, exc: BaseException, where: str) -> None:
        """Record the first error of a worker and wake the main thread."""
        with self.lock:
            if self.error is None:
                self.error = (exc, where)
                self.done.release()

    def _cpu_worker(self, d: int, s: int) -> None:
        try:
            cores = self.pins.get((d, s))
            if cores:
                os.sched_setaffinity(threading.get_native_id(), cores)
            # torch's intra-op thread count is per thread (OpenMP), initialised lazily from
            # a process-wide value on first use: initialise, then set this worker's own
            torch_threads()
            self.backend.configure(self.specs[d])
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            self.fail(e, f"configuring {self.specs[d].name}")
            return
        self.serve(d, s, self.cpu_item(d), spin=self.spin_s if cores and self.cuda is None else 0.0,
                   choose=self.landed_first(d) if self.cuda is not None else None)

    def serve(self, d: int, s: int, item: Any, *, spin: float = 0.0, choose: Any = None) -> None:
        """The loop of the worker of device ``d``'s stream ``s``, CPU and GPU alike: take
        the lowest ready key of the device's heap (blocking while it is empty, after
        polling it ``spin`` seconds; ``choose(heap, key)``, when given, may take another
        key instead, :meth:`landed_first`), run it with ``item(state, op, d, s)`` (the ops
        it completes, or None after a failure, which ends the worker), then
        :meth:`complete` them; a negative key stops the worker."""
        lock, heap, idle = self.lock, self.heaps[d], self.idle[d]
        wake = threading.Lock()
        wake.acquire()
        order, n, reqs = self.order, self.n, self.reqs
        pc = self.clock
        dyn = self.dynamic
        complete = self.complete
        sleep = time.sleep
        while True:
            if spin and not heap and self.left:  # spin-then-block: waking an idle core costs tens of us
                until = pc() + spin
                while not heap and self.left and pc() < until:  # not past the run's end
                    sleep(0)  # releases the GIL
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
            if choose is not None:
                key = choose(heap, key)
            r, rk = divmod(key, n)
            u = order[rk]
            if dyn:  # the stream ends the op after what it already holds (a GPU stream's queue)
                t = self.price(u, d)
                self.queued[d] -= t
                ends = self.stream_end[d]
                now = pc() - self.t0
                ends[s] = (ends[s] if ends[s] > now else now) + t
            st = reqs[r]
            lock.release()
            members = item(st, u, d, s)
            if members is None:
                return
            complete(st, members, d, s)

    def complete(self, st: RequestState, members: Sequence[int], d: int, s: int) -> None:
        """``members`` ran on device ``d``'s stream ``s`` (a CPU op has returned; GPU work
        is launched): their consumers are one input closer, and the copies that makes
        necessary start (outside the lock)."""
        mine = self.dmem[d]
        with self.lock:
            if self.dynamic and self.specs[d].kind != "gpu":  # the stream is free from now on
                self.stream_end[d][s] = self.clock() - self.t0
            jobs: list = []
            for v in members:
                jobs += self.finish(st, v, mine)
        if jobs:
            self.run_jobs(st, jobs)

    def landed_first(self, d: int) -> Any:
        """How a worker of CPU device ``d`` in a plan with GPUs chooses among its ready
        keys (``choose(heap, key)`` of :meth:`serve`, lock held): an op is ready once
        its inputs' copies are issued, but runs only once they have landed, so the
        worker takes the lowest key whose copies from a GPU have all landed (a
        non-blocking event query each); where none has, the one whose last pending copy
        was issued first, and waits for it (an op that becomes ready meanwhile and whose
        copy lands first waits too: the simulator would run it). The simulator's CPU op is ready when
        its copies have landed: without this, a worker blocked on the first-ranked op's
        copy while another op's input was there."""
        mine = self.dmem[d]
        calls, order, n, reqs = self.calls[mine], self.order, self.n, self.reqs
        done = self.cuda.dev.done

        def pending(key: int) -> int:
            """0 when every input copied from a GPU has landed, else the issue number of
            the last one still on its way."""
            r, rk = divmod(key, n)
            st = reqs[r]
            mem, cvals, last = st.mem, st.cvals, 0
            for _, p, k in calls[order[rk]].slots:
                if mem[p] != mine:
                    ev = cvals[(p, k, mine)][1]
                    if ev is not None and not done(ev[0]):
                        last = max(last, st.cseq[(p, k, mine)])
            return last

        def choose(heap: list[int], key: int) -> int:
            best, best_pending = key, pending(key)
            if not best_pending:
                return key
            for k in sorted(heap):
                if k < 0:
                    continue
                p = pending(k)
                if p < best_pending:
                    best, best_pending = k, p
                    if not p:
                        break
            if best != key:
                heap.remove(best)
                heapify(heap)
                heappush(heap, key)
            return best

        return choose

    def cpu_item(self, d: int) -> Any:
        """How a worker of CPU device ``d`` runs op ``u`` of a request: it waits (on the
        host) for the copies of its inputs from a GPU, then calls the kernel."""
        mine = self.dmem[d]
        calls, recs, pc = self.calls[mine], self.op_recs, self.clock
        wait_host = self.cuda.dev.wait_host if self.cuda is not None else None

        def run(st: RequestState, u: int, d: int, s: int) -> tuple[int] | None:
            t_pick = pc()
            call = calls[u]
            args = call.tmpl.copy()
            mem, vals = st.mem, st.vals
            for i, p, k in call.slots:
                if mem[p] == mine:
                    args[i] = vals[p][k]
                else:  # a copy from a GPU: wait for its event here, in this worker
                    args[i], ev = st.cvals[(p, k, mine)]
                    if ev is not None:
                        try:
                            wait_host(ev[0])
                        except BaseException as e:  # noqa: BLE001 - a CUDA error surfaces here
                            self.fail(e, f"{self.cuda.describe(self)}, waited on by node {self.names[u]!r}")
                            return None
            t_call = pc()
            try:
                out = call(args, st.r)
            except BaseException as e:  # noqa: BLE001 - reported to the main thread
                self.fail(e, f"node {self.names[u]!r} on {self.dev_names[d]!r}")
                return None
            t_ret = pc()
            vals[u] = out
            recs.append((u, st.r, d, s, t_pick, t_call, t_ret))
            return (u,)

        return run

    # ---------------------------------------------------------- bookkeeping
    # (all of these run with self.lock held)
    def _ready(self, st: RequestState, v: int) -> None:
        d = st.loc[v]
        heappush(self.heaps[d], st.base + self.rank[v])
        if self.dynamic:
            self.queued[d] += self.price(v, d)
        idle = self.idle[d]
        if idle:
            idle.pop().release()

    def _need(self, st: RequestState, p: int, k: int, m: int, v: int, jobs: list) -> bool:
        """Is output ``k`` of ``p`` in memory ``m``? If not, ``v`` waits for its copy
        (started now unless it is on its way)."""
        key = (p, k, m)
        if key in st.cvals:
            return True
        waiting = st.inflight.get(key)
        if waiting is None:
            st.inflight[key] = [v]
            jobs.append(key)
        else:
            waiting.append(v)
        return False

    def finish(self, st: RequestState, u: int, mu: int) -> list:
        """``u`` has run (CPU) or is enqueued (GPU) with its outputs in memory ``mu``."""
        jobs: list = []
        pending, loc0, dmem, reads = st.pending, self.loc0, self.dmem, self.reads
        if st.refs is not None and u < self.n:
            refs, vals = st.refs, st.vals
            for p in reads[u]:
                c = refs[p] - 1
                refs[p] = c
                if c == 0:
                    vals[p] = None
        for v in self.succs[u]:
            if self.static[v]:
                mv = dmem[loc0[v]]
                c = pending[v] - 1
                if mv != mu:
                    for k in reads[v][u]:
                        if not self._need(st, u, k, mv, v, jobs):
                            c += 1
                pending[v] = c
                if c == 0:
                    self._ready(st, v)
            else:
                c = pending[v] - 1
                pending[v] = c
                if c == 0:
                    self._place(st, v, jobs)
        for k in self.outs[u]:
            if mu == self.host_mem or self._need(st, u, k, self.host_mem, _OUT, jobs):
                st.remaining -= 1
        st.remaining -= 1
        if st.remaining == 0:
            self._complete(st)
        return jobs

    def _place(self, st: RequestState, v: int, jobs: list) -> None:
        t_start = self.clock()
        self.view.state = st
        d = policy_select(self.policy, self.names[v], self.view, self.dev_index, self.dev_names, ExecutionError)
        st.loc[v] = d
        mv = self.dmem[d]
        st.mem[v] = mv
        c = 0
        for p, ks in self.reads[v].items():
            if st.mem[p] != mv:
                for k in ks:
                    if not self._need(st, p, k, mv, v, jobs):
                        c += 1
        st.pending[v] = c
        if c == 0:
            self._ready(st, v)
        self.decision_times.append(self.clock() - t_start)

    def arrive(self, st: RequestState, key: tuple[int, int, int], value: Any, event: Any) -> None:
        """A copy has reached its memory (lock held): its value, and the event of the copy
        where it is still on its way (then its issue number counts in :meth:`landed_first`)."""
        st.cvals[key] = (value, event)
        self.copies += 1
        st.cseq[key] = self.copies
        for v in st.inflight.pop(key):
            if v == _OUT:
                if event is not None:
                    self.output_events.append(event[0])
                st.remaining -= 1
                if st.remaining == 0:
                    self._complete(st)
                continue
            c = st.pending[v] - 1
            st.pending[v] = c
            if c == 0:
                self._ready(st, v)

    def _complete(self, st: RequestState) -> None:
        st.end = self.clock()
        self.left -= 1
        if self.left == 0:
            self.t_end = st.end
            self.done.release()

    def run_jobs(self, st: RequestState, jobs: list) -> None:
        """Start copies (outside the lock)."""
        try:
            for key in jobs:
                self.cuda.copy(self, st, key)
        except BaseException as e:  # noqa: BLE001 - reported to the main thread
            self.fail(e, f"copying output {key[1]} of {self.names[key[0]]!r} to {self.mem_names[key[2]]}")

    # --------------------------------------------------------------------- runs
    def _new_request(self, r: int) -> RequestState:
        st = RequestState()
        n = self.n
        st.r, st.base = r, r * max(n, 1)
        st.vals = [None] * len(self.names)
        st.pending = list(self.npred)
        st.loc = list(self.loc0)
        st.mem = [self.dmem[d] if d >= 0 else -1 for d in self.loc0]
        st.cvals, st.cseq, st.inflight = {}, {}, {}
        st.evs = [None] * len(self.names)
        st.remaining = n + len(self.out_keys)
        st.refs = list(self.nrefs) if self.free_early else None
        st.end = math.nan
        return st

    def begin_run(self, *, keep: bool, trace: bool) -> None:
        """Reset the run state and make the first ops of every request ready (their
        inputs' copies started): what :meth:`run_once` and :meth:`capture_segments`
        start with."""
        self.free_early = not keep and len(self.mem_names) == 1 and self.cuda is None
        self.segmented = self.segment_tables is not None and not trace
        self.reads, self.succs, self.npred = self.segment_tables if self.segmented else self.node_tables
        self.output_events.clear()
        self.reqs[:] = [self._new_request(r) for r in range(self.n_req)]
        self.op_recs.clear()
        self.xfer_recs.clear()
        self.decision_times.clear()
        self.queued = [0.0] * len(self.dev_names)
        self.stream_end = [[0.0] * s for s in self.streams]
        self.left = self.n_req
        self.done.acquire(blocking=False)
        n = self.n
        if self.cuda is not None:
            self.cuda.begin(self, trace=trace)
        self.t0 = self.clock()
        started: list[tuple[RequestState, list]] = []
        with self.lock:
            for st in self.reqs:
                jobs: list = []
                for j, value in enumerate(self.input_values):
                    st.vals[n + j] = (value,)
                    jobs += self._finish_input(st, n + j)
                for v in range(n):
                    if self.npred[v] == 0:
                        if self.static[v]:
                            self._ready(st, v)
                        else:
                            self._place(st, v, jobs)
                if n == 0:
                    self._complete(st)
                if jobs:
                    started.append((st, jobs))
        for st, jobs in started:
            self.run_jobs(st, jobs)

    def run_once(self, timeout_s: float | None = None, *, keep: bool = False, trace: bool = False) -> float:
        """One run of every request; returns the makespan in seconds.

        ``keep``: keep every node's outputs until the run ends (to check them), even
        where they would be dropped after their last reader. ``trace``: launch every
        GPU op eagerly between two CUDA timing events (and time the copies), for
        per-op device times; a run without it records no timing event."""
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-4)  # hand the GIL over quickly to a worker that waits
        gc_was = gc.isenabled()
        gc.disable()
        try:
            self.begin_run(keep=keep, trace=trace)
            if not self.done.acquire(timeout=timeout_s if timeout_s is not None else -1):
                raise ExecutionError(f"a run did not finish within {timeout_s} s (deadlock?)")
            if self.error is not None:
                exc, where = self.error
                raise Failure(exc, where)
            if self.cuda is not None:
                try:
                    if self.output_events:  # the host waits for the graph outputs' copies
                        for ev in self.output_events:
                            self.cuda.dev.wait_host(ev)
                        self.t_end = max(self.t_end, self.clock())
                    self.cuda.end(self)
                except Exception as e:  # a CUDA error of work launched earlier surfaces here
                    raise Failure(e, self.cuda.describe(self)) from e
            makespan = self.t_end - self.t0
        finally:
            sys.setswitchinterval(switch)
            if gc_was:
                gc.enable()
        return makespan

    def _finish_input(self, st: RequestState, p: int) -> list:
        """Graph input ``p`` is on the host: its consumers there are one input closer."""
        st.remaining += 1  # finish counts p as an op; graph inputs are not ops
        return self.finish(st, p, self.host_mem)

    def placement(self) -> dict[str, str]:
        """Node -> the platform device it ran on in request 0 of the last run."""
        loc, names, devs = self.reqs[0].loc, self.names, self.dev_names
        return {names[u]: devs[loc[u]] for u in range(self.n)}

    def outputs(self) -> list[Any]:
        """The graph outputs of request 0 of the last run, in the host's memory."""
        st = self.reqs[0]
        out = []
        for u, k in self.out_keys:
            if st.mem[u] == self.host_mem:
                out.append(st.vals[u][k])
            else:
                out.append(st.cvals[(u, k, self.host_mem)][0])
        return out

    def records(self) -> list[dict[str, Any]]:
        """The last run's records in the simulator's format (times from its start)."""
        t0, names, devs = self.t0, self.names, self.dev_names
        out: list[dict[str, Any]] = []
        op_recs = self.cuda.op_times(self) if self.cuda is not None else self.op_recs
        workers: dict[tuple[int, int], int] = {}
        for rec in op_recs:
            if rec[0] == "launch":  # GPU, untimed: the host's launch of an op or a segment
                _, u, r, d, s, t_pick, t_enq, name = rec
                w = workers.setdefault((d, s), len(workers))
                out.append(_rec("dispatch", name, names[u], r, "dispatch", w, t_pick - t0, t_enq - t0, 0))
                continue
            if len(rec) == 7:  # CPU: the call ends the dispatch and starts the kernel
                u, r, d, s, t_pick, t_call, t_ret = rec
                d_end, o_start = t_call, t_call
            else:  # GPU: host enqueue, then the kernel's CUDA-event times
                u, r, d, s, t_pick, d_end, o_start, t_ret = rec
            w = workers.setdefault((d, s), len(workers))
            out.append(_rec("dispatch", names[u], names[u], r, "dispatch", w, t_pick - t0, d_end - t0, 0))
            out.append(_rec("op", names[u], names[u], r, devs[d], s, o_start - t0, t_ret - t0, self.node_bytes[u]))
        if self.cuda is not None:
            for p, k, r, src, dst, start, end, nbytes in self.cuda.xfer_times(self):
                name = f"{names[p]}[{k}]->{devs[dst]}"
                out.append(_rec("transfer", name, names[p], r, link_resource(self.platform, devs[src], devs[dst]),
                                0, start, end, nbytes, devs[dst], k, 0))
        out.sort(key=lambda x: (x["start"], x["end"]))
        return out


class Failure(Exception):
    """A worker's exception, with where it happened."""

    def __init__(self, exc: BaseException, where: str) -> None:
        super().__init__(f"{where}: {type(exc).__name__}: {exc}")
        self.exc, self.where = exc, where


def _rec(kind: str, name: str, node: str, request: int, resource: str, stream: int, start: float,
         end: float, nbytes: int, dst: str | None = None, output: int | None = None,
         hop: int | None = None) -> dict[str, Any]:
    return {"kind": kind, "name": name, "node": node, "request": request, "resource": resource,
            "stream": stream, "start": start, "end": end, "bytes": nbytes, "dst": dst,
            "output": output, "hop": hop}
