"""The look every hetsim figure shares: paper sizes and fonts, colours, axis labels, saving.

Figures are made for a paper column: 3.5 in wide, 7-8 pt fonts, TrueType fonts
embedded in PDFs. Each registered scheduler has one fixed colour and marker
(:func:`scheduler_style`), the same in every figure whatever subset it shows; the
16 colours start from the colour-blind-safe Okabe-Ito palette and are picked so
that no two of them are closer than 20 CIEDE2000 units (``tests/test_plots.py``
checks it): bars and lines are labelled by name as well, so that colour is never
the only way to tell two schedulers apart. :func:`save_figure` writes PNG and PDF
files whose bytes depend only on the figure (no creation date), so that a figure
redrawn from the same results leaves a tracked file unchanged.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
from matplotlib.figure import Figure

from hetsim.experiments.plotting import MAX_FIGURE_IN
from hetsim.graphs.graph import atomic_write

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = [
    "COLUMN_WIDTH_IN", "LABELS", "MS_COLUMNS", "OKABE_ITO", "PAPER_RC", "SCHEDULER_COLOURS",
    "TOL_MUTED", "hue_style", "legend_above", "new_figure", "ordered_levels",
    "reproducible_metadata", "save_figure", "scheduler_style",
]  # fmt: skip

#: one-column width of a two-column paper, inches
COLUMN_WIDTH_IN = 3.5

#: Okabe & Ito (2008), "Color Universal Design": safe for all common colour blindness
OKABE_ITO = {
    "black": "#000000", "orange": "#E69F00", "sky blue": "#56B4E9", "bluish green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00", "reddish purple": "#CC79A7",
}  # fmt: skip
#: Paul Tol's "muted" scheme, for names beyond the registered schedulers
TOL_MUTED = ("#332288", "#88CCEE", "#44AA99", "#117733", "#999933", "#DDCC77", "#CC6677",
             "#882255", "#AA4499")  # fmt: skip
_MARKERS = ("o", "s", "D", "^", "v", "<", ">", "p", "P", "X", "*", "h")

#: fixed scheduler -> colour: baselines grey and black, the Okabe-Ito colours for the
#: list schedulers, and eight more at least 20 CIEDE2000 units from every other
SCHEDULER_COLOURS = {
    "all-cpu": "#999999", "all-gpu": OKABE_ITO["black"], "heft": OKABE_ITO["blue"],
    "cpop": OKABE_ITO["sky blue"], "peft": OKABE_ITO["bluish green"],
    "cp-greedy": OKABE_ITO["vermillion"], "donf": OKABE_ITO["orange"],
    "by-op": OKABE_ITO["reddish purple"], "by-path": OKABE_ITO["yellow"], "dynamic": "#AA3377",
    "timeslice-pipeline": "#01665E", "antichain-dp": "#542788", "tensor-split": "#999933",
    "optimal": "#B2182B", "round-robin": "#8DD3C7", "random": "#FB8072", "refine": "#554400",
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
    "latency_p99_s": "p99 latency (ms)", "requests_per_s": "requests / makespan (req/s)",
    "throughput_per_s": "steady-state throughput (req/s)",
    "link_bandwidth": "link bandwidth (×)", "gpu_peak": "GPU peak FLOP/s (×)",
    "cpu_peak": "CPU peak FLOP/s (×)", "gpu_bandwidth": "GPU memory bandwidth (×)",
    "cpu_util": "CPU utilisation", "gpu_util": "GPU utilisation", "link_util": "link utilisation",
    "batch": "batch size", "requests": "requests",
}  # fmt: skip
#: columns in seconds that figures show in milliseconds
MS_COLUMNS = frozenset({"makespan_s", "latency_mean_s", "latency_p50_s", "latency_p99_s"})


def scheduler_style(name: str) -> dict[str, str]:
    """Fixed ``{"color", "marker"}`` of a scheduler, the same in every figure.

    Registered schedulers have hand-picked colours; other names get one from the
    palette by a stable hash of the name (not by their position in a figure).
    """
    h = int(hashlib.sha1(name.encode()).hexdigest(), 16)
    known = list(SCHEDULER_COLOURS)
    color = SCHEDULER_COLOURS.get(name) or TOL_MUTED[h % len(TOL_MUTED)]
    i = known.index(name) if name in known else h
    return {"color": color, "marker": _MARKERS[i % len(_MARKERS)]}


def ordered_levels(values: Iterable[Any], column: str | None) -> list[Any]:
    """Distinct values in order of appearance; schedulers in the registry's order
    (baselines first, as ``hetsim compare`` tabulates them), so that a legend or an
    axis does not depend on which point finished first."""
    levels = list(dict.fromkeys(values))
    if column == "scheduler":
        known = list(SCHEDULER_COLOURS)
        try:
            # lazy: at the top it would load simpy with this module
            from hetsim.schedulers import names

            known = [*names(), *(k for k in known if k not in names())]
        except ImportError:  # pragma: no cover - schedulers always import
            pass
        levels.sort(key=lambda v: known.index(v) if v in known else len(known))
    return levels


def hue_style(hue: str | None, value: Any, i: int) -> dict[str, str]:
    """A scheduler's fixed style, or the i-th palette colour and marker for other hues."""
    if hue == "scheduler":
        return scheduler_style(str(value))
    palette = [*list(OKABE_ITO.values())[1:], *TOL_MUTED]
    return {"color": palette[i % len(palette)], "marker": _MARKERS[i % len(_MARKERS)]}


def new_figure(ax: Axes | None, width: float, height: float) -> tuple[Figure, Axes]:
    """``ax``'s figure and ``ax``, or a new constrained-layout figure of that size
    (not registered with pyplot: nothing accumulates in long sessions)."""
    if ax is not None:
        return ax.figure, ax
    for side, value in (("width", width), ("height", height)):
        if not (isinstance(value, int | float) and 0 < value <= MAX_FIGURE_IN):
            raise ValueError(f"figure {side} must be a number of inches in (0, {MAX_FIGURE_IN:g}], got {value!r}")
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def legend_above(fig: Figure, ax: Axes, handles: list[Any] | None = None) -> None:
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


def save_figure(
    fig: Figure,
    path: str | os.PathLike[str],
    *,
    formats: Sequence[str] = ("png", "pdf"),
    dpi: int = 200,
) -> list[Path]:
    """Write ``path.png`` (``dpi``) and ``path.pdf`` (vector, fonts embedded).

    ``path`` is given without extension (a ``.png``/``.pdf`` suffix is dropped);
    parent folders are created. The files carry no creation date: the same figure
    gives the same bytes (for one matplotlib version), and each is written atomically
    (:func:`graphs.graph.atomic_write`). Returns the files written.
    """
    path = Path(path)
    if path.suffix.lower() in (".png", ".pdf", ".svg"):
        path = path.with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    out = []
    with mpl.rc_context({**PAPER_RC, "svg.hashsalt": "hetsim"}):
        for ext in formats:
            target = path.with_name(f"{path.name}.{ext}")
            atomic_write(target, lambda fh, ext=ext: fig.savefig(fh, dpi=dpi, format=ext,
                                                                 metadata=reproducible_metadata(ext)),
                         binary=True)  # fmt: skip
            out.append(target)
    return out


def reproducible_metadata(fmt: str) -> dict[str, Any] | None:
    """``savefig(metadata=...)`` without the creation date (PDF, SVG; PNG has none)."""
    return {"CreationDate": None} if fmt == "pdf" else {"Date": None} if fmt == "svg" else None
