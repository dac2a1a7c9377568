"""The SimPy processes of :mod:`sim.engine`: one per device stream and link direction.

Each server loops forever: take the most urgent item from its ready heap (or
wait on an event until one is pushed), hold the SimPy clock for its duration,
then hand the result back to the run (``_finish``, ``_xfer_done``). The host
dispatcher is a pool of ``platform.dispatch_threads`` slots that a stream takes
before each kernel launch (FIFO among waiting streams).
"""

from __future__ import annotations

from collections.abc import Generator
from heapq import heappop
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import simpy

    from hetsim.sim.engine import EngineRun

__all__ = ["arrivals", "link", "record", "stream"]


def record(run: EngineRun, *fields: Any) -> None:
    """Keep one record (see :mod:`sim.result`); transfers add dst, output, hop."""
    run.records.append(fields if len(fields) == 12 else fields + (None, None, None))


def arrivals(run: EngineRun) -> Generator[simpy.Event, Any, None]:
    """Start request ``r`` at ``r * interval_s``."""
    env = run.env
    for r in range(run.n_req):
        target = r * run.interval
        if target > env.now:
            yield env.timeout(target - env.now)
        run._arrive(r)
        run._drain()


def stream(run: EngineRun, di: int, s: int) -> Generator[simpy.Event, Any, None]:
    """Stream ``s`` of device ``di``: run the highest-priority ready op, forever."""
    env, prep = run.env, run.prep
    heap, idle, ends = run.heaps[di], run.idle[di], run.stream_end[di]
    static, top, tdsp, queued, busy = run.static, run.top, run.tdsp, run.queued, run.busy
    order, reqs, n = prep.order, run.reqs, max(prep.n_ops, 1)
    free, waiters = run.free_slots, run.slot_waiters
    records, dev_name, names = run.records, prep.dev_names[di], prep.names
    timeout, event = env.timeout, env.event
    start, finish, zero, drain = run._start, run._finish, run.zero, run._drain
    while True:
        if not heap:
            ev = event()
            idle.append(ev)
            yield ev
            continue
        r, rk = divmod(heappop(heap), n)
        u = order[rk]
        req = reqs[r]
        if static[u]:
            t, ds = top[u], tdsp[u]
        else:
            t, ds = run._price(u, di)
        if req.extra:
            t += req.extra.get(u, 0.0)
        queued[di] -= t + ds
        start(req, u, di)
        if ds > 0.0:
            if free:
                slot = free.pop()
            else:
                ev = event()
                waiters.append(ev)
                slot = yield ev
            t0 = env.now
            ends[s] = t0 + ds + t
            yield timeout(ds)
            if waiters:
                waiters.popleft().succeed(slot)
            else:
                free.append(slot)
            run.disp_busy += ds
            if records is not None:
                record(run, "dispatch", names[u], names[u], r, "dispatch", slot, t0, t0 + ds, 0)
        if req.factors is not None:
            t *= req.factors[u]
        t0 = env.now
        ends[s] = t0 + t
        yield timeout(t)
        busy[di] += t
        if records is not None:
            record(run, "op", names[u], names[u], r, dev_name, s, t0, env.now, run.node_bytes[u])
        finish(req, u, di)
        if zero:
            drain()


def link(run: EngineRun, ri: int) -> Generator[simpy.Event, Any, None]:
    """Link direction ``ri``: move the most urgent queued tensor one hop, forever."""
    env, heap, idle = run.env, run.lheaps[ri], run.lidle[ri]
    records, res_name, names = run.records, run.prep.res_names[ri], run.prep.names
    dev_names = run.prep.dev_names
    while True:
        if not heap:
            ev = env.event()
            idle.append(ev)
            yield ev
            continue
        x = heappop(heap)[2]
        h = x.hop
        t = x.times[h]
        rng = x.req.rng
        if rng is not None:
            t *= float(rng.lognormal(-(run.sigma**2) / 2, run.sigma))
        if h == 0:
            run._xfer_start(x)
        t0 = env.now
        yield env.timeout(t)
        run.lbusy[ri] += t
        run.lbytes[ri] += x.nbytes
        if records is not None:
            dst = dev_names[x.dst]
            name = f"{names[x.p]}[{x.k}]->{dst}"
            record(
                run,
                "transfer",
                name,
                names[x.p],
                x.req.r,
                res_name,
                0,
                t0,
                env.now,
                x.nbytes,
                dst,
                x.k,
                h,
            )
        x.hop = h + 1
        if x.hop < len(x.hops):
            run._queue_hop(x)
        else:
            run._xfer_done(x)
            run._drain()
