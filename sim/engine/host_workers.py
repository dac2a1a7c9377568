"""The workers of the host model (:mod:`sim.engine.host`): a host thread's hold, a
serial worker (host part, op, host epilogue) and a launching GPU worker (a host thread
that launches, a stream that runs what it launched)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from heapq import heappop
from typing import TYPE_CHECKING, Any

from hetsim.sim.engine.host_costs import GRAPH, gpu_end, host_resource
from hetsim.sim.engine.state import QUEUED

if TYPE_CHECKING:  # pragma: no cover
    import simpy

    from hetsim.sim.engine.host import HostModel
    from hetsim.sim.engine.state import Request

__all__ = ["HostThread", "InterpreterLock", "LaunchingWorker", "SerialWorker"]


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


class HostThread:
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


class SerialWorker:
    """A CPU worker (or a GPU without a launch mode): host part, op, host epilogue."""

    def __init__(self, host: HostModel, di: int, s: int) -> None:
        run = host.run
        self.host, self.run, self.di, self.s = host, run, di, s
        self.thread = HostThread(host, di, s)
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
                g = gpu_end(devices, x.src, x.dst)
                after -= float(g.copy_issue_s) if g is not None else 0.0
        self.thread.hold(max(after, 0.0), "host", u, run.prep.names[u], req,
                         lambda: self.host.issue_placed(self.thread, req, u, collected, self.pull, gates=True))


class LaunchingWorker:
    """A GPU worker with a launch mode: a host thread that launches, a stream that runs
    the launched kernels in order, each once its inputs are on the device."""

    def __init__(self, host: HostModel, di: int, s: int) -> None:
        run = host.run
        self.host, self.run, self.di, self.s = host, run, di, s
        self.thread = HostThread(host, di, s)
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
