"""Validation: simulate a plan, execute it on the real machine, compare.

:func:`validate` plans a graph with a scheduler (or takes a plan), simulates it
with the cost model the scheduler used, executes it (:func:`runtime.execute`) and
returns both results side by side: makespan error, per-device busy time, and the
two traces (which, opened side by side in Perfetto, show where the simulator is
wrong). :func:`validate_all` does that for every applicable scheduler on a set of
models and tabulates the errors, and whether the simulator ranks the schedulers in
the order the measurements do (Kendall's tau per model): ranking correctly is what
users of the simulator rely on.

:func:`measure_overhead` times the executor's own per-op cost (a chain of
one-element ops); :func:`calibrate_dispatch` writes it into a profile's
``dispatch.json`` so that the simulator's per-op host dispatch is what the
executor really spends; :func:`profile_in_context` measures operator times inside
the running model (see :mod:`runtime.context_profile`); :func:`measure_handoff`
measures how long an op waits for an input from another worker beyond one from
its own (``Device.handoff_s`` in the simulator) and :func:`measure_read_bandwidth`
how much longer it runs reading it (``Device.handoff_bandwidth_bytes_per_s``; see
:mod:`runtime.handoff`).

Examples
--------
>>> from hetsim.graphs import zoo
>>> v = validate(zoo.load("googlenet"), "cpu2", "heft", "profiles/cpu2-torch")   # doctest: +SKIP
>>> print(v)                                                                    # doctest: +SKIP
>>> v.write("out/googlenet-heft")                                               # doctest: +SKIP
>>> table = validate_all(["googlenet", "resnet18"], "cpu2", cost="profiles/cpu2-torch",
...                      out="out/validation")                                  # doctest: +SKIP
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.runtime.backends.base import BackendError
from hetsim.runtime.context_profile import (
    ContextProfiler,
    calibrate_dispatch,
    measure_overhead,
    profile_in_context,
)
from hetsim.runtime.executor_setup import ExecutionError
from hetsim.runtime.handoff import (
    HostCalibration,
    handoff_gaps,
    measure_handoff,
    measure_read_bandwidth,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.tvm_backend import RelaxModel
    from hetsim.runtime.executor import RunResult
    from hetsim.schedulers.run import PlanRun
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform
    from hetsim.sim.result import SimResult

__all__ = [
    "VALIDATION_COLUMNS",
    "ContextProfiler",
    "HostCalibration",
    "ValidationResult",
    "calibrate_dispatch",
    "format_table",
    "handoff_gaps",
    "measure_handoff",
    "measure_overhead",
    "measure_read_bandwidth",
    "profile_in_context",
    "ranking",
    "validate",
    "validate_all",
]

#: columns of the :func:`validate_all` table, in order
VALIDATION_COLUMNS = [
    "model", "scheduler", "status", "simulated_s", "measured_s", "error_pct", "measured_p10_s",
    "measured_p90_s", "spread_pct", "relative_error_pct", "simulated_rank", "measured_rank",
    "kendall_tau", "kendall_p", "ops", "requests", "platform", "backend", "cost", "note",
]
#: the plan :data:`VALIDATION_COLUMNS` ``relative_error_pct`` is relative to
BASELINE = "all-cpu"


@dataclass
class ValidationResult:
    """A plan simulated and executed. Times in seconds.

    Attributes
    ----------
    graph
        The graph planned and run (rewritten by the scheduler's ``transform`` if any).
    plan
        The plan.
    sim
        The simulation (with records).
    run
        The execution.
    cost
        Name of the cost model the plan was simulated with.
    """

    graph: Graph
    plan: Plan
    sim: SimResult
    run: RunResult
    cost: str

    @property
    def scheduler(self) -> str:
        return str(self.plan.meta.get("scheduler", "plan"))

    @property
    def simulated_s(self) -> float:
        return float(self.sim.makespan)

    @property
    def measured_s(self) -> float:
        """Median measured makespan."""
        return float(self.run.median)

    @property
    def error_pct(self) -> float:
        """``(simulated - measured) / measured`` in percent (negative: the simulator
        predicts faster than the machine runs)."""
        m = self.measured_s
        return 100.0 * (self.simulated_s - m) / m if m > 0 else math.nan

    def busy(self) -> pd.DataFrame:
        """Per device: simulated and measured busy (kernel) time and the error."""
        import pandas as pd

        rows = []
        for d in self.sim.device_busy:
            s, m = self.sim.device_busy[d], self.run.device_busy.get(d, 0.0)
            rows.append({"device": d, "simulated_busy_s": s, "measured_busy_s": m,
                         "error_pct": 100.0 * (s - m) / m if m > 0 else (0.0 if s == 0 else math.nan)})
        return pd.DataFrame(rows)

    def row(self) -> dict[str, Any]:
        """One row of the :func:`validate_all` table."""
        run = self.run
        return {
            "model": str(self.graph.meta.get("model") or self.graph.name), "scheduler": self.scheduler,
            "status": "ok", "simulated_s": self.simulated_s, "measured_s": self.measured_s,
            "error_pct": self.error_pct, "measured_p10_s": run.p10, "measured_p90_s": run.p90,
            "spread_pct": 100.0 * run.spread, "ops": self.graph.number_of_nodes(),
            "requests": run.requests, "platform": run.platform, "backend": run.backend,
            "cost": self.cost, "note": "",
            **{f"sim_busy:{d}": b for d, b in self.sim.device_busy.items()},
            **{f"run_busy:{d}": b for d, b in run.device_busy.items()},
        }

    def write(self, out: str | os.PathLike[str]) -> Path:
        """Write ``sim_trace.json``, ``run_trace.json``, ``plan.json`` and
        ``summary.json`` into the folder ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.sim.to_chrome_trace(out / "sim_trace.json")
        self.run.to_chrome_trace(out / "run_trace.json")
        self.plan.to_json(out / "plan.json")
        summary = {"row": _jsonable(self.row()), "run": _jsonable(self.run.summary()),
                   "sim": _jsonable(self.sim.summary()), "makespans_s": self.run.makespans,
                   "check": self.run.check}
        (out / "summary.json").write_text(json.dumps(summary, indent=1))
        return out

    def __str__(self) -> str:
        ms = 1e3
        run = self.run
        lines = [
            f"{self.graph.name} on {run.platform}: plan {self.scheduler}, backend {run.backend}, "
            f"cost {self.cost}, {run.requests} request(s)",
            f"makespan  simulated {self.simulated_s * ms:9.3f} ms   measured {self.measured_s * ms:9.3f} ms "
            f"(p10 {run.p10 * ms:.3f}, p90 {run.p90 * ms:.3f}, {len(run.makespans)} runs)   "
            f"error {self.error_pct:+.1f}%",
            f"{'device':<12}{'sim busy ms':>14}{'run busy ms':>14}{'error':>9}",
        ]
        for r in self.busy().itertuples(index=False):
            err = "-" if r.error_pct != r.error_pct else f"{r.error_pct:+.1f}%"
            lines.append(f"{r.device:<12}{r.simulated_busy_s * ms:>14.3f}{r.measured_busy_s * ms:>14.3f}{err:>9}")
        if run.check is not None:
            lines.append(f"outputs match the {run.check['reference']} reference "
                         f"(error {run.check['error']:.2g} of the tolerance)")
        return "\n".join(lines)


def _jsonable(d: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        out[k] = v
    return out


def _platform(platform: Platform | str) -> Platform:
    from hetsim.sim.platform import Platform

    return Platform.load(platform)


def _cost(cost: Any, platform: Platform) -> tuple[Any, str]:
    """A cost model (:func:`costmodel.as_cost_model`) and the name the tables give it."""
    from hetsim.costmodel.base import as_cost_model

    if cost is None or isinstance(cost, str | os.PathLike):
        name = "roofline" if cost is None else str(cost)
    else:
        name = str(getattr(cost, "name", type(cost).__name__))
    return as_cost_model(cost, platform=platform), name


def validate(
    graph: Graph,
    platform: Platform | str,
    scheduler_or_plan: str | Any,
    cost: Any = None,
    *,
    backend: str = "torch",
    warmup: int = 3,
    repeats: int = 10,
    requests: int | None = None,
    device_map: Mapping[str, str] | None = None,
    model: RelaxModel | None = None,
    scheduler_args: Mapping[str, Any] | None = None,
    seed: int | None = None,
) -> ValidationResult:
    """Plan, simulate and execute ``graph`` on ``platform``; compare.

    Parameters
    ----------
    graph
        A zoo graph (or any graph with ``model=``).
    platform
        Platform, preset name or TOML path.
    scheduler_or_plan
        A scheduler name (``schedulers.get``), a scheduler instance, or a
        :class:`~sim.plan.Plan` for ``graph``.
    cost
        The cost model the scheduler plans with and the simulator prices with: a
        model, a spec (``"roofline"``, a profile folder, ``"DIR:KIND"``) or None
        (roofline).
    backend, warmup, repeats, requests, device_map, model, seed
        As :func:`runtime.execute` (``requests`` also for the simulation).
    scheduler_args
        Hyper-parameters for a scheduler given by name.

    Returns
    -------
    ValidationResult
    """
    from hetsim.runtime.executor import execute

    platform = _platform(platform)
    cost_model, cost_name = _cost(cost, platform)
    run = _plan_run(graph, platform, scheduler_or_plan, cost_model, scheduler_args,
                    requests=requests, record=True, seed=seed)  # fmt: skip
    result = execute(run.graph, run.plan, platform, backend=backend, warmup=warmup, repeats=repeats, seed=seed,
                     device_map=device_map, cost=cost_model, model=model, requests=requests)  # fmt: skip
    return ValidationResult(run.graph, run.plan, run.result, result, cost_name)


def _plan_run(graph: Graph, platform: Platform, how: Any, cost: Any, args: Mapping[str, Any] | None,
              **options: Any) -> PlanRun:  # fmt: skip
    """A plan given, or made by a scheduler (name or instance), through the one path
    (:meth:`Scheduler.run <schedulers.base.Scheduler.run>`, :func:`schedulers.run_plan`)."""
    from hetsim import schedulers
    from hetsim.sim.plan import Plan

    if isinstance(how, Plan):
        return schedulers.run_plan(graph, platform, how, cost, **options)
    sched = schedulers.get(how, **dict(args or {})) if isinstance(how, str) else how
    return sched.run(graph, platform, cost, **options)


# ------------------------------------------------------------------ many plans
def validate_all(
    models: Sequence[str | Graph],
    platform: Platform | str = "cpu2",
    schedulers: Sequence[str] | None = None,
    cost: Any = None,
    *,
    backend: str = "torch",
    warmup: int = 3,
    repeats: int = 10,
    batch: int = 1,
    model_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    device_map: Mapping[str, str] | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    in_context: str | os.PathLike[str] | None = None,
    calibrate: str | None = None,
) -> pd.DataFrame:
    """Validate every applicable scheduler on each model; one row per (model, scheduler).

    Parameters
    ----------
    models
        Zoo model names (imported at ``batch``, ``op`` granularity, with
        ``model_kwargs[name]``) or graphs.
    platform
        Platform, preset name or TOML path.
    schedulers
        Scheduler names; default every registered one that applies (the others get a
        ``skipped`` row with the reason).
    cost
        As :func:`validate` (one model for all).
    backend, warmup, repeats, device_map
        As :func:`runtime.execute`.
    out
        Folder for ``validation.csv``, ``ranking.csv`` and each pair's traces
        (``MODEL/SCHEDULER/{sim,run}_trace.json``).
    progress
        Called with a line of text per (model, scheduler).
    in_context
        A folder for an in-context profile measured *during* the validation: each
        round also runs every graph once node by node on one worker
        (:class:`~runtime.context_profile.ContextProfiler`), the op times of those
        runs are written there, and the plans are simulated with that profile
        (``cost`` then only plans them, and prices the dynamic policy's run-time
        decisions). The op times and the makespans are then measured under the same
        machine conditions, which a profile taken minutes earlier is not (a shared
        VM drifts by +-10 % over minutes). A folder that already holds signatures
        keeps them.
    calibrate
        A zoo model name (e.g. ``"squeezenet1_1"``; pick one that is not validated):
        each round also runs it on the first two devices of ``platform``, once on
        one worker and once with every edge crossing
        (:class:`~runtime.handoff.HostCalibration`), and each model's plans are
        simulated on ``platform`` with the handoff (``Device.handoff_s``) and read
        bandwidth (``Device.handoff_bandwidth_bytes_per_s``) measured in its
        rounds: the host costs of the same minutes, which on a shared VM vary
        2-3x with the other tenants' load. ``df.attrs["calibration"]`` (and
        ``calibration.csv`` under ``out``) holds them per model.

    Notes
    -----
    The plans of one model are prepared together and their timed runs interleaved
    (each round runs every plan once), so that slow drifts of the machine's speed
    (other tenants, clock changes) affect all plans alike: the ranking compares
    like with like.

    Returns
    -------
    pandas.DataFrame
        :data:`VALIDATION_COLUMNS` (plus busy-time columns); ``simulated_rank`` /
        ``measured_rank`` rank the ok schedulers of a model (1 = fastest) and
        ``kendall_tau`` / ``kendall_p`` say how well the two rankings agree
        (``df.attrs["ranking"]`` holds :func:`ranking`'s table).
        ``relative_error_pct`` is the error of the makespan *relative to the
        model's all-cpu plan* (simulated ratio vs measured ratio): a uniform change
        of the machine's speed since the profile was taken cancels out of it, what
        remains is the simulator's error on parallel execution.
    """
    import pandas as pd

    from hetsim import schedulers as sched_mod
    from hetsim.runtime.backends.tvm_backend import import_model
    from hetsim.runtime.executor import load_model

    platform = _platform(platform)
    cost_model, cost_name = _cost(cost, platform)
    rows: list[dict[str, Any]] = []
    out_dir = Path(out) if out is not None else None
    profiler = None
    if in_context is not None:
        profiler = ContextProfiler(in_context, backend=backend)
    calibration = None
    if calibrate is not None:
        cal_model = import_model(calibrate, batch=batch)
        calibration = HostCalibration(cal_model.graph, cal_model, platform, backend=backend, warmup=warmup)
    cal_rows: list[dict[str, Any]] = []
    try:
        for m in models:
            if isinstance(m, str):  # one import gives the graph and its weights
                relax_model = import_model(m, batch=batch, **dict((model_kwargs or {}).get(m, {})))
                graph = relax_model.graph
            else:
                graph, relax_model = m, load_model(m)
            mname = str(graph.meta.get("model") or graph.name)
            names = list(schedulers) if schedulers is not None else sched_mod.names()
            rows += _validate_model(graph, relax_model, mname, names, platform, cost_model, cost_name,
                                    backend=backend, warmup=warmup, repeats=repeats, device_map=device_map,
                                    out_dir=out_dir, progress=progress, profiler=profiler,
                                    calibration=calibration, cal_rows=cal_rows)
    finally:
        if calibration is not None:
            calibration.close()
    table = pd.DataFrame(rows)
    rank = ranking(table)
    table = _with_ranks(table, rank)
    table.attrs["ranking"] = rank
    if calibration is not None:
        table.attrs["calibration"] = pd.DataFrame(cal_rows)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        _write_csv(table, out_dir / "validation.csv")
        _write_csv(rank, out_dir / "ranking.csv")
        if calibration is not None:
            _write_csv(table.attrs["calibration"], out_dir / "calibration.csv")
    return table


def _validate_model(
    graph: Graph, relax_model: RelaxModel, mname: str, names: Sequence[str], platform: Platform,
    cost: Any, cost_name: str, *, backend: str, warmup: int, repeats: int,
    device_map: Mapping[str, str] | None, out_dir: Path | None, progress: Callable[[str], None] | None,
    profiler: ContextProfiler | None = None, calibration: HostCalibration | None = None,
    cal_rows: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Plan and simulate with every scheduler, prepare every execution, then run them
    interleaved (round ``r`` runs each plan once, starting at plan ``r``), so that
    every plan is measured under the same machine conditions. With a ``profiler``,
    each round also runs every planned graph on one worker, and the plans are
    simulated afterwards with the op times so measured; with a ``calibration``,
    each round also runs its two executions, and the plans are simulated on the
    platform with the host costs so measured."""
    from hetsim import schedulers as sched_mod
    from hetsim.runtime.executor import Execution
    from hetsim.runtime.executor_setup import wire
    from hetsim.sim.engine import SimulationError
    from hetsim.sim.plan import PlanError

    rows: dict[str, dict[str, Any]] = {}
    late = profiler is not None or calibration is not None  # simulated after the runs, with what they measured
    live: list[tuple[str, PlanRun, Execution]] = []
    profiling: list[tuple[str, Graph, Execution]] = []
    try:
        for name in names:
            row: dict[str, Any] = {"model": mname, "scheduler": name, "platform": platform.name,
                                   "backend": backend, "cost": cost_name}
            rows[name] = row
            sched = sched_mod.get(name)
            reason = sched.why_not(graph, platform)
            try:
                if reason is not None:
                    raise sched_mod.SchedulerError(reason)
                run = sched.run(graph, platform, cost, simulate=not late, record=True)
            except sched_mod.SchedulerError as e:
                row.update(status="skipped", note=str(e))
                _say(progress, f"{mname} {name}: skipped ({e})")
                continue
            except (PlanError, SimulationError) as e:
                row.update(status="failed", note=str(e))
                _say(progress, f"{mname} {name}: FAILED: {e}")
                continue
            try:
                ex = Execution(run.graph, run.plan, platform, wire(run.graph, relax_model), backend=backend,
                               cost=cost, model=relax_model, device_map=device_map)  # fmt: skip
                live.append((name, run, ex))
                ex.run(warmup, timed=False)
            except (ExecutionError, BackendError) as e:
                if live and live[-1][0] == name:
                    live.pop()
                row.update(status="failed", note=str(e))
                _say(progress, f"{mname} {name}: FAILED: {e}")
        if profiler is not None:
            for g in {id(item[1].graph): item[1].graph for item in live}.values():
                profiling.append(("(in-context profile)", g, profiler.add(g, relax_model)))
        if calibration is not None:
            since = len(calibration.crossing.runs)
            profiling += [("(host calibration)", calibration.graph, ex) for ex in calibration.executions]
        for r in range(repeats):
            both: list[tuple[Any, ...]] = [*live, *profiling]
            for item in [both[(i + r) % len(both)] for i in range(len(both))]:
                try:
                    item[-1].run(1)
                except (ExecutionError, BackendError) as e:
                    if item in profiling:
                        raise
                    live.remove(item)
                    rows[item[0]].update(status="failed", note=str(e))
                    _say(progress, f"{mname} {item[0]}: FAILED: {e}")
        if calibration is not None and live:
            res = calibration.result(since)
            platform = calibration.apply(platform, res)
            if cal_rows is not None:
                cal_rows.append({"model": mname, "calibration": calibration.graph.name,
                                 **{k: v for k, v in res.items() if k != "extra_s"}})
            _say(progress, f"{mname}: host calibration on {calibration.graph.name}: handoff "
                           f"{res['handoff_s'] * 1e6:.1f} us, read {res['handoff_bandwidth_bytes_per_s'] / 1e9:.2f} GB/s")
        if profiler is not None:
            from hetsim import costmodel

            cost = costmodel.from_spec(str(profiler.write()), platform=platform)
            cost_name = f"in-context {profiler.path} (planned with {cost_name})"
        for name, run, ex in live:
            if late:  # with what the rounds measured: the calibrated platform, the in-context profile
                run = run.simulate(platform=platform, cost=cost, record=True)
            res = ValidationResult(run.graph, run.plan, run.result, ex.result(), cost_name)
            rows[name] = {**res.row(), "cost": cost_name}
            if out_dir is not None:
                res.write(out_dir / mname / name)
            _say(progress, f"{mname} {name}: simulated {res.simulated_s * 1e3:.2f} ms, measured "
                           f"{res.measured_s * 1e3:.2f} ms, error {res.error_pct:+.1f}%")
    finally:
        for *_, ex in live:
            ex.close()
        if profiler is not None:
            profiler.close()
    return list(rows.values())


def _say(progress: Callable[[str], None] | None, text: str) -> None:
    if progress is not None:
        progress(text)


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    frame.to_csv(tmp, index=False)
    os.replace(tmp, path)


def ranking(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: Kendall's tau between the simulated and measured makespans of its ok
    schedulers, its p-value, how many there are, the best by each, and the fraction
    of scheduler pairs that the measurements resolve (makespans further apart than
    the p10-p90 spreads) which the simulator orders the same way."""
    import pandas as pd
    from scipy.stats import kendalltau

    out = []
    if "status" not in table:
        return pd.DataFrame(columns=["model", "kendall_tau", "kendall_p", "n", "best_simulated",
                                     "best_measured", "resolved_pairs", "resolved_agree"])
    for model, grp in table[table["status"] == "ok"].groupby("model", sort=False):
        sim, meas = grp["simulated_s"].to_numpy(float), grp["measured_s"].to_numpy(float)
        lo, hi = grp["measured_p10_s"].to_numpy(float), grp["measured_p90_s"].to_numpy(float)
        tau, p = (kendalltau(sim, meas) if len(grp) >= 2 else (math.nan, math.nan))
        resolved = agree = 0
        for i in range(len(grp)):
            for j in range(i + 1, len(grp)):
                if hi[i] < lo[j] or hi[j] < lo[i]:
                    resolved += 1
                    agree += (sim[i] - sim[j]) * (meas[i] - meas[j]) > 0
        names = grp["scheduler"].to_numpy()
        out.append({"model": model, "kendall_tau": float(tau), "kendall_p": float(p), "n": len(grp),
                    "best_simulated": names[int(np.argmin(sim))], "best_measured": names[int(np.argmin(meas))],
                    "resolved_pairs": resolved, "resolved_agree": agree / resolved if resolved else math.nan})
    return pd.DataFrame(out)


def _with_ranks(table: pd.DataFrame, rank: pd.DataFrame) -> pd.DataFrame:
    import pandas as pd

    table = table.copy()
    for col in VALIDATION_COLUMNS:
        if col not in table:
            table[col] = "" if col in ("note", "status") else math.nan
    ok = table["status"] == "ok"
    for src, dst in (("simulated_s", "simulated_rank"), ("measured_s", "measured_rank")):
        table.loc[ok, dst] = table[ok].groupby("model")[src].rank(method="min")
    base = table[ok & (table["scheduler"] == BASELINE)].set_index("model")
    if len(base):
        sim_ratio = table["simulated_s"] / table["model"].map(base["simulated_s"])
        run_ratio = table["measured_s"] / table["model"].map(base["measured_s"])
        table.loc[ok, "relative_error_pct"] = (100.0 * (sim_ratio - run_ratio) / run_ratio)[ok]
    taus = rank.set_index("model") if len(rank) else pd.DataFrame(columns=["kendall_tau", "kendall_p"])
    table["kendall_tau"] = table["model"].map(taus["kendall_tau"]) if len(rank) else math.nan
    table["kendall_p"] = table["model"].map(taus["kendall_p"]) if len(rank) else math.nan
    extra = [c for c in table.columns if c not in VALIDATION_COLUMNS]
    return table[VALIDATION_COLUMNS + extra].reset_index(drop=True)


def format_table(table: pd.DataFrame) -> str:
    """The :func:`validate_all` table as aligned text (ms and %), then the ranking."""
    lines = [f"{'model':<14}{'scheduler':<20}{'simulated ms':>13}{'measured ms':>13}{'p10-p90 ms':>17}"
             f"{'error':>9}{'rel.err':>9}  ranks s/m"]
    for r in table.itertuples(index=False):
        if r.status != "ok":
            lines.append(f"{r.model:<14}{r.scheduler:<20}({r.status}: {str(r.note)[:90]})")
            continue
        lines.append(
            f"{r.model:<14}{r.scheduler:<20}{r.simulated_s * 1e3:>13.3f}{r.measured_s * 1e3:>13.3f}"
            f"{f'{r.measured_p10_s * 1e3:.2f}-{r.measured_p90_s * 1e3:.2f}':>17}{r.error_pct:>+8.1f}%"
            f"{_pct(r.relative_error_pct):>9}  {int(r.simulated_rank)}/{int(r.measured_rank)}"
        )
    rank = table.attrs.get("ranking")
    if rank is not None and len(rank):
        lines.append("")
        for r in rank.itertuples(index=False):
            res = (f", resolved pairs ordered alike {r.resolved_agree:.0%} of {r.resolved_pairs}"
                   if r.resolved_pairs else "")
            lines.append(f"{r.model}: Kendall tau {r.kendall_tau:+.3f} (p={r.kendall_p:.3g}, {r.n} schedulers); "
                         f"best simulated {r.best_simulated}, best measured {r.best_measured}{res}")
    ok = table[table["status"] == "ok"]
    if len(ok):
        err = ok["error_pct"].abs()
        lines.append(f"|error|: mean {err.mean():.1f}%, max {err.max():.1f}% over {len(ok)} plans; "
                     f"within 10%: {int((err <= 10).sum())}/{len(ok)}")
        rel = ok["relative_error_pct"].dropna().abs()
        if len(rel):
            lines.append(f"|rel.err| (vs each model's {BASELINE} plan): mean {rel.mean():.1f}%, "
                         f"max {rel.max():.1f}%; within 10%: {int((rel <= 10).sum())}/{len(rel)}")
    return "\n".join(lines)


def _pct(v: float) -> str:
    return "-" if v != v else f"{v:+.1f}%"
