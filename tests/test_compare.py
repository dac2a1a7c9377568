"""``compare`` / ``hetsim compare``: every scheduler's failure is a row, never the end
of the comparison; the output folder is replaced all at once or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from hetsim import schedulers
from hetsim.experiments.cli.main import main
from hetsim.experiments.compare import OUTPUTS, TABLE_COLUMNS, compare
from hetsim.experiments.plotting import charts as plots
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
    assert f"{boom:<9}  (failed: KeyError" in text and text.count("\n") == 5  # header, 4 rows, columns


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
    """The files of an output folder but its lock file (empty while nobody writes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".hetsim.lock"}  # fmt: skip


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
    # no staging left, nor the folder's lock file
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []

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

    g = GRAPHS["inception"]()  # on cpu2's two equal workers, splitting pays
    cmp = compare(g, "cpu2", schedulers=["tensor-split"])
    run = cmp.runs["tensor-split"]
    assert run.graph is not g and cmp.graphs == {"tensor-split": run.graph}
    cmp.save(tmp_path, plots=False)
    graph_file, plan_file = tmp_path / "graphs" / "tensor-split.json", tmp_path / "plans" / "tensor-split.json"
    rc = main(["simulate", str(graph_file), "--platform", "cpu2", "--plan", str(plan_file), "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["makespan_s"] == pytest.approx(run.result.makespan)


# ------------------------------------------------------------ honest tables and charts
def test_ties_are_reported_as_ties(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from test_schedulers import GRAPHS

    g = GRAPHS["inception"]()  # heft, cp-greedy and optimal find the same plan here
    cmp = compare(g, "xeon-p2200", schedulers=["all-gpu", "cp-greedy", "heft", "optimal"])
    t = cmp.table.set_index("scheduler")
    assert t.loc["heft", "makespan_s"] == pytest.approx(t.loc["cp-greedy", "makespan_s"], rel=1e-9)
    assert cmp.winners() == ["cp-greedy", "heft", "optimal"]  # table order, not one of them
    assert list(t["rank"]) == [4, 1, 1, 1]
    assert cmp.best() == "cp-greedy"
    path = tmp_path / "g.json"
    g.to_json(path)
    assert main(["compare", str(path), "--schedulers", "all-gpu,cp-greedy,heft,optimal"]) == 0
    out = capsys.readouterr().out
    span = t.loc["heft", "makespan_s"] * 1e3
    assert f"best (tie at {span:.3f} ms): cp-greedy, heft, optimal" in out


def test_rates_and_utilisation_are_named_for_what_they_are() -> None:
    from test_schedulers import GRAPHS

    cmp = compare(GRAPHS["chain"](), "h100-server", schedulers=["all-gpu", "random"], requests=4)
    t = cmp.table.set_index("scheduler")
    for name in ("all-gpu", "random"):
        run = cmp.runs[name].result
        assert t.loc[name, "requests_per_s"] == pytest.approx(4 / run.makespan)
        assert t.loc[name, "throughput_per_s"] == pytest.approx(3 / (max(run.completions) - min(run.completions)))
        # a GPU of 4 streams: utilisation is its busy time over 4 x the makespan
        assert t.loc[name, "gpu_util"] == pytest.approx(run.device_busy["gpu"] / (4 * run.makespan))
    text = cmp.format_table()
    header = text.splitlines()[0].split("  ")
    assert "req/s" in [h.strip() for h in header] and "steady req/s" in [h.strip() for h in header]
    assert text.splitlines()[-1].startswith("req/s: requests / makespan; steady req/s: (requests - 1) / "
                                            "(last - first completion); util: busy / (makespan x streams), "
                                            "streams cpu 1, gpu 4")
    single = compare(GRAPHS["chain"](), "h100-server", schedulers=["all-gpu"]).format_table()
    assert "steady" not in single  # one request: one rate


def test_a_rewritten_graph_and_optimal_s_objective_are_marked() -> None:
    from test_schedulers import GRAPHS

    g = GRAPHS["chain"]()
    cmp = compare(g, "cpu2", schedulers=["heft", "tensor-split", "optimal"],
                  scheduler_args={"optimal": {"time_limit_s": 2.0}})  # fmt: skip
    t = cmp.table.set_index("scheduler")
    assert list(t["graph_rewritten"]) == [False, True, False]
    n = cmp.runs["tensor-split"].graph.number_of_nodes()
    assert t.loc["tensor-split", "note"] == (
        f"plan for a rewritten graph: {len(cmp.runs['tensor-split'].plan.meta['split_nodes'])} operator(s) "
        f"split across devices, 5 -> {n} nodes")
    assert t.loc["optimal", "note"] == ("objective: makespan of one request, over plans of one placement and "
                                        "one priority order for the graph as given; proven optimal")
    lines = cmp.format_table().splitlines()
    assert lines[2].startswith("tensor-split [1] ") and lines[3].startswith("optimal [2] ")
    assert lines[4] == f"[1] tensor-split: {t.loc['tensor-split', 'note']}"
    assert lines[5] == f"[2] optimal: {t.loc['optimal', 'note']}"


def test_the_makespan_chart_names_every_scheduler_in_table_order(tmp_path: Path) -> None:
    from matplotlib.image import imread
    from test_schedulers import GRAPHS

    cmp = compare(GRAPHS["chain"](), "cpu2", schedulers=["all-cpu", "all-gpu", "random", "heft", "tensor-split"])
    fig = plots.comparison_bars(cmp.table, best=cmp.winners())
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["all-cpu", "all-gpu", "random", "heft",
                                                             "tensor-split *"]  # fmt: skip
    bars = [p.get_width() for p in ax.patches]
    ok = cmp.ok()
    assert bars == pytest.approx(list(ok["makespan_s"] * 1e3))
    texts = [t.get_text() for t in ax.texts]
    assert texts[1] == "skipped"  # all-gpu: cpu2 has no GPU, listed where its bar would be
    assert [f"{v * 1e3:.4g}" for v in ok["makespan_s"]] == [x for x in texts if x != "skipped"]
    bold = [t.get_text() for t in ax.get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["tensor-split *"]
    assert "* plan for a rewritten graph" in ax.get_xlabel()
    colours = {p.get_facecolor() for p in ax.patches}
    assert len(colours) == len(ax.patches)
    cmp.save(tmp_path)
    assert imread(tmp_path / "makespan.png").shape[0] > 0


def test_argument_errors_come_before_the_model_import(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from hetsim.experiments.cli import common
    def no_import(args):  # noqa: ANN001, ANN202
        raise AssertionError("the model was imported before the arguments were checked")

    monkeypatch.setattr(common, "load_model", no_import)
    monkeypatch.setattr("hetsim.experiments.cli.compare.load_model", no_import)
    monkeypatch.setattr("hetsim.experiments.cli.simulate.load_model", no_import)
    cases = [
        (["simulate", "resnet18", "--scheduler", "hfet"],
         "hetsim simulate: error: unknown scheduler 'hfet' (did you mean 'heft'?)"),
        (["compare", "resnet18", "--schedulers", "heft,cpop,hfet"],
         "hetsim compare: error: unknown scheduler 'hfet' (did you mean 'heft'?)"),
        (["compare", "resnet18", "--scheduler-arg", "optimal:time_limit=3"],
         "hetsim compare: error: scheduler 'optimal': bad parameters ['time_limit']"),
        (["compare", "resnet18", "--platform", "xeon-p2000"], "hetsim compare: error: unknown platform"),
        (["compare", "resnet18", "--cost", "profiles/nope"], "hetsim compare: error: cost model spec 'profiles/nope'"),
    ]  # fmt: skip
    for argv, message in cases:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, argv
    for argv, message in [
        (["compare", "resnet18", "--requests", "0"], "argument --requests: expected an integer >= 1, got '0'"),
        (["simulate", "resnet18", "--scheduler", "heft", "--interval", "-1"], "argument --interval: expected a"),
        (["compare", "resnet18", "--batch", "0"], "argument --batch: expected an integer >= 1"),
        (["simulate", "resnet18", "--scheduler", "heft", "--plan", "p.json"], "not allowed with argument"),
    ]:  # argparse's own errors: exit status 2, no bar drawn, nothing imported
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert message in err and "compare resnet18:" not in err


def test_compare_refuses_bad_requests_before_any_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    from hetsim.sim.engine.state import SimulationError

    with pytest.raises(SimulationError, match=r"requests must be an int in \[1, 1000000\], got 0"):
        compare(chain(), "cpu2", schedulers=["all-cpu"], requests=0, progress=True)
    assert capsys.readouterr().err == ""  # the bar is never drawn


def test_an_error_mid_comparison_leaves_no_half_drawn_bar(capsys: pytest.CaptureFixture[str]) -> None:
    from hetsim.costmodel.base import CostModelError

    class Unpriceable:
        def op_time(self, graph, node, device):  # noqa: ANN001, ANN202
            raise CostModelError("cannot price it")

        def transfer_time(self, nbytes, link):  # noqa: ANN001, ANN202
            return 0.0

    with pytest.raises(CostModelError, match="cannot price it"):
        compare(chain(), "cpu2", schedulers=["all-cpu", "heft"], cost=Unpriceable(), progress=True)
    err = capsys.readouterr().err
    assert "compare chain" in err  # the bar was drawn ...
    *_, last, after = err.split("\r")
    assert after == "" and last.strip() == ""  # ... and cleared, not left half drawn
