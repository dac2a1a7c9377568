"""Executor and simulator agree in virtual time: every plan of the virtual-device matrix.

Each plan (every applicable scheduler; googlenet, resnet18, mobilenet_v2, bert_base at
small inputs; a one-stream, a four-stream and a two-GPU platform; graph and eager
launch) runs through the executor on a :class:`runtime.executor.virtual.device.VirtualCuda`
(its outputs checked against the single-device reference) and through
:func:`sim.simulate`, both given the same costs: the platform's GPUs
state the launch mode and the host figures the virtual device charges
(``graph_launch_s``, ``event_s``, ``copy_issue_s``, each op's dispatch time), and one
cost model prices every op and copy. The executor's makespan is read from the
virtual device's clock; the two share no timing code. Prints one line per plan and
the max |difference|; the target is 2 %.

With ``event_s`` > 0 the two differ by design on plans with many CPU-GPU
crossings: the simulator's producer records an event per reading device before it
issues its copies, while the executor issues each copy first and records its event
after it (and waits on the producer's event before each copy of a GPU op), so on
the virtual device a copy starts up to a few ``event_s`` earlier; ``--event-s 1e-6``
shows it.

    python benchmarks/virtual_agreement.py                  # the whole matrix
    python benchmarks/virtual_agreement.py --models resnet18 --platforms one-stream
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import sys
import time
from pathlib import Path

from hetsim import schedulers
from hetsim.costmodel.roofline import Roofline
from hetsim.graphs import zoo
from hetsim.runtime.executor.setup import load_model, plan_devices, wire
from hetsim.runtime.executor.virtual.device import VirtualCuda
from hetsim.sim import Platform, simulate

MODELS = {"googlenet": {"image_size": 32}, "resnet18": {"image_size": 32}, "mobilenet_v2": {"image_size": 32},
          "bert_base": {"seq_len": 8}}
SKIP = {"all-cpu": "no GPU work", "optimal": "exhaustive search: small graphs only"}
#: the host figures the virtual device charges, written into every GPU of the platform
#: (``--event-s`` sets ``event_s``: 0 by default, see the module's note)
HOST_FIGURES = {"graph_launch_s": 4e-6, "event_s": 0.0, "copy_issue_s": 2e-6}


def two_gpus() -> Platform:
    """The host and the first two GPUs of ``multi-gpu-4``."""
    return Platform.preset("multi-gpu-4").only(["cpu", "gpu0", "gpu1"], name="two-gpu")


def platforms() -> dict[str, Platform]:
    return {"one-stream": Platform.preset("xeon-p2200"), "four-streams": Platform.preset("h100-server"),
            "two-gpus": two_gpus()}


def calibrated(platform: Platform, launch: str, figures: dict[str, float]) -> Platform:
    """``platform`` whose GPUs launch in ``launch`` mode with the host ``figures``."""
    devices = tuple(dataclasses.replace(d, launch=launch, **figures) if d.kind == "gpu" else d
                    for d in platform.devices)
    return platform.replace(devices=devices)


def applicable(name: str, launch: str) -> bool:
    return name not in SKIP and not (name == "dynamic" and launch == "graph")


def uses_gpu(plan, platform: Platform) -> bool:
    """Whether ``plan`` may run an op on a GPU (a plan that does not runs no GPU path)."""
    return any(platform.device(d).kind == "gpu" for d in plan_devices(plan, platform))


def compare(graph, model, wiring, platform: Platform, scheduler: str, launch: str,
            cost) -> tuple[float, float] | None:
    """(executor's virtual makespan, simulated makespan) of one plan; None for a plan
    that places nothing on a GPU."""
    planned = schedulers.get(scheduler).run(graph, platform, cost, simulate=False)
    if not uses_gpu(planned.plan, platform):
        return None
    same = planned.graph is graph
    predicted = simulate(planned.graph, platform, planned.plan, cost).makespan
    dev = VirtualCuda(platform, cost)
    with dev.execution(planned.graph, planned.plan, wiring if same else None, model=model if same else None,
                       launch=launch, cost=cost) as ex:
        ex.run(1)  # the first run is checked against the single-device reference
        res = ex.result()
    if res.check is None or res.check["node_error"] > 1.0 or res.check["error"] > 1.0:
        raise AssertionError(f"outputs differ from the reference: {res.check}")
    return res.makespans[0], predicted


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--platforms", default="one-stream,four-streams,two-gpus")
    ap.add_argument("--schedulers", default=None, help="comma-separated (default: every applicable one)")
    ap.add_argument("--launch", default="graph,eager")
    ap.add_argument("--event-s", type=float, default=HOST_FIGURES["event_s"],
                    help="host seconds per event record and wait (default 0)")
    ap.add_argument("--csv", type=Path, default=None, help="write one row per plan here")
    args = ap.parse_args(argv)
    cost = Roofline()
    plats = platforms()
    rows = []
    names = args.schedulers.split(",") if args.schedulers else schedulers.names()
    for name in args.models.split(","):
        graph = zoo.load(name, cache=True, **MODELS[name])
        model = load_model(graph)
        wiring = wire(graph, model)
        for pname in args.platforms.split(","):
            for launch in args.launch.split(","):
                platform = calibrated(plats[pname], launch, {**HOST_FIGURES, "event_s": args.event_s})
                for sched in names:
                    if not applicable(sched, launch):
                        continue
                    t = time.perf_counter()
                    try:
                        pair = compare(graph, model, wiring, platform, sched, launch, cost)
                    except Exception as e:  # noqa: BLE001 - a plan that fails is reported, the rest go on
                        print(f"{name:13s} {pname:12s} {launch:5s} {sched:18s} FAILED {type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200]}", flush=True)
                        rows.append((name, pname, launch, sched, None, None, None))
                        continue
                    if pair is None:
                        print(f"{name:13s} {pname:12s} {launch:5s} {sched:18s} no GPU work (not compared)", flush=True)
                        continue
                    measured, predicted = pair
                    diff = (measured - predicted) / predicted
                    rows.append((name, pname, launch, sched, measured, predicted, diff))
                    print(f"{name:13s} {pname:12s} {launch:5s} {sched:18s} executor {measured * 1e6:9.1f} us  "
                          f"simulator {predicted * 1e6:9.1f} us  {diff * 100:+7.2f} %  "
                          f"({time.perf_counter() - t:.1f} s)", flush=True)
    done = [r for r in rows if r[6] is not None]
    worst = max((abs(r[6]) for r in done), default=float("nan"))
    within = sum(abs(r[6]) <= 0.02 for r in done)
    print(f"\n{len(done)} plans compared ({len(rows) - len(done)} failed); max |difference| {worst * 100:.2f} %; "
          f"{within} within 2 %")
    if args.csv is not None:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["model", "platform", "launch", "scheduler", "executor_s", "simulator_s", "difference"])
            w.writerows(rows)
    return 0 if done and worst <= 0.02 and len(done) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
