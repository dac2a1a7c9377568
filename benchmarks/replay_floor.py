"""A minimal heapq replay of a static plan: the floor any Python simulator can reach.

The same model as :func:`hetsim.sim.simulate` for one request of a static plan on
a platform without shared-memory handoffs or graph inputs/outputs: a ready heap
per device keyed by the plan's priority, one server per device stream, a host
dispatcher of ``dispatch_threads`` lanes held for each kernel's dispatch time, one
FIFO server per link direction moving each tensor once per destination device,
hop by hop. It keeps no memory accounting, no records, no noise and no dynamic
placement, and its event loop is a bare :mod:`heapq` of ``(time, seq, ...)``
tuples. :func:`tables` builds its integer tables (untimed); :func:`replay` runs
the loop and returns the makespan, which must equal the simulator's.

Used by ``benchmarks/sim_speed.py`` and ``benchmarks/scheduler_scaling.py`` to
report each simulation's time as a multiple of this floor, measured in the same
run (robust to other load on the machine).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush
from typing import Any

from hetsim.costmodel import host_dispatch


@dataclass
class Tables:
    """Integer tables of one (graph, platform, plan, cost)."""

    op: list[float]
    dispatch: list[float]
    dev: list[int]
    rank: list[int]
    order: list[int]
    npred: list[int]
    local: list[list[int]]
    groups: list[list[tuple[tuple[int, ...], tuple[float, ...], list[int], int]]]
    streams: list[int]
    threads: int
    n_res: int


def tables(graph: Any, platform: Any, plan: Any, cost: Any) -> Tables:
    """Price and index ``plan`` on ``graph`` (no graph inputs or outputs, no handoffs)."""
    topo = graph.topological_order()
    index = {n: i for i, n in enumerate(topo)}
    devs = platform.device_names
    dix = {d: i for i, d in enumerate(devs)}
    dev = [dix[plan.placement[n]] for n in topo]
    objs = platform.devices
    op = [float(cost.op_time(graph, n, objs[d])) for n, d in zip(topo, dev)]
    disp = [float(host_dispatch(cost, graph, n, objs[d])) for n, d in zip(topo, dev)]
    keyed = sorted(range(len(topo)), key=lambda i: (float(plan.priority.get(topo[i], i)), i))
    rank = [0] * len(topo)
    for r, i in enumerate(keyed):
        rank[i] = r
    res = {name: i for i, (name, _) in enumerate(platform.link_resources())}
    g = graph.nx
    npred = [g.in_degree(n) for n in topo]
    local: list[list[int]] = []
    groups: list[list] = []
    for u, n in enumerate(topo):
        loc, out = [], {}
        for s, ed in g.succ[n].items():
            v = index[s]
            if dev[v] == dev[u]:
                loc.append(v)
                continue
            key = (int(ed.get("output", 0)), dev[v])
            if key not in out:
                nbytes = max(int(e["bytes"]) for e in g.succ[n].values()
                             if int(e.get("output", 0)) == key[0])
                hops = platform.link_directions(devs[dev[u]], devs[dev[v]])
                out[key] = [tuple(res[r] for r, _ in hops),
                            tuple(float(cost.transfer_time(nbytes, lk)) for _, lk in hops), [], 1 << 62]
            out[key][2].append(v)
            out[key][3] = min(out[key][3], rank[v])
        local.append(loc)
        groups.append([tuple(out[k]) for k in sorted(out)])
    return Tables(op, disp, dev, rank, keyed, npred, local, groups,
                  [d.streams for d in objs], platform.dispatch_threads, len(res))


def replay(tb: Tables) -> float:
    """Run the event loop; returns the makespan (seconds)."""
    op, disp, dev, rank, order, local, groups = (
        tb.op, tb.dispatch, tb.dev, tb.rank, tb.order, tb.local, tb.groups)
    pend = list(tb.npred)
    ready: list[list[int]] = [[] for _ in tb.streams]
    idle = [deque(range(s)) for s in tb.streams]
    lready: list[list] = [[] for _ in range(tb.n_res)]
    lidle = [True] * tb.n_res
    slots, waiting = tb.threads, deque()
    ev: list = []
    seq = 0
    now = end = 0.0
    # event kinds: 0 wake stream, 1 dispatch done, 2 op done, 3 wake link, 4 hop done

    def make_ready(v: int) -> None:
        nonlocal seq
        d = dev[v]
        heappush(ready[d], rank[v])
        if idle[d]:
            seq += 1
            heappush(ev, (now, seq, 0, d, idle[d].popleft(), 0))

    def queue_hop(x: list) -> None:
        nonlocal seq
        ri = x[0][x[4]]
        seq += 1
        heappush(lready[ri], (x[3], seq, x))
        if lidle[ri]:
            lidle[ri] = False
            heappush(ev, (now, seq, 3, ri, 0, 0))

    for u in range(len(op)):
        if pend[u] == 0:
            make_ready(u)
    while ev:
        now, _, kind, a, b, c = heappop(ev)
        if kind == 0 or kind == 2:
            if kind == 2:  # op c done on stream b of device a
                end = now
                for v in local[c]:
                    pend[v] -= 1
                    if pend[v] == 0:
                        make_ready(v)
                for hops, times, cons, rk in groups[c]:
                    queue_hop([hops, times, cons, rk, 0])
            if not ready[a]:
                idle[a].append(b)
                continue
            u = order[heappop(ready[a])]
            if disp[u] > 0.0:
                if slots:
                    slots -= 1
                    seq += 1
                    heappush(ev, (now + disp[u], seq, 1, a, b, u))
                else:
                    waiting.append((a, b, u))
                continue
            seq += 1
            heappush(ev, (now + op[u], seq, 2, a, b, u))
        elif kind == 1:  # dispatch of op c done: the lane goes to the next waiting stream
            if waiting:
                wa, wb, wu = waiting.popleft()
                seq += 1
                heappush(ev, (now + disp[wu], seq, 1, wa, wb, wu))
            else:
                slots += 1
            seq += 1
            heappush(ev, (now + op[c], seq, 2, a, b, c))
        elif kind == 3 or kind == 4:
            if kind == 4:  # hop done
                end = max(end, now)
                x = c
                x[4] += 1
                if x[4] < len(x[0]):
                    queue_hop(x)
                else:
                    for v in x[2]:
                        pend[v] -= 1
                        if pend[v] == 0:
                            make_ready(v)
            if not lready[a]:
                lidle[a] = True
                continue
            x = heappop(lready[a])[2]
            seq += 1
            heappush(ev, (now + x[1][x[4]], seq, 4, a, 0, x))
    return end
