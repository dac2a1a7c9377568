"""The paper-figure experiments (``experiments/fig*/``): each run.py on a reduced grid,
the training-graph builder, the random-DAG generator, and each plot.py on its
committed ``results.csv``."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import matplotlib
import networkx as nx
import pandas as pd
import pytest

from hetsim.costmodel import Roofline
from hetsim.graphs import Graph
from hetsim.sim import Platform

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1] / "experiments"
FIGURES = ["fig1_cnn_partitioning", "fig2_rnn_timeslice", "fig3_pipeline_training",
           "fig4_googlenet_parallel", "fig5_optimality_gap", "fig6_sim_vs_measured"]  # fmt: skip


def load(figure: str, script: str) -> ModuleType:
    """Import ``experiments/<figure>/<script>.py`` under a unique module name."""
    name = f"_hetsim_{figure}_{script}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / figure / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def graph_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """One zoo graph cache for the whole module (imports happen once)."""
    monkeypatch.setenv("HETSIM_CACHE", str(tmp_path_factory.getbasetemp() / "graphs"))


# ------------------------------------------------------------------ run.py
def test_fig1_quick_runs_and_resumes(tmp_path: Path) -> None:
    run = load("fig1_cnn_partitioning", "run")
    df = run.run(run.quick_sweep(), tmp_path, workers=0, progress=False)
    assert sorted(df["scheduler"]) == ["all-cpu", "all-gpu", "cp-greedy"]
    assert (df["status"] == "ok").all() and (df["granularity"] == "fused").all()
    assert df["git_commit"].notna().all()
    t = df.set_index("scheduler")["makespan_s"]
    # cp-greedy simulates the best single-device placement too and keeps the best
    assert t["cp-greedy"] <= min(t["all-cpu"], t["all-gpu"]) * (1 + 1e-9)
    before = (tmp_path / "results.csv").read_text()
    again = run.run(run.quick_sweep(), tmp_path, workers=0, progress=False)
    assert (tmp_path / "results.csv").read_text() == before  # every row skipped
    assert list(again["point_id"]) == list(df["point_id"])
    plot = load("fig1_cnn_partitioning", "plot")
    gain = plot.single_device_gain(again)
    expected = (min(t["all-cpu"], t["all-gpu"]) / t["cp-greedy"] - 1) * 100
    assert gain["gain_pct"].iloc[0] == pytest.approx(expected)


def test_fig2_variants_and_quick_run(tmp_path: Path) -> None:
    run = load("fig2_rnn_timeslice", "run")
    variants = run.expand_variants({"base": {"layers": 2, "seq_len": 16, "hidden": 8},
                                    "layers": [1, 2, 4], "seq_len": [8, 16]})  # fmt: skip
    assert variants == [
        {"layers": 1, "seq_len": 16, "hidden": 8}, {"layers": 2, "seq_len": 16, "hidden": 8},
        {"layers": 4, "seq_len": 16, "hidden": 8}, {"layers": 2, "seq_len": 8, "hidden": 8},
    ]  # fmt: skip
    assert len(run.full_sweeps()) == 5
    df = run.run(run.quick_sweeps(), tmp_path, workers=0, progress=False)
    assert len(df) == 6 and (df["status"] == "ok").all()
    assert set(df["requests"]) == {1, 4}
    gains = load("fig2_rnn_timeslice", "plot").gains(df)
    assert len(gains) == 2 and set(gains["seq_len"]) == {3}
    r4 = df[(df["requests"] == 4)].set_index("scheduler")["makespan_s"]
    row = gains[gains["requests"] == 4].iloc[0]
    assert row["gain_pct"] == pytest.approx((min(r4["all-cpu"], r4["all-gpu"]) / r4["timeslice-pipeline"] - 1) * 100)


def test_fig3_quick_run(tmp_path: Path) -> None:
    run = load("fig3_pipeline_training", "run")
    name, configs = run.quick_configs()
    df = run.run(name, configs, tmp_path, workers=0)
    assert (df["status"] == "ok").all(), df["error"].tolist()
    by = df.set_index("plan")
    assert by.loc["all-gpu", "stages"] == 1 and by.loc["all-gpu", "stage_devices"] == "gpu0"
    # antichain-dp gives every device of multi-gpu-4 (4 GPUs and the host CPU) a stage
    assert by.loc["antichain-dp", "stages"] == 5
    assert by["nodes"].nunique() == 1 and by["nodes"].iloc[0] % 2 == 0  # fwd + mirrored bwd
    assert by.loc["all-gpu", "memory_overflows"] == 0
    rows = (tmp_path / "results.csv").read_text().count("\n")
    run.run(name, configs, tmp_path, workers=0)
    assert (tmp_path / "results.csv").read_text().count("\n") == rows  # resumed: nothing new
    only = run.gpus_only(Platform.preset("multi-gpu-4"))
    assert only.device_names == ["gpu0", "gpu1", "gpu2", "gpu3"] and only.host == "gpu0"
    assert len(only.links) == 6  # every GPU pair, no PCIe link to the CPU
    s = load("fig3_pipeline_training", "plot").speedups(df)
    assert set(s["plan"]) == {"antichain-dp", "antichain-dp-colocated"}
    assert (s["speedup"] > 1).all()


def test_fig4_quick_run(tmp_path: Path) -> None:
    run = load("fig4_googlenet_parallel", "run")
    assert len(run.full_sweep().points()) == 108
    df = run.run(run.quick_sweep(), tmp_path, workers=0, progress=False)
    assert (df["status"] == "ok").all()
    s = load("fig4_googlenet_parallel", "plot").speedups(df).set_index("scheduler")
    assert s.loc["all-gpu", "speedup"] == 1.0
    assert s.loc["by-path", "cpu_util"] > 0  # inception branches went to the CPU


def test_fig5_quick_run(tmp_path: Path) -> None:
    run = load("fig5_optimality_gap", "run")
    df = run.run(run.quick_config(), tmp_path, progress=False)
    assert len(df) == 8 and (df["status"] == "ok").all()
    opt = df[df["scheduler"] == "optimal"]
    assert (opt["opt_status"] == "OPTIMAL").all()
    assert (opt["opt_lower_bound_s"] <= opt["makespan_s"] * (1 + 1e-6)).all()
    gaps = load("fig5_optimality_gap", "plot").gaps(df)
    assert len(gaps) == 6 and set(gaps["reference"]) == {"optimum"}
    # no heuristic beats a proven optimum (zero dispatch is not assumed: allow 1 %)
    assert (gaps["gap_pct"] >= -1.0).all()


def test_fig6_reuses_a_validation_csv(tmp_path: Path) -> None:
    run = load("fig6_sim_vs_measured", "run")
    cfg = run.full_config()
    assert cfg.platform == "cpu2"
    rows = [{"model": "googlenet", "scheduler": s, "status": "ok", "simulated_s": 0.01 * (i + 1),
             "measured_s": 0.011 * (i + 1), "platform": "cpu2", "backend": "torch",
             "cost": "/somewhere/profiles/cpu2-torch-ctx"} for i, s in enumerate(["heft", "all-cpu"])]
    rows.append({**rows[0], "platform": "xeon-p2200"})
    path = tmp_path / "validation.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    table, source = run.reusable_rows(cfg, "googlenet", "profiles/cpu2-torch-ctx", [path])
    assert list(table["scheduler"]) == ["heft", "all-cpu"] and source == "hetsim validate --all (validation.csv)"
    assert run.reusable_rows(cfg, "googlenet", "roofline", [path]) is None
    assert run.reusable_rows(cfg, "resnet18", "profiles/cpu2-torch-ctx", [path]) is None
    # a validation that measured its inputs in its rounds (no --cost) is the cost "measured"
    assert cfg.costs == ["measured"] and cfg.model_args == {"bert_base": {"seq_len": 32}}
    measured = [{**r, "cost": "in-context out/v/profile (planned with in-context, measured in this run)"}
                for r in rows[:2]]
    pd.DataFrame(measured).to_csv(path, index=False)
    table, _ = run.reusable_rows(cfg, "googlenet", "measured", [path])
    assert list(table["scheduler"]) == ["heft", "all-cpu"]
    assert run.reusable_rows(cfg, "googlenet", "roofline", [path]) is None


def test_no_committed_result_names_the_folder_of_the_run_that_made_it() -> None:
    """fig6's ``source`` column named ``out/validate-s30-V3/validation.csv``: a folder of
    one user's run, meaningless in a clone."""
    df = pd.read_csv(ROOT / "fig6_sim_vs_measured" / "results.csv")
    assert not df["source"].astype(str).str.contains("/").any()


def test_fig6_quick_run(tmp_path: Path) -> None:
    run = load("fig6_sim_vs_measured", "run")
    df = run.run(run.quick_config(), tmp_path, progress=False)
    assert sorted(df["scheduler"]) == ["all-cpu", "heft", "round-robin"]
    assert (df["status"] == "ok").all() and (df["source"] == "validate_all").all()
    assert (df["measured_s"] > 0).all() and (df["simulated_s"] > 0).all()
    err = (df["simulated_s"] / df["measured_s"] - 1) * 100
    assert list(err.round(6)) == list(df["error_pct"].round(6))
    e = load("fig6_sim_vs_measured", "plot").errors(df)
    assert len(e) == 1 and e["plans"].iloc[0] == 3


# ------------------------------------------------------------ generators
def test_random_dag_is_seeded_and_well_formed() -> None:
    run = load("fig5_optimality_gap", "run")
    g = run.random_dag(20, seed=3, max_in=2)
    assert g.to_dict() == run.random_dag(20, seed=3, max_in=2).to_dict()
    assert g.to_dict() != run.random_dag(20, seed=4, max_in=2).to_dict()
    assert g.number_of_nodes() == 20 and nx.is_directed_acyclic_graph(g.nx)
    assert all(1 <= g.nx.in_degree(v) <= 2 for v in g.nx if v != "n00")
    assert g.meta["inputs"][0]["consumers"] == ["n00"]
    assert {o["node"] for o in g.meta["outputs"]} == {v for v in g.nx if g.nx.out_degree(v) == 0}
    for u, _, d in g.nx.edges(data=True):
        assert d["bytes"] == 4 * g.nodes[u]["outputs"][0]["shape"][0]


def test_subgraph_turns_cut_edges_into_inputs_and_outputs() -> None:
    run = load("fig5_optimality_gap", "run")
    g = run.random_dag(8, seed=0)
    keep = ["n03", "n04", "n05"]
    sub = run.subgraph(g, keep, "cut")
    assert sorted(sub.nx) == keep
    consumers = {c for spec in sub.meta["inputs"] for c in spec["consumers"]}
    outside_in = {v for u, v in g.nx.in_edges(keep) if u not in keep}
    assert consumers == outside_in
    leaving = {u for u, v in g.nx.out_edges(keep) if v not in keep}
    assert {o["node"] for o in sub.meta["outputs"]} >= leaving


def chain() -> Graph:
    g = Graph(name="chain")
    g.add_op("a", "conv2d", flops=2e9, bytes=8_000_000, param_bytes=1000,
             outputs=[([1, 64, 56, 56], "float32")])  # fmt: skip
    g.add_op("b", "relu", bytes=1_600_000, outputs=[([1, 64, 56, 56], "float32")])
    g.add_op("c", "add", bytes=1_600_000, outputs=[([1, 64, 56, 56], "float32")])
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge("b", "c")
    g.meta["inputs"] = [{"name": "x", "bytes": 100, "consumers": ["a"]}]
    g.meta["outputs"] = [{"node": "c", "output": 0, "bytes": 802816}]
    return g


def test_training_graph_mirrors_the_forward_graph() -> None:
    from hetsim.experiments.training import training_graph

    f = chain()
    t = training_graph(f)
    assert t.number_of_nodes() == 6 and t.number_of_edges() == 2 * 3 + 3
    assert set(t.nx.successors("bwd/c")) == {"bwd/a", "bwd/b"}
    assert t.nx.edges["bwd/c", "bwd/b"]["bytes"] == f.nx.edges["b", "c"]["bytes"]
    assert t.nx.edges["bwd/c", "bwd/a"]["output"] != t.nx.edges["bwd/c", "bwd/b"]["output"]
    assert t.nx.edges["c", "bwd/c"]["bytes"] == 64 * 56 * 56 * 4  # saved activation
    assert t.nodes["bwd/a"]["flops"] == 4e9 and t.nodes["bwd/a"]["bytes"] == 16_000_000
    assert t.nodes["bwd/a"]["param_bytes"] == 1000
    assert t.meta["outputs"] == [] and t.meta["inputs"] == f.meta["inputs"]
    assert f.number_of_nodes() == 3  # input untouched
    with pytest.raises(ValueError, match="backward_factor"):
        training_graph(f, backward_factor=0)


def test_colocated_plan_keeps_backward_with_forward() -> None:
    from hetsim.experiments.training import colocated_plan, training_graph

    f = chain()
    t = training_graph(f)
    plan = colocated_plan(t, f, Platform.preset("multi-gpu-4"), Roofline(), microbatches=6)
    assert plan.microbatches == 6
    for n in f.nx:
        assert plan.placement["bwd/" + n] == plan.placement[n]
    plan.validate(t, Platform.preset("multi-gpu-4"))


# ---------------------------------------------------------------- plot.py
@pytest.mark.parametrize("figure", FIGURES)
def test_plot_from_committed_results(figure: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results = ROOT / figure / "results.csv"
    assert results.is_file(), f"{results} is not committed"
    plot = load(figure, "plot")
    assert plot.main(["--results", str(results), "--out", str(tmp_path)]) == 0
    png = tmp_path / f"{figure}.png"
    assert png.stat().st_size > 10_000 and (tmp_path / f"{figure}.pdf").is_file()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = capsys.readouterr().out
    assert f"wrote {png}" in out
    # the headline reads as text: fig5 printed each scheduler's gaps as a raw nested dict
    assert not re.search(r"\{'|\['|\[\{|\{\d", out), out
    df = pd.read_csv(results)
    assert len(df) > 0 and "git_commit" in df.columns
