"""No development diary in the tracked text: no development round numbers, no run ids
of past measurements and no "before this change" narratives, in documentation, code,
comments or messages. How a result was measured belongs in its data file
(``docs/results/data/*.toml``), not in prose."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = (".py", ".md", ".toml", ".txt")
#: what a development diary looks like
PATTERNS = {
    "a development round": re.compile(r"\b[Ss]essions? \d+\b"),
    "a run id": re.compile(r"(?<![\w./-])(?:V[1-9]|K[1-9][ab]?|R[1-9])(?![\w/-])"),
    "a change narrative": re.compile(r"\b[Bb]efore this change\b|\b[Aa]fter this change\b"),
    "the tracker's targets": re.compile(r"\bthe issue's targets\b"),
}
#: names that look like run ids and are not: a product's name
ALLOWED = ("ShuffleNet V2", "Aurora R7")
#: text shown to users, where a tracker's issue numbers mean nothing
USER_DOCS = re.compile(r"^(README\.md|docs/.*\.md|experiments/.*README\.md|benchmarks/.*\.py)$")
ISSUE_REFERENCE = re.compile(r"\b[Tt]he issue\b|\(issue \d+\)|\bissue #?\d+\b")
#: a line that cites a public source by its address (another project's issue is a source)
CITATION = re.compile(r"https?://")


def tracked_text_files() -> list[str]:
    """The tracked ``.py``, ``.md``, ``.toml`` and ``.txt`` files, this test's own left out."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, text=True, check=True)
    return [p for p in out.stdout.split("\0")
            if p.endswith(SUFFIXES) and p != "tests/test_no_diary.py" and (ROOT / p).is_file()]  # fmt: skip


def diary_lines(text: str) -> list[tuple[int, str, str]]:
    """``(line number, kind, line)`` for each line of TEXT that reads as a diary."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        cleaned = line
        for name in ALLOWED:
            cleaned = cleaned.replace(name, "")
        for kind, pattern in PATTERNS.items():
            if pattern.search(cleaned):
                found.append((number, kind, line.strip()))
    return found


def test_the_patterns_find_a_diary_and_leave_names_alone() -> None:
    """Each pattern on a line it must find, and on lines it must not."""
    # the examples are put together from numbers, so that no line of this file reads as a diary
    n = (1, 3, 6, 31)
    text = (f"as measured in session {n[3]}\nV{n[0]}-V{n[1]} and K{n[1]}a gave 1.0 %\nR{n[2]} in a fresh clone\n"
            "before this change it was slower\nAgainst the issue's targets\n"
            f"ShuffleNet V2 1.0x\nresnet50 v1.5\nsessions of the profiler\nx.V{n[0]} = 2\nR{n[0]}_ok\n")
    assert [(n, kind) for n, kind, _ in diary_lines(text)] == [
        (1, "a development round"), (2, "a run id"), (3, "a run id"), (4, "a change narrative"),
        (5, "the tracker's targets")]


def test_no_tracked_text_reads_as_a_diary() -> None:
    """Every tracked text file: none of the patterns (each hit named with its file and line)."""
    hits = [f"{path}:{n}: {kind}: {line[:120]}" for path in tracked_text_files()
            for n, kind, line in diary_lines((ROOT / path).read_text(errors="replace"))]  # fmt: skip
    assert hits == []


def test_user_documentation_cites_no_tracker_issue() -> None:
    """The README, the docs, the experiments' READMEs and the benchmarks' docstrings do
    not refer to the tracker's issues ("the issue gives no number", "Targets (issue 15)")."""
    hits = [f"{path}:{n}: {line.strip()[:120]}" for path in tracked_text_files() if USER_DOCS.match(path)
            for n, line in enumerate((ROOT / path).read_text().splitlines(), 1)
            if ISSUE_REFERENCE.search(line) and not CITATION.search(line)]  # fmt: skip
    assert hits == []
