"""Helpers shared by the CLI subcommands: model loading, ``KEY=VALUE`` arguments, and
the checks that run before a model is imported (a mistyped scheduler, platform, cost
model or request count is reported at once, not after seconds of TVM import)."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hetsim.graphs.graph import Graph, GraphError
from hetsim.graphs.model_spec import load_model_spec

__all__ = [
    "add_cost_args", "add_input_args", "add_model_args", "check_cost", "cost_model", "int_at_least", "load_model",
    "non_negative_float", "non_negative_int", "output_file", "output_folder", "output_path", "parse_kv",
    "positive_float", "positive_int", "request_count",
]  # fmt: skip


def int_at_least(low: int, high: int | None = None) -> Callable[[str], int]:
    """argparse type: an integer >= ``low`` (``--folds``: 2, ``--warmup``: 0), and <= ``high``
    when given (``--requests``: what a simulation can index)."""
    what = f"an integer >= {low}"

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r:.60}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r:.60}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"expected an integer <= {high}, got {text!r:.60}")
        return value

    parse.__name__ = what  # what argparse names in "invalid ... value"
    return parse


#: argparse type: an integer >= 1 (``--requests``, ``--batch``)
positive_int = int_at_least(1)
#: argparse type: an integer >= 0 (``--seed``, ``--warmup``)
non_negative_int = int_at_least(0)
#: argparse type of ``--requests``: 1 to a million
request_count = int_at_least(1, 10**6)


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``--width``, ``--min-time``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a finite number > 0, got {text!r}")
    return value


def output_path(text: str) -> str:
    """argparse type of a file or folder to write (``--out``, ``--trace``, ``--dot``): refused
    at once when a part of it above the last is a file, or the folder it goes into is not
    writable, rather than after the work it saves."""
    path = Path(text)
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: {parent} is a file, not a folder")
    if parent.is_dir() and not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text}: folder {parent} is not writable")
    return text


def output_file(text: str) -> str:
    """:func:`output_path` of a file: refused when it is a folder."""
    output_path(text)
    if Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a folder, not a file")
    return text


def output_folder(text: str) -> str:
    """:func:`output_path` of a folder: refused when it is a file."""
    output_path(text)
    if Path(text).exists() and not Path(text).is_dir():
        raise argparse.ArgumentTypeError(f"{text}: is a file, not a folder")
    return text


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (``--interval``, ``--noise``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def check_cost(spec: str) -> None:
    """Refuse a ``--cost`` spec that names nothing (``CostModelError``), without fitting it."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.spec import check_spec

    check_spec(spec)


def add_cost_args(p: argparse.ArgumentParser) -> None:
    """``--cost SPEC`` and ``--allow-uncovered`` (see :func:`cost_model`)."""
    p.add_argument("--cost", default="default", metavar="SPEC",
                   help="cost model that plans and prices (costmodel.from_spec): 'default' (each device's own "
                   "source: the measured GPU profile a preset names, else the roofline), 'roofline', a profile "
                   "folder, PROFILE:KIND, a saved model file, a built-in GPU profile (gpu-t4, gpu-a100-80gb, "
                   "gpu-h100...), 'cross-gpu', or one source per device 'cpu=PROFILE,gpu=gpu-a100-80gb' "
                   "(default: default)")  # fmt: skip
    p.add_argument("--allow-uncovered", action="store_true",
                   help="price a model the --cost profile measured none of (refused by default: "
                   "every time would be extrapolated)")  # fmt: skip


def cost_model(args: argparse.Namespace, platform: Any) -> Any:
    """What ``--cost`` names, for ``Scheduler.run`` and ``compare``: the spec itself, or
    with ``--allow-uncovered`` the cost model built from it that prices graphs its
    profile measured none of."""
    if not args.allow_uncovered:
        return args.cost
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.spec import from_spec

    return from_spec(args.cost, platform=platform, allow_uncovered=True)


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
        help="zoo model name, graph JSON file, ONNX file, or file.py:ClassName (a torch module; the file is "
        "imported, which runs its code: give only files you trust)",
    )
    p.add_argument("--batch", type=positive_int, default=None,
                   help="batch size of a zoo model (default 1; refused for a graph file of another batch)")
    p.add_argument(
        "--granularity",
        choices=["op", "fused"],
        default=None,
        help="one node per Relax op, or per fused TVM kernel (default op; a graph file's own, another refused)",
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
    if (os.sep in args.model or args.model.startswith(".")) and os.path.isdir(args.model):  # a path, not a zoo name
        raise GraphError(f"{args.model}: is a folder, not a model (a zoo name, graph JSON, ONNX or "
                         "file.py:ClassName)")
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
