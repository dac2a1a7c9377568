"""``hetsim calibrate``: measure this machine's host costs and write a calibrated platform.

Examples
--------
``hetsim calibrate --platform h100-server --out out/calibration`` (platform.toml, measurements.json)
``hetsim calibrate --platform cpu2`` (no GPU: the CPU parts; writes under out/calibration)
``hetsim calibrate --platform h100-server --model googlenet --model resnet18`` (the GPU's host cost per op
measured on those models' ops)
"""

from __future__ import annotations

import argparse
import sys

from hetsim.experiments.cli.common import positive_int
from hetsim.experiments.cli.main import CLIError


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``calibrate`` subcommand on ``sub``."""
    p = sub.add_parser(
        "calibrate",
        help="measure this machine's host costs (micro-benchmarks, about a minute) into a platform file",
        description="Measure, with micro-benchmarks and no model: an op call per family on the CPU, a "
        "worker's wake-up, the interpreter lock between two threads and, with a CUDA GPU, its eager "
        "launches, a CUDA-graph replay, event record and wait, a copy issue and the GPU-to-CPU hand-over. "
        "Writes the platform with these host keys filled and a [calibration] table (DIR/platform.toml) "
        "and the raw measurements (DIR/measurements.json). With --model, the GPU's host cost per op is "
        "measured on those models' own ops through the executor. A platform with GPUs on a machine that "
        "cannot measure them is refused (its host costs would be this machine's); with --gpu none the GPU "
        "parts are skipped with a note. simulate, compare and validate read the platform file as any other.",
    )
    p.add_argument("--platform", metavar="NAME|FILE",
                   help="platform preset or TOML file to calibrate (required, except with --from-trace: the preset "
                   "of the traced GPU)")
    p.add_argument("--from-trace", metavar="TRACE",
                   help="take the GPU's host figures (launch, latency, event, copy issue) from a PyTorch profiler "
                   "trace instead of measuring this machine")
    p.add_argument("--step", metavar="NAME", help="the trace's step (with --from-trace; default the last ProfilerStep)")
    p.add_argument("--out", default="out/calibration", metavar="DIR",
                   help="folder of platform.toml and measurements.json (default out/calibration)")
    p.add_argument("--gpu", default="0", metavar="K|none",
                   help="CUDA GPU whose launches are measured (default 0; none: skip the GPU parts)")
    p.add_argument("--launch", choices=["graph", "eager"], default="graph",
                   help="launch mode of GPU devices whose platform entry states none (default graph)")
    p.add_argument("--calls", type=positive_int, default=100, help="calls per timed block (default 100)")
    p.add_argument("--repeats", type=positive_int, default=9,
                   help="timed blocks per figure, their median kept (default 9)")
    p.add_argument("--model", action="append", default=[], metavar="NAME",
                   help="zoo model (batch 1) whose ops' host cost the executor measures on the GPU, each op "
                   "launched eagerly, its bookkeeping included; their median becomes the GPU's dispatch_s "
                   "(repeatable; needs the GPU)")
    return p


def run(args: argparse.Namespace) -> int:
    """Calibrate; exit status 0 when the files were written."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.platform import Platform

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.calibration import calibrate

    if args.from_trace:
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.experiments.trace_calibrate import calibrate_from_trace

        figures, cal = calibrate_from_trace(args.from_trace, args.out, platform=args.platform, step=args.step)
        print(figures)
        print(f"wrote {args.out}/platform.toml ({cal.name}) and {args.out}/measurements.json")
        return 0
    if args.platform is None:
        raise CLIError("--platform is required (or --from-trace TRACE)")
    platform = Platform.load(args.platform)  # a mistyped platform is reported before any measurement
    if args.gpu == "none":
        gpu = None
    elif args.gpu.isdigit():
        gpu = int(args.gpu)
    else:
        raise CLIError(f"--gpu must be a GPU index or 'none', got {args.gpu!r}")
    try:
        cal = calibrate(platform, out=args.out, gpu=gpu, launch=args.launch, calls=args.calls,
                        repeats=args.repeats, progress=sys.stderr.isatty(), models=args.model)
    except OSError as e:
        raise CLIError(f"--out {args.out}: {e.strerror or e}") from e
    print(cal)
    return 0
