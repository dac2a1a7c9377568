"""The host side of a validation on a CUDA platform: how each plan's GPU work is
launched, and the fresh calibration its simulation uses.

* :func:`plan_launch` -- the launch mode a plan runs with: ``"graph"`` by default on a
  platform whose plan uses a GPU (each GPU segment captured and replayed as a CUDA
  graph, as a deployment runs it), ``"eager"`` when asked (``--launch eager``), and
  eager, with a note saying so, for a dynamic plan (its placement is decided at run
  time, so there is no segment to capture), the tvm backend, or an executor that
  does not take ``launch``.
* :func:`with_launch` -- the platform whose GPU devices state that mode, so that the
  simulator models the launches the run made.
* :func:`fresh_calibration` -- :func:`runtime.calibrate` on the first GPU the
  platform maps to, its host keys in the platform (``launch``, ``graph_launch_s``,
  ``event_s``, ``copy_issue_s``, the hand-overs, ``interpreter_lock``): with them
  the simulator's host model explains what the "two workers active" memory domain
  stood in for, which :meth:`LinkCalibration.apply
  <runtime.validation.link_calibration.LinkCalibration.apply>` then leaves out.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.platform import LAUNCH_MODES, PlatformError
from hetsim.runtime.calibration import calibrate

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.runtime.calibration import Calibration
    from hetsim.sim.plan import Plan

__all__ = ["fresh_calibration", "host_model", "plan_launch", "uses_gpu",
           "with_launch"]


def uses_gpu(plan: Plan, platform: Platform) -> bool:
    """Whether ``plan`` may run ops on a GPU device of ``platform`` (a dynamic plan may
    place anywhere)."""
    gpus = {d.name for d in platform.devices if d.kind == "gpu"}
    if not gpus:
        return False
    return plan.policy is not None or bool(gpus & set(plan.placement.values()))


def plan_launch(plan: Plan, platform: Platform, launch: str | None, *, backend: str = "torch"
                ) -> tuple[str | None, str]:
    """The launch mode ``plan`` runs with, and a note ("" when it is the one asked).

    Parameters
    ----------
    plan, platform
        The plan and its platform.
    launch
        ``"graph"``, ``"eager"`` or None (``"graph"`` where the plan uses a GPU).
    backend
        The executor's backend (graphs are captured for ``torch`` only).

    Returns
    -------
    tuple
        ``(mode, note)``; mode None for a plan that uses no GPU.

    Raises
    ------
    PlatformError
        For a mode that is neither ``"graph"`` nor ``"eager"``.
    """
    if launch is not None and launch not in LAUNCH_MODES:
        raise PlatformError(f"unknown launch mode {launch!r}; modes: {list(LAUNCH_MODES)}")
    if not uses_gpu(plan, platform):
        return None, ""
    mode = launch or "graph"
    if mode == "eager":
        return mode, ""
    if plan.policy is not None:
        return "eager", "launched eagerly: a dynamic plan places its ops at run time (no segment to capture)"
    if backend != "torch":
        return "eager", f"launched eagerly: CUDA graphs are captured for the torch backend, not {backend}"
    return mode, ""


def with_launch(platform: Platform, mode: str | None) -> Platform:
    """``platform`` whose GPU devices state ``launch = mode`` (unchanged for None)."""
    import dataclasses

    if mode is None:
        return platform
    devices = tuple(dataclasses.replace(d, launch=mode) if d.kind == "gpu" else d for d in platform.devices)
    return platform.replace(devices=devices)


def fresh_calibration(platform: Platform, *, device_map: Mapping[str, str] | None = None,
                      out: str | Path | None = None, progress: Callable[[str], None] | None = None,
                      **options: Any) -> Calibration:
    """:func:`runtime.calibrate` of ``platform`` on the first CUDA GPU it maps to
    (``device_map`` as :func:`runtime.execute`), its files under ``out/calibration``
    (None: not written); ``options`` go to :func:`runtime.calibrate`."""
    # looked up when called: tests replace it on hetsim.runtime.executor.setup
    from hetsim.runtime.executor.setup import map_devices

    gpus = [spec.index for spec in map_devices(platform, device_map).values() if spec.kind == "gpu"]
    return calibrate(platform, out=Path(out) / "calibration" if out is not None else None,
                     gpu=gpus[0] if gpus else None,
                     progress=(lambda step: progress(f"calibrating: {step}")) if progress else False, **options)


def host_model(platform: Platform, device_map: Mapping[str, str] | None, out: str | os.PathLike[str] | None,
               progress: Callable[[str], None] | None, **options: Any) -> tuple[Platform, str | None]:
    """On a platform with GPUs (of this machine: the caller checked), the platform
    with a fresh calibration's host keys (:func:`fresh_calibration`, with ``options``)
    and the provenance line; else the platform as given and None."""
    if not any(d.kind == "gpu" for d in platform.devices):
        return platform, None
    cal = fresh_calibration(platform, device_map=device_map, out=out, progress=progress, **options)
    where = f" ({cal.files['platform']})" if cal.files else ""
    line = (f"calibrated in this run{where}: launch, graph replay, events, copy issue, hand-overs, "
            f"interpreter lock ({'; '.join(cal.notes) or cal.measured['machine']}); no 'two workers active' "
            f"memory domain")
    return cal.platform, line
