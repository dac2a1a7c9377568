"""Output files and folders: one atomic writer, a lock per output folder, paths and
numbers on the command line checked, outputs under ``out/`` by default, DOT escaped."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bad_input import good_graph

from hetsim.experiments.cli.main import main
from hetsim.experiments.compare import compare
from hetsim.experiments.output_folder import FolderLockedError, lock_folder, replace_outputs
from hetsim.experiments.sweep import ResultsFile, SweepError
from hetsim.graphs.graph import Graph, atomic_write
from hetsim.graphs.summary import to_dot
from hetsim.sim import write_chrome_trace

ROOT = Path(__file__).resolve().parents[1]


# ----------------------------------------------------------------------- the lock
@pytest.fixture
def held(tmp_path: Path):  # noqa: ANN201 - a folder whose lock another process holds
    folder = tmp_path / "out"
    code = ("import sys, time\nfrom hetsim.experiments.output_folder import lock_folder\n"
            "with lock_folder(sys.argv[1]):\n    print('locked', flush=True)\n    time.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield folder, proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_a_folder_another_process_writes_is_refused_naming_its_pid(held, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder, pid = held
    assert (folder / ".hetsim.lock").read_text() == f"{pid}\n"
    cmp = compare(good_graph(), "cpu2", schedulers=["all-cpu"])
    message = f"{folder}: locked by pid {pid} (another hetsim command is writing there)"
    with pytest.raises(FolderLockedError) as e:
        cmp.save(folder, plots=False)
    assert str(e.value) == message
    assert sorted(p.name for p in folder.iterdir()) == [".hetsim.lock"]  # the holder's; nothing written
    with pytest.raises(SweepError) as e2:  # sweeps take the same lock
        ResultsFile(folder / "results.csv").__enter__()
    assert str(e2.value) == message
    graph = good_graph().to_json(tmp_path / "g.json")
    assert main(["compare", str(graph), "--platform", "cpu2", "--schedulers", "all-cpu", "--out", str(folder)]) == 2
    assert capsys.readouterr().err == f"hetsim compare: error: {message}\n"


def test_the_lock_is_free_again_after_its_holder_ends(tmp_path: Path) -> None:
    with lock_folder(tmp_path / "out"):
        pass
    with lock_folder(tmp_path / "out") as folder:
        assert (folder / ".hetsim.lock").read_text() == f"{os.getpid()}\n"
    assert list((tmp_path / "out").iterdir()) == []  # no lock file left behind


def test_two_compares_into_one_folder_at_once(tmp_path: Path) -> None:
    """Each either saves or is refused with the lock's message; never a raw Errno, and
    no staging or previous-run folder is left behind."""
    graph = good_graph().to_json(tmp_path / "g.json")
    out = tmp_path / "same"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    argv = [sys.executable, "-m", "hetsim", "compare", str(graph), "--platform", "cpu2", "--schedulers",
            "all-cpu,heft", "--out", str(out), "--no-plots"]
    for _ in range(3):
        procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(2)]  # fmt: skip
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0 or (p.returncode == 2 and "locked by pid" in err), err
            assert "Errno" not in err and "Traceback" not in err, err
        assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []  # no lock, no staging
        assert (out / "results.csv").is_file()


def test_what_a_killed_writer_left_is_cleaned_up(tmp_path: Path) -> None:
    out = tmp_path / "out"
    (out / ".staging-abc").mkdir(parents=True)
    (out / ".staging-abc" / "results.csv").write_text("half")
    (out / ".previous-def").mkdir()
    (out / ".previous-def" / "old.txt").write_text("moved aside, never replaced")
    (out / ".previous-def" / "kept.txt").write_text("replaced already")
    (out / "kept.txt").write_text("new")
    replace_outputs(out, lambda stage: (stage / "results.csv").write_text("full"), ["results.csv"])
    assert {p.name: p.read_text() for p in out.iterdir() if p.is_file()} == {
        "results.csv": "full", "old.txt": "moved aside, never replaced", "kept.txt": "new"}


# ---------------------------------------------------------------- atomic writers
def test_the_chrome_trace_goes_through_the_atomic_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    other = tmp_path / ".trace.json.tmp"  # a fixed temporary name another writer could be using
    other.write_text("someone else's")
    rec = {"kind": "op", "name": "a", "node": "a", "request": 0, "resource": "cpu", "stream": 0,
           "start": 0.0, "end": 1e-3, "bytes": 0, "dst": None, "output": None, "hop": None}
    path = write_chrome_trace([rec], tmp_path / "trace.json")
    assert synced, "the trace was not flushed to disk before the rename"
    assert other.read_text() == "someone else's"
    assert [e["dur"] for e in json.loads(path.read_text())["traceEvents"] if e["ph"] == "X"] == [1000.0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".trace.json.tmp", "trace.json"]


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    graph = good_graph().to_json(tmp_path / "g.json")
    target = tmp_path / "copy.json"
    target.write_text("old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["graph", str(graph), "--json", str(target)]) == 2
    assert capsys.readouterr().err == f"hetsim graph: error: {target}: No space left on device\n"
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy.json", "g.json"]
    with pytest.raises(OSError) as e:
        atomic_write(target, lambda fh: fh.write("x"))
    assert (e.value.errno, e.value.filename) == (errno.ENOSPC, str(target))


def test_dot_escapes_backslashes_quotes_and_newlines() -> None:
    g = Graph(name='a\\b"c')
    g.add_op('x\\"y', "relu", flops=2e9)
    g.add_op("z\nw", "relu")
    g.add_edge('x\\"y', "z\nw", bytes=2000)
    assert to_dot(g) == (
        'digraph "a\\\\b\\"c" {\n'
        "  node [shape=box, fontsize=10];\n"
        '  "x\\\\\\"y" [label="x\\\\\\"y\\nrelu\\n2 GFLOP"];\n'
        '  "z\\nw" [label="z\\nw\\nrelu\\n0 GFLOP"];\n'
        '  "x\\\\\\"y" -> "z\\nw" [label="2 KB"];\n'
        "}\n"
    )


# ------------------------------------------------------------ command-line paths
def argparse_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The last line argparse prints for a bad argument (exit status 2)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    return capsys.readouterr().err.strip().splitlines()[-1]


def test_output_paths_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = str(good_graph().to_json(tmp_path / "g.json"))
    a_file = tmp_path / "file"
    a_file.write_text("")
    folder = tmp_path / "folder"
    folder.mkdir()
    sim = ["simulate", graph, "--platform", "cpu2", "--scheduler", "all-cpu"]
    cases = [
        (["graph", graph, "--json", str(folder)], f"argument --json: {folder}: is a folder, not a file"),
        (["graph", graph, "--dot", str(a_file / "g.dot")], f"argument --dot: {a_file / 'g.dot'}: {a_file} is a file, not a folder"),
        ([*sim, "--trace", str(folder)], f"argument --trace: {folder}: is a folder, not a file"),
        ([*sim, "--trace", str(a_file / "deeper" / "t.json")],
         f"argument --trace: {a_file / 'deeper' / 't.json'}: {a_file} is a file, not a folder"),
        (["compare", graph, "--platform", "cpu2", "--out", str(a_file)], f"argument --out: {a_file}: is a file, not a folder"),
        (["sweep", "s.toml", "--out", str(a_file / "x")], f"argument --out: {a_file / 'x'}: {a_file} is a file, not a folder"),
    ]  # fmt: skip
    for argv, message in cases:
        assert argparse_error(capsys, argv).endswith(f"error: {message}"), argv


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    graph = str(good_graph().to_json(tmp_path / "g.json"))
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert argparse_error(capsys, ["graph", graph, "--json", str(ro / "g.json")]).endswith(
            f"error: argument --json: {ro / 'g.json'}: folder {ro} is not writable")
    finally:
        ro.chmod(0o700)


@pytest.mark.parametrize(("argv", "message"), [
    (["simulate", "g", "--scheduler", "heft", "--noise", "0.1", "--seed", "-1"], "argument --seed: expected an integer >= 0, got '-1'"),
    (["simulate", "g", "--scheduler", "heft", "--requests", "9" * 23], f"argument --requests: expected an integer <= 1000000, got '{'9' * 23}'"),
    (["plot", "r.csv", "--kind", "bars", "--width", "inf"], "argument --width: expected a finite number > 0, got 'inf'"),
    (["profile", "resnet18", "--out", "x", "--rtol", "-1"], "argument --rtol: expected a finite number > 0, got '-1'"),
    (["profile", "resnet18", "--out", "x", "--passes", "0"], "argument --passes: expected an integer >= 1, got '0'"),
    (["sweep", "s.toml", "--workers", "-2"], "argument --workers: expected an integer >= 0, got '-2'"),
    (["sweep", "s.toml", "--chunksize", "0"], "argument --chunksize: expected an integer >= 1, got '0'"),
    (["validate", "m", "--repeats", "0"], "argument --repeats: expected an integer >= 1, got '0'"),
    (["validate", "m", "--warmup", "-1"], "argument --warmup: expected an integer >= 0, got '-1'"),
    (["costmodel", "eval", "p", "--folds", "1"], "argument --folds: expected an integer >= 2, got '1'"),
])  # fmt: skip
def test_numbers_out_of_range_are_refused(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert argparse_error(capsys, argv).endswith(f"error: {message}")


def test_a_model_path_that_is_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    assert main(["simulate", str(folder), "--platform", "cpu2", "--scheduler", "all-cpu"]) == 2
    assert capsys.readouterr().err == (f"hetsim simulate: error: {folder}: is a folder, not a model (a zoo name, "
                                       "graph JSON, ONNX or file.py:ClassName)\n")  # fmt: skip
    (tmp_path / "g.json").mkdir()
    monkeypatch.chdir(tmp_path)  # a bare name that is a folder: the graph loader says so
    assert main(["simulate", "g.json", "--platform", "cpu2", "--scheduler", "all-cpu"]) == 2
    assert capsys.readouterr().err == "hetsim simulate: error: g.json: is a folder, not a graph file\n"


@pytest.mark.parametrize(("trace", "message"), [
    ("not json", "not a trace JSON (Expecting value: line 1 column 1 (char 0))"),
    ("[1, 2]", "a trace is a list of event objects, or {'traceEvents': [...]}"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1}]}', "event 0 needs numbers 'ts' and 'dur', got None and None"),
    ('{"traceEvents": [{"ph": "X", "ts": 0, "dur": 1}]}', "event 0 needs 'pid' and 'name'"),
])  # fmt: skip
def test_gantt_of_a_malformed_trace(trace: str, message: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trace.json"
    path.write_text(trace)
    assert main(["plot", str(path), "--kind", "gantt", "--out", str(tmp_path / "g")]) == 2
    assert capsys.readouterr().err == f"hetsim plot: error: {path}: {message}\n"


def test_validate_with_a_plan_of_another_graph(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetsim.sim.plan import Plan

    graph = good_graph().to_json(tmp_path / "g.json")
    plan = Plan({"x": "cpu0", "y": "cpu0"}).to_json(tmp_path / "p.json")
    assert main(["validate", str(graph), "--platform", "cpu2", "--plan", str(plan)]) == 2
    assert capsys.readouterr().err == (f"hetsim validate: error: {plan}: not a plan for graph 't' on 'cpu2': "
                                       "plan places unknown node 'x' (not in graph 't')\n")  # fmt: skip


def test_an_empty_ops_csv_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    prof = tmp_path / "prof"
    shutil.copytree(ROOT / "profiles" / "cpu2-torch", prof)
    (prof / "ops.csv").write_text("")
    graph = good_graph().to_json(tmp_path / "g.json")
    assert main(["simulate", str(graph), "--platform", "cpu2", "--scheduler", "all-cpu", "--cost", str(prof)]) == 2
    assert capsys.readouterr().err == f"hetsim simulate: error: {prof / 'ops.csv'}: empty file (no header)\n"


# ------------------------------------------------------------- default outputs
def test_llm_plan_writes_under_out_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["llm", "plan", "tiny", "--platform", "desktop-rtx4090", "--policy", "ngl", "--context", "128",
                 "--prompt", "64"]) == 0
    assert "wrote out/llm-plan.json" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert json.loads((tmp_path / "out" / "llm-plan.json").read_text())["model"]


def test_sweep_file_names_that_leave_their_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "s.toml"
    for name in ("/tmp/x", "../../x"):
        toml.write_text(f'name = "{name}"\n[grid]\nmodel = ["lstm"]\nplatform = ["cpu2"]\nscheduler = ["heft"]\n')
        assert main(["sweep", str(toml), "--dry-run"]) == 2
        assert f"'name' must be a plain name (it names the output folder: no '/', '\\', leading '.' or '..'), " \
               f"got '{name}'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.toml"]
