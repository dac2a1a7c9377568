"""Accuracy of the GPU cost models: held-out shapes per GPU, shape cross-validation,
and leave one GPU out.

Three protocols, all on the call times the data set measured:

``held-out shapes`` (a GPU that was measured)
    Each GPU's own models are fitted on the data set's training rows and predict
    its test rows (``split == "test"``: the data set's own held-out shapes, larger
    than the training ones). The data set has no test file for convolutions: one
    training shape in five, chosen by a hash of its signature
    (:func:`costmodel.gpu.model.holdout`), is held out instead. The data set's
    train and test files were measured in different campaigns (the P4's training
    GEMMs run 3.7x slower than its test GEMMs, the T4's 23 %, the V100's 15 %), so
    this figure holds the campaigns' offset as well as the model's error; the conv
    figure is a shape hold-out within one campaign.
``shape cross-validation`` (the model's error without the campaign offset)
    The rows of each family are split into ``K`` folds by a hash of their signature
    (:func:`costmodel.gpu.model.shape_fold`); each fold's *test* rows are predicted
    by the GPU's model fitted on every other row, both splits (for a family without
    test rows, the fold's training rows). Both campaigns are then in training.
``leave one GPU out`` (a GPU nobody measured)
    For each GPU, the cross-GPU models are fitted on every other GPU and predict
    all its rows from its published figures alone. The one number they take from
    the held-out GPU's rows is its floor, the smallest call, which is the measuring
    host's launch path rather than the GPU's (and which hetsim replaces by the
    platform's launch and dispatch figures when it prices an op);
    ``floor="others"`` takes the median of the other GPUs' floors instead
    (protocol ``leave one GPU out, floor of the others``).
``leave one GPU out, kernel model, <data set>`` (:func:`kernel_logo_predictions`)
    The kernel model's constants (:mod:`costmodel.gpu.kernel`) are fitted on every
    other GPU's measured kernels of every data set (the NeuSight profiles' call
    times, Vidur's FP16 device times: :mod:`costmodel.gpu.kernel_fit`) and price
    all the held-out GPU's kernels of every family and data set from its spec sheet
    (NeuSight's call times with the GPU's own floor as above).

:func:`summarize` gives, per protocol, GPU and family (and ``ALL`` families), the
number of rows and the mean (MAPE), median and 90th-percentile absolute percentage
error.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.features import GPU_FAMILIES
from hetsim.costmodel.gpu.model import holdout, shape_fold
from hetsim.costmodel.learned.evaluate import BAND, save_png_pdf

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.gpu.kernel_fit import KernelSet
    from hetsim.costmodel.gpu.model import GPUBank

__all__ = ["GPU_POINT_COLUMNS", "GPU_EVAL_COLUMNS", "cv_predictions", "format_gpu_eval", "kernel_logo_predictions",
           "kernel_logo_protocol", "logo_predictions", "plot_gpu_eval", "split_predictions", "summarize_gpu"]

GPU_POINT_COLUMNS = ["protocol", "gpu", "family", "source_op", "signature", "split", "measured_s",
                     "predicted_s", "ape_pct"]
GPU_EVAL_COLUMNS = ["protocol", "gpu", "family", "n", "mape_pct", "median_ape_pct", "p90_ape_pct", "median_ratio"]
HELD_OUT, LOGO, LOGO_FLOOR = "held-out shapes", "leave one GPU out", "leave one GPU out, floor of the others"
SHAPE_CV = "shape cross-validation"
KERNEL_LOGO = "leave one GPU out, kernel model"


def _points(protocol: str, gpu: str, family: str, rows: pd.DataFrame, measured: np.ndarray,
            predicted: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({
        "protocol": protocol, "gpu": gpu, "family": family,
        "source_op": rows["source_op"].to_numpy() if "source_op" in rows else rows["op"].to_numpy(),
        "signature": rows["signature"].to_numpy(), "split": rows["split"].to_numpy(),
        "measured_s": measured, "predicted_s": predicted,
        "ape_pct": 100.0 * np.abs(predicted - measured) / np.maximum(measured, 1e-12)})


def split_predictions(bank: GPUBank, gpus: Iterable[str] | None = None,
                      families: Sequence[str] = GPU_FAMILIES, *, progress: bool = False) -> pd.DataFrame:
    """``held-out shapes`` predictions (columns :data:`GPU_POINT_COLUMNS`)."""
    frames = []
    names = list(gpus) if gpus is not None else list(bank.gpus)
    for g in _progress(names, progress, "held-out shapes"):
        rows, ops, t = bank.gpus[g].load()
        fam = ops["family"].to_numpy()
        test = (rows["split"].astype(str).to_numpy() == "test") | (
            (fam == "conv") & holdout(rows["signature"].astype(str)))
        for family in families:
            on = test & (fam == family) & (ops["via"].to_numpy() == "own")
            if not on.any():
                continue
            model = bank.own(g, family, subset="train")
            if model is None:
                continue
            pred = model.predict(ops[on], bank.spec(g), 0.0)
            frames.append(_points(HELD_OUT, g, family, rows[on], t[on], pred))
    if not frames:
        raise CostModelError(f"no GPU of {names} has both training and held-out rows of {list(families)}")
    return pd.concat(frames, ignore_index=True)[GPU_POINT_COLUMNS]


def cv_predictions(bank: GPUBank, gpus: Iterable[str] | None = None, families: Sequence[str] = ("gemm",),
                   *, folds: int = 5, progress: bool = False) -> pd.DataFrame:
    """``shape cross-validation`` predictions (columns :data:`GPU_POINT_COLUMNS`):
    ``folds`` models per GPU and family."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise CostModelError(f"shape cross-validation needs folds >= 2, got {folds!r}")
    frames = []
    names = list(gpus) if gpus is not None else list(bank.gpus)
    for g in _progress(names, progress, f"{folds}-fold shape cross-validation"):
        rows, ops, t = bank.gpus[g].load()
        fam, own = ops["family"].to_numpy(), ops["via"].to_numpy() == "own"
        fold = shape_fold(rows["signature"].astype(str), folds)
        test = rows["split"].astype(str).to_numpy() == "test"
        for family in families:
            on = (fam == family) & own
            scored = on & test if (on & test).any() else on
            for i in range(folds):
                pick = scored & (fold == i)
                if not pick.any():
                    continue
                model = bank.own(g, family, subset=f"cv-{i}-of-{folds}")
                if model is None:
                    continue
                pred = model.predict(ops[pick], bank.spec(g), 0.0)
                frames.append(_points(SHAPE_CV, g, family, rows[pick], t[pick], pred))
    if not frames:
        raise CostModelError(f"no GPU of {names} has {folds} folds of {list(families)} rows to cross-validate")
    return pd.concat(frames, ignore_index=True)[GPU_POINT_COLUMNS]


def logo_predictions(bank: GPUBank, gpus: Iterable[str] | None = None,
                     families: Sequence[str] = ("gemm", "conv"), *, floor: str = "own",
                     progress: bool = False) -> pd.DataFrame:
    """``leave one GPU out`` predictions (columns :data:`GPU_POINT_COLUMNS`);
    ``floor``: ``"own"`` (the held-out GPU's smallest call) or ``"others"``."""
    if floor not in ("own", "others"):
        raise CostModelError(f"floor must be 'own' or 'others', got {floor!r}")
    frames = []
    names = list(gpus) if gpus is not None else list(bank.gpus)
    if len(bank.gpus) < 3:
        raise CostModelError(f"leave one GPU out needs at least 3 GPUs in the bank, has {list(bank.gpus)}")
    for g in _progress(names, progress, "leave one GPU out"):
        rows, ops, t = bank.gpus[g].load()
        fam = ops["family"].to_numpy()
        g_floor = bank.floor(g) if floor == "own" else float(np.median([bank.floor(o) for o in bank.gpus if o != g]))
        for family in families:
            on = (fam == family) & (ops["via"].to_numpy() == "own")
            if not on.any():
                continue
            model = bank.cross(family, exclude=[g])
            if model is None:
                continue
            pred = model.predict(ops[on], bank.spec(g), g_floor)
            frames.append(_points(LOGO if floor == "own" else LOGO_FLOOR, g, family, rows[on], t[on], pred))
    if not frames:
        raise CostModelError(f"no rows of {list(families)} to hold out on {names}")
    return pd.concat(frames, ignore_index=True)[GPU_POINT_COLUMNS]


def kernel_logo_predictions(sets: Sequence[KernelSet], gpus: Iterable[str] | None = None, *,
                            progress: bool = False) -> pd.DataFrame:
    """Leave one GPU out with the kernel model: for each GPU of ``gpus`` (default:
    every GPU of ``sets``), the constants fitted on the sets of every other GPU price
    every kernel of its sets from its spec sheet. Protocol ``"<KERNEL_LOGO>, <data
    set>"`` (:func:`kernel_logo_protocol`); columns :data:`GPU_POINT_COLUMNS`."""
    # looked up when called: tests replace it on hetsim.costmodel.gpu.kernel_fit
    from hetsim.costmodel.gpu.kernel_fit import fit_constants

    names = list(gpus) if gpus is not None else list(dict.fromkeys(s.gpu for s in sets))
    known = set(s.gpu for s in sets)
    if unknown := [g for g in names if g not in known]:
        raise CostModelError(f"no measured kernels of GPU(s) {unknown} (measured: {sorted(known)})")
    if len(known) < 3:
        raise CostModelError(f"leave one GPU out needs at least 3 GPUs, has {sorted(known)}")
    frames = []
    for g in _progress(names, progress, "leave one GPU out, kernel model"):
        constants = fit_constants([s for s in sets if s.gpu != g])
        for s in (s for s in sets if s.gpu == g):
            fam = s.ops["family"].to_numpy()
            pred = s.predict(constants)
            for family in GPU_FAMILIES:
                on = fam == family
                if on.any():
                    frames.append(_points(kernel_logo_protocol(s.dataset), g, family, s.rows[on], s.times[on],
                                          pred[on]))
    return pd.concat(frames, ignore_index=True)[GPU_POINT_COLUMNS]


def kernel_logo_protocol(dataset: str) -> str:
    """The protocol name of the kernel model's leave one GPU out on ``dataset``."""
    return f"{KERNEL_LOGO}, {dataset}"


def _progress(items: list[str], on: bool, desc: str) -> Iterable[str]:
    if not on:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="gpu")


def summarize_gpu(points: pd.DataFrame) -> pd.DataFrame:
    """Error statistics per (protocol, GPU, family or ``ALL``), columns :data:`GPU_EVAL_COLUMNS`
    (``median_ratio``: the median of predicted over measured time, the error's sign)."""
    both = pd.concat([points, points.assign(family="ALL")], ignore_index=True)
    both["ratio"] = both["predicted_s"] / both["measured_s"]
    groups = both.groupby(["protocol", "gpu", "family"], sort=False)
    g = groups["ape_pct"]
    out = pd.DataFrame({"n": g.size(), "mape_pct": g.mean(), "median_ape_pct": g.median(),
                        "p90_ape_pct": g.quantile(0.9), "median_ratio": groups["ratio"].median()}).reset_index()
    order = {f: i for i, f in enumerate([*GPU_FAMILIES, "ALL"])}
    out["_f"] = out["family"].map(order)
    return out.sort_values(["protocol", "gpu", "_f"], kind="stable")[GPU_EVAL_COLUMNS].reset_index(drop=True)


def format_gpu_eval(summary: pd.DataFrame) -> str:
    """A text table per protocol: GPUs as rows, families as columns, ``MAPE (median / p90)``."""
    lines = []
    for protocol, part in summary.groupby("protocol", sort=False):
        cols = [f for f in [*GPU_FAMILIES, "ALL"] if f in set(part["family"])]
        table = pd.DataFrame(index=list(dict.fromkeys(part["gpu"])), columns=cols, dtype=object).fillna("-")
        for r in part.itertuples():
            table.loc[r.gpu, r.family] = f"{r.mape_pct:.1f} ({r.median_ape_pct:.1f}/{r.p90_ape_pct:.1f}) n={r.n}"
        lines.append(f"{protocol}: MAPE % (median / p90), rows")
        lines.append(table.to_string())
        lines.append("")
    return "\n".join(lines)


def plot_gpu_eval(points: pd.DataFrame, out: str | os.PathLike[str], *, stem: str = "gpu_eval") -> list[Path]:
    """Predicted vs measured call time, log-log, one panel per protocol (colour: GPU),
    with y = x and a +-10 % band; writes ``STEM.png`` and ``STEM.pdf`` in ``out``."""
    from matplotlib.figure import Figure

    protocols = list(dict.fromkeys(points["protocol"]))
    fig = Figure(figsize=(4.6 * len(protocols), 4.6), layout="constrained")
    axes = fig.subplots(1, len(protocols), squeeze=False)[0]
    pos = points[(points["measured_s"] > 0) & (points["predicted_s"] > 0)]
    lo = float(min(pos["measured_s"].min(), pos["predicted_s"].min())) / 1.5 * 1e6
    hi = float(max(pos["measured_s"].max(), pos["predicted_s"].max())) * 1.5 * 1e6
    line = np.geomspace(lo, hi, 50)
    for ax, p in zip(axes, protocols):
        sub = pos[pos["protocol"] == p]
        ax.fill_between(line, line * (1 - BAND), line * (1 + BAND), color="0.85", label=f"±{BAND:.0%}")
        ax.plot(line, line, color="0.3", lw=0.8)
        for g in dict.fromkeys(sub["gpu"]):
            d = sub[sub["gpu"] == g]
            ax.scatter(d["measured_s"] * 1e6, d["predicted_s"] * 1e6, s=3, alpha=0.4, label=g)
        ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi), xlabel="measured call time (µs)",
               ylabel="predicted (µs)", title=f"{p}: MAPE {sub['ape_pct'].mean():.1f}%")
        ax.set_aspect("equal")
        ax.legend(loc="upper left", fontsize="small", markerscale=3)
    return save_png_pdf(fig, out, stem)
