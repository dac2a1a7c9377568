"""Accuracy of the learned cost models on a profile: leave one model out.

A profile row belongs to every model listed in its ``models`` column. Holding out
model ``M`` trains a predictor on the rows that do *not* include ``M`` and tests it
on the rows that do: the operators of a network the model has never seen, which is
how a cost model is used on a new network. For every predictor kind, held-out
model, device and op kind (and ``ALL`` op kinds), the report gives the number of
test rows and the mean, median and 90th-percentile absolute percentage error
(``|predicted - measured| / measured``, in percent) of the op's time per call,
:meth:`~costmodel.profile_reader.Profile.call_times` (CPU: the wall time of one call,
dispatch included; GPU: the kernel's CUDA-event time), which is what the
predictors are fitted on. ``held_out == "ALL"`` pools
the test rows of every held-out model (a row shared by two models counts twice:
once per model it was held out with).

The project's accuracy target reads off one row: ``predictor == "xgboost"``,
``op == "ALL"``, ``mape_pct <= 10`` for each held-out model.

This module imports pandas and matplotlib on first use (``import hetsim.costmodel`` stays fast).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import CostModelError
from hetsim.graphs.graph import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hetsim.costmodel.profile_reader import Profile

__all__ = [
    "EVAL_COLUMNS",
    "POINT_COLUMNS",
    "evaluate",
    "format_eval",
    "loo_predictions",
    "plot_eval",
    "summarize",
]

#: columns of :func:`evaluate` / ``eval.csv``
EVAL_COLUMNS = ["predictor", "held_out", "device", "op", "n", "mape_pct", "median_ape_pct", "p90_ape_pct"]
#: columns of :func:`loo_predictions`
POINT_COLUMNS = ["predictor", "held_out", "device", "op", "signature", "measured_s", "predicted_s", "ape_pct"]
DEFAULT_KINDS = ("polynomial", "xgboost")
#: the band drawn around y = x in the scatter plot
BAND = 0.10


def loo_predictions(
    profile: Profile | str | os.PathLike[str],
    kinds: Sequence[str] = DEFAULT_KINDS,
    *,
    models: Sequence[str] | None = None,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    backend: str | None = None,
) -> pd.DataFrame:
    """Leave-one-model-out predictions: one row per (predictor, held-out model,
    test row), columns :data:`POINT_COLUMNS`.

    Parameters
    ----------
    profile
        A profile or profile folder with at least two models.
    kinds
        Predictor kinds (``polynomial``, ``xgboost``, ``table``; a held-out model's
        signatures are never in the training rows, so ``table`` measures its fallback).
    models
        Models to hold out in turn (default: every model of the profile).
    params
        Hyper-parameters per kind, e.g. ``{"xgboost": {"n_estimators": 200}}``.
    backend
        As in :func:`costmodel.spec`.
    """
    import numpy as np
    import pandas as pd

    # import cycles:
    #   hetsim.costmodel.learned.measured -> hetsim.costmodel -> hetsim.costmodel.learned.evaluate
    #   hetsim.costmodel.profile_reader -> hetsim.costmodel -> hetsim.costmodel.learned.evaluate
    #   hetsim.costmodel.spec -> hetsim.costmodel -> hetsim.costmodel.learned.evaluate
    from hetsim.costmodel.learned.measured import CostModelWarning
    from hetsim.costmodel.profile_reader import split_models
    from hetsim.costmodel.spec import as_profile, make_predictor

    prof = as_profile(profile)
    rows = prof.training_rows(backend).reset_index(drop=True)
    member = [set(split_models(c)) for c in rows["models"]]
    all_models = [m for m in prof.models if any(m in s for s in member)]
    held = list(models) if models is not None else all_models
    unknown = [m for m in held if m not in all_models]
    if unknown:
        raise CostModelError(f"profile {prof.name!r}: no rows of model(s) {unknown} (models: {all_models})")
    if len(all_models) < 2:
        raise CostModelError(
            f"profile {prof.name!r}: leave-one-model-out needs rows of at least two models, has {all_models}"
        )
    params = params or {}
    frames = []
    for kind in kinds:
        for m in held:
            test = np.array([m in s for s in member])
            train_rows = rows[~test]
            test_rows = rows[test & rows["device"].isin(set(train_rows["device"])).to_numpy()]
            skipped = int(test.sum()) - len(test_rows)
            if skipped:
                warnings.warn(CostModelWarning(
                    f"holding out {m!r}: {skipped} test row(s) on devices with no other model's rows skipped"
                ), stacklevel=2)
            if train_rows.empty or test_rows.empty:
                continue
            pred = make_predictor(kind, **dict(params.get(kind, {})))
            pred.fit(train_rows, prof.call_times(train_rows))
            measured = prof.call_times(test_rows)
            predicted = pred.predict(test_rows)
            frames.append(pd.DataFrame({
                "predictor": kind, "held_out": m, "device": test_rows["device"].to_numpy(),
                "op": test_rows["op"].to_numpy(), "signature": test_rows["signature"].to_numpy(),
                "measured_s": measured, "predicted_s": predicted,
                "ape_pct": 100.0 * np.abs(predicted - measured) / np.maximum(measured, 1e-9),
            }))
    if not frames:
        raise CostModelError(f"profile {prof.name!r}: no held-out model had both training and test rows")
    return pd.concat(frames, ignore_index=True)[POINT_COLUMNS]


def summarize(points: pd.DataFrame) -> pd.DataFrame:
    """Error statistics of :func:`loo_predictions` rows, columns :data:`EVAL_COLUMNS`:
    per (predictor, held-out model or ``ALL``, device, op kind or ``ALL``)."""
    import pandas as pd

    pooled = points.assign(held_out="ALL")
    both = pd.concat([points, pooled], ignore_index=True)
    both = pd.concat([both, both.assign(op="ALL")], ignore_index=True)
    keys = ["predictor", "held_out", "device", "op"]
    g = both.groupby(keys, sort=False)["ape_pct"]
    out = pd.DataFrame({
        "n": g.size(),
        "mape_pct": g.mean(),
        "median_ape_pct": g.median(),
        "p90_ape_pct": g.quantile(0.9),
    }).reset_index()
    held = list(dict.fromkeys(points["held_out"])) + ["ALL"]
    out["_h"] = out["held_out"].map({h: i for i, h in enumerate(held)})
    out["_o"] = (out["op"] != "ALL").astype(int)
    out = out.sort_values(["_h", "device", "_o", "op", "predictor"], kind="stable")
    return out[EVAL_COLUMNS].reset_index(drop=True)


def evaluate(
    profile: Profile | str | os.PathLike[str],
    kinds: Sequence[str] = DEFAULT_KINDS,
    **kw: Any,
) -> pd.DataFrame:
    """Leave-one-model-out accuracy of each predictor kind: :func:`summarize` of
    :func:`loo_predictions` (same keyword arguments).

    Examples
    --------
    >>> table = costmodel.evaluate("profiles/box")                          # doctest: +SKIP
    >>> table.query("predictor == 'xgboost' and op == 'ALL'")[["held_out", "mape_pct"]]  # doctest: +SKIP
    """
    return summarize(loo_predictions(profile, kinds, **kw))


def format_eval(summary: pd.DataFrame, *, per_op: bool = True) -> str:
    """A text table: predictors side by side, MAPE / median / p90 in percent; the
    overall rows per held-out model, then (``per_op``) per op kind over all of them."""
    import pandas as pd

    wide = summary.pivot_table(
        index=["device", "held_out", "op"], columns="predictor",
        values=["n", "mape_pct", "median_ape_pct", "p90_ape_pct"], sort=False,
    )
    preds = list(dict.fromkeys(summary["predictor"]))
    lines = []
    for device in dict.fromkeys(summary["device"]):
        sub = wide.loc[device]
        for title, part in (
            ("overall, per held-out model", sub[sub.index.get_level_values("op") == "ALL"]),
            ("per op kind, all held-out models", sub[(sub.index.get_level_values("held_out") == "ALL")
                                                     & (sub.index.get_level_values("op") != "ALL")]),
        ):
            if part.empty or (not per_op and "per op" in title):
                continue
            table = pd.DataFrame(index=part.index)
            table["n"] = part["n"][preds[0]].astype(int)
            for p in preds:
                table[f"{p} MAPE%"] = part["mape_pct"][p]
                table[f"{p} med%"] = part["median_ape_pct"][p]
                table[f"{p} p90%"] = part["p90_ape_pct"][p]
            table.index = [h if "overall" in title else o for h, o in part.index]
            lines.append(f"device {device}: {title}")
            lines.append(table.to_string(float_format=lambda v: f"{v:.1f}"))
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def plot_eval(points: pd.DataFrame, out: str | os.PathLike[str], *, stem: str = "eval",
              title: str | None = None) -> list[Path]:
    """Predicted vs measured time, log-log, one panel per predictor (colour: device),
    with the y = x line and a ±10 % band. Writes ``STEM.png`` and ``STEM.pdf`` in
    ``out``; returns their paths."""
    import numpy as np
    from matplotlib.figure import Figure

    preds = list(dict.fromkeys(points["predictor"]))
    if not preds:
        raise CostModelError("plot_eval: no points to plot")
    fig = Figure(figsize=(4.2 * len(preds), 4.2), layout="constrained")
    axes = fig.subplots(1, len(preds), squeeze=False)[0]
    pos = points[(points["measured_s"] > 0) & (points["predicted_s"] > 0)]
    lo = float(min(pos["measured_s"].min(), pos["predicted_s"].min())) / 1.5
    hi = float(max(pos["measured_s"].max(), pos["predicted_s"].max())) * 1.5
    line = np.geomspace(lo, hi, 50)
    devices = list(dict.fromkeys(points["device"]))
    for ax, p in zip(axes, preds):
        sub = pos[pos["predictor"] == p]
        ax.fill_between(line * 1e6, line * (1 - BAND) * 1e6, line * (1 + BAND) * 1e6,
                        color="0.85", label=f"±{BAND:.0%}")
        ax.plot(line * 1e6, line * 1e6, color="0.3", lw=0.8, label="y = x")
        for d in devices:
            dd = sub[sub["device"] == d]
            ax.scatter(dd["measured_s"] * 1e6, dd["predicted_s"] * 1e6, s=6, alpha=0.5, label=d)
        mape = float(points.loc[points["predictor"] == p, "ape_pct"].mean())
        ax.set(xscale="log", yscale="log", xlim=(lo * 1e6, hi * 1e6), ylim=(lo * 1e6, hi * 1e6),
               xlabel="measured time (µs)", ylabel="predicted time (µs)",
               title=f"{p}: MAPE {mape:.1f}% (held-out models)")
        ax.set_aspect("equal")
        ax.legend(loc="upper left", fontsize="small")
    if title:
        fig.suptitle(title)
    return save_png_pdf(fig, out, stem)


def save_png_pdf(fig: Any, out: str | os.PathLike[str], stem: str) -> list[Path]:
    """Save the matplotlib figure ``fig`` as ``out/stem.png`` (150 dpi) and
    ``out/stem.pdf``, creating ``out``; the two paths."""
    folder = Path(out)
    paths = [folder / f"{stem}.png", folder / f"{stem}.pdf"]
    atomic_write(paths[0], lambda fh: fig.savefig(fh, dpi=150, format="png"), binary=True)
    # same points, same bytes (a tracked file)
    atomic_write(paths[1], lambda fh: fig.savefig(fh, format="pdf", metadata={"CreationDate": None}), binary=True)
    return paths
