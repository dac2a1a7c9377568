"""``hetsim costmodel``: evaluate and fit the learned cost models on a profile.

``hetsim costmodel eval PROFILE [--out DIR] [--kinds polynomial,xgboost]``
    leave-one-model-out accuracy: prints the table, writes ``eval.csv`` (summary),
    ``eval_points.csv`` (every prediction) and ``eval.png``/``eval.pdf`` (predicted
    vs measured) to ``DIR`` (default ``out/eval/<profile folder name>``: never into the
    profile, whose committed ``eval/`` files a command must not rewrite).
``hetsim costmodel eval --gpus all [--protocols held-out,cv,logo,kernel-logo,published] [--out DIR]``
    the GPU models on the built-in GPU profiles (or on GPU profile folders given as
    ``PROFILE...``): MAPE, median and p90 error per GPU and kernel family on the data
    set's held-out shapes, in a K-fold cross-validation over shapes, leave one GPU
    out over the GEMM and conv rows, and (``kernel-logo``) the kernel model left one GPU
    out over these profiles and Vidur's LLM layer kernels, per data set; writes
    ``gpu_eval.csv``, ``gpu_eval_points.csv`` and ``gpu_eval.png``/``.pdf``;
    ``published``: the published BERT-large / GPT-2-large latencies of those GPUs
    against their presets (default cost and roofline), ``published.csv``.
``hetsim costmodel fit PROFILE --kind K --out FILE``
    fits a cost model on the whole profile and saves it (``--cost FILE`` reads it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hetsim.experiments.cli.common import int_at_least, output_file, output_folder
from hetsim.experiments.cli.main import CLIError
from hetsim.graphs.graph import atomic_write

_KINDS = ("table", "polynomial", "xgboost")


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    bad = [k for k in kinds if k not in _KINDS]
    if not kinds or bad:
        raise argparse.ArgumentTypeError(f"kinds must be a comma-separated subset of {', '.join(_KINDS)}")
    return kinds


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "costmodel",
        help="evaluate (leave one model out) or fit learned cost models on a profile",
        description="Accuracy report and fitting of the measured cost models (table, "
        "polynomial, xgboost) on a profile folder written by 'hetsim profile'.",
    )
    cmds = p.add_subparsers(dest="costmodel_command", metavar="ACTION", required=True)
    ev = cmds.add_parser(
        "eval",
        help="leave-one-model-out accuracy per device and op kind",
        description="Train on the other models' operators, test on the held-out model's; "
        "MAPE, median and 90th-percentile absolute percentage error per device and op kind.",
    )
    ev.add_argument("profile", metavar="PROFILE", nargs="*",
                    help="profile folder; GPU profiles (hetsim profile import) or built-in names "
                    "(gpu-t4, ...) get the GPU evaluation")
    ev.add_argument("--gpus", metavar="all|NAME,...",
                    help="evaluate the GPU models on these built-in GPUs (t4, p4, p100, v100, a100-40gb, "
                    "a100-80gb, l4, h100; 'all')")
    ev.add_argument("--protocols", default="held-out,logo", metavar="P[,P]",
                    help="GPU evaluation: held-out (the data set's test shapes per GPU, models fitted on its "
                    "train rows), cv (K-fold cross-validation over shapes, both splits in training; GEMM "
                    "unless --families), logo (leave one GPU out), kernel-logo (the kernel model left one GPU "
                    "out, over these profiles and Vidur's LLM layer kernels) and/or published (published "
                    "whole-model latencies against the GPUs' presets); default held-out,logo")
    ev.add_argument("--folds", type=int_at_least(2), default=5, metavar="K",
                    help="GPU evaluation: folds of the shape cross-validation (default 5)")
    ev.add_argument("--families", default=None, metavar="F[,F...]",
                    help="GPU evaluation: kernel families (gemm, conv, norm, softmax, elementwise; default: "
                    "all for held-out, gemm,conv for logo)")
    ev.add_argument("--out", type=output_folder, metavar="DIR", help="output folder (default out/eval/PROFILE-NAME, or out/eval/gpu)")
    ev.add_argument("--kinds", type=_kinds, default=["polynomial", "xgboost"],
                    help="comma-separated predictors (default polynomial,xgboost)")
    ev.add_argument("--no-per-op", action="store_true", help="print only the overall rows")
    ft = cmds.add_parser(
        "fit",
        help="fit a cost model on a whole profile and save it",
        description="Fit a measured cost model and save it as JSON for '--cost FILE'.",
    )
    ft.add_argument("profile", metavar="PROFILE", help="profile folder")
    ft.add_argument("--kind", choices=_KINDS, default="table",
                    help="table (measured times, xgboost for unmeasured ops), polynomial or xgboost "
                    "(default table)")
    ft.add_argument("--out", type=output_file, metavar="FILE", required=True, help="model file to write (.json)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.costmodel_command == "eval":
        # lazy: a command's module loads only what its parser needs (hetsim --help)
        from hetsim.experiments.cli.gpu_eval import gpu_profiles, run_gpu_eval

        gpu = gpu_profiles(args.profile, args.gpus)
        if gpu is not None:
            return run_gpu_eval(args, gpu)
        return _run_eval(args)
    return _run_fit(args)


#: the files of ``hetsim costmodel eval``, replaced together
EVAL_OUTPUTS = ("eval.csv", "eval_points.csv", "eval.png", "eval.pdf")


def _run_eval(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.learned.evaluate import format_eval, loo_predictions, plot_eval, summarize
    from hetsim.costmodel.profile_reader import read_profile

    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.experiments.output_folder import replace_outputs

    if len(args.profile) != 1:
        raise CLIError(f"expected one (CPU) profile folder, got {args.profile or 'none'}")
    args.profile = args.profile[0]
    prof = read_profile(args.profile)
    out = Path(args.out) if args.out else Path("out") / "eval" / Path(args.profile).resolve().name
    points = loo_predictions(prof, args.kinds)
    summary = summarize(points)
    print(f"profile {prof.name!r}: leave-one-model-out over {len(prof.models)} models "
          f"({', '.join(prof.models)}); errors in percent")
    print(format_eval(summary, per_op=not args.no_per_op))
    overall = summary[(summary["op"] == "ALL") & (summary["held_out"] != "ALL")]
    for (pred, dev), grp in overall.groupby(["predictor", "device"], sort=False):
        worst = grp.loc[grp["mape_pct"].idxmax()]
        print(f"{pred} on {dev}: held-out MAPE {grp['mape_pct'].min():.1f}% to {worst['mape_pct']:.1f}% "
              f"(worst: {worst['held_out']})")
    written: list[str] = []

    def write(stage: Path) -> None:  # the four files replace the previous ones together, or none does
        atomic_write(stage / "eval.csv", lambda fh: summary.to_csv(fh, index=False))
        atomic_write(stage / "eval_points.csv", lambda fh: points.to_csv(fh, index=False))
        paths = plot_eval(points, stage, title=f"profile {prof.name}: leave-one-model-out")
        written.extend(["eval.csv", "eval_points.csv", *(Path(p).name for p in paths)])

    replace_outputs(out, write, EVAL_OUTPUTS)
    for name in written:
        print(f"wrote {out / name}")
    return 0


def _run_fit(args: argparse.Namespace) -> int:
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim import costmodel

    prof = costmodel.read_profile(args.profile)
    model = costmodel.fit(prof, args.kind)
    path = model.save(args.out)
    counts = prof.training_rows()["device"].value_counts()
    print(f"fitted {args.kind} on profile {prof.name!r}: "
          + ", ".join(f"{d} {n} rows" for d, n in counts.items()))
    if args.kind == "polynomial":
        print(model.predictor.selection().to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"wrote {path}")
    return 0
