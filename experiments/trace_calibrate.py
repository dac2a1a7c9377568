"""``hetsim calibrate --from-trace``: a platform whose GPU host figures come from a
PyTorch profiler trace instead of micro-benchmarks on this machine."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.platform import Platform
from hetsim.costmodel.trace import TraceFigures, calibrated_from_trace, trace_figures
from hetsim.costmodel.trace.devices import traced_preset
from hetsim.graphs.graph import atomic_write
from hetsim.runtime.calibration.toml_text import toml_text

__all__ = ["calibrate_from_trace"]


def calibrate_from_trace(trace: str | os.PathLike[str], out: str | os.PathLike[str], *,
                         platform: str | None = None, step: str | None = None) -> tuple[TraceFigures, Platform]:
    """Write ``out/platform.toml`` (``platform``, default the preset of the traced GPU,
    with the trace's figures: :func:`costmodel.trace.calibrated_from_trace`) and
    ``out/measurements.json`` (the figures); return both."""
    figures = trace_figures(trace, step=step)
    if platform is None:
        device = figures.device or ""
        platform = traced_preset(device)
        if platform is None:
            raise CostModelError(f"{trace}: no preset describes the traced GPU {device or '(not named)'!r}; "
                                 "give --platform")
    cal = calibrated_from_trace(Platform.load(platform), figures)
    folder = Path(out)
    atomic_write(folder / "platform.toml", lambda fh: fh.write(toml_text(cal.to_dict())))
    atomic_write(folder / "measurements.json",
                 lambda fh: fh.write(json.dumps(dict(figures.rows()), indent=1) + "\n"))
    return figures, cal
