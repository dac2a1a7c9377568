"""cp-greedy on the zoo models: planning time and simulated makespan, before and after.

For each (model, platform) pair, plans the model with cp-greedy (default
parameters, the platform's default cost model) in a fresh process
per checkout, and prints the planning CPU time (``time.process_time``) of the
first call in the process (``s``: loading what the scheduler needs included,
e.g. numba's compiled loops) and of a second one (``warm s``: what each plan of
a sweep costs), the simulated makespan of the returned plan and a digest of the
plan (placement and priorities), so that a faster cp-greedy can be shown to
return the same plans.

Run: ``python benchmarks/cp_greedy_zoo.py --before /tmp/before-cpg``
(``git archive main | tar -x -C /tmp/before-cpg``); ``--models`` and
``--platforms`` narrow the grid. Zoo graphs come from the graph cache
(``HETSIM_CACHE``), imported once through TVM otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sim_speed import run_worker  # noqa: E402

MODELS = ["googlenet", "resnet18", "resnet50", "bert_base", "mobilenet_v2", "inception_v3", "lstm", "vgg16"]
PLATFORMS = ["cpu2", "xeon-p2200", "h100-server", "multi-gpu-4"]


def measure(model: str, platform: str) -> dict[str, Any]:
    """Plan ``model`` on ``platform`` with cp-greedy in this process; its CPU time,
    simulated makespan and plan digest (or the error)."""
    import hetsim
    from hetsim import schedulers

    graph = hetsim.zoo.load(model)
    plat = hetsim.Platform.preset(platform)
    sched = schedulers.get("cp-greedy")
    if not sched.applies_to(graph, plat):
        return {"skipped": sched.why_not(graph, plat)}
    c0 = time.process_time()
    try:
        run = sched.run(graph, plat, simulate=False)
    except schedulers.SchedulerError as e:
        return {"error": str(e)}
    cpu = time.process_time() - c0
    c0 = time.process_time()
    sched.run(graph, plat, simulate=False)
    warm = time.process_time() - c0
    plan = run.plan
    digest = hashlib.sha256(
        json.dumps([sorted(plan.placement.items()), sorted(plan.priority.items())]).encode()
    ).hexdigest()[:12]
    return {"cpu_s": cpu, "warm_s": warm, "makespan": run.simulate().result.makespan, "plan": digest}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--platforms", nargs="+", default=PLATFORMS)
    ap.add_argument("--before", type=Path, help="another hetsim checkout to compare with, in the same run")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)  # MODEL PLATFORM, in this process
    args = ap.parse_args(argv)
    if args.worker is not None:
        print(json.dumps(measure(*args.worker)))
        return
    trees = [("after", HERE.parent)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    head = f"{'model':>13} {'platform':>12}"
    for label, _ in trees:
        head += f" {label + ' s':>9} {'warm s':>7} {label + ' makespan':>16} {label + ' plan':>12}"
    print(head + ("  same plan" if len(trees) == 2 else ""), flush=True)
    for model in args.models:
        for plat in args.platforms:
            rows = [run_worker("cp_greedy_zoo.py", tree, [model, plat]) or {} for _, tree in trees]
            line = f"{model:>13} {plat:>12}"
            for r in rows:
                if "cpu_s" in r:
                    line += f" {r['cpu_s']:>9.2f} {r['warm_s']:>7.2f} {r['makespan'] * 1e3:>13.4f} ms {r['plan']:>12}"
                else:
                    line += f" {'-':>9} {str(r.get('skipped') or r.get('error'))[:37]:>37}"
            if len(rows) == 2 and "plan" in rows[0] and "plan" in rows[1]:
                same = rows[0]["plan"] == rows[1]["plan"]
                line += "  yes" if same else f"  NO ({rows[1]['makespan'] / rows[0]['makespan'] - 1:+.2%})"
            print(line, flush=True)


if __name__ == "__main__":
    main()
