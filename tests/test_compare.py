"""``compare`` / ``hetsim compare``: every scheduler's failure is a row, never the end
of the comparison; the output folder is replaced all at once or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hetsim import schedulers
from hetsim.experiments import plots
from hetsim.experiments.cli import main
from hetsim.experiments.compare import OUTPUTS, TABLE_COLUMNS, compare
from hetsim.graphs import Graph
from hetsim.schedulers.base import Scheduler
from hetsim.sim import Device, Link, Platform


class Boom(Scheduler):
    """Raises something no scheduler is expected to raise."""

    name = "boom"

    def _schedule(self, graph, platform, cost):  # noqa: ANN001, ANN202
        raise KeyError("injected\nsecond line")


@pytest.fixture
def boom(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(schedulers.REGISTRY, "boom", (Boom, {}))
    return "boom"


def chain(n: int = 4, *, weights: int = 0, tensor: int = 4_000) -> Graph:
    g = Graph(name="chain", meta={"granularity": "op"})
    for i in range(n):
        g.add_op(f"n{i}", "matmul", flops=1e9, bytes=tensor + weights, param_bytes=weights)
        if i:
            g.add_edge(f"n{i - 1}", f"n{i}", bytes=tensor)
    return g


def small_gpu(memory: int) -> Platform:
    cpu = Device("cpu", "cpu", peak_flops=1e11, mem_bandwidth_bytes_per_s=1e10, memory_bytes=10**9)
    gpu = Device("gpu", "gpu", peak_flops=1e13, mem_bandwidth_bytes_per_s=1e11, memory_bytes=memory)
    return Platform("small-gpu", (cpu, gpu), (Link("cpu", "gpu", bandwidth_bytes_per_s=1e9),))


def test_every_failure_is_a_row_and_the_rest_is_tabulated(boom: str) -> None:
    # all-gpu: 4 x 600 bytes of weights on a 1000-byte GPU (PlanError); boom: KeyError;
    # all-cpu and cp-greedy plan and simulate
    cmp = compare(chain(weights=600, tensor=4), small_gpu(1000), schedulers=["all-cpu", "all-gpu", boom, "cp-greedy"])
    t = cmp.table.set_index("scheduler")
    assert list(cmp.table.columns) == TABLE_COLUMNS
    assert t.loc["all-cpu", "status"] == "ok" and t.loc["cp-greedy", "status"] == "ok"
    assert t.loc["all-gpu", "status"] == "failed"
    assert t.loc["all-gpu", "note"] == "PlanError: weights placed on device 'gpu' take 2400 bytes; it has 1000 bytes"
    assert t.loc[boom, "status"] == "failed"
    assert t.loc[boom, "note"] == "KeyError: 'injected\\nsecond line'"
    assert "\n" not in "".join(cmp.table["note"])
    assert pd.isna(t.loc["all-gpu", "makespan_s"]) and t.loc["cp-greedy", "makespan_s"] > 0
    assert t.loc["cp-greedy", "speedup_vs_all_cpu"] == pytest.approx(
        t.loc["all-cpu", "makespan_s"] / t.loc["cp-greedy", "makespan_s"])
    assert pd.isna(t.loc["cp-greedy", "speedup_vs_all_gpu"])  # no ok all-gpu row to compare with
    assert set(cmp.runs) == {"all-cpu", "cp-greedy"} and cmp.best() == "cp-greedy"
    text = cmp.format_table()
    assert f"{boom:<9}  (failed: KeyError" in text and text.count("\n") == 4


def test_a_simulation_out_of_memory_is_a_row() -> None:
    # all-gpu's working sets fit (plan check) but two live 600-byte tensors do not
    cmp = compare(chain(3, tensor=600), small_gpu(1000), schedulers=["all-gpu", "all-cpu"])
    t = cmp.table.set_index("scheduler")
    assert t.loc["all-gpu", "status"] == "failed"
    assert t.loc["all-gpu", "note"].startswith("SimulationError: device 'gpu' out of memory at t=")
    assert t.loc["all-cpu", "status"] == "ok"


def test_skipped_rows_give_the_reason() -> None:
    cmp = compare(chain(), "cpu2", schedulers=["all-gpu", "all-cpu"])
    t = cmp.table.set_index("scheduler")
    assert t.loc["all-gpu", "status"] == "skipped"
    assert "platform 'cpu2' has no GPU" in t.loc["all-gpu", "note"]


def test_no_usable_row_is_said_clearly(boom: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cmp = compare(chain(), "cpu2", schedulers=["all-gpu", boom])
    assert cmp.best() is None
    text = cmp.format_table()  # used to raise TypeError: 'int' object is not iterable
    assert text.splitlines()[1].startswith("all-gpu") and "(skipped: all-gpu: platform 'cpu2' has no GPU" in text
    path = tmp_path / "chain.json"
    chain().to_json(path)
    rc = main(["compare", str(path), "--platform", "cpu2", "--schedulers", f"all-gpu,{boom}",
               "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "hetsim compare: no scheduler produced a usable plan for 'chain' on 'cpu2'" in err
    saved = pd.read_csv(tmp_path / "out" / "results.csv")
    assert list(saved["status"]) == ["skipped", "failed"]
    assert not (tmp_path / "out" / "makespan.png").exists()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_failure_while_saving_leaves_the_previous_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    (out / "notes.txt").parent.mkdir(parents=True)
    (out / "notes.txt").write_text("the user's own file")
    compare(chain(), "xeon-p2200", schedulers=["all-cpu", "all-gpu"]).save(out)
    before = _snapshot(out)
    assert {"results.csv", "config.json", "plans/all-cpu.json", "gantt/all-gpu.png", "makespan.pdf"} <= set(before)

    def broken(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise RuntimeError("disk full")

    monkeypatch.setattr(plots, "gantt", broken)
    again = compare(chain(6), "xeon-p2200", schedulers=["all-cpu", "heft"])
    with pytest.raises(RuntimeError, match="disk full"):
        again.save(out)
    assert _snapshot(out) == before  # not one file of the failed save, none lost
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []  # no staging left

    monkeypatch.undo()
    again.save(out, plots=False)  # no charts this time: the old ones must not survive
    after = _snapshot(out)
    assert not any(k.startswith(("gantt", "makespan")) for k in after)
    assert set(after) == {"notes.txt", "results.csv", "config.json", "plans/all-cpu.json", "plans/heft.json"}
    assert after["notes.txt"] == b"the user's own file"
    assert json.loads(after["config.json"])["nodes"] == 6


def test_a_graph_of_view_ops_saves_without_charts_it_cannot_draw(tmp_path: Path) -> None:
    g = Graph(name="views")
    g.add_op("a", "reshape", inputs=[([4], "float32")], outputs=[([4], "float32")])
    g.add_op("b", "flatten", inputs=[([4], "float32")], outputs=[([4], "float32")])
    g.add_edge("a", "b")
    cmp = compare(g, "xeon-p2200", schedulers=["all-cpu", "heft"])
    cmp.save(tmp_path)
    assert (tmp_path / "results.csv").is_file() and (tmp_path / "makespan.png").is_file()
    assert not (tmp_path / "gantt").exists()  # zero-time schedules: nothing to draw
    assert set(OUTPUTS) >= {p.name for p in tmp_path.iterdir()}


def test_tensor_split_saves_the_graph_its_plan_is_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_schedulers import GRAPHS

    g = GRAPHS["inception"]()
    cmp = compare(g, "xeon-p2200", schedulers=["tensor-split"])
    run = cmp.runs["tensor-split"]
    assert run.graph is not g and cmp.graphs == {"tensor-split": run.graph}
    cmp.save(tmp_path, plots=False)
    graph_file, plan_file = tmp_path / "graphs" / "tensor-split.json", tmp_path / "plans" / "tensor-split.json"
    rc = main(["simulate", str(graph_file), "--platform", "xeon-p2200", "--plan", str(plan_file), "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["makespan_s"] == pytest.approx(run.result.makespan)
