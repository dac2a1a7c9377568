"""Scheduler scaling: planning time versus graph size, per scheduler.

The random layered DAGs of ``benchmarks/sim_speed.py`` (100 ... 100 000 nodes) on
the ``xeon-p2200`` preset, priced by :class:`costmodel.Roofline`. Each (scheduler,
size) runs in a fresh process that times ``transform`` + ``schedule`` (what
:meth:`Scheduler.run` counts as scheduling time) as CPU time (``time.process_time``),
reports its peak resident memory (graph included), and replays the plan with the
heapq floor of ``benchmarks/replay_floor.py``: ``x floor`` is the planning time
over one bare replay of the same plan, measured in the same process, so that
figures stay comparable on a noisy machine. A scheduler stops at the first size
that takes more than ``--budget`` CPU seconds (a process still running after
``--kill`` wall-clock seconds, graph construction included, is killed).

``--before DIR`` measures another checkout of hetsim (``git archive main | tar
-x -C DIR``) in the same run.

Run: ``python benchmarks/scheduler_scaling.py [--schedulers heft cpop ...]
[--sizes 100 1000 5000 20000 100000] [--budget 60] [--before DIR]``. Targets:
HEFT, CPOP, PEFT, tensor-split <= 3 s at 20 000 nodes and <= 20 s at
100 000; cp-greedy <= 2 s at 1 000 and <= 20 s at 5 000; antichain-dp <= 3 s at
5 000; growth no worse than quadratic.
"""

from __future__ import annotations

import argparse
import gc
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sim_speed import layered_dag, run_worker  # noqa: E402

DEFAULT = ["heft", "cpop", "peft", "tensor-split", "antichain-dp", "cp-greedy", "donf", "by-op", "by-path"]


def measure(name: str, n: int) -> dict[str, Any]:
    """CPU seconds of planning an ``n``-node graph with scheduler ``name``, the
    floor replay of its plan, and this process's peak memory."""
    from replay_floor import replay, tables

    from hetsim import schedulers
    from hetsim.costmodel import Roofline
    from hetsim.sim import Platform

    platform = Platform.preset("xeon-p2200")
    g = layered_dag(n, seed=n)
    cost = Roofline()
    sched = schedulers.get(name)
    gc.collect()
    c0 = time.process_time()
    run = sched.run(g, platform, cost, simulate=False)
    cpu = time.process_time() - c0
    floor = float("nan")  # a dynamic plan places at run time: no static plan to replay
    if run.plan.policy is None:
        tb = tables(run.graph, platform, run.plan, cost)
        c0 = time.process_time()
        replay(tb)
        floor = time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"cpu_s": cpu, "floor_s": floor, "peak_mb": peak,
            "estimate": run.plan.meta.get("makespan_estimate")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedulers", nargs="+", default=DEFAULT)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 5_000, 20_000, 100_000])
    ap.add_argument("--budget", type=float, default=60.0, help="seconds; larger sizes are skipped after")
    ap.add_argument("--kill", type=float, default=600.0, help="wall-clock seconds per (scheduler, size)")
    ap.add_argument("--before", type=Path, help="another hetsim checkout to measure in the same run")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)  # NAME N, in this process
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(measure(args.worker[0], int(args.worker[1]))))
        return
    trees = [("after", HERE.parent)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    print(f"{'scheduler':>13} {'tree':>6} {'nodes':>7} {'cpu s':>9} {'growth':>7} {'x floor':>8} {'peak MB':>8}")
    for name in args.schedulers:
        for label, tree in trees:
            prev: tuple[int, float] | None = None
            for n in args.sizes:
                r = run_worker("scheduler_scaling.py", tree, [name, str(n)], timeout=args.kill)
                if r is None:
                    print(f"{name:>13} {label:>6} {n:>7} {'killed':>9}  (still running after {args.kill:.0f} s wall)", flush=True)
                    break
                growth = f"{r['cpu_s'] / prev[1]:.1f}" if prev and prev[1] > 0 else ""
                ratio = r["cpu_s"] / r["floor_s"] if r["floor_s"] > 0 else float("nan")
                print(f"{name:>13} {label:>6} {n:>7} {r['cpu_s']:>9.3f} {growth:>7} {ratio:>8.1f} "
                      f"{r['peak_mb']:>8.0f}", flush=True)
                prev = (n, r["cpu_s"])
                if r["cpu_s"] > args.budget:
                    break


if __name__ == "__main__":
    main()
