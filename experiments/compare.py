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

from hetsim.graphs.graph import Graph
from hetsim.schedulers.run import RUN_COLUMNS, PlanRun
from hetsim.sim.platform import Platform

__all__ = ["OUTPUTS", "STATUSES", "TABLE_COLUMNS", "Comparison", "compare"]

#: columns of :attr:`Comparison.table`, in order: :data:`schedulers.RUN_COLUMNS`
#: with the speedups over the single-device plans after the makespan
TABLE_COLUMNS = [
    "scheduler",
    "status",
    "makespan_s",
    "speedup_vs_all_gpu",
    "speedup_vs_all_cpu",
    *(c for c in RUN_COLUMNS if c != "makespan_s"),
    "note",
]
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

    def best(self) -> str | None:
        """Name of the scheduler with the smallest makespan (None: no row is ok)."""
        ok = self.ok()
        if ok.empty:
            return None
        return str(ok.sort_values(["makespan_s", "scheduler"]).iloc[0]["scheduler"])

    def format_table(self) -> str:
        """The table as aligned text (times in ms, bytes in MB)."""
        header = ["scheduler", "makespan ms", "vs gpu", "vs cpu", "latency ms", "req/s",
                  "cpu util", "gpu util", "PCIe MB", "sched ms"]  # fmt: skip
        full: list[list[str]] = []
        for r in self.ok().itertuples(index=False):
            full.append([
                r.scheduler, f"{r.makespan_s * 1e3:.3f}", _fmt_x(r.speedup_vs_all_gpu),
                _fmt_x(r.speedup_vs_all_cpu), f"{r.latency_mean_s * 1e3:.3f}", f"{r.throughput_per_s:.1f}",
                _fmt_pct(r.cpu_util), _fmt_pct(r.gpu_util), f"{r.bytes_moved / 1e6:.2f}",
                f"{r.sched_time_s * 1e3:.1f}",
            ])  # fmt: skip
        widths = [max([len(h), *(len(row[i]) for row in full)]) for i, h in enumerate(header)]

        def line(cells: list[str]) -> str:
            return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

        by_name = {row[0]: row for row in full}
        lines = [line(header)]
        for r in self.table.itertuples(index=False):
            if r.scheduler in by_name:
                lines.append(line(by_name[r.scheduler]))
            else:
                lines.append(f"{r.scheduler.ljust(widths[0])}  ({r.status}: {r.note})")
        return "\n".join(lines)

    def save(self, out: str | Path, *, plots: bool = True) -> Path:
        """Write ``results.csv``, ``plans/<scheduler>.json``, ``graphs/<scheduler>.json``
        (the graph a plan is for, where the scheduler rewrote it), ``config.json`` and, with
        ``plots``, ``makespan.{png,pdf}`` and ``gantt/<scheduler>.{png,pdf}`` (ok
        schedulers whose schedule takes time: a graph of view ops has no chart).

        The files replace those of a previous comparison in ``out`` together
        (:func:`~experiments.output_folder.replace_outputs`): when writing any of
        them fails, ``out`` keeps the previous run's files, untouched.
        """
        from hetsim.experiments.output_folder import replace_outputs

        return replace_outputs(out, lambda stage: self._write(stage, plots), OUTPUTS)

    def _write(self, out: Path, plots: bool) -> None:
        self.table.to_csv(out / "results.csv", index=False)
        for name, run in self.runs.items():
            run.plan.to_json(out / "plans" / f"{name}.json")
        for name, graph in self.graphs.items():  # a plan of a rewritten graph runs on it
            graph.to_json(out / "graphs" / f"{name}.json")
        (out / "config.json").write_text(json.dumps(self.config, indent=1, sort_keys=True))
        if not plots or not self.runs:
            return
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt

        from hetsim.experiments.plots import gantt, makespan_bars, save_figure

        ok = self.ok().copy()
        ok["model"] = self.graph.name
        fig = makespan_bars(ok, title=f"{self.graph.name} on {self.platform.name}")
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
        ``note``). Nothing a scheduler raises stops the comparison.

    Raises
    ------
    SchedulerError
        up front, for an unknown scheduler name or hyper-parameter.
    """
    from hetsim import schedulers as sched_mod
    from hetsim.costmodel.base import as_cost_model
    from hetsim.experiments.sweep.point import one_line

    platform = Platform.load(platform)
    cost_model = as_cost_model(cost, platform=platform)
    scheduler_args = dict(scheduler_args or {})
    names = list(schedulers) if schedulers is not None else sched_mod.names()
    for n in scheduler_args:
        if n not in names:
            raise sched_mod.SchedulerError(f"scheduler_args names {n!r}, which is not compared")
    instances = {n: sched_mod.get(n, **scheduler_args.get(n, {})) for n in names}
    cmp = Comparison(graph=graph, platform=platform, table=pd.DataFrame())
    rows: list[dict[str, Any]] = []
    iterator: Any = names
    if progress:
        from tqdm import tqdm

        iterator = tqdm(names, desc=f"compare {graph.name}", unit="sched", leave=False)
    for name in iterator:
        s = instances[name]
        row: dict[str, Any] = {"scheduler": name, "status": "ok", "note": ""}
        rows.append(row)
        reason = s.why_not(graph, platform) if graph.number_of_nodes() else f"graph {graph.name!r} is empty"
        if reason is not None:
            row.update(status="skipped", note=_flat(reason))
            continue
        try:
            run = s.run(graph, platform, cost_model, requests=requests, interval_s=interval_s, record=record)
        except sched_mod.SchedulerError as e:
            row.update(status="skipped", note=_flat(str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - any scheduler's failure is its row, not the end
            row.update(status="failed", note=one_line(e))
            continue
        row.update(run.metrics())
        if run.graph is not graph:
            row["note"] = f"graph transformed: {run.graph.number_of_nodes()} nodes"
        cmp.runs[name] = run
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
    for base in ("all_gpu", "all_cpu"):
        ref = table.loc[(table["scheduler"] == base.replace("_", "-")) & (table["status"] == "ok"), "makespan_s"]
        ok = table["status"] == "ok"
        table[f"speedup_vs_{base}"] = math.nan
        if len(ref):
            table.loc[ok, f"speedup_vs_{base}"] = float(ref.iloc[0]) / table.loc[ok, "makespan_s"]
    return table[TABLE_COLUMNS].reset_index(drop=True)
