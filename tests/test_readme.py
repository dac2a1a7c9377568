"""The README and the documentation say what the code does: their links resolve in a
clone, the commands they document run as written and write where git ignores (or
where committed outputs live), the metric definitions they print are the code's, and
what ``compare`` returns is what they say."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: the pages whose shell blocks a user copies: the README, the user guide, the how-tos
COMMAND_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guide").glob("*.md")),
                 *sorted((ROOT / "docs" / "howto").glob("*.md"))]  # fmt: skip
DOCS = [*COMMAND_PAGES, ROOT / "docs" / "architecture.md", *sorted((ROOT / "docs" / "results").glob("*.md")),
        ROOT / "experiments" / "README.md", ROOT / "costmodel" / "PROFILE_FORMAT.md"]  # fmt: skip
#: a fenced block preceded by ``<!-- doc-test: skip (REASON) -->`` is not run by the tests
#: (it needs a GPU, a file of the user's, the network, or takes long)
BLOCK = re.compile(r"(<!-- doc-test: skip \(([^)]*)\) -->\n)?```(bash|python)\n(.*?)```", re.S)
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


def code_blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """``(language, code, reason it is skipped or None)`` of each bash or python block of PAGE."""
    return [(m.group(3), m.group(4), m.group(2)) for m in BLOCK.finditer(page.read_text())]


def documented_outputs() -> list[str]:
    """Paths the documented commands write: ``OPTION PATH`` in the code blocks of the
    README, the user guide and the how-tos, and the traces of their Python examples."""
    blocks = "\n".join(code for page in COMMAND_PAGES for _, code, _ in code_blocks(page))
    paths = re.findall(rf"(?:{'|'.join(OUTPUT_OPTIONS)})[ =]([^\s`]+)", blocks)
    paths += re.findall(r"to_chrome_trace\(\"([^\"]+)\"\)", blocks)
    return paths


def test_documented_commands_write_where_git_ignores() -> None:
    """``--json lstm.json``, ``--dot bert.dot``, ``--trace heft.json`` and
    ``--out profiles/my-cpu`` would leave untracked files in the repository."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = documented_outputs()
    assert "out/lstm.json" in paths and "out/profiles/my-cpu" in paths and len(paths) >= 12
    for path in paths:
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--no-index", path]).returncode == 0
        tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files", path], capture_output=True,
                                 text=True).stdout.strip() != ""  # fmt: skip
        assert ignored or tracked, f"documentation: {path!r} is written where git neither ignores nor tracks it"


def test_the_metric_definitions_are_the_code_s() -> None:
    """Every column of a comparison is defined in the user guide as in ``--help``."""
    from hetsim.experiments.compare import COLUMN_DEFINITIONS, TABLE_COLUMNS
    from hetsim.sim.result import METRIC_DEFINITIONS

    page = (ROOT / "docs" / "guide" / "simulation.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| [^|]* \| (.+) \|$", page, flags=re.M))
    definitions = {**METRIC_DEFINITIONS, **COLUMN_DEFINITIONS}
    assert {c: rows.get(c) for c in TABLE_COLUMNS} == {c: definitions[c] for c in TABLE_COLUMNS}


def test_compare_returns_what_the_guide_says() -> None:
    """The documentation said ``compare()`` returns a DataFrame; it returns a Comparison."""
    from test_schedulers import GRAPHS

    import hetsim
    from hetsim.experiments.compare import Comparison

    assert "`hetsim.compare(graph, platform)` returns a `Comparison` whose `.table` is the\ncomparison as a " \
           "DataFrame, with every run (`.runs`: plan, graph, simulation)" in \
           (ROOT / "docs" / "guide" / "python-api.md").read_text()  # fmt: skip
    cmp = hetsim.compare(GRAPHS["chain"](), "cpu2", schedulers=["all-cpu", "heft"])
    assert isinstance(cmp, Comparison) and isinstance(cmp.table, pd.DataFrame)
    assert list(cmp.table["scheduler"]) == ["all-cpu", "heft"] and set(cmp.runs) == {"all-cpu", "heft"}
    run = cmp.runs["heft"]
    assert run.plan is cmp.plans["heft"] and run.result.makespan == cmp.table.at[1, "makespan_s"]


def test_the_readme_is_a_front_page() -> None:
    """At most 250 lines, and it documents no block that the tests would not run
    without saying why."""
    assert len(README.splitlines()) <= 250
    assert all(lang != "bash" or reason is None or reason.strip() for lang, _, reason in code_blocks(ROOT / "README.md"))


def shell_blocks() -> list[pytest.param]:
    """Every bash block of the README, the user guide and the how-tos that is not marked
    to be skipped, one test case each (named by page and position)."""
    cases = []
    for page in COMMAND_PAGES:
        for index, (lang, code, reason) in enumerate(code_blocks(page)):
            if lang == "bash" and reason is None:
                cases.append(pytest.param(code, id=f"{page.relative_to(ROOT)}#{index}"))
    return cases


@pytest.fixture(scope="module")
def command_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A PATH whose ``hetsim`` and ``python`` are this interpreter running this checkout."""
    bin_dir = tmp_path_factory.mktemp("bin")
    for name, run in (("hetsim", f'exec "{sys.executable}" -m hetsim "$@"'), ("python", f'exec "{sys.executable}" "$@"')):
        script = bin_dir / name
        script.write_text(f"#!/bin/sh\n{run}\n")
        script.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def git_status() -> str:
    """``git status --porcelain`` of the checkout (untracked files listed one by one)."""
    return subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=all"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("code", shell_blocks())
def test_every_documented_shell_block_runs_and_leaves_the_checkout_as_it_was(code: str, command_path: str,
                                                                            checkout_view: Path) -> None:
    """Each block runs as written (``bash -e`` in a view of the repository root whose
    ``out/`` is its own, not the checkout's, which holds a user's files) and leaves git's
    view of the checkout unchanged: clean on a clean checkout."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    before = git_status()
    env = {**os.environ, "PATH": command_path, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-e", "-c", code], cwd=checkout_view, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{code}\nexit {done.returncode}\n{done.stderr[-3000:]}"
    assert git_status() == before
