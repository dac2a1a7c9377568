"""``hetsim compare``: every scheduler on one model, simulated, tabulated and plotted."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time

from hetsim.experiments.cli.common import (
    add_cost_args,
    add_model_args,
    check_cost,
    cost_model,
    load_model,
    non_negative_float,
    output_folder,
    parse_kv,
    request_count,
)
from hetsim.experiments.cli.main import CLIError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``compare`` subcommand on ``sub``."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.compare import COLUMN_DEFINITIONS, TABLE_COLUMNS
    from hetsim.sim.result import METRIC_DEFINITIONS, describe_metrics

    p = sub.add_parser(
        "compare",
        help="run every scheduler on a model, simulate each plan, table + plots",
        description="Plan MODEL with each scheduler, simulate every plan on the platform, "
        "print makespan, speedups, latency, request rates, utilisation, link traffic and "
        "scheduling time, and write results.csv, plans and charts to --out.",
        epilog="columns (results.csv names; the table shows times in ms, bytes in MB):\n"
        + describe_metrics((), {c: {**METRIC_DEFINITIONS, **COLUMN_DEFINITIONS}[c] for c in TABLE_COLUMNS})
        + "\n\n" + textwrap.fill(
            "optimal states its objective under the table: the makespan of the --requests "
            "given, over static plans (a placement and an order) of the graph as given; "
            "dynamic places at run time and tensor-split rewrites the graph, so either can "
            "beat it.", 88),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_args(p)
    p.add_argument("--platform", default="xeon-p2200", help="preset name or TOML file (default xeon-p2200)")
    p.add_argument("--schedulers", help="comma-separated scheduler names (default: all that apply)")
    add_cost_args(p)
    p.add_argument("--requests", type=request_count, default=1, metavar="N",
                   help="requests through each plan, all arriving at once unless --interval (default 1)")
    p.add_argument("--interval", type=non_negative_float, default=0.0, metavar="S",
                   help="seconds between request arrivals (default 0)")
    p.add_argument(
        "--scheduler-arg",
        action="append",
        metavar="SCHED:KEY=VALUE",
        help="scheduler hyper-parameter, e.g. optimal:time_limit_s=30 (repeatable)",
    )
    p.add_argument("--out", type=output_folder, help="folder for results.csv, plans/, makespan.png/pdf and gantt/")
    p.add_argument("--no-plots", action="store_true", help="skip the charts (faster)")
    return p


def run(args: argparse.Namespace) -> int:
    """Compare, print the table, save to ``--out``; 1 when no scheduler gave a usable plan."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.compare import check_arguments, compare

    t0 = time.perf_counter()
    sargs: dict[str, dict] = {}
    for item in args.scheduler_arg or []:
        if ":" not in item:
            raise CLIError(f"--scheduler-arg {item!r} must look like SCHED:KEY=VALUE")
        name, kv = item.split(":", 1)
        sargs.setdefault(name, {}).update(parse_kv([kv]))
    names = [s.strip() for s in args.schedulers.split(",") if s.strip()] if args.schedulers else None
    # everything that can be wrong with the arguments is reported before the model import
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.platform import Platform

    check_arguments(names, sargs, args.requests, args.interval)
    if args.out and os.path.isdir(args.out):  # a folder another command writes: refused before the work
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.experiments.output_folder import lock_folder

        with lock_folder(args.out):
            pass
    platform = Platform.load(args.platform)
    check_cost(args.cost)
    graph = load_model(args)
    cmp = compare(
        graph,
        platform,
        schedulers=names,
        cost=cost_model(args, platform),
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
    won = cmp.winners()
    if won:
        span = cmp.table.set_index("scheduler").at[won[0], "makespan_s"] * 1e3
        tie = f" (tie at {span:.3f} ms)" if len(won) > 1 else ""
        print(f"best{tie}: {', '.join(won)}   ({time.perf_counter() - t0:.1f} s)")
    else:
        print(f"hetsim compare: no scheduler produced a usable plan for {graph.name!r} on "
              f"{cmp.platform.name!r}; the reasons are in the table above", file=sys.stderr)
    if args.out:
        cmp.save(args.out, plots=not args.no_plots)
        charts = "" if args.no_plots or not won else ", makespan.png/pdf, gantt/"
        print(f"wrote {args.out}/results.csv, plans/{charts}")
    return 0 if won else 1
