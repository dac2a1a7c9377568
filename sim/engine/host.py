"""The host as it runs, for platforms whose GPUs say how their kernels are launched
(``Device.launch``: ``"eager"`` or ``"graph"``); the model is described in
:mod:`sim.engine.simulator`.

Every device stream is a worker with a host thread. A CPU worker (and a GPU
without a launch mode) runs each op's host part (its call: the cost model's
dispatch time, plus the event waits of its cross-device inputs), then the op,
then the op's host epilogue (the event it records and the copies it issues for
its cross-device outputs), in series on its one thread. A GPU worker's host
thread launches: in eager mode one op per launch (its dispatch time), in graph
mode one :func:`partition_segments` segment per launch (``graph_launch_s``),
each after the event waits of its cross-device inputs; the launched kernels join
the worker's stream in launch order, and a kernel starts at max(launch issued,
stream free, inputs ready); the thread then records the events and issues the
copies of the launch's cross-device outputs (a copy starts when its producer's
kernel ends). The host thread
launches in the plan's priority order as soon as a request arrives, up to
``launch_queue_depth`` launches whose kernels have not finished; as the executor's
ready heap does, a launch waits for the launches of its own device whose outputs it
reads (the stream then orders the kernels) and for each producer on another device
to finish and issue its copy (the event to wait on exists only then; the kernel then
waits on the GPU for the copy itself), and among the launches free to go the host
takes the one the plan ranks first. A dynamic
plan's ops are launched when they are ready (their device is chosen then), in
eager mode. With ``Platform.interpreter_lock`` every host part holds one lock
shared by all workers (a CPU op's compute does not).
"""

from __future__ import annotations

from collections import deque
from heapq import heappush
from typing import TYPE_CHECKING, Any

from hetsim.sim.engine.host_costs import (
    EAGER,
    GRAPH,
    LAUNCH_MODES,
    SERIAL,
    edge_host_costs,
    gpu_end,
    partition_segments,
)
from hetsim.sim.engine.host_workers import (
    HostThread,
    InterpreterLock,
    LaunchingWorker,
    SerialWorker,
)
from hetsim.sim.engine.state import QUEUED

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from hetsim.sim.engine.prep import Prepared
    from hetsim.sim.engine.run import EngineRun
    from hetsim.sim.engine.state import Request

__all__ = ["HostModel"]


class HostModel:
    """The workers' host threads of one simulation (:mod:`sim.engine.host`).

    The run calls :meth:`arrive` when a request arrives, :meth:`ready` when an op
    of a launching GPU has every input on its device, and :meth:`start` once to
    start the workers.
    """

    def __init__(self, run: EngineRun) -> None:
        prep, platform = run.prep, run.platform
        devices = platform.devices
        self.run, self.prep, self.devices = run, prep, devices
        self.runahead = not run.dynamic
        self.mode = [LAUNCH_MODES[d.launch] for d in devices]
        if run.dynamic:  # placements known only when ready: one launch per op
            self.mode = [EAGER if m == GRAPH else m for m in self.mode]
        #: per device: its ops run through a host thread that launches them
        self.launching = [m != SERIAL for m in self.mode]
        self.lock = InterpreterLock(run.env) if platform.interpreter_lock else None
        n, loc0 = prep.n_ops, prep.loc0
        self.before = [0.0] * n
        self.after = [0.0] * n
        if self.runahead:
            for u in range(n):
                self.before[u], self.after[u] = edge_host_costs(prep, devices, u, loc0[u], loc0)
        # launch items of a static plan, by the rank of their first op
        self.closes = [True] * n  # the kernel whose end retires its launch
        # first op -> (kernels, host time up to the launch, host time after it)
        self.segment: dict[int, tuple[list[int], float, float]] = {}
        self.items: list[list[int]] = [[] for _ in devices]  # per device: ranks launched per request
        self.members: dict[int, list[int]] = {}  # a graph segment's first op -> its ops
        if self.runahead:
            for di, mode in enumerate(self.mode):
                if mode == EAGER:
                    self.items[di] = [prep.rank[u] for u in prep.order if loc0[u] == di]
                elif mode == GRAPH:
                    launch_s = float(devices[di].graph_launch_s)
                    for seg in partition_segments(prep, loc0, di):
                        for u in seg[:-1]:
                            self.closes[u] = False
                        self.members[seg[0]] = seg
                        before = launch_s + sum(self.before[u] for u in seg)
                        self.segment[seg[0]] = (seg, before, sum(self.after[u] for u in seg))
                        self.items[di].append(prep.rank[seg[0]])
        #: a launch waits, as the executor's ready heap does, for the launches of its own
        #: device that it reads from and for its producers on other devices (finished,
        #: their copies issued): launch head -> how many; op -> the heads it gates
        self.gates: dict[int, int] = {}
        self.gated_by: dict[int, list[int]] = {}  # by a producer on another device: its finish
        self.launch_gates: dict[int, list[int]] = {}  # by a launch of the same device: its issue
        if self.runahead:
            self._gate_heads(prep, loc0)
        #: per request: gated heads -> what still holds them
        self.open: dict[int, dict[int, int]] = {}
        self.launches: list[list[int]] = [[] for _ in devices]  # per device: launch keys ready
        self.host_idle: list[deque] = [deque() for _ in devices]
        self.kernel_idle: list[deque] = [deque() for _ in devices]

    def _gate_heads(self, prep: Prepared, loc0: list[int]) -> None:
        """What each launch waits for (static plans): the launch that holds an op of its
        own device it reads (an op launched in no launch, of zero time, stands for what
        it reads in turn) and each producer on another device."""
        n = prep.n_ops
        head: dict[int, int] = {}
        members: dict[int, list[int]] = {}
        for di, ranks in enumerate(self.items):
            for rk in ranks:
                h = prep.order[rk]
                seg = self.members[h] if self.mode[di] == GRAPH else [h]
                members[h] = seg
                for u in seg:
                    head[u] = h
        for h, seg in members.items():
            inside = set(seg)
            waits: set[int] = set()
            launches: set[int] = set()
            stack = [p for u in seg for p, _ in prep.preds[u] if p < n and p not in inside]
            seen: set[int] = set()
            while stack:
                p = stack.pop()
                if p in seen:
                    continue
                seen.add(p)
                if loc0[p] != loc0[h]:
                    waits.add(p)  # a producer on another device: its finish
                elif p in head:
                    launches.add(head[p])  # a launch of this device: its issue
                else:  # launched in no launch (zero time): what it reads
                    stack.extend(q for q, _ in prep.preds[p] if q < n)
            launches.discard(h)
            if waits or launches:
                self.gates[h] = len(waits) + len(launches)
                for w in waits:
                    self.gated_by.setdefault(w, []).append(h)
                for w in launches:
                    self.launch_gates.setdefault(w, []).append(h)

    # ------------------------------------------------------------ from the run
    def arrive(self, req: Request) -> None:
        """Make the launches of request ``req`` available (static plans)."""
        if not self.runahead:
            return
        base = req.base
        gates, order = self.gates, self.prep.order
        if gates:
            self.open[req.r] = dict(gates)
        for di, ranks in enumerate(self.items):
            if ranks:
                heap = self.launches[di]
                pushed = 0
                for rk in ranks:
                    if order[rk] not in gates:
                        heappush(heap, base + rk)
                        pushed += 1
                self._wake_host(self.host_idle[di], pushed)

    def ready(self, req: Request, v: int, di: int) -> None:
        """Op ``v`` of launching device ``di`` has its inputs: its kernel may start once
        launched."""
        req.state[v] = QUEUED
        self._wake(self.kernel_idle[di])

    def placed(self, req: Request, v: int, di: int) -> None:
        """Op ``v`` of a dynamic plan is placed on device ``di``: the policy's view counts
        it as queued there from now (as the executor's, whose placed op is ready once
        its copies are issued), and a launching GPU's host thread may launch it (the
        kernel then waits on the GPU for its inputs, :meth:`ready`)."""
        t, ds = self.run.price(v, di)
        self.run.queued[di] += t + ds
        if self.launching[di]:
            heappush(self.launches[di], req.base + self.prep.rank[v])
            self._wake_host(self.host_idle[di])

    def placing(self, req: Request, ops: list[int], di: int) -> tuple[list, list]:
        """``ops`` of a dynamic plan are launched on, or have run on, device ``di``: place
        the readers they were the last unplaced producers of (``run.launched``). Returns
        those placed with an input to copy, and the transfers their placement started:
        the worker issues those copies after its own (:meth:`issue_placed`), and the
        readers count as queued once it has."""
        run = self.run
        run.collect = collected = ([], [])
        try:
            for u in ops:
                run.launched(req, u, di)
        finally:
            run.collect = None
        return collected

    def issue_placed(self, thread: HostThread, req: Request, u: int, placing: tuple[list, list],
                     then: Callable[[], None], *, gates: bool = False) -> None:
        """The worker on ``thread`` issues the copies ``placing`` holds (``u``'s own, then
        those its placements started), one ``copy_issue_s`` each (of the GPU at either
        end), each transfer starting once issued; then the readers it placed are queued,
        then ``then()``. ``gates``: the launches ``u`` gates open as its copy to their
        device is issued (those that need none, at the end)."""
        placed, copies = placing
        name = self.prep.names[u]
        heads = list(self.gated_by.get(u, ())) if gates and self.gated_by else []
        same, loc0 = self.prep.domain_same, self.prep.loc0

        def step(i: int) -> None:
            if i == len(copies):
                if heads:
                    self.open_gates(req, heads)
                for rq, v, d in placed:
                    self.placed(rq, v, d)
                then()
                return
            x = copies[i]
            g = gpu_end(self.devices, x.src, x.dst)

            def issued() -> None:
                self.run.queue_hop(x)
                if heads and x.p == u:
                    reached = [h for h in heads if same[x.dst][loc0[h]]]
                    for h in reached:
                        heads.remove(h)
                    self.open_gates(req, reached)
                step(i + 1)

            thread.hold(float(g.copy_issue_s) if g is not None else 0.0, "host", u, name, req, issued)

        step(0)

    def issue_inputs(self, collected: tuple[list, list]) -> None:
        """A request's graph inputs arrive: the host issues their copies one by one, one
        ``copy_issue_s`` each (of the GPU at the other end), each transfer starting once
        issued (as the executor's main thread does when a run starts); the readers a
        dynamic plan placed meanwhile are queued once they all are."""
        placed, copies = collected
        run, t = self.run, 0.0
        for x in copies:
            g = gpu_end(self.devices, x.src, x.dst)
            t += float(g.copy_issue_s) if g is not None else 0.0
            if t > 0.0:
                run.env.timeout(t).callbacks.append(lambda _e, x=x: run.queue_hop(x))
            else:
                run.queue_hop(x)
        if placed:
            def queue(_e: Any = None) -> None:
                for rq, v, d in placed:
                    self.placed(rq, v, d)

            if t > 0.0:
                run.env.timeout(t).callbacks.append(queue)
            else:
                queue()

    def take(self, req: Request, u: int, di: int, s: int) -> None:
        """Worker ``s`` of device ``di`` takes op ``u`` of a dynamic plan: the policy's
        view moves it from the device's queue to the stream, ending after what the
        stream holds (the executor's view at a worker's pick)."""
        run = self.run
        t, ds = run.price(u, di)
        run.queued[di] -= t + ds
        ends, now = run.stream_end[di], run.env.now
        ends[s] = (ends[s] if ends[s] > now else now) + t + ds

    def produced(self, req: Request, u: int) -> None:
        """``u`` finished and issued its copies: the launches of other devices it gates
        may go once nothing else holds them."""
        self.open_gates(req, self.gated_by.get(u))

    def open_gates(self, req: Request, heads: list[int] | None) -> None:
        """One thing that held each launch of ``heads`` is done; push those now free."""
        if not heads:
            return
        left = self.open.get(req.r)
        if left is None:
            return
        prep, loc0 = self.prep, self.prep.loc0
        for h in heads:
            c = left[h] - 1
            left[h] = c
            if c == 0:
                di = loc0[h]
                heappush(self.launches[di], req.base + prep.rank[h])
                self._wake_host(self.host_idle[di])

    def retire(self, req: Request) -> None:
        """Forget the gates of a completed request."""
        self.open.pop(req.r, None)

    @staticmethod
    def _wake(idle: deque) -> None:
        while idle:
            idle.popleft()()

    @staticmethod
    def _wake_host(idle: deque, launches: int = 1) -> None:
        """Wake an idle host thread per launch made available, the one that went idle
        last first (the executor's idle workers are a stack)."""
        for _ in range(launches):
            if not idle:
                return
            idle.pop()()

    # ------------------------------------------------------------------ workers
    def start(self) -> None:
        """Start every worker: a serial worker per stream of a non-launching device,
        a host thread and a kernel stream per stream of a launching one."""
        for di, streams in enumerate(self.prep.streams):
            for s in range(streams):
                if self.launching[di]:
                    LaunchingWorker(self, di, s)
                else:
                    SerialWorker(self, di, s)

    def costs(self, req: Request, u: int, di: int) -> tuple[float, float]:
        """Host time of ``u`` on ``di`` at its cross-device edges, before and after."""
        if self.runahead:
            return self.before[u], self.after[u]
        return edge_host_costs(self.prep, self.devices, u, di, req.loc)

    def price(self, req: Request, u: int, di: int) -> tuple[float, float]:
        """(op time with this request's extra reading time, dispatch time) of ``u``."""
        run = self.run
        if run.static[u]:
            t, ds = run.top[u], run.tdsp[u]
        else:
            t, ds = run.price(u, di)
        if req.extra:
            t += req.extra.get(u, 0.0)
        return t, ds
