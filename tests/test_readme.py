"""The README says what the code does: its links resolve in a clone, the commands it
documents write where git ignores (or where committed outputs live), the metric
definitions it prints are the code's, and what ``compare`` returns is what it says."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
DOCS = [ROOT / "README.md", ROOT / "docs" / "architecture.md", ROOT / "experiments" / "README.md",
        ROOT / "costmodel" / "PROFILE_FORMAT.md"]  # fmt: skip
#: options of the documented commands that name a file or folder they write
OUTPUT_OPTIONS = ("--out", "--json", "--dot", "--trace", "--profile-in-context", "--in-context")


def test_every_link_resolves_inside_the_repository() -> None:
    """``../shared/DESIGN.md`` was linked from the README: absent in a clone."""
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"[a-z]+://|#|mailto:", target):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            assert path.is_relative_to(ROOT) and path.exists(), f"{doc.name}: link {target!r}"


def test_no_file_points_to_the_shared_folder_of_the_team() -> None:
    """A docstring named ``shared/DESIGN.md``, and the README's NeuSight import read
    ``../shared/datasets/``: folders of the team that no user or clone has."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "-C", str(ROOT), "grep", "-n", "-E", r"\.\./shared/|shared/(DESIGN|STYLE)\.md", "--",
                          ":!tests/test_readme.py"], capture_output=True, text=True)  # fmt: skip
    assert out.stdout == ""


def documented_outputs() -> list[str]:
    """Paths the README's commands write: ``OPTION PATH`` in its code blocks, and the
    trace of its Python example."""
    blocks = "\n".join(re.findall(r"```(?:bash|python)\n(.*?)```", README, flags=re.S))
    paths = re.findall(rf"(?:{'|'.join(OUTPUT_OPTIONS)})[ =]([^\s`]+)", blocks)
    paths += re.findall(r"to_chrome_trace\(\"([^\"]+)\"\)", blocks)
    return paths


def test_documented_commands_write_where_git_ignores() -> None:
    """``--json lstm.json``, ``--dot bert.dot``, ``--trace heft.json`` and
    ``--out profiles/my-cpu`` left untracked files in the repository root."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = documented_outputs()
    assert "out/lstm.json" in paths and "out/profiles/my-cpu" in paths and len(paths) >= 12
    for path in paths:
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", path]).returncode == 0
        tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", path], capture_output=True,
                                 text=True).stdout.strip() != ""  # fmt: skip
        assert ignored or tracked, f"README: {path!r} is written where git neither ignores nor tracks it"


def test_the_metric_definitions_are_the_code_s() -> None:
    """Every column of a comparison is defined in the README as in ``--help``."""
    from hetsim.experiments.compare import COLUMN_DEFINITIONS, TABLE_COLUMNS
    from hetsim.sim.result import METRIC_DEFINITIONS

    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]* \| (.+) \|$", README, flags=re.M))
    definitions = {**METRIC_DEFINITIONS, **COLUMN_DEFINITIONS}
    assert {c: rows.get(c) for c in TABLE_COLUMNS} == {c: definitions[c] for c in TABLE_COLUMNS}


def test_compare_returns_what_the_readme_says() -> None:
    """The README said ``compare()`` returns a DataFrame; it returns a Comparison."""
    from test_schedulers import GRAPHS

    import hetsim
    from hetsim.experiments.compare import Comparison

    assert "`hetsim.compare(graph, platform)` returns a `Comparison` whose `.table` is the\ncomparison as a " \
           "DataFrame, with every run (`.runs`: plan, graph, simulation)" in README  # fmt: skip
    cmp = hetsim.compare(GRAPHS["chain"](), "cpu2", schedulers=["all-cpu", "heft"])
    assert isinstance(cmp, Comparison) and isinstance(cmp.table, pd.DataFrame)
    assert list(cmp.table["scheduler"]) == ["all-cpu", "heft"] and set(cmp.runs) == {"all-cpu", "heft"}
    run = cmp.runs["heft"]
    assert run.plan is cmp.plans["heft"] and run.result.makespan == cmp.table.at[1, "makespan_s"]
