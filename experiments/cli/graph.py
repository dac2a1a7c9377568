"""``hetsim graph``: import a model and print what its dataflow graph looks like."""

from __future__ import annotations

import argparse
import json

from hetsim.experiments.cli.common import add_model_args, load_model, output_file
from hetsim.graphs.graph import GraphError, atomic_write
from hetsim.graphs.summary import format_summary, summary, to_dot


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "graph",
        help="import a model (zoo name or graph JSON) and summarise its graph",
        description="Import a model through TVM Relax (or read a PyTorch profiler trace: one node per kernel, copy "
        "and host synchronisation of a step, with its measured times) and print nodes, edges, GFLOPs, "
        "parameter and activation MB, longest path, widest antichain and op kinds.",
    )
    add_model_args(p)
    p.add_argument("--step", metavar="NAME",
                   help="a profiler trace's step: ProfilerStep#N or a record_function name, 'all' for the whole trace "
                   "(default: the last ProfilerStep, else the whole trace)")
    p.add_argument("--execution-trace", metavar="ET.json",
                   help="PyTorch execution trace of the profiled run (its tensors add data dependencies)")
    p.add_argument("--json", type=output_file, metavar="OUT", help="write the graph as hetsim graph JSON")
    p.add_argument("--dot", type=output_file, metavar="OUT", help="write the graph as Graphviz DOT")
    p.add_argument("--summary-json", action="store_true", help="print the summary as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.graphs.trace import from_trace, is_trace_file

    if is_trace_file(args.model):
        graph = from_trace(args.model, step=args.step, execution_trace=args.execution_trace)
    elif args.step or args.execution_trace:
        raise GraphError(f"{args.model}: --step and --execution-trace are for profiler traces (.json / .json.gz)")
    else:
        graph = load_model(args)
    s = summary(graph)
    print(json.dumps(s, indent=1) if args.summary_json else format_summary(s))
    if graph.meta.get("source") == "kineto" and not args.summary_json:
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.experiments.trace_report import trace_line

        print(trace_line(graph))
    if args.json:
        graph.to_json(args.json)
        print(f"wrote {args.json}")
    if args.dot:
        atomic_write(args.dot, lambda fh: fh.write(to_dot(graph)))
        print(f"wrote {args.dot}")
    return 0
