"""The servers of :mod:`sim.engine.simulator`: device streams, link directions, arrivals.

Each server is a small state machine driven by SimPy events: take the most
urgent item from its ready heap (or wait, idle, until one is pushed), hold the
SimPy clock for its duration with a :class:`simpy.events.Timeout`, then hand the
result back to the run (``_finish``, ``_xfer_done``) and take the next. On a
platform with memory domains (:mod:`sim.contention`) the duration is held by the
contention model's event instead, which stretches it while the memory is
oversubscribed; records and busy times are then the stretched durations. The host
dispatcher is a pool of ``platform.dispatch_threads`` slots that a stream takes
before each kernel launch (FIFO among waiting streams).

The machines are plain callbacks on SimPy events rather than SimPy processes:
the same events, scheduled in the same order at the same times (so the same
records), without a generator to resume per event. An idle server is woken, and
a freed dispatch slot handed to a waiting stream, through an event at the
current time, as a process waiting on an event would be: whatever else is due
at that time and was scheduled first still runs first.

A server has at most one event pending at a time (its dispatch, its kernel or
hop, or its wake-up), so it owns one :class:`Due` event that it schedules again
and again (the entry :meth:`simpy.Environment.schedule` would push, pushed onto
:class:`Clock`'s queue) instead of creating a ``Timeout`` each time: the same (time,
priority, creation order) keys, so the same order of events, without an object or a
call per event.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import NORMAL, Event, Timeout

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.run import EngineRun

__all__ = ["Clock", "Due", "start_servers"]


class Clock(simpy.Environment):
    """SimPy's environment whose :meth:`run` (to the last event, the engine's only use)
    steps in one loop: what :meth:`simpy.Environment.step` does per event (pop the
    earliest ``(time, priority, id)``, run its callbacks, raise a failed event's error),
    without a method call and an exception handler per event. Every event, its time
    and its order are SimPy's.

    ``now`` is a plain attribute, kept equal to SimPy's clock, and ``queue``/``ids``
    name SimPy's event queue and event counter, so that a server schedules its
    :class:`Due` with one ``heappush`` of the key ``schedule`` would push."""

    now: float = 0.0  # an attribute here, SimPy's property on the base class

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        self.now = self._now
        self.queue, self.ids = self._queue, self._eid

    def step(self) -> None:
        """:meth:`simpy.Environment.step`, the clock attribute kept up to date."""
        super().step()
        self.now = self._now

    def run(self, until: Any = None) -> Any:
        """Process every event (``until``: as :meth:`simpy.Environment.run`)."""
        if until is not None:
            return super().run(until)
        queue = self._queue
        pop = heappop
        while queue:
            self._now, _, _, event = entry = pop(queue)
            self.now = entry[0]
            callbacks, event.callbacks = event.callbacks, None
            for callback in callbacks:
                callback(event)
            if not event.ok and not event.defused:
                failure = event.value
                exc = type(failure)(*failure.args)
                exc.__cause__ = failure
                raise exc
        return None


class Due(Event):
    """The one event of a server, triggered (``ok``) whenever it is scheduled.

    The owner sets ``callbacks`` (a tuple) and schedules it by pushing
    ``(env.now + delay, NORMAL, next(env.ids), due)`` onto ``env.queue`` (a
    :class:`Clock`): what ``Timeout(env, delay)`` does, minus the new object. SimPy sets ``callbacks`` to None when it processes the event,
    after which the owner may schedule it again.
    """

    _ok = True
    _value = None

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.callbacks = None


def start_servers(run: EngineRun) -> None:
    """Idle every stream (every worker, :mod:`sim.engine.host`, on a platform with a
    launching GPU) and link direction, then start the first request(s)."""
    if run.host is not None:
        run.host.start()
    else:
        for di, streams in enumerate(run.prep.streams):
            for s in range(streams):
                _stream(run, di, s)
    for ri in range(len(run.prep.res_names)):
        _link(run, ri)
    _arrivals(run, 0)


def _arrivals(run: EngineRun, first: int) -> None:
    """Start requests ``first, first + 1, ...`` at ``r * interval_s`` each."""
    env = run.env
    for r in range(first, run.n_req):
        target = r * run.interval
        if target > env.now:
            Timeout(env, target - env.now).callbacks.append(lambda _e, r=r: _arrivals(run, r))
            return
        run.arrive(r)
        run.drain()


def _stream(run: EngineRun, di: int, s: int) -> None:
    """Stream ``s`` of device ``di``: run the highest-priority ready op, forever."""
    env, prep = run.env, run.prep
    queue, ids, due = env.queue, env.ids, Due(env)
    heap, idle, ends = run.heaps[di], run.idle[di], run.stream_end[di]
    static, top, tdsp, queued, busy = run.static, run.top, run.tdsp, run.queued, run.busy
    order, reqs, n = prep.order, run.reqs, max(prep.n_ops, 1)
    free, waiters = run.free_slots, run.slot_waiters
    records, dev_name, names = run.records, prep.dev_names[di], prep.names
    node_bytes = run.node_bytes
    start, finish, zero, drain, price = run.start_op, run.finish_op, run.zero, run.drain, run.price
    dynamic = run.dynamic
    contention = run.contention
    draws = contention.device[di] if contention is not None else None
    node_data = prep.node_data
    decision = run.decision if dynamic else 0.0
    batch: list = []
    req: Any = None
    u = slot = 0
    t = ds = t0 = hold = 0.0
    then: tuple = ()  # what a stream waiting for a dispatch slot does when given one

    def poke() -> None:  # an idle stream, woken at the current time
        due.callbacks = pull_cbs
        heappush(queue, (env.now, NORMAL, next(ids), due))

    def give(taken: int) -> None:  # a dispatch slot handed over at the current time
        nonlocal slot
        slot = taken
        due.callbacks = then
        heappush(queue, (env.now, NORMAL, next(ids), due))

    def pull(_ev: Any = None) -> None:
        nonlocal req, u, t, ds, slot, then
        if not heap:
            idle.append(poke)
            return
        r, rk = divmod(heappop(heap), n)
        u = order[rk]
        req = reqs[r]
        if static[u]:
            t, ds = top[u], tdsp[u]
        else:
            t, ds = price(u, di)
        if req.extra:
            t += req.extra.get(u, 0.0)
        if dynamic:
            queued[di] -= t + ds
        start(req, u, di)
        if ds > 0.0:
            if free:
                slot = free.pop()
                dispatch(None)
            else:
                then = dispatch_cbs
                waiters.append(give)
        else:
            launch()

    def dispatch(_ev: Any) -> None:
        nonlocal t0
        t0 = env.now
        if dynamic:
            ends[s] = t0 + ds + t
        due.callbacks = dispatched_cbs
        heappush(queue, (env.now + ds, NORMAL, next(ids), due))

    def release(kind: str, held: float) -> None:  # the dispatch slot, held from t0 for ``held``
        if waiters:
            waiters.popleft()(slot)
        else:
            free.append(slot)
        run.disp_busy += held
        if records is not None:
            name = names[u]
            records.append((kind, name, name, req.r, "dispatch", slot, t0, t0 + held, 0,
                            None, None, None))

    def dispatched(_ev: Any) -> None:
        release("dispatch", ds)
        launch()

    def launch() -> None:
        nonlocal t, t0
        if req.factors is not None:
            t *= req.factors[u]
        t0 = env.now
        if dynamic:
            ends[s] = t0 + t
        if draws is None:
            due.callbacks = ran_cbs
            heappush(queue, (env.now + t, NORMAL, next(ids), due))
        else:  # memory contention: slower while the memory is oversubscribed
            contention.run(draws, t, node_data[u].get("bytes", 0), (di, s)).callbacks.append(ran)

    def ran(_ev: Any) -> None:
        nonlocal t, hold, slot, then
        if draws is not None:
            t = env.now - t0
        busy[di] += t
        if records is not None:
            name = names[u]
            records.append(("op", name, name, req.r, dev_name, s, t0, env.now, node_bytes[u],
                            None, None, None))
        if decision:
            run.deciding = batch
        finish(req, u, di)
        if zero:
            drain()
        if decision:
            run.deciding = None
            if batch:  # this worker places the ops u made placeable, holding a dispatch slot
                hold = len(batch) * decision
                if free:
                    slot = free.pop()
                    decide(None)
                else:
                    then = decide_cbs
                    waiters.append(give)
                return
        pull()

    def decide(_ev: Any) -> None:
        nonlocal t0
        t0 = env.now
        due.callbacks = decided_cbs
        heappush(queue, (env.now + hold, NORMAL, next(ids), due))

    def decided(_ev: Any) -> None:
        release("decision", hold)
        for rq, v, h in batch:
            run.handed_after(rq, v, h)
        batch.clear()
        pull()

    decide_cbs, decided_cbs = (decide,), (decided,)
    pull_cbs, dispatch_cbs, dispatched_cbs, ran_cbs = (pull,), (dispatch,), (dispatched,), (ran,)
    idle.append(poke)


def _link(run: EngineRun, ri: int) -> None:
    """Link direction ``ri``: move the most urgent queued tensor one hop, forever."""
    env, heap, idle = run.env, run.lheaps[ri], run.lidle[ri]
    queue, ids, due = env.queue, env.ids, Due(env)
    records, res_name, names = run.records, run.prep.res_names[ri], run.prep.names
    dev_names, lbusy, lbytes = run.prep.dev_names, run.lbusy, run.lbytes
    mu, sigma = -(run.sigma**2) / 2, run.sigma
    contention = run.contention
    draws = contention.link[ri] if contention is not None else None
    transfer_started, transfer_done, zero, drain = run.transfer_started, run.transfer_done, run.zero, run.drain
    x: Any = None
    h = 0
    t = t0 = 0.0

    def poke() -> None:  # an idle link direction, woken at the current time
        due.callbacks = pull_cbs
        heappush(queue, (env.now, NORMAL, next(ids), due))

    def pull(_ev: Any = None) -> None:
        nonlocal x, h, t, t0
        if not heap:
            idle.append(poke)
            return
        x = heappop(heap)[2]
        h = x.hop
        t = x.times[h]
        rng = x.req.rng
        if rng is not None:
            t *= float(rng.lognormal(mu, sigma))
        if h == 0:
            transfer_started(x)
        t0 = env.now
        if draws is None:
            due.callbacks = moved_cbs
            heappush(queue, (env.now + t, NORMAL, next(ids), due))
        else:  # memory contention: slower while the memory is oversubscribed
            contention.run(draws, t, x.nbytes).callbacks.append(moved)

    def moved(_ev: Any) -> None:
        nonlocal t
        if draws is not None:
            t = env.now - t0
        lbusy[ri] += t
        lbytes[ri] += x.nbytes
        if records is not None:
            dst = dev_names[x.dst]
            records.append(("transfer", f"{names[x.p]}[{x.k}]->{dst}", names[x.p], x.req.r, res_name,
                            0, t0, env.now, x.nbytes, dst, x.k, h))
        x.hop = h + 1
        if x.hop < len(x.hops):
            run.queue_hop(x)
        else:
            transfer_done(x)
            if zero:
                drain()
        pull()

    pull_cbs, moved_cbs = (pull,), (moved,)
    idle.append(poke)
