"""Sweeps: the TOML format, real runs on a tiny LSTM (local pool, in-process, Dask
LocalCluster), resuming, error rows, crash recovery of results.csv, and the CLI."""

from __future__ import annotations

import csv
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hetsim import schedulers
from hetsim.experiments.cli.main import main
from hetsim.experiments.sweep import (
    COLUMNS,
    Point,
    ResultsFile,
    Sweep,
    SweepError,
    clear_caches,
    graph_cache_info,
    load_graph,
    load_results,
    run_point,
    run_sweep,
)
from hetsim.graphs import Graph
from hetsim.schedulers.base import Scheduler
from hetsim.sim import Platform, simulate

TINY = {"seq_len": 4, "hidden": 32}
GRID = {
    "model": ["lstm"],
    "platform": ["xeon-p2200", "cpu2"],
    "scheduler": ["all-gpu", "heft"],
    "link_bandwidth": [0.5, 2],
}
EXAMPLE = Path(__file__).resolve().parents[1] / "experiments" / "examples" / "sweep_small.toml"


def tiny_sweep(name: str = "tiny", **grid: object) -> Sweep:
    return Sweep.from_dict({"name": name, "grid": {**GRID, **grid}, "model_args": {"lstm": TINY}})


class Boom(Scheduler):
    """A scheduler that always raises: an injected failure."""

    name = "boom"

    def _schedule(self, graph, platform, cost):  # noqa: ANN001, ANN202
        raise RuntimeError("injected failure")


class Die(Scheduler):
    """A scheduler whose worker process dies (as on a segfault or an OOM kill)."""

    name = "die"

    def _schedule(self, graph, platform, cost):  # noqa: ANN001, ANN202
        os.kill(os.getpid(), signal.SIGKILL)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A graph cache shared by the tests of this module (the LSTM is imported once)."""
    path = tmp_path_factory.mktemp("graph-cache")
    load_graph("lstm", model_args=TINY, cache_dir=path)
    return path


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory, cache: Path) -> tuple[Path, pd.DataFrame]:
    """The tiny sweep, plus an injected failing scheduler, on a pool of 2 processes."""
    schedulers.register("boom", Boom)
    try:
        out = tmp_path_factory.mktemp("local")
        sweep = tiny_sweep(scheduler=["all-gpu", "heft", "boom"])
        df = run_sweep(sweep, out, workers=2, cache_dir=cache, progress=False)
    finally:
        schedulers.REGISTRY.pop("boom", None)
    return out, df


def data_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()[1:]


# ----------------------------------------------------------------- format
def test_grid_cross_product_and_stable_ids() -> None:
    sweep = tiny_sweep(requests=[1, 4])
    points = sweep.points()
    assert len(points) == len(sweep) == 1 * 2 * 2 * 2 * 2
    assert len({p.id for p in points}) == len(points)
    assert [p.id for p in tiny_sweep(requests=[1, 4]).points()] == [p.id for p in points]
    # graph-major order; defaults filled in
    assert [p.model for p in points] == ["lstm"] * 16
    assert {p.batch for p in points} == {1} and {p.cost for p in points} == {"roofline"}
    # 2 and 2.0 are the same point; a different model argument is a different point
    p = points[0]
    assert p.replace(link_bandwidth=2).id == p.replace(link_bandwidth=2.0).id
    assert p.replace(model_args={"seq_len": 4, "hidden": 64}).id != p.id
    assert Point.from_row(p.params()).id == p.id


def test_bad_sweep_names_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'name = "bad"\ncolour = "red"\n[grid]\nmodel = ["lstm", "resnet-18"]\n'
        'platform = ["xeon-p2200", "nowhere"]\nscheduler = ["heft", "hfet"]\n'
        'link_bandwidht = [1, 2]\ngpu_peak = [0]\n[scheduler_args]\nheft = {bogus = 1}\n'
    )
    with pytest.raises(SweepError) as err:
        Sweep.from_toml(path)
    msg = str(err.value)
    for needle in [
        "unknown key 'colour'",
        "unknown key 'link_bandwidht' (did you mean 'link_bandwidth'?)",
        "'gpu_peak' values [0] are not a positive multiplier",
        "unknown model 'resnet-18' (did you mean 'resnet18'?)",
        "unknown platform preset 'nowhere'",
        "unknown scheduler 'hfet' (did you mean 'heft'?)",
        "scheduler 'heft': bad parameters ['bogus']",
    ]:
        assert needle in msg, (needle, msg)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"grid": {"model": "lstm", "platform": "cpu2"}}, "'scheduler' is required"),
        ({"grid": {**GRID, "batch": [0]}}, "'batch' values [0] are not an int >= 1"),
        ({"grid": GRID, "model_args": {"gru": {}}}, "'gru' is not in grid.model"),
        ({"grid": GRID, "model_args": {"lstm": {"seqlen": 3}}}, "no option(s) ['seqlen']"),
        ({"grid": {**GRID, "cost": ["no/such/profile"]}}, "cost model 'no/such/profile'"),
        ({"grid": {**GRID, "granularity": ["layer"]}}, "'granularity' values ['layer']"),
        ({"name": "/tmp/x", "grid": GRID}, "'name' must be a plain name (it names the output folder: no '/', "
                                           "'\\', leading '.' or '..'), got '/tmp/x'"),
        ({"name": "../../x", "grid": GRID}, "'name' must be a plain name"),
        ({"name": "..", "grid": GRID}, "'name' must be a plain name"),
        ({"name": "a\\b", "grid": GRID}, "'name' must be a plain name"),
        ({"grid": GRID, "scheduler_args": {"heft": {"insertion": "maybe"}}},
         "heft: hyper-parameter 'insertion' must be true or false, got 'maybe'"),
    ],
)
def test_bad_sweep_dicts(data: dict, needle: str) -> None:
    with pytest.raises(SweepError) as err:
        Sweep.from_dict(data)
    assert needle in str(err.value)


def test_example_sweep_file_is_valid() -> None:
    sweep = Sweep.from_toml(EXAMPLE)
    assert sweep.name == "sweep-small"
    assert len(sweep.points()) == 3 * 4 * 5 * 2


# -------------------------------------------------------------- one point
def test_run_point_matches_a_direct_simulation(cache: Path) -> None:
    point = Point(model="lstm", platform="xeon-p2200", scheduler="heft", model_args=TINY,
                  link_bandwidth=0.5, requests=3)  # fmt: skip
    row = run_point(point, cache_dir=cache)
    assert row["status"] == "ok" and row["error"] == "" and row["point_id"] == point.id
    assert set(COLUMNS) <= set(row)
    graph = load_graph("lstm", model_args=TINY, cache_dir=cache)
    platform = Platform.preset("xeon-p2200").scaled(link_bandwidth=0.5)
    sched = schedulers.get("heft")
    from hetsim.costmodel import Roofline

    res = simulate(graph, platform, sched.schedule(graph, platform, Roofline()), Roofline(), requests=3)
    assert row["makespan_s"] == res.makespan
    assert row["bytes_moved"] == sum(res.bytes_moved.values()) > 0
    assert row["gpu_util"] == res.device_utilisation["gpu"]
    assert row["latency_mean_s"] == pytest.approx(sum(res.latencies) / 3)
    assert row["latency_p99_s"] == max(res.latencies)
    assert row["nodes"] == graph.number_of_nodes()
    assert row["sched_time_s"] > 0 and row["sim_time_s"] > 0


def test_graphs_are_cached_in_process(cache: Path) -> None:
    clear_caches()
    p = Point(model="lstm", platform="xeon-p2200", scheduler="all-gpu", model_args=TINY)
    first = run_point(p, cache_dir=cache)
    hits = graph_cache_info().hits
    second = run_point(p.replace(link_bandwidth=4), cache_dir=cache)
    assert graph_cache_info().hits == hits + 1
    assert second["graph_time_s"] < first["graph_time_s"]
    assert graph_cache_info().maxsize is not None  # bounded


def test_error_row_for_a_scheduler_that_does_not_apply(cache: Path) -> None:
    row = run_point(Point(model="lstm", platform="cpu2", scheduler="all-gpu", model_args=TINY),
                    cache_dir=cache)  # fmt: skip
    assert row["status"] == "error"
    assert row["error"].startswith("SchedulerError: all-gpu: platform 'cpu2' has no GPU")
    assert math.isnan(row["makespan_s"]) and "Traceback" in row["traceback"]


# ------------------------------------------------------------ local sweep
def test_local_pool_writes_one_tidy_row_per_point(local_run: tuple[Path, pd.DataFrame]) -> None:
    out, df = local_run
    assert len(df) == 12 and list(df.columns) == list(COLUMNS)
    lines = (out / "results.csv").read_text().splitlines()
    assert lines[0] == ",".join(COLUMNS) and len(lines) == 13  # header once
    ok = df[df.status == "ok"]
    assert len(ok) == 6 and (ok.makespan_s > 0).all()
    assert set(ok.scheduler) == {"all-gpu", "heft"}
    errors = df[df.status == "error"].set_index("scheduler")["error"]
    assert (errors.loc["boom"] == "RuntimeError: injected failure").all()
    assert errors.loc["all-gpu"].str.contains("has no GPU").all()
    assert "injected failure" in (out / "errors.log").read_text()
    # every swept parameter is a column; provenance columns filled
    assert sorted(df.link_bandwidth.unique()) == [0.5, 2.0]
    assert (df.sweep == "tiny").all() and df.git_commit.str.len().gt(5).all()
    assert df.hetsim_version.notna().all() and df.worker.nunique() >= 1
    assert (out / "tiny.sweep.json").exists()
    # results.parquet (pyarrow is in the dev extra): the same rows as results.csv
    pq = load_results(out / "results.parquet")
    assert list(pq.columns) == list(COLUMNS) and len(pq) == len(df)
    assert sorted(pq.point_id) == sorted(df.point_id)
    # link bandwidth matters to heft on the CPU-GPU box, not on the CPU-only one
    heft = ok[ok.scheduler == "heft"].set_index(["platform", "link_bandwidth"]).makespan_s
    assert heft[("xeon-p2200", 0.5)] > heft[("xeon-p2200", 2.0)]


def test_rerun_skips_done_points(local_run: tuple[Path, pd.DataFrame], cache: Path) -> None:
    out, df = local_run
    before = (out / "results.csv").read_bytes()
    schedulers.register("boom", Boom)
    try:
        again = run_sweep(tiny_sweep(scheduler=["all-gpu", "heft", "boom"]), out, workers=2,
                          cache_dir=cache, progress=False)  # fmt: skip
    finally:
        schedulers.REGISTRY.pop("boom", None)
    assert (out / "results.csv").read_bytes() == before  # 0 new rows
    pd.testing.assert_frame_equal(again, df)


def test_truncated_last_line_is_dropped_and_rerun(tmp_path: Path, cache: Path) -> None:
    sweep = tiny_sweep(platform=["xeon-p2200"])
    df = run_sweep(sweep, tmp_path, workers=0, cache_dir=cache, progress=False)
    results = tmp_path / "results.csv"
    lines = results.read_text().splitlines(keepends=True)
    lost = lines[-1]
    results.write_text("".join(lines[:-1]) + lost[: len(lost) // 2])  # killed mid-write
    assert len(ResultsFile(results).status()) == 3
    df2 = run_sweep(sweep, tmp_path, workers=0, cache_dir=cache, progress=False)
    assert len(data_lines(results)) == 4
    assert all(len(r) == len(COLUMNS) for r in csv.reader(data_lines(results)))
    pd.testing.assert_series_equal(df2.makespan_s, df.makespan_s)


def test_limit_and_retry_errors(tmp_path: Path, cache: Path) -> None:
    schedulers.register("boom", Boom)
    try:
        sweep = tiny_sweep(scheduler=["heft", "boom"], platform=["xeon-p2200"])
        df = run_sweep(sweep, tmp_path, workers=0, cache_dir=cache, limit=3, progress=False)
        assert len(df) == 3
        df = run_sweep(sweep, tmp_path, workers=0, cache_dir=cache, progress=False)
        assert len(df) == 4 and (df.status == "error").sum() == 2
        schedulers.REGISTRY["boom"] = (schedulers.REGISTRY["heft"][0], {})  # "fixed"
        df = run_sweep(sweep, tmp_path, workers=0, cache_dir=cache, retry_errors=True,
                       progress=False)  # fmt: skip
    finally:
        schedulers.REGISTRY.pop("boom", None)
    assert (df.status == "ok").all() and len(data_lines(tmp_path / "results.csv")) == 4


def test_dead_worker_gives_an_error_row_and_the_rest_finish(tmp_path: Path, cache: Path) -> None:
    schedulers.register("die", Die)
    try:
        sweep = tiny_sweep(scheduler=["heft", "die", "all-gpu"], platform=["xeon-p2200"])
        df = run_sweep(sweep, tmp_path, workers=2, cache_dir=cache, progress=False)
    finally:
        schedulers.REGISTRY.pop("die", None)
    status = df.set_index("scheduler").status
    assert (status.loc["die"] == "error").all() and (status.drop("die") == "ok").all()
    assert df[df.scheduler == "die"].error.str.contains("worker process died").all()
    assert len(data_lines(tmp_path / "results.csv")) == 6


def test_killed_sweep_loses_no_finished_row(tmp_path: Path, cache: Path) -> None:
    path = tmp_path / "slow.toml"
    path.write_text(
        'name = "slow"\n[grid]\nmodel = "lstm"\nplatform = "xeon-p2200"\n'
        'scheduler = ["heft", "all-gpu"]\nrequests = [32]\n'
        "link_bandwidth = [0.25, 0.5, 1, 2, 4, 8, 16, 32]\ngpu_peak = [1, 2]\n"
        "[model_args]\nlstm = {seq_len = 4, hidden = 32}\n"
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "hetsim.experiments.cli.main", "sweep", str(path), "--out", str(out),
           "--workers", "1", "--cache", str(cache), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
    results = out / "results.csv"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if results.exists() and len(results.read_bytes().splitlines()) > 3:
            break
        time.sleep(0.05)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL  # killed mid-sweep
    kept = ResultsFile(results).status()  # complete rows only
    assert 3 <= len(kept) < 32
    df = run_sweep(Sweep.from_toml(path), out, workers=1, cache_dir=cache, progress=False)
    assert len(df) == 32 and (df.status == "ok").all()
    assert df.point_id.is_unique and set(kept) <= set(df.point_id)


# ------------------------------------------------------------------- dask
def test_dask_cluster_gives_the_same_rows(local_run: tuple[Path, pd.DataFrame], cache: Path,
                                          tmp_path: Path) -> None:  # fmt: skip
    distributed = pytest.importorskip("distributed")
    _, local = local_run
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:  # fmt: skip
        df = run_sweep(tiny_sweep(), tmp_path, client=client, cache_dir=cache, progress=False)
        workers = set(client.scheduler_info()["workers"])
    assert len(df) == 8
    assert df.worker.nunique() == 2 and len(workers) == 2
    merged = df.merge(local, on="point_id", suffixes=("", "_local"))
    assert len(merged) == 8
    assert (merged.status == merged.status_local).all()
    ok = merged[merged.status == "ok"]
    assert len(ok) == 6 and (ok.makespan_s == ok.makespan_s_local).all()
    assert (ok.bytes_moved == ok.bytes_moved_local).all()


# -------------------------------------------------------------------- CLI
def test_cli_dry_run_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(EXAMPLE), "--out", str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "120 points" in out and "120 to run" in out and "... and 110 more" in out
    assert out.splitlines()[0].endswith(": 120 point(s) in the grid")  # the size first, before the listing
    assert not (tmp_path / "results.csv").exists()
    bad = tmp_path / "bad.toml"
    bad.write_text('[grid]\nmodel = "lstm"\nplatform = "cpu2"\nscheduler = "hfet"\n')
    assert main(["sweep", str(bad)]) == 2
    assert "unknown scheduler 'hfet'" in capsys.readouterr().err


def test_cli_runs_and_resumes(tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.toml"
    path.write_text(
        'name = "cli"\n[grid]\nmodel = "lstm"\nplatform = "xeon-p2200"\n'
        'scheduler = ["all-gpu", "heft"]\n[model_args]\nlstm = {seq_len = 4, hidden = 32}\n'
    )
    args = ["sweep", str(path), "--out", str(tmp_path / "o"), "--workers", "0", "--cache",
            str(cache), "--no-progress"]  # fmt: skip
    assert main(args) == 0
    assert "2/2 points done (2 ok, 0 errors)" in capsys.readouterr().out
    assert main([*args, "--dry-run"]) == 0
    assert "2 already in" in capsys.readouterr().out
    assert len(load_results(tmp_path / "o")) == 2


SLEEPY_SWEEP = """
import os, sys, time
from pathlib import Path
from hetsim import schedulers
from hetsim.experiments.sweep import Sweep, run_sweep
from hetsim.graphs import Graph
from hetsim.schedulers.base import Scheduler

pids = Path(sys.argv[1])

class Sleepy(Scheduler):
    name = "sleepy"
    def _schedule(self, graph, platform, cost):
        (pids / str(os.getpid())).touch()
        time.sleep(120)

schedulers.register("sleepy", Sleepy)
sweep = Sweep.from_dict({"name": "sleepy", "grid": {"model": sys.argv[2], "platform": "cpu2",
                         "scheduler": "sleepy", "seed": [0, 1, 2, 3]}})
run_sweep(sweep, sys.argv[3], workers=2, progress=False, parquet=False)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie (dead, not reaped yet) counts as gone
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="checks /proc")
def test_sweep_killed_with_sigkill_leaves_no_worker_alive(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()
    graph = tmp_path / "g.json"
    g = Graph(name="g")
    g.add_op("a", "relu", bytes=8)
    g.to_json(graph)
    proc = subprocess.Popen([sys.executable, "-c", SLEEPY_SWEEP, str(pids), str(graph), str(tmp_path / "out")],
                            cwd=Path(__file__).resolve().parents[1], stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(list(pids.iterdir())) < 2 and proc.poll() is None:
        time.sleep(0.05)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2 and all(_alive(w) for w in workers)  # both busy in a point
    proc.kill()  # SIGKILL to the sweep only, not its process group
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in workers):
        time.sleep(0.05)
    left = [w for w in workers if _alive(w)]
    for w in left:  # do not leave them behind, even when the test fails
        os.kill(w, signal.SIGKILL)
    assert not left, f"workers {left} outlived the killed sweep"


def test_results_file_rewrites_keep_every_row_and_leave_no_temporary(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A file of an earlier version gains the new columns (empty in its rows); drop
    removes only the rows named; both rewrites leave nothing else in the folder."""
    path = tmp_path / "results.csv"
    path.write_text("point_id,status\na,ok\nb,error\nc,ok\n")
    with ResultsFile(path, columns=("point_id", "status", "note")) as rf:
        assert "added the column(s) note" in capsys.readouterr().err
        assert path.read_text() == "point_id,status,note\na,ok,\nb,error,\nc,ok,\n"
        rf.drop({"b"})
        rf.append({"point_id": "b", "status": "ok", "note": "x,y"})
    assert path.read_text() == 'point_id,status,note\na,ok,\nc,ok,\nb,ok,"x,y"\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.csv"]
