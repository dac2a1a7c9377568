"""A dynamic plan checked against what its run decided.

A dynamic plan places each node when it becomes ready (:class:`~sim.plan.DynamicPolicy`):
simulating the plan asks the policy again, on predicted state, and may place
differently from the run it is compared with, so the error then mixes the
simulator's timing with a different plan. :func:`recorded_plan` builds, from the
records of a measured run, the plan the run made: each node on the device it ran on
(the device most of its requests ran on, where they differ), in the order the run
started them, placed at run time by :class:`RecordedPolicy`, which answers every
question with the recorded device, so the simulation still charges a placement
decision per node as the run paid one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.executor.execute import RunResult
    from hetsim.schedulers.run import PlanRun
    from hetsim.sim.plan import Plan, SystemView

__all__ = ["RecordedPolicy", "as_static", "recorded_plan", "simulate_as_run"]


class RecordedPolicy:
    """A dynamic policy that places each node where a measured run placed it."""

    name = "recorded"

    def __init__(self, placement: Mapping[str, str]) -> None:
        self.placement = dict(placement)

    def select(self, node: str, view: SystemView) -> str:
        """The recorded device of ``node``."""
        return self.placement[node]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": {"placement": dict(self.placement)}}


def recorded_plan(graph: Graph, records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None,
                  placement: Mapping[str, str] | None = None) -> Plan:
    """The plan a run made: from its op records (``kind="op"``: ``node``,
    ``resource`` (the device), ``start``), each node on its device, in the run's
    start order, placed by a :class:`RecordedPolicy`. A node without an op record (a
    GPU op of a timed run, which records no timing events) takes its device from
    ``placement`` (:attr:`RunResult.placement <runtime.executor.RunResult>`) and its
    order among its device's unrecorded ops from the graph's topological order.

    Parameters
    ----------
    graph
        The graph that ran.
    records
        The run's records (:attr:`RunResult.records <runtime.executor.RunResult>`).
    meta
        The plan's ``meta``, kept (``recorded_from`` added: ``"run"``).
    placement
        Where each node ran, for the nodes without an op record.

    Raises
    ------
    PlanError
        When a node of ``graph`` has neither an op record nor a placement.

    Examples
    --------
    >>> from hetsim.graphs.graph import Graph
    >>> g = Graph(name="g")
    >>> for n in "ab":
    ...     g.add_op(n, "relu", inputs=[([1, 4], "float32")], outputs=[([1, 4], "float32")])
    >>> g.add_edge("a", "b")
    >>> recs = [{"kind": "op", "node": "b", "resource": "gpu", "start": 2.0, "request": 0},
    ...         {"kind": "op", "node": "a", "resource": "cpu", "start": 1.0, "request": 0}]
    >>> p = recorded_plan(g, recs)
    >>> p.policy.placement, p.priority
    ({'a': 'cpu', 'b': 'gpu'}, {'a': 0.0, 'b': 1.0})
    """
    # lazy: at the top it would load simpy with this module
    from hetsim.sim.plan import Plan, PlanError

    devices: dict[str, Counter[str]] = {}
    first: dict[str, float] = {}
    for r in records:
        if r.get("kind") != "op":
            continue
        n = r["node"]
        devices.setdefault(n, Counter())[str(r["resource"])] += 1
        first[n] = min(first.get(n, r["start"]), r["start"])
    for n, dev in (placement or {}).items():
        if n not in devices:
            devices[n] = Counter({str(dev): 1})
    missing = [n for n in graph.topological_order() if n not in devices]
    if missing:
        raise PlanError(f"graph {graph.name!r}: the run's records hold no op of node(s) {missing[:5]}")
    index = {n: i for i, n in enumerate(graph.topological_order())}
    order = sorted(devices, key=lambda n: (0, first[n], index.get(n, 0)) if n in first else (1, 0.0, index.get(n, 0)))
    placement = {n: devices[n].most_common(1)[0][0] for n in order}
    return Plan(placement={}, priority={n: float(i) for i, n in enumerate(order)},
                policy=RecordedPolicy(placement), meta={**dict(meta or {}), "recorded_from": "run"})


def as_static(plan: Plan) -> Plan:
    """A plan placed by a :class:`RecordedPolicy` as the static plan of the same
    placements and order (what ``plan.json`` holds: a file every plan reader loads);
    any other plan as it is."""
    # lazy: at the top it would load simpy with this module
    from hetsim.sim.plan import Plan

    if not isinstance(plan.policy, RecordedPolicy):
        return plan
    return Plan(placement=dict(plan.policy.placement), priority=dict(plan.priority), meta=dict(plan.meta))


def simulate_as_run(run: PlanRun, measured: RunResult, platform: Platform, cost: Any, *, requests: int | None,
                    seed: int | None, again: bool) -> tuple[PlanRun, str]:
    """The simulation to set beside ``measured``: a dynamic plan's placements and order
    as its measured run made them (:func:`recorded_plan`) on ``platform``; a static
    plan simulated again on ``platform`` with ``again`` (its launch mode), else as
    given. Returns it and a note ("" when the plan was simulated as made)."""
    # lazy: at the top it would load simpy with this module
    from hetsim import schedulers

    if run.plan.policy is not None:
        plan = recorded_plan(run.graph, measured.records, run.plan.meta, placement=measured.placement)
        return (schedulers.run_plan(run.graph, platform, plan, cost, record=True, requests=requests, seed=seed),
                "simulated with the placements and order of its measured median run")
    if again:
        return run.simulate(platform=platform, cost=cost, record=True, requests=requests, seed=seed), ""
    return run, ""
