"""Outputs never follow a link planted in an output folder and never replace a device,
a FIFO or a link with a regular file; a folder's results are checked before anything
in it is truncated; no lock file is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from hetsim.experiments.cli.main import main
from hetsim.experiments.output_folder import LOCK_FILE, lock_folder
from hetsim.experiments.sweep import ResultsFile, SweepError
from hetsim.graphs.files import atomic_write, open_own_file
from hetsim.graphs.graph import Graph

ROOT = Path(__file__).resolve().parents[1]


def victim(tmp_path: Path) -> Path:
    """A file outside every output folder, with a last line that a truncation would lose."""
    path = tmp_path / "victim.txt"
    path.write_text("first line\nlast line without newline")
    return path


def tiny_graph(tmp_path: Path) -> Path:
    g = Graph(name="tiny", meta={"granularity": "op"})
    g.add_op("a", "relu", inputs=[([1, 4], "float32")], outputs=[([1, 4], "float32")], flops=4.0)
    g.add_op("b", "relu", inputs=[([1, 4], "float32")], outputs=[([1, 4], "float32")], flops=4.0)
    g.add_edge("a", "b")
    return g.to_json(tmp_path / "tiny.json")


def test_atomic_write_refuses_a_link_to_a_file_and_leaves_its_target(tmp_path: Path) -> None:
    target = victim(tmp_path)
    (tmp_path / "link").symlink_to(target)
    with pytest.raises(OSError, match="is a symbolic link") as e:
        atomic_write(tmp_path / "link", lambda fh: fh.write("overwritten"))
    assert e.value.filename == str(tmp_path / "link")
    assert target.read_text() == "first line\nlast line without newline"
    assert (tmp_path / "link").is_symlink()


def test_atomic_write_writes_through_a_link_to_the_null_device_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "null").symlink_to(os.devnull)
    atomic_write(tmp_path / "null", lambda fh: fh.write("discarded"))
    assert (tmp_path / "null").is_symlink() and Path(os.devnull).is_char_device()


def test_atomic_write_writes_into_a_fifo_and_leaves_it_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    atomic_write(fifo, lambda fh: fh.write("through the pipe"))
    reader.join(timeout=30)
    assert got == ["through the pipe"] and fifo.is_fifo()


def test_the_graph_command_writes_its_json_to_standard_output_s_link(tmp_path: Path) -> None:
    """``--json /dev/stdout`` printed nothing and replaced the link with a file (standard
    output a pipe here, as when the output is piped to another program)."""
    graph = tiny_graph(tmp_path)
    (tmp_path / "stdout").symlink_to("/dev/stdout")
    done = subprocess.run([sys.executable, "-m", "hetsim", "graph", str(graph), "--json", str(tmp_path / "stdout")],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert done.returncode == 0, done.stderr
    assert '"nodes"' in done.stdout and (tmp_path / "stdout").is_symlink()


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"), lock_folder(out):
        pass
    assert target.read_text() == "first line\nlast line without newline"
    (out / LOCK_FILE).unlink()
    (out / LOCK_FILE).symlink_to(tmp_path / "created-outside")
    with pytest.raises(OSError, match="symbolic link"), lock_folder(out):
        pass
    assert not (tmp_path / "created-outside").exists()


@pytest.mark.parametrize("command", ["sweep", "compare"])
def test_sweep_and_compare_refuse_a_planted_lock_link(tmp_path: Path, command: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    target = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / LOCK_FILE).symlink_to(target)
    graph = tiny_graph(tmp_path)
    if command == "sweep":
        spec = tmp_path / "s.toml"
        spec.write_text(f'name = "s"\n[grid]\nmodel = ["{graph}"]\nplatform = ["cpu2"]\nscheduler = ["all-cpu"]\n')
        argv = ["sweep", str(spec), "--out", str(out), "--workers", "0"]
    else:
        argv = ["compare", str(graph), "--platform", "cpu2", "--schedulers", "all-cpu", "--out", str(out),
                "--no-plots"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "symbolic link" in err and "Traceback" not in err
    assert target.read_text() == "first line\nlast line without newline"


def test_a_results_link_is_refused_before_its_target_loses_a_line(tmp_path: Path) -> None:
    target = victim(tmp_path)
    (tmp_path / "results.csv").symlink_to(target)
    with pytest.raises(OSError, match="symbolic link"), ResultsFile(tmp_path / "results.csv"):
        pass
    assert target.read_text() == "first line\nlast line without newline"
    assert not (tmp_path / LOCK_FILE).exists()  # the lock is released and removed on refusal too


def test_a_results_file_of_other_columns_is_refused_before_anything_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    mine = "name,value\nalpha,1\nbeta,2"  # a user's table whose last row has no newline
    path.write_text(mine)
    with pytest.raises(SweepError, match="other columns"), ResultsFile(path):
        pass
    assert path.read_text() == mine
    path.write_text("just one line of the user's, no newline")
    with pytest.raises(SweepError, match="not a hetsim results table"), ResultsFile(path):
        pass
    assert path.read_text() == "just one line of the user's, no newline"


def test_a_partial_header_of_ours_is_still_recovered(tmp_path: Path) -> None:
    path = tmp_path / "results.csv"
    path.write_text("point_id,sta")  # killed while writing the header
    with ResultsFile(path, columns=("point_id", "status")) as rf:
        rf.append({"point_id": "a", "status": "ok"})
    assert path.read_text() == "point_id,status\na,ok\n"


@pytest.mark.parametrize("name", ["errors.log", "results.parquet"])
def test_a_sweep_refuses_a_planted_log_or_parquet_link_before_it_runs(tmp_path: Path, name: str) -> None:
    from hetsim.experiments.sweep import Sweep, run_sweep

    target = victim(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(target)
    sweep = Sweep.from_dict({"name": "s", "grid": {"model": [str(tiny_graph(tmp_path))], "platform": ["cpu2"],
                                                   "scheduler": ["all-cpu"]}})  # fmt: skip
    with pytest.raises(OSError, match="symbolic link"):
        run_sweep(sweep, out, workers=0, progress=False, parquet=name == "results.parquet" or None)
    assert target.read_text() == "first line\nlast line without newline"
    assert not (out / "results.csv").exists() or "all-cpu" not in (out / "results.csv").read_text()


def test_own_files_must_be_regular_files(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        open_own_file(tmp_path / "fifo", os.O_WRONLY | os.O_APPEND)
