"""schedulers.timeline.Timeline: the gap-indexed insertion search answers exactly
what the linear scan of every slot answered (the scan HEFT, CPOP, PEFT and
tensor-split used before it)."""

from __future__ import annotations

import random

import pytest

from hetsim.schedulers import timeline
from hetsim.schedulers.timeline import Timeline


def linear_scan(lane: list[tuple[float, float]], ready: float, dur: float) -> tuple[float, int]:
    """The former EFTState insertion search: first gap from the start of the lane."""
    prev = 0.0
    for i, (bs, be) in enumerate(lane):
        s = max(ready, prev)
        if s + dur <= bs:
            return s, i
        prev = be
    return max(ready, prev), len(lane)


@pytest.mark.parametrize("block", [1, 3, timeline.BLOCK])
def test_same_start_and_position_as_the_linear_scan(monkeypatch, block):
    monkeypatch.setattr(timeline, "BLOCK", block)
    for trial in range(40):
        rnd = random.Random(trial)
        t, lane = Timeline(), []
        for _ in range(150):
            ready = rnd.choice([rnd.uniform(0, 50), rnd.randint(0, 50) * 0.1, lane[-1][1] if lane else 0.0])
            dur = rnd.choice([0.0, rnd.uniform(0, 3), 0.1 * rnd.randint(0, 10)])
            want_s, want_i = linear_scan(lane, ready, dur)
            s, pos = t.earliest(ready, dur)
            assert s == want_s
            if dur > 0:
                lane.insert(want_i, (s, s + dur))
                t.insert(pos, s, s + dur)
        assert t.intervals() == lane
        assert len(t) == len(lane) and t.end == lane[-1][1]


def test_tail_appends_after_the_last_interval():
    t = Timeline()
    assert t.earliest(3.0, 1.0) == (3.0, t.tail())
    t.insert(t.tail(), 3.0, 4.0)
    t.insert(t.earliest(0.0, 2.0)[1], 0.0, 2.0)
    t.insert(t.tail(), 5.0, 6.0)
    assert t.intervals() == [(0.0, 2.0), (3.0, 4.0), (5.0, 6.0)]
    assert t.earliest(1.0, 1.0)[0] == 2.0  # the gap [2, 3) holds it
    assert t.earliest(1.0, 1.5)[0] == 6.0  # no gap does
