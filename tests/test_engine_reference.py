"""The engine returns, bit for bit, what it returned when the reference was written.

``tests/engine_cases.py`` builds 1200 seeded cases (graph shapes, platforms, plans,
dynamic policies, cost models, requests, intervals, noise, memory checks) and
digests each outcome; ``tests/data/engine_reference.json`` holds the digests the
engine gave before its speed-up (issue 15). A faster engine must give identical
records (every field, floats bit for bit, in the same order), identical results
and identical errors. Rewritten once since, on purpose: for the dynamic cases on
platforms with a ``decision_s`` (issue 18: the worker that finished an op holds a
dispatch slot while it places the op's successors); every other case is as before.
"""

from __future__ import annotations

import json

import pytest
from engine_cases import REFERENCE, cases, outcome

CASES = cases()
EXPECTED = json.loads(REFERENCE.read_text())


def test_the_reference_covers_every_case() -> None:
    assert sorted(c.id for c in CASES) == sorted(EXPECTED)


@pytest.mark.parametrize("index", range(0, len(CASES), 100))
def test_records_and_results_are_unchanged(index: int) -> None:
    """Cases ``index .. index + 99``: every mismatch listed by case id."""
    wrong = {}
    for case in CASES[index : index + 100]:
        got = outcome(case)
        if got != EXPECTED[case.id]:
            wrong[case.id] = {"expected": EXPECTED[case.id], "got": got}
    assert not wrong, json.dumps(wrong, indent=1)[:4000]
