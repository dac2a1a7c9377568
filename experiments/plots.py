"""Paper figures from results tables: bars, speedup lines, Gantt charts, scatter, heatmap.

Every function takes a tidy table (one row per point, as written by
:func:`experiments.sweep.run_sweep`) or simulation records, and returns a
:class:`matplotlib.figure.Figure`; it never reads files or holds the table's
schema beyond the column names passed as arguments (defaults are the documented
columns of :data:`experiments.sweep.COLUMNS`). Rows with a ``status`` other than
``"ok"`` are left out.

Figures are made for a paper column: 3.5 in wide, 7-8 pt fonts, TrueType fonts
embedded in PDFs, the colour-blind-safe Okabe-Ito palette (extended with Paul
Tol's *muted* scheme), and one fixed colour and marker per scheduler
(:func:`scheduler_style`) so that a scheduler looks the same in every figure,
whatever subset of schedulers a figure shows. Figures are not registered with
``pyplot`` (nothing accumulates in long sessions); Jupyter displays them as is.

Examples
--------
>>> from hetsim.experiments.plots import makespan_bars, save_figure
>>> from hetsim.experiments.sweep import load_results
>>> df = load_results("out/pcie")                       # doctest: +SKIP
>>> fig = makespan_bars(df, where={"link_bandwidth": 1.0})  # doctest: +SKIP
>>> save_figure(fig, "figs/makespan")                   # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullLocator

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "COLUMN_WIDTH_IN", "OKABE_ITO", "PAPER_RC", "gantt", "makespan_bars", "save_figure",
    "scheduler_style", "sim_vs_measured", "speedup_lines", "utilisation_heatmap",
]  # fmt: skip

#: one-column width of a two-column paper, inches
COLUMN_WIDTH_IN = 3.5

#: Okabe & Ito (2008), "Color Universal Design": safe for all common colour blindness
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}  # fmt: skip
#: Paul Tol's "muted" scheme, for names beyond the first eight
TOL_MUTED = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677",
             "#882255", "#AA4499")  # fmt: skip
_MARKERS = ("o", "s", "D", "^", "v", "<", ">", "p", "P", "X", "*", "h")

# fixed scheduler -> colour (baselines grey/black, list schedulers blue-green, ...)
_SCHEDULERS = {
    "all-cpu": "#999999", "all-gpu": OKABE_ITO["black"], "heft": OKABE_ITO["blue"],
    "cpop": OKABE_ITO["sky blue"], "peft": OKABE_ITO["bluish green"],
    "cp-greedy": OKABE_ITO["vermillion"], "donf": OKABE_ITO["orange"],
    "by-op": OKABE_ITO["reddish purple"], "by-path": OKABE_ITO["yellow"], "dynamic": "#882255",
    "timeslice-pipeline": "#44AA99", "antichain-dp": "#332288", "tensor-split": "#999933",
    "optimal": "#AA4499", "round-robin": "#DDCC77", "random": "#88CCEE",
}  # fmt: skip

#: rcParams applied while a figure is built and saved (never set globally)
PAPER_RC: dict[str, Any] = {
    "font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
    "ytick.labelsize": 7, "legend.fontsize": 7, "legend.frameon": False,
    "legend.handlelength": 1.5, "legend.columnspacing": 1.0, "axes.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False, "xtick.major.width": 0.6,
    "ytick.major.width": 0.6, "xtick.major.size": 2.5, "ytick.major.size": 2.5,
    "xtick.minor.size": 1.5, "ytick.minor.size": 1.5, "lines.linewidth": 1.0,
    "lines.markersize": 3.5, "patch.linewidth": 0.4, "grid.linewidth": 0.4, "grid.alpha": 0.4,
    "pdf.fonttype": 42, "ps.fonttype": 42, "savefig.bbox": "tight", "savefig.pad_inches": 0.02,
}  # fmt: skip

#: axis labels of the documented columns (others are shown as they are named)
LABELS = {
    "makespan_s": "makespan (ms)", "latency_mean_s": "mean latency (ms)",
    "latency_p99_s": "p99 latency (ms)", "throughput_per_s": "throughput (req/s)",
    "link_bandwidth": "link bandwidth (×)", "gpu_peak": "GPU peak FLOP/s (×)",
    "cpu_peak": "CPU peak FLOP/s (×)", "gpu_bandwidth": "GPU memory bandwidth (×)",
    "cpu_util": "CPU utilisation", "gpu_util": "GPU utilisation", "link_util": "link utilisation",
    "batch": "batch size", "requests": "requests",
}  # fmt: skip
_MS = {"makespan_s", "latency_mean_s", "latency_p50_s", "latency_p99_s"}


def scheduler_style(name: str) -> dict[str, str]:
    """Fixed ``{"color", "marker"}`` of a scheduler, the same in every figure.

    Registered schedulers have hand-picked colours; other names get one from the
    palette by a stable hash of the name (not by their position in a figure).
    """
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16)
    known = list(_SCHEDULERS)
    color = _SCHEDULERS.get(name) or TOL_MUTED[h % len(TOL_MUTED)]
    i = known.index(name) if name in known else h
    return {"color": color, "marker": _MARKERS[i % len(_MARKERS)]}


def _levels(values: Iterable[Any], column: str | None) -> list[Any]:
    """Distinct values in order of appearance; schedulers in their fixed order
    (baselines first), so that legends do not depend on which point finished first."""
    levels = list(dict.fromkeys(values))
    if column == "scheduler":
        known = list(_SCHEDULERS)
        levels.sort(key=lambda v: known.index(v) if v in known else len(known))
    return levels


def _style(hue: str | None, value: Any, i: int) -> dict[str, str]:
    """A scheduler's fixed style, or the i-th palette colour and marker for other hues."""
    if hue == "scheduler":
        return scheduler_style(str(value))
    palette = [*list(OKABE_ITO.values())[1:], *TOL_MUTED]
    return {"color": palette[i % len(palette)], "marker": _MARKERS[i % len(_MARKERS)]}


# ------------------------------------------------------------------ helpers
def _figure(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.figure, ax
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _select(df: pd.DataFrame, where: Mapping[str, Any] | None, needed: Iterable[str]) -> pd.DataFrame:
    """Rows with status ok (when there is a status) matching ``where``."""
    missing = [c for c in [*needed, *(where or {})] if c not in df.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table; it has {list(df.columns)}")
    if "status" in df.columns:
        df = df[df["status"] == "ok"]
    for col, want in (where or {}).items():
        values = list(want) if isinstance(want, list | tuple | set) else [want]
        df = df[df[col].isin(values)]
    if df.empty:
        raise ValueError(f"no rows left to plot (where={dict(where or {})})")
    return df


def _reduce(
    df: pd.DataFrame, keys: list[str], value: str, agg: str | None, what: str
) -> pd.Series:
    """``value`` per ``keys`` cell; more than one row per cell needs ``agg``."""
    grouped = df.groupby(keys, sort=False)[value]
    if agg is None:
        if (grouped.size() > 1).any():
            varying = [
                c for c in df.columns
                if c not in (*keys, value) and df.groupby(keys, sort=False)[c].nunique(dropna=False).gt(1).any()
            ]  # fmt: skip
            from hetsim.experiments.sweep import PARAM_COLUMNS

            params = [c for c in varying if c in PARAM_COLUMNS] or varying
            raise ValueError(
                f"{what}: several rows per ({', '.join(keys)}); they differ in {params[:6]}. "
                "Select rows (where={column: value}; CLI --where COL=VALUE) or combine them "
                "(agg='mean'|'median'|'min'|'max'|'geomean'; CLI --agg)"
            )
        agg = "first"
    if agg == "geomean":
        return grouped.apply(lambda s: float(np.exp(np.log(s.astype(float)).mean())))
    return grouped.agg(agg)


def _legend(fig: Figure, ax: Axes, handles: list[Any] | None = None) -> None:
    """Legend above the axes, in up to 4 columns (outside the plot when it can)."""
    if handles is None:
        handles, _ = ax.get_legend_handles_labels()
    if not handles:
        return
    n = min(len(handles), 4)
    if fig.get_layout_engine() is not None and len(fig.axes) == 1:
        fig.legend(handles=handles, loc="outside upper center", ncols=n)
    else:
        ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(0, 1.02, 1, 0.2),
                  mode="expand", ncols=n, borderaxespad=0)  # fmt: skip


# -------------------------------------------------------------------- plots
def makespan_bars(
    df: pd.DataFrame,
    *,
    metric: str = "makespan_s",
    group: str = "model",
    hue: str = "scheduler",
    where: Mapping[str, Any] | None = None,
    order: Sequence[Any] | None = None,
    hue_order: Sequence[Any] | None = None,
    agg: str | None = None,
    scale: float | None = None,
    ylabel: str | None = None,
    log: bool = False,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float = 2.0,
) -> Figure:
    """Grouped bars: ``metric`` per ``hue`` (scheduler) within each ``group`` (model).

    Parameters
    ----------
    df
        Results table with columns ``group``, ``hue`` and ``metric``.
    metric, group, hue
        Column names.
    where
        ``{column: value or list}``: keep only these rows, e.g. ``{"link_bandwidth": 1}``.
    order, hue_order
        Groups / hues to show, in order (default: order of appearance).
    agg
        How to combine several rows per bar (``"mean"``, ``"median"``, ``"min"``,
        ``"max"``, ``"geomean"``); ``None`` raises :class:`ValueError` naming the
        columns that differ, so that a figure never averages by accident.
    scale, ylabel
        Multiplier of the values (default 1e3 for seconds columns: ms) and label.
    log
        Logarithmic y axis.

    Returns
    -------
    Figure
        One bar per (group, hue) present in the table.
    """
    sel = _select(df, where, [group, hue, metric]).dropna(subset=[metric])
    cells = _reduce(sel, [group, hue], metric, agg, "makespan_bars")
    groups = list(order) if order is not None else _levels(sel[group], group)
    hues = list(hue_order) if hue_order is not None else _levels(sel[hue], hue)
    k = (1e3 if metric in _MS else 1.0) if scale is None else scale
    with mpl.rc_context(PAPER_RC):
        fig, ax = _figure(ax, width, height)
        bar_w = 0.8 / max(1, len(hues))
        for j, h in enumerate(hues):
            xs = [i for i, g in enumerate(groups) if (g, h) in cells.index]
            ys = [cells[(groups[i], h)] * k for i in xs]
            if xs:
                ax.bar(np.array(xs) + (j - (len(hues) - 1) / 2) * bar_w, ys, bar_w,
                       color=_style(hue, h, j)["color"], edgecolor="black", linewidth=0.3, label=str(h))  # fmt: skip
        ax.set_xticks(range(len(groups)), [str(g) for g in groups])
        ax.set_ylabel(ylabel or LABELS.get(metric, metric))
        if log:
            ax.set_yscale("log")
            for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
                axis(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.grid(True)
        ax.set_axisbelow(True)
        if title:
            ax.set_title(title)
        _legend(fig, ax)
    return fig


def speedup_lines(
    df: pd.DataFrame,
    x: str = "link_bandwidth",
    baseline: str = "all-gpu",
    *,
    metric: str = "makespan_s",
    hue: str = "scheduler",
    on: Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
    agg: str = "geomean",
    higher_is_better: bool | None = None,
    logx: bool | None = None,
    xlabel: str | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float = 2.2,
) -> Figure:
    """Speedup over ``baseline`` against a swept parameter ``x``, one line per ``hue``.

    Each row is divided by the baseline row with the same values in ``on``; the
    speedups of rows that share ``(hue, x)`` (other models, batch sizes...) are
    combined with ``agg`` (geometric mean by default). The baseline is drawn as
    the dashed line at 1.

    Parameters
    ----------
    df
        Results table with columns ``x``, ``hue``, ``metric`` and ``on``.
    x, baseline, metric, hue
        Column names, and the ``hue`` value the others are compared with.
    on
        Columns a row and its baseline row must share (default: the parameter
        columns of :data:`experiments.sweep.PARAM_COLUMNS` in the table, less
        ``hue`` and ``scheduler_args``).
    where
        ``{column: value or list}`` row filter.
    higher_is_better
        ``True``: speedup = metric / baseline (throughput); ``False``: baseline /
        metric (times); ``None``: guessed from the name (``throughput*``).
    logx
        Logarithmic (base 2) x axis; ``None``: when ``x`` spans a factor of 8 or more.

    Returns
    -------
    Figure
        One labelled line per ``hue`` value (the baseline's is horizontal).
    """
    from hetsim.experiments.sweep import PARAM_COLUMNS

    sel = _select(df, where, [x, hue, metric]).dropna(subset=[metric])
    if baseline not in set(sel[hue]):
        raise ValueError(f"baseline {baseline!r} not among the {hue} values {sorted(set(sel[hue]))}")
    if on is None:
        on = [c for c in PARAM_COLUMNS if c in sel.columns and c not in (hue, "scheduler_args")]
    on = list(dict.fromkeys([*on, x]))
    base = sel[sel[hue] == baseline][[*on, metric]].drop_duplicates(subset=on)
    merged = sel.merge(base.rename(columns={metric: "_base"}), on=on, how="inner")
    better = metric.startswith("throughput") if higher_is_better is None else higher_is_better
    merged["_speedup"] = merged[metric] / merged["_base"] if better else merged["_base"] / merged[metric]
    cells = _reduce(merged, [hue, x], "_speedup", agg, "speedup_lines")
    hues = _levels(sel[hue], hue)
    with mpl.rc_context(PAPER_RC):
        fig, ax = _figure(ax, width, height)
        for j, h in enumerate(hues):
            style = {"color": _style(hue, h, j)["color"], "label": str(h)}
            if h == baseline:
                ax.axhline(1.0, linestyle="--", linewidth=0.8, **style)
                continue
            pts = sorted((xv, v) for (hv, xv), v in cells.items() if hv == h)
            if pts:
                ax.plot(*zip(*pts), marker=_style(hue, h, j)["marker"], **style)
        xs = sorted(set(sel[x]))
        numeric = all(isinstance(v, int | float | np.number) for v in xs)
        if logx is None:
            logx = numeric and min(xs) > 0 and max(xs) / min(xs) >= 8
        if logx:
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
            ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(xlabel or LABELS.get(x, x))
        ax.set_ylabel(f"speedup over {baseline}")
        ax.grid(True)
        if title:
            ax.set_title(title)
        _legend(fig, ax)
    return fig


def gantt(
    records: Any,
    *,
    color_by: str = "kind",
    graph: Any = None,
    resources: Sequence[str] | None = None,
    time_unit: str = "ms",
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float | None = None,
    legend: bool = True,
) -> Figure:
    """Gantt chart of one simulated (or measured) run: one row per device stream,
    link direction and dispatch thread.

    Parameters
    ----------
    records
        A :class:`sim.result.SimResult` run with ``record=True``, its
        ``to_dataframe()``, or a list of record dicts (keys ``kind``, ``node``,
        ``request``, ``resource``, ``stream``, ``start``, ``end``, seconds).
    color_by
        ``"kind"`` (op / transfer / dispatch), ``"request"`` or ``"op"`` (the
        operator type, from ``graph``; the 7 most frequent, others grey).
    graph
        The graph that ran (only for ``color_by="op"``).
    resources
        Row order by resource name (default: devices, then links, then dispatch).
    time_unit
        ``"s"``, ``"ms"`` or ``"us"``.

    Returns
    -------
    Figure
        One y tick per row; one bar collection (:meth:`~matplotlib.axes.Axes.broken_barh`)
        per (row, colour).
    """
    recs, default_order = _records(records)
    if color_by not in ("kind", "request", "op"):
        raise ValueError(f"color_by must be 'kind', 'request' or 'op', got {color_by!r}")
    if color_by == "op" and graph is None:
        raise ValueError("color_by='op' needs the graph (graph=...)")
    units = {"s": 1.0, "ms": 1e3, "us": 1e6}
    if time_unit not in units:
        raise ValueError(f"time_unit must be one of {list(units)}, got {time_unit!r}")
    k = units[time_unit]
    rank = {"op": 0, "transfer": 1, "dispatch": 2}
    order = list(resources or default_order)
    first: dict[tuple[str, int], tuple] = {}
    for r in recs:
        key = (str(r["resource"]), int(r.get("stream") or 0))
        first.setdefault(key, (rank.get(r["kind"], 3), r["start"]))
    keys = sorted(first, key=lambda key: (
        order.index(key[0]) if key[0] in order else len(order), first[key][0], _natural(key[0]),
        key[1]))  # fmt: skip
    n_streams = Counter(res for res, _ in keys)
    labels = [(f"{res}:{s}" if n_streams[res] > 1 else res).replace("->", "→") for res, s in keys]
    y = {key: i for i, key in enumerate(keys)}
    top: set[str] = set()
    if color_by == "op":
        ops = Counter(_op_type(graph, r["node"]) for r in recs if r["kind"] == "op")
        top = {op for op, _ in ops.most_common(7)}

    def colour_key(r: Mapping[str, Any]) -> str:
        if color_by == "request":
            return f"request {r.get('request', 0)}"
        if color_by == "kind" or r["kind"] != "op":
            return str(r["kind"])
        op = _op_type(graph, r["node"])
        return op if op in top else "other ops"

    fixed = {"op": OKABE_ITO["blue"], "transfer": OKABE_ITO["vermillion"], "dispatch": "#999999",
             "other ops": "#BBBBBB"}  # fmt: skip
    palette = [c for c in [*list(OKABE_ITO.values())[1:], *TOL_MUTED] if c not in fixed.values()]
    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for r in recs:
        row = y[(str(r["resource"]), int(r.get("stream") or 0))]
        bars.setdefault((row, colour_key(r)), []).append((r["start"] * k, (r["end"] - r["start"]) * k))
    free = [n for n in dict.fromkeys(name for _, name in bars) if n not in fixed]
    colours = {**fixed, **{n: palette[i % len(palette)] for i, n in enumerate(sorted(free, key=_natural))}}
    names = sorted({name for _, name in bars}, key=lambda n: (n in fixed and n != "op", _natural(n)))
    with mpl.rc_context(PAPER_RC):
        legend_rows = math.ceil(len(names) / 4) if legend else 0
        fig, ax = _figure(ax, width, height or 0.8 + 0.2 * len(keys) + 0.15 * legend_rows)
        for (row, name), spans in bars.items():
            ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colours[name], linewidth=0, label=name)
        ax.set_yticks(range(len(keys)), labels)
        ax.set_ylim(len(keys) - 0.5, -0.5)
        ax.set_xlabel(f"time ({'µs' if time_unit == 'us' else time_unit})")
        ax.set_xlim(left=0)
        if title:
            ax.set_title(title)
        if legend:
            _legend(fig, ax, [Patch(color=colours[n], label=n) for n in names])
    return fig


def _op_type(graph: Any, node: Any) -> str:
    return str(graph.nodes[node].get("op", "?")) if node in graph.nodes else "?"


def _natural(name: str) -> tuple:
    """Sort key: ``request 2`` before ``request 10``."""
    head, _, tail = name.rpartition(" ")
    return (head, int(tail), "") if tail.isdigit() else (name, -1, "")


def _records(records: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Record dicts with a positive duration, and the row order a SimResult implies."""
    order: list[str] = []
    if hasattr(records, "records") and not hasattr(records, "columns"):
        if records.records is None:
            raise ValueError("this result has no records: run simulate(..., record=True)")
        order = [*records.device_busy, *records.link_busy, "dispatch"]
        records = records.records
    elif hasattr(records, "to_dict"):
        records = records.to_dict("records")
    out = [dict(r) for r in records
           if float(r["end"]) > float(r["start"]) and int(r.get("stream") or 0) >= 0]  # fmt: skip
    if not out:
        raise ValueError("no records with a positive duration to draw")
    return out, order


def sim_vs_measured(
    df: pd.DataFrame,
    *,
    sim: str = "sim_s",
    measured: str = "measured_s",
    hue: str | None = "scheduler",
    where: Mapping[str, Any] | None = None,
    bands: Sequence[float] = (0.1, 0.2),
    scale: float = 1e3,
    unit: str = "ms",
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float = 3.0,
) -> Figure:
    """Simulated against measured times, log-log, with the y = x line and error bands.

    Parameters
    ----------
    df
        One row per (plan, run) with columns ``measured`` and ``sim`` (seconds).
    sim, measured, hue
        Column names (``hue=None``: one colour).
    bands
        Relative errors drawn as shaded bands around y = x (±10 %, ±20 %).
    scale, unit
        Display multiplier and its unit label.

    Returns
    -------
    Figure
        Scatter per ``hue`` value, the ``y = x`` line (``gid="identity"``), one
        band per entry of ``bands``, and the MAPE in the corner.
    """
    sel = _select(df, where, [sim, measured] + ([hue] if hue else []))
    sel = sel.dropna(subset=[sim, measured])
    xs = sel[measured].to_numpy(float) * scale
    ys = sel[sim].to_numpy(float) * scale
    if (xs <= 0).any() or (ys <= 0).any():
        raise ValueError("sim_vs_measured: times must be positive (log-log axes)")
    lo, hi = min(xs.min(), ys.min()) / 1.3, max(xs.max(), ys.max()) * 1.3
    line = np.geomspace(lo, hi, 50)
    with mpl.rc_context(PAPER_RC):
        fig, ax = _figure(ax, width, height)
        for b, alpha in zip(sorted(bands, reverse=True), (0.2, 0.35, 0.5)):
            ax.fill_between(line, line * (1 - b), line * (1 + b), color=OKABE_ITO["sky blue"],
                            alpha=alpha, linewidth=0, label=f"±{b:.0%}")  # fmt: skip
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.7, label="y = x", gid="identity")
        groups = [(None, sel)] if hue is None else [(h, sel[sel[hue] == h]) for h in _levels(sel[hue], hue)]
        for j, (h, part) in enumerate(groups):
            style = _style(hue, h, j) if h is not None else {"color": OKABE_ITO["blue"], "marker": "o"}
            ax.scatter(part[measured] * scale, part[sim] * scale, s=10, linewidths=0.3,
                       edgecolors="black", label=None if h is None else str(h), zorder=3,
                       **style)  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        ax.set_xlabel(f"measured ({unit})")
        ax.set_ylabel(f"simulated ({unit})")
        err = np.abs(ys - xs) / xs
        text = f"MAPE {err.mean():.1%}\n" + "\n".join(
            f"within ±{b:.0%}: {(err <= b).mean():.0%}" for b in sorted(bands)
        )
        ax.text(0.04, 0.96, text, transform=ax.transAxes, va="top", fontsize=7)
        if title:
            ax.set_title(title)
        ax.legend(loc="lower right", fontsize=6)
    return fig


def utilisation_heatmap(
    df: pd.DataFrame,
    *,
    x: str = "link_bandwidth",
    y: str = "scheduler",
    value: str = "gpu_util",
    where: Mapping[str, Any] | None = None,
    agg: str | None = None,
    cmap: str = "cividis",
    vmin: float | None = 0.0,
    vmax: float | None = 1.0,
    fmt: str = "{:.0%}",
    annotate: bool = True,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float | None = None,
) -> Figure:
    """Heatmap of ``value`` (a utilisation by default) over two columns.

    Parameters
    ----------
    df
        Results table with columns ``x``, ``y`` and ``value``.
    x, y, value
        Column names.
    where, agg
        Row filter, and how to combine several rows per cell (as in :func:`makespan_bars`).
    cmap, vmin, vmax
        Colour map (``cividis``: perceptually uniform and colour-blind safe) and range.
    fmt, annotate
        Cell text format, and whether to write it.

    Returns
    -------
    Figure
        One image (plus its colour bar); missing cells are blank.
    """
    sel = _select(df, where, [x, y, value]).dropna(subset=[value])
    cells = _reduce(sel, [y, x], value, agg, "utilisation_heatmap")
    ys = _levels(sel[y], y)
    xs = sorted(set(sel[x]), key=lambda v: (isinstance(v, str), v))
    grid = np.full((len(ys), len(xs)), math.nan)
    for (yv, xv), v in cells.items():
        grid[ys.index(yv), xs.index(xv)] = v
    with mpl.rc_context(PAPER_RC):
        fig, ax = _figure(ax, width, height or 0.8 + 0.2 * len(ys))
        im = ax.imshow(grid, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
        ax.set_xticks(range(len(xs)), [f"{v:g}" if isinstance(v, float) else str(v) for v in xs])
        ax.set_yticks(range(len(ys)), [str(v) for v in ys])
        ax.set_xlabel(LABELS.get(x, x))
        ax.spines[:].set_visible(False)
        ax.tick_params(length=0)
        if annotate:
            norm = im.norm
            for i in range(len(ys)):
                for j in range(len(xs)):
                    v = grid[i, j]
                    if not math.isnan(v):
                        dark = norm(v) < 0.55  # cividis: dark at the low end
                        ax.text(j, i, fmt.format(v), ha="center", va="center", fontsize=6,
                                color="white" if dark else "black")  # fmt: skip
        fig.colorbar(im, ax=ax, label=LABELS.get(value, value), fraction=0.05, pad=0.02)
        if title:
            ax.set_title(title)
    return fig


def save_figure(
    fig: Figure,
    path: str | os.PathLike[str],
    *,
    formats: Sequence[str] = ("png", "pdf"),
    dpi: int = 200,
) -> list[Path]:
    """Write ``path.png`` (``dpi``) and ``path.pdf`` (vector, fonts embedded).

    ``path`` is given without extension (a ``.png``/``.pdf`` suffix is dropped);
    parent folders are created. Returns the files written.
    """
    path = Path(path)
    if path.suffix.lower() in (".png", ".pdf", ".svg"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    with mpl.rc_context(PAPER_RC):
        for ext in formats:
            target = path.with_name(f"{path.name}.{ext}")
            fig.savefig(target, dpi=dpi, format=ext)
            out.append(target)
    return out
