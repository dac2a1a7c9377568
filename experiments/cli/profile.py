"""``hetsim profile``: measure operators, links and dispatch on this machine.

Examples
--------
``hetsim profile resnet18 googlenet --devices cpu --backend torch --out out/profiles/box``
``hetsim profile lstm --arg seq_len=4 --arg hidden=32 --batches 1,4 --out out/profiles/rnn``
``hetsim profile resnet18 --devices cpu,cuda:0 --out out/profiles/gpu-box`` (on a GPU host)
``hetsim profile import SOURCE --out out/profiles`` (the NeuSight GPU data set: ``cli_profile_import``)
"""

from __future__ import annotations

import argparse
from typing import Any

from hetsim.experiments.cli.common import output_folder, parse_kv, positive_float, positive_int
from hetsim.experiments.cli.main import CLIError
from hetsim.graphs.graph import load


def _ints(text: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not out or any(b < 1 for b in out):
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return out


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "profile",
        help="measure operator, link and dispatch times on this machine into a profile folder",
        description="Time every distinct operator signature of the given zoo models (graph "
        "JSON files also accepted) at each batch size on each device with the chosen backend's "
        "kernels, plus host<->GPU copies (when a CUDA device is profiled) and per-op dispatch "
        "overhead; write a profile folder (costmodel/PROFILE_FORMAT.md). Re-running resumes: "
        "signatures already measured for a device and backend are skipped. "
        "'hetsim profile import SOURCE --out DIR' converts the NeuSight GPU kernel data set instead "
        "(see 'hetsim profile import --help').",
    )
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="zoo model names or graph JSON files (default: every zoo model)")
    p.add_argument("--devices", default="cpu",
                   help="comma-separated devices: cpu (all cores), cpu@N (N threads), cuda:K "
                   "(default cpu)")
    p.add_argument("--trust-model-code", action="store_true",
                   help="a graph JSON whose meta.model_spec names Python code (file.py:Class): import that file "
                   "to rebuild the model for the tvm backend (a graph file runs no code without this flag)")
    p.add_argument("--backend", choices=["torch", "tvm"], default="torch",
                   help="torch: vendor kernels (oneDNN, cuBLAS/cuDNN); tvm: TVM-compiled PrimFuncs "
                   "(default torch)")
    p.add_argument("--out", type=output_folder, required=True, metavar="DIR", help="profile folder, e.g. out/profiles/NAME")
    p.add_argument("--batches", type=_ints, default=[1], metavar="B[,B...]",
                   help="batch sizes to import zoo models at (default 1)")
    p.add_argument("--granularity", choices=["op", "fused"], default="op",
                   help="one node per Relax op, or per fused TVM kernel (tvm backend only)")
    p.add_argument("--threads", type=positive_int, default=None, metavar="N",
                   help="threads of a plain 'cpu' device (default: every core)")
    p.add_argument("--arg", action="append", metavar="[MODEL.]KEY=VALUE",
                   help="zoo model option for every model (KEY=VALUE) or one (MODEL.KEY=VALUE), "
                   "e.g. --arg image_size=64 --arg bert_base.seq_len=32 (repeatable)")
    p.add_argument("--min-time", type=positive_float, default=0.05, metavar="S",
                   help="time each op at least S seconds before the stability test (default 0.05)")
    p.add_argument("--max-time", type=positive_float, default=1.0, metavar="S",
                   help="stop timing an op after S seconds (default 1)")
    p.add_argument("--max-repeats", type=positive_int, default=2000, metavar="N",
                   help="stop timing an op after N calls (default 2000)")
    p.add_argument("--rtol", type=positive_float, default=0.02,
                   help="stop when the median moves less than this between rounds (default 0.02)")
    p.add_argument("--passes", type=positive_int, default=1, metavar="N",
                   help="measure every signature N times, in N passes over all of them, and keep the "
                   "median: averages out a shared machine's drift (default 1)")
    p.add_argument("--no-links", action="store_true", help="skip the host<->GPU copy measurements")
    p.add_argument("--keep-going", action="store_true",
                   help="skip (and list) nodes the backend cannot run instead of stopping")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def model_options(models: list[str], items: list[str] | None) -> dict[str, dict[str, Any]]:
    """``--arg`` values per model: ``KEY=VALUE`` applies to all, ``MODEL.KEY=VALUE`` to one."""
    out: dict[str, dict[str, Any]] = {m: {} for m in models}
    for key, value in parse_kv(items).items():
        model, dot, name = key.partition(".")
        if dot and model in out:
            out[model][name] = value
        else:
            for m in models:
                out[m][key] = value
    return out


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.graphs import zoo

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.backends import BackendError, check_available, parse_devices
    from hetsim.runtime.profiler import MeasureSettings, profile_models

    try:
        devices = parse_devices(args.devices, threads=args.threads)
        for d in devices:  # before anything is imported or measured
            check_available(d)
        settings = MeasureSettings(min_time_s=args.min_time, max_time_s=args.max_time,
                                   max_repeats=args.max_repeats, rtol=args.rtol, passes=args.passes,
                                   min_repeats=min(5, args.max_repeats))
    except (BackendError, ValueError) as e:
        raise CLIError(str(e)) from e
    targets = args.models or zoo.names()
    models: list[Any] = []
    for t in targets:
        if t.endswith(".json") or Path(t).is_file():
            graph = load(t)
            graph.model_code_trusted = args.trust_model_code
            models.append(graph)
        else:
            models.append(t)
    names = [m for m in models if isinstance(m, str)]
    try:
        result = profile_models(
            models, devices, args.backend, args.out, batches=args.batches,
            granularity=args.granularity, model_kwargs=model_options(names, args.arg),
            threads=args.threads, settings=settings, links=not args.no_links,
            progress=not args.no_progress, on_error="skip" if args.keep_going else "raise",
        )
    except BackendError as e:
        raise CLIError(str(e)) from e
    print(f"profile {result.path}: {result.measured} signature(s) measured, "
          f"{result.skipped} already there, in {result.seconds:.1f} s")
    for dev, t in result.dispatch.items():
        print(f"  dispatch {dev}: {t * 1e6:.1f} us per op")
    for f in result.failed:
        print(f"  skipped {f}")
    return 0
