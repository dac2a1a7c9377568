"""How a validation's timed runs are interleaved and pooled (runtime.validation.rounds)."""

from __future__ import annotations

import statistics

import pytest

from hetsim.runtime.executor.execute import RunResult
from hetsim.runtime.validation.rounds import check_replicas, pool_runs, round_orders


def test_round_orders_change_each_plans_predecessor_from_round_to_round():
    """Each round runs every item once; the first in the given order, the others
    shuffled (deterministically), so that no item always follows the same one, as
    it did with a fixed rotation (one predecessor per item but at round starts)."""
    items = [f"plan{i}" for i in range(17)]
    orders = round_orders(items, 20)
    assert len(orders) == 20 and orders[0] == items
    assert all(sorted(o) == sorted(items) for o in orders)
    assert round_orders(items, 20) == orders  # the same orders again
    before: dict[str, set[str]] = {x: set() for x in items}
    for o in orders:
        for a, b in zip(o, o[1:]):
            before[b].add(a)
    assert min(len(s) for s in before.values()) >= 6, before
    # every item also runs early and late in a round
    assert all(len({o.index(x) for o in orders}) >= 8 for x in items)
    assert round_orders(items, 0) == [] and round_orders([], 3) == [[], [], []]



def _result(makespans: list[float], *, tag: str, decision_s: float | None = None,
            notes: tuple[str, ...] = ()) -> RunResult:
    """A RunResult whose records and busy times say which execution it came from."""
    return RunResult(graph="g", platform="cpu2", backend="torch", scheduler="heft", devices={"cpu0": "cpu@0"},
                     requests=1, warmup=1, makespans=list(makespans),
                     records=[{"kind": "op", "name": tag, "resource": "cpu0", "start": 0.0, "end": 1.0}],
                     device_busy={"cpu0": float(len(tag))}, streams={"cpu0": 1}, notes=list(notes),
                     decision_s=decision_s)


def test_pool_runs_keeps_every_makespan_and_the_records_of_a_run_near_the_pooled_median():
    """Three executions of one plan: one slow (an unlucky layout), two alike. The
    pooled result has all nine makespans, in order; its median is the pooled one;
    its records and busy times are those of the execution whose own median is
    nearest it (a run that happened, not a blend)."""
    slow = _result([1.30, 1.31, 1.29], tag="slow", decision_s=30e-6, notes=("a note",))
    mid = _result([1.02, 1.01, 1.03], tag="mid", decision_s=20e-6, notes=("a note", "another"))
    fast = _result([0.99, 1.00, 0.98], tag="fastest", decision_s=None)
    pooled = pool_runs([slow, mid, fast])
    assert pooled.makespans == [1.30, 1.31, 1.29, 1.02, 1.01, 1.03, 0.99, 1.00, 0.98]
    assert pooled.median == statistics.median(pooled.makespans) == 1.02
    assert pooled.records[0]["name"] == "mid" and pooled.device_busy == {"cpu0": 3.0}
    assert pooled.decision_s == pytest.approx(25e-6)  # the median of those measured
    assert pooled.notes == ["a note", "another"]
    # one execution alone is its own result; the inputs are not changed
    assert pool_runs([fast]) is fast and slow.makespans == [1.30, 1.31, 1.29]
    with pytest.raises(ValueError, match="at least one"):
        pool_runs([])


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3", None])
def test_check_replicas_names_a_bad_count(bad):
    with pytest.raises(ValueError, match=r"replicas must be an int >= 1 \(executions of each plan\), got "):
        check_replicas(bad)
    assert check_replicas(1) == 1 and check_replicas(4) == 4


def test_plans_that_are_one_execution_share_a_key_and_their_pooled_runs(diamond):
    """Two schedulers' identical plans are one execution (same graph, order and
    placement): their runs pool and each row names the other; a dynamic plan has no key."""
    from types import SimpleNamespace

    from hetsim.runtime.validation.replay import RecordedPolicy
    from hetsim.runtime.validation.rounds import execution_key, pool_same_plans
    from hetsim.sim.plan import Plan

    def run(plan: Plan) -> SimpleNamespace:
        return SimpleNamespace(graph=diamond, plan=plan)

    cpu = Plan(dict.fromkeys(diamond.nx, "cpu0"))
    assert execution_key(run(cpu)) == execution_key(run(Plan(dict.fromkeys(diamond.nx, "cpu0"))))
    assert execution_key(run(cpu)) != execution_key(run(Plan({**cpu.placement, "d": "cpu1"})))
    assert execution_key(run(Plan({}, policy=RecordedPolicy(cpu.placement)))) is None
    measured = {"all-cpu": _result([1.0, 1.2], tag="a", decision_s=None),
                "heft": _result([1.1, 1.3], tag="b", decision_s=None),
                "random": _result([2.0, 2.1], tag="c", decision_s=None)}
    notes = pool_same_plans(measured, [["all-cpu", "heft", "gone"], ["random"]])
    assert notes == {"all-cpu": "one execution with heft: runs pooled", "heft": "one execution with all-cpu: runs pooled"}
    assert measured["all-cpu"].makespans == measured["heft"].makespans == [1.0, 1.2, 1.1, 1.3]
    assert measured["random"].makespans == [2.0, 2.1]
