"""``hetsim costmodel``: evaluate and fit the learned cost models on a profile.

``hetsim costmodel eval PROFILE [--out DIR] [--kinds polynomial,xgboost]``
    leave-one-model-out accuracy: prints the table, writes ``eval.csv`` (summary),
    ``eval_points.csv`` (every prediction) and ``eval.png``/``eval.pdf`` (predicted
    vs measured) to ``DIR`` (default ``PROFILE/eval``).
``hetsim costmodel fit PROFILE --kind K --out FILE``
    fits a cost model on the whole profile and saves it (``--cost FILE`` reads it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

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
    ev.add_argument("profile", metavar="PROFILE", help="profile folder")
    ev.add_argument("--out", metavar="DIR", help="output folder (default PROFILE/eval)")
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
    ft.add_argument("--out", metavar="FILE", required=True, help="model file to write (.json)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.costmodel_command == "eval":
        return _run_eval(args)
    return _run_fit(args)


def _run_eval(args: argparse.Namespace) -> int:
    from hetsim.costmodel.evaluate import format_eval, loo_predictions, plot_eval, summarize
    from hetsim.costmodel.profile import read_profile

    prof = read_profile(args.profile)
    out = Path(args.out) if args.out else Path(args.profile) / "eval"
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
    out.mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "eval.csv", index=False)
    points.to_csv(out / "eval_points.csv", index=False)
    paths = plot_eval(points, out, title=f"profile {prof.name}: leave-one-model-out")
    for p in [out / "eval.csv", out / "eval_points.csv", *paths]:
        print(f"wrote {p}")
    return 0


def _run_fit(args: argparse.Namespace) -> int:
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
