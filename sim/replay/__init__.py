"""Replay of traced programs: a profiler trace's graph run again as recorded
(:func:`replay`), and the what-ifs that start from it (:mod:`sim.replay.whatif`)."""

from __future__ import annotations

from hetsim.sim.replay.replay import (
    LAUNCH_MODES,
    ReplayResult,
    ReplaySettings,
    replay,
    traced_records,
)

__all__ = ["LAUNCH_MODES", "ReplayResult", "ReplaySettings", "replay", "traced_records"]
