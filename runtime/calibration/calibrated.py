"""A platform with its host costs calibrated: the keys a calibration fills, the
``[calibration]`` table that says where and when, and the check made on reading one.

:func:`apply_calibration` writes measured host costs (:func:`runtime.calibrate`'s
JSON) into a platform's keys:

* every CPU device: ``dispatch_s`` (median over the op families of an op call) and
  ``handoff_s`` (the GPU-to-CPU hand-over where a GPU was measured, else a
  worker's wake-up);
* every GPU device, where a CUDA GPU was measured: ``dispatch_s`` (median eager
  launch), ``launch`` (kept when the platform states it, else the ``launch``
  argument), ``graph_launch_s``, ``event_s`` (mean of a record and a wait),
  ``copy_issue_s`` and ``handoff_s`` (the launching thread's wake-up: the CPU-to-GPU
  hand-over);
* ``interpreter_lock``: whether a second thread's Python work slowed the first's by
  at least :data:`LOCK_SLOWDOWN`;
* ``[calibration]``: ``machine`` (host name, CPU model, GPU name), ``date`` (ISO),
  ``format`` (:data:`FORMAT`) and ``hetsim_version``.

:func:`check_calibration` is what reading a calibrated platform checks: another
machine's or an older format's figures give a :class:`CalibrationWarning` naming the
machine and date; a format this version does not know is a
:class:`~sim.platform.PlatformError` naming the key.
"""

from __future__ import annotations

import dataclasses
import os
import platform as pyplatform
import socket
import statistics
import warnings
from collections.abc import Mapping
from typing import Any

from hetsim.costmodel.platform import Platform, PlatformError

__all__ = ["FORMAT", "LOCK_SLOWDOWN", "CalibrationWarning", "apply_calibration", "check_calibration",
           "cpu_model", "load_calibrated", "machine_name"]

#: version of the calibration's keys and JSON (``[calibration] format``)
FORMAT = "1"
#: a second thread's Python work slowing the first's at least this much: one interpreter lock
LOCK_SLOWDOWN = 1.2
#: separates host name, CPU model and GPU name in ``[calibration] machine``
SEP = " | "


class CalibrationWarning(UserWarning):
    """A calibrated platform read on another machine, or of an older format."""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; else :func:`platform.processor`)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return pyplatform.processor() or pyplatform.machine() or "unknown CPU"


def machine_name(gpu: str | None = None) -> str:
    """``host name | CPU model | GPU name`` (``no GPU`` without one)."""
    return SEP.join((socket.gethostname(), cpu_model(), gpu or "no GPU"))


def apply_calibration(platform: Platform, measured: Mapping[str, Any], *, launch: str = "graph") -> Platform:
    """``platform`` with the host costs of ``measured`` (the JSON of a calibration:
    ``cpu``, ``interpreter``, ``gpu`` (None where no GPU was measured), ``machine``,
    ``date``, ``format``, ``hetsim_version``) in its keys (see the module docstring).

    Examples
    --------
    >>> from hetsim.costmodel.platform import Platform
    >>> m = {"cpu": {"op_call_s": {"elementwise": 4e-6, "matmul": 6e-6}, "thread_wake_s": 3e-5},
    ...      "interpreter": {"slowdown": 1.9}, "gpu": None, "machine": "box | cpu | no GPU",
    ...      "date": "2026-11-28T07:00:00+00:00", "format": "1", "hetsim_version": "0.1.0"}
    >>> p = apply_calibration(Platform.preset("cpu2"), m)
    >>> [(d.dispatch_s, d.handoff_s) for d in p.devices], p.interpreter_lock
    ([(5e-06, 3e-05), (5e-06, 3e-05)], True)
    """
    cpu, gpu = measured["cpu"], measured.get("gpu")
    cpu_dispatch = float(statistics.median(cpu["op_call_s"].values()))
    wake = float(cpu["thread_wake_s"])
    devices = []
    for d in platform.devices:
        if d.kind == "cpu":
            d = dataclasses.replace(d, dispatch_s=cpu_dispatch,
                                    handoff_s=float(gpu["handoff_gpu_to_cpu_s"]) if gpu else wake)
        elif gpu:
            host = gpu.get("model_host") or {}  # a model's ops, where measured; else a tiny op's launch
            d = dataclasses.replace(d, dispatch_s=float(host.get("median_s") or statistics.median(gpu["launch_s"].values())),
                                    launch=d.launch or launch, graph_launch_s=float(gpu["graph_launch_s"]),
                                    event_s=(float(gpu["event_record_s"]) + float(gpu["event_wait_s"])) / 2,
                                    copy_issue_s=float(gpu["copy_issue_s"]), handoff_s=wake)
        devices.append(d)
    table = {k: str(measured[k]) for k in ("machine", "date", "format", "hetsim_version")}
    return platform.replace(devices=tuple(devices), calibration=table,
                            interpreter_lock=float(measured["interpreter"]["slowdown"]) >= LOCK_SLOWDOWN)


def check_calibration(platform: Platform, *, machine: str | None = None, gpu: str | None = None,
                      refuse: bool = False) -> str | None:
    """What is wrong with reading ``platform``'s calibration here, or None (not
    calibrated, or calibrated on this machine in this format).

    Parameters
    ----------
    platform
        A platform (its ``calibration`` table).
    machine
        This machine's :func:`machine_name` (default: computed; only its host name and
        CPU model are compared, so that checking needs no GPU).
    gpu
        This machine's GPU name, compared too when given (a platform calibrated with
        another GPU, or with none, has another GPU's host costs).
    refuse
        Raise :class:`~sim.platform.PlatformError` for figures of another machine or
        GPU instead of returning the text (what runs on this machine, such as
        ``validate``, cannot use them).

    Returns
    -------
    str or None
        The warning text, naming the machine and date of the figures.

    Raises
    ------
    PlatformError
        For a ``format`` that is not an integer or newer than :data:`FORMAT`.
    """
    cal = platform.calibration
    if not cal:
        return None
    fmt = cal.get("format", "")
    if not fmt.isdigit():
        raise PlatformError(f"platform {platform.name!r}: [calibration] 'format' must be an integer version "
                            f"(this hetsim reads up to {FORMAT}), got {fmt!r}")
    where = f"{cal.get('machine', 'an unnamed machine')!r} on {cal.get('date', 'an unknown date')}"
    if int(fmt) > int(FORMAT):
        raise PlatformError(f"platform {platform.name!r}: [calibration] 'format' {fmt} is newer than this "
                            f"hetsim reads ({FORMAT}); calibrated on {where}: recalibrate or upgrade hetsim")
    if int(fmt) < int(FORMAT):
        return (f"platform {platform.name!r} was calibrated in format {fmt} (this hetsim writes {FORMAT}) on "
                f"{where}: recalibrate (hetsim calibrate --platform ...)")
    here = (machine or machine_name()).split(SEP)[:2]
    there = cal.get("machine", "").split(SEP)
    text = None
    if here != there[:2]:
        text = (f"platform {platform.name!r} was calibrated on another machine, {where}: its host costs are "
                f"that machine's; recalibrate here (hetsim calibrate --platform ...)")
    elif gpu is not None and (there[2:3] or [""])[0] != gpu:
        text = (f"platform {platform.name!r} was calibrated with another GPU, {where}, not this machine's "
                f"{gpu!r}: its host costs are that GPU's; recalibrate here (hetsim calibrate --platform ...)")
    if text is not None and refuse:
        raise PlatformError(text)
    return text


def load_calibrated(path: str | os.PathLike[str] | Platform, *, machine: str | None = None,
                    gpu: str | None = None, refuse: bool = False) -> Platform:
    """:meth:`Platform.load <sim.platform.Platform.load>`, then :func:`check_calibration`
    (``machine``, ``gpu``, ``refuse`` as there; its text as a :class:`CalibrationWarning`)."""
    platform = Platform.load(path)
    text = check_calibration(platform, machine=machine, gpu=gpu, refuse=refuse)
    if text is not None:
        warnings.warn(text, CalibrationWarning, stacklevel=2)
    return platform
