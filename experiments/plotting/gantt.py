"""Gantt chart of one simulated (or measured) run: one row per device stream, link
direction and dispatch thread."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hetsim.experiments.plotting.style import (
    COLUMN_WIDTH_IN,
    OKABE_ITO,
    PAPER_RC,
    TOL_MUTED,
    legend_above,
    new_figure,
)

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes

__all__ = ["gantt"]


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
    rank = {"op": 0, "transfer": 1, "dispatch": 2, "decision": 2}
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
             "decision": "#555555",
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
        fig, ax = new_figure(ax, width, height or 0.8 + 0.2 * len(keys) + 0.15 * legend_rows)
        for (row, name), spans in bars.items():
            ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colours[name], linewidth=0, label=name)
        ax.set_yticks(range(len(keys)), labels)
        ax.set_ylim(len(keys) - 0.5, -0.5)
        ax.set_xlabel(f"time ({'µs' if time_unit == 'us' else time_unit})")
        ax.set_xlim(left=0)
        if title:
            ax.set_title(title)
        if legend:
            legend_above(fig, ax, [Patch(color=colours[n], label=n) for n in names])
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
