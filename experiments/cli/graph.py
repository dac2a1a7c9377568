"""``hetsim graph``: import a model and print what its dataflow graph looks like."""

from __future__ import annotations

import argparse
import json

from hetsim.experiments.cli.common import add_model_args, load_model, output_file


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "graph",
        help="import a model (zoo name or graph JSON) and summarise its graph",
        description="Import a model through TVM Relax and print nodes, edges, GFLOPs, "
        "parameter and activation MB, longest path, widest antichain and op kinds.",
    )
    add_model_args(p)
    p.add_argument("--json", type=output_file, metavar="OUT", help="write the graph as hetsim graph JSON")
    p.add_argument("--dot", type=output_file, metavar="OUT", help="write the graph as Graphviz DOT")
    p.add_argument("--summary-json", action="store_true", help="print the summary as JSON")
    return p


def run(args: argparse.Namespace) -> int:
    from hetsim.graphs.graph import atomic_write
    from hetsim.graphs.summary import format_summary, summary, to_dot

    graph = load_model(args)
    s = summary(graph)
    print(json.dumps(s, indent=1) if args.summary_json else format_summary(s))
    if args.json:
        graph.to_json(args.json)
        print(f"wrote {args.json}")
    if args.dot:
        atomic_write(args.dot, lambda fh: fh.write(to_dot(graph)))
        print(f"wrote {args.dot}")
    return 0
