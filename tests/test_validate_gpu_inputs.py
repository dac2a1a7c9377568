"""Inputs a validation measures on a platform with GPUs: each device profiled alone
(:class:`runtime.validation.context_profile.DeviceProfilers`) and the executor's copies
(:mod:`runtime.validation.link_calibration`). The CUDA runs themselves need a GPU; what is
checked here is the arithmetic on their records and the per-device profiling,
with CPU workers standing in for the devices."""

from __future__ import annotations

import json
import warnings

import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from hetsim.costmodel.platform import Platform  # noqa: E402
from hetsim.graphs import Graph  # noqa: E402
from hetsim.runtime.validation.link_calibration import crossing_plan, link_costs  # noqa: E402

BW = 1.2e10  # xeon-p2200's link


def _op(node, device, start, end):  # noqa: ANN001, ANN202
    return {"kind": "op", "node": node, "resource": device, "start": start, "end": end, "bytes": 0, "dst": None}


def _copy(node, dst, start, end, nbytes):  # noqa: ANN001, ANN202
    return {"kind": "transfer", "node": node, "resource": "cpu<->gpu", "start": start, "end": end,
            "bytes": nbytes, "dst": dst}


def _chain() -> Graph:
    g = Graph(name="chain")
    for n in "abcd":
        g.add_op(n, "relu")
    for u, v in [("a", "b"), ("b", "c"), ("c", "d")]:
        g.add_edge(u, v, bytes=1_200_000)
    return g


def test_crossing_plan_alternates_in_topological_order():
    plan = crossing_plan(_chain(), ("cpu", "gpu"))
    assert [plan.placement[n] for n in "abcd"] == ["cpu", "gpu", "cpu", "gpu"]


def test_link_costs_from_records():
    g, plat = _chain(), Platform.preset("xeon-p2200")
    # 1.2 MB copies at 12 GB/s take 100 us of bandwidth: the rest is the latency
    run1 = [
        _op("a", "cpu", 0.0, 1e-3),
        _copy("a", "gpu", 1e-3, 1e-3 + 140e-6, 1_200_000),       # latency 40 us
        _op("b", "gpu", 1.2e-3, 1.3e-3),
        _copy("b", "cpu", 1.3e-3, 1.3e-3 + 150e-6, 1_200_000),   # latency 50 us; arrives 1.45 ms
        _op("c", "cpu", 1.48e-3, 2e-3),                           # cpu idle since 1 ms: waited 30 us
        _copy("c", "gpu", 2e-3, 2e-3 + 160e-6, 1_200_000),       # latency 60 us
        _op("d", "gpu", 2.2e-3, 2.3e-3),
    ]
    res = link_costs([run1], g, plat, "cpu", "gpu")
    assert res["latency_s"] == pytest.approx(50e-6)
    assert res["handoff_s"] == pytest.approx(30e-6)
    assert res["n_copies"] == 3 and res["n_handoffs"] == 1 and res["rounds"] == 1
    assert res["copy_s"] == pytest.approx(150e-6)
    # a CPU op whose worker was still busy when its input arrived waited for the worker, not the hand-over
    busy = [dict(r) for r in run1]
    busy[2] = _op("b", "gpu", 1.2e-3, 1.3e-3)
    busy.insert(4, _op("x", "cpu", 1.4e-3, 1.47e-3))
    g.add_op("x", "relu")
    res2 = link_costs([busy], g, plat, "cpu", "gpu")
    assert res2["n_handoffs"] == 0 and res2["handoff_s"] == 0.0
    with pytest.raises(ValueError, match="no copy"):
        link_costs([[r for r in run1 if r["kind"] == "op"]], g, plat, "cpu", "gpu")
    assert res["slowdown"] == 1.0 and res["cpu_ratio"] == res["gpu_ratio"] == 1.0  # no one-device baseline


def test_link_costs_count_a_copy_from_its_producers_end_and_the_workers_slowdown():
    g, plat = _chain(), Platform.preset("xeon-p2200")
    # a's copy is issued 80 us after a ends: the simulator starts it at a's end, so
    # the latency it needs is 80 + 40 us
    crossing = [
        _op("a", "cpu", 0.0, 1e-3),
        _copy("a", "gpu", 1.08e-3, 1.08e-3 + 140e-6, 1_200_000),
        _op("b", "gpu", 1.3e-3, 1.4e-3),
        _copy("b", "cpu", 1.4e-3, 1.4e-3 + 220e-6, 1_200_000),   # 120 us over its bytes
        _op("c", "cpu", 1.7e-3, 2.3e-3),
        _copy("c", "gpu", 2.3e-3, 2.3e-3 + 220e-6, 1_200_000),
        _op("d", "gpu", 2.6e-3, 2.7e-3),
    ]
    cpu_alone = [_op(n, "cpu", 0.0, t) for n, t in zip("abcd", (0.8e-3, 0.4e-3, 0.4e-3, 0.4e-3))]
    gpu_alone = [_op(n, "gpu", 0.0, t) for n, t in zip("abcd", (0.1e-3, 0.05e-3, 0.1e-3, 0.05e-3))]
    res = link_costs([crossing], g, plat, "cpu", "gpu", alone={"cpu": [cpu_alone], "gpu": [gpu_alone]})
    assert res["latency_s"] == pytest.approx(120e-6)
    # cpu: a + c = 1.6 ms crossing, 1.2 ms alone; gpu: b + d = 0.2 ms, 0.1 ms alone
    assert res["cpu_ratio"] == pytest.approx(4 / 3) and res["gpu_ratio"] == pytest.approx(2.0)
    assert res["slowdown"] == pytest.approx((4 / 3 + 2.0) / 2)
    slower = [_op(n, "gpu", 0.0, t) for n, t in zip("abcd", (0.1e-3, 0.01e-3, 0.1e-3, 0.01e-3))]
    capped = link_costs([crossing], g, plat, "cpu", "gpu", alone={"cpu": [cpu_alone], "gpu": [slower]})
    assert capped["gpu_ratio"] == pytest.approx(10.0) and capped["slowdown"] == 2.0  # two members: at most 2x


def test_link_calibration_writes_latency_and_handoff_into_the_platform():
    from hetsim.runtime.validation.link_calibration import LinkCalibration

    plat = Platform.preset("xeon-p2200")
    cal = LinkCalibration.__new__(LinkCalibration)  # the arithmetic alone (its runs need a GPU)
    cal.workers, cal.graph = ("cpu", "gpu"), _chain()
    res = {"latency_s": 42e-6, "handoff_s": 17e-6, "n_copies": 9, "copy_s": 60e-6, "slowdown": 1.5,
           "cpu_ratio": 1.4, "gpu_ratio": 1.6, "linger_s": 2e-3}
    out = cal.apply(plat, res)
    (dom,) = out.memory_domains
    assert dom.name == "host" and set(dom.demand) == {"cpu", "gpu"} and dom.linger_s == 2e-3
    assert dom.rate({"cpu", "gpu"}) == pytest.approx(1 / 1.5) and dom.rate({"gpu"}) == 1.0
    assert not cal.apply(plat, res, contention=False).memory_domains
    assert not cal.apply(plat, {**res, "slowdown": 1.0}).memory_domains
    assert out.route("cpu", "gpu")[0].latency_s == pytest.approx(42e-6)
    assert out.route("cpu", "gpu")[0].bandwidth_bytes_per_s == plat.route("cpu", "gpu")[0].bandwidth_bytes_per_s
    assert out.device("cpu").handoff_s == pytest.approx(17e-6) and out.device("gpu").handoff_s == 0.0
    assert plat.route("cpu", "gpu")[0].latency_s != pytest.approx(42e-6)  # the input platform is unchanged
    text = cal.describe(res)
    assert "copy latency 42.0 us" in text and "hand-over 17.0 us" in text and "1.500x slower" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_inputs_are_measured_on_a_gpu_platform_only_where_its_gpus_are():
    from hetsim.runtime.validation.inputs import why_not_measured

    assert why_not_measured(Platform.preset("cpu2")) is None
    why = why_not_measured(Platform.preset("xeon-p2200"))
    assert why is not None and "0 CUDA GPU" in why and "'gpu'" in why


def test_device_profilers_profile_each_device_alone_into_a_cost_spec(tmp_path):
    from hetsim import costmodel
    from hetsim.runtime.backends.tvm_backend import import_model
    from hetsim.runtime.validation.context_profile import DeviceProfilers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = import_model("squeezenet1_1", image_size=32)
    profs = DeviceProfilers(tmp_path / "profile", {"cpu0": "cpu@1", "cpu1": "cpu@1"})
    both = profs.add(model.graph, model, warmup=1)
    both.run(2)
    assert [len(ex.runs) for ex in both.executions] == [2, 2]  # one execution per device, each run
    spec = profs.write()
    assert spec == f"cpu0={tmp_path / 'profile' / 'cpu0'},cpu1={tmp_path / 'profile' / 'cpu1'}"
    for name in ("cpu0", "cpu1"):
        ops = pd.read_csv(tmp_path / "profile" / name / "ops.csv")
        assert len(ops) > 0 and (ops["time_s"] > 0).all() and set(ops["timer"]) == {"in-context"}
        assert json.loads((tmp_path / "profile" / name / "dispatch.json").read_text())["cpu@1"] > 0
    cost = costmodel.from_spec(spec, platform=Platform.preset("cpu2"))
    assert cost.describe() == spec
    plat = Platform.preset("cpu2")
    n = model.graph.topological_order()[0]
    assert cost.op_time(model.graph, n, plat.device("cpu0")) > 0
    with pytest.raises(ValueError, match="cannot name a profile folder"):
        DeviceProfilers(tmp_path / "p2", {"a,b": "cpu@1"})


def test_the_h100_validation_figure_redraws_from_its_results(tmp_path, capsys):
    """``experiments/validation_h100``: the platform of the lent machine loads, and
    plot.py draws the committed rows and prints each run's error statistics."""
    import importlib.util
    from pathlib import Path

    here = Path(__file__).resolve().parents[1] / "experiments" / "validation_h100"
    box = Platform.load(here / "h100-box.toml")
    assert box.device("cpu").threads == 8 and box.device("gpu").streams == 1 and box.device("gpu").cost is None
    spec = importlib.util.spec_from_file_location("validation_h100_plot", here / "plot.py")
    plot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plot)
    assert plot.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "validation_h100.png").stat().st_size > 10_000
    df = pd.read_csv(here / "results.csv")
    ok = df[(df["status"] == "ok") & (df["run"] == "3-in-run-host")]
    mean = ok["error_pct"].abs().mean()
    out = capsys.readouterr().out
    assert f"3-in-run-host: {len(ok)} plans, mean |error| {mean:.1f} %" in out
    assert set(df["run"]) == {"1-profile", "2-in-run", "3-in-run-host"}


# ------------------------------------------------------------------ launch modes, the fresh calibration
def test_plan_launch_is_graph_by_default_and_eager_where_graphs_cannot_run():
    from hetsim.costmodel.platform import PlatformError
    from hetsim.runtime.validation.cuda_host import plan_launch
    from hetsim.runtime.validation.replay import RecordedPolicy
    from hetsim.sim.plan import Plan

    plat, g = Platform.preset("xeon-p2200"), _chain()
    mixed = crossing_plan(g, ("cpu", "gpu"))
    cpu_only = Plan(dict.fromkeys(g.nx, "cpu"))
    dynamic = Plan(placement={}, policy=RecordedPolicy(dict.fromkeys(g.nx, "gpu")))
    assert plan_launch(cpu_only, plat, None) == (None, "")
    assert plan_launch(mixed, plat, None) == ("graph", "")
    assert plan_launch(mixed, plat, "eager") == ("eager", "")
    assert plan_launch(mixed, plat, "graph", backend="tvm") == (
        "eager", "launched eagerly: CUDA graphs are captured for the torch backend, not tvm")
    assert plan_launch(dynamic, plat, "graph") == (
        "eager", "launched eagerly: a dynamic plan places its ops at run time (no segment to capture)")
    with pytest.raises(PlatformError, match=r"unknown launch mode 'fast'; modes: \['eager', 'graph'\]"):
        plan_launch(mixed, plat, "fast")


def test_with_launch_sets_the_gpu_devices_only():
    from hetsim.runtime.validation.cuda_host import with_launch

    plat = Platform.preset("xeon-p2200")
    out = with_launch(plat, "eager")
    assert out.device("gpu").launch == "eager" and out.device("cpu").launch is None
    assert with_launch(plat, None) is plat


def test_host_model_calibrates_a_cuda_platform_behind_a_fake_device(tmp_path, monkeypatch):
    import importlib

    from fake_cuda import GRAPH, HANDOVER, FakeCuda

    from hetsim.runtime.validation.cuda_host import host_model

    calibrate_module = importlib.import_module("hetsim.runtime.calibration.calibrate")  # the package's name is the function

    dev = FakeCuda()
    monkeypatch.setattr(calibrate_module, "cuda_device", lambda index: (dev, None))
    lines: list[str] = []
    plat, line = host_model(Platform.preset("xeon-p2200"), None, tmp_path, lines.append, clock=dev.clock,
                            calls=5, repeats=1)
    gpu = plat.device("gpu")
    assert (gpu.launch, gpu.graph_launch_s) == ("graph", pytest.approx(GRAPH, rel=1e-9))
    assert plat.device("cpu").handoff_s == pytest.approx(HANDOVER, rel=1e-6)
    assert plat.calibration["machine"].endswith("| Fake H100") and not plat.memory_domains
    assert line.startswith(f"calibrated in this run ({tmp_path / 'calibration' / 'platform.toml'}): launch, ")
    assert line.endswith("no 'two workers active' memory domain")
    assert Platform.from_toml(tmp_path / "calibration" / "platform.toml") == plat
    assert lines[0] == "calibrating: CPU op call per family" and "calibrating: CUDA-graph replay" in lines
    cpu2 = Platform.preset("cpu2")
    assert host_model(cpu2, None, tmp_path, None) == (cpu2, None)


# ------------------------------------------------------------------ dynamic plans: the decisions the run made
def test_recorded_plan_places_and_orders_as_the_run_did():
    from hetsim import schedulers
    from hetsim.runtime.validation.replay import recorded_plan
    from hetsim.sim.plan import PlanError

    g, plat = _chain(), Platform.preset("xeon-p2200")
    recs = [_op("a", "cpu", 0.0, 1.0), _op("b", "gpu", 2.0, 3.0), _op("c", "gpu", 3.0, 4.0),
            _op("d", "cpu", 5.0, 6.0), _copy("b", "cpu", 4.0, 5.0, 10),
            {**_op("c", "cpu", 13.0, 14.0), "request": 1}, {**_op("c", "gpu", 23.0, 24.0), "request": 2}]
    plan = recorded_plan(g, recs, {"scheduler": "dynamic"})
    assert plan.policy.placement == {"a": "cpu", "b": "gpu", "c": "gpu", "d": "cpu"}  # c: 2 of its 3 requests
    assert plan.priority == {"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0}
    assert plan.meta == {"scheduler": "dynamic", "recorded_from": "run"}
    sim = schedulers.run_plan(g, plat, plan, "roofline", record=True).result
    placed = {r["node"]: r["resource"] for r in sim.records if r["kind"] == "op"}
    assert placed == plan.policy.placement
    with pytest.raises(PlanError, match=r"no op of node\(s\) \['d'\]"):
        recorded_plan(g, recs[:3])
    from hetsim.runtime.validation.replay import as_static

    static = as_static(plan)
    assert static.policy is None and static.placement == plan.policy.placement
    assert static.priority == plan.priority and as_static(static) is static
    static.validate(g, plat)


def test_a_dynamic_plan_is_simulated_with_its_runs_decisions():
    from types import SimpleNamespace

    from hetsim import schedulers
    from hetsim.runtime.validation.replay import RecordedPolicy, simulate_as_run

    g, plat = _chain(), Platform.preset("xeon-p2200")
    run = schedulers.get("dynamic").run(g, plat, "roofline", record=True)
    measured = SimpleNamespace(records=[_op(n, "cpu", float(i), i + 0.5) for i, n in enumerate("abcd")], placement={})
    again, note = simulate_as_run(run, measured, plat, "roofline", requests=None, seed=None, again=False)
    assert isinstance(again.plan.policy, RecordedPolicy) and note == (
        "simulated with the placements and order of its measured median run")
    assert {r["resource"] for r in again.result.records if r["kind"] == "op"} == {"cpu"}
    static = schedulers.get("all-cpu").run(g, plat, "roofline", record=True)
    assert simulate_as_run(static, measured, plat, "roofline", requests=None, seed=None, again=False) == (static, "")


# ------------------------------------------------------------------ benchmarks/gpu_validation.py
def _benchmark():  # noqa: ANN202
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_validation.py"
    spec = importlib.util.spec_from_file_location("gpu_validation", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gpu_validation_targets_from_the_parts_csvs(tmp_path):
    bench = _benchmark()
    card = "NVIDIA H200"
    bench.write_csv(tmp_path / "replay.csv", [
        {"model": "googlenet", "ratio": 1.2, "spread_pct": 1.5, "card": card},
        {"model": "resnet18", "ratio": 1.3, "spread_pct": 4.0, "card": card}])
    ok = {"status": "ok", "card": card}
    bench.write_csv(tmp_path / "validate-graph-b1.csv", [
        {**ok, "model": "googlenet", "batch": 1, "error_pct": -2.0, "kendall_tau": 0.95},
        {**ok, "model": "googlenet", "batch": 1, "error_pct": 6.0, "kendall_tau": 0.95},
        {"status": "skipped", "model": "googlenet", "batch": 1, "error_pct": "", "kendall_tau": "", "card": card}])
    bench.write_csv(tmp_path / "validate-eager-b8.csv", [
        {**ok, "model": "resnet18", "batch": 8, "error_pct": 9.0, "kendall_tau": 1.0}])
    rows = {r["target"].split(":")[0].split(" within")[0]: r for r in bench.targets(tmp_path)}
    assert [(r["status"], r["figure"]) for r in rows.values()] == [
        ("missed", "googlenet 1.20x, resnet18 1.30x"),
        ("met", "googlenet 1.5%, resnet18 4.0%"),
        ("met", "googlenet b1 mean 4.0% max 6.0% tau 0.95"),
        ("missed", "resnet18 b8 mean 9.0% max 9.0% tau 1.00"),
        ("not measured", "run python benchmarks/validate_cpu2.py on a quiet CPU host")]
    assert {r["card"] for r in list(rows.values())[:4]} == {card}


@pytest.mark.slow
def test_gpu_validation_dry_run_writes_its_results_folder(tmp_path, capsys):
    """Four parts of the GPU validation benchmark on the virtual GPU: minutes on two busy cores."""
    bench = _benchmark()
    out = tmp_path / "res"
    assert bench.main(["--dry-run", "--out", str(out), "--parts", "smoke,calibration,replay,validate-graph-b1",
                       "--budget-s", "1200"]) == 0  # a cap: a busy machine must not time a part out
    printed = capsys.readouterr().out
    parts = bench.read_csv(out / "parts.csv")
    assert [(p["part"], p["status"]) for p in parts] == [("smoke", "ok"), ("calibration", "ok"), ("replay", "ok"),
                                                         ("validate-graph-b1", "ok")]
    assert [r["check"] for r in bench.read_csv(out / "smoke.csv")] == [
        "mixed plan, graph mode", "mixed plan, eager mode, traced", "two GPU segments ready together on two streams"]
    (replay,) = bench.read_csv(out / "replay.csv")
    assert replay["model"] == "squeezenet1_1" and replay["baseline"] == "sequential calls"
    assert float(replay["ratio"]) == pytest.approx(float(replay["executor_ms"]) / float(replay["whole_model_ms"]))
    table = bench.read_csv(out / "validate-graph-b1.csv")
    assert {r["scheduler"] for r in table} == {"all-cpu", "heft", "dynamic"}
    dyn = next(r for r in table if r["scheduler"] == "dynamic")
    assert "simulated with the placements and order of its measured median run" in dyn["note"]
    from hetsim import schedulers

    plan = schedulers.load_plan(out / "validate-graph-b1" / "squeezenet1_1" / "squeezenet1_1" / "dynamic" / "plan.json")
    assert plan.policy is None and plan.meta["recorded_from"] == "run" and plan.placement  # the run's decisions
    assert (out / "calibration" / "platform.toml").is_file()
    summary = bench.read_csv(out / "summary.csv")
    assert [r["status"] for r in summary][-2:] == ["not measured", "not measured"]  # eager part not run; cpu2
    assert printed.count("\n") >= len(summary) and "results in" in printed
    # a part the overall budget cannot fit is recorded as skipped, the rest kept
    assert bench.main(["--dry-run", "--out", str(out), "--parts", "replay", "--budget-s", "1"]) == 1
    assert bench.read_csv(out / "parts.csv") == [
        {"part": "replay", "status": "skipped", "seconds": "0.0", "note": "the overall budget was spent"}]
    assert bench.read_csv(out / "replay.csv") == [replay]


def test_host_costs_run_from_a_pick_to_the_workers_next_pick():
    """An eager run's host cost per GPU op: its worker's pick to its next pick (the
    bookkeeping between launches included), the last op to its launch's return."""
    from hetsim.runtime.executor.result import host_costs

    def rec(node, stream, start, end):
        return {"kind": "dispatch", "node": node, "stream": stream, "start": start, "end": end}

    records = [rec("b", 0, 30e-6, 52e-6), rec("a", 0, 0.0, 21e-6), rec("c", 0, 61e-6, 80e-6),
               rec("x", 1, 5e-6, 9e-6), {"kind": "op", "node": "a", "stream": 0, "start": 0.0, "end": 1.0}]
    got = host_costs(records)
    assert got == pytest.approx({"a": 30e-6, "b": 31e-6, "c": 19e-6, "x": 4e-6})
