"""``hetsim simulate``: replay a plan for a model on a platform and print the result table.

Examples::

    hetsim simulate resnet18 --platform xeon-p2200 --scheduler all-gpu
    hetsim simulate graph.json --platform my-box.toml --plan plan.json --requests 8 \\
        --interval 0.002 --trace out/trace.json
    hetsim simulate googlenet --platform cpu2 --scheduler tensor-split --cost profiles/cpu2-torch

The plan is made (``--scheduler``) and simulated through
:meth:`Scheduler.run <schedulers.base.Scheduler.run>`: a scheduler that rewrites the
graph (tensor-split) has its plan simulated on the rewritten graph, and the same
``--cost`` model plans and prices.
"""

from __future__ import annotations

import argparse
import json
import sys

from hetsim.experiments.cli.common import (
    add_cost_args,
    add_model_args,
    check_cost,
    cost_model,
    load_model,
    non_negative_float,
    non_negative_int,
    output_file,
    parse_kv,
    request_count,
)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``simulate`` subcommand on ``sub``."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.sim.result import METRIC_DEFINITIONS, describe_metrics

    p = sub.add_parser(
        "simulate",
        help="simulate a plan (file or scheduler) for a model on a platform",
        description="Replay a plan on the platform's devices and links (SimPy) and print "
        "makespan, latency, request rates, busy time and utilisation per device and link, "
        "traffic and peak memory.",
        epilog="what the output reports:\n" + describe_metrics((), {
            "makespan": METRIC_DEFINITIONS["makespan_s"],
            "requests/s": METRIC_DEFINITIONS["requests_per_s"],
            "steady state": METRIC_DEFINITIONS["throughput_per_s"],
            "busy ms": "kernel time summed over the device's streams (a device with 4 "
            "streams can be busy 4 x the makespan)",
            "util": "busy / (makespan x streams); links: transfer time / makespan",
        }),  # fmt: skip
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_args(p)
    p.add_argument("--platform", default="xeon-p2200", metavar="NAME|FILE",
                   help="platform preset name or TOML file (default xeon-p2200, as compare)")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--plan", metavar="FILE", help="plan JSON written by Plan.to_json")
    how.add_argument("--scheduler", metavar="NAME", help="build the plan with this scheduler")
    p.add_argument(
        "--scheduler-arg",
        action="append",
        metavar="KEY=VALUE",
        help="scheduler hyper-parameter, e.g. --scheduler-arg seed=3 (repeatable)",
    )
    add_cost_args(p)
    p.add_argument(
        "--requests",
        type=request_count,
        default=None,
        metavar="N",
        help="requests / micro-batches (default: the plan's microbatches, else 1)",
    )
    p.add_argument(
        "--interval",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="seconds between request arrivals (default 0: all at once)",
    )
    p.add_argument("--trace", type=output_file, metavar="OUT.json", help="write a Chrome/Perfetto trace")
    p.add_argument(
        "--noise",
        type=non_negative_float,
        default=0.0,
        help="coefficient of variation of kernel/transfer times (default 0)",
    )
    p.add_argument("--seed", type=non_negative_int, default=None, help="seed of --noise and of policies")
    p.add_argument(
        "--no-memory-check",
        action="store_true",
        help="report a memory overflow instead of stopping at it",
    )
    p.add_argument("--json", action="store_true", help="print the summary row as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    """Load model, platform and plan; simulate; print the table (or JSON); exit status."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim import schedulers
    from hetsim.costmodel.platform import Platform
    from hetsim.sim.options import SimOptions

    # the scheduler (or plan file), platform and cost spec are checked before the model import
    plan = schedulers.load_plan(args.plan) if args.plan else None  # rebuilds a dynamic policy
    sched = None if plan is not None else schedulers.get(args.scheduler, **parse_kv(args.scheduler_arg))
    platform = Platform.load(args.platform)
    check_cost(args.cost)
    graph = load_model(args)
    cost = cost_model(args, platform)
    options = SimOptions(requests=args.requests, interval_s=args.interval, record=bool(args.trace), seed=args.seed,
                         noise=args.noise, check_memory=not args.no_memory_check)  # fmt: skip
    if plan is not None:
        run = schedulers.run_plan(graph, platform, plan, cost, options)
    else:
        run = sched.run(graph, platform, cost, options)
    result = run.result
    if run.graph is not graph:
        print(f"{args.scheduler} rewrote the graph: {graph.number_of_nodes()} -> "
              f"{run.graph.number_of_nodes()} nodes", file=sys.stderr)
    if run.plan.meta.get("objective"):
        print(f"{run.scheduler}: objective: {run.plan.meta['objective']}", file=sys.stderr)
    if args.json:
        print(json.dumps(result.summary(), indent=1))
    else:
        print(result)
    if args.trace:
        path = result.to_chrome_trace(args.trace)
        print(f"wrote {path}")
    return 0 if result.ok else 1
