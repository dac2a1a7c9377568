"""The one path from (graph, platform, cost model, scheduler) to a plan, its simulation
and its metrics row.

:meth:`Scheduler.run <schedulers.base.Scheduler.run>` rewrites the graph
(``transform``, e.g. tensor-split's operator splits), schedules it, simulates the
plan on the rewritten graph and returns a :class:`PlanRun`; :func:`run_plan` does the
same for a plan made elsewhere (a plan file, a hand-written placement). Every caller
goes through them: ``hetsim compare``, sweep points, ``hetsim simulate``,
validation, the figure scripts and the benchmarks, so that a plan is always
simulated on the graph it was made for, with the cost model it was made with, and
every table reports the same metrics (:data:`RUN_COLUMNS`).

Examples
--------
>>> from hetsim import schedulers
>>> from hetsim.graphs import Graph
>>> g = Graph(name="two")
>>> g.add_op("a", "matmul", flops=2e9, bytes=12_000_000)
>>> g.add_op("b", "relu", bytes=8_000_000)
>>> g.add_edge("a", "b", bytes=4_000_000)
>>> run = schedulers.get("all-gpu").run(g, "xeon-p2200", requests=2)
>>> run.plan.placement, run.result.requests
({'a': 'gpu', 'b': 'gpu'}, 2)
>>> sorted(run.metrics())[:3]
['bytes_moved', 'cpu_util', 'dispatch_util']
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.platform import Platform as _Platform
from hetsim.sim.engine.simulator import simulate
from hetsim.sim.options import SimOptions
from hetsim.sim.result import METRIC_COLUMNS

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.result import SimResult

__all__ = ["RUN_COLUMNS", "PlanRun", "run_plan"]

#: columns of :meth:`PlanRun.metrics`, in order
RUN_COLUMNS: tuple[str, ...] = ("nodes", *METRIC_COLUMNS, "sched_time_s", "sim_time_s")


@dataclass(frozen=True)
class PlanRun:
    """A plan, the graph and platform it is for, and its simulation.

    Attributes
    ----------
    graph
        The graph the plan is for: the scheduler's ``transform`` of the graph it
        was given (the same object when the scheduler does not rewrite graphs).
    platform, cost
        Where the plan runs and the cost model that planned and priced it.
    plan
        The plan (``plan.meta`` names the scheduler and its parameters).
    result
        The simulation, or None when made with ``simulate=False``.
    scheduling_time_s
        Wall time of ``transform`` + ``schedule`` (0 for a given plan).
    simulation_time_s
        Wall time of the simulation (0 without one).
    priced
        The :class:`costmodel.priced.PricedGraph` of ``graph``, ``platform`` and
        ``cost`` the plan was made with (:meth:`Scheduler.run`), which its simulations
        on that platform with that cost reuse; None: priced when simulated.
    """

    graph: Graph
    platform: Platform
    cost: Any
    plan: Plan
    result: SimResult | None = None
    scheduling_time_s: float = 0.0
    simulation_time_s: float = 0.0
    priced: Any = field(default=None, repr=False, compare=False)

    @property
    def scheduler(self) -> str:
        """The scheduler's registry name (``plan.meta["scheduler"]``; ``"plan"`` if none)."""
        return str(self.plan.meta.get("scheduler", "plan"))

    def simulate(
        self,
        options: SimOptions | None = None,
        *,
        platform: Platform | None = None,
        cost: Any = None,
        **option_keywords: Any,
    ) -> PlanRun:
        """This plan simulated (again), on ``platform`` and with ``cost`` when given
        (e.g. a platform calibrated since, or a profile measured since), else on its
        own; ``options`` and the option keywords are those of :func:`sim.simulate`
        (:class:`~sim.options.SimOptions`). Returns a new run."""
        platform = self.platform if platform is None else platform
        cost = self.cost if cost is None else cost
        priced = self.priced if self.priced is not None and self.priced.prices(self.graph, platform) \
            and self.priced.cost is cost else cost  # the times the plan was made with, when they apply
        t0 = time.perf_counter()
        result = simulate(self.graph, platform, self.plan, priced, options, **option_keywords)
        return replace(self, platform=platform, cost=cost, result=result,
                       simulation_time_s=time.perf_counter() - t0)

    def metrics(self) -> dict[str, Any]:
        """The row of this run: :data:`RUN_COLUMNS` (``nodes`` of :attr:`graph`, the
        simulation's :meth:`~sim.result.SimResult.metrics`, NaN without one, and the
        two wall times)."""
        if self.result is not None:
            row: dict[str, Any] = {"nodes": self.graph.number_of_nodes(), **self.result.metrics()}
        else:
            row = {"nodes": self.graph.number_of_nodes(), **dict.fromkeys(METRIC_COLUMNS, float("nan"))}
        row.update(sched_time_s=self.scheduling_time_s, sim_time_s=self.simulation_time_s)
        return row


def run_plan(
    graph: Graph,
    platform: Platform | str,
    plan: Plan,
    cost: Any = None,
    options: SimOptions | None = None,
    *,
    simulate: bool = True,
    **option_keywords: Any,
) -> PlanRun:
    """A plan made elsewhere (a file, a hand-written placement), checked against
    ``graph`` and ``platform`` and, with ``simulate``, simulated.

    Parameters
    ----------
    graph, platform, plan
        What runs, where (a :class:`~sim.platform.Platform`, preset name or TOML
        path) and how.
    cost
        A cost model or spec (:func:`costmodel.as_cost_model`; None: each device's default source).
    simulate
        Simulate the plan (False: check it only).
    options
        Options of :func:`sim.simulate` (:class:`~sim.options.SimOptions`: ``requests``,
        ``interval_s``, ``record``, ``seed``, ``noise``, ``check_memory``); each may
        also be given as a keyword, which sets it in ``options``.
    """
    platform = _Platform.load(platform)
    cost = as_cost_model(cost, platform=platform)
    run = PlanRun(graph, platform, cost, plan.validate(graph, platform))
    return run.simulate(SimOptions.of(options, option_keywords, "run_plan")) if simulate else run
