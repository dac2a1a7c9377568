"""How timed runs are interleaved and pooled when several executions are measured.

A measured makespan carries two kinds of noise. The machine drifts over minutes
(other tenants, clock changes): interleaving the executions' runs in rounds, each
round running every execution once in a new order (:func:`round_orders`), exposes
them all to the same drift. And each execution carries an offset of its own: one
placement of its buffers in memory, one set of threads, stays with it for all its
runs, so more rounds do not average it out. Measured on this project's 2-core VM,
separately built executions of one plan differed by 1.2-3.5 % (and two schedulers'
identical plans by up to 11 %) while each one's runs agreed. Measuring a plan as
several executions, each built apart, and pooling their timed runs
(:func:`pool_runs`) averages that offset too (:func:`runtime.execute`'s and
:func:`runtime.validation.validate.validate_all`'s ``replicas``).
"""

from __future__ import annotations

import dataclasses
import random
import statistics
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.executor.execute import RunResult
    from hetsim.schedulers.run import PlanRun

T = TypeVar("T")

__all__ = ["check_replicas", "execution_key", "pool_runs", "pool_same_plans", "round_orders"]


def round_orders(items: Sequence[T], rounds: int, *, seed: int = 0) -> list[list[T]]:
    """The order in which each of ``rounds`` rounds runs ``items`` (each once).

    Each round is a permutation drawn from ``random.Random(seed)``, with the
    first round in the given order: over the rounds, every item follows many
    others, and runs early and late in a round. A fixed rotation (round ``r``
    starting at item ``r``) kept each item's predecessor the same in every round,
    so whatever a run leaves for the next (the shared cache, the second core's
    state) was a bias of the item after it rather than noise that the median over
    the rounds evens out. Deterministic: the same items and rounds give the same
    orders.
    """
    rng = random.Random(seed)
    out: list[list[T]] = []
    for r in range(rounds):
        order = list(items)
        if r:
            rng.shuffle(order)
        out.append(order)
    return out


def pool_runs(results: Sequence[RunResult]) -> RunResult:
    """One :class:`~runtime.executor.execute.RunResult` of the timed runs of several
    executions of the same plan (or of plans that are one execution): every
    makespan, in the order given; the records and busy times of the execution whose
    own median is nearest the pooled one (a run that happened, not a blend); the
    median of their per-placement decision times; the notes of all, once each."""
    if not results:
        raise ValueError("pool_runs needs at least one result")
    if len(results) == 1:
        return results[0]
    makespans = [t for r in results for t in r.makespans]
    middle = statistics.median(makespans)
    nearest = min(results, key=lambda r: abs(r.median - middle))
    decisions = [r.decision_s for r in results if r.decision_s is not None]
    notes = list(dict.fromkeys(n for r in results for n in r.notes))
    return dataclasses.replace(
        nearest, makespans=makespans, notes=notes,
        decision_s=float(statistics.median(decisions)) if decisions else None,
    )


def check_replicas(replicas: object) -> int:
    """``replicas`` as an int >= 1, else :class:`ValueError` naming it."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ValueError(f"replicas must be an int >= 1 (executions of each plan), got {replicas!r}")
    return replicas


def pool_same_plans(measured: dict[str, RunResult], groups: Iterable[list[str]]) -> dict[str, str]:
    """Pool, in ``measured``, the timed runs of plans that are one execution (each
    was measured as its own execution, interleaved with the others): each gets the
    makespans of all, so that their rows agree and the noise of one execution (one
    placement of its buffers in memory, one unlucky minute) weighs less. Returns
    each pooled plan's note."""
    notes = {}
    for names in groups:
        names = [n for n in names if n in measured]  # an execution that failed in the rounds is left out
        if len(names) < 2:
            continue
        pooled = pool_runs([measured[n] for n in names])
        for n in names:
            measured[n] = dataclasses.replace(pooled, makespans=list(pooled.makespans))
            notes[n] = f"one execution with {', '.join(o for o in names if o != n)}: runs pooled"
    return notes


def execution_key(run: PlanRun) -> tuple[Any, ...] | None:
    """What makes two plans one execution: the same graph object, the same order
    (the executor and the simulator both take ready ops by ``(priority, topological
    index)``) and the same device for every op. None for a plan that decides at run
    time or pipelines: those are always measured on their own."""
    plan, graph = run.plan, run.graph
    if plan.policy is not None or plan.stages is not None or plan.microbatches is not None:
        return None
    order = plan.order(graph)
    return (id(graph), tuple(order), tuple(plan.placement.get(n) for n in order))
