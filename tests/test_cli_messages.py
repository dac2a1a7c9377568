"""What a first-time user reads: warnings on one line, a profile that measured none of a
model refused (with the flag that overrides it), files written with the umask's mode."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
from test_schedulers import GRAPHS, _eltwise, _io

from hetsim import costmodel, schedulers
from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.learned.measured import CostModelWarning
from hetsim.costmodel.platform import Platform
from hetsim.experiments.cli.main import main
from hetsim.graphs.graph import Graph
from hetsim.sim.plan import Plan

PROFILE = str(Path(__file__).resolve().parents[1] / "profiles" / "cpu2-torch")


def user_model() -> Graph:
    """Operators of shapes no zoo model has: the cpu2 profile measured none of them."""
    g = Graph(name="mine", meta={"granularity": "op"})
    _eltwise(g, "act", "relu", [1, 13, 7, 3])
    _eltwise(g, "gate", "sigmoid", [1, 13, 7, 3])
    for u, v in itertools.pairwise(["act", "gate"]):
        g.add_edge(u, v)
    _io(g, "act", "gate")
    return g


@pytest.fixture(scope="module")
def cpu2() -> Platform:
    return Platform.preset("cpu2")


def test_a_cost_model_warning_is_one_line_without_source(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It used to print the warning's file and line, then the Python source line."""
    path = GRAPHS["chain"]().to_json(tmp_path / "chain.json")  # 2 of its 5 signatures measured
    assert main(["simulate", str(path), "--platform", "cpu2", "--scheduler", "all-cpu", "--cost", PROFILE]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["hetsim simulate: warning: cpu2-torch: 3 of 5 nodes of graph 'chain' on profile device "
                   "'cpu@1' priced by a fallback (coverage 40.0%), e.g. signature not measured on cpu@1: "
                   "XGBoost; see .fallbacks(graph, device)"]  # fmt: skip


def test_a_model_the_profile_never_measured_is_refused(cpu2: Platform) -> None:
    """0 % coverage was a warning: every time silently an extrapolation."""
    g = user_model()
    refusing = costmodel.from_spec(PROFILE, platform=cpu2)
    assert refusing.coverage(g, cpu2.device("cpu0")) == 0.0  # the report itself is no error
    assert set(refusing.fallbacks(g, cpu2.device("cpu0"))) == {"act", "gate"}
    with pytest.raises(CostModelError) as e:
        schedulers.get("all-cpu").run(g, cpu2, refusing)
    assert str(e.value) == (
        "cpu2-torch: the profile measured none of the 2 nodes of graph 'mine' on 'cpu@1' (coverage 0%, "
        "e.g. signature not measured on cpu@1: XGBoost); profile the model ('hetsim profile'), or accept "
        "extrapolated times with --allow-uncovered (Python: allow_uncovered=True)")
    cost = costmodel.from_spec(PROFILE, platform=cpu2, allow_uncovered=True)
    with pytest.warns(CostModelWarning, match=r"2 of 2 nodes of graph 'mine'.*coverage 0\.0%"):
        run = schedulers.get("all-cpu").run(g, cpu2, cost)
    assert run.result.makespan > 0 and cost.coverage(g, cpu2.device("cpu0")) == 0.0


def test_the_cli_refuses_it_and_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = user_model().to_json(tmp_path / "mine.json")
    for command in (["simulate", str(path), "--scheduler", "heft"], ["compare", str(path), "--schedulers", "heft"]):
        argv = [*command, "--platform", "cpu2", "--cost", PROFILE]
        assert main(argv) == 2
        err = capsys.readouterr().err.splitlines()
        assert err[-1].startswith(f"hetsim {command[0]}: error: cpu2-torch: the profile measured none of the 2 "
                                  "nodes of graph 'mine'") and err[-1].endswith("with --allow-uncovered "
                                                                               "(Python: allow_uncovered=True)")
        assert main([*argv, "--allow-uncovered"]) == 0
        err = capsys.readouterr().err
        assert f"hetsim {command[0]}: warning: cpu2-torch: 2 of 2 nodes of graph 'mine'" in err


def test_files_are_written_with_the_umask_s_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``hetsim graph --json`` and plans were written 0600 (mkstemp), the rest 0644."""
    g = GRAPHS["chain"]()
    old = os.umask(0o022)
    try:
        written = [g.to_json(tmp_path / "g.json"), Plan({n: "cpu0" for n in g.nx}).to_json(tmp_path / "plan.json")]
        assert main(["graph", str(written[0]), "--json", str(tmp_path / "again.json")]) == 0
        written.append(tmp_path / "again.json")
        os.umask(0o077)
        written.append(g.to_json(tmp_path / "private.json"))
    finally:
        os.umask(old)
    capsys.readouterr()
    assert [stat.S_IMODE(p.stat().st_mode) for p in written] == [0o644, 0o644, 0o644, 0o600]


@pytest.mark.parametrize(("makespans", "hint"), [([10.0, 10.1, 10.2, 9.9, 10.0], False),
                                                 ([10.0, 14.0, 7.5, 12.0, 9.0], True)])  # fmt: skip
def test_validate_says_when_its_runs_say_the_host_is_busy(makespans: list[float], hint: bool, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """The same plan measured -64 % under load and +15 % on a quiet host, with no word
    that the host was busy: the spread of validate's own timed runs now says it."""
    from types import SimpleNamespace

    import numpy as np

    from hetsim.runtime.validation import validate
    run = SimpleNamespace(makespans=makespans)
    run.spread = (np.percentile(makespans, 90) - np.percentile(makespans, 10)) / np.median(makespans)

    def fake_validate(graph, platform, how, cost, **kw):  # noqa: ANN001, ANN003, ANN202
        return SimpleNamespace(run=run)

    monkeypatch.setattr(validate, "validate", fake_validate)
    path = GRAPHS["chain"]().to_json(tmp_path / "chain.json")
    assert main(["validate", str(path), "--platform", "cpu2", "--scheduler", "all-cpu"]) == 0
    err = capsys.readouterr().err
    spread = f"{run.spread:.0%}"
    expected = (f"hetsim validate: warning: the measured makespans spread by {spread} (p10-p90 over the median), "
                "more than the 10% a validation judges: the host is busy, and the error mixes the simulator's "
                "with the machine's noise; validate again on a quiet host (load average under 1)\n")  # fmt: skip
    assert err == (expected if hint else "")


def test_version_says_which_code_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """``hetsim --version`` did not exist; the console script may run another checkout."""
    import hetsim

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    root = str(Path(hetsim.__file__).resolve().parent.parent)
    assert out.startswith(f"hetsim {hetsim.__version__} (") and out.endswith(f"{root})")


def test_validate_checks_its_arguments_before_the_model_import(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A mistyped scheduler was reported after the model's import (and its TVM build)."""
    from hetsim.graphs import zoo

    def no_import(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("the model was imported before the arguments were checked")

    monkeypatch.setattr(zoo, "load", no_import)
    for argv, message in [
        (["validate", "resnet18", "--scheduler", "hfet"], "unknown scheduler 'hfet' (did you mean 'heft'?)"),
        (["validate", "resnet18", "--scheduler", "heft", "--scheduler-arg", "sead=1"],
         "scheduler 'heft': bad parameters ['sead']"),
        (["validate", "resnet18", "--scheduler", "heft", "--cost", "profiles/nope"], "cost model spec 'profiles/nope'"),
        (["validate", "--all", "--schedulers", "heft,hfet", "--out", "unused"], "unknown scheduler 'hfet'"),
        (["calibrate", "--platform", "cpu3"], "unknown platform preset 'cpu3'"),
    ]:  # fmt: skip
        assert main(argv) == 2, argv
        assert f"hetsim {argv[0]}: error: {message}" in capsys.readouterr().err, argv
    for argv, choice in [(["validate", "resnet18", "--scheduler", "heft", "--launch", "fast"], "'fast'"),
                         (["validate", "resnet18", "--scheduler", "heft", "--statistic", "mode"], "'mode'"),
                         (["calibrate", "--platform", "cpu2", "--launch", "lazy"], "'lazy'")]:
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert f"invalid choice: {choice}" in capsys.readouterr().err


def test_validate_passes_launch_and_statistic_on(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from hetsim.runtime.validation import validate

    seen = {}

    def fake_validate(graph, platform, how, cost, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.update(kw)
        return SimpleNamespace(run=SimpleNamespace(spread=0.0))

    monkeypatch.setattr(validate, "validate", fake_validate)
    path = GRAPHS["chain"]().to_json(tmp_path / "chain.json")
    assert main(["validate", str(path), "--platform", "cpu2", "--scheduler", "all-cpu", "--launch", "eager",
                 "--statistic", "mean"]) == 0
    assert (seen["options"].launch, seen["options"].statistic) == ("eager", "mean")
    assert main(["validate", str(path), "--platform", "cpu2", "--scheduler", "all-cpu"]) == 0
    assert (seen["options"].launch, seen["options"].statistic) == (None, None)


def test_without_pytorch_the_simulator_runs_and_the_zoo_says_which_extra(tmp_path: Path) -> None:
    """PyTorch is an extra ('torch'): without it a graph file is simulated, and a command
    that needs it (a zoo model) says in one line which extra installs it."""
    import subprocess
    import sys

    graph = user_model()
    path = graph.to_json(tmp_path / "mine.json")
    code = ("import sys; sys.modules['torch'] = None\n"  # import torch fails as where it is not installed
            "from hetsim.experiments.cli.main import main\n"
            "raise SystemExit(main(sys.argv[1:]))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "MPLBACKEND": "Agg"}

    def hetsim(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=300)  # fmt: skip

    ran = hetsim("simulate", str(path), "--platform", "cpu2", "--scheduler", "heft")
    assert ran.returncode == 0, ran.stderr
    assert "makespan" in ran.stdout
    refused = hetsim("graph", "squeezenet1_1")
    assert refused.returncode == 2
    assert refused.stderr.strip().count("\n") == 0
    assert "hetsim graph: error: this needs PyTorch" in refused.stderr and "'hetsim[torch]'" in refused.stderr
