"""``hetsim compare``: every scheduler on one model, simulated, tabulated and plotted."""

from __future__ import annotations

import argparse
import sys
import time

from hetsim.experiments.common import add_model_args, load_model, parse_kv


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``compare`` subcommand on ``sub``."""
    p = sub.add_parser(
        "compare",
        help="run every scheduler on a model, simulate each plan, table + plots",
        description="Plan MODEL with each scheduler, simulate every plan on the platform, "
        "print makespan, speedups, latency, throughput, utilisation, PCIe bytes and "
        "scheduling time, and write results.csv, plans and Gantt/bar charts to --out.",
    )
    add_model_args(p)
    p.add_argument("--platform", default="xeon-p2200", help="preset name or TOML file (default xeon-p2200)")
    p.add_argument("--schedulers", help="comma-separated scheduler names (default: all that apply)")
    p.add_argument("--cost", default="default", metavar="SPEC",
                   help="cost model (costmodel.from_spec): 'default' (each device's own source: the measured "
                   "GPU profile a preset names, else the roofline), 'roofline', a profile folder, a built-in "
                   "GPU profile (gpu-t4, gpu-a100-80gb, gpu-h100...), 'cross-gpu', or one source per device "
                   "'cpu=PROFILE,gpu=gpu-a100-80gb' (default: default)")
    p.add_argument("--requests", type=int, default=1, help="requests through each plan (default 1)")
    p.add_argument("--interval", type=float, default=0.0, help="seconds between request arrivals")
    p.add_argument(
        "--scheduler-arg",
        action="append",
        metavar="SCHED:KEY=VALUE",
        help="scheduler hyper-parameter, e.g. optimal:time_limit_s=30 (repeatable)",
    )
    p.add_argument("--out", help="folder for results.csv, plans/, makespan.png/pdf and gantt/")
    p.add_argument("--no-plots", action="store_true", help="skip the charts (faster)")
    return p


def run(args: argparse.Namespace) -> int:
    """Compare, print the table, save to ``--out``; 1 when no scheduler gave a usable plan."""
    from hetsim.experiments.cli import CLIError
    from hetsim.experiments.compare import compare

    t0 = time.perf_counter()
    graph = load_model(args)
    sargs: dict[str, dict] = {}
    for item in args.scheduler_arg or []:
        if ":" not in item:
            raise CLIError(f"--scheduler-arg {item!r} must look like SCHED:KEY=VALUE")
        name, kv = item.split(":", 1)
        sargs.setdefault(name, {}).update(parse_kv([kv]))
    names = [s.strip() for s in args.schedulers.split(",") if s.strip()] if args.schedulers else None
    cmp = compare(
        graph,
        args.platform,
        schedulers=names,
        cost=args.cost,
        requests=args.requests,
        interval_s=args.interval,
        scheduler_args=sargs,
        record=bool(args.out) and not args.no_plots,
        progress=True,
    )
    print(
        f"{graph.name}: {graph.number_of_nodes()} nodes ({graph.meta.get('granularity', '?')}), "
        f"batch {graph.meta.get('batch')}, platform {cmp.platform.name}, "
        f"cost {cmp.config.get('cost_sources', cmp.config.get('cost'))}, "
        f"requests {args.requests}"
    )
    print(cmp.format_table())
    best = cmp.best()
    if best is not None:
        print(f"best: {best}   ({time.perf_counter() - t0:.1f} s)")
    else:
        print(f"hetsim compare: no scheduler produced a usable plan for {graph.name!r} on "
              f"{cmp.platform.name!r}; the reasons are in the table above", file=sys.stderr)
    if args.out:
        cmp.save(args.out, plots=not args.no_plots)
        charts = "" if args.no_plots or best is None else ", makespan.png/pdf, gantt/"
        print(f"wrote {args.out}/results.csv, plans/{charts}")
    return 0 if best is not None else 1
