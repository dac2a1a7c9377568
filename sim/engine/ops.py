"""The op handlers of :mod:`sim.engine.simulator`: start, finish, fan-out and readiness.

Every op passes through these once per request, so they are closures over the
run's tables (no attribute lookups in the loop) and take the common case first:
a statically placed op whose readers sit on its own device. Buffers are the
per-request reference counts of :class:`~sim.engine.state.Request` (``refs``,
keyed by :meth:`~sim.engine.prep.Prepared.buffer`): an op's outputs are
allocated on its device when it starts (``Fanout.alloc``: one reference per
local reader edge, per transfer and per kept graph output), each reader releases
its input when it finishes, and a buffer's bytes leave the device when its last
reference goes.
"""

from __future__ import annotations

from heapq import heappush
from typing import TYPE_CHECKING

from hetsim.sim.engine.state import DONE, QUEUED, RUNNING, Transfer

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.run import EngineRun
    from hetsim.sim.engine.state import Request

__all__ = ["bind_op_handlers"]


def bind_op_handlers(run: EngineRun) -> None:
    """Set ``run.start_op``, ``run.fan_out``, ``run.finish_op``, ``run.ready`` and
    ``run.drain``: the handlers the servers call."""
    prep = run.prep
    preds, out_size, rank, names = prep.preds, prep.out_size, prep.rank, prep.names
    domain_same, capacity, dev_names = prep.domain_same, prep.capacity, prep.dev_names
    n_dev, n_out, n_ops = run.n_dev, prep.n_out, prep.n_ops
    sfo, fanout, mem, peak, overflowed = run.sfo, run.fanout, run.mem, run.peak, run.overflowed
    static, top, tdsp, baked = run.static, run.top, run.tdsp, run.baked
    heaps, idle, queued, zero = run.heaps, run.idle, run.queued, run.zero
    dynamic, price, xread, env = run.dynamic, run.price, run.extra_read, run.env
    launching = run.host.launching if run.host is not None else None
    host_ready = run.host.ready if run.host is not None else None
    host_produced = run.host.produced if run.host is not None and run.host.gated_by else None
    #: whether ops place their readers before they are done (``run.launched``: a GPU
    #: op when launched, a CPU op when it has run, before its host epilogue), as the
    #: executor's workers do
    early = dynamic and launching is not None

    def start(req: Request, u: int, di: int) -> None:
        fo = sfo[u] or fanout(u, di)
        req.state[u] = RUNNING
        if fo.alloc:
            refs = req.refs
            for b, _, nref in fo.alloc:
                refs[b] = nref
        total = fo.total
        if total:
            m = mem[di] + total
            mem[di] = m
            if m > peak[di]:
                peak[di] = m
                if m > capacity[di] and di not in overflowed:
                    run.overflow(di, m, req, "op", u)
        if fo.held:
            req.held.extend(fo.held)

    def ready(req: Request, v: int) -> None:
        di = req.loc[v]
        if static[v]:
            t, ds = top[v], tdsp[v]
        else:
            t, ds = price(v, di)
        if not baked[v] and t > 0.0:
            x = xread(v, di, req.loc)
            if x > 0.0:
                req.extra[v] = x
                t += x
        if launching is not None:  # a worker per stream, as the executor runs (sim.engine.host)
            if launching[di]:  # a launching GPU
                host_ready(req, v, di)
                return
        elif t == 0.0 and ds == 0.0:
            zero.append((req, v, di))
            return
        req.state[v] = QUEUED
        heappush(heaps[di], req.base + rank[v])
        if dynamic and launching is None:  # else counted when placed (sim.engine.host)
            queued[di] += t + ds
        waiting = idle[di]
        if waiting:
            waiting.popleft()()

    def fan(req: Request, u: int, di: int) -> None:
        fo = sfo[u] or fanout(u, di)
        req.state[u] = DONE
        if fo.dead_total:
            mem[di] -= fo.dead_total
        pend = req.pending
        for v in fo.local:
            c = pend[v] - 1
            pend[v] = c
            if c == 0:
                ready(req, v)
        if fo.handoff:
            for v, h in fo.handoff:
                env.timeout(h).callbacks.append(lambda _e, req=req, v=v: run.handed(req, v))
        if fo.groups:
            for g in fo.groups:
                x = Transfer(req, u, g.k, di, g.dst, g.hops, g.times, g.nbytes,
                             list(g.consumers) if dynamic else g.consumers, g.is_output, g.rank)
                if g.is_output:
                    req.remaining += 1
                if dynamic:
                    req.xfers[(u, g.k, g.dst)] = x
                if run.collect is not None:  # issued by the worker, one by one (sim.engine.host)
                    run.collect[1].append(x)
                else:
                    run.queue_hop(x)
        if host_produced is not None and not launching[di] and run.collect is None:
            host_produced(req, u)  # else when its launch (GPU) or its copies (a worker) are issued
        if fo.dyn:
            if early and u < n_ops:  # not a graph input (on the host when its request arrives)
                run.produced(req, u, di)
                return
            for v in fo.dyn:
                c = pend[v] - 1
                pend[v] = c
                if c == 0:
                    run.place(req, v)

    def finish(req: Request, u: int, di: int) -> None:
        refs, loc, same = req.refs, req.loc, domain_same[di]
        for p, k in preds[u]:  # release the inputs: the copies in di's memory domain
            dp = loc[p]
            d = dp if same[dp] else di
            key = (p * n_out + k) * n_dev + d
            c = refs[key] - 1
            if c:
                refs[key] = c
            else:
                del refs[key]
                mem[d] -= out_size[p][k]
        fan(req, u, di)
        req.remaining -= 1
        if req.remaining == 0:
            run.complete(req)

    def drain() -> None:
        """Complete the zero-cost ops made ready by the last event."""
        records, node_bytes = run.records, run.node_bytes
        while zero:
            req, v, di = zero.popleft()
            start(req, v, di)
            if records is not None:
                now, name = env.now, names[v]
                records.append(("op", name, name, req.r, dev_names[di], -1, now, now,
                                node_bytes[v], None, None, None))
            finish(req, v, di)

    run.start_op, run.fan_out, run.finish_op, run.ready, run.drain = start, fan, finish, ready, drain
