"""Compare schedulers on one model and platform: plan, simulate, tabulate, plot.

Every scheduler goes through :meth:`Scheduler.run <schedulers.base.Scheduler.run>`;
whatever one of them raises becomes its row (``status`` and a one-line ``note``),
and the others are still tabulated, saved and plotted.

>>> from hetsim.experiments.compare import compare
>>> from hetsim.graphs import zoo                                 # doctest: +SKIP
>>> cmp = compare(zoo.load("googlenet"), "xeon-p2200")     # doctest: +SKIP
>>> cmp.table[["scheduler", "makespan_s", "speedup_vs_all_gpu"]]   # doctest: +SKIP
>>> cmp.save("out/googlenet")                              # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hetsim import schedulers as sched_mod
from hetsim.costmodel.base import CostModelError, as_cost_model
from hetsim.costmodel.platform import Platform
from hetsim.experiments.output_folder import replace_outputs
from hetsim.graphs.graph import Graph, atomic_write
from hetsim.schedulers.run import RUN_COLUMNS, PlanRun
from hetsim.sim.engine.state import check_arrivals

__all__ = ["COLUMN_DEFINITIONS", "OUTPUTS", "STATUSES", "TABLE_COLUMNS", "TIE_RTOL", "Comparison",
           "check_arguments", "compare"]

#: columns of :attr:`Comparison.table`, in order: the rank by makespan (ties share
#: it), :data:`schedulers.RUN_COLUMNS` with the speedups over the single-device plans
#: after the makespan, whether the plan is for a rewritten graph, and a note (the
#: reason of a skip or failure; for ok rows what the plan is for, e.g. optimal's
#: objective)
TABLE_COLUMNS = [
    "scheduler",
    "status",
    "rank",
    "makespan_s",
    "speedup_vs_all_gpu",
    "speedup_vs_all_cpu",
    *(c for c in RUN_COLUMNS if c != "makespan_s"),
    "graph_rewritten",
    "note",
]
#: makespans within this relative difference are a tie (same rank, all "best")
TIE_RTOL = 1e-6
#: what each column of :data:`TABLE_COLUMNS` that is not a simulation metric
#: (:data:`sim.result.METRIC_DEFINITIONS`) is (``hetsim compare --help``, the README)
COLUMN_DEFINITIONS: dict[str, str] = {
    "scheduler": "registry name of the scheduler",
    "status": "ok (planned and simulated), skipped (does not apply: the reason in note) or "
    "failed (raised: the error in note)",
    "rank": "1 for the smallest makespan; makespans within a relative 1e-6 of each other tie "
    "(same rank, all named best)",
    "speedup_vs_all_gpu": "all-gpu's makespan / this makespan (above 1: faster than the whole "
    "graph on the GPU)",
    "speedup_vs_all_cpu": "all-cpu's makespan / this makespan",
    "nodes": "nodes of the graph the plan is for (more than the model's when the scheduler "
    "split operators)",
    "sched_time_s": "wall time the scheduler took to plan (graph rewrite included), seconds",
    "sim_time_s": "wall time of the simulation, seconds",
    "graph_rewritten": "the plan is for a rewritten graph (tensor-split splits operators); the "
    "note under the table says how",
    "note": "why a row was skipped or failed; for an ok row, what its plan is for (a rewritten "
    "graph, optimal's objective)",
}
#: ``status`` values: planned and simulated; declined (``why_not`` or a
#: :class:`~schedulers.SchedulerError`: it does not apply); raised anything else
STATUSES = ("ok", "skipped", "failed")
#: what :meth:`Comparison.save` writes in its folder (replaced together)
OUTPUTS = ("results.csv", "config.json", "plans", "graphs", "makespan.png", "makespan.pdf", "gantt")


@dataclass
class Comparison:
    """What :func:`compare` returns: the table, and each ok scheduler's run.

    Attributes
    ----------
    table
        One row per scheduler (:data:`TABLE_COLUMNS`).
    runs
        Scheduler -> its :class:`~schedulers.PlanRun` (ok rows only); ``plans``,
        ``results`` and ``graphs`` (the rewritten graphs, for schedulers that
        rewrite) give their parts.
    config
        What was compared (saved as ``config.json``).
    """

    graph: Graph
    platform: Platform
    table: pd.DataFrame
    runs: dict[str, PlanRun] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def plans(self) -> dict[str, Any]:
        return {n: r.plan for n, r in self.runs.items()}

    @property
    def results(self) -> dict[str, Any]:
        return {n: r.result for n, r in self.runs.items()}

    @property
    def graphs(self) -> dict[str, Graph]:
        return {n: r.graph for n, r in self.runs.items() if r.graph is not self.graph}

    def ok(self) -> pd.DataFrame:
        """The rows of the schedulers that planned and simulated."""
        return self.table[self.table["status"] == "ok"]

    def winners(self) -> list[str]:
        """The schedulers with the smallest makespan, in table order: several when they
        tie (within :data:`TIE_RTOL`); empty when no row is ok."""
        return list(self.table.loc[self.table["rank"] == 1, "scheduler"])

    def best(self) -> str | None:
        """The first of :meth:`winners` in table order (None: no row is ok); see
        :meth:`winners` for ties."""
        won = self.winners()
        return won[0] if won else None

    def format_table(self) -> str:
        """The table as aligned text (times in ms, bytes in MB), footnotes for the rows
        whose plan needs one (a rewritten graph, optimal's objective) and what the
        columns are."""
        steady = int(self.config.get("requests", 1) or 1) > 1
        header = ["scheduler", "makespan ms", "vs gpu", "vs cpu", "latency ms", "req/s",
                  *(["steady req/s"] if steady else []), "cpu util", "gpu util", "moved MB",
                  "sched ms"]  # fmt: skip
        notes: dict[str, str] = {}  # scheduler -> its footnote, numbered in table order
        by_name: dict[str, list[str]] = {}
        for r in self.ok().itertuples(index=False):
            if r.note:
                notes[r.scheduler] = r.note
            name = r.scheduler + (f" [{len(notes)}]" if r.note else "")
            by_name[r.scheduler] = [
                name, f"{r.makespan_s * 1e3:.3f}", _fmt_x(r.speedup_vs_all_gpu),
                _fmt_x(r.speedup_vs_all_cpu), f"{r.latency_mean_s * 1e3:.3f}", f"{r.requests_per_s:.1f}",
                *([f"{r.throughput_per_s:.1f}"] if steady else []),
                _fmt_pct(r.cpu_util), _fmt_pct(r.gpu_util), f"{r.bytes_moved / 1e6:.2f}",
                f"{r.sched_time_s * 1e3:.1f}",
            ]  # fmt: skip
        widths = [max([len(h), *(len(row[i]) for row in by_name.values())]) for i, h in enumerate(header)]

        def line(cells: list[str]) -> str:
            return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        lines = [line(header)]
        for r in self.table.itertuples(index=False):
            if r.scheduler in by_name:
                lines.append(line(by_name[r.scheduler]))
            else:
                lines.append(f"{r.scheduler.ljust(widths[0])}  ({r.status}: {r.note})")
        for i, (name, note) in enumerate(notes.items(), 1):
            lines.append(f"[{i}] {name}: {note}")
        if by_name:
            lines.append(self.columns_line(steady))
        return "\n".join(lines)

    def columns_line(self, steady: bool = False) -> str:
        """What the rate, utilisation and traffic columns of :meth:`format_table` are."""
        streams: dict[str, list[int]] = {}
        for d in self.platform.devices:
            streams.setdefault(d.kind, []).append(d.streams)
        per_kind = ", ".join(
            f"{kind} {'/'.join(str(n) for n in dict.fromkeys(ns))}" for kind, ns in streams.items()
        )
        text = "req/s: requests / makespan; "
        if steady:
            text += "steady req/s: (requests - 1) / (last - first completion); "
        return (text + f"util: busy / (makespan x streams), streams {per_kind}; moved MB: over "
                "every link direction (hetsim compare --help defines every column)")

    def save(self, out: str | Path, *, plots: bool = True) -> Path:
        """Write ``results.csv``, ``plans/<scheduler>.json``, ``graphs/<scheduler>.json``
        (the graph a plan is for, where the scheduler rewrote it), ``config.json`` and, with
        ``plots``, ``makespan.{png,pdf}`` and ``gantt/<scheduler>.{png,pdf}`` (ok
        schedulers whose schedule takes time: a graph of view ops has no chart).

        The files replace those of a previous comparison in ``out`` together
        (:func:`~experiments.output_folder.replace_outputs`): when writing any of
        them fails, ``out`` keeps the previous run's files, untouched.
        """
        return replace_outputs(out, lambda stage: self._write(stage, plots), OUTPUTS)

    def _write(self, out: Path, plots: bool) -> None:
        atomic_write(out / "results.csv", lambda fh: self.table.to_csv(fh, index=False))
        for name, run in self.runs.items():
            run.plan.to_json(out / "plans" / f"{name}.json")
        for name, graph in self.graphs.items():  # a plan of a rewritten graph runs on it
            graph.to_json(out / "graphs" / f"{name}.json")
        atomic_write(out / "config.json", lambda fh: json.dump(self.config, fh, indent=1, sort_keys=True))
        if not plots or not self.runs:
            return
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        # lazy: at the top it would load matplotlib with this module
        from hetsim.experiments.plotting.charts import comparison_bars, gantt, save_figure

        requests = int(self.config.get("requests", 1) or 1)
        fig = comparison_bars(self.table, best=self.winners(),
                              title=f"{self.graph.name} on {self.platform.name}, "
                                    f"{requests} request{'s' if requests > 1 else ''}")  # fmt: skip
        save_figure(fig, out / "makespan")
        plt.close(fig)
        for name, run in self.runs.items():
            records = run.result.records if run.result is not None else None
            if records and any(r["end"] > r["start"] for r in records):  # else nothing to draw
                fig = gantt(run.result, title=f"{self.graph.name}: {name}")
                save_figure(fig, out / "gantt" / name)
                plt.close(fig)


def _fmt_x(v: float) -> str:
    return "-" if v != v else f"{v:.2f}x"  # NaN check


def _fmt_pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:.0f}%"


def compare(
    graph: Graph,
    platform: Platform | str,
    *,
    schedulers: Sequence[str] | None = None,
    cost: Any = None,
    requests: int = 1,
    interval_s: float = 0.0,
    scheduler_args: Mapping[str, Mapping[str, Any]] | None = None,
    record: bool = True,
    progress: bool = False,
) -> Comparison:
    """Run every scheduler on ``graph``, simulate each plan, and tabulate.

    Parameters
    ----------
    graph
        The model graph.
    platform
        A :class:`Platform`, a preset name or a TOML path.
    schedulers
        Registry names; default every registered scheduler (those that do not
        apply get a ``skipped`` row with the reason).
    cost
        A cost model, or a spec for :func:`costmodel.from_spec` (``"roofline"``, a
        profile folder, ``"cpu=PROFILE,gpu=gpu-a100-80gb"``...); None or ``"default"``:
        each device's own source (the measured GPU profile a preset names, else the
        roofline).
    requests, interval_s
        Requests flowing through each plan (pipelining), arriving every ``interval_s``.
    scheduler_args
        ``{scheduler name: {hyper-parameter: value}}``.
    record
        Keep per-op records (needed for Gantt charts).
    progress
        Show a progress bar.

    Returns
    -------
    Comparison
        One row per scheduler: ``ok``, ``skipped`` (it does not apply: the reason
        in ``note``) or ``failed`` (it raised: the exception on one line in
        ``note``). Nothing a scheduler raises stops the comparison. Rows that
        tie for the smallest makespan share ``rank`` 1 (:meth:`Comparison.winners`).

    Raises
    ------
    SchedulerError
        up front, for an unknown scheduler name or hyper-parameter.
    SimulationError
        up front, for ``requests`` < 1 or a negative ``interval_s``.
    CostModelError
        when the cost model cannot price the graph (e.g. a profile that measured
        none of its operators): bad input for every scheduler alike.
    """
    instances = check_arguments(schedulers, scheduler_args, requests, interval_s)
    names = list(instances)
    scheduler_args = dict(scheduler_args or {})
    platform = Platform.load(platform)
    cost_model = as_cost_model(cost, platform=platform)
    cmp = Comparison(graph=graph, platform=platform, table=pd.DataFrame())
    rows: list[dict[str, Any]] = []
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(names), desc=f"compare {graph.name}", unit="sched", leave=False)
    try:  # an error that ends the comparison leaves no half-drawn bar behind
        for name in names:
            row, run = _compare_one(instances[name], name, graph, platform, cost_model,
                                    requests=requests, interval_s=interval_s, record=record)  # fmt: skip
            rows.append(row)
            if run is not None:
                cmp.runs[name] = run
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    cmp.table = _table(rows)
    cmp.config = {
        "graph": graph.name,
        "nodes": graph.number_of_nodes(),
        "granularity": graph.meta.get("granularity"),
        "batch": graph.meta.get("batch"),
        "platform": platform.name,
        "cost": cost if isinstance(cost, str) else ("default" if cost is None else type(cost_model).__name__),
        "cost_sources": _describe(cost_model),
        "requests": requests,
        "interval_s": interval_s,
        "schedulers": names,
        "scheduler_args": scheduler_args,
    }
    return cmp


def check_arguments(
    schedulers: Sequence[str] | None = None,
    scheduler_args: Mapping[str, Mapping[str, Any]] | None = None,
    requests: int = 1,
    interval_s: float = 0.0,
) -> dict[str, Any]:
    """The schedulers :func:`compare` would run, by name, after checking its arguments:
    what ``hetsim compare`` does before it imports the model.

    Raises
    ------
    SchedulerError
        for an unknown scheduler name (with the closest known one) or hyper-parameter,
        or ``scheduler_args`` naming a scheduler that is not compared.
    SimulationError
        for ``requests`` < 1 or a negative ``interval_s``.
    """
    check_arrivals(requests, interval_s)
    names = list(schedulers) if schedulers is not None else sched_mod.names()
    for n in scheduler_args or {}:
        if n not in names:
            raise sched_mod.SchedulerError(f"scheduler_args names {n!r}, which is not compared")
    return {n: sched_mod.get(n, **dict((scheduler_args or {}).get(n, {}))) for n in names}


def _compare_one(s: Any, name: str, graph: Graph, platform: Platform, cost: Any,
                 **options: Any) -> tuple[dict[str, Any], PlanRun | None]:  # fmt: skip
    """One scheduler's row (and run, when ok): whatever it raises becomes the row,
    except a :class:`~costmodel.CostModelError` (the cost model cannot price the graph:
    bad input for every scheduler)."""
    # lazy: at the top it would load the sweep package (multiprocessing) with this module
    from hetsim.experiments.sweep.point import one_line

    row: dict[str, Any] = {"scheduler": name, "status": "ok", "note": ""}
    reason = s.why_not(graph, platform) if graph.number_of_nodes() else f"graph {graph.name!r} is empty"
    if reason is not None:
        row.update(status="skipped", note=_flat(reason))
        return row, None
    try:
        run = s.run(graph, platform, cost, **options)
    except sched_mod.SchedulerError as e:
        row.update(status="skipped", note=_flat(str(e)))
        return row, None
    except CostModelError:
        raise
    except Exception as e:  # noqa: BLE001 - any scheduler's failure is its row, not the end
        row.update(status="failed", note=one_line(e))
        return row, None
    row.update(run.metrics())
    row["graph_rewritten"] = run.graph is not graph
    row["note"] = _plan_note(run, graph)
    return row, run


def _plan_note(run: PlanRun, graph: Graph) -> str:
    """What a reader must know to read an ok row: that its plan is for a rewritten
    graph, and the objective a scheduler states (``plan.meta["objective"]``)."""
    meta = run.plan.meta
    parts = []
    if run.graph is not graph:
        split = meta.get("split_nodes")
        what = f"{len(split)} operator(s) split across devices, " if split else ""
        parts.append(f"plan for a rewritten graph: {what}{graph.number_of_nodes()} -> "
                     f"{run.graph.number_of_nodes()} nodes")  # fmt: skip
    if meta.get("objective"):
        parts.append(f"objective: {meta['objective']}")
    return "; ".join(parts)


def _describe(cost_model: Any) -> str:
    """What prices the devices, as the header of a comparison shows it."""
    if hasattr(cost_model, "describe"):
        return str(cost_model.describe())
    if type(cost_model).__name__ == "Roofline":
        return "roofline"
    return str(getattr(cost_model, "name", type(cost_model).__name__))


def _flat(text: str) -> str:
    return " | ".join(line.strip() for line in str(text).splitlines() if line.strip())


def _table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows with every column of :data:`TABLE_COLUMNS` (NaN where not measured)
    and the speedups over the ok ``all-gpu`` and ``all-cpu`` rows."""
    table = pd.DataFrame(rows)
    for col in TABLE_COLUMNS:
        if col not in table:
            table[col] = "" if col in ("note", "status", "scheduler") else math.nan
    table["graph_rewritten"] = table["graph_rewritten"].astype(object).where(table["status"] == "ok", math.nan)
    ok = table["status"] == "ok"
    spans = table.loc[ok, "makespan_s"].astype(float)
    table["rank"] = math.nan
    table.loc[ok, "rank"] = [1 + int((spans < m * (1 - TIE_RTOL)).sum()) for m in spans]
    for base in ("all_gpu", "all_cpu"):
        ref = table.loc[(table["scheduler"] == base.replace("_", "-")) & (table["status"] == "ok"), "makespan_s"]
        ok = table["status"] == "ok"
        table[f"speedup_vs_{base}"] = math.nan
        if len(ref):
            table.loc[ok, f"speedup_vs_{base}"] = float(ref.iloc[0]) / table.loc[ok, "makespan_s"]
    return table[TABLE_COLUMNS].reset_index(drop=True)
