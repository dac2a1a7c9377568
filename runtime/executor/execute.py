"""Execute a plan on the real CPU and GPU(s), and time it.

:func:`execute` runs a model's graph node by node on the devices a plan names, with
one worker per device stream (CPU worker threads, CUDA streams), each op when its
inputs are ready on its device, in plan priority order, with real copies across
memories -- the simulator's model of the run (see :mod:`runtime.executor.run`),
so that the measured makespan can be set against the simulated one.

* Platform devices map to real ones: ``cpu`` -> ``cpu@{threads}``, the K-th ``gpu``
  -> ``cuda:K`` (``device_map`` overrides). ``cpu2``'s two workers are two threads
  running single-threaded kernels on the two cores. A device this machine lacks is
  reported before anything runs.
* Kernels come from :mod:`runtime.backends` (``torch`` or ``tvm``); the dataflow and
  the real weights come from the model's Relax module, the weights materialised
  once per device before timing.
* A dynamic plan's policy places ops as they become ready, through the same
  :class:`sim.plan.SystemView` interface as in the simulator.
* GPU work is launched as a deployment launches it (``launch``): a static plan on
  the torch backend replays each GPU segment (the ops between cross-device edges,
  :mod:`runtime.executor.segments`) as a CUDA graph captured once per execution
  (``"graph"``, the default there); dynamic plans and the tvm backend launch op by
  op (``"eager"``). Timed runs record no CUDA timing event; ``trace=True`` adds a
  traced run of its own for per-op device times (:attr:`RunResult.trace`).
* The first run is checked: every node's outputs against the same node in a
  single-device run (all nodes in order on the host), and the graph outputs
  against the zoo model's own torch module: a plan executed wrongly raises
  :class:`ExecutionError` (naming the first node that differs) instead of timing
  fast. (The node-by-node check matters: randomly initialised GoogLeNet and
  SqueezeNet give nearly the same logits for any input.)

Examples
--------
>>> from hetsim.graphs import zoo
>>> from hetsim import schedulers
>>> g = zoo.load("squeezenet1_1", image_size=64)                     # doctest: +SKIP
>>> planned = schedulers.get("heft").run(g, "cpu2", simulate=False) # doctest: +SKIP
>>> run = execute(planned.graph, planned.plan, "cpu2", repeats=10)  # doctest: +SKIP
>>> run.median, run.p10, run.p90                                    # doctest: +SKIP
>>> run.to_chrome_trace("run_trace.json")                           # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import as_cost_model
from hetsim.runtime.backends import get_backend
from hetsim.runtime.backends.base import Backend, BackendError
from hetsim.runtime.executor.check import (
    check_run,
    is_oom,
    reference_outputs,
    sequential_reference,
    translate_error,
)
from hetsim.runtime.executor.cuda import CudaRuntime
from hetsim.runtime.executor.options import RUN_COUNTS, ExecutionOptions
from hetsim.runtime.executor.result import UNTRACED, RunResult, median_run
from hetsim.runtime.executor.run import Engine, Failure
from hetsim.runtime.executor.segments import gpu_segments
from hetsim.runtime.executor.setup import (
    CheckedPlan,
    ExecutionError,
    Wiring,
    build_calls,
    check_plan,
    load_model,
    map_devices,
    wire,
)
from hetsim.runtime.executor.view import torch_threads
from hetsim.runtime.executor.view import tune_malloc as _tune_process_malloc
from hetsim.runtime.validation.rounds import pool_runs, round_orders

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.tvm_backend import RelaxModel
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Platform

__all__ = ["ExecutionError", "Execution", "ExecutionOptions", "RunResult", "execute", "execute_wired", "load_model",
           "map_devices"]


# ----------------------------------------------------------------------- execute
def execute(
    graph: Graph,
    plan: Plan,
    platform: Platform | str,
    options: ExecutionOptions | None = None,
    *,
    cost: Any = None,
    model: RelaxModel | None = None,
    **option_keywords: Any,
) -> RunResult:
    """Run ``plan`` for ``graph`` on the real devices of ``platform`` and time it.

    Parameters
    ----------
    graph
        A zoo graph (``graphs.zoo.load``; its model is rebuilt for the weights and
        dataflow), possibly rewritten by ``split_op`` (``tensor-split``), or any graph
        with ``model=``.
    plan
        The plan (static placement, or a dynamic policy).
    platform
        Platform (or preset name / TOML path) whose devices the plan names.
    options
        How the plan runs and is timed (:class:`~runtime.executor.options.ExecutionOptions`:
        ``backend``, ``warmup``, ``repeats``, ``seed``, ``device_map``, ``requests``,
        ``check``, ``rtol``, ``atol``, ``timeout_s``, ``pin_threads``, ``tune_malloc``,
        ``replicas``, ``launch``, ``trace``); each may also be given as a keyword
        (``repeats=5``), which sets it in ``options``.
    cost
        Cost model the dynamic policy predicts with (and that prices the predicted
        peak memory of an out-of-memory report): :func:`costmodel.as_cost_model`; None: each
        device priced by its own source (``Device.cost``), the roofline where it names none.
    model
        The graph's Relax model (:func:`runtime.backends.tvm_backend.import_module`),
        to skip rebuilding it (or for a graph that is not a zoo model).

    Returns
    -------
    RunResult

    Raises
    ------
    sim.PlanError
        For a plan that names nodes the graph lacks, or devices the platform lacks.
    ExecutionError
        For a device this machine does not have or a launch mode the plan cannot
        use (before anything runs), a model that does not explain the graph,
        outputs that differ from the reference, an out-of-memory device (with the
        simulator's predicted peak), a failure (a CUDA error in a captured segment
        names the plan and the segment's first node).
    BackendError
        When the backend cannot run an op (naming it, suggesting the other backend).
    """
    opts = ExecutionOptions.of(options, option_keywords, "execute")
    t_setup = time.perf_counter()
    checked = check_plan(graph, plan, platform, device_map=opts.device_map, launch=opts.launch,
                         backend=opts.backend_name)
    if model is None:
        model = load_model(graph)
    wiring = wire(graph, model)
    return execute_wired(graph, plan, checked.platform, wiring, opts, cost=cost, model=model, checked=checked,
                         setup_start=t_setup)


def execute_wired(
    graph: Graph,
    plan: Plan,
    platform: Platform | str,
    wiring: Wiring,
    options: ExecutionOptions | None = None,
    *,
    cost: Any = None,
    model: RelaxModel | None = None,
    checked: CheckedPlan | None = None,
    cuda_device: Any = None,
    setup_start: float | None = None,
    **option_keywords: Any,
) -> RunResult:
    """:func:`execute` with the dataflow given as a :class:`~runtime.executor.setup.Wiring`
    (for graphs that no Relax model describes, e.g. synthetic ones); ``options``, the
    option keywords, ``cost`` and ``model`` as :func:`execute` (``model`` only gives the
    tvm backend its kernels and the check its torch module), the others as
    :class:`Execution`. The plan is checked once (``checked``, else :func:`check_plan`)
    for all ``replicas``."""
    opts = ExecutionOptions.of(options, option_keywords, "execute_wired")
    if checked is None:
        checked = check_plan(graph, plan, platform, device_map=opts.device_map, launch=opts.launch,
                             backend=opts.backend_name)
    executions: list[Execution] = []
    try:  # each replica built apart (its own buffers and threads), their runs interleaved
        for _ in range(opts.replicas):
            executions.append(Execution(graph, plan, platform, wiring, opts, cost=cost, model=model, checked=checked,
                                        cuda_device=cuda_device, setup_start=setup_start))
            executions[-1].run(opts.warmup, timed=False)
        for order in round_orders(executions, opts.repeats):
            for ex in order:
                ex.run(1)
        result = pool_runs([ex.result() for ex in executions])
        if opts.trace:
            result = result.with_trace(executions[0].trace(), executions[0].gpu_devices)
        return result
    finally:
        for ex in executions:
            ex.close()


class Execution:
    """A plan prepared to run on the real devices: kernels built, weights on their
    devices, references computed, workers started. :func:`execute` is ``run(warmup,
    timed=False)``, ``run(repeats)``, ``result()``; interleaving the runs of several
    executions (``runtime.validation.validate.validate_all``) exposes them to the same machine
    conditions. Close it (or use it as a context manager) to stop its threads.

    Parameters are those of :func:`execute` (the options but ``warmup``, ``repeats``,
    ``replicas`` and ``trace``, which :meth:`run` and :meth:`trace` calls make), with
    the dataflow as a ``wiring`` (:func:`runtime.executor.setup.wire`), and

    checked
        The plan already checked (:func:`~runtime.executor.setup.check_plan`, with
        this ``device_map``, ``backend`` and ``launch``), not checked again.
    cuda_device
        The CUDA calls (:class:`~runtime.executor.device.CudaDevice`; default
        ``torch.cuda``). One with a ``bind(engine)`` method is handed the engine
        before its workers start (and before the segments are captured); one with a
        ``clock`` gives the run its timestamps.
    traced
        Make every run a traced run (GPU ops launched eagerly between CUDA timing
        events, copies timed): the records of profiling and calibration
        executions, which measure per-op and per-copy times, not makespans.
    setup_start
        When the set-up began (``time.perf_counter()``; default: now), for ``setup_s``.

    With ``launch="graph"``, set-up ends with a run of its own in the calling thread,
    before the worker threads start, that captures every segment, one at a time
    (:meth:`~runtime.executor.run.Engine.capture_segments`; counted neither as warm-up
    nor as timed).
    """

    def __init__(
        self,
        graph: Graph,
        plan: Plan,
        platform: Platform | str,
        wiring: Wiring,
        options: ExecutionOptions | None = None,
        *,
        cost: Any = None,
        model: RelaxModel | None = None,
        checked: CheckedPlan | None = None,
        cuda_device: Any = None,
        traced: bool = False,
        setup_start: float | None = None,
        **option_keywords: Any,
    ) -> None:
        counts = sorted(set(option_keywords) & set(RUN_COUNTS))
        if counts:
            raise TypeError(f"Execution() got {counts[0]!r}: the runs are made by run(n) and trace(), "
                            "not set when the execution is built")
        opts = ExecutionOptions.of(options, option_keywords, "Execution")
        backend, requests, launch = opts.backend, opts.requests, opts.launch
        t_setup = setup_start if setup_start is not None else time.perf_counter()
        n_req = int(requests) if requests is not None else plan.microbatches or 1  # requests: checked by opts
        if isinstance(n_req, bool) or not isinstance(n_req, int) or n_req < 1:
            raise ValueError(f"requests must be an int >= 1, got {n_req!r} (the plan's microbatches)")
        if checked is None:
            checked = check_plan(graph, plan, platform, device_map=opts.device_map, launch=launch,
                                 backend=opts.backend_name)
        platform, specs, active = checked.platform, checked.specs, checked.active
        bk = get_backend(backend) if isinstance(backend, str) else backend
        cost = as_cost_model(cost, platform=platform)  # None: each device's own source
        if bk.name == "tvm":
            _register_tvm(bk, graph, model, wiring)
        self.graph, self.plan, self.platform, self.cost, self.backend = graph, plan, platform, cost, bk
        self.specs, self.n_req, self.timeout_s = specs, n_req, opts.timeout_s
        self.check, self.rtol, self.atol = opts.check, opts.rtol, opts.atol
        self.gpu = any(specs[d].kind == "gpu" for d in active)
        #: platform devices of the plan that run on a GPU
        self.gpu_devices = [d for d in active if specs[d].kind == "gpu"]
        self.traced = traced
        self.launch = "eager" if traced and checked.launch else checked.launch
        self.notes: list[str] = []
        if self.gpu and not traced:
            self.notes.append(UNTRACED)
        self.makespans: list[float] = []
        self.runs: list[list[dict[str, Any]]] = []
        self.placements: list[dict[str, str]] = []  # where each node ran, per timed run
        self.decision_times: list[float] = []  # every run-time placement of the timed runs
        self.warmup = 0
        self.check_result: dict[str, Any] | None = None
        self._ref: tuple[list, list | None] | None = None
        self.engine: Any = None
        if opts.tune_malloc:
            _tune_process_malloc()
        threads = {specs[d].cpu_threads() for d in active if specs[d].kind == "cpu"}
        if bk.name == "tvm" and len(threads) > 1:
            self.notes.append(f"TVM's CPU thread pool is process-wide: CPU workers asked for {sorted(threads)} threads")
        threads_before = torch_threads()
        try:
            calls = _prepare(graph, plan, platform, specs, active, wiring, bk)
            inputs = _host_inputs(wiring, bk, graph)
            cuda = segments = None
            if self.gpu:
                cuda = CudaRuntime(bk.name, cuda_device)
            if self.launch == "graph":
                segments = gpu_segments(graph, plan, platform)
            self.engine = Engine(graph, platform, plan, specs, calls, inputs, bk, cost, active=active,
                                 requests=n_req, seed=opts.seed, cuda=cuda, pin=opts.pin_threads, segments=segments,
                                 plan_name=str(plan.meta.get("scheduler") or "plan"))
            if opts.check:
                nodes_ref = sequential_reference(graph, self.engine, wiring, bk, specs)
                module_ref = reference_outputs(graph, model) if model is not None else None
                self._ref = (nodes_ref, module_ref)
            bind = getattr(cuda.dev, "bind", None) if cuda is not None else None
            if bind is not None:  # a device that runs the GPU work itself (a virtual-time one) takes the engine
                bind(self.engine)
            self.engine.start()
        except BaseException as e:
            self.close()
            if isinstance(e, Failure):  # capturing the segments failed
                raise translate_error(e.exc, e.where, graph, platform, plan, cost) from e.exc
            if is_oom(e) and not isinstance(e, ExecutionError | BackendError):
                raise translate_error(e, "setup", graph, platform, plan, cost) from e
            raise
        finally:  # preparing configured this thread for the devices: give it back
            torch_threads(threads_before)
        self.setup_s = time.perf_counter() - t_setup

    def run(self, n: int = 1, *, timed: bool = True) -> list[float]:
        """Run ``n`` times (timed: kept in the result; else warm-up); the makespans.
        The first run is checked against the references."""
        out = []
        with self._closed_on_failure() as engine:
            for _ in range(n):
                first = self.warmup + len(self.makespans) == 0
                span = engine.run_once(self.timeout_s, keep=self.check and first, trace=self.traced)
                if first and self.check:
                    self.check_result = check_run(self.graph, engine, self._ref, self.rtol, self.atol, self.gpu)
                    self._ref = None
                if timed:
                    self.makespans.append(span)
                    self.runs.append(engine.records())
                    self.placements.append(engine.placement())
                    self.decision_times += engine.decision_times
                else:
                    self.warmup += 1
                out.append(span)
        return out

    def trace(self) -> list[dict[str, Any]]:
        """One traced run (every GPU op launched eagerly between two CUDA timing
        events, copies timed likewise; not timed, not kept among the runs): its
        records in the simulator's format."""
        with self._closed_on_failure() as engine:
            engine.run_once(self.timeout_s, trace=True)
            return engine.records()

    @contextlib.contextmanager
    def _closed_on_failure(self) -> Iterator[Any]:
        """The engine; a failure closes the execution, a worker's failure raised as
        the error :func:`execute` raises."""
        if self.engine is None:
            raise ExecutionError("this execution is closed")
        try:
            yield self.engine
        except Failure as f:
            self.close()
            raise translate_error(f.exc, f.where, self.graph, self.platform, self.plan, self.cost) from f.exc
        except BaseException:
            self.close()
            raise

    def result(self) -> RunResult:
        """The timed runs so far as a :class:`RunResult` (records of the median run)."""
        if not self.makespans:
            raise ExecutionError("no timed run yet: call run() first")
        platform = self.platform
        i_med, _ = median_run(self.makespans)
        records = self.runs[i_med]
        busy = dict.fromkeys(platform.device_names, 0.0)
        for r in records:
            if r["kind"] == "op":
                busy[r["resource"]] += r["end"] - r["start"]
        return RunResult(
            graph=self.graph.name, platform=platform.name, backend=self.backend.name,
            scheduler=self.plan.meta.get("scheduler"),
            devices={d: self.specs[d].name for d in platform.device_names}, requests=self.n_req,
            warmup=self.warmup, makespans=list(self.makespans), records=records, device_busy=busy,
            streams={d.name: d.streams for d in platform.devices}, check=self.check_result,
            setup_s=self.setup_s, notes=list(self.notes),
            decision_s=float(statistics.median(self.decision_times)) if self.decision_times else None,
            launch=self.launch, placement=self.placements[i_med],
        )

    def close(self) -> None:
        """Stop the worker threads (idempotent)."""
        if self.engine is not None:
            self.engine.stop()
            self.engine = None

    def __enter__(self) -> Execution:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _register_tvm(bk: Backend, graph: Graph, model: RelaxModel | None, wiring: Wiring) -> None:
    if wiring.slices or any("split_of" in (graph.nx.nodes[n].get("attrs") or {}) for n in graph.nx):
        raise BackendError(
            f"graph {graph.name!r} has operators split by tensor-split: the tvm backend runs the "
            "model's own kernels only; use the torch backend"
        )
    if model is not None and hasattr(bk, "register"):
        bk.register(graph, model)


def _prepare(graph: Graph, plan: Plan, platform: Platform, specs: Mapping[str, Any], active: list[str],
             wiring: Wiring, bk: Backend) -> dict[str, dict[str, Any]]:
    """Memory (torch device) -> node -> call, for every node that may run there."""
    topo = graph.topological_order()
    index = {n: i for i, n in enumerate(topo)}
    for j, spec in enumerate(graph.meta.get("inputs") or []):
        index[str(spec.get("name"))] = len(topo) + j
    want: dict[str, list[str]] = {}
    first: dict[str, Any] = {}
    for d in active:
        first.setdefault(specs[d].torch_device, specs[d])
    if plan.policy is not None:
        for mem in first:
            want[mem] = list(topo)
    else:
        for n in topo:
            want.setdefault(specs[plan.placement[n]].torch_device, []).append(n)
    calls: dict[str, dict[str, Any]] = {}
    for mem, nodes in want.items():
        bk.configure(first[mem])
        calls[mem] = build_calls(graph, wiring, bk, first[mem], nodes, index)
    return calls


def _host_inputs(wiring: Wiring, bk: Backend, graph: Graph) -> dict[str, Any]:
    out: dict[str, Any] = {}
    names = [str(s.get("name")) for s in graph.meta.get("inputs") or []]
    for name in names:
        if name not in wiring.inputs:
            raise ExecutionError(f"graph input {name!r} has no value")
        arr = wiring.inputs[name]
        if bk.name == "torch":
            import torch

            out[name] = torch.from_numpy(arr)
        else:
            import tvm

            out[name] = tvm.runtime.tensor(arr, tvm.cpu(0))
    return out
