"""Simulator speed: simulated operators per second versus graph size.

Random layered DAGs (seeded) of 100 ... 100 000 nodes, placed on the two devices of
the ``xeon-p2200`` preset in contiguous blocks so that a share of the edges cross
PCIe, priced by the default :class:`costmodel.Roofline` (dispatch included). The
time measured is the whole :func:`sim.simulate` call (plan validation and the
integer tables included), best of ``--repeats``, both as CPU time of this process
(``time.process_time``: what "per core" means, and robust to other load on the
machine) and as wall-clock time.

Run: ``python benchmarks/sim_speed.py [--sizes 100 1000 ...] [--repeats 3]``.
Targets: >= 50 000 simulated ops/s on one core; 100 000 nodes within 12x the time
of 10 000 (linear cost).
"""

from __future__ import annotations

import argparse
import gc
import time

import numpy as np

from hetsim.costmodel import Roofline
from hetsim.graphs import Graph
from hetsim.sim import Plan, Platform, simulate

OPS = ("matmul", "conv2d", "add", "relu", "softmax")


def layered_dag(n: int, *, width: int = 8, fan_in: int = 2, seed: int = 0) -> Graph:
    """A random DAG of ``n`` nodes in layers of up to ``width``; each node reads
    ``1..fan_in`` nodes of the previous two layers; a few tensors feed several consumers."""
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


def block_plan(graph: Graph, devices: list[str], *, block: int = 50) -> Plan:
    """Alternate devices every ``block`` nodes in topological order."""
    order = graph.topological_order()
    return Plan({n: devices[(i // block) % len(devices)] for i, n in enumerate(order)})


def measure(n: int, repeats: int, platform: Platform) -> tuple[float, float, int, int]:
    """Best CPU and wall seconds of ``repeats`` simulations of an ``n``-node graph."""
    g = layered_dag(n, seed=n)
    plan = block_plan(g, ["cpu", "gpu"])
    cost = Roofline()
    best_cpu = best_wall = float("inf")
    for _ in range(repeats):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        res = simulate(g, platform, plan, cost)
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu, best_wall, res.ops, res.total_bytes_moved


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000, 100_000])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    platform = Platform.preset("xeon-p2200")
    print(
        f"{'nodes':>8} {'cpu s':>9} {'wall s':>9} {'ops/s (cpu)':>12} {'us/op':>7} {'MB moved':>9}"
    )
    times: dict[int, float] = {}
    for n in args.sizes:
        cpu, wall, ops, moved = measure(n, args.repeats, platform)
        times[n] = cpu
        print(
            f"{n:>8} {cpu:>9.4f} {wall:>9.4f} {ops / cpu:>12.0f} {cpu / ops * 1e6:>7.2f} {moved / 1e6:>9.2f}"
        )
    if 10_000 in times and 100_000 in times:
        ratio = times[100_000] / times[10_000]
        print(f"cpu time(100 000) / time(10 000) = {ratio:.2f} (target <= 12)")


if __name__ == "__main__":
    main()
