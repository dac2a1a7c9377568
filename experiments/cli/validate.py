"""``hetsim validate``: execute a plan on this machine and compare it with the simulation.

Examples
--------
``hetsim validate googlenet --platform cpu2 --scheduler by-path`` (op times and host costs measured in the run)
``hetsim validate googlenet --platform cpu2 --scheduler heft --cost profiles/cpu2-torch --out out/v``
``hetsim validate resnet18 --platform box.toml --scheduler heft --launch eager --trace --out out/v`` (GPU ops launched one by one; a traced run for per-op GPU times)
``hetsim validate my_models.py:TinyNet --input-shape 1x3x32x32 --platform cpu2 --scheduler heft``
``hetsim validate --all --models googlenet,resnet18 --platform cpu2 --cost profiles/cpu2-torch --out out/validation``
``hetsim validate --all --models googlenet,resnet18 --platform cpu2 --cost profiles/cpu2-torch-ctx --in-context out/ctx --host-calibration squeezenet1_1 --out out/validation``
``hetsim validate --calibrate profiles/cpu2-torch`` (executor per-op overhead -> dispatch.json)
``hetsim validate --profile-in-context profiles/cpu2-torch-ctx --models googlenet,resnet18 --platform cpu2``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterable
from typing import Any

from hetsim.experiments.cli.common import (
    check_cost,
    non_negative_int,
    output_folder,
    parse_kv,
    positive_int,
)
from hetsim.experiments.cli.main import CLIError
from hetsim.graphs.model_spec import load_model_spec, parse_model_spec

#: the validated plans' median makespan spread ``(p90 - p10) / median`` above which
#: ``hetsim validate`` says the host is busy: noise of that size hides the simulator's
#: own error at the 10 % a validation judges
BUSY_SPREAD = 0.10


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``validate`` subcommand on ``sub``."""
    p = sub.add_parser(
        "validate",
        help="execute a plan on this machine's devices and compare with the simulation",
        description="Plan MODEL with a scheduler, simulate the plan, execute it on the real devices the "
        "platform maps to (cpu -> cpu@threads, gpu -> cuda:K), and print simulated vs measured makespan, "
        "the measured p10-p90 band, the error and per-device busy time. Without --cost the op times and "
        "host costs are measured in the run's own rounds (on a CUDA platform after a fresh calibration of the "
        "host costs; the output says which inputs were measured and which came from a file). Plans that use a "
        "GPU run with CUDA graphs unless --launch eager; dynamic plans are simulated with the placements their "
        "run made. --out writes "
        "sim_trace.json and run_trace.json (open them side by side in Perfetto). With --all: every "
        "applicable scheduler on several models, a validation.csv table and the Kendall tau between "
        "the simulated and measured rankings per model.",
    )
    p.add_argument("model", nargs="?", metavar="MODEL",
                   help="zoo model name, graph JSON file, ONNX file, or file.py:ClassName (a torch module; "
                   "give --input-shape; the file is imported, which runs its code: give only files you trust)")
    p.add_argument("--all", action="store_true", help="validate every applicable scheduler on --models")
    p.add_argument("--models", default="googlenet,resnet18", metavar="M[,M...]",
                   help="models for --all (default googlenet,resnet18)")
    p.add_argument("--schedulers", default=None, metavar="S[,S...]",
                   help="schedulers for --all (default: every applicable one)")
    p.add_argument("--platform", default="cpu2", metavar="NAME|FILE",
                   help="platform preset or TOML file (default cpu2)")
    p.add_argument("--scheduler", default=None, metavar="NAME", help="scheduler that plans MODEL")
    p.add_argument("--plan", default=None, metavar="FILE", help="a plan JSON instead of --scheduler")
    p.add_argument("--scheduler-arg", action="append", metavar="KEY=VALUE",
                   help="scheduler hyper-parameter (repeatable)")
    p.add_argument("--cost", default=None, metavar="PROFILE|SPEC",
                   help="cost model the scheduler and the simulator use: roofline, a profile folder, "
                   "DIR:KIND, or a saved model (default: measure the op times and host costs in this run's "
                   "own rounds, on a platform of this machine's CPU workers and CUDA GPUs; roofline on one "
                   "with GPUs this machine lacks)")
    p.add_argument("--backend", choices=["torch", "tvm"], default=None,
                   help="kernels: torch (vendor libraries) or tvm (default torch; with --calibrate: "
                   "the profile's backend)")
    p.add_argument("--trace", action="store_true",
                   help="after the timed runs, a traced run of each plan of its own (CUDA timing events around "
                   "every GPU op and copy, launched eagerly): the GPUs' busy times and run_trace.json's GPU ops")
    p.add_argument("--device-map", action="append", metavar="DEV=SPEC",
                   help="run platform device DEV on SPEC (cpu, cpu@N, cuda:K); repeatable")
    p.add_argument("--warmup", type=non_negative_int, default=3, help="untimed runs first (default 3)")
    p.add_argument("--repeats", type=positive_int, default=10, help="timed runs, or rounds, per execution (default 10)")
    p.add_argument("--replicas", type=int, default=3, metavar="N",
                   help="measure each plan as N executions, each built apart (its own buffers and threads), "
                   "their runs interleaved and pooled: one execution's memory layout is an offset all its runs "
                   "share (default 3; each execution holds its own buffers, so --replicas 1 for a model that "
                   "barely fits)")
    p.add_argument("--batch", type=positive_int, default=None,
                   help="batch size of zoo models (default 1; refused for a graph file of another batch)")
    p.add_argument("--granularity", choices=["op", "fused"], default=None,
                   help="graph granularity (fused needs --backend tvm; default op, a graph file's own)")
    p.add_argument("--arg", action="append", metavar="[MODEL.]KEY=VALUE",
                   help="zoo model option, e.g. --arg image_size=64 (repeatable)")
    p.add_argument("--input-shape", action="append", metavar="[NAME=]DIMS[:DTYPE[:HIGH]]",
                   help="example input of an ONNX or file.py:ClassName MODEL, full shape, e.g. 1x3x224x224 "
                   "or input_ids=2x16:int64:50257; repeat for several inputs")
    p.add_argument("--trust-model-code", action="store_true",
                   help="a graph JSON MODEL whose meta.model_spec names Python code (file.py:Class): import that "
                   "file to rebuild the model (a graph file runs no code without this flag)")
    p.add_argument("--launch", choices=["graph", "eager"], default=None,
                   help="how plans that use a GPU launch its ops, in the run and in the simulation: graph (each "
                   "segment between cross-device edges a CUDA graph; the default) or eager (one launch per op); "
                   "dynamic plans and the tvm backend launch eagerly, with a note")
    p.add_argument("--statistic", choices=["median", "mean"], default=None,
                   help="statistic of the measured makespans set beside the simulation (default: mean where "
                   "the op times are measured in the run on a CUDA platform, median otherwise)")
    p.add_argument("--out", type=output_folder, default=None, metavar="DIR",
                   help="write traces (and the --all tables) here")
    p.add_argument("--calibrate", default=None, metavar="PROFILE",
                   help="measure the executor's per-op overhead and write it into PROFILE/dispatch.json")
    p.add_argument("--profile-in-context", default=None, metavar="DIR",
                   help="profile the --models' operators as they run inside the model (executor, one "
                   "worker of --device) into the profile folder DIR, then stop; with --platform, also "
                   "the graphs tensor-split makes")
    p.add_argument("--device", default="cpu@1", help="device of --profile-in-context (default cpu@1)")
    p.add_argument("--in-context", default=None, metavar="DIR",
                   help="with --all: also run each model on one worker in every round, write those op times "
                   "to the profile folder DIR and simulate with them (with --cost, --cost then only plans; "
                   "without, DIR replaces OUT/profile)")
    p.add_argument("--host-calibration", default=None, metavar="MODEL",
                   help="zoo model (one not validated) run in every round on one worker, with every edge "
                   "crossing and twice side by side, to measure the handoff, read rate and two-worker "
                   "contention the simulation uses (default without --cost: squeezenet1_1; 'none': the "
                   "platform's values)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run the validation the arguments ask for; exit status 0 when it ran."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.backends import BackendError
    from hetsim.runtime.executor.setup import ExecutionError
    from hetsim.runtime.validation.rounds import check_replicas

    try:
        check_replicas(args.replicas)  # before any model import
        if args.calibrate:
            return _calibrate(args)
        if args.profile_in_context:
            return _profile_in_context(args)
        if args.all:
            return _run_all(args)
        if not args.model:
            raise CLIError("give a MODEL (or --all, or --calibrate PROFILE)")
        if not args.scheduler and not args.plan:
            raise CLIError("give --scheduler NAME or --plan FILE")
        return _run_one(args)
    except (ExecutionError, BackendError, ValueError) as e:
        raise CLIError(str(e)) from e


def _device_map(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        if "=" not in item:
            raise CLIError(f"--device-map {item!r} must look like DEV=SPEC (e.g. gpu=cuda:1)")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def _model_kwargs(models: list[str], items: list[str] | None) -> dict[str, dict[str, Any]]:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.cli.profile import model_options

    return model_options(models, items)


def _run_one(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim import schedulers
    from hetsim.costmodel.platform import Platform

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.validation.validate import validate

    platform = Platform.load(args.platform)  # its calibration is checked by validate()
    if not args.plan:  # a mistyped scheduler, parameter or cost is reported before the model import
        schedulers.get(args.scheduler, **parse_kv(args.scheduler_arg))
    if args.cost:
        check_cost(args.cost)
    spec = parse_model_spec(args.model)
    if spec.kind == "zoo":
        options = _model_kwargs([args.model], args.arg)[args.model]
    else:  # constructor arguments of a file.py:ClassName model
        options = parse_kv(args.arg) if spec.kind == "module" else {}
    graph = load_model_spec(spec, inputs=args.input_shape or (), options=options, batch=args.batch,
                            granularity=args.granularity, trust_model_code=args.trust_model_code)
    how: Any = schedulers.load_plan(args.plan) if args.plan else args.scheduler
    if args.plan:  # a plan of another graph is named as such before anything runs
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.sim.plan import PlanError

        try:
            how.validate(graph, platform)
        except PlanError as e:
            raise PlanError(f"{args.plan}: not a plan for graph {graph.name!r} on {platform.name!r}: {e}") from None
    res = validate(graph, platform, how, args.cost, options=_options(args),
                   scheduler_args=parse_kv(args.scheduler_arg) if not args.plan else None,
                   calibrate=args.host_calibration, folder=args.out,
                   progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(res)
    _hint_if_busy([res.run.spread])
    if args.out:
        out = res.write(args.out)
        print(f"wrote {out / 'sim_trace.json'} and {out / 'run_trace.json'} (open both in Perfetto)")
    return 0


def _options(args: argparse.Namespace) -> Any:
    """The run options (:class:`~runtime.validation.options.ValidationOptions`) of
    ``validate`` and ``validate --all``, from their shared flags."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.validation.options import ValidationOptions

    return ValidationOptions(backend=args.backend or "torch", warmup=args.warmup, repeats=args.repeats,
                             device_map=_device_map(args.device_map), replicas=args.replicas,
                             launch=args.launch, statistic=args.statistic, trace=args.trace)


def _run_all(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.validation.validate import format_table, validate_all

    if not args.out:
        raise CLIError("--all needs --out DIR (validation.csv, ranking.csv and traces go there)")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    scheds = [s.strip() for s in args.schedulers.split(",") if s.strip()] if args.schedulers else None
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim import schedulers

    for name in scheds or []:  # reported before any model import
        schedulers.get(name)
    if args.cost:
        check_cost(args.cost)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    table = validate_all(models, args.platform, scheds, args.cost, options=_options(args), batch=args.batch or 1,
                         model_kwargs=_model_kwargs(models, args.arg), out=args.out, progress=say,
                         in_context=args.in_context, calibrate=args.host_calibration)
    print(format_table(table))
    print("\ninputs of the simulation:")
    for what, where in table.attrs.get("inputs", {}).items():
        print(f"  {what + ':':<12}{where}")
    _hint_if_busy(table.loc[table["status"] == "ok", "spread_pct"] / 100.0)
    cal = table.attrs.get("calibration")
    if cal is not None:
        print("\nhost costs measured in the rounds:\n" + cal.to_string(index=False))
    print(f"wrote {args.out}/validation.csv and {args.out}/ranking.csv")
    if not (table["status"] == "ok").any():  # nothing validated: a script must not read success
        counts = ", ".join(f"{n} {s}" for s, n in table["status"].value_counts().items())
        print(f"hetsim validate: error: no plan was validated ({counts or 'no plans'}; the status "
              f"and note columns of {args.out}/validation.csv say why)", file=sys.stderr)
        return 1
    return 0


def busy_host_hint(spreads: Iterable[float]) -> str | None:
    """What to tell the user when the runs' own noise says the host was busy: the
    median over the validated plans of their makespans' ``(p90 - p10) / median`` is
    above :data:`BUSY_SPREAD`; None on a quiet host.

    Examples
    --------
    >>> busy_host_hint([0.03, 0.05]) is None
    True
    """
    spread = float(statistics.median(list(spreads) or [0.0]))
    if not spread > BUSY_SPREAD:
        return None
    return (f"the measured makespans spread by {spread:.0%} (p10-p90 over the median), more than the "
            f"{BUSY_SPREAD:.0%} a validation judges: the host is busy, and the error mixes the simulator's "
            "with the machine's noise; validate again on a quiet host (load average under 1)")


def _hint_if_busy(spreads: Iterable[float]) -> None:
    hint = busy_host_hint(spreads)
    if hint:
        print(f"hetsim validate: warning: {hint}", file=sys.stderr)


def _calibrate(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.validation.validate import calibrate_dispatch

    new = calibrate_dispatch(args.calibrate, backend=args.backend)
    for dev, t in new.items():
        print(f"dispatch {dev}: {t * 1e6:.2f} us per op (executor overhead, kernel call included)")
    print(f"wrote {args.calibrate}/dispatch.json")
    return 0


def _profile_in_context(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.runtime.validation.validate import profile_in_context

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    path = profile_in_context(models, args.profile_in_context, device=args.device,
                              backend=args.backend or "torch", batch=args.batch or 1,
                              model_kwargs=_model_kwargs(models, args.arg), platform=args.platform)
    print(f"wrote the in-context profile {path} ({', '.join(models)} on {args.device})")
    return 0
