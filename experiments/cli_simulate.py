"""``hetsim simulate``: replay a plan for a model on a platform and print the result table.

Examples::

    hetsim simulate resnet18 --platform xeon-p2200 --scheduler all-gpu
    hetsim simulate graph.json --platform my-box.toml --plan plan.json --requests 8 \\
        --interval 0.002 --trace out/trace.json
"""

from __future__ import annotations

import argparse
import json
from types import ModuleType
from typing import TYPE_CHECKING

from hetsim.experiments.common import add_model_args, load_model, parse_kv

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

#: schedulers this module can build itself when the ``schedulers`` package is absent
BUILTIN_SCHEDULERS = ("all-cpu", "all-gpu")


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``simulate`` subcommand on ``sub``."""
    p = sub.add_parser(
        "simulate",
        help="simulate a plan (file or scheduler) for a model on a platform",
        description="Replay a plan on the platform's devices and links (SimPy) and print "
        "makespan, latency, throughput, utilisation, traffic and peak memory.",
    )
    add_model_args(p)
    p.add_argument(
        "--platform", required=True, metavar="NAME|FILE", help="platform preset name or TOML file"
    )
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument("--plan", metavar="FILE", help="plan JSON written by Plan.to_json")
    how.add_argument("--scheduler", metavar="NAME", help="build the plan with this scheduler")
    p.add_argument(
        "--scheduler-arg",
        action="append",
        metavar="KEY=VALUE",
        help="scheduler hyper-parameter, e.g. --scheduler-arg seed=3 (repeatable)",
    )
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        metavar="N",
        help="requests / micro-batches (default: the plan's microbatches, else 1)",
    )
    p.add_argument(
        "--interval",
        type=float,
        default=0.0,
        metavar="S",
        help="seconds between request arrivals (default 0: all at once)",
    )
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace")
    p.add_argument(
        "--noise",
        type=float,
        default=0.0,
        help="coefficient of variation of kernel/transfer times (default 0)",
    )
    p.add_argument("--seed", type=int, default=None, help="seed of --noise and of policies")
    p.add_argument(
        "--no-memory-check",
        action="store_true",
        help="report a memory overflow instead of stopping at it",
    )
    p.add_argument("--json", action="store_true", help="print the summary row as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    """Load model, platform and plan; simulate; print the table (or JSON); exit status."""
    from hetsim.costmodel.roofline import Roofline
    from hetsim.sim.engine import simulate
    from hetsim.sim.platform import Platform

    graph = load_model(args)
    platform = Platform.load(args.platform)
    cost = Roofline()
    plan = _plan(args, graph, platform, cost)
    result = simulate(
        graph,
        platform,
        plan,
        cost,
        requests=args.requests,
        interval_s=args.interval,
        record=bool(args.trace),
        seed=args.seed,
        noise=args.noise,
        check_memory=not args.no_memory_check,
    )
    if args.json:
        print(json.dumps(result.summary(), indent=1))
    else:
        print(result)
    if args.trace:
        path = result.to_chrome_trace(args.trace)
        print(f"wrote {path}")
    return 0 if result.ok else 1


def _plan(args: argparse.Namespace, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
    from hetsim.sim.plan import Plan

    if args.plan:
        sched = _schedulers()
        # schedulers.load_plan rebuilds a dynamic policy from its description
        return sched.load_plan(args.plan) if sched is not None else Plan.from_json(args.plan)
    params = parse_kv(args.scheduler_arg)
    sched = _schedulers()
    if sched is None:
        return builtin_plan(args.scheduler, graph, platform, **params)
    return sched.get(args.scheduler, **params).schedule(graph, platform, cost)


def _schedulers() -> ModuleType | None:
    """The ``schedulers`` package, or None where it is not installed (yet)."""
    try:
        from hetsim import schedulers
    except ModuleNotFoundError as e:
        if e.name != "schedulers":
            raise
        return None
    if not hasattr(schedulers, "get") or not hasattr(schedulers, "load_plan"):
        return None
    return schedulers


def builtin_plan(name: str, graph: Graph, platform: Platform, **params: object) -> Plan:
    """``all-cpu`` / ``all-gpu``: every node on the first device of that kind.

    >>> from hetsim.graphs import Graph
    >>> from hetsim.sim import Platform
    >>> g = Graph()
    >>> g.add_op("a", "relu", bytes=8)
    >>> builtin_plan("all-gpu", g, Platform.preset("xeon-p2200")).placement
    {'a': 'gpu'}
    """
    from hetsim.experiments.cli import CLIError
    from hetsim.sim.plan import Plan

    if name not in BUILTIN_SCHEDULERS:
        raise CLIError(
            f"unknown scheduler {name!r}: the schedulers package is unavailable; "
            f"built in: {', '.join(BUILTIN_SCHEDULERS)}"
        )
    if params:
        raise CLIError(f"scheduler {name!r} takes no parameters, got {sorted(params)}")
    kind = name.split("-", 1)[1]
    devices = platform.devices_of_kind(kind)
    if not devices:
        raise CLIError(f"platform {platform.name!r} has no {kind} device for {name!r}")
    return Plan(dict.fromkeys(graph, devices[0].name), meta={"scheduler": name})
