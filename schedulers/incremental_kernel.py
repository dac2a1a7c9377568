"""Compiled inner loops of :class:`~schedulers.incremental_estimate.IncrementalListSchedule`.

:func:`run_window` re-runs the list-scheduling estimator of
:func:`schedulers.eft_state.list_schedule` (``insertion=False, contention=True``)
from one position of the order, with the rejoin, dominance and tail cuts that
:mod:`schedulers.incremental_estimate` describes; :func:`splice_window` makes a
re-run part of the base schedule. Both work on flat arrays indexed by position
(compiled with numba, ``cache=True``: the first call in a fresh environment
compiles them, a few seconds, later processes load them from ``__pycache__``).
Every float is computed with the operations, in the order, of the estimator, so
makespans equal it bit for bit.

Arrays (V positions, K tensors, D devices, R resources, G resource groups):

``G`` (static): ``reads_ptr, reads_k`` and ``outs_ptr, outs_k`` (CSR per
position: tensors read, graph outputs written), ``kprod`` (producer position
per tensor, -1 for a graph input), ``klast`` (last reader), ``nlast`` (last
successor per position), ``ksz`` (size class per tensor), ``hop_n[U, D, D]``,
``hop_r``/``hop_t[U, D, D, H]`` (resource and seconds of each hop per size class),
``hop_sum`` (their sum), ``w``/``disp[V, D]``, ``hlanes`` (dispatch lanes),
``dl_ptr, dl`` (stream lanes per device), ``group[R]``, ``mono[R]`` (a group of
one), ``host``, ``cptr`` (first slot per position of the transfers it may make),
``readers_ptr, readers_c, readers_k`` (who reads each position's outputs) and
``kreaders_ptr, kreaders_c`` (who reads each tensor).

``B`` (the base schedule): ``place, finish, contrib[V]``, ``state[V + 1, R]``
(resource free times before each position), ``uses[V, G]`` (groups each position
writes), ``glast[G]`` (last position writing each group), ``entry_pos,
entry_val[K x D]`` (where and when each cached transfer was made), ``cn[V]``,
``ckd, ca`` (transfers made per position, in the ``cptr`` slots), ``premax,
sufmax[V + 1]`` (prefix and suffix maxima of ``contrib``).

``T`` (tails, :mod:`schedulers.placement_tails`): ``tstart, tvalid, nxt_lane,
nxt_disp``.

``W`` (scratch and the re-run's result, indexed like ``B``): ``chgdev[V]`` (new
device per position, -1: unchanged), ``place, finish, contrib, state, uses, cn,
ckd, ca``, then ``ov_val, ov_stamp`` (transfers of this run), ``exp_cnt,
exp_stamp`` (pending differences expiring per position), the watch list
``wk_kind, wk_x, wk_val, wk_d, wk_last`` and ``cur[R]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hetsim.schedulers.placement_tails import (
    extend_tails,
    tail_cached,
    tail_host,
    tail_lane,
    tail_node,
)

__all__ = ["run_window", "splice_window"]

_STRUCT, _BETTER, _WORSE = 0, 1, 2


@njit(cache=True, inline="always")
def _arrive(k, src, t0, dst, i, p, run_id, nd, ksz, hop_n, hop_r, hop_t, group, cur, wuses,
            ov_val, ov_stamp, entry_pos, entry_val, cptr, wcn, wckd, wca):  # pragma: no cover - compiled
    """Tensor ``k``, ready on ``src`` at ``t0``, on ``dst``: cached, or over each hop in turn."""
    u = ksz[k]
    nh = hop_n[u, src, dst]
    if nh == 0:
        return t0
    kd = k * nd + dst
    if ov_stamp[kd] == run_id:
        return ov_val[kd]
    ep = entry_pos[kd]
    if ep >= 0 and ep < i:
        return entry_val[kd]
    a = t0
    for h in range(nh):
        r = hop_r[u, src, dst, h]
        if cur[r] > a:
            a = cur[r]
        a += hop_t[u, src, dst, h]
        cur[r] = a
        wuses[p, group[r]] = 1
    ov_stamp[kd] = run_id
    ov_val[kd] = a
    c = cptr[p] + wcn[p]
    wckd[c] = kd
    wca[c] = a
    wcn[p] += 1
    return a


@njit(cache=True, inline="always")
def _pend(q, c, run_id, exp_cnt, exp_stamp, counts):  # pragma: no cover - compiled
    """A difference of kind ``c`` pending until position ``q``."""
    counts[c] += 1
    if exp_stamp[q] != run_id:
        exp_stamp[q] = run_id
        exp_cnt[q, 0] = 0
        exp_cnt[q, 1] = 0
        exp_cnt[q, 2] = 0
    exp_cnt[q, c] += 1


@njit(cache=True)
def run_window(i: int, unit_last: int, thr: float, compare: bool, use_tails: bool, run_id: int, tail_slack: float,
               G: tuple, B: tuple, T: tuple, W: tuple) -> tuple[int, float]:  # pragma: no cover
    """Re-run the estimator from position ``i`` with the devices ``W.chgdev``;
    ``compare=False`` builds from scratch (no base yet). Returns ``(stop,
    makespan)``: positions ``i .. stop - 1`` are in ``W``; the makespan is exact
    when below ``thr``, else a bound ``>= thr``."""
    (reads_ptr, reads_k, outs_ptr, outs_k, kprod, klast, nlast, ksz, hop_n, hop_r, hop_t, hop_sum,
     w, disp, hlanes, dl_ptr, dl, group, mono, host, cptr, readers_ptr, readers_c, readers_k,
     kreaders_ptr, kreaders_c) = G
    (place, finish, contrib, state, uses, glast, entry_pos, entry_val, cn, ckd, ca, premax, sufmax) = B
    (tstart, tvalid, nxt_lane, nxt_disp) = T
    (chgdev, wplace, wfin, wcontrib, wstate, wuses, wcn, wckd, wca, ov_val, ov_stamp, exp_cnt, exp_stamp,
     wk_kind, wk_x, wk_val, wk_d, wk_last, cur) = W
    v = place.shape[0]
    nres = state.shape[1]
    ng = glast.shape[0]
    nd = w.shape[1]
    for r in range(nres):
        cur[r] = state[i, r]
    new_end = premax[i]
    counts = np.zeros(3, dtype=np.int64)  # pending differences: structural, better, worse
    nwatch = 0
    tails = use_tails and compare and thr < np.inf
    next_check = unit_last + 1
    p = i
    while p < v:
        if compare:
            if exp_stamp[p] == run_id:
                for c in range(3):
                    counts[c] -= exp_cnt[p, c]
            if new_end >= thr:
                break
            if tails and p == next_check:  # 1, 2, 3, 5, 8, 12 ... past the changed nodes
                next_check = p + 1 + (p - unit_last) // 2
                m = 0
                for x in range(nwatch):
                    if wk_last[x] >= p:
                        wk_kind[m], wk_x[m], wk_val[m], wk_d[m], wk_last[m] = (
                            wk_kind[x], wk_x[x], wk_val[x], wk_d[x], wk_last[x])
                        m += 1
                nwatch = m
                if p < tvalid[0]:
                    extend_tails(p, tvalid, tstart, place, w, disp, host, outs_ptr, outs_k, ksz, hop_sum,
                                 readers_ptr, readers_c, readers_k, nxt_lane, nxt_disp)
                lb = new_end
                for d in range(nd):
                    t = cur[dl[dl_ptr[d]]] + tail_lane(tstart, nxt_lane, d, p)
                    if t > lb:
                        lb = t
                t = cur[hlanes[0]] + tail_host(tstart, nxt_disp, p)
                if t > lb:
                    lb = t
                for x in range(nwatch):
                    if wk_kind[x] == 0:
                        t = wk_val[x] + tail_node(tstart, place, readers_ptr, readers_c, readers_k, ksz, hop_sum,
                                                  wk_x[x], wk_d[x], p)
                    else:
                        t = wk_val[x] + tail_cached(tstart, place, kreaders_ptr, kreaders_c, nd, wk_x[x], p)
                    if t > lb:
                        lb = t
                if lb * tail_slack >= thr:  # what is left after one of these times is too long
                    new_end = lb * tail_slack
                    break
            if p > unit_last and counts[_STRUCT] == 0 and counts[_BETTER] == 0:
                live = False
                dominates = True
                for r in range(nres):
                    if cur[r] != state[p, r] and glast[group[r]] >= p:
                        live = True
                        if not (mono[r] and cur[r] > state[p, r]):
                            dominates = False
                if counts[_WORSE] == 0 and not live:  # rejoined the base schedule
                    if sufmax[p] > new_end:
                        new_end = sufmax[p]
                    break
                if dominates:  # the rest finishes no earlier than the base's
                    lb = sufmax[p] if sufmax[p] > new_end else new_end
                    if lb >= thr:
                        new_end = lb
                        break
        dv = place[p]
        if compare and chgdev[p] >= 0:
            dv = chgdev[p]
        for g in range(ng):
            wuses[p, g] = 0
        wcn[p] = 0
        ready = 0.0
        for e in range(reads_ptr[p], reads_ptr[p + 1]):
            k = reads_k[e]
            q = kprod[k]
            if q < 0:
                src, t0 = host, 0.0
            elif q >= i:
                src, t0 = wplace[q], wfin[q]
            else:
                src, t0 = place[q], finish[q]
            if src != dv:
                t0 = _arrive(k, src, t0, dv, i, p, run_id, nd, ksz, hop_n, hop_r, hop_t, group, cur, wuses,
                             ov_val, ov_stamp, entry_pos, entry_val, cptr, wcn, wckd, wca)
            if t0 > ready:
                ready = t0
        ds, wp = disp[p, dv], w[p, dv]
        if ds == 0.0 and wp == 0.0:
            f = ready
        else:
            hl = hlanes[0]
            for r in hlanes:
                if cur[r] < cur[hl]:
                    hl = r
            if ds > 0.0 and cur[hl] > ready:
                ready = cur[hl]
            s, li = np.inf, dl[dl_ptr[dv]]
            for x in range(dl_ptr[dv], dl_ptr[dv + 1]):
                r = dl[x]
                t = cur[r] if cur[r] > ready else ready
                if t < s:
                    s, li = t, r
            f = s + ds + wp
            cur[li] = f
            wuses[p, group[li]] = 1
            if ds > 0.0:
                t = s + ds
                if t > cur[hl]:
                    cur[hl] = t
                wuses[p, group[hl]] = 1
        cp = f
        if dv != host:
            for e in range(outs_ptr[p], outs_ptr[p + 1]):
                a = _arrive(outs_k[e], dv, f, host, i, p, run_id, nd, ksz, hop_n, hop_r, hop_t, group, cur, wuses,
                            ov_val, ov_stamp, entry_pos, entry_val, cptr, wcn, wckd, wca)
                if a > cp:
                    cp = a
        if cp > new_end:
            new_end = cp
        wplace[p] = dv
        wfin[p] = f
        wcontrib[p] = cp
        for r in range(nres):
            wstate[p + 1, r] = cur[r]
        if compare:
            # differences this position leaves pending, each until its last reader
            if dv != place[p]:
                c = _STRUCT
            else:
                bf = finish[p]
                c = -1 if f == bf else _BETTER if f < bf else _WORSE
            if c >= 0 and nlast[p] > p:
                _pend(nlast[p] + 1, c, run_id, exp_cnt, exp_stamp, counts)
                if c != _BETTER:
                    wk_kind[nwatch], wk_x[nwatch], wk_val[nwatch], wk_d[nwatch], wk_last[nwatch] = 0, p, f, dv, nlast[p]
                    nwatch += 1
            c0 = cptr[p]
            for x in range(c0, c0 + wcn[p]):  # transfers made, against the base's
                kd, a = wckd[x], wca[x]
                c = _STRUCT
                for y in range(c0, c0 + cn[p]):
                    if ckd[y] == kd:
                        b = ca[y]
                        c = -1 if a == b else _BETTER if a < b else _WORSE
                        break
                last = klast[kd // nd]
                if c >= 0 and last > p:
                    _pend(last + 1, c, run_id, exp_cnt, exp_stamp, counts)
                    if c != _BETTER:
                        wk_kind[nwatch], wk_x[nwatch], wk_val[nwatch], wk_d[nwatch], wk_last[nwatch] = 1, kd, a, 0, last
                        nwatch += 1
            for y in range(c0, c0 + cn[p]):  # the base's transfers this run did not make
                kd = ckd[y]
                made = False
                for x in range(c0, c0 + wcn[p]):
                    if wckd[x] == kd:
                        made = True
                        break
                last = klast[kd // nd]
                if not made and last > p:
                    _pend(last + 1, _STRUCT, run_id, exp_cnt, exp_stamp, counts)
        p += 1
    return p, new_end


@njit(cache=True)
def splice_window(i: int, j: int, cptr: np.ndarray, B: tuple, W: tuple) -> None:  # pragma: no cover - compiled
    """Make the re-run of positions ``i .. j - 1`` in ``W`` part of the base ``B``."""
    (place, finish, contrib, state, uses, glast, entry_pos, entry_val, cn, ckd, ca, premax, sufmax) = B
    wplace, wfin, wcontrib, wstate, wuses, wcn, wckd, wca = W[1], W[2], W[3], W[4], W[5], W[6], W[7], W[8]
    v = place.shape[0]
    nres = state.shape[1]
    ng = glast.shape[0]
    for p in range(i, j):  # the base's transfers of the window are gone
        for x in range(cn[p]):
            entry_pos[ckd[cptr[p] + x]] = -1
    for p in range(i, j):
        place[p] = wplace[p]
        finish[p] = wfin[p]
        contrib[p] = wcontrib[p]
        cn[p] = wcn[p]
        for g in range(ng):
            uses[p, g] = wuses[p, g]
        for x in range(wcn[p]):
            c = cptr[p] + x
            ckd[c] = wckd[c]
            ca[c] = wca[c]
            entry_pos[wckd[c]] = p
            entry_val[wckd[c]] = wca[c]
    if j > i:
        for r in range(nres):
            old = state[j, r]
            for p in range(i + 1, j + 1):
                state[p, r] = wstate[p, r]
            if state[j, r] != old:  # a resource the rest never uses: free from then on
                for p in range(j + 1, v + 1):
                    state[p, r] = state[j, r]
    for g in range(ng):
        glast[g] = -1
    left = ng
    for p in range(v - 1, -1, -1):
        if left == 0:
            break
        for g in range(ng):
            if glast[g] < 0 and uses[p, g]:
                glast[g] = p
                left -= 1
    for p in range(i, v):
        premax[p + 1] = contrib[p] if contrib[p] > premax[p] else premax[p]
    for p in range(j - 1, -1, -1):
        sufmax[p] = contrib[p] if contrib[p] > sufmax[p + 1] else sufmax[p + 1]
