"""The schedulers make the plans they made when the reference was written.

``tests/scheduler_cases.py`` builds the cases (the fixture graphs of
``test_schedulers.py`` on three presets, and 160 seeded random DAGs on presets and
hand-made platforms under three cost models); ``tests/data/scheduler_reference.json``
holds the digest of every scheduler's plan before issue 15 made the list
schedulers' insertion search and the pipeline partitioners faster. Those must
give the same plans, bit for bit.
"""

from __future__ import annotations

import json

import pytest
from scheduler_cases import PINNED, REFERENCE, cases, outcome
from test_schedulers import GRAPHS

CASES = cases(GRAPHS)
EXPECTED = json.loads(REFERENCE.read_text())


def test_the_reference_covers_every_case() -> None:
    assert {f"{c.id}:{n}" for c in CASES for n in PINNED} <= set(EXPECTED)


@pytest.mark.parametrize("name", PINNED)
def test_plans_are_unchanged(name: str) -> None:
    wrong = {}
    for case in CASES:
        key = f"{case.id}:{name}"
        got = outcome(case, name)
        if got != EXPECTED[key]:
            wrong[key] = {"expected": EXPECTED[key], "got": got}
    assert not wrong, f"{len(wrong)} of {len(CASES)} plans changed: " + json.dumps(wrong, indent=1)[:3000]
