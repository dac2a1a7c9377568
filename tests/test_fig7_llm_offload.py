"""Figure 7: the published offloading figures parse and each gets a prediction."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd

from hetsim.costmodel.platform import Platform

FIG = Path(__file__).resolve().parents[1] / "experiments" / "fig7_llm_offload"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"fig7_{name}", FIG / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_published_rows_parse_and_name_their_placement() -> None:
    pub = load("run").load_published()
    assert len(pub) >= 3 and pub["id"].is_unique
    assert pub["url"].str.startswith("https://").all() and (pub["published"] > 0).all()
    ngl = pub[pub["policy"] == "ngl"].set_index("id")["policy_args"]
    assert ngl["ihq-ngl40"] == {"n_gpu_layers": 40} and ngl["llmfit-2080-ngl42"] == {"n_gpu_layers": 42}
    flex = pub.set_index("id").loc["flexgen-opt30b"]
    assert flex["policy"] == "weight-streaming" and flex["policy_args"]["cpu_attention"] is True
    assert (flex["batch"], flex["gpu_batch"], flex["prompt"], flex["gen"]) == (144, 48, 512, 32)
    for name in pub["platform"].unique():  # every row's hardware is a preset
        Platform.preset(name)


def test_presets_carry_the_published_hardware() -> None:
    p = Platform.preset("desktop-i7-8700-rtx5060ti")
    assert p.device("cpu").mem_bandwidth_bytes_per_s == 3.84e10  # dual-channel DDR4-2400
    assert p.device("gpu").memory_bytes == 16 << 30 and p.device("cpu").memory_bytes == 64 << 30
    assert p.route("cpu", "gpu")[0].bandwidth_bytes_per_s == 7.88e9  # PCIe 3.0 x8
    t4 = Platform.preset("gcp-t4-flexgen")
    assert t4.device("cpu").memory_bytes == 208 << 30 and t4.device("gpu").mem_bandwidth_bytes_per_s == 3.2e11
    rtx2080 = Platform.preset("desktop-i9-10900x-rtx2080")  # ~102 GB/s quad-channel DDR4 (llmfit PR #755)
    assert rtx2080.device("cpu").mem_bandwidth_bytes_per_s == 1.02e11
    assert rtx2080.memory_domains[0].bandwidth_bytes_per_s == 1.02e11


def test_each_row_is_predicted(tmp_path: Path) -> None:
    run = load("run")
    pub = run.load_published()
    ids = ["ihq-ngl40", "flexgen-opt30b"]  # one of each metric: a tiny budget
    assert run.main(["--out", str(tmp_path / "r.csv"), "--only", *ids]) == 0
    df = pd.read_csv(tmp_path / "r.csv").set_index("id")
    assert list(df.index) == ids
    assert df.loc["ihq-ngl40", "llama_cpp"] == "-ngl 40"
    assert df.loc["ihq-ngl40", "cpu_bandwidth"] == 3.84e10
    # FlexGen with CPU attention: its projections run on the CPU, which dominates the prefill
    assert df.loc["flexgen-opt30b", "prefill_cpu_busy_s"] > df.loc["flexgen-opt30b", "prefill_gpu_busy_s"] > 0
    for i in ids:
        pred, published = df.loc[i, "predicted"], pub.set_index("id").loc[i, "published"]
        assert math.isfinite(pred) and pred > 0
        assert math.isclose(df.loc[i, "error_pct"], (pred / published - 1) * 100, rel_tol=1e-4)


def test_plot_from_committed_results(tmp_path: Path) -> None:
    plot = load("plot")
    assert plot.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "fig7_llm_offload.png").stat().st_size > 0
    committed = pd.read_csv(FIG / "results.csv")
    assert set(committed["id"]) == set(load("run").load_published()["id"])


def test_host_bandwidth_sensitivity_scales_cpu_and_domain() -> None:
    run = load("run")
    p = run.scale_host_bandwidth(Platform.preset("desktop-i7-8700-rtx5060ti"), 0.7)
    assert math.isclose(p.device("cpu").mem_bandwidth_bytes_per_s, 0.7 * 3.84e10)
    assert math.isclose(p.memory_domains[0].bandwidth_bytes_per_s, 0.7 * 3.84e10)
    assert p.device("gpu").mem_bandwidth_bytes_per_s == 4.48e11  # the GPU untouched
