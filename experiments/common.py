"""Helpers shared by the CLI subcommands: model loading, ``KEY=VALUE`` arguments."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import Graph, GraphError

__all__ = ["add_model_args", "load_model", "parse_kv"]


def parse_kv(items: list[str] | None) -> dict[str, Any]:
    """``["seq_len=8", "hidden=64"]`` -> ``{"seq_len": 8, "hidden": 64}`` (JSON values)."""
    out: dict[str, Any] = {}
    for item in items or []:
        if "=" not in item:
            raise GraphError(f"model argument {item!r} must look like KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except json.JSONDecodeError:
            out[k.strip()] = v
    return out


def add_model_args(p: argparse.ArgumentParser) -> None:
    """MODEL positional plus ``--batch``, ``--granularity`` and ``--arg KEY=VALUE``."""
    p.add_argument("model", metavar="MODEL", help="zoo model name or a graph JSON file")
    p.add_argument("--batch", type=int, default=1, help="batch size (zoo models; default 1)")
    p.add_argument(
        "--granularity",
        choices=["op", "fused"],
        default="op",
        help="one node per Relax op, or per fused TVM kernel (default op)",
    )
    p.add_argument(
        "--arg",
        action="append",
        metavar="KEY=VALUE",
        help="zoo model argument, e.g. --arg seq_len=32 (repeatable)",
    )


def load_model(args: argparse.Namespace) -> Graph:
    """The graph named by ``args.model``: a graph JSON file or a zoo model."""
    from hetsim.graphs.graph import load

    target = args.model
    if target.endswith(".json") or Path(target).is_file():
        return load(target)
    from hetsim.graphs import zoo

    # cache=True: $HETSIM_CACHE, else ~/.cache/hetsim/zoo (keyed by the importer's source,
    # so a changed importer never returns a stale graph)
    return zoo.load(
        target, batch=args.batch, granularity=args.granularity, cache=True, **parse_kv(args.arg)
    )
