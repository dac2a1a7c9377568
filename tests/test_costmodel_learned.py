"""Learned cost models (Table, Polynomial, XGBoost), the measured CostModel glue,
costmodel.fit/load/from_spec, and the leave-one-model-out evaluation and its CLI.

Everything runs on synthetic profiles whose kernel times follow a known formula:
``time = a[op] * flops + b[op] * bytes + c[op]`` per device.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hetsim import costmodel, graphs
from hetsim.costmodel import CostModelError
from hetsim.costmodel.learned.measured import CostModelWarning, MeasuredCostModel, NotFittedError
from hetsim.costmodel.learned.polynomial import Polynomial
from hetsim.costmodel.learned.table import Table
from hetsim.costmodel.learned.xgb import XGBoost
from hetsim.costmodel.platform import Device, Link, Platform
from hetsim.costmodel.profile_reader import read_profile
from hetsim.costmodel.profile_writer import write_profile
from hetsim.graphs import Graph

# seconds per FLOP, seconds per byte, seconds: per device, per op kind
COEF = {
    "cpu": {"conv2d": (1 / 4e10, 1 / 8e9, 4e-6), "matmul": (1 / 6e10, 1 / 1e10, 3e-6),
            "add": (0.0, 1 / 6e9, 2e-6), "relu": (0.0, 1 / 7e9, 1.5e-6)},
    "cuda:0": {"conv2d": (1 / 2e12, 1 / 2e11, 8e-6), "matmul": (1 / 3e12, 1 / 2e11, 7e-6),
               "add": (0.0, 1 / 1.5e11, 6e-6), "relu": (0.0, 1 / 1.6e11, 6e-6)},
}
KINDS = {"cpu": "cpu", "cuda:0": "gpu"}
MODELS = ["netA", "netB", "netC", "netD"]
FAST_XGB = {"n_estimators": 150, "max_depth": 4, "learning_rate": 0.15}


def _t(*shape: int) -> tuple[list[int], str]:
    return (list(shape), "float32")


def formula(device: str, op: str, flops: float, nbytes: float) -> float:
    a, b, c = COEF[device][op]
    return a * flops + b * nbytes + c


def synthetic_graph(name: str, rng: np.random.Generator, n_blocks: int = 10) -> Graph:
    """A chain of conv2d -> add -> relu -> matmul blocks with random shapes
    (shapes drawn from small sets, so models share some signatures)."""
    g = Graph(name=name, meta={"granularity": "op"})
    prev = None
    for i in range(n_blocks):
        c, k = int(rng.choice([8, 16, 32, 64])), int(rng.choice([8, 16, 32, 64]))
        hw, ks = int(rng.choice([7, 14, 28])), int(rng.choice([1, 3]))
        m, kk, n = (int(rng.choice([1, 4, 16, 64])), int(rng.choice([64, 128, 256, 512])),
                    int(rng.choice([64, 128, 256])))
        ca, cr = (int(rng.choice([8, 12, 16, 24, 32, 48, 64, 96])) for _ in range(2))
        ha, hr = (int(rng.choice([7, 14, 28, 56])) for _ in range(2))
        nodes = [
            (f"conv{i}", "conv2d", [_t(1, c, hw, hw), _t(k, c, ks, ks)], [_t(1, k, hw, hw)],
             2.0 * k * c * ks * ks * hw * hw, {"strides": [1, 1], "padding": [ks // 2] * 4, "groups": 1}),
            (f"add{i}", "add", [_t(1, ca, ha, ha), _t(1, ca, ha, ha)], [_t(1, ca, ha, ha)], float(ca * ha * ha), {}),
            (f"relu{i}", "relu", [_t(1, cr, hr, hr)], [_t(1, cr, hr, hr)], float(cr * hr * hr), {}),
            (f"mm{i}", "matmul", [_t(m, kk), _t(kk, n)], [_t(m, n)], 2.0 * m * kk * n, {}),
        ]
        for node, op, ins, outs, flops, attrs in nodes:
            g.add_op(node, op, inputs=ins, outputs=outs, flops=flops, attrs=attrs,
                     param_bytes=4 * int(np.prod(ins[1][0])) if op in ("conv2d", "matmul") else 0)
            if prev is not None:
                g.add_edge(prev, node, bytes=4096)
            prev = node
    return g


def synthetic_rows(graphs_: list[Graph], *, noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """ops.csv rows for every distinct signature of ``graphs_`` on both devices."""
    rng = np.random.default_rng(seed)
    first: dict[str, tuple[str, str, pd.Series]] = {}
    members: dict[str, list[str]] = {}
    for g in graphs_:
        for node, row in graphs.features(g).iterrows():
            first.setdefault(row["signature"], (g.name, node, row))
            members.setdefault(row["signature"], [])
            if g.name not in members[row["signature"]]:
                members[row["signature"]].append(g.name)
    rows = []
    for device, kind in KINDS.items():
        for sig, (model, node, f) in first.items():
            t = formula(device, f["op"], f["flops"], f["bytes"]) * (1 + noise * rng.standard_normal())
            rows.append({"signature": sig, "device": device, "device_kind": kind, "backend": "torch",
                         "model": model, "node": node, "batch": 1, "models": ";".join(members[sig]),
                         "op": f["op"], "time_s": t, "p10_s": 0.95 * t, "p90_s": 1.05 * t, "repeats": 20,
                         **{c: f[c] for c in graphs.FEATURE_COLUMNS}})
    return pd.DataFrame(rows)


def manifest(models: list[str]) -> dict:
    return {"hetsim_profile": 2, "name": "synthetic", "date": "2026-11-22T03:30:00Z",
            "machine": {"hostname": "test", "cpu_model": "synthetic", "cpu_cores": 2},
            "libraries": {"hetsim": "0.1.0"}, "backend": "torch",
            "devices": [{"name": "cpu", "kind": "cpu", "torch_device": "cpu", "threads": 1},
                        {"name": "cuda:0", "kind": "gpu", "torch_device": "cuda:0"}],
            "models": models, "batches": [1], "granularity": "op"}


LINK_FITS = {"cpu->cuda:0": {"latency_s": 1e-5, "bandwidth_bytes_per_s": 1e10, "pinned": True},
             "cuda:0->cpu": {"latency_s": 2e-5, "bandwidth_bytes_per_s": 5e9, "pinned": True},
             "duplex": True}
DISPATCH = {"cpu": 1.2e-5, "cuda:0": 6e-6}


@pytest.fixture(scope="module")
def model_graphs() -> list[Graph]:
    rng = np.random.default_rng(7)
    return [synthetic_graph(m, rng, n_blocks=12) for m in MODELS]


@pytest.fixture(scope="module")
def profile_dir(tmp_path_factory: pytest.TempPathFactory, model_graphs: list[Graph]) -> Path:
    path = tmp_path_factory.mktemp("prof") / "synthetic"
    write_profile(path, manifest(MODELS), synthetic_rows(model_graphs), link_fits=LINK_FITS, dispatch=DISPATCH)
    return path


@pytest.fixture(scope="module")
def profile(profile_dir: Path) -> costmodel.Profile:
    return read_profile(profile_dir)


def _split(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(n)
    return perm[: int(0.75 * n)], perm[int(0.75 * n):]


def _truth(rows: pd.DataFrame) -> np.ndarray:
    return np.array([formula(d, o, f, b) for d, o, f, b in zip(rows["device"], rows["op"], rows["flops"], rows["bytes"])])


# --------------------------------------------------------------------- Polynomial
def test_polynomial_recovers_the_formula_within_1_percent(profile: costmodel.Profile) -> None:
    rows = profile.ops
    tr, te = _split(len(rows))
    poly = Polynomial().fit(rows.iloc[tr], rows["time_s"].iloc[tr])
    err = np.abs(poly.predict(rows.iloc[te]) / _truth(rows.iloc[te]) - 1)
    assert err.max() < 0.01
    sel = poly.selection()
    # exact linear data: the linear raw form is chosen for every op kind that has its own fit
    own = sel[(sel["op"] != "*") & ~sel["op"].str.startswith("family:")]
    assert set(own["op"]) == {"conv2d", "add", "relu", "matmul"}
    # and a fallback form per kernel family, for op kinds of a family not seen in training
    assert set(sel.loc[sel["op"].str.startswith("family:"), "op"]) == {"family:gemm", "family:binary",
                                                                     "family:unary"}
    assert (own["space"] == "raw").all() and (own["degree"] == 1).all()


def test_polynomial_with_noise_and_global_fallback(profile: costmodel.Profile, model_graphs: list[Graph]) -> None:
    noisy = synthetic_rows(model_graphs, noise=0.003, seed=3)
    keep = noisy[(noisy["op"] != "relu") | (noisy.index % 40 == 0)]  # relu: too few samples
    poly = Polynomial(min_samples=8).fit(keep, keep["time_s"])
    clean = profile.ops
    pred = poly.predict(clean)
    not_relu = (clean["op"] != "relu").to_numpy()
    assert np.max(np.abs(pred[not_relu] / _truth(clean)[not_relu] - 1)) < 0.01
    reasons = poly.fallback_reasons(clean)
    assert all(("'relu'" in r and "global polynomial" in r) == (op == "relu") for r, op in zip(reasons, clean["op"]))
    assert np.all(pred > 0)


def test_polynomial_predictions_are_positive_far_outside_the_data(profile: costmodel.Profile) -> None:
    poly = Polynomial().fit(profile.ops, profile.ops["time_s"])
    odd = profile.ops.head(4).copy()
    odd["flops"], odd["bytes"] = 0.0, 0.0
    assert np.all(poly.predict(odd) > 0)


# ------------------------------------------------------------------------ XGBoost
def test_xgboost_small_error_on_held_out_points(profile: costmodel.Profile) -> None:
    rows = profile.ops
    tr, te = _split(len(rows), seed=1)
    model = XGBoost(**FAST_XGB).fit(rows.iloc[tr], rows["time_s"].iloc[tr])
    pred = model.predict(rows.iloc[te])
    mape = np.mean(np.abs(pred / rows["time_s"].iloc[te].to_numpy() - 1))
    assert mape < 0.05
    assert model.devices_ == ["cpu", "cuda:0"]
    assert "op=conv2d" in model.columns_ and "family=unary" in model.columns_
    assert not {"in_degree", "out_degree", "depth"} & set(model.columns_)


def test_xgboost_save_load_round_trip_is_identical(profile: costmodel.Profile, tmp_path: Path) -> None:
    rows = profile.ops
    model = XGBoost(**FAST_XGB).fit(rows, rows["time_s"])
    path = model.save(tmp_path / "xgb.json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["xgb.0.xgb.json", "xgb.1.xgb.json", "xgb.json"]
    again = XGBoost.load(path)
    assert np.array_equal(again.predict(rows), model.predict(rows))
    assert again.get_params() == model.get_params()
    assert model.baseline_mode_ == "family" and model.groups_["cpu"]["gemm"]["kind"] == "sum"  # conv2d rows
    assert again.groups_ == model.groups_
    via_api = costmodel.load(path)
    assert np.array_equal(via_api.predict(rows), model.predict(rows))
    with pytest.raises(CostModelError, match="bare XGBoost predictor, not a cost model"):
        costmodel.from_spec(str(path))
    (tmp_path / "xgb.1.xgb.json").write_text("{broken")
    with pytest.raises(CostModelError, match="not an XGBoost JSON model"):
        XGBoost.load(path)
    (tmp_path / "xgb.1.xgb.json").unlink()
    with pytest.raises(CostModelError, match=r"booster file .*xgb\.1\.xgb\.json.* of device 'cuda:0' is missing"):
        XGBoost.load(path)
    path.write_text('{"hetsim_costmodel": 7}')
    with pytest.raises(CostModelError, match="'hetsim_costmodel' is 7"):
        costmodel.load(path)


def test_xgboost_is_seeded(profile: costmodel.Profile) -> None:
    rows = profile.ops
    a = XGBoost(**FAST_XGB, random_state=5).fit(rows, rows["time_s"]).predict(rows)
    b = XGBoost(**FAST_XGB, random_state=5).fit(rows, rows["time_s"]).predict(rows)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("cls", [Table, Polynomial, XGBoost])
def test_predict_before_fit_raises_and_init_only_stores(cls: type, profile: costmodel.Profile) -> None:
    model = cls()
    assert not model.is_fitted and not [k for k in vars(model) if k.endswith("_")]
    with pytest.raises(NotFittedError, match="not fitted"):
        model.predict(profile.ops)
    assert isinstance(NotFittedError("x"), CostModelError)


def test_fit_rejects_bad_inputs(profile: costmodel.Profile) -> None:
    rows = profile.ops
    with pytest.raises(CostModelError, match="lacks column"):
        Polynomial().fit(rows.drop(columns="bytes"), rows["time_s"])
    with pytest.raises(CostModelError, match="y has"):
        XGBoost().fit(rows, rows["time_s"].iloc[:3])
    bad = rows["time_s"].to_numpy().copy()
    bad[2] = np.nan
    with pytest.raises(CostModelError, match=r"y\[2\]"):
        Polynomial().fit(rows, bad)
    fitted = Polynomial().fit(rows[rows["device"] == "cpu"], rows.loc[rows["device"] == "cpu", "time_s"])
    with pytest.raises(CostModelError, match="cuda:0"):
        fitted.predict(rows)


# -------------------------------------------------------------------------- Table
def test_table_exact_lookup_and_recorded_fallback(profile: costmodel.Profile, model_graphs: list[Graph]) -> None:
    rows = profile.ops
    calls = profile.call_times()  # CPU rows: kernel + dispatch; the cost model takes the dispatch off again
    table = Table().fit(rows, calls)
    assert np.array_equal(table.predict(rows), calls)
    cost = MeasuredCostModel.from_profile(profile, table)
    cpu = Device("cpu0", "cpu", peak_flops=1e11, mem_bandwidth_bytes_per_s=1e10, memory_bytes=2**33)
    g = model_graphs[0]
    known = "conv0"
    sig = graphs.signature(g.nodes[known])
    measured = float(rows.loc[(rows["signature"] == sig) & (rows["device"] == "cpu"), "time_s"].iloc[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every node measured: no warning
        assert cost.op_time(g, known, cpu) == measured
    assert cost.coverage(g, cpu) == 1.0 and cost.fallbacks(g, cpu) == {}
    # an unmeasured signature: new shapes
    h = Graph(name="unseen")
    h.add_op("big", "conv2d", inputs=[_t(1, 48, 20, 20), _t(40, 48, 3, 3)], outputs=[_t(1, 40, 20, 20)],
             flops=2.0 * 40 * 48 * 9 * 400, attrs={"strides": [1, 1], "padding": [1] * 4, "groups": 1})
    h.add_op("r", "relu", inputs=[_t(1, 8, 7, 7)], outputs=[_t(1, 8, 7, 7)], flops=392.0)
    with pytest.warns(CostModelWarning, match=r"1 of 2 nodes of graph 'unseen'.*coverage 50\.0%"):
        t = cost.op_time(h, "big", cpu)
    f = graphs.features(h).loc["big"]
    assert t == pytest.approx(formula("cpu", "conv2d", f["flops"], f["bytes"]), rel=0.01)
    assert set(cost.fallbacks(h, cpu)) == {"big"}
    assert "signature not measured on cpu: Polynomial" in cost.fallbacks(h, cpu)["big"]
    assert cost.coverage(h, cpu) == 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per graph and device
        cost.op_time(h, "r", cpu)


def test_table_round_trip_with_xgboost_fallback(profile: costmodel.Profile, tmp_path: Path) -> None:
    rows = profile.ops
    table = Table(fallback=XGBoost(**FAST_XGB)).fit(rows, rows["time_s"])
    shifted = rows.copy()
    shifted["signature"] = shifted["signature"] + "x"  # all unmeasured: the fallback answers
    again = costmodel.load(table.save(tmp_path / "t.json"))
    assert isinstance(again, Table) and isinstance(again.fallback_, XGBoost)
    assert np.array_equal(again.predict(shifted), table.predict(shifted))
    assert np.array_equal(again.predict(rows), rows["time_s"].to_numpy())


# ------------------------------------------------------ measured CostModel glue
def _platform() -> Platform:
    cpu = Device("host", "cpu", peak_flops=1e11, mem_bandwidth_bytes_per_s=1e10, memory_bytes=2**34, dispatch_s=3e-5)
    gpu = Device("gpu", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=3e11, memory_bytes=2**33, dispatch_s=9e-6)
    return Platform("test", (cpu, gpu), (Link("host", "gpu", bandwidth_bytes_per_s=2e10, latency_s=3e-6),))


def test_measured_maps_devices_links_and_dispatch(profile: costmodel.Profile, model_graphs: list[Graph]) -> None:
    p = _platform()
    cost = costmodel.fit(profile, "polynomial", platform=p)
    assert isinstance(cost, costmodel.CostModel)
    host, gpu = p.device("host"), p.device("gpu")
    g = model_graphs[1]
    f = graphs.features(g).loc["mm3"]
    assert cost.op_time(g, "mm3", gpu) == pytest.approx(formula("cuda:0", "matmul", f["flops"], f["bytes"]), rel=0.01)
    assert cost.op_time(g, "mm3", host) == pytest.approx(formula("cpu", "matmul", f["flops"], f["bytes"]), rel=0.01)
    assert cost.dispatch_time(g, "mm3", host) == 1.2e-5 and cost.dispatch_time(g, "mm3", gpu) == 6e-6
    link = p.links[0]
    # both ends' kinds known: the profile's cpu->gpu fit, not the link's own numbers
    assert cost.transfer_time(10**6, link) == pytest.approx(1e-5 + 1e6 / 1e10)
    assert cost.transfer_time(10**6, link, src="gpu") == pytest.approx(2e-5 + 1e6 / 5e9)
    # a link between devices the model knows nothing about: its own numbers
    other = Link("x", "y", bandwidth_bytes_per_s=4e9, latency_s=1e-6)
    assert cost.transfer_time(4000, other) == pytest.approx(1e-6 + 1e-6)
    # without the platform, 'host' and 'gpu' are not profile device names: the link's
    # own numbers, whatever was priced before
    blind = costmodel.fit(profile, "polynomial")
    blind.op_time(g, "mm3", gpu)
    assert blind.transfer_time(10**6, link) == pytest.approx(3e-6 + 1e6 / 2e10)
    named = Link("cpu", "cuda:0", bandwidth_bytes_per_s=2e10, latency_s=3e-6)
    assert blind.transfer_time(10**6, named) == pytest.approx(1e-5 + 1e6 / 1e10)
    # explicit device map: the platform GPU priced like the profile CPU
    mapped = costmodel.fit(profile, "polynomial", device_map={"gpu": "cpu"})
    assert mapped.op_time(g, "mm3", gpu) == pytest.approx(cost.op_time(g, "mm3", host))
    with pytest.raises(CostModelError, match="device_map"):
        costmodel.fit(profile, "polynomial", device_map={"gpu": "tpu0"})


def test_device_missing_from_profile_uses_roofline(profile: costmodel.Profile, model_graphs: list[Graph]) -> None:
    cpu_only = profile.ops[profile.ops["device"] == "cpu"]
    cost = MeasuredCostModel.from_profile(profile, Polynomial().fit(cpu_only, profile.call_times(cpu_only)))
    gpu = _platform().device("gpu")
    g = model_graphs[2]
    with pytest.warns(CostModelWarning, match="no data for a gpu device"):
        t = cost.op_time(g, "conv1", gpu)
    assert t == costmodel.Roofline().op_time(g, "conv1", gpu)
    assert cost.coverage(g, gpu) == 0.0


def test_measured_save_load_and_from_spec(profile_dir: Path, model_graphs: list[Graph], tmp_path: Path) -> None:
    g = model_graphs[3]
    gpu = _platform().device("gpu")
    cost = costmodel.fit(profile_dir, "xgboost", **FAST_XGB)
    again = costmodel.load(cost.save(tmp_path / "m.json"))
    assert isinstance(again, MeasuredCostModel)
    assert [again.op_time(g, n, gpu) for n in g] == [cost.op_time(g, n, gpu) for n in g]
    assert again.transfer_time(10**6, _platform().links[0]) == cost.transfer_time(10**6, _platform().links[0])
    assert isinstance(costmodel.from_spec("roofline"), costmodel.Roofline)
    assert isinstance(costmodel.from_spec(str(tmp_path / "m.json")), MeasuredCostModel)
    spec = costmodel.from_spec(f"{profile_dir}:polynomial")
    assert isinstance(spec.predictor, Polynomial)
    with pytest.raises(CostModelError, match="expected 'default', 'roofline'"):
        costmodel.from_spec(str(tmp_path / "nowhere"))


def test_default_spec_is_table_with_xgboost_fallback(profile_dir: Path) -> None:
    cost = costmodel.from_spec(str(profile_dir))
    assert isinstance(cost.predictor, Table) and isinstance(cost.predictor.fallback_, XGBoost)


def test_op_time_caches_features_once_per_graph(profile: costmodel.Profile, model_graphs: list[Graph],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from hetsim.costmodel.learned import measured
    calls = []
    real = measured.features
    monkeypatch.setattr(measured, "features", lambda g: calls.append(g.name) or real(g))
    cost = costmodel.fit(profile, "polynomial")
    p = _platform()
    for g in model_graphs[:2]:
        for n in g:
            for d in p.devices:
                cost.op_time(g, n, d)
    assert calls == ["netA", "netB"]
    small = MeasuredCostModel.from_profile(profile, cost.predictor)
    small.cache_size = 1
    for g in model_graphs:
        small.op_time(g, "conv0", p.devices[0])
    assert len(small._graphs) == 1


def test_measured_model_inside_simulate(profile: costmodel.Profile, model_graphs: list[Graph]) -> None:
    from hetsim.sim import Plan, simulate

    cost = costmodel.fit(profile, "table", fallback="polynomial")
    p = _platform()
    g = model_graphs[0]
    nodes = list(g)
    res = simulate(g, p, Plan({n: "host" for n in nodes}), cost)
    host = p.device("host")
    kernels = sum(cost.op_time(g, n, host) for n in nodes)
    # a chain on one device: every op waits for its dispatch (serial host) and its kernel
    assert res.makespan == pytest.approx(kernels + len(nodes) * 1.2e-5, rel=1e-9)
    half = {n: ("gpu" if i >= len(nodes) // 2 else "host") for i, n in enumerate(nodes)}
    res2 = simulate(g, p, Plan(half), cost)
    assert res2.bytes_moved and res2.makespan > 0


# ------------------------------------------------------------------- evaluation
def test_evaluate_leave_one_model_out(profile: costmodel.Profile) -> None:
    points = costmodel.loo_predictions(profile, ("polynomial", "xgboost"), params={"xgboost": FAST_XGB})
    for m in MODELS:  # test rows are exactly the rows of the held-out model
        got = points[(points["held_out"] == m) & (points["predictor"] == "polynomial")]
        assert len(got) == int(profile.model_mask(m).sum())
    summary = costmodel.summarize(points)
    assert list(summary.columns) == ["predictor", "held_out", "device", "op", "n",
                                     "mape_pct", "median_ape_pct", "p90_ape_pct"]
    overall = summary[summary["op"] == "ALL"].set_index(["predictor", "held_out", "device"]).sort_index()
    assert set(overall.index.get_level_values("held_out")) == {*MODELS, "ALL"}
    assert (overall.loc["polynomial", "mape_pct"] < 1.0).all()  # the exact form of the data
    assert (overall.loc["xgboost", "mape_pct"] < 25.0).all()
    one = points[(points["predictor"] == "xgboost") & (points["held_out"] == "netB") & (points["device"] == "cpu")]
    row = overall.loc[("xgboost", "netB", "cpu")]
    assert row["n"] == len(one) and row["mape_pct"] == pytest.approx(one["ape_pct"].mean())
    assert row["p90_ape_pct"] == pytest.approx(np.quantile(one["ape_pct"], 0.9))


def test_evaluate_needs_two_models(profile_dir: Path, tmp_path: Path) -> None:
    prof = read_profile(profile_dir)
    only = prof.ops.assign(models="netA")
    write_profile(tmp_path / "one", manifest(["netA"]), only)
    with pytest.raises(CostModelError, match="at least two models"):
        costmodel.evaluate(tmp_path / "one")


def test_cli_eval_writes_its_four_files_together(profile_dir: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``costmodel eval`` wrote its files one by one: a failure at the plots (a full disk)
    left a new ``eval.csv`` beside the old plots."""
    from hetsim.costmodel.learned import evaluate
    from hetsim.experiments.cli.main import main

    out = tmp_path / "ev"
    assert main(["costmodel", "eval", str(profile_dir), "--out", str(out), "--kinds", "polynomial"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["eval.csv", "eval.pdf", "eval.png", "eval_points.csv"]

    def full_disk(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(evaluate, "plot_eval", full_disk)
    assert main(["costmodel", "eval", str(profile_dir), "--out", str(out), "--kinds", "polynomial,table"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_cli_eval_and_fit(profile_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from hetsim.experiments.cli import costmodel as cli_costmodel
    parser = argparse.ArgumentParser(prog="hetsim")
    cli_costmodel.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "ev"
    args = parser.parse_args(["costmodel", "eval", str(profile_dir), "--out", str(out), "--kinds", "polynomial"])
    assert cli_costmodel.run(args) == 0
    text = capsys.readouterr().out
    assert "polynomial MAPE%" in text and "device cuda:0" in text and "held-out MAPE" in text
    assert sorted(p.name for p in out.iterdir()) == ["eval.csv", "eval.pdf", "eval.png", "eval_points.csv"]
    ev = pd.read_csv(out / "eval.csv")
    assert list(ev.columns) == ["predictor", "held_out", "device", "op", "n",
                                "mape_pct", "median_ape_pct", "p90_ape_pct"]
    assert set(ev["held_out"]) == {*MODELS, "ALL"} and set(ev["device"]) == {"cpu", "cuda:0"}
    assert (out / "eval.png").read_bytes()[:4] == b"\x89PNG" and (out / "eval.pdf").read_bytes()[:4] == b"%PDF"
    model_file = tmp_path / "poly.json"
    args = parser.parse_args(["costmodel", "fit", str(profile_dir), "--kind", "polynomial", "--out", str(model_file)])
    assert cli_costmodel.run(args) == 0
    assert "raw" in capsys.readouterr().out
    assert isinstance(costmodel.load(model_file), MeasuredCostModel)
    with pytest.raises(SystemExit):
        parser.parse_args(["costmodel", "eval", str(profile_dir), "--kinds", "forest"])


# ------------------------------------------------------------- per-call targets
def test_call_times_add_the_dispatch_to_cpu_rows_only(profile: costmodel.Profile) -> None:
    t = profile.call_times()
    cpu = (profile.ops["device"] == "cpu").to_numpy()
    np.testing.assert_allclose(t[cpu], profile.ops["time_s"].to_numpy()[cpu] + DISPATCH["cpu"])
    np.testing.assert_allclose(t[~cpu], profile.ops["time_s"].to_numpy()[~cpu])
    assert profile.call_overhead() == {"cpu": DISPATCH["cpu"]}


def test_call_times_prefer_the_raw_wall_time_and_pricing_takes_the_dispatch_off(
    tmp_path: Path, model_graphs: list[Graph]
) -> None:
    rows = synthetic_rows(model_graphs)
    cpu = (rows["device"] == "cpu").to_numpy()
    rows["dispatch_s"] = np.where(cpu, 3e-6, 0.0)
    rows["wall_s"] = rows["time_s"] + rows["dispatch_s"]
    # row 0 (cpu): a kernel too short to tell from the dispatch: time_s at the
    # profiler's floor, the raw median per call kept in wall_s
    assert cpu[0]
    rows.loc[0, ["time_s", "wall_s"]] = [1e-8, 2.5e-6]
    write_profile(tmp_path / "p", manifest(MODELS), rows, dispatch=DISPATCH)
    prof = read_profile(tmp_path / "p")
    t = prof.call_times()
    assert t[0] == 2.5e-6
    np.testing.assert_allclose(t[cpu][1:], rows["wall_s"].to_numpy()[cpu][1:])
    np.testing.assert_allclose(t[~cpu], rows["time_s"].to_numpy()[~cpu])
    assert prof.call_overhead() == {"cpu": 3e-6}  # what the rows hold, not dispatch.json
    cost = costmodel.fit(prof, "table")
    assert cost.call_overhead == {"cpu": 3e-6}
    g = next(x for x in model_graphs if x.name == rows.loc[5, "model"])
    host = Device("cpu", "cpu", peak_flops=1e11, mem_bandwidth_bytes_per_s=1e10, memory_bytes=2**34)
    assert cost.op_time(g, rows.loc[5, "node"], host) == pytest.approx(rows.loc[5, "time_s"], rel=1e-9)
    g0 = next(x for x in model_graphs if x.name == rows.loc[0, "model"])
    assert cost.op_time(g0, rows.loc[0, "node"], host) == pytest.approx(1e-9)  # never negative
    again = costmodel.load(cost.save(tmp_path / "cost.json"))
    assert again.call_overhead == {"cpu": 3e-6}


def _elementwise_rows(sizes: list[int], *, view_time: float = 2e-6) -> pd.DataFrame:
    """relu rows (time = 2 us + bytes / 10 GB/s) and reshape rows (a view: 2 us)."""
    g = Graph(name="sizes", meta={"granularity": "op"})
    for n in sizes:
        g.add_op(f"relu{n}", "relu", inputs=[_t(1, n)], outputs=[_t(1, n)], flops=float(n))
        g.add_op(f"view{n}", "reshape", inputs=[_t(1, n)], outputs=[_t(n, 1)], attrs={"shape": [n, 1]})
    f = graphs.features(g).reset_index(drop=True)
    f["device"] = "cpu"
    f["t"] = np.where(f["op"] == "relu", 2e-6 + f["bytes"] / 1e10, view_time)
    return f


def test_xgboost_roofline_baseline_extrapolates_and_views_cost_their_call() -> None:
    train = _elementwise_rows([2**k for k in range(8, 20)])
    test = _elementwise_rows([2**22, 2**24])
    model = XGBoost(**FAST_XGB).fit(train, train["t"])
    pred = model.predict(test)
    relu = (test["op"] == "relu").to_numpy()
    # 4x and 16x larger than any training relu: within 25 % through the baseline
    assert np.all(np.abs(pred[relu] / test["t"].to_numpy()[relu] - 1) < 0.25)
    # views: their training rows' time whatever the size
    np.testing.assert_allclose(pred[~relu], 2e-6)
    # trees alone stay at the largest training time: 4x-16x too fast
    flat = XGBoost(**FAST_XGB, baseline="none").fit(train, train["t"]).predict(test)
    assert np.all(flat[relu] < 0.4 * test["t"].to_numpy()[relu])
    assert model.baseline_mode_ == "family" and model.view_time_["cpu"]["reshape"] == pytest.approx(2e-6)
    with pytest.raises(CostModelError, match="baseline must be"):
        XGBoost(baseline="quadratic")


def test_xgboost_state_of_the_linear_baseline_still_loads(
    profile: costmodel.Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = profile.ops
    with monkeypatch.context() as m:  # fitted when the derived inputs were the first 7
        m.setattr(costmodel.learned.xgb, "DERIVED_FEATURES", list(costmodel.learned.xgb._DERIVED_V1))
        legacy = XGBoost(**FAST_XGB, baseline=True).fit(rows, rows["time_s"])
    assert legacy.baseline_mode_ == "linear"
    state = legacy.get_state()
    for key in ("baseline_mode", "derived", "view_time", "groups"):  # what a model saved before them lacks
        state["fitted"].pop(key)
    state["fitted"]["derived"] = True  # (this one had the derived inputs)
    again = costmodel.learned.measured.predictor_from_state(state)
    assert again.derived_ == costmodel.learned.xgb._DERIVED_V1 and again.groups_ == {}
    assert np.array_equal(again.predict(rows), legacy.predict(rows))
    roof = XGBoost(**FAST_XGB, baseline="roofline").fit(rows, rows["time_s"])  # before the family baselines
    state = roof.get_state()
    assert state["fitted"].pop("groups") == {}
    assert np.array_equal(costmodel.learned.measured.predictor_from_state(state).predict(rows), roof.predict(rows))


def test_polynomial_is_proportional_beyond_its_data() -> None:
    rows = _elementwise_rows([2**k for k in range(8, 20)])
    relu = rows[rows["op"] == "relu"]
    poly = Polynomial(degrees=(3,), spaces=("log",)).fit(relu, relu["t"])
    far = _elementwise_rows([2**19, 2**23])
    far = far[far["op"] == "relu"]
    p = poly.predict(far)
    assert p[1] / p[0] == pytest.approx(far["bytes"].iloc[1] / far["bytes"].iloc[0], rel=1e-6)
    near = _elementwise_rows([2**4])
    assert poly.predict(near[near["op"] == "relu"])[0] == pytest.approx(poly.predict(relu.head(1))[0])


# ------------------------------------------------- XGBoost: derived kernel inputs
def _rows(*nodes: tuple[str, list, list, dict]) -> pd.DataFrame:
    """Feature rows of one graph of ``(op, input shapes, output shapes, attrs)`` nodes."""
    g = Graph(name="hand", meta={"granularity": "op"})
    for i, (op, ins, outs, attrs) in enumerate(nodes):
        g.add_op(f"n{i}", op, inputs=[_t(*s) for s in ins], outputs=[_t(*s) for s in outs], attrs=attrs)
    f = graphs.features(g).reset_index(drop=True)
    f["device"] = "cpu"
    return f


def _derived(rows: pd.DataFrame, name: str) -> np.ndarray:
    return costmodel.learned.xgb.derived_features(rows, [name])[:, 0]


def test_derived_math_calls_per_output_element() -> None:
    rows = _rows(("sigmoid", [[4, 256]], [[4, 256]], {}), ("relu", [[4, 256]], [[4, 256]], {}),
                 ("softmax", [[2, 8]], [[2, 8]], {"axis": -1}), ("gelu_tanh", [[1, 10]], [[1, 10]], {}),
                 ("fused:conv2d+sigmoid", [[1, 3, 8, 8], [4, 3, 3, 3]], [[1, 4, 6, 6]], {}))
    np.testing.assert_allclose(_derived(rows, "math_calls_per_out"), [1, 0, 1, 1, 0])
    np.testing.assert_allclose(_derived(rows, "log_math_calls"), np.log10([1 + 1024, 1, 1 + 16, 1 + 10, 1]))


def test_derived_copies_tells_views_from_copies() -> None:
    split = {"axis": 1, "indices_or_sections": [58]}
    rows = _rows(
        ("split", [[1, 116, 28, 28]], [[1, 58, 28, 28], [1, 58, 28, 28]], split),   # leading 1: a view
        ("split", [[4, 116, 28, 28]], [[4, 58, 28, 28], [4, 58, 28, 28]], split),   # batch 4: copies
        ("split", [[1, 768]], [[1, 256], [1, 512]], {"axis": -1, "indices_or_sections": [256]}),
        ("permute_dims", [[1, 2, 232, 7, 7]], [[1, 232, 2, 7, 7]], {"axes": [0, 2, 1, 3, 4]}),
        ("permute_dims", [[1, 256, 1]], [[1, 1, 256]], {"axes": [0, 2, 1]}),        # moves a 1 only
        ("broadcast_to", [[1, 12, 8, 8]], [[1, 12, 8, 8]], {"shape": [1, 12, 8, 8]}),
        ("broadcast_to", [[1, 1, 768]], [[4, 1, 768]], {"shape": [4, 1, 768]}),
        ("strided_slice", [[1, 10, 4]], [[1, 3, 4]], {"axes": [1], "begin": [2], "end": [5]}),
        ("strided_slice", [[2, 10, 4]], [[2, 3, 4]], {"axes": [1], "begin": [2], "end": [5]}),
        ("strided_slice", [[1, 10, 4]], [[1, 5, 4]], {"axes": [1], "begin": [0], "end": [10], "strides": [2]}),
        ("reshape", [[4, 6]], [[24]], {"shape": [24]}),
        ("relu", [[4, 6]], [[4, 6]], {}),
    )
    np.testing.assert_array_equal(_derived(rows, "copies"), [0, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 1])
    # without signatures only the reshape-like ops are known views
    np.testing.assert_array_equal(_derived(rows.drop(columns="signature"), "copies"), [1] * 10 + [0, 1])


def test_derived_depthwise_channel_alignment() -> None:
    def dw(c: int) -> tuple[str, list, list, dict]:
        return ("conv2d", [[1, c, 14, 14], [c, 1, 3, 3]], [[1, c, 14, 14]], {"groups": c, "padding": [1, 1]})

    rows = _rows(dw(58), dw(72), dw(96), dw(116), dw(160),
                 ("conv2d", [[1, 58, 14, 14], [64, 58, 1, 1]], [[1, 64, 14, 14]], {"groups": 1}),
                 ("relu", [[1, 58]], [[1, 58]], {}))
    # trailing zero bits of the channel count, at most 4 (a multiple of 16); -1 if not grouped
    np.testing.assert_array_equal(_derived(rows, "dw_channel_align"), [1, 3, 4, 2, 4, -1, -1])


def test_family_baselines_fit_their_own_fixed_cost_and_peak() -> None:
    from hetsim.costmodel.learned.xgb_features import fit_group_baselines, group_baseline, view_like

    nodes = []
    for i, c in enumerate((8, 16, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 448, 512, 640, 768, 896, 1024,
                           1152, 1280, 1536, 2048)):
        k = 3 + 2 * (i % 2)  # 3x3 and 5x5: FLOPs and bytes not proportional
        nodes.append(("conv2d", [[1, c, 14, 14], [c, 1, k, k]], [[1, c, 14, 14]], {"groups": c}))
        nodes.append(("max_pool2d", [[1, c, 28, 28]], [[1, c, 14, 14]], {"pool_size": [2, 2], "strides": [2, 2]}))
    nodes.append(("split", [[1, 64, 8, 8]], [[1, 32, 8, 8], [1, 32, 8, 8]], {"axis": 1, "indices_or_sections": [32]}))
    rows = _rows(*nodes)
    rows.loc[rows["op"] == "conv2d", "flops"] = 2.0 * rows["out_elems"] * rows["kernel_h"] ** 2
    rows.loc[rows["op"] == "max_pool2d", "flops"] = 4.0 * rows["out_elems"]
    fl, nb, dwconv, pool = rows["flops"], rows["bytes"], rows["op"] == "conv2d", rows["op"] == "max_pool2d"
    # depthwise: 60 us per call + 20 ps per FLOP + 50 ps per byte; max pool: 3 ns per FLOP
    t = np.where(dwconv, 60e-6 + 20e-12 * fl + 50e-12 * nb, np.where(pool, 1.5e-6 + 3e-9 * fl, 3e-6))
    dwconv, pool = dwconv.to_numpy(), pool.to_numpy()
    view = view_like(rows, copies_known=True)
    assert view.tolist() == [False] * (len(rows) - 1) + [True]  # the split of a batch-1 tensor
    groups = fit_group_baselines(rows, t, ~view, c0=1e-6, bandwidth=1e11)
    assert groups["dwconv"]["kind"] == "sum"
    np.testing.assert_allclose(groups["dwconv"]["coef"], [60e-6, 20e-12, 50e-12], rtol=1e-6)
    assert groups["pool"]["kind"] == "max" and groups["pool"]["coef"][2] == 1e-11   # the device's bandwidth
    assert groups["pool"]["coef"][1] == pytest.approx(3e-9, rel=0.02)                # its own compute peak
    assert "pool:max_pool2d" in groups                                               # 22 rows >= 10
    t0 = group_baseline(rows, np.full(len(rows), 1e-6), groups, view)
    np.testing.assert_allclose(t0[dwconv], t[dwconv], rtol=1e-6)
    np.testing.assert_allclose(t0[pool], t[pool], rtol=0.05)
    assert t0[-1] == 1e-6  # views keep the floor


def test_cli_eval_writes_under_out_not_into_the_profile(profile_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from hetsim.experiments.cli.main import main

    before = sorted(p.name for p in profile_dir.iterdir())
    monkeypatch.chdir(tmp_path)
    assert main(["costmodel", "eval", str(profile_dir), "--kinds", "polynomial", "--no-per-op"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in profile_dir.iterdir()) == before  # the (tracked) profile untouched
    out = tmp_path / "out" / "eval" / profile_dir.name
    assert sorted(p.name for p in out.iterdir()) == ["eval.csv", "eval.pdf", "eval.png", "eval_points.csv"]

