"""Validation: simulate a plan, execute it on the real machine, compare.

:func:`validate` plans a graph with a scheduler (or takes a plan), simulates it,
executes it (:func:`runtime.execute`) and returns both results side by side:
makespan error, the measured p10-p90 band and whether the simulation falls inside
it, per-device busy time, and the two traces (which, opened side by side in
Perfetto, show where the simulator is wrong). Without a cost model the simulator's
inputs (op times, host costs, the two workers' memory contention) are measured in
the validation's own rounds (:mod:`runtime.validation.inputs`); with one, that model
and the platform's host costs price the plan. :func:`validate_all` does that for every applicable scheduler on a set of
models and tabulates the errors, and whether the simulator ranks the schedulers in
the order the measurements do (Kendall's tau per model): ranking correctly is what
users of the simulator rely on.

:func:`measure_overhead` times the executor's own per-op cost (a chain of
one-element ops); :func:`calibrate_dispatch` writes it into a profile's
``dispatch.json`` so that the simulator's per-op host dispatch is what the
executor really spends; :func:`profile_in_context` measures operator times inside
the running model (see :mod:`runtime.validation.context_profile`); :func:`measure_handoff`
measures how long an op waits for an input from another worker beyond one from
its own (``Device.handoff_s`` in the simulator) and :func:`measure_read_bandwidth`
how much longer it runs reading it (``Device.handoff_bandwidth_bytes_per_s``; see
:mod:`runtime.validation.handoff`).

Examples
--------
>>> from hetsim.graphs import zoo
>>> v = validate(zoo.load("googlenet"), "cpu2", "by-path")                     # doctest: +SKIP
>>> v.inputs["op times"]                                                        # doctest: +SKIP
'measured in this run: each graph node by node on one worker, once per round, ...'
>>> v = validate(zoo.load("googlenet"), "cpu2", "heft", "profiles/cpu2-torch")   # doctest: +SKIP
>>> print(v)                                                                    # doctest: +SKIP
>>> v.write("out/googlenet-heft")                                               # doctest: +SKIP
>>> table = validate_all(["googlenet", "resnet18"], "cpu2", cost="profiles/cpu2-torch",
...                      out="out/validation")                                  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim import costmodel
from hetsim import schedulers as sched_mod
from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.platform import Platform as _Platform
from hetsim.runtime.backends.base import BackendError
from hetsim.runtime.backends.tvm_backend import import_model
from hetsim.runtime.calibration import load_calibrated
from hetsim.runtime.calibration.cuda_bench import cuda_device
from hetsim.runtime.executor.execute import Execution, execute
from hetsim.runtime.executor.setup import ExecutionError, load_model, wire
from hetsim.runtime.validation.context_profile import (
    ContextProfiler,
    calibrate_dispatch,
    measure_overhead,
    profile_in_context,
)
from hetsim.runtime.validation.cuda_host import (
    host_model,
    plan_launch,
    with_launch,
)
from hetsim.runtime.validation.handoff import (
    HostCalibration,
    handoff_gaps,
    measure_handoff,
    measure_read_bandwidth,
)
from hetsim.runtime.validation.inputs import InRunInputs, file_inputs, why_not_measured
from hetsim.runtime.validation.options import ValidationOptions
from hetsim.runtime.validation.replay import simulate_as_run
from hetsim.runtime.validation.result import ValidationResult
from hetsim.runtime.validation.rounds import (
    execution_key,
    pool_runs,
    pool_same_plans,
    round_orders,
)
from hetsim.runtime.validation.table import (
    VALIDATION_COLUMNS,
    format_table,
    ranking,
    summary,
    with_ranks,
)
from hetsim.sim.engine.simulator import SimulationError
from hetsim.sim.plan import Plan, PlanError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.tvm_backend import RelaxModel
    from hetsim.runtime.executor.execute import RunResult
    from hetsim.schedulers.run import PlanRun

__all__ = [
    "VALIDATION_COLUMNS",
    "ContextProfiler",
    "HostCalibration",
    "ValidationOptions",
    "ValidationResult",
    "calibrate_dispatch",
    "format_table",
    "handoff_gaps",
    "measure_handoff",
    "measure_overhead",
    "measure_read_bandwidth",
    "profile_in_context",
    "ranking",
    "summary",
    "validate",
    "validate_all",
]



def _platform(platform: Platform | str) -> Platform:
    """The platform, its calibration checked (:func:`runtime.calibration.check_calibration`):
    figures of another machine or another GPU are refused by name (a validation here
    would set this machine's measurements against them), an older format's warned of."""
    plat = _Platform.load(platform)
    gpu = None
    if plat.devices_of_kind("gpu") and (plat.calibration or {}).get("machine"):
        dev, _ = cuda_device(0)
        gpu = dev.name if dev is not None else "no GPU"
    return load_calibrated(plat, gpu=gpu, refuse=True)


def _cost(cost: Any, platform: Platform) -> tuple[Any, str]:
    """A cost model (:func:`costmodel.as_cost_model`) and the name the tables give it."""
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
    options: ValidationOptions | None = None,
    *,
    model: RelaxModel | None = None,
    scheduler_args: Mapping[str, Any] | None = None,
    calibrate: str | None = None,
    folder: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    **option_keywords: Any,
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
        None (default): measure the simulator's inputs in this run
        (:class:`~runtime.validation.inputs.InRunInputs`: op times in context, the
        host costs and the two workers' contention on a calibration model, in
        rounds interleaved with the plan's runs; the scheduler plans with a short
        in-context profile taken first). Needs a platform of this machine's
        devices: on one with GPUs, each device is profiled alone and the
        calibration measures the copies and the two workers' slowdown
        (:class:`~runtime.validation.link_calibration.LinkCalibration`); on one with GPUs this
        machine lacks, None is the roofline. Otherwise the cost model the scheduler
        plans with and the simulator prices with: a model, or a spec
        (``"roofline"``, a profile folder, ``"DIR:KIND"``), with the platform's
        host costs.
    options
        How each plan runs and is measured (:class:`~runtime.validation.options.ValidationOptions`:
        ``backend``, ``warmup``, ``repeats``, ``requests``, ``device_map``, ``seed``,
        ``replicas``, ``launch``, ``statistic``, ``trace``); each may also be given as a
        keyword (``repeats=5``), which sets it in ``options``.
    model
        As :func:`runtime.execute`.
    scheduler_args
        Hyper-parameters for a scheduler given by name.
    calibrate
        With ``cost=None``: the zoo model of the host calibration (default
        ``squeezenet1_1``; ``"none"``: the platform's host costs).
    folder
        With ``cost=None``: where the measured profiles go (``plan-profile/``,
        ``profile/``; default a temporary folder, removed afterwards).
    progress
        Called with a line of text as the measurement goes.
    The default ``statistic`` is ``"mean"`` where the simulation is priced with mean op
    times measured in the run on a CUDA platform (they add up to a mean makespan),
    ``"median"`` otherwise.

    A dynamic plan is simulated with the placements and order its measured run
    made (:func:`~runtime.validation.replay.recorded_plan`). Without ``cost`` on a
    platform with CUDA GPUs of this machine, a fresh calibration
    (:func:`runtime.calibrate`) gives the simulator the host keys first.

    Returns
    -------
    ValidationResult
        ``inputs`` says which inputs were measured in the run and which came from
        a file.
    """
    opts = ValidationOptions.of(options, option_keywords, "validate")
    backend, warmup, repeats, requests, seed = opts.backend, opts.warmup, opts.repeats, opts.requests, opts.seed
    device_map, replicas, stat = opts.device_map, opts.replicas, opts.statistic
    platform = _platform(platform)
    if cost is None and why_not_measured(platform) is None:
        platform, host = host_model(platform, device_map, folder, progress)
        relax = model or load_model(graph)
        how = (sched_mod.get(scheduler_or_plan, **dict(scheduler_args or {}))
               if isinstance(scheduler_or_plan, str) else scheduler_or_plan)
        label = str(getattr(how, "name", None) or how.meta.get("scheduler", "plan"))
        inputs = InRunInputs([(graph, relax)], platform, folder, backend=backend, warmup=warmup,
                             calibrate=calibrate, device_map=device_map)
        results: list[ValidationResult] = []
        cal_rows: list[dict[str, Any]] = []
        decisions: dict[str, float] = {}
        try:
            rows = _validate_model(graph, relax, str(graph.meta.get("model") or graph.name), [(label, how)],
                                   platform, inputs.plan_cost, "in-context, measured in this run",
                                   opts.with_keywords({"statistic": stat or ("mean" if host else "median")},
                                                      "validate"),
                                   out_dir=None, progress=progress, profiler=inputs.profiler,
                                   calibration=inputs.calibration, cal_rows=cal_rows, results=results,
                                   decisions=decisions, host_model=host is not None)
            if not results:
                raise ExecutionError(f"{graph.name} {label}: {rows[0]['status']}: {rows[0].get('note', '')}")
            res = results[0]
            res.inputs = inputs.describe(platform, cal_rows[0] if cal_rows else None, rounds=repeats,
                                         decisions=decisions, replicas=replicas)
            if host is not None:
                res.inputs["host model"] = host
            return res
        finally:
            inputs.close()
    cost_model, cost_name = _cost(cost, platform)
    run = _plan_run(graph, platform, scheduler_or_plan, cost_model, scheduler_args,
                    requests=requests, record=True, seed=seed)  # fmt: skip
    mode, note = plan_launch(run.plan, platform, opts.launch, backend=backend)
    result = execute(run.graph, run.plan, platform, opts.execution(mode), cost=cost_model, model=model)
    if note:
        result.notes.append(note)
    run, how = simulate_as_run(run, result, with_launch(platform, mode), cost_model, requests=requests, seed=seed,
                       again=mode is not None)
    if how:
        result.notes.append(how)
    inputs = file_inputs(platform, cost_name, replicas=replicas, rounds=repeats)
    if cost is None:
        inputs["op times"] += f" ({why_not_measured(platform)})"
    return ValidationResult(run.graph, run.plan, run.result, result, cost_name, inputs, statistic=stat or "median",
                            launch=mode)



def _plan_run(graph: Graph, platform: Platform, how: Any, cost: Any, args: Mapping[str, Any] | None,
              **options: Any) -> PlanRun:  # fmt: skip
    """A plan given, or made by a scheduler (name or instance), through the one path
    (:meth:`Scheduler.run <schedulers.base.Scheduler.run>`, :func:`schedulers.run_plan`)."""
    if isinstance(how, Plan):
        return sched_mod.run_plan(graph, platform, how, cost, **options)
    sched = sched_mod.get(how, **dict(args or {})) if isinstance(how, str) else how
    return sched.run(graph, platform, cost, **options)


# ------------------------------------------------------------------ many plans
def validate_all(
    models: Sequence[str | Graph],
    platform: Platform | str = "cpu2",
    schedulers: Sequence[str | tuple[str, Any]] | None = None,
    cost: Any = None,
    options: ValidationOptions | None = None,
    *,
    batch: int = 1,
    model_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    out: str | os.PathLike[str] | None = None,
    progress: Callable[[str], None] | None = None,
    in_context: str | os.PathLike[str] | None = None,
    calibrate: str | None = None,
    **option_keywords: Any,
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
        Scheduler names, or ``(label, how)`` with ``how`` a scheduler or a
        :class:`~sim.plan.Plan`; default every registered one that applies (the
        others get a ``skipped`` row with the reason). Plans that are one execution
        (the same graph, order and placement, no run-time policy) are each measured,
        and their timed runs pooled: their rows agree (``note``: "one execution with
        ..."), as their simulations do, instead of being ranked by noise.
    cost
        As :func:`validate` (one model for all): None (with neither ``in_context``
        nor ``calibrate``) measures the op times and host costs in the run's own
        rounds (:class:`~runtime.validation.inputs.InRunInputs`; under ``out``:
        ``plan-profile/``, ``profile/``, ``calibration.csv``); ``df.attrs["inputs"]``
        says which inputs were measured and which came from a file.
    options
        As :func:`validate` (:class:`~runtime.validation.options.ValidationOptions`, each
        option also a keyword); the ``launch`` and ``statistic`` columns say what each row
        used, and with ``trace`` a traced run of each plan follows the rounds.
    out
        Folder for ``validation.csv``, ``ranking.csv`` and each pair's traces
        (``MODEL/SCHEDULER/{sim,run}_trace.json``).
    progress
        Called with a line of text per (model, scheduler).
    in_context
        A folder for an in-context profile measured *during* the validation: each
        round also runs every graph once node by node on one worker
        (:class:`~runtime.validation.context_profile.ContextProfiler`), the op times of those
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
        (:class:`~runtime.validation.handoff.HostCalibration`), and each model's plans are
        simulated on ``platform`` with the handoff (``Device.handoff_s``) and read
        bandwidth (``Device.handoff_bandwidth_bytes_per_s``) measured in its
        rounds: the host costs of the same minutes, which on a shared VM vary
        2-3x with the other tenants' load. ``df.attrs["calibration"]`` (and
        ``calibration.csv`` under ``out``) holds them per model.

    Notes
    -----
    The plans of one model are prepared together and their timed runs interleaved
    (each round runs every execution of every plan once), so that slow drifts of
    the machine's speed (other tenants, clock changes) affect all plans alike: the
    ranking compares like with like. Each round runs them in a new order
    (:func:`~runtime.validation.rounds.round_orders`), so that no plan always follows
    the same one.

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

    # looked up when called: tests replace it on hetsim.runtime.executor.execute
    from hetsim.runtime.executor.execute import load_model

    opts = ValidationOptions.of(options, option_keywords, "validate_all")
    backend, warmup, repeats, device_map = opts.backend, opts.warmup, opts.repeats, opts.device_map
    platform = _platform(platform)
    rows: list[dict[str, Any]] = []
    out_dir = Path(out) if out is not None else None
    items = []
    for m in models:
        if isinstance(m, str):  # one import gives the graph and its weights
            relax_model = import_model(m, batch=batch, **dict((model_kwargs or {}).get(m, {})))
            items.append((relax_model.graph, relax_model))
        else:
            items.append((m, load_model(m)))
    measured = None
    profiler = calibration = None
    host: str | None = None
    if cost is None and why_not_measured(platform) is None:
        platform, host = host_model(platform, device_map, out_dir, progress)
        _say(progress, "measuring the op times to plan with (in context, before the rounds)")
        measured = InRunInputs(items, platform, out_dir, backend=backend, warmup=warmup, batch=batch,
                               calibrate=calibrate, profile=in_context, device_map=device_map)
        cost_model, cost_name = measured.plan_cost, "in-context, measured in this run"
        profiler, calibration = measured.profiler, measured.calibration
    else:
        cost_model, cost_name = _cost(cost, platform)
        if in_context is not None:
            profiler = ContextProfiler(in_context, backend=backend)
        if calibrate is not None:
            cal_model = import_model(calibrate, batch=batch)
            calibration = HostCalibration(cal_model.graph, cal_model, platform, backend=backend, warmup=warmup)
    cal_rows: list[dict[str, Any]] = []
    decisions: dict[str, float] | None = {} if measured is not None else None
    try:
        for graph, relax_model in items:
            mname = str(graph.meta.get("model") or graph.name)
            names = list(schedulers) if schedulers is not None else sched_mod.names()
            statistic = opts.statistic or ("mean" if host else "median")
            rows += _validate_model(graph, relax_model, mname, names, platform, cost_model, cost_name,
                                    opts.with_keywords({"statistic": statistic}, "validate_all"),
                                    out_dir=out_dir, progress=progress, profiler=profiler,
                                    calibration=calibration, cal_rows=cal_rows, decisions=decisions,
                                    host_model=host is not None)
    finally:
        if measured is not None:
            measured.close()
        elif calibration is not None:
            calibration.close()
    table = pd.DataFrame(rows)
    if measured is not None:
        table.attrs["inputs"] = measured.describe(platform, cal_rows[0] if len(cal_rows) == 1 else None,
                                                  rounds=repeats, decisions=decisions, replicas=opts.replicas)
        if len(cal_rows) > 1:
            table.attrs["inputs"]["host costs"] = "measured in this run, per model (below)"
        if host is not None:
            table.attrs["inputs"]["host model"] = host
    else:
        table.attrs["inputs"] = file_inputs(platform, cost_name, replicas=opts.replicas, rounds=repeats)
        if in_context is not None:
            table.attrs["inputs"]["op times"] = f"measured in this run ({in_context}); plans made with {cost_name}"
        if calibration is not None:
            table.attrs["inputs"]["host costs"] = f"measured in this run on {calibrate}, per model (below)"
    rank = ranking(table)
    table = with_ranks(table, rank)
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
    graph: Graph, relax_model: RelaxModel, mname: str, names: Sequence[str | tuple[str, Any]], platform: Platform,
    cost: Any, cost_name: str, options: ValidationOptions, *, out_dir: Path | None,
    progress: Callable[[str], None] | None, profiler: ContextProfiler | None = None,
    calibration: HostCalibration | None = None, cal_rows: list[dict[str, Any]] | None = None,
    results: list[ValidationResult] | None = None, decisions: dict[str, float] | None = None,
    host_model: bool = False,
) -> list[dict[str, Any]]:
    """Plan and simulate with every scheduler, prepare every execution, then run them
    interleaved (each round runs each execution once, in the order of
    :func:`round_orders`), so that every plan is measured under the same machine
    conditions. With a ``profiler``, each round also runs every planned graph on
    one worker, and the plans are simulated afterwards with the op times so
    measured; with a ``calibration``,
    each round also runs its two executions, and the plans are simulated on the
    platform with the host costs so measured. ``names``: scheduler names, or
    ``(label, how)`` with ``how`` a scheduler (name or instance) or a plan;
    ``results`` collects each plan's :class:`ValidationResult`. With ``decisions``
    (a dict, when the simulator's inputs are measured in the run), a dynamic plan is
    simulated with the time per run-time placement its own timed runs measured
    (:attr:`RunResult.decision_s <runtime.executor.RunResult>`), recorded there
    under ``"<model> <plan>"`` (each dynamic plan of a model its own), instead of
    the platform's ``decision_s``. Each plan is measured as ``replicas`` executions,
    each built apart, and their timed runs pooled (:func:`pool_runs`). Each plan runs
    and is simulated in its launch mode (:func:`plan_launch`), a dynamic one with
    the decisions its run made (:func:`~runtime.validation.replay.simulate_as_run`); ``statistic`` of the measured
    makespans is set beside the simulation; with ``host_model`` (the platform holds
    a fresh calibration's host keys) a link calibration adds no memory domain.
    ``options`` says how (:class:`~runtime.validation.options.ValidationOptions`, its
    ``statistic`` set)."""
    backend, warmup, repeats, requests, seed = (options.backend, options.warmup, options.repeats, options.requests,
                                                options.seed)
    replicas, launch, trace = options.replicas, options.launch, options.trace
    statistic = options.statistic or "median"
    rows: dict[str, dict[str, Any]] = {}
    late = profiler is not None or calibration is not None  # simulated after the runs, with what they measured
    live: list[tuple[str, PlanRun, Execution]] = []
    profiling: list[tuple[str, Graph, Execution]] = []
    same: dict[tuple[Any, ...], list[str]] = {}  # execution key -> the plans that are that execution
    launches: dict[str, tuple[str | None, str]] = {}  # plan -> (launch mode, note)
    try:
        for item in names:
            name, how = item if isinstance(item, tuple) else (item, item)
            row: dict[str, Any] = {"model": mname, "scheduler": name, "platform": platform.name,
                                   "backend": backend, "cost": cost_name}
            rows[name] = row
            try:
                if isinstance(how, Plan):
                    run = sched_mod.run_plan(graph, platform, how, cost, simulate=not late, record=True,
                                             requests=requests, seed=seed)
                else:
                    sched = sched_mod.get(how) if isinstance(how, str) else how
                    reason = sched.why_not(graph, platform)
                    if reason is not None:
                        raise sched_mod.SchedulerError(reason)
                    run = sched.run(graph, platform, cost, simulate=not late, record=True, requests=requests,
                                    seed=seed)
            except sched_mod.SchedulerError as e:
                row.update(status="skipped", note=str(e))
                _say(progress, f"{mname} {name}: skipped ({e})")
                continue
            except (PlanError, SimulationError) as e:
                row.update(status="failed", note=str(e))
                _say(progress, f"{mname} {name}: FAILED: {e}")
                continue
            try:
                launches[name] = plan_launch(run.plan, platform, launch, backend=backend)
                for _ in range(replicas):  # each built apart: its own buffers and threads
                    ex = Execution(run.graph, run.plan, platform, wire(run.graph, relax_model),
                                   options.execution(launches[name][0]), cost=cost, model=relax_model)
                    live.append((name, run, ex))
                    ex.run(warmup, timed=False)
                key = execution_key(run)
                if key is not None:
                    same.setdefault(key, []).append(name)
            except (ExecutionError, BackendError) as e:
                while live and live[-1][0] == name:
                    live.pop()[-1].close()
                row.update(status="failed", note=str(e))
                _say(progress, f"{mname} {name}: FAILED: {e}")
        if profiler is not None:
            for g in {id(item[1].graph): item[1].graph for item in live}.values():
                profiling.append(("(in-context profile)", g, profiler.add(g, relax_model)))
        if calibration is not None:
            since = len(calibration.crossing.runs)
            profiling += [("(host calibration)", calibration.graph, ex) for ex in calibration.executions]
        failed: set[int] = set()
        for items in round_orders([*live, *profiling], repeats):
            for item in items:
                if id(item) in failed:
                    continue
                try:
                    item[-1].run(1)
                except (ExecutionError, BackendError) as e:
                    if item in profiling:
                        raise
                    for other in [it for it in live if it[0] == item[0]]:
                        failed.add(id(other))
                        live.remove(other)
                    rows[item[0]].update(status="failed", note=str(e))
                    _say(progress, f"{mname} {item[0]}: FAILED: {e}")
        if calibration is not None and live:
            res = calibration.result(since)
            platform = calibration.apply(platform, res, **({"contention": False} if host_model else {}))
            if cal_rows is not None:
                cal_rows.append({"model": mname, "calibration": calibration.graph.name,
                                 **{k: v for k, v in res.items() if k != "extra_s"}})
            _say(progress, f"{mname}: host calibration on {calibration.graph.name}: {calibration.describe(res)}")
        if profiler is not None:
            cost = costmodel.from_spec(str(profiler.write()), platform=platform)
            if calibration is not None and live and "second_worker_ratio" in res:  # profiled on the first worker's core
                cost = costmodel.DeviceScaled(cost, {calibration.workers[1]: res["second_worker_ratio"]})
            cost_name = f"in-context {profiler.path} (planned with {cost_name})"
        replica_runs: dict[str, list[RunResult]] = {}
        plan_runs: dict[str, PlanRun] = {}
        for name, run, ex in live:
            replica_runs.setdefault(name, []).append(ex.result())
            plan_runs[name] = run
        traces: dict[str, tuple[list[dict[str, Any]], list[str]]] = {}
        for name, _, ex in live if trace else ():  # a traced run of each plan's first execution
            if name not in traces:
                traces[name] = (ex.trace(), ex.gpu_devices)
        measured = {name: pool_runs(runs) for name, runs in replica_runs.items()}
        for name, (records, gpus) in traces.items():
            measured[name] = measured[name].with_trace(records, gpus)
        notes = pool_same_plans(measured, same.values())
        for name, run in plan_runs.items():
            measured_run, note = measured[name], notes.get(name, "")
            mode, launch_note = launches[name]
            plat = with_launch(platform, mode)  # late: the calibrated platform, the in-context profile
            if late and decisions is not None and run.plan.policy is not None and measured_run.decision_s is not None:
                plat = plat.replace(decision_s=measured_run.decision_s)
                decisions[f"{mname} {name}"] = measured_run.decision_s
            run, how = simulate_as_run(run, measured_run, plat, cost, requests=requests, seed=seed,
                               again=late or mode is not None)
            res = ValidationResult(run.graph, run.plan, run.result, measured_run, cost_name, statistic=statistic,
                                   launch=mode)
            if results is not None:
                results.append(res)
            note = "; ".join(x for x in (note, launch_note, how) if x)
            rows[name] = {**res.row(), "scheduler": name, "cost": cost_name, "note": note}
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
