"""hetsim installs one import name, ``hetsim``: a user's own ``sim/`` or ``experiments/``
package cannot shadow its layers."""

from __future__ import annotations

import ast
import functools
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("graphs", "costmodel", "sim", "schedulers", "runtime", "experiments")


def _user_project(tmp_path: Path) -> Path:
    """A research folder with its own ``sim`` and ``experiments`` packages."""
    for pkg in ("sim", "experiments", "graphs"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text(f"MINE = {pkg!r}\n")
    return tmp_path


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_user_packages_named_like_layers_do_not_shadow_hetsim(tmp_path: Path) -> None:
    cwd = _user_project(tmp_path)
    code = """
import sim, experiments, graphs
assert (sim.MINE, experiments.MINE, graphs.MINE) == ("sim", "experiments", "graphs")
import hetsim
from hetsim.sim import simulate
g = hetsim.Graph(name="chain")
g.add_op("a", "relu", flops=1e6, bytes=4096)
g.add_op("b", "relu", flops=1e6, bytes=4096)
g.add_edge("a", "b", bytes=1024)
platform = hetsim.Platform.preset("xeon-p2200")
plan = hetsim.get_scheduler("heft").schedule(g, platform, hetsim.Roofline())
res = simulate(g, platform, plan, hetsim.Roofline())
cmp = hetsim.compare(g, platform, schedulers=["all-cpu", "heft"])
print("makespan", res.makespan > 0, list(cmp.table["scheduler"]))
import sys
own = [m for m in sys.modules if m.split(".")[0] in ("sim", "experiments", "graphs") and m not in ("sim", "experiments", "graphs")]
print("own", own)
"""
    out = _run(code, cwd)
    assert out.returncode == 0, out.stderr
    assert "makespan True ['all-cpu', 'heft']" in out.stdout
    assert "own []" in out.stdout  # nothing of hetsim was looked up under the user's names


def test_python_m_hetsim_runs_the_cli(tmp_path: Path) -> None:
    cwd = _user_project(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-m", "hetsim", "--help"], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "simulate" in out.stdout and "compare" in out.stdout


def test_only_the_six_layers_are_subpackages_of_a_checkout(tmp_path: Path) -> None:
    code = """
import importlib
import hetsim
found = []
for name in ("tests", "docs", "benchmarks", "build", "profiles"):
    try:
        importlib.import_module("hetsim." + name)
        found.append(name)
    except ImportError:
        pass
import hetsim.sim.engine.simulator, hetsim.experiments.cli.main
print("found", found, hetsim.sim.__file__.endswith("/sim/__init__.py"))
"""
    out = _run(code, tmp_path)
    assert out.returncode == 0, out.stderr
    assert "found [] True" in out.stdout


def test_no_module_imports_a_layer_by_its_bare_name() -> None:
    bare = re.compile(rf"^\s*(from|import) ({'|'.join(LAYERS)})(\.|\s|$)", re.M)
    offenders = []
    for folder in (*LAYERS, "hetsim", "tests", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            for m in bare.finditer(path.read_text(encoding="utf-8")):
                line = path.read_text(encoding="utf-8")[: m.start()].count("\n") + 1
                offenders.append(f"{path.relative_to(ROOT)}:{line}")
    assert offenders == []


LAYER_ORDER = ("graphs", "costmodel", "sim", "schedulers", "runtime", "experiments")


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The parsed file, once per test process (the house tests below each read every file)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _imports(path: Path) -> list[tuple[int, str, str]]:
    """``(line, module, name)`` of every ``from hetsim... import name`` / ``import hetsim...``."""
    out = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hetsim"):
            out += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("hetsim")]
    return out


def _module(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts if parts[0] == "hetsim" else ["hetsim", *parts])


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = []
    for folder in (*LAYERS, "hetsim", "benchmarks"):
        for path in (ROOT / folder).rglob("*.py"):
            me = _module(path) if folder != "benchmarks" else ""
            for line, module, name in _imports(path):
                private = any(part.startswith("_") for part in module.split(".")) or name.startswith("_")
                if private and module != me and name != "__future__":
                    offenders.append(f"{path.relative_to(ROOT)}:{line}: {module} {name}")
    assert offenders == []


def test_layers_import_only_downwards() -> None:
    """graphs < costmodel < sim < schedulers < runtime < experiments, with no exception:
    the platform description the cost models read is costmodel's own."""
    offenders = []
    for layer in LAYER_ORDER:
        rank = LAYER_ORDER.index(layer)
        for path in (ROOT / layer).rglob("*.py"):
            for line, module, _ in _imports(path):
                parts = module.split(".")
                if len(parts) < 2 or parts[1] not in LAYER_ORDER:
                    continue
                if LAYER_ORDER.index(parts[1]) > rank:
                    offenders.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    assert offenders == []


def test_everyday_api_names_resolve() -> None:
    import hetsim

    for name in hetsim.__all__:
        assert getattr(hetsim, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        hetsim.nope  # noqa: B018


@pytest.mark.slow
def test_wheel_installs_only_the_hetsim_name(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if out.returncode != 0 and "No module named" in out.stderr:
        pytest.skip(f"cannot build a wheel here: {out.stderr.strip()[-200:]}")
    assert out.returncode == 0, out.stderr
    (wheel,) = tmp_path.glob("hetsim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"hetsim"}
    assert "hetsim/costmodel/presets/xeon-p2200.toml" in names
    assert "hetsim/graphs/zoo/cnn.py" in names
    for gpu in ("t4", "v100", "a100-80gb", "h100"):  # the profiles the GPU presets price from
        for f in ("ops.csv.gz", "manifest.json", "LICENSE"):
            assert f"hetsim/costmodel/profiles/gpu-{gpu}/{f}" in names
    assert "hetsim/costmodel/profiles/THIRD_PARTY_NOTICES" in names
    # installed (not a checkout): the presets still find their measured GPU profiles
    target = tmp_path / "site"
    out = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                          str(wheel)], capture_output=True, text=True, timeout=600)  # fmt: skip
    assert out.returncode == 0, out.stderr
    code = """
import hetsim
from hetsim.costmodel import builtin_profiles, from_spec
p = hetsim.Platform.preset("a100-server")
folder = builtin_profiles()[p.device("gpu").cost]
print(folder.is_dir(), str(folder).startswith(TARGET), from_spec("default", platform=p).describe())
""".replace("TARGET", repr(str(target)))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["True", "True", "cpu=roofline,gpu=gpu-a100-80gb"]


def _private_uses(path: Path) -> list[str]:
    """``x._name`` (one leading underscore, not a dunder) where ``x`` is not ``self``
    or ``cls``: a private member of another object."""
    out = []
    for node in ast.walk(_tree(path)):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)}")
    return out


#: private names of other libraries the package uses on purpose (their public API has
#: no equivalent): the subparser type argparse returns, a forked worker's exit, torch's
#: GPU spin kernel (timer calibration), TVM's view of a tensor
# other projects' private names the code relies on: torch's GPU spin and its cuBLAS
# workspace reset (each captured CUDA graph gets a workspace of its own)
FOREIGN_PRIVATE = ("argparse._SubParsersAction", "os._exit", "torch.cuda._sleep", "self.cuda._sleep",
                   "._create_view", "torch._C._cuda_clearCublasWorkspaces", "torch._C")


def test_no_module_reaches_into_another_objects_private_members() -> None:
    # e.g. the engine's pieces (sim/engine/) talk through EngineRun's public members
    offenders = [use for layer in (*LAYERS, "hetsim") for path in sorted((ROOT / layer).rglob("*.py"))
                 for use in _private_uses(path) if not use.endswith(FOREIGN_PRIVATE)]
    assert not offenders, "private members used from outside their class:\n" + "\n".join(offenders)
