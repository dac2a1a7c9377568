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

The arguments are the run's read-only arrays (V nodes with the graph-input
pseudo-nodes, D devices, R link directions; CSR pairs ``*_ptr`` per node):
``loc, top, tdsp, rank, order, npred, roots`` (the engine's tables); ``same[D, D]``
(memory domains); ``p_ptr, p_node, p_k`` (each node's inputs); ``size_pk[p * n_out +
k]`` (tensor bytes); ``a_ptr, a_buf, a_nref, total, dead`` (buffers allocated when a
node starts: :class:`~sim.engine.prep.Fanout`); ``l_ptr, l_node`` (readers in the
domain); ``ho_ptr, ho_node, ho_delay`` (readers after a hand-over); ``g_ptr`` and per
transfer group ``g_k, g_dst, g_nbytes, g_isout, g_rank``, its hops ``gh_ptr, gh_res,
gh_time`` and readers ``gc_ptr, gc_node``; ``fin_keys`` (the buffers released when a
request completes: graph outputs kept on the host); ``capacity``; ``stream_dev``
(device of each stream, device by device).

The event handlers are closures of the one compiled function, each inlined where it
is called (the loop calls each once): a call per event costs nothing, but the
function is large to compile. The first call in a fresh environment compiles it
(about a minute of CPU on two cores); later processes load it from ``__pycache__``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["replay"]

# event kinds
_S_PULL, _S_DISPATCH, _S_DISPATCHED, _S_RAN, _L_PULL, _L_MOVED, _HANDED, _ARRIVE = range(8)
# int state slots
_EID, _EVN, _SEQ, _NX, _ZH, _ZT, _FREE, _DONE, _WH, _WN, _STATUS, _LOOP = range(12)


@njit(cache=True)
def replay(n_ops, n_all, n_dev, n_out, host, n_req, interval, threads,  # noqa: C901  # pragma: no cover - compiled
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
    nb = max(n_ops, 1)
    n_keys = n_all * n_out * n_dev
    n_streams = len(stream_dev)
    n_groups = len(g_k)
    n_handoff = len(ho_node)
    # per request
    pending = np.empty(n_req * n_all, dtype=np.int64)
    refs = np.zeros(n_req * n_keys, dtype=np.int64)
    remaining = np.zeros(n_req, dtype=np.int64)
    # the event queue: a binary heap of (time, id) with its payload
    ev_cap = n_streams + n_res + 2 + n_req * n_handoff
    ev_t = np.empty(ev_cap)
    ev_id = np.empty(ev_cap, dtype=np.int64)
    ev_kind = np.empty(ev_cap, dtype=np.int64)
    ev_a = np.empty(ev_cap, dtype=np.int64)
    ev_b = np.empty(ev_cap, dtype=np.int64)
    # ready heaps: one per device (keys request base + rank), one per link direction
    # (keys (request base + rank) * span + sequence number)
    per_dev = np.zeros(n_dev, dtype=np.int64)
    for u in range(n_ops):
        per_dev[loc[u]] += 1
    d_off = np.zeros(n_dev + 1, dtype=np.int64)
    for d in range(n_dev):
        d_off[d + 1] = d_off[d] + per_dev[d] * n_req
    dheap = np.empty(max(d_off[n_dev], 1), dtype=np.int64)
    d_n = np.zeros(n_dev, dtype=np.int64)
    per_res = np.zeros(n_res, dtype=np.int64)
    for h in range(len(gh_res)):
        per_res[gh_res[h]] += 1
    r_off = np.zeros(n_res + 1, dtype=np.int64)
    for r in range(n_res):
        r_off[r + 1] = r_off[r] + per_res[r] * n_req
    span = r_off[n_res] + 1
    lheap = np.empty(max(r_off[n_res], 1), dtype=np.int64)
    r_n = np.zeros(n_res, dtype=np.int64)
    seq_x = np.empty(span, dtype=np.int64)
    # transfers in flight
    x_req = np.empty(max(n_groups * n_req, 1), dtype=np.int64)
    x_grp = np.empty(max(n_groups * n_req, 1), dtype=np.int64)
    x_hop = np.empty(max(n_groups * n_req, 1), dtype=np.int64)
    # streams: idle ring per device (its streams), dispatch-slot waiters (a ring)
    s_off = np.zeros(n_dev + 1, dtype=np.int64)
    for s in range(n_streams):
        s_off[stream_dev[s] + 1] += 1
    for d in range(n_dev):
        s_off[d + 1] += s_off[d]
    idle = np.empty(max(n_streams, 1), dtype=np.int64)
    i_head = np.zeros(n_dev, dtype=np.int64)
    i_n = np.zeros(n_dev, dtype=np.int64)
    for d in range(n_dev):
        for s in range(s_off[d], s_off[d + 1]):
            idle[s] = s
        i_n[d] = s_off[d + 1] - s_off[d]
    lidle = np.ones(n_res, dtype=np.bool_)
    waiters = np.empty(max(n_streams, 1), dtype=np.int64)
    s_req = np.zeros(n_streams, dtype=np.int64)
    s_u = np.zeros(n_streams, dtype=np.int64)
    s_t = np.zeros(n_streams)
    s_ds = np.zeros(n_streams)
    l_x = np.zeros(n_res, dtype=np.int64)
    l_t = np.zeros(n_res)
    # ops completed at no cost, drained after each event: (request, op)
    zq_r = np.empty(n_req * n_all + 1, dtype=np.int64)
    zq_v = np.empty(n_req * n_all + 1, dtype=np.int64)
    # the producer of each transfer group
    u_of_group = np.empty(max(n_groups, 1), dtype=np.int64)
    for u in range(n_all):
        for g in range(g_ptr[u], g_ptr[u + 1]):
            u_of_group[g] = u
    st = np.zeros(12, dtype=np.int64)
    st[_FREE] = threads
    now = np.zeros(1)

    def push_event(t, kind, a, b):
        i = st[_EVN]
        st[_EVN] = i + 1
        eid = st[_EID]
        st[_EID] = eid + 1
        while i > 0:
            j = (i - 1) >> 1
            tj = ev_t[j]
            if tj < t or (tj == t and ev_id[j] < eid):
                break
            ev_t[i], ev_id[i], ev_kind[i], ev_a[i], ev_b[i] = tj, ev_id[j], ev_kind[j], ev_a[j], ev_b[j]
            i = j
        ev_t[i], ev_id[i], ev_kind[i], ev_a[i], ev_b[i] = t, eid, kind, a, b

    def pop_event():
        """Remove the earliest event from the root (read before)."""
        n = st[_EVN] - 1
        st[_EVN] = n
        if n == 0:
            return
        t, eid, kind, a, b = ev_t[n], ev_id[n], ev_kind[n], ev_a[n], ev_b[n]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and (ev_t[c + 1] < ev_t[c] or (ev_t[c + 1] == ev_t[c] and ev_id[c + 1] < ev_id[c])):
                c += 1
            if t < ev_t[c] or (t == ev_t[c] and eid < ev_id[c]):
                break
            ev_t[i], ev_id[i], ev_kind[i], ev_a[i], ev_b[i] = ev_t[c], ev_id[c], ev_kind[c], ev_a[c], ev_b[c]
            i = c
        ev_t[i], ev_id[i], ev_kind[i], ev_a[i], ev_b[i] = t, eid, kind, a, b

    def heap_push(heap, off, n, key):
        i = n
        while i > 0:
            j = (i - 1) >> 1
            if heap[off + j] <= key:
                break
            heap[off + i] = heap[off + j]
            i = j
        heap[off + i] = key

    def heap_pop(heap, off, n):
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

    def grow(d, nbytes):
        """``nbytes`` more on device ``d``; False when it overflows."""
        m = mem[d] + nbytes
        mem[d] = m
        if m > peak[d]:
            peak[d] = m
            if m > capacity[d]:
                st[_STATUS] = 1
                return False
        return True

    def decref(r, key):
        i = r * n_keys + key
        c = refs[i] - 1
        refs[i] = c
        if c == 0:
            mem[key % n_dev] -= size_pk[key // n_dev]

    def ready(r, v):
        di = loc[v]
        if top[v] == 0.0 and tdsp[v] == 0.0:
            zq_r[st[_ZT]] = r
            zq_v[st[_ZT]] = v
            st[_ZT] += 1
            return
        heap_push(dheap, d_off[di], d_n[di], r * nb + rank[v])
        d_n[di] += 1
        if i_n[di]:
            sid = idle[s_off[di] + i_head[di]]
            i_head[di] = (i_head[di] + 1) % (s_off[di + 1] - s_off[di])
            i_n[di] -= 1
            push_event(now[0], _S_PULL, sid, 0)

    def queue_hop(x):
        g = x_grp[x]
        ri = gh_res[gh_ptr[g] + x_hop[x]]
        seq = st[_SEQ] + 1
        st[_SEQ] = seq
        seq_x[seq] = x
        heap_push(lheap, r_off[ri], r_n[ri], (x_req[x] * nb + g_rank[g]) * span + seq)
        r_n[ri] += 1
        if lidle[ri]:
            lidle[ri] = False
            push_event(now[0], _L_PULL, ri, 0)

    def start(r, u, di):
        base = r * n_keys
        for a in range(a_ptr[u], a_ptr[u + 1]):
            refs[base + a_buf[a]] = a_nref[a]
        if total[u]:
            return grow(di, total[u])
        return True

    def give(r, nodes, lo, hi):
        """Readers ``nodes[lo:hi]`` of request ``r`` have one more input: ready at the last."""
        pbase = r * n_all
        for e in range(lo, hi):
            v = nodes[e]
            c = pending[pbase + v] - 1
            pending[pbase + v] = c
            if c == 0:
                ready(r, v)

    def fan(r, u, di):
        if dead[u]:
            mem[di] -= dead[u]
        give(r, l_node, l_ptr[u], l_ptr[u + 1])
        for e in range(ho_ptr[u], ho_ptr[u + 1]):
            push_event(now[0] + ho_delay[e], _HANDED, r, ho_node[e])
        for g in range(g_ptr[u], g_ptr[u + 1]):
            x = st[_NX]
            st[_NX] = x + 1
            x_req[x], x_grp[x], x_hop[x] = r, g, 0
            if g_isout[g]:
                remaining[r] += 1
            queue_hop(x)

    def complete(r):
        for key in fin_keys:
            decref(r, key)
        completions[r] = now[0]
        if not st[_LOOP]:
            early[r] |= 2
        st[_DONE] += 1

    def finish(r, u, di):
        for e in range(p_ptr[u], p_ptr[u + 1]):
            p = p_node[e]
            dp = loc[p]
            d = dp if same[di, dp] else di
            decref(r, (p * n_out + p_k[e]) * n_dev + d)
        fan(r, u, di)
        remaining[r] -= 1
        if remaining[r] == 0:
            complete(r)

    def drain():
        while st[_ZH] < st[_ZT]:
            h = st[_ZH]
            st[_ZH] = h + 1
            r, v = zq_r[h], zq_v[h]
            if not start(r, v, loc[v]):
                return False
            finish(r, v, loc[v])
        st[_ZH] = 0
        st[_ZT] = 0
        return True

    def arrive(r):
        arrivals[r] = now[0]
        if not st[_LOOP]:
            early[r] |= 1
        pbase = r * n_all
        for v in range(n_all):
            pending[pbase + v] = npred[v]
        remaining[r] = n_ops
        for p in range(n_ops, n_all):
            if not start(r, p, host):
                return False
            fan(r, p, host)
        for u in roots:
            ready(r, u)
        if remaining[r] == 0:
            complete(r)
        return True

    def arrivals_from(first):
        for r in range(first, n_req):
            target = r * interval
            if target > now[0]:
                push_event(now[0] + (target - now[0]), _ARRIVE, r, 0)
                return True
            if not arrive(r) or not drain():
                return False
        return True

    def pull(sid):
        di = stream_dev[sid]
        if d_n[di] == 0:
            k = s_off[di + 1] - s_off[di]
            idle[s_off[di] + (i_head[di] + i_n[di]) % k] = sid
            i_n[di] += 1
            return True
        key = heap_pop(dheap, d_off[di], d_n[di])
        d_n[di] -= 1
        r = key // nb
        u = order[key - r * nb]
        s_req[sid], s_u[sid] = r, u
        t, ds = top[u], tdsp[u]
        s_t[sid], s_ds[sid] = t, ds
        if not start(r, u, di):
            return False
        if ds > 0.0:
            if st[_FREE]:
                st[_FREE] -= 1
                push_event(now[0] + ds, _S_DISPATCHED, sid, 0)
            else:
                waiters[(st[_WH] + st[_WN]) % n_streams] = sid
                st[_WN] += 1
        else:
            push_event(now[0] + t, _S_RAN, sid, 0)
        return True

    def link_pull(ri):
        if r_n[ri] == 0:
            lidle[ri] = True
            return True
        key = heap_pop(lheap, r_off[ri], r_n[ri])
        r_n[ri] -= 1
        x = seq_x[key % span]
        l_x[ri] = x
        g = x_grp[x]
        h = x_hop[x]
        t = gh_time[gh_ptr[g] + h]
        l_t[ri] = t
        if h == 0:  # the transfer starts: its copy on the destination
            r = x_req[x]
            refs[r * n_keys + (u_of_group[g] * n_out + g_k[g]) * n_dev + g_dst[g]] = \
                gc_ptr[g + 1] - gc_ptr[g] + g_isout[g]
            if not grow(g_dst[g], g_nbytes[g]):
                return False
        push_event(now[0] + t, _L_MOVED, ri, 0)
        return True

    # the initial arrivals (before any event, at SimPy's int 0), then every event; each
    # handler inlined once: the zero-cost ops drained, then the stream or link pulls
    kind, a, b = _ARRIVE, 0, 0
    while True:
        ok = True
        drain_now = False
        stream = link = -1
        if kind == _S_RAN:
            di = stream_dev[a]
            busy[di] += s_t[a]
            finish(s_req[a], s_u[a], di)
            drain_now = True
            stream = a
        elif kind == _S_DISPATCHED:
            if st[_WN]:  # the slot handed to the first waiting stream, at this time
                w = waiters[st[_WH]]
                st[_WH] = (st[_WH] + 1) % n_streams
                st[_WN] -= 1
                push_event(now[0], _S_DISPATCH, w, 0)
            else:
                st[_FREE] += 1
            fsum[0] += s_ds[a]
            push_event(now[0] + s_t[a], _S_RAN, a, 0)
        elif kind == _S_DISPATCH:
            push_event(now[0] + s_ds[a], _S_DISPATCHED, a, 0)
        elif kind == _S_PULL:
            stream = a
        elif kind == _L_MOVED:
            x = l_x[a]
            g = x_grp[x]
            lbusy[a] += l_t[a]
            lbytes[a] += g_nbytes[g]
            h = x_hop[x] + 1
            x_hop[x] = h
            if h < gh_ptr[g + 1] - gh_ptr[g]:
                queue_hop(x)
            else:  # arrived: the source copy released, the readers given their input
                r = x_req[x]
                u = u_of_group[g]
                decref(r, (u * n_out + g_k[g]) * n_dev + loc[u])
                give(r, gc_node, gc_ptr[g], gc_ptr[g + 1])
                if g_isout[g]:
                    remaining[r] -= 1
                    if remaining[r] == 0:
                        complete(r)
                drain_now = True
            link = a
        elif kind == _L_PULL:
            link = a
        elif kind == _HANDED:
            c = pending[a * n_all + b] - 1
            pending[a * n_all + b] = c
            if c == 0:
                ready(a, b)
                drain_now = True
        else:  # _ARRIVE
            ok = arrivals_from(a)
        if ok and drain_now and st[_ZT]:
            ok = drain()
        if ok and stream >= 0:
            ok = pull(stream)
        if ok and link >= 0:
            ok = link_pull(link)
        if not ok:
            return st[_STATUS]
        st[_LOOP] = 1
        if st[_EVN] == 0:
            break
        t = ev_t[0]
        kind, a, b = ev_kind[0], ev_a[0], ev_b[0]
        pop_event()
        now[0] = t
    if st[_DONE] < n_req:
        return 2
    return 0
