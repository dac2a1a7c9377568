"""Helpers shared by the CLI subcommands: model loading, ``KEY=VALUE`` arguments."""

from __future__ import annotations

import argparse
import json
from typing import Any

from hetsim.graphs.graph import Graph, GraphError

__all__ = ["add_input_args", "add_model_args", "load_model", "parse_kv"]


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
    """MODEL positional plus ``--batch``, ``--granularity``, ``--arg KEY=VALUE`` and
    ``--input-shape``."""
    p.add_argument(
        "model",
        metavar="MODEL",
        help="zoo model name, graph JSON file, ONNX file, or file.py:ClassName (a torch module)",
    )
    p.add_argument("--batch", type=int, default=1, help="batch size (zoo models; default 1)")
    p.add_argument(
        "--granularity",
        choices=["op", "fused"],
        default="op",
        help="one node per Relax op, or per fused TVM kernel (default op)",
    )
    add_input_args(p)


def add_input_args(p: argparse.ArgumentParser) -> None:
    """``--arg KEY=VALUE`` (model options) and ``--input-shape`` (ONNX / Python models)."""
    p.add_argument(
        "--arg",
        action="append",
        metavar="KEY=VALUE",
        help="zoo model option, or constructor argument of a file.py:ClassName model, e.g. "
        "--arg seq_len=32 (repeatable)",
    )
    p.add_argument(
        "--input-shape",
        action="append",
        metavar="[NAME=]DIMS[:DTYPE[:HIGH]]",
        help="example input of an ONNX or file.py:ClassName model, full shape, e.g. 1x3x224x224 "
        "or input_ids=2x16:int64:50257 (ints drawn in [0, HIGH)); repeat for several inputs",
    )


def load_model(args: argparse.Namespace) -> Graph:
    """The graph named by ``args.model``, a model spec (:func:`graphs.load_model_spec`):
    a zoo model (cached), a graph JSON file, an ONNX file or ``file.py:ClassName``."""
    from hetsim.graphs.model_spec import load_model_spec

    # cache=True: $HETSIM_CACHE, else ~/.cache/hetsim/zoo (keyed by the importer's source,
    # so a changed importer never returns a stale graph)
    return load_model_spec(
        args.model,
        inputs=getattr(args, "input_shape", None) or (),
        options=parse_kv(args.arg),
        batch=args.batch,
        granularity=args.granularity,
        cache=True,
    )
