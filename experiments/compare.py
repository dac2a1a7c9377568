"""Compare schedulers on one model and platform: plan, simulate, tabulate, plot.

>>> from hetsim.experiments.compare import compare
>>> from hetsim.graphs import zoo                                 # doctest: +SKIP
>>> cmp = compare(zoo.load("googlenet"), "xeon-p2200")     # doctest: +SKIP
>>> cmp.table[["scheduler", "makespan_s", "speedup_vs_all_gpu"]]   # doctest: +SKIP
>>> cmp.save("out/googlenet")                              # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from hetsim.graphs.graph import Graph
from hetsim.sim.plan import Plan
from hetsim.sim.platform import Platform

__all__ = ["Comparison", "compare", "TABLE_COLUMNS"]

#: columns of :attr:`Comparison.table`, in order
TABLE_COLUMNS = [
    "scheduler",
    "status",
    "makespan_s",
    "speedup_vs_all_gpu",
    "speedup_vs_all_cpu",
    "latency_s",
    "throughput_per_s",
    "cpu_util",
    "gpu_util",
    "bytes_moved",
    "scheduling_time_s",
    "simulation_time_s",
    "note",
]


@dataclass
class Comparison:
    """What :func:`compare` returns: the table, and each scheduler's plan and result."""

    graph: Graph
    platform: Platform
    table: pd.DataFrame
    plans: dict[str, Plan] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    graphs: dict[str, Graph] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    def best(self) -> str:
        """Name of the scheduler with the smallest makespan."""
        ok = self.table[self.table["status"] == "ok"]
        return str(ok.sort_values(["makespan_s", "scheduler"]).iloc[0]["scheduler"])

    def format_table(self) -> str:
        """The table as aligned text (times in ms, bytes in MB)."""
        rows = []
        header = ["scheduler", "makespan ms", "vs gpu", "vs cpu", "latency ms", "req/s",
                  "cpu util", "gpu util", "PCIe MB", "sched ms"]
        for r in self.table.itertuples(index=False):
            if r.status != "ok":
                rows.append([r.scheduler, f"({r.status}: {r.note})"])
                continue
            rows.append([
                r.scheduler,
                f"{r.makespan_s * 1e3:.3f}",
                _fmt_x(r.speedup_vs_all_gpu),
                _fmt_x(r.speedup_vs_all_cpu),
                f"{r.latency_s * 1e3:.3f}",
                f"{r.throughput_per_s:.1f}",
                _fmt_pct(r.cpu_util),
                _fmt_pct(r.gpu_util),
                f"{r.bytes_moved / 1e6:.2f}",
                f"{r.scheduling_time_s * 1e3:.1f}",
            ])
        widths = [max(len(header[i]), *(len(row[i]) for row in rows if len(row) > i and len(row) == len(header)))
                  for i in range(len(header))]
        lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))]
        for row in rows:
            if len(row) != len(header):
                lines.append(f"{row[0].ljust(widths[0])}  {row[1]}")
            else:
                lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
        return "\n".join(lines)

    def save(self, out: str | Path, *, plots: bool = True) -> Path:
        """Write ``results.csv``, ``plans/<scheduler>.json``, ``config.json`` and, with
        ``plots``, ``makespan.{png,pdf}`` and ``gantt/<scheduler>.{png,pdf}``."""
        out = Path(out)
        (out / "plans").mkdir(parents=True, exist_ok=True)
        tmp = out / ".results.csv.tmp"
        self.table.to_csv(tmp, index=False)
        tmp.replace(out / "results.csv")
        for name, plan in self.plans.items():
            plan.to_json(out / "plans" / f"{name}.json")
        (out / "config.json").write_text(json.dumps(self.config, indent=1, sort_keys=True))
        if plots:
            import matplotlib

            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt

            from hetsim.experiments.plots import gantt, makespan_bars, save_figure

            ok = self.table[self.table["status"] == "ok"].copy()
            ok["model"] = self.graph.name
            fig = makespan_bars(ok, title=f"{self.graph.name} on {self.platform.name}")
            save_figure(fig, out / "makespan")
            plt.close(fig)
            (out / "gantt").mkdir(exist_ok=True)
            for name, res in self.results.items():
                if res.records:
                    fig = gantt(res, title=f"{self.graph.name}: {name}")
                    save_figure(fig, out / "gantt" / name)
                    plt.close(fig)
        return out


def _fmt_x(v: float) -> str:
    return "-" if v != v else f"{v:.2f}x"  # NaN check


def _fmt_pct(v: float) -> str:
    return "-" if v != v else f"{100 * v:.0f}%"


def _kind_util(platform: Platform, util: Mapping[str, float], kind: str) -> float:
    vals = [util.get(d.name, 0.0) for d in platform.devices if d.kind == kind]
    return sum(vals) / len(vals) if vals else float("nan")


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
        Registry names; default: every registered scheduler that applies to this
        graph and platform (the others are listed as skipped with the reason).
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
    """
    from hetsim import schedulers as sched_mod
    from hetsim.sim.engine import simulate

    platform = Platform.load(platform)
    cost_model = _cost(cost, platform)
    scheduler_args = dict(scheduler_args or {})
    explicit = schedulers is not None
    names = list(schedulers) if explicit else sched_mod.names()
    for n in scheduler_args:
        if n not in names:
            raise sched_mod.SchedulerError(f"scheduler_args names {n!r}, which is not compared")
    instances = {n: sched_mod.get(n, **scheduler_args.get(n, {})) for n in names}
    rows: list[dict[str, Any]] = []
    cmp = Comparison(graph=graph, platform=platform, table=pd.DataFrame())
    iterator: Any = names
    if progress:
        from tqdm import tqdm

        iterator = tqdm(names, desc=f"compare {graph.name}", unit="sched", leave=False)
    for name in iterator:
        s = instances[name]
        row: dict[str, Any] = {"scheduler": name, "status": "ok", "note": ""}
        reason = s.why_not(graph, platform) if hasattr(s, "why_not") else None
        if reason is not None:
            row.update(status="skipped", note=reason)
            rows.append(row)
            continue
        t0 = time.perf_counter()
        try:
            g = s.transform(graph, platform, cost_model)
            plan = s.schedule(g, platform, cost_model)
        except sched_mod.SchedulerError as e:
            if explicit:
                raise
            row.update(status="skipped", note=str(e))
            rows.append(row)
            continue
        row["scheduling_time_s"] = time.perf_counter() - t0
        t1 = time.perf_counter()
        res = simulate(g, platform, plan, cost_model, requests=requests, interval_s=interval_s, record=record)
        row["simulation_time_s"] = time.perf_counter() - t1
        row.update(
            makespan_s=res.makespan,
            latency_s=res.latency,
            throughput_per_s=res.throughput,
            cpu_util=_kind_util(platform, res.device_utilisation, "cpu"),
            gpu_util=_kind_util(platform, res.device_utilisation, "gpu"),
            bytes_moved=res.total_bytes_moved,
        )
        if g is not graph:
            row["note"] = f"graph transformed: {g.number_of_nodes()} nodes"
            cmp.graphs[name] = g
        cmp.plans[name] = plan
        cmp.results[name] = res
        rows.append(row)
    table = pd.DataFrame(rows)
    for col in TABLE_COLUMNS:
        if col not in table:
            table[col] = float("nan") if col not in ("note", "status", "scheduler") else ""
    for base in ("all_gpu", "all_cpu"):
        ref = table.loc[(table["scheduler"] == base.replace("_", "-")) & (table["status"] == "ok"), "makespan_s"]
        table[f"speedup_vs_{base}"] = (float(ref.iloc[0]) / table["makespan_s"]) if len(ref) else float("nan")
    cmp.table = table[TABLE_COLUMNS].reset_index(drop=True)
    cmp.config = {
        "graph": graph.name,
        "nodes": graph.number_of_nodes(),
        "granularity": graph.meta.get("granularity"),
        "batch": graph.meta.get("batch"),
        "platform": platform.name,
        "cost": type(cost_model).__name__ if not isinstance(cost, str | None) else (cost or "default"),
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


def _cost(cost: Any, platform: Platform) -> Any:
    if cost is None or isinstance(cost, str):
        from hetsim import costmodel

        return costmodel.from_spec(cost, platform=platform)
    return cost
