"""Validation (runtime.validate, ``hetsim validate``): simulate, execute on cpu2, compare.

The googlenet/resnet18 tests use the CPU profile committed in ``profiles/cpu2-torch``
(measured on the 2-core development machine with ``hetsim profile googlenet
resnet18 --devices cpu@1 --backend torch``). The <= 10 % accuracy target is a
``slow`` test: timings on shared CI machines are noisy.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("torch")

from experiments.cli import main  # noqa: E402
from runtime.validate import (  # noqa: E402
    VALIDATION_COLUMNS,
    ValidationResult,
    format_table,
    ranking,
    validate,
    validate_all,
)

PROFILE = Path(__file__).resolve().parents[1] / "profiles" / "cpu2-torch"
#: operator times measured inside the running models (runtime.validate.profile_in_context)
PROFILE_CTX = PROFILE.with_name("cpu2-torch-ctx")
needs_profile = pytest.mark.skipif(not (PROFILE / "ops.csv").is_file(), reason=f"no profile at {PROFILE}")
needs_ctx_profile = pytest.mark.skipif(not (PROFILE_CTX / "ops.csv").is_file(), reason=f"no profile at {PROFILE_CTX}")


@pytest.fixture(scope="module")
def squeeze():
    from runtime.backends.tvm_backend import import_model

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return import_model("squeezenet1_1", image_size=64)


def test_ranking_kendall_tau():
    rows = []
    for i, (s, m) in enumerate([(1.0, 10.0), (2.0, 20.0), (3.0, 30.0), (4.0, 35.0)]):
        rows.append({"model": "a", "scheduler": f"s{i}", "status": "ok", "simulated_s": s, "measured_s": m,
                     "measured_p10_s": m - 0.1, "measured_p90_s": m + 0.1})
    for i, (s, m) in enumerate([(1.0, 3.0), (2.0, 2.0), (3.0, 1.0)]):
        rows.append({"model": "b", "scheduler": f"s{i}", "status": "ok", "simulated_s": s, "measured_s": m,
                     "measured_p10_s": m - 0.6, "measured_p90_s": m + 0.6})
    rows.append({"model": "b", "scheduler": "x", "status": "skipped", "note": "n/a"})
    rank = ranking(pd.DataFrame(rows)).set_index("model")
    assert rank.loc["a", "kendall_tau"] == pytest.approx(1.0)
    assert rank.loc["b", "kendall_tau"] == pytest.approx(-1.0)
    assert rank.loc["a", "n"] == 4 and rank.loc["b", "n"] == 3
    assert rank.loc["a", "best_simulated"] == rank.loc["a", "best_measured"] == "s0"
    assert rank.loc["a", "resolved_pairs"] == 6 and rank.loc["a", "resolved_agree"] == 1.0
    # b: only s0 vs s2 (3 +- 0.6 and 1 +- 0.6) are resolved, and ordered the other way
    assert rank.loc["b", "resolved_pairs"] == 1 and rank.loc["b", "resolved_agree"] == 0.0


def test_validate_one_plan(squeeze, tmp_path):
    res = validate(squeeze.graph, "cpu2", "heft", "roofline", warmup=1, repeats=2, model=squeeze)
    assert isinstance(res, ValidationResult)
    assert res.scheduler == "heft" and res.cost == "roofline"
    assert res.simulated_s == res.sim.makespan > 0 and res.measured_s == res.run.median > 0
    assert res.error_pct == pytest.approx(100 * (res.simulated_s - res.measured_s) / res.measured_s)
    busy = res.busy().set_index("device")
    assert list(busy.index) == ["cpu0", "cpu1"]
    assert busy.loc["cpu0", "simulated_busy_s"] == res.sim.device_busy["cpu0"]
    assert busy.loc["cpu0", "measured_busy_s"] == res.run.device_busy["cpu0"]
    out = res.write(tmp_path / "v")
    for f in ("sim_trace.json", "run_trace.json", "plan.json", "summary.json"):
        assert (out / f).is_file()
    sim_pids = {e["args"]["name"] for e in json.loads((out / "sim_trace.json").read_text())["traceEvents"]
                if e["name"] == "process_name"}
    run_pids = {e["args"]["name"] for e in json.loads((out / "run_trace.json").read_text())["traceEvents"]
                if e["name"] == "process_name"}
    assert {"cpu0", "cpu1", "dispatch"} <= sim_pids and {"cpu0", "cpu1", "dispatch"} <= run_pids
    text = str(res)
    assert "simulated" in text and "measured" in text and "error" in text


@needs_profile
def test_validate_all_googlenet_resnet18_with_cpu_profile(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = validate_all(["googlenet", "resnet18"], "cpu2", ["all-cpu", "heft", "dynamic", "all-gpu"],
                             str(PROFILE), warmup=1, repeats=2, out=tmp_path)
    assert list(table.columns[: len(VALIDATION_COLUMNS)]) == VALIDATION_COLUMNS
    assert len(table) == 8
    skipped = table[table["scheduler"] == "all-gpu"]
    assert set(skipped["status"]) == {"skipped"} and skipped["note"].str.contains("no GPU").all()
    ok = table[table["status"] == "ok"]
    assert len(ok) == 6 and set(ok["model"]) == {"googlenet", "resnet18"}
    assert (ok["simulated_s"] > 0).all() and (ok["measured_s"] > 0).all()
    assert ok["error_pct"].map(math.isfinite).all()
    assert ok["kendall_tau"].map(lambda t: -1.0 <= t <= 1.0).all()
    for col in ("simulated_rank", "measured_rank"):
        assert set(ok[col]) <= {1.0, 2.0, 3.0} and (ok.groupby("model")[col].min() == 1).all()
    assert (tmp_path / "validation.csv").is_file() and (tmp_path / "ranking.csv").is_file()
    assert (tmp_path / "googlenet" / "heft" / "run_trace.json").is_file()
    assert len(pd.read_csv(tmp_path / "ranking.csv")) == 2
    text = format_table(table)
    assert "Kendall tau" in text and "googlenet" in text


def test_cli_validate_one(tmp_path, capsys):
    rc = main(["validate", "squeezenet1_1", "--arg", "image_size=64", "--platform", "cpu2",
               "--scheduler", "round-robin", "--warmup", "1", "--repeats", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "error" in out and "cpu1" in out
    assert (tmp_path / "sim_trace.json").is_file() and (tmp_path / "run_trace.json").is_file()


def test_cli_validate_all_and_errors(tmp_path, capsys):
    rc = main(["validate", "--all", "--models", "squeezenet1_1", "--arg", "image_size=64",
               "--schedulers", "all-cpu,round-robin", "--warmup", "0", "--repeats", "2", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "Kendall tau" in out
    table = pd.read_csv(tmp_path / "validation.csv")
    assert list(table["scheduler"]) == ["all-cpu", "round-robin"]
    assert main(["validate", "--platform", "cpu2"]) == 2
    assert main(["validate", "squeezenet1_1", "--platform", "cpu2"]) == 2
    err = capsys.readouterr().err
    assert "MODEL" in err and "--scheduler" in err
    rc = main(["validate", "squeezenet1_1", "--arg", "image_size=64", "--platform", "xeon-p2200",
               "--scheduler", "all-gpu", "--device-map", "cpu=cpu", "--repeats", "1"])
    err = capsys.readouterr().err
    if rc == 2:  # no GPU here: reported before anything runs
        assert "cuda:0" in err


@needs_profile
def test_calibrate_dispatch(tmp_path):
    from runtime.validate import calibrate_dispatch

    prof = tmp_path / "prof"
    shutil.copytree(PROFILE, prof)
    new = calibrate_dispatch(prof, ops=100, repeats=3)
    stored = json.loads((prof / "dispatch.json").read_text())
    assert stored == pytest.approx(new)
    assert set(new) == {"cpu@1"} and 1e-7 < new["cpu@1"] < 1e-3
