"""A Simulator reads its graph once and simulates plan after plan, each as simulate() does."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from engine_cases import REFERENCE, cases, outcome, random_graph, random_plan

from hetsim.graphs import Graph, GraphError
from hetsim.schedulers import get as get_scheduler
from hetsim.schedulers import run_plan
from hetsim.sim import Plan, PlanError, Platform, SimOptions, SimulationError, Simulator, simulate
from hetsim.sim.engine import simulator as engine_mod

EXPECTED = json.loads(REFERENCE.read_text())


def test_a_simulator_gives_the_reference_outcome_before_and_after_other_plans():
    """Every tenth reference case (120: shapes, platforms, dynamic policies, requests,
    noise, memory checks), through one Simulator: the case's plan, then another plan of
    the same graph, then the case's plan again; both times bit for bit what simulate()
    gave when the reference was written."""
    wrong = {}
    for i, case in enumerate(cases()[::10]):
        sim = Simulator(case.graph, case.platform, case.cost)
        first = outcome(case, sim)
        tables = sim.tables
        kind = ["default", "priority", "pipeline", "dynamic", "partial"][i % 5]
        other = random_plan(case.graph, case.platform, np.random.default_rng(i), kind)
        try:
            sim.simulate(other, record=True, seed=0)
        except Exception as e:  # noqa: BLE001 - the other plan may not fit: its error is not the point
            assert type(e).__name__ in ("PlanError", "SimulationError"), e
        again = outcome(case, sim)
        if not (first == again == EXPECTED[case.id]):
            wrong[case.id] = {"expected": EXPECTED[case.id], "first": first, "again": again}
        # read once; an error before the graph is read (a plan's) leaves it unread
        assert sim.tables is tables and (tables is not None or "error" in first)
    assert not wrong, json.dumps(wrong, indent=1)[:4000]


def test_the_graph_is_read_once_for_every_plan(monkeypatch):
    calls = []
    index_graph = engine_mod.index_graph
    monkeypatch.setattr(engine_mod, "index_graph", lambda g, *a: calls.append(g) or index_graph(g, *a))
    rng = np.random.default_rng(7)
    g = random_graph(rng, 40)
    platform = Platform.preset("xeon-p2200")
    sim = Simulator(g, "xeon-p2200")  # a preset's name, the roofline by default
    assert sim.tables is None and not calls  # read at the first simulation
    plans = [random_plan(g, platform, rng, kind) for kind in ("default", "priority", "pipeline", "dynamic")]
    got = [sim.simulate(p, record=True, seed=3) for p in plans]
    assert calls == [g]
    want = [simulate(g, platform, p, record=True, seed=3) for p in plans]
    assert [r.record_rows for r in got] == [r.record_rows for r in want]
    assert [r.makespan for r in got] == [r.makespan for r in want]
    assert len(calls) == 1 + len(plans)  # simulate() reads the graph at every call


def test_a_bad_plan_or_graph_is_reported_as_simulate_reports_it():
    g = random_graph(np.random.default_rng(8), 12)
    on_cpu = dict.fromkeys(g.nx, "cpu")
    sim = Simulator(g, "xeon-p2200")
    with pytest.raises(PlanError, match="'nowhere'"):  # the plan is checked before the graph is read
        sim.simulate(Plan({**on_cpu, "nowhere": "gpu"}))
    assert sim.tables is None
    assert sim.simulate(Plan(on_cpu)).makespan == simulate(g, "xeon-p2200", Plan(on_cpu)).makespan
    cyclic = Graph(name="loop")
    for n in "abc":
        cyclic.add_op(n, "relu", bytes=10)
    for u, v in ("ab", "bc", "ca"):
        cyclic.add_edge(u, v, bytes=1)
    for _ in range(2):  # the graph is validated when the Simulator is made: the error again, nothing half-read
        with pytest.raises(GraphError, match="cycle a -> b -> c"):
            Simulator(cyclic, "xeon-p2200")
        with pytest.raises(GraphError, match="cycle a -> b -> c"):
            simulate(cyclic, "xeon-p2200", Plan(dict.fromkeys("abc", "cpu")))


def test_the_options_as_one_frozen_set_give_what_their_keywords_give():
    """simulate, Simulator.simulate, Scheduler.run and run_plan take the six options as
    one SimOptions (keywords set fields on it): every tenth reference case, bit for bit."""
    wrong = {}
    for case in cases()[5::10]:
        as_one = dataclasses.replace(case, options={"options": SimOptions(**case.options)})
        got, again = outcome(as_one), outcome(as_one, Simulator(case.graph, case.platform, case.cost))
        if not got == again == EXPECTED[case.id]:
            wrong[case.id] = {"expected": EXPECTED[case.id], "simulate": got, "Simulator": again}
    assert not wrong, json.dumps(wrong, indent=1)[:4000]
    g = random_graph(np.random.default_rng(9), 10)
    busy = SimOptions(requests=3, interval_s=1e-4, record=True)
    by_keywords = get_scheduler("heft").run(g, "xeon-p2200", None, requests=3, interval_s=1e-4, record=True)
    run = get_scheduler("heft").run(g, "xeon-p2200", None, busy)
    assert run.result.makespan == by_keywords.result.makespan and run.result.records == by_keywords.result.records
    assert run_plan(g, "xeon-p2200", run.plan, None, busy).result.makespan == run.result.makespan
    assert run.simulate(busy, seed=1).result.makespan == run.result.makespan  # no noise: the seed changes nothing


def test_an_option_that_is_none_or_out_of_range_is_named():
    g = random_graph(np.random.default_rng(10), 6)
    plan = Plan(dict.fromkeys(g.nx, "cpu"))
    with pytest.raises(TypeError, match=r"simulate\(\) got an unexpected keyword argument 'request' "
                                        r"\(options: check_memory, interval_s, noise, record, requests, seed\)"):
        simulate(g, "xeon-p2200", plan, request=3)
    with pytest.raises(TypeError, match=r"simulate\(\): options must be SimOptions, got dict"):
        simulate(g, "xeon-p2200", plan, None, {"requests": 3})
    with pytest.raises(TypeError, match=r"run\(\) got an unexpected keyword argument 'repeats'"):
        get_scheduler("heft").run(g, "xeon-p2200", repeats=3)
    for bad in (float("nan"), -0.1, True):
        with pytest.raises(SimulationError, match=f"noise must be a finite number >= 0, got {bad!r}"):
            SimOptions(noise=bad)
    assert SimOptions(noise=np.float32(0.5)).noise == 0.5  # numpy numbers as Python's
    with pytest.raises(dataclasses.FrozenInstanceError):
        SimOptions().seed = 1  # type: ignore[misc]
