"""Paper figures from results tables: bars, speedup lines, Gantt charts, scatter, heatmap.

Every function takes a tidy table (one row per point, as written by
:func:`experiments.sweep.run_sweep`) or simulation records, and returns a
:class:`matplotlib.figure.Figure`; it never reads files or holds the table's
schema beyond the column names passed as arguments (defaults are the documented
columns of :data:`experiments.sweep.COLUMNS`). Rows with a ``status`` other than
``"ok"`` are not drawn; the bar charts list them under the axes.

Figures are labelled directly: bar charts name each scheduler on the axis, in the
order ``hetsim compare`` tabulates them, and print each bar's value; several rows
per bar or point are combined only when asked (``agg``), and the axis label says
how. The look (paper sizes, fonts, one fixed colour per scheduler, files without a
creation date) is :mod:`experiments.plotting.style`. Figures are not registered with
``pyplot`` (nothing accumulates in long sessions); Jupyter displays them as is.

Examples
--------
>>> from hetsim.experiments.plotting.charts import makespan_bars, save_figure
>>> from hetsim.experiments.sweep import load_results
>>> df = load_results("out/pcie")                       # doctest: +SKIP
>>> fig = makespan_bars(df, where={"link_bandwidth": 1.0})  # doctest: +SKIP
>>> save_figure(fig, "figs/makespan")                   # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from hetsim.experiments.plotting import AGGREGATES
from hetsim.experiments.plotting.gantt import gantt
from hetsim.experiments.plotting.style import (
    COLUMN_WIDTH_IN,
    LABELS,
    MS_COLUMNS,
    OKABE_ITO,
    PAPER_RC,
    hue_style,
    legend_above,
    new_figure,
    ordered_levels,
    save_figure,
    scheduler_style,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = [
    "COLUMN_WIDTH_IN", "OKABE_ITO", "PAPER_RC", "comparison_bars", "gantt", "makespan_bars",
    "save_figure", "scheduler_style", "sim_vs_measured", "speedup_lines", "utilisation_heatmap",
]  # fmt: skip


def _where(df: pd.DataFrame, where: Mapping[str, Any] | None) -> pd.DataFrame:
    """Rows matching ``where`` (``{column: value or list}``) in the columns the table has."""
    for col, want in (where or {}).items():
        if col in df.columns:
            values = list(want) if isinstance(want, list | tuple | set) else [want]
            df = df[df[col].isin(values)]
    return df


def _select(df: pd.DataFrame, where: Mapping[str, Any] | None, needed: Iterable[str]) -> pd.DataFrame:
    """Rows with status ok (when there is a status) matching ``where``."""
    missing = [c for c in [*needed, *(where or {})] if c not in df.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table; it has {list(df.columns)}")
    if "status" in df.columns:
        df = df[df["status"] == "ok"]
    df = _where(df, where)
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
            # lazy: at the top it would load simpy with this module
            from hetsim.experiments.sweep import PARAM_COLUMNS

            params = [c for c in varying if c in PARAM_COLUMNS] or varying
            raise ValueError(
                f"{what}: several rows per ({', '.join(keys)}); they differ in {params[:6]}. "
                "Select rows (where={column: value}; CLI --where COL=VALUE) or combine them "
                "(agg='mean'|'median'|'min'|'max'|'geomean'; CLI --agg)"
            )
        agg = "first"
    elif agg not in AGGREGATES:
        raise ValueError(f"{what}: unknown agg {agg!r}; one of {', '.join(AGGREGATES)}")
    if agg == "geomean":
        return grouped.apply(lambda s: float(np.exp(np.log(s.astype(float)).mean())))
    return grouped.agg(agg)


def _not_shown(df: pd.DataFrame, where: Mapping[str, Any] | None, label: str, group: str | None,
               metric: str) -> list[str]:  # fmt: skip
    """``"optimal (lstm: skipped)"`` for each row matching ``where`` that is not drawn:
    a status other than ok, or no value of ``metric``."""
    import pandas as pd

    df = _where(df, where)
    status = df["status"].astype(str) if "status" in df.columns else pd.Series("ok", index=df.index)
    value = df[metric] if metric in df.columns else pd.Series(math.nan, index=df.index)
    out = []
    for idx in df.index:
        st = status[idx] if status[idx] != "ok" else ("no value" if value[idx] != value[idx] else "")
        if st:
            name = df.at[idx, label] if label in df.columns else idx
            where_ = f"{df.at[idx, group]}: " if group in df.columns else ""
            out.append(f"{name} ({where_}{st})")
    return list(dict.fromkeys(out))


def _value_text(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


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
    labels: str = "axis",
    values: bool = True,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float | None = None,
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
        Groups / hues to show, in order (default: order of appearance; schedulers in
        the order ``hetsim compare`` tabulates them).
    agg
        How to combine several rows per bar (``"mean"``, ``"median"``, ``"min"``,
        ``"max"``, ``"geomean"``); ``None`` raises :class:`ValueError` naming the
        columns that differ, so that a figure never averages by accident. The axis
        label names the combination.
    scale, ylabel
        Multiplier of the values (default 1e3 for seconds columns: ms) and label.
    log
        Logarithmic y axis.
    labels
        ``"axis"`` (default): each bar's ``hue`` value written under it on the x
        axis, each ``group`` named above its bars; ``"legend"``: one tick per group
        and a colour legend (for panels of a composed figure).
    values
        Print each bar's value on it.

    Returns
    -------
    Figure
        One bar per (group, hue) present in the table; the rows matching ``where``
        that are not drawn (a status other than ok) are listed under the axes.
    """
    sel = _select(df, where, [group, hue, metric]).dropna(subset=[metric])
    cells = _reduce(sel, [group, hue], metric, agg, "makespan_bars")
    groups = list(order) if order is not None else ordered_levels(sel[group], group)
    hues = list(hue_order) if hue_order is not None else ordered_levels(sel[hue], hue)
    if labels not in ("axis", "legend"):
        raise ValueError(f"labels must be 'axis' or 'legend', got {labels!r}")
    k = (1e3 if metric in MS_COLUMNS else 1.0) if scale is None else scale
    missing = _not_shown(df, where, hue, group, metric)
    label = ylabel or LABELS.get(metric, metric)
    if agg is not None and (sel.groupby([group, hue]).size() > 1).any():
        label += f", {agg} of rows"
    with mpl.rc_context(PAPER_RC):
        if height is None:
            longest = max((len(str(h)) for h in hues), default=0) if labels == "axis" else 0
            height = 2.0 + 0.05 * longest
        fig, ax = new_figure(ax, width, height)
        bars: list[tuple[float, float, Any, int, Any]] = []  # x, value, hue, hue index, group
        if labels == "axis":
            x = 0.0
            for g in groups:
                for j, h in enumerate(hues):
                    if (g, h) in cells.index:
                        bars.append((x, float(cells[(g, h)]) * k, h, j, g))
                        x += 1.0
                x += 0.6
            bar_w = 0.8
        else:
            bar_w = 0.8 / max(1, len(hues))
            for j, h in enumerate(hues):
                for i, g in enumerate(groups):
                    if (g, h) in cells.index:
                        bars.append((i + (j - (len(hues) - 1) / 2) * bar_w, float(cells[(g, h)]) * k, h, j, g))
        for j, h in enumerate(hues):
            mine = [b for b in bars if b[3] == j]
            if mine:
                ax.bar([b[0] for b in mine], [b[1] for b in mine], bar_w, color=hue_style(hue, h, j)["color"],
                       edgecolor="black", linewidth=0.3, label=str(h))  # fmt: skip
        if values:
            rotate = len(bars) > 8
            for bx, v, *_ in bars:
                ax.annotate(_value_text(v), (bx, v), xytext=(0, 1.5), textcoords="offset points",
                            ha="center", va="bottom", fontsize=5 if rotate else 6,
                            rotation=90 if rotate else 0)  # fmt: skip
            ax.margins(y=0.18)
        if labels == "axis":
            ax.set_xticks([b[0] for b in bars], [str(b[2]) for b in bars], rotation=90, fontsize=6)
            ax.set_xlim(-0.6, bars[-1][0] + 0.6)
            if len(groups) > 1:
                from matplotlib.transforms import blended_transform_factory

                tr = blended_transform_factory(ax.transData, ax.transAxes)
                for g in groups:
                    xs = [b[0] for b in bars if b[4] == g]
                    if xs:
                        ax.text((xs[0] + xs[-1]) / 2, 1.02, str(g), transform=tr, ha="center", va="bottom",
                                fontsize=7)  # fmt: skip
        else:
            ax.set_xticks(range(len(groups)), [str(g) for g in groups])
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
            for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
                axis(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.grid(True)
        ax.set_axisbelow(True)
        if missing:
            ax.set_xlabel(_wrap("not shown: " + ", ".join(missing), width), fontsize=6, loc="left")
        if title:
            ax.set_title(title, pad=12 if labels == "axis" and len(groups) > 1 else None)
        if labels == "legend":
            legend_above(fig, ax)
    return fig


def comparison_bars(
    table: pd.DataFrame,
    *,
    metric: str = "makespan_s",
    best: Sequence[str] = (),
    scale: float | None = None,
    xlabel: str | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float | None = None,
) -> Figure:
    """One horizontal bar per scheduler, in the table's order: the ``hetsim compare`` chart.

    Parameters
    ----------
    table
        A comparison table (:attr:`experiments.compare.Comparison.table`): columns
        ``scheduler``, ``status``, ``metric`` and optionally ``note`` and
        ``graph_rewritten``.
    metric
        The value drawn (makespan by default, in ms).
    best
        Schedulers whose names are set in bold (the best, ties included).
    scale, xlabel
        Multiplier of the values (default 1e3 for seconds columns) and label.

    Returns
    -------
    Figure
        Each scheduler named on the y axis, its value printed after its bar; a
        skipped or failed scheduler has its status where its bar would be; one
        whose plan is for a rewritten graph is marked ``*``.
    """
    missing = [c for c in ("scheduler", "status", metric) if c not in table.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table; it has {list(table.columns)}")
    if table.empty:
        raise ValueError("no rows to plot")
    k = (1e3 if metric in MS_COLUMNS else 1.0) if scale is None else scale
    rewritten = table["graph_rewritten"].fillna(False).astype(bool) if "graph_rewritten" in table else None
    rows = list(table.itertuples(index=False))
    with mpl.rc_context(PAPER_RC):
        fig, ax = new_figure(ax, width, height or 0.6 + 0.17 * len(rows))
        top = max((float(getattr(r, metric)) * k for r in rows if r.status == "ok"), default=0.0) or 1.0
        names = []
        for i, r in enumerate(rows):
            star = rewritten is not None and bool(rewritten.iloc[i])
            names.append(f"{r.scheduler}{' *' if star else ''}")
            value = float(getattr(r, metric)) if r.status == "ok" else math.nan
            if value == value:
                ax.barh(i, value * k, 0.7, color=scheduler_style(str(r.scheduler))["color"],
                        edgecolor="black", linewidth=0.3)  # fmt: skip
                ax.text(value * k + top * 0.01, i, f"{value * k:.4g}", va="center", ha="left", fontsize=6)
            else:
                ax.text(top * 0.01, i, str(r.status), va="center", ha="left", fontsize=6, color="#555555",
                        style="italic")  # fmt: skip
        ax.set_yticks(range(len(rows)), names)
        for tick, r in zip(ax.get_yticklabels(), rows):
            if r.scheduler in set(best):
                tick.set_fontweight("bold")
        ax.set_ylim(len(rows) - 0.5, -0.5)
        ax.set_xlim(0, top * 1.15)
        label = xlabel or LABELS.get(metric, metric)
        if rewritten is not None and rewritten.any():
            label += "\n* plan for a rewritten graph (operators split)"
        ax.set_xlabel(label)
        ax.xaxis.grid(True)
        ax.set_axisbelow(True)
        if title:
            ax.set_title(title)
    return fig


def _combined(df: pd.DataFrame, keys: list[str]) -> str:
    """What the rows of one ``keys`` cell differ in: ``"3 models"``, ``"2 models x 2 batch"``."""
    # lazy: at the top it would load simpy with this module
    from hetsim.experiments.sweep import PARAM_COLUMNS

    parts = []
    for c in PARAM_COLUMNS:
        if c in df.columns and c not in keys:
            n = int(df.groupby(keys, sort=False)[c].nunique(dropna=False).max())
            if n > 1:
                parts.append(f"{n} {c}{'s' if c == 'model' else ''}")
    return " x ".join(parts) or "several rows"


def _wrap(text: str, width_in: float) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, max(30, int(width_in * 22))))


def speedup_lines(
    df: pd.DataFrame,
    x: str = "link_bandwidth",
    baseline: str = "all-gpu",
    *,
    metric: str = "makespan_s",
    hue: str = "scheduler",
    on: Sequence[str] | None = None,
    where: Mapping[str, Any] | None = None,
    agg: str | None = None,
    higher_is_better: bool | None = None,
    logx: bool | None = None,
    xlabel: str | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    width: float = COLUMN_WIDTH_IN,
    height: float = 2.2,
) -> Figure:
    """Speedup over ``baseline`` against a swept parameter ``x``, one line per ``hue``.

    Each row is divided by the baseline row with the same values in ``on``. Rows
    that share ``(hue, x)`` (other models, batch sizes...) are combined only when
    ``agg`` says how (``"geomean"``, ``"mean"``, ...): without it they raise
    :class:`ValueError` naming the columns that differ, and with it the y axis
    says what was combined ("geomean over 3 models"). The baseline is drawn as the
    dashed line at 1.

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
    # lazy: at the top it would load simpy with this module
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
    ylabel = f"speedup over {baseline}"
    if agg is not None and (merged.groupby([hue, x]).size() > 1).any():
        ylabel += f"\n({agg} over {_combined(merged, [hue, x])})"
    hues = ordered_levels(sel[hue], hue)
    with mpl.rc_context(PAPER_RC):
        fig, ax = new_figure(ax, width, height)
        for j, h in enumerate(hues):
            style = {"color": hue_style(hue, h, j)["color"], "label": str(h)}
            if h == baseline:
                ax.axhline(1.0, linestyle="--", linewidth=0.8, **style)
                continue
            pts = sorted((xv, v) for (hv, xv), v in cells.items() if hv == h)
            if pts:
                ax.plot(*zip(*pts), marker=hue_style(hue, h, j)["marker"], **style)
        xs = sorted(set(sel[x]))
        numeric = all(isinstance(v, int | float | np.number) for v in xs)
        if logx is None:
            logx = numeric and min(xs) > 0 and max(xs) / min(xs) >= 8
        if logx:
            ax.set_xscale("log", base=2)
            ax.set_xticks(xs, [f"{v:g}" for v in xs])
            ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlabel(xlabel or LABELS.get(x, x))
        ax.set_ylabel(ylabel)
        ax.grid(True)
        if title:
            ax.set_title(title)
        legend_above(fig, ax)
    return fig


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
        fig, ax = new_figure(ax, width, height)
        for b, alpha in zip(sorted(bands, reverse=True), (0.2, 0.35, 0.5)):
            ax.fill_between(line, line * (1 - b), line * (1 + b), color=OKABE_ITO["sky blue"],
                            alpha=alpha, linewidth=0, label=f"±{b:.0%}")  # fmt: skip
        ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.7, label="y = x", gid="identity")
        groups = [(None, sel)] if hue is None else [(h, sel[sel[hue] == h]) for h in ordered_levels(sel[hue], hue)]
        for j, (h, part) in enumerate(groups):
            style = hue_style(hue, h, j) if h is not None else {"color": OKABE_ITO["blue"], "marker": "o"}
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
    ys = ordered_levels(sel[y], y)
    xs = sorted(set(sel[x]), key=lambda v: (isinstance(v, str), v))
    grid = np.full((len(ys), len(xs)), math.nan)
    for (yv, xv), v in cells.items():
        grid[ys.index(yv), xs.index(xv)] = v
    with mpl.rc_context(PAPER_RC):
        fig, ax = new_figure(ax, width, height or 0.8 + 0.2 * len(ys))
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
