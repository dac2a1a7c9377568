"""Simulator speed: simulated operators per second versus graph size.

Random layered DAGs (seeded) of 1k ... 1M nodes, placed on the two devices of the
``xeon-p2200`` preset in contiguous blocks so that a share of the edges cross
PCIe, priced by the default :class:`costmodel.Roofline` (dispatch included). The
time measured is the whole :func:`sim.simulate` call (plan validation, pricing and
the integer tables included), best of ``--repeats``, as CPU time of the process
(``time.process_time``: what "per core" means, and robust to other load on the
machine), with ``record=False`` and with ``record=True``; ``+dicts s`` is the
``record=True`` call followed by the first access of ``SimResult.records``, which
makes the record dicts from the rows the engine wrote (a tree that makes them in
the call has them counted in ``record=True``); ``loop s`` is the
median call when called back to back as a sweep calls it (record=False, the
cyclic garbage collector left running, no collection forced between calls);
``reuse s`` the best call of a :class:`sim.Simulator` of the graph after its first
(the graph read once, kept for the next calls: a sweep over plans); ``read s`` the
time to only read what a simulation needs from the graph's networkx
dicts (:func:`read_graph`: a floor for the preparation).

Each size runs in a fresh process, which reports its peak resident memory
(``ru_maxrss``: the graph, the plan and the simulation together), and replays
the same plan with :mod:`benchmarks.replay_floor` (a bare heapq event loop, the
floor any Python simulator can reach) to the same makespan: ``x floor`` is the
simulation's CPU time over the floor's, measured in the same process, so it stays
comparable on a noisy machine.

``--before DIR`` runs the same measurements on another checkout of hetsim (for
example ``git archive main | tar -x -C DIR``) in the same run, and prints the
speed-up.

Run: ``python benchmarks/sim_speed.py [--sizes 1000 10000 ...] [--repeats 3]
[--before DIR]``. Targets: >= 200 000 ops/s at 100 000 nodes
(record=False), >= 150 000 with record=True, time(100 000) / time(10 000) <= 10.5,
1 000 000 nodes within 12 GB.
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
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=3, help="best of this many runs (1 at 1M nodes)")
    ap.add_argument("--before", type=Path, help="another hetsim checkout to measure in the same run")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)  # one size, in this process
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(measure(args.worker, args.repeats)))
        return
    trees = [("after", HERE.parent)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    print(f"{'tree':>6} {'nodes':>8} {'cpu s':>8} {'ops/s':>8} {'rec cpu s':>9} {'ops/s rec':>9} "
          f"{'+dicts s':>8} {'loop s':>8} {'reuse s':>8} {'read s':>7} {'floor s':>8} {'x floor':>7} "
          f"{'peak MB':>8}")
    results: dict[tuple[str, int], dict[str, Any]] = {}
    for n in args.sizes:
        for label, tree in trees:
            r = run_worker("sim_speed.py", tree, [str(n), "--repeats", str(1 if n >= 1_000_000 else args.repeats)])
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
        for a, b in zip(args.sizes, args.sizes[1:]):
            ra, rb = results[(label, a)], results[(label, b)]
            print(f"{label}: cpu time({b}) / time({a}) = {rb['cpu_s'] / ra['cpu_s']:.2f} "
                  f"(record=True {rb['rec_s'] / ra['rec_s']:.2f}; nodes x{b / a:.0f})")
    if args.before is not None:
        for n in args.sizes:
            b, a = results[("before", n)], results[("after", n)]
            print(f"speed-up at {n}: {b['cpu_s'] / a['cpu_s']:.2f}x "
                  f"(record=True {b['rec_s'] / a['rec_s']:.2f}x; "
                  f"in a loop {b.get('loop_s', math.nan) / a['loop_s']:.2f}x)")


if __name__ == "__main__":
    main()
