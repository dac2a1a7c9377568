"""The event loop of :mod:`sim.engine.array_replay`: the SimPy engine's events, replayed on
flat arrays (compiled with numba, ``cache=True``).

:func:`replay` runs the events that :mod:`sim.engine.servers`, :mod:`sim.engine.ops`
and :class:`sim.engine.run.EngineRun` run for a static plan on a platform without a
launching GPU, memory contention, records or noise, in the same order: one queue of
``(time, id)`` keys, an id per scheduled event taken in the order SimPy takes them
(a server's wake-up, dispatch, kernel or hop; a hand-over's delay; the next
arrival), so that every tie is broken as SimPy breaks it. Every float is computed
with the engine's operations in the engine's order (times ``now + delay``; busy
times summed event by event), so the results are the engine's bit for bit.

Event kinds: a stream's pull, dispatch, end of dispatch and end of kernel (``a``: the
stream); a link direction's pull and end of hop (``a``: the resource); an input
handed over (``a``: request, ``b``: op); the next arrival (``a``: request).

:class:`Tables` holds the run's read-only arrays (V nodes with the graph-input
pseudo-nodes, D devices, R link directions; CSR pairs ``*_ptr`` per node):
``loc, top, tdsp, rank, order, npred, roots`` (the engine's tables); ``same[D, D]``
(memory domains); ``p_ptr, p_node, p_k`` (each node's inputs); ``size_pk[p * n_out +
k]`` (tensor bytes); ``a_ptr, a_buf, a_nref, total, dead`` (buffers allocated when a
node starts: :class:`~sim.engine.prep.Fanout`); ``l_ptr, l_node`` (readers in the
domain); ``ho_ptr, ho_node, ho_delay`` (readers after a hand-over); ``g_ptr`` and per
transfer group ``g_k, g_dst, g_nbytes, g_isout, g_rank``, its hops ``gh_ptr, gh_res,
gh_time`` and readers ``gc_ptr, gc_node``; ``fin_keys`` (the buffers released when a
request completes: graph outputs kept on the host); ``capacity``; ``stream_dev``
(device of each stream, device by device). :class:`State` holds what the run changes,
and its counters.

The event handlers are separate compiled functions over these two tuples (each
compiled once: a first call in a fresh environment compiles them, about a minute on
two cores, later processes load them from ``__pycache__``).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

__all__ = ["State", "Tables", "replay"]

# event kinds
_S_PULL, _S_DISPATCH, _S_DISPATCHED, _S_RAN, _L_PULL, _L_MOVED, _HANDED, _ARRIVE = range(8)
# int state slots (State.st)
_EID, _EVN, _SEQ, _NX, _ZH, _ZT, _FREE, _DONE, _WH, _WN, _STATUS, _LOOP = range(12)

Tables = namedtuple("Tables", (
    "n_ops n_all n_dev n_out host n_req interval nb n_keys span n_streams "
    "loc top tdsp rank order npred roots same p_ptr p_node p_k size_pk a_ptr a_buf a_nref total dead "
    "l_ptr l_node ho_ptr ho_node ho_delay g_ptr g_k g_dst g_nbytes g_isout g_rank gh_ptr gh_res gh_time "
    "gc_ptr gc_node fin_keys capacity stream_dev s_off d_off r_off u_of_group"))
State = namedtuple("State", (
    "st now ev_t ev_i pending refs remaining dheap d_n lheap r_n seq_x x_req x_grp x_hop idle i_head i_n "
    "lidle waiters s_req s_u s_t s_ds l_x l_t zq_r zq_v mem peak busy lbusy lbytes arrivals completions "
    "early fsum"))


def replay(n_ops, n_all, n_dev, n_out, host, n_req, interval, threads,
           loc, top, tdsp, rank, order, npred, roots, same,
           p_ptr, p_node, p_k, size_pk,
           a_ptr, a_buf, a_nref, total, dead,
           l_ptr, l_node, ho_ptr, ho_node, ho_delay,
           g_ptr, g_k, g_dst, g_nbytes, g_isout, g_rank, gh_ptr, gh_res, gh_time, gc_ptr, gc_node,
           fin_keys, capacity, mem, stream_dev, n_res,
           busy, lbusy, lbytes, peak, arrivals, completions, early, fsum):
    """Replay the run; the counters in ``mem, busy, lbusy, lbytes, peak, arrivals,
    completions`` and ``fsum[0]`` (the dispatch slots' busy time); ``early[r]``: bit 1
    when request ``r`` arrived, bit 2 when it completed, before the first event (at
    SimPy's initial time, the int 0). Returns 0 when the run finished, 1 when a
    device's memory would overflow, 2 when a request cannot finish (a deadlock): the
    caller then runs the SimPy engine, whose error or report it gives."""
    i64 = np.int64
    n_streams = len(stream_dev)
    n_groups = len(g_k)
    s_off = np.zeros(n_dev + 1, dtype=i64)
    np.cumsum(np.bincount(stream_dev, minlength=n_dev), out=s_off[1:])
    d_off = np.zeros(n_dev + 1, dtype=i64)
    np.cumsum(np.bincount(loc[:n_ops], minlength=n_dev) * n_req, out=d_off[1:])
    r_off = np.zeros(n_res + 1, dtype=i64)
    np.cumsum(np.bincount(gh_res, minlength=n_res) * n_req, out=r_off[1:])
    span = int(r_off[-1]) + 1
    n_keys = n_all * n_out * n_dev
    u_of_group = np.repeat(np.arange(n_all, dtype=i64), np.diff(g_ptr))
    t = Tables(n_ops, n_all, n_dev, n_out, host, n_req, float(interval), max(n_ops, 1), n_keys, span, n_streams,
               loc, top, tdsp, rank, order, npred, roots, same, p_ptr, p_node, p_k, size_pk,
               a_ptr, a_buf, a_nref, total, dead, l_ptr, l_node, ho_ptr, ho_node, ho_delay,
               g_ptr, g_k, g_dst, g_nbytes, g_isout, g_rank, gh_ptr, gh_res, gh_time, gc_ptr, gc_node,
               fin_keys, capacity, stream_dev, s_off, d_off, r_off, u_of_group)
    ev_cap = n_streams + n_res + 2 + n_req * len(ho_node)
    n_x = max(n_groups * n_req, 1)
    st = np.zeros(12, dtype=i64)
    st[_FREE] = threads
    idle = np.arange(max(n_streams, 1), dtype=i64)  # every stream idle, in order
    s = State(st, np.zeros(1), np.empty(ev_cap), np.empty((ev_cap, 4), dtype=i64),
              np.empty(n_req * n_all, dtype=i64), np.zeros(n_req * n_keys, dtype=i64), np.zeros(n_req, dtype=i64),
              np.empty(max(int(d_off[-1]), 1), dtype=i64), np.zeros(n_dev, dtype=i64),
              np.empty(max(span - 1, 1), dtype=i64), np.zeros(n_res, dtype=i64), np.empty(span, dtype=i64),
              np.empty(n_x, dtype=i64), np.empty(n_x, dtype=i64), np.empty(n_x, dtype=i64),
              idle, np.zeros(n_dev, dtype=i64), np.diff(s_off), np.ones(n_res, dtype=np.bool_),
              np.empty(max(n_streams, 1), dtype=i64), np.zeros(n_streams, dtype=i64), np.zeros(n_streams, dtype=i64),
              np.zeros(n_streams), np.zeros(n_streams), np.zeros(n_res, dtype=i64), np.zeros(n_res),
              np.empty(n_req * n_all + 1, dtype=i64), np.empty(n_req * n_all + 1, dtype=i64),
              mem, peak, busy, lbusy, lbytes, arrivals, completions, early, fsum)
    return run_events(t, s)


@njit(cache=True)
def push_event(s, t, kind, a, b):  # pragma: no cover - compiled
    """Schedule an event at ``t`` (its id: the next one)."""
    st, ev_t, ev_i = s.st, s.ev_t, s.ev_i
    i = st[_EVN]
    st[_EVN] = i + 1
    eid = st[_EID]
    st[_EID] = eid + 1
    while i > 0:
        j = (i - 1) >> 1
        tj = ev_t[j]
        if tj < t or (tj == t and ev_i[j, 0] < eid):
            break
        ev_t[i] = tj
        ev_i[i, 0], ev_i[i, 1], ev_i[i, 2], ev_i[i, 3] = ev_i[j, 0], ev_i[j, 1], ev_i[j, 2], ev_i[j, 3]
        i = j
    ev_t[i] = t
    ev_i[i, 0], ev_i[i, 1], ev_i[i, 2], ev_i[i, 3] = eid, kind, a, b


@njit(cache=True)
def pop_event(s):  # pragma: no cover - compiled
    """Remove the earliest event (the root, read before)."""
    st, ev_t, ev_i = s.st, s.ev_t, s.ev_i
    n = st[_EVN] - 1
    st[_EVN] = n
    if n == 0:
        return
    t = ev_t[n]
    eid, kind, a, b = ev_i[n, 0], ev_i[n, 1], ev_i[n, 2], ev_i[n, 3]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and (ev_t[c + 1] < ev_t[c] or (ev_t[c + 1] == ev_t[c] and ev_i[c + 1, 0] < ev_i[c, 0])):
            c += 1
        if t < ev_t[c] or (t == ev_t[c] and eid < ev_i[c, 0]):
            break
        ev_t[i] = ev_t[c]
        ev_i[i, 0], ev_i[i, 1], ev_i[i, 2], ev_i[i, 3] = ev_i[c, 0], ev_i[c, 1], ev_i[c, 2], ev_i[c, 3]
        i = c
    ev_t[i] = t
    ev_i[i, 0], ev_i[i, 1], ev_i[i, 2], ev_i[i, 3] = eid, kind, a, b


@njit(cache=True)
def heap_push(heap, off, n, key):  # pragma: no cover - compiled
    """Add ``key`` to the heap of ``n`` keys at ``off``."""
    i = n
    while i > 0:
        j = (i - 1) >> 1
        if heap[off + j] <= key:
            break
        heap[off + i] = heap[off + j]
        i = j
    heap[off + i] = key


@njit(cache=True)
def heap_pop(heap, off, n):  # pragma: no cover - compiled
    """The smallest of the ``n`` keys at ``off``, removed (``n - 1`` left)."""
    top_key = heap[off]
    n -= 1
    if n > 0:
        key = heap[off + n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and heap[off + c + 1] < heap[off + c]:
                c += 1
            if key <= heap[off + c]:
                break
            heap[off + i] = heap[off + c]
            i = c
        heap[off + i] = key
    return top_key


@njit(cache=True)
def grow(s, capacity, d, nbytes):  # pragma: no cover - compiled
    """``nbytes`` more on device ``d``; False when it overflows."""
    mem, peak = s.mem, s.peak
    m = mem[d] + nbytes
    mem[d] = m
    if m > peak[d]:
        peak[d] = m
        if m > capacity[d]:
            s.st[_STATUS] = 1
            return False
    return True


@njit(cache=True)
def decref(t, s, r, key):  # pragma: no cover - compiled
    """One reader less of buffer ``key`` of request ``r``; its bytes freed with the last."""
    i = r * t.n_keys + key
    c = s.refs[i] - 1
    s.refs[i] = c
    if c == 0:
        s.mem[key % t.n_dev] -= t.size_pk[key // t.n_dev]


@njit(cache=True)
def ready(t, s, r, v):  # pragma: no cover - compiled
    """Op ``v`` of request ``r`` has its inputs on its device: queued, or completed at no cost."""
    di = t.loc[v]
    st = s.st
    if t.top[v] == 0.0 and t.tdsp[v] == 0.0:
        s.zq_r[st[_ZT]] = r
        s.zq_v[st[_ZT]] = v
        st[_ZT] += 1
        return
    heap_push(s.dheap, t.d_off[di], s.d_n[di], r * t.nb + t.rank[v])
    s.d_n[di] += 1
    if s.i_n[di]:  # wake the first idle stream, at this time
        sid = s.idle[t.s_off[di] + s.i_head[di]]
        s.i_head[di] = (s.i_head[di] + 1) % (t.s_off[di + 1] - t.s_off[di])
        s.i_n[di] -= 1
        push_event(s, s.now[0], _S_PULL, sid, 0)


@njit(cache=True)
def queue_hop(t, s, x):  # pragma: no cover - compiled
    """Queue transfer ``x``'s next hop on its link direction."""
    g = s.x_grp[x]
    ri = t.gh_res[t.gh_ptr[g] + s.x_hop[x]]
    seq = s.st[_SEQ] + 1
    s.st[_SEQ] = seq
    s.seq_x[seq] = x
    heap_push(s.lheap, t.r_off[ri], s.r_n[ri], (s.x_req[x] * t.nb + t.g_rank[g]) * t.span + seq)
    s.r_n[ri] += 1
    if s.lidle[ri]:
        s.lidle[ri] = False
        push_event(s, s.now[0], _L_PULL, ri, 0)


@njit(cache=True)
def start(t, s, r, u, di):  # pragma: no cover - compiled
    """Node ``u`` starts on ``di``: its outputs allocated; False when memory overflows."""
    base = r * t.n_keys
    for a in range(t.a_ptr[u], t.a_ptr[u + 1]):
        s.refs[base + t.a_buf[a]] = t.a_nref[a]
    if t.total[u]:
        return grow(s, t.capacity, di, t.total[u])
    return True


@njit(cache=True)
def fan(t, s, r, u, di):  # pragma: no cover - compiled
    """Node ``u`` is done on ``di``: its readers in the domain, its hand-overs, its transfers."""
    if t.dead[u]:
        s.mem[di] -= t.dead[u]
    pbase = r * t.n_all
    pending = s.pending
    for e in range(t.l_ptr[u], t.l_ptr[u + 1]):
        v = t.l_node[e]
        c = pending[pbase + v] - 1
        pending[pbase + v] = c
        if c == 0:
            ready(t, s, r, v)
    for e in range(t.ho_ptr[u], t.ho_ptr[u + 1]):
        push_event(s, s.now[0] + t.ho_delay[e], _HANDED, r, t.ho_node[e])
    for g in range(t.g_ptr[u], t.g_ptr[u + 1]):
        x = s.st[_NX]
        s.st[_NX] = x + 1
        s.x_req[x], s.x_grp[x], s.x_hop[x] = r, g, 0
        if t.g_isout[g]:
            s.remaining[r] += 1
        queue_hop(t, s, x)


@njit(cache=True)
def complete(t, s, r):  # pragma: no cover - compiled
    """Request ``r`` is done: the graph outputs kept on the host released."""
    for key in t.fin_keys:
        decref(t, s, r, key)
    s.completions[r] = s.now[0]
    if not s.st[_LOOP]:
        s.early[r] |= 2
    s.st[_DONE] += 1


@njit(cache=True)
def finish(t, s, r, u, di):  # pragma: no cover - compiled
    """Op ``u`` has run on ``di``: its inputs released, then :func:`fan`."""
    for e in range(t.p_ptr[u], t.p_ptr[u + 1]):
        p = t.p_node[e]
        dp = t.loc[p]
        d = dp if t.same[di, dp] else di
        decref(t, s, r, (p * t.n_out + t.p_k[e]) * t.n_dev + d)
    fan(t, s, r, u, di)
    s.remaining[r] -= 1
    if s.remaining[r] == 0:
        complete(t, s, r)


@njit(cache=True)
def drain(t, s):  # pragma: no cover - compiled
    """Complete the zero-cost ops made ready by the last event; False on an overflow."""
    st = s.st
    while st[_ZH] < st[_ZT]:
        h = st[_ZH]
        st[_ZH] = h + 1
        r, v = s.zq_r[h], s.zq_v[h]
        if not start(t, s, r, v, t.loc[v]):
            return False
        finish(t, s, r, v, t.loc[v])
    st[_ZH] = 0
    st[_ZT] = 0
    return True


@njit(cache=True)
def arrive(t, s, r):  # pragma: no cover - compiled
    """Request ``r`` arrives: its graph inputs on the host, its first ops ready."""
    s.arrivals[r] = s.now[0]
    if not s.st[_LOOP]:
        s.early[r] |= 1
    pbase = r * t.n_all
    for v in range(t.n_all):
        s.pending[pbase + v] = t.npred[v]
    s.remaining[r] = t.n_ops
    for p in range(t.n_ops, t.n_all):
        if not start(t, s, r, p, t.host):
            return False
        fan(t, s, r, p, t.host)
    for u in t.roots:
        ready(t, s, r, u)
    if s.remaining[r] == 0:
        complete(t, s, r)
    return True


@njit(cache=True)
def arrivals_from(t, s, first):  # pragma: no cover - compiled
    """Start requests ``first, first + 1, ...`` at ``r * interval`` each."""
    for r in range(first, t.n_req):
        target = r * t.interval
        now = s.now[0]
        if target > now:
            push_event(s, now + (target - now), _ARRIVE, r, 0)
            return True
        if not arrive(t, s, r) or not drain(t, s):
            return False
    return True


@njit(cache=True)
def pull(t, s, sid):  # pragma: no cover - compiled
    """Stream ``sid`` takes its most urgent ready op, or goes idle."""
    di = t.stream_dev[sid]
    if s.d_n[di] == 0:
        k = t.s_off[di + 1] - t.s_off[di]
        s.idle[t.s_off[di] + (s.i_head[di] + s.i_n[di]) % k] = sid
        s.i_n[di] += 1
        return True
    key = heap_pop(s.dheap, t.d_off[di], s.d_n[di])
    s.d_n[di] -= 1
    r = key // t.nb
    u = t.order[key - r * t.nb]
    s.s_req[sid], s.s_u[sid] = r, u
    dur, ds = t.top[u], t.tdsp[u]
    s.s_t[sid], s.s_ds[sid] = dur, ds
    if not start(t, s, r, u, di):
        return False
    st = s.st
    if ds > 0.0:
        if st[_FREE]:
            st[_FREE] -= 1
            push_event(s, s.now[0] + ds, _S_DISPATCHED, sid, 0)
        else:
            s.waiters[(st[_WH] + st[_WN]) % t.n_streams] = sid
            st[_WN] += 1
    else:
        push_event(s, s.now[0] + dur, _S_RAN, sid, 0)
    return True


@njit(cache=True)
def link_pull(t, s, ri):  # pragma: no cover - compiled
    """Link direction ``ri`` moves its most urgent queued hop, or goes idle."""
    if s.r_n[ri] == 0:
        s.lidle[ri] = True
        return True
    key = heap_pop(s.lheap, t.r_off[ri], s.r_n[ri])
    s.r_n[ri] -= 1
    x = s.seq_x[key % t.span]
    s.l_x[ri] = x
    g = s.x_grp[x]
    h = s.x_hop[x]
    dur = t.gh_time[t.gh_ptr[g] + h]
    s.l_t[ri] = dur
    if h == 0:  # the transfer starts: its copy on the destination
        r = s.x_req[x]
        u = t.u_of_group[g]
        s.refs[r * t.n_keys + (u * t.n_out + t.g_k[g]) * t.n_dev + t.g_dst[g]] = \
            t.gc_ptr[g + 1] - t.gc_ptr[g] + t.g_isout[g]
        if not grow(s, t.capacity, t.g_dst[g], t.g_nbytes[g]):
            return False
    push_event(s, s.now[0] + dur, _L_MOVED, ri, 0)
    return True


@njit(cache=True)
def arrived(t, s, x):  # pragma: no cover - compiled
    """Transfer ``x``'s last hop is done: the source copy released, the readers given their input."""
    g = s.x_grp[x]
    r = s.x_req[x]
    u = t.u_of_group[g]
    decref(t, s, r, (u * t.n_out + t.g_k[g]) * t.n_dev + t.loc[u])
    pbase = r * t.n_all
    for e in range(t.gc_ptr[g], t.gc_ptr[g + 1]):
        v = t.gc_node[e]
        c = s.pending[pbase + v] - 1
        s.pending[pbase + v] = c
        if c == 0:
            ready(t, s, r, v)
    if t.g_isout[g]:
        s.remaining[r] -= 1
        if s.remaining[r] == 0:
            complete(t, s, r)


@njit(cache=True)
def run_events(t, s):  # pragma: no cover - compiled
    """The initial arrivals, then every event in (time, id) order; the status."""
    st = s.st
    if not arrivals_from(t, s, 0):
        return st[_STATUS]
    st[_LOOP] = 1
    ev_t, ev_i = s.ev_t, s.ev_i
    while st[_EVN]:
        now = ev_t[0]
        kind, a, b = ev_i[0, 1], ev_i[0, 2], ev_i[0, 3]
        pop_event(s)
        s.now[0] = now
        ok = True
        if kind == _S_RAN:
            di = t.stream_dev[a]
            s.busy[di] += s.s_t[a]
            finish(t, s, s.s_req[a], s.s_u[a], di)
            if st[_ZT]:
                ok = drain(t, s)
            ok = ok and pull(t, s, a)
        elif kind == _S_DISPATCHED:
            if st[_WN]:  # the slot handed to the first waiting stream, at this time
                w = s.waiters[st[_WH]]
                st[_WH] = (st[_WH] + 1) % t.n_streams
                st[_WN] -= 1
                push_event(s, now, _S_DISPATCH, w, 0)
            else:
                st[_FREE] += 1
            s.fsum[0] += s.s_ds[a]
            push_event(s, now + s.s_t[a], _S_RAN, a, 0)
        elif kind == _S_DISPATCH:
            push_event(s, now + s.s_ds[a], _S_DISPATCHED, a, 0)
        elif kind == _S_PULL:
            ok = pull(t, s, a)
        elif kind == _L_MOVED:
            x = s.l_x[a]
            g = s.x_grp[x]
            s.lbusy[a] += s.l_t[a]
            s.lbytes[a] += t.g_nbytes[g]
            h = s.x_hop[x] + 1
            s.x_hop[x] = h
            if h < t.gh_ptr[g + 1] - t.gh_ptr[g]:
                queue_hop(t, s, x)
            else:
                arrived(t, s, x)
                if st[_ZT]:
                    ok = drain(t, s)
            ok = ok and link_pull(t, s, a)
        elif kind == _L_PULL:
            ok = link_pull(t, s, a)
        elif kind == _HANDED:
            c = s.pending[a * t.n_all + b] - 1
            s.pending[a * t.n_all + b] = c
            if c == 0:
                ready(t, s, a, b)
                ok = drain(t, s)
        else:  # _ARRIVE
            ok = arrivals_from(t, s, a)
        if not ok:
            return st[_STATUS]
    if st[_DONE] < t.n_req:
        return 2
    return 0
