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
from collections.abc import Callable
from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

from hetsim.sim.engine.state import QUEUED
from hetsim.sim.segments import cut_segments

if TYPE_CHECKING:  # pragma: no cover
    import simpy

    from hetsim.sim.engine.prep import Prepared
    from hetsim.sim.engine.run import EngineRun
    from hetsim.sim.engine.state import Request
    from hetsim.sim.platform import Device, Platform

__all__ = ["EAGER", "GRAPH", "SERIAL", "HostModel", "edge_host_costs", "gpu_to_cpu_handoffs", "host_resource",
           "partition_segments"]

#: how a worker issues its ops: host part then op in series (CPUs, GPUs without a
#: launch mode), one launch per op, one launch per graph segment
SERIAL, EAGER, GRAPH = 0, 1, 2
_MODES = {None: SERIAL, "eager": EAGER, "graph": GRAPH}


def host_resource(device: str) -> str:
    """The record resource of the host threads of ``device``'s workers (one stream
    per worker): ``"gpu.host"``."""
    return f"{device}.host"


def partition_segments(prep: Prepared, loc: list[int], device: int) -> list[list[int]]:
    """The graph segments of ``device``: its ops in the plan's priority order
    (``prep.order``), cut before an op with an input from another device and after
    an op with a reader on another device (the executor's segments,
    ``runtime.executor.segments``).

    Graph inputs and outputs do not cut a segment: inputs are copied when the
    request starts, an output when its segment has run.
    """
    n = prep.n_ops
    preds, succs = prep.preds, prep.succs
    return cut_segments(prep.order, lambda u: loc[u] == device,
                        lambda u: any(p < n and loc[p] != device for p, _ in preds[u]),
                        lambda u: any(loc[v] != device for v, _ in succs[u]))


def edge_host_costs(prep: Prepared, devices: list[Device], u: int, du: int, loc: list[int]) -> tuple[float, float]:
    """Host time of op ``u`` on device ``du`` at its cross-device edges (placements
    ``loc``, -1: not placed yet, no cost): ``(before, after)``.

    Only edges with a GPU at one end cost host time, the GPU's ``event_s`` and
    ``copy_issue_s`` (the producer's when both are GPUs). ``before``: one event wait
    per producer op on another device. ``after``: one event record per other device
    that reads an output (the host counts for a graph output) and one copy issue per
    tensor sent to another memory domain (one per output and destination device).
    """
    n, host = prep.n_ops, prep.host
    before = 0.0
    seen: set[int] = set()
    for p, _ in prep.preds[u]:
        dp = loc[p] if p < n else -1
        if dp < 0 or dp == du or p in seen:
            continue
        seen.add(p)
        g = _gpu_end(devices, dp, du)
        if g is not None:
            before += float(g.event_s)
    after = 0.0
    readers: set[int] = set()
    copies: set[tuple[int, int]] = set()
    same = prep.domain_same[du]
    for v, k in prep.succs[u]:
        dv = loc[v]
        if dv >= 0 and dv != du:
            readers.add(dv)
            if not same[dv]:
                copies.add((k, dv))
    if u < n and host != du:
        for k in prep.graph_outputs.get(u, ()):
            readers.add(host)
            if not same[host]:
                copies.add((k, host))
    for dv in sorted(readers):
        g = _gpu_end(devices, du, dv)
        if g is not None:
            after += float(g.event_s)
    for _, dv in sorted(copies):
        g = _gpu_end(devices, du, dv)
        if g is not None:
            after += float(g.copy_issue_s)
    return before, after


def gpu_to_cpu_handoffs(platform: Platform) -> list[list[float]]:
    """``[src][dst]``: the delay with which a tensor a GPU ``src`` produced, moved to a
    CPU ``dst`` of another memory domain, reaches its readers there (``dst``'s
    ``handoff_s``: the CPU worker waking on the copy's event); 0 otherwise."""
    devices = platform.devices
    return [[float(b.handoff_s) if a.kind == "gpu" and b.kind == "cpu"
             and not platform.shares_memory(a.name, b.name) else 0.0 for b in devices] for a in devices]


def _gpu_end(devices: list[Device], src: int, dst: int) -> Device | None:
    """The GPU at one end of an edge (the producer's when both are), or None."""
    if devices[src].kind == "gpu":
        return devices[src]
    return devices[dst] if devices[dst].kind == "gpu" else None


class InterpreterLock:
    """One lock for the host work of every worker (``Platform.interpreter_lock``),
    handed to waiters in arrival order at the time it is released."""

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.held = False
        self.waiters: deque[Callable[[], None]] = deque()

    def acquire(self, then: Callable[[], None]) -> None:
        """Run ``then`` holding the lock: now when it is free, else when handed over."""
        if self.held:
            self.waiters.append(then)
        else:
            self.held = True
            then()

    def release(self) -> None:
        """Hand the lock to the first waiter (at the current time), or free it."""
        if self.waiters:
            then = self.waiters.popleft()
            self.env.timeout(0).callbacks.append(lambda _e: then())
        else:
            self.held = False


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
        self.mode = [_MODES[d.launch] for d in devices]
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

    def issue_placed(self, thread: _Thread, req: Request, u: int, placing: tuple[list, list],
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
            g = _gpu_end(self.devices, x.src, x.dst)

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
            g = _gpu_end(self.devices, x.src, x.dst)
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
                    _LaunchingWorker(self, di, s)
                else:
                    _SerialWorker(self, di, s)

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


class _Thread:
    """One worker's host thread: holds host work, under the interpreter lock if any,
    and records it."""

    def __init__(self, host: HostModel, di: int, s: int) -> None:
        run = host.run
        self.run, self.env, self.lock, self.s = run, run.env, host.lock, s
        self.resource = host_resource(run.prep.dev_names[di])
        self.names = run.prep.names

    def hold(self, duration: float, kind: str, node: int, name: str, req: Request,
             then: Callable[[], None]) -> None:
        """Hold this thread for ``duration``, then ``then()`` (now when 0)."""
        if duration <= 0.0:
            then()
            return
        lock = self.lock
        env = self.env

        def begin() -> None:
            t0 = env.now

            def end(_e: Any) -> None:
                if lock is not None:
                    lock.release()
                run = self.run
                run.disp_busy += duration
                if run.records is not None:
                    run.records.append((kind, name, self.names[node], req.r, self.resource, self.s, t0,
                                        env.now, 0, None, None, None))
                then()

            env.timeout(duration).callbacks.append(end)

        if lock is None:
            begin()
        else:
            lock.acquire(begin)


class _SerialWorker:
    """A CPU worker (or a GPU without a launch mode): host part, op, host epilogue."""

    def __init__(self, host: HostModel, di: int, s: int) -> None:
        run = host.run
        self.host, self.run, self.di, self.s = host, run, di, s
        self.thread = _Thread(host, di, s)
        self.heap, self.idle = run.heaps[di], run.idle[di]
        contention = run.contention
        self.draws = contention.device[di] if contention is not None else None
        self.req: Any = None
        self.u = 0
        self.t = self.t0 = 0.0
        self.idle.append(self.poke)

    def poke(self) -> None:
        self.run.env.timeout(0).callbacks.append(self.pull)

    def pull(self, _e: Any = None) -> None:
        run, di = self.run, self.di
        if not self.heap:
            self.idle.append(self.poke)
            return
        r, rk = divmod(heappop(self.heap), max(run.prep.n_ops, 1))
        u = self.u = run.prep.order[rk]
        req = self.req = run.reqs[r]
        t, ds = self.host.price(req, u, di)
        if run.dynamic:
            self.host.take(req, u, di, self.s)
        before = self.host.costs(req, u, di)[0]  # its epilogue's: when it has run (ran)
        self.t = t
        run.start_op(req, u, di)
        name = run.prep.names[u]
        self.thread.hold(before + ds, "host", u, name, req, self.compute)

    def compute(self) -> None:
        run, req, u = self.run, self.req, self.u
        if req.factors is not None:
            self.t *= req.factors[u]
        env = run.env
        self.t0 = env.now
        if run.dynamic:
            run.stream_end[self.di][self.s] = self.t0 + self.t
        if self.draws is None:
            env.timeout(self.t).callbacks.append(self.ran)
        else:
            node_bytes = run.prep.node_data[u].get("bytes", 0)
            run.contention.run(self.draws, self.t, node_bytes, (self.di, self.s)).callbacks.append(self.ran)

    def ran(self, _e: Any) -> None:
        run, req, u = self.run, self.req, self.u
        now = run.env.now
        run.busy[self.di] += now - self.t0
        if run.records is not None:
            name = run.prep.names[u]
            run.records.append(("op", name, name, req.r, run.prep.dev_names[self.di], self.s, self.t0, now,
                                run.node_bytes[u], None, None, None))
        # as the executor's worker: u is done (its readers here ready, those of a
        # dynamic plan placed), then it records its events and issues its copies, one
        # at a time, each transfer starting once issued
        di = self.di
        run.collect = collected = ([], [])
        try:
            if run.dynamic:
                run.launched(req, u, di)
            run.finish_op(req, u, di)
        finally:
            run.collect = None
        if run.zero:
            run.drain()
        after = self.host.costs(req, u, di)[1]
        devices = self.host.devices
        for x in collected[1]:  # the copies' share of the epilogue: held one by one
            if x.p == u:
                g = _gpu_end(devices, x.src, x.dst)
                after -= float(g.copy_issue_s) if g is not None else 0.0
        self.thread.hold(max(after, 0.0), "host", u, run.prep.names[u], req,
                         lambda: self.host.issue_placed(self.thread, req, u, collected, self.pull, gates=True))


class _LaunchingWorker:
    """A GPU worker with a launch mode: a host thread that launches, a stream that runs
    the launched kernels in order, each once its inputs are on the device."""

    def __init__(self, host: HostModel, di: int, s: int) -> None:
        run = host.run
        self.host, self.run, self.di, self.s = host, run, di, s
        self.thread = _Thread(host, di, s)
        self.graph = host.mode[di] == GRAPH
        self.depth = int(run.platform.devices[di].launch_queue_depth)
        self.launches = host.launches[di]
        self.fifo: deque[tuple[Request, int]] = deque()
        self.outstanding = 0
        self.blocked = False
        contention = run.contention
        self.draws = contention.device[di] if contention is not None else None
        self.req: Any = None
        self.u = 0
        self.t0 = 0.0
        host.host_idle[di].append(self.poke_host)
        host.kernel_idle[di].append(self.poke_kernel)

    # host thread
    def poke_host(self) -> None:
        self.run.env.timeout(0).callbacks.append(self.launch)

    def launch(self, _e: Any = None) -> None:
        """Launch what is available, in order, until the thread holds host work, the
        queue is full or nothing is left (a loop: launches of no host time follow one
        another at one instant without nesting calls)."""
        run, host, di = self.run, self.host, self.di
        names = run.prep.names
        while True:
            if self.outstanding >= self.depth:
                self.blocked = True
                return
            if not self.launches:
                host.host_idle[di].append(self.poke_host)
                return
            r, rk = divmod(heappop(self.launches), max(run.prep.n_ops, 1))
            u = run.prep.order[rk]
            req = run.reqs[r]
            if self.graph:
                kernels, before, after = host.segment[u]
                name = f"graph {names[u]}..{names[kernels[-1]]}"
            else:
                kernels = [u]
                _, ds = host.price(req, u, di)
                if run.dynamic:
                    host.take(req, u, di, self.s)
                before, after = host.costs(req, u, di)
                before, name = before + ds, names[u]
            self.outstanding += 1
            if before > 0.0:
                self.thread.hold(before, "launch", u, name, req,
                                 lambda req=req, u=u, kernels=kernels, after=after: self.launched(req, u, kernels, after))
                return
            if not self.issue(req, u, kernels, after):
                return

    def launched(self, req: Request, u: int, kernels: list[int], after: float) -> None:
        """The launch's host time is over: issue it, then launch on."""
        if self.issue(req, u, kernels, after):
            self.launch()

    def issue(self, req: Request, u: int, kernels: list[int], after: float) -> bool:
        """The launch is issued: its kernels join the stream; then the host records the
        events and issues the copies of the launch's cross-device outputs. True when
        that takes no time (the thread may launch on now)."""
        fifo = self.fifo
        for v in kernels:
            fifo.append((req, v))
        placing = None
        if self.run.dynamic:  # eager: one op; its epilogue copies to the readers placed now
            placing = self.host.placing(req, kernels, self.di)
            after = self.host.costs(req, u, self.di)[1]
        if self.host.launch_gates:
            self.host.open_gates(req, self.host.launch_gates.get(u))
        idle = self.host.kernel_idle[self.di]
        if self.poke_kernel in idle:
            idle.remove(self.poke_kernel)
            self.poke_kernel()
        if after > 0.0 or (placing is not None and placing[1]):
            def issued() -> None:
                self.copies_issued(req, kernels)
                if placing is not None:
                    self.host.issue_placed(self.thread, req, u, placing, self.launch)
                else:
                    self.launch()

            self.thread.hold(after, "host", u, self.run.prep.names[u], req, issued)
            return False
        self.copies_issued(req, kernels)
        if placing is not None:
            self.host.issue_placed(self.thread, req, u, placing, lambda: None)
        return True

    def copies_issued(self, req: Request, kernels: list[int]) -> None:
        """The host has issued the copies of the launch of ``kernels``: the launches of
        other devices that read them may go (the executor's consumer is ready once its
        copy is issued; its kernel waits on the GPU for the copy)."""
        host = self.host
        if host.gated_by:
            for v in kernels:
                host.produced(req, v)

    # kernel stream
    def poke_kernel(self) -> None:
        self.run.env.timeout(0).callbacks.append(self.pull)

    def pull(self, _e: Any = None) -> None:
        run, di, fifo = self.run, self.di, self.fifo
        if not fifo or fifo[0][0].state[fifo[0][1]] != QUEUED:
            self.host.kernel_idle[di].append(self.poke_kernel)
            return
        req, u = self.req, self.u = fifo.popleft()
        t, _ = self.host.price(req, u, di)
        if req.factors is not None:
            t *= req.factors[u]
        run.start_op(req, u, di)
        env = run.env
        self.t0 = env.now
        if self.draws is None:
            env.timeout(t).callbacks.append(self.ran)
        else:
            node_bytes = run.prep.node_data[u].get("bytes", 0)
            run.contention.run(self.draws, t, node_bytes, (di, self.s)).callbacks.append(self.ran)

    def ran(self, _e: Any) -> None:
        run, req, u, di = self.run, self.req, self.u, self.di
        now = run.env.now
        run.busy[di] += now - self.t0
        if run.records is not None:
            name = run.prep.names[u]
            run.records.append(("op", name, name, req.r, run.prep.dev_names[di], self.s, self.t0, now,
                                run.node_bytes[u], None, None, None))
        run.finish_op(req, u, di)
        if run.zero:
            run.drain()
        if self.host.closes[u] or not self.host.runahead:
            self.outstanding -= 1
            if self.blocked:
                self.blocked = False
                self.poke_host()
        self.pull()
