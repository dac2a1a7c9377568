"""Simulator speed: the whole call and a prepared Simulator beside a naive heapq replay.

Default run (``python benchmarks/sim_speed.py``): the two-device DAG of
:func:`two_device_dag` at 10 000 and 100 000 nodes (layers of 8, each node reading
two nodes of the layer before, each edge 4 KiB or 1 MiB; half the nodes on each of
``xeon-p2200``'s CPU and GPU, at random, so that the edges between two devices cross
its one PCIe link and the others are free), priced by the default
:class:`costmodel.Roofline`. Each size runs in a fresh process and reports, as CPU
time of the process (``time.process_time``, best of ``--repeats``):

* ``simulate s``: the whole :func:`sim.simulate` call (plan validation, reading the
  graph, pricing, the engine's tables, the SimPy run, the result);
* ``re-run s``: a :class:`sim.Simulator` of the graph, after a first simulation of
  one placement, simulating another placement (the graph read once; a sweep, a
  search);
* ``naive s``: :func:`naive_replay` of the same plan: a plain heapq event loop
  that numbers the nodes, reads the graph's edge list and builds its own
  predecessor and successor lists from it, reads the plan's placement, and keeps
  one free time per device and one for the link (no dispatcher, no link
  directions, no memory, no records; each node's duration is priced untimed by
  :func:`naive_inputs`);

each beside the naive replay of its plan, with the ratio ``x naive`` (the naive
replay's CPU time over the call's: the call's ops/s over the naive replay's), and the
growth of each from 10k to 100k nodes. ``first s`` is the worker process's first
``simulate`` call, before the best-of ones: the same call, plus importing numba and
loading the engine's compiled array replay (:mod:`sim.engine.array_replay`), once
per process.

``--scaling``: the scaling table of random layered DAGs (:func:`layered_dag`, 1k ...
1M nodes, placed in blocks of 50 by :func:`block_plan`): the whole call with
``record=False`` and ``record=True``; ``+dicts s`` is the ``record=True`` call
followed by the first access of ``SimResult.records``; ``loop s`` the median call
when called back to back as a sweep calls it (the cyclic garbage collector left
running); ``reuse s`` the best call of a :class:`sim.Simulator` after its first
(the same plan); ``read s`` the time to only read what a simulation needs from the
graph's networkx dicts (:func:`read_graph`); ``x floor`` the call's time over
:mod:`benchmarks.replay_floor` (a heapq replay of the engine's own model to the
same makespan), with each process's peak resident memory.

``--before DIR`` runs the same measurements on another checkout of hetsim (for
example ``git archive main | tar -x -C DIR``) in the same run, and prints the
speed-up.

Run: ``python benchmarks/sim_speed.py [--sizes 10000 100000] [--repeats 3]
[--before DIR]`` or ``python benchmarks/sim_speed.py --scaling [--sizes 1000 ...
1000000]``. Targets (default run): the whole call at 100 000 nodes at least 2x the
naive replay's ops/s, growth 10k -> 100k at most x10.5; the re-run at least 4x.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import subprocess
import sys
import time
from heapq import heappop, heappush
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OPS = ("matmul", "conv2d", "add", "relu", "softmax")


def layered_dag(n: int, *, width: int = 8, fan_in: int = 2, seed: int = 0) -> Any:
    """A random DAG of ``n`` nodes in layers of up to ``width``; each node reads
    ``1..fan_in`` nodes of the previous two layers; a few tensors feed several consumers."""
    import numpy as np

    from hetsim.graphs import Graph

    rng = np.random.default_rng(seed)
    g = Graph(name=f"layered-{n}")
    layers: list[list[str]] = []
    count = 0
    while count < n:
        w = int(min(n - count, rng.integers(1, width + 1)))
        layer = []
        for _ in range(w):
            name = f"n{count}"
            op = OPS[int(rng.integers(len(OPS)))]
            flops = float(10 ** rng.uniform(4, 9)) if op in ("matmul", "conv2d") else 0.0
            g.add_op(
                name,
                op,
                flops=flops,
                bytes=int(10 ** rng.uniform(3, 6)),
                param_bytes=int(rng.integers(0, 4096)),
            )
            layer.append(name)
            count += 1
        if layers:
            pool = layers[-1] + (layers[-2] if len(layers) > 1 else [])
            for name in layer:
                k = int(rng.integers(1, fan_in + 1))
                for src in sorted(
                    set(rng.choice(pool, size=min(k, len(pool)), replace=False).tolist())
                ):
                    g.add_edge(src, name, bytes=int(10 ** rng.uniform(3, 5)))
        layers.append(layer)
    return g


def block_plan(graph: Any, devices: list[str], *, block: int = 50) -> Any:
    """Alternate devices every ``block`` nodes in topological order."""
    from hetsim.sim import Plan

    order = graph.topological_order()
    return Plan({n: devices[(i // block) % len(devices)] for i, n in enumerate(order)})


def read_graph(graph: Any) -> tuple[int, int]:
    """Read what any simulation of ``graph`` must read from its networkx dicts, and
    nothing else: each node's op, FLOPs, bytes, weights and outputs, each edge's
    bytes and output index with its consumer's position. Its time is a floor for
    the preparation of a graph kept in networkx (each dict a cache miss when the
    graph is larger than the cache); returns the numbers of nodes and edges read."""
    nxg = graph.nx
    index = {name: i for i, name in enumerate(nxg)}
    nodes = [(d["op"], d["flops"], d["bytes"], d["param_bytes"], d["outputs"]) for _, d in nxg.nodes(data=True)]
    edges = [(index[w], d.get("output", 0), d["bytes"]) for _, nbrs in nxg.adjacency() for w, d in nbrs.items()]
    return len(nodes), len(edges)


def measure(n: int, repeats: int) -> dict[str, Any]:
    """Best CPU seconds of ``repeats`` simulations of an ``n``-node graph (record off
    and on) and of the heapq floor replaying the same plan; this process's peak memory."""
    sys.path.insert(0, str(HERE))
    from replay_floor import replay, tables

    from hetsim.costmodel import Roofline
    from hetsim.sim import Platform, simulate

    platform = Platform.preset("xeon-p2200")
    g = layered_dag(n, seed=n)
    plan = block_plan(g, ["cpu", "gpu"])
    cost = Roofline()
    out: dict[str, Any] = {"nodes": n}
    for record in (False, True):
        best = best_dicts = float("inf")
        for _ in range(repeats):
            res = None
            gc.collect()
            gc.disable()  # as simulate() runs; here also while the record dicts are made
            c0 = time.process_time()
            res = simulate(g, platform, plan, cost, record=record)
            c1 = time.process_time()
            if record:  # the record dicts, made on first access (SimResult.records)
                out["records"] = len(res.records)
            c2 = time.process_time()
            gc.enable()
            best = min(best, c1 - c0)
            best_dicts = min(best_dicts, c2 - c0)
        out["rec_s" if record else "cpu_s"] = best
        if record:
            out["rec_dicts_s"] = best_dicts
        out["ops"], out["makespan"] = res.ops, res.makespan
        del res
    best = float("inf")
    for _ in range(repeats):
        gc.collect()
        gc.disable()
        c0 = time.process_time()
        read_graph(g)
        best = min(best, time.process_time() - c0)
        gc.enable()
    out["read_s"] = best
    tb = tables(g, platform, plan, cost)
    best = float("inf")
    for _ in range(repeats):
        c0 = time.process_time()
        floor_makespan = replay(tb)
        best = min(best, time.process_time() - c0)
    out["floor_s"] = best
    out["floor_same"] = floor_makespan == out["makespan"]
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # a Simulator (sim.engine.simulator.Simulator; absent from older trees) reads the graph at its first
    # simulation and keeps it: the best of ``repeats`` simulations after that first
    out["reuse_s"] = math.nan
    try:
        from hetsim.sim import Simulator
    except ImportError:  # a tree before it
        Simulator = None  # noqa: N806
    if Simulator is not None:
        sim = Simulator(g, platform, cost)
        sim.simulate(plan)
        best = float("inf")
        for _ in range(repeats):
            gc.collect()
            c0 = time.process_time()
            sim.simulate(plan)
            best = min(best, time.process_time() - c0)
        out["reuse_s"] = best
        del sim  # its tables go before the loop below times plain simulate() calls
    # in a loop, as a sweep calls it: back to back, the collector left as it is (no
    # collection forced between calls); median of 5 calls after a first (not at 1M nodes)
    out["loop_s"] = math.nan
    if n < 1_000_000:
        loop = []
        for _ in range(6):
            c0 = time.process_time()
            simulate(g, platform, plan, cost)
            loop.append(time.process_time() - c0)
        out["loop_s"] = sorted(loop[1:])[2]
    return out


def two_device_dag(n: int, *, width: int = 8, seed: int = 0) -> tuple[Any, list[Any]]:
    """A layered DAG of ``n`` nodes (layers of ``width``; each node after the first layer
    reads two nodes of the layer before, each edge 4 KiB or 1 MiB) and two plans of it,
    each placing half the nodes, at random, on ``xeon-p2200``'s ``cpu`` and the other
    half on its ``gpu``."""
    import numpy as np

    from hetsim.graphs import Graph
    from hetsim.sim import Plan

    rng = np.random.default_rng(seed)
    ops = rng.integers(len(OPS), size=n).tolist()
    flops = (10 ** rng.uniform(5, 9, size=n)).tolist()
    nbytes = (10 ** rng.uniform(3, 6, size=n)).astype(int).tolist()
    params = rng.integers(0, 4096, size=n).tolist()
    big = (rng.random(size=2 * n) < 0.5).tolist()
    g = Graph(name=f"two-device-{n}")
    for i in range(n):
        op = OPS[ops[i]]
        g.add_op(f"n{i}", op, flops=flops[i] if op in ("matmul", "conv2d") else 0.0, bytes=nbytes[i],
                 param_bytes=params[i])
    e = 0
    for first in range(width, n, width):
        prev = range(first - width, first)
        for i in range(first, min(first + width, n)):
            for j in sorted(rng.choice(prev, size=2, replace=False).tolist()):
                g.add_edge(f"n{j}", f"n{i}", bytes=(1 << 20) if big[e] else 4096)
                e += 1
    plans = []
    for s in (1, 2):
        gpu = np.random.default_rng(seed + s).permutation(n) < n // 2
        plans.append(Plan({f"n{i}": "gpu" if on_gpu else "cpu" for i, on_gpu in enumerate(gpu.tolist())}))
    return g, plans


def naive_inputs(graph: Any, platform: Any, plan: Any, cost: Any) -> tuple:
    """What :func:`naive_replay` is given besides the graph and the plan: each node's
    duration on its device (host dispatch + kernel, from ``cost``), by name, and the
    platform's one link's latency and bandwidth."""
    from hetsim.costmodel import host_dispatch

    devices = {d.name: d for d in platform.devices}
    dur = {u: float(host_dispatch(cost, graph, u, devices[plan.placement[u]]))
           + float(cost.op_time(graph, u, devices[plan.placement[u]])) for u in graph.nx}
    (link,) = platform.links
    return dur, float(link.latency_s), float(link.bandwidth_bytes_per_s)


def naive_replay(graph: Any, plan: Any, devices: list[str], dur: dict[str, float], latency: float,
                 bandwidth: float) -> float:
    """A naive heapq replay of a static plan: it numbers the nodes, reads the edge list
    ``(producer, consumer, bytes)`` from the graph and builds predecessor and successor
    lists from it, reads each node's device from the plan, then runs an event loop of
    ``(time, seq, kind, node)`` tuples: an event when a node's inputs are all on its
    device and one when it ends. A node starts when its device is free (one free time
    per device); a tensor to another device crosses the one link when it is free (one
    free time). ``dur``: each node's duration (:func:`naive_inputs`). Returns the makespan."""
    nxg = graph.nx
    names = list(nxg)
    n = len(names)
    index = {u: i for i, u in enumerate(names)}
    position = {d: i for i, d in enumerate(devices)}
    placement = plan.placement
    dev = [position[placement[u]] for u in names]
    time_of = [dur[u] for u in names]
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, nbytes in nxg.edges(data="bytes"):
        u, v = index[a], index[b]
        preds[v].append(u)
        succs[u].append((v, nbytes))
    pending = [len(p) for p in preds]
    inputs_at = [0.0] * n
    free = [0.0] * len(devices)
    link = end = 0.0
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    for v in range(n):
        if not pending[v]:
            seq += 1
            heappush(events, (0.0, seq, 0, v))
    while events:
        t, _, kind, v = heappop(events)
        d = dev[v]
        if kind == 0:  # inputs ready: start when the device is free
            start = t if t > free[d] else free[d]
            free[d] = start + time_of[v]
            seq += 1
            heappush(events, (free[d], seq, 1, v))
            continue
        end = t  # ended: send each output, wake the consumers whose inputs are all there
        for w, b in succs[v]:
            at = t
            if dev[w] != d:
                link = (t if t > link else link) + latency + b / bandwidth
                at = link
            if at > inputs_at[w]:
                inputs_at[w] = at
            pending[w] -= 1
            if pending[w] == 0:
                seq += 1
                heappush(events, (inputs_at[w], seq, 0, w))
    return end


def measure_naive(n: int, repeats: int) -> dict[str, Any]:
    """Best CPU seconds of ``repeats`` whole :func:`sim.simulate` calls of
    :func:`two_device_dag`, of a prepared Simulator's re-run with its other placement, and
    of :func:`naive_replay` of each plan."""
    from hetsim.costmodel import Roofline
    from hetsim.sim import Platform, Simulator, simulate

    platform = Platform.preset("xeon-p2200")
    g, (plan, other) = two_device_dag(n, seed=n)
    cost = Roofline()
    out: dict[str, Any] = {"nodes": n, "edges": g.nx.number_of_edges()}

    def best(call: Any) -> float:
        times = []
        for _ in range(repeats):
            gc.collect()
            c0 = time.process_time()
            call()
            times.append(time.process_time() - c0)
        return min(times)

    gc.collect()
    c0 = time.process_time()  # the process's first call: it also loads the compiled replay (numba)
    simulate(g, platform, plan, cost)
    out["first_s"] = time.process_time() - c0
    out["simulate_s"] = best(lambda: simulate(g, platform, plan, cost))
    sim = Simulator(g, platform, cost)
    sim.simulate(plan)  # the graph read, both devices priced: the Simulator is prepared
    out["rerun_s"] = best(lambda sim=sim: sim.simulate(other))
    out["makespan"] = sim.simulate(other).makespan
    del sim  # its tables go before the naive replay is timed
    for key, p in (("naive_s", plan), ("naive_rerun_s", other)):
        inputs = naive_inputs(g, platform, p, cost)
        out[key] = best(lambda p=p, inputs=inputs: naive_replay(g, p, platform.device_names, *inputs))
    return out


def run_worker(script: str, tree: Path, args: list[str], timeout: float | None = None) -> dict[str, Any] | None:
    """Run ``benchmarks/<script> --worker ARGS`` in a fresh process importing hetsim
    from ``tree``; its last stdout line, as JSON (None: it ran past ``timeout`` s)."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    cmd = [sys.executable, str(HERE / script), "--worker", *args]
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True,
                              check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise SystemExit(f"{script} {' '.join(args)} on {tree} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", help="nodes (default 10000 100000; --scaling: 1000 ... 1000000)")
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs (1 at 1M nodes)")
    ap.add_argument("--scaling", action="store_true", help="the scaling table of layered DAGs")
    ap.add_argument("--before", type=Path, help="another hetsim checkout to measure in the same run")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one size, in this process
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps((measure if args.scaling else measure_naive)(args.worker, args.repeats)))
        return
    trees = [("after", HERE.parent)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    if args.scaling:
        scaling(args.sizes or [1_000, 10_000, 100_000, 1_000_000], args.repeats, trees)
    else:
        versus_naive(args.sizes or [10_000, 100_000], args.repeats, trees)


def versus_naive(sizes: list[int], repeats: int, trees: list[tuple[str, Path]]) -> None:
    """The default run: :func:`measure_naive` per size and tree, the ratios, the growth."""
    print(f"{'tree':>6} {'nodes':>8} {'first s':>8} {'simulate s':>10} {'ops/s':>8} {'naive s':>8} {'ops/s':>8} "
          f"{'x naive':>7} {'re-run s':>8} {'ops/s':>8} {'naive s':>8} {'ops/s':>8} {'x naive':>7}")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for n in sizes:
        for label, tree in trees:
            r = run_worker("sim_speed.py", tree, [str(n), "--repeats", str(repeats)])
            assert r is not None
            results[(label, n)] = r
            print(f"{label:>6} {n:>8} {r.get('first_s', math.nan):>8.3f} {r['simulate_s']:>10.3f} {n / r['simulate_s']:>8.0f} {r['naive_s']:>8.3f} "
                  f"{n / r['naive_s']:>8.0f} {r['naive_s'] / r['simulate_s']:>7.2f} {r['rerun_s']:>8.3f} "
                  f"{n / r['rerun_s']:>8.0f} {r['naive_rerun_s']:>8.3f} {n / r['naive_rerun_s']:>8.0f} "
                  f"{r['naive_rerun_s'] / r['rerun_s']:>7.2f}", flush=True)
    for label, _ in trees:
        for a, b in zip(sizes, sizes[1:]):
            ra, rb = results[(label, a)], results[(label, b)]
            print(f"{label}: growth {a} -> {b} nodes: simulate x{rb['simulate_s'] / ra['simulate_s']:.2f}, "
                  f"re-run x{rb['rerun_s'] / ra['rerun_s']:.2f}, naive x{rb['naive_s'] / ra['naive_s']:.2f}")
    if len(trees) > 1:
        for n in sizes:
            b, a = results[("before", n)], results[("after", n)]
            print(f"speed-up at {n}: simulate {b['simulate_s'] / a['simulate_s']:.2f}x, "
                  f"re-run {b['rerun_s'] / a['rerun_s']:.2f}x"
                  + ("" if a["makespan"] == b["makespan"] else "  (makespans differ!)"))


def scaling(sizes: list[int], repeats: int, trees: list[tuple[str, Path]]) -> None:
    """``--scaling``: :func:`measure` per size and tree."""
    print(f"{'tree':>6} {'nodes':>8} {'cpu s':>8} {'ops/s':>8} {'rec cpu s':>9} {'ops/s rec':>9} "
          f"{'+dicts s':>8} {'loop s':>8} {'reuse s':>8} {'read s':>7} {'floor s':>8} {'x floor':>7} "
          f"{'peak MB':>8}")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for n in sizes:
        for label, tree in trees:
            r = run_worker("sim_speed.py", tree, [str(n), "--scaling", "--repeats",
                                                  str(1 if n >= 1_000_000 else repeats)])
            assert r is not None
            results[(label, n)] = r
            same = "" if r["floor_same"] else "  (floor makespan differs!)"
            print(f"{label:>6} {n:>8} {r['cpu_s']:>8.3f} {r['ops'] / r['cpu_s']:>8.0f} "
                  f"{r['rec_s']:>9.3f} {r['ops'] / r['rec_s']:>9.0f} {r.get('rec_dicts_s', r['rec_s']):>8.3f} "
                  f"{r.get('loop_s', math.nan):>8.3f} {r.get('reuse_s', math.nan):>8.3f} "
                  f"{r.get('read_s', math.nan):>7.3f} "
                  f"{r['floor_s']:>8.3f} "
                  f"{r['cpu_s'] / r['floor_s']:>7.1f} {r['peak_mb']:>8.0f}{same}", flush=True)
    for label, _ in trees:
        for a, b in zip(sizes, sizes[1:]):
            ra, rb = results[(label, a)], results[(label, b)]
            print(f"{label}: cpu time({b}) / time({a}) = {rb['cpu_s'] / ra['cpu_s']:.2f} "
                  f"(record=True {rb['rec_s'] / ra['rec_s']:.2f}; nodes x{b / a:.0f})")
    if len(trees) > 1:
        for n in sizes:
            b, a = results[("before", n)], results[("after", n)]
            print(f"speed-up at {n}: {b['cpu_s'] / a['cpu_s']:.2f}x "
                  f"(record=True {b['rec_s'] / a['rec_s']:.2f}x; "
                  f"in a loop {b.get('loop_s', math.nan) / a['loop_s']:.2f}x)")


if __name__ == "__main__":
    main()
