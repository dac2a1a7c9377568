"""``runtime.calibrate``: measure this machine's host costs in about a minute and write
a calibrated platform.

Micro-benchmarks only, no model: an op call per family on the CPU, a worker's
wake-up, the interpreter lock between two threads
(:mod:`~runtime.calibration.host_bench`) and, where a CUDA GPU is present, its eager
launches, a graph replay, events, a copy issue and the GPU-to-CPU hand-over
(:mod:`~runtime.calibration.cuda_bench`). The measurements go to
``measurements.json``, the platform with them in its keys
(:func:`~runtime.calibration.calibrated.apply_calibration`) to ``platform.toml``.

Examples
--------
>>> from hetsim.runtime import calibrate
>>> cal = calibrate("h100-server", out="out/calibration")     # doctest: +SKIP
>>> cal.platform.device("gpu").graph_launch_s                  # doctest: +SKIP
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hetsim
from hetsim.costmodel.platform import LAUNCH_MODES, Platform, PlatformError
from hetsim.graphs.graph import atomic_write
from hetsim.runtime.backends.relax_model import import_model
from hetsim.runtime.calibration.calibrated import FORMAT, apply_calibration, machine_name
from hetsim.runtime.calibration.cuda_bench import CudaDevice, cuda_device, measure_cuda
from hetsim.runtime.calibration.host_bench import (
    Clock,
    cpu_ops,
    interpreter_slowdown,
    op_call_costs,
    thread_wake_s,
)
from hetsim.runtime.calibration.toml_text import toml_text
from hetsim.runtime.executor.setup import wire

__all__ = ["DEFAULT_OUT", "Calibration", "calibrate"]

#: where :func:`calibrate` writes without ``out``
DEFAULT_OUT = Path("out") / "calibration"


@dataclass
class Calibration:
    """What :func:`calibrate` measured and wrote.

    Attributes
    ----------
    platform
        The calibrated platform.
    measured
        The raw measurements (the JSON written).
    notes
        One line per part skipped (e.g. no CUDA GPU).
    files
        ``{"platform": path, "measurements": path}`` (empty when nothing was written).
    """

    platform: Platform
    measured: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    files: dict[str, Path] = field(default_factory=dict)

    def __str__(self) -> str:
        m, us = self.measured, 1e6
        lines = [f"calibrated {self.platform.name!r} on {m['machine']} ({m['date']})",
                 "CPU op call (us): " + ", ".join(f"{f} {t * us:.1f}" for f, t in m["cpu"]["op_call_s"].items()),
                 f"worker wake-up: {m['cpu']['thread_wake_s'] * us:.1f} us; interpreter lock: a second thread's "
                 f"Python work slows the first {m['interpreter']['slowdown']:.2f}x"]
        g = m.get("gpu")
        if g:
            lines += [f"GPU {g['name']} launch (us): " + ", ".join(f"{f} {t * us:.1f}" for f, t in g["launch_s"].items()),
                      f"graph replay ({g['graph_ops']} ops) {g['graph_launch_s'] * us:.1f} us, event record "
                      f"{g['event_record_s'] * us:.1f} us, wait {g['event_wait_s'] * us:.1f} us, copy issue "
                      f"{g['copy_issue_s'] * us:.1f} us, GPU->CPU hand-over {g['handoff_gpu_to_cpu_s'] * us:.1f} us"]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"wrote {p}" for p in self.files.values()]
        return "\n".join(lines)


def calibrate(
    platform: Platform | str,
    out: str | os.PathLike[str] | None = DEFAULT_OUT,
    *,
    gpu: int | CudaDevice | None = 0,
    launch: str = "graph",
    calls: int = 100,
    repeats: int = 9,
    clock: Clock = time.perf_counter,
    progress: bool | Callable[[str], None] = True,
    models: Sequence[str] = (),
) -> Calibration:
    """Measure this machine's host costs and write ``platform`` calibrated with them.

    Parameters
    ----------
    platform
        Platform, preset name or TOML path whose keys are filled (its device
        figures are kept).
    out
        Folder of ``platform.toml`` and ``measurements.json`` (default
        ``out/calibration``; None: write nothing).
    gpu
        CUDA GPU index whose host costs are measured (or a
        :class:`~runtime.calibration.cuda_bench.CudaDevice`); None: the GPU parts are
        skipped with a note, and the platform's GPU devices keep their values. A
        platform with GPUs on a machine that cannot measure that GPU (no CUDA, or no
        such index) is refused (:class:`~sim.platform.PlatformError`): the host costs
        measured here would describe this machine, not that platform's.
    launch
        The GPU devices' ``launch`` mode where the platform does not state one.
    calls, repeats
        Calls per timed block and blocks per figure (medians over blocks).
    clock
        The host clock.
    progress
        True: a progress bar on stderr (tqdm); a callable: called with each step's
        name; False: silent.
    models
        Zoo models (batch 1) whose ops' host cost the executor measures on the GPU
        (:func:`~runtime.calibration.model_host.model_host_costs`: every op launched
        eagerly, the executor's bookkeeping included): per op kind and per model in
        the measurements (``gpu.model_host``), and the median over their ops as the
        GPU devices' ``dispatch_s`` instead of a tiny op's launch. Needs the GPU.

    Returns
    -------
    Calibration
    """
    base = Platform.load(platform)
    if launch not in LAUNCH_MODES:
        raise PlatformError(f"unknown launch mode {launch!r}; modes: {list(LAUNCH_MODES)}")
    notes: list[str] = []
    dev: CudaDevice | None
    if gpu is None:
        dev = None
        notes.append("GPU parts skipped: no GPU asked for")
    elif isinstance(gpu, int):
        dev, why = cuda_device(gpu)
        gpus = [d.name for d in base.devices if d.kind == "gpu"]
        if dev is None and gpus:  # this machine's CPU costs would land in a GPU machine's file
            raise PlatformError(
                f"calibrate: platform {base.name!r} has GPU device(s) {gpus}, but this machine cannot measure a GPU "
                f"({why}); its host costs would describe this machine, not that platform's: calibrate on the "
                "machine with the GPU, or a platform without GPUs here")
        if dev is None:
            notes.append(f"GPU parts skipped: {why}")
    else:
        dev = gpu
    if models and dev is None:
        raise PlatformError(f"calibrate: models={list(models)} measure their ops' host cost on a GPU, and none "
                            "is measured here")
    steps = ["CPU op call per family", "worker wake-up", "interpreter lock"]
    if dev is not None:
        steps += ["GPU launch per op family", "CUDA-graph replay", "event record and wait", "copy issue",
                  "GPU-to-CPU hand-over", *(f"host cost per op of {m}" for m in models)]
    say, finish = _progress(progress, len(steps))
    try:
        say(steps[0])
        cpu = {"op_call_s": _one_thread(lambda: op_call_costs(cpu_ops(), calls=calls, repeats=repeats,
                                                              clock=clock))}
        say(steps[1])
        cpu["thread_wake_s"] = thread_wake_s(clock=clock)
        say(steps[2])
        interp = interpreter_slowdown(clock=clock)
        gpu_measured = (measure_cuda(dev, calls=calls, repeats=repeats, clock=clock, step=say)
                        if dev is not None else None)
        if models and gpu_measured is not None:
            gpu_measured["model_host"] = _model_hosts(base, models, gpu if isinstance(gpu, int) else 0, say)
    finally:
        finish()
    measured = {"format": FORMAT, "machine": machine_name(dev.name if dev is not None else None),
                "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "hetsim_version": hetsim.__version__, "platform": base.name, "cpu": cpu, "interpreter": interp,
                "gpu": gpu_measured, "notes": notes}
    result = Calibration(apply_calibration(base, measured, launch=launch), measured, notes)
    if out is not None:
        result.files = write_calibration(result, out)
    return result


def _model_hosts(platform: Platform, models: Sequence[str], index: int, say: Callable[[str], None]) -> dict[str, Any]:
    """Per model, :func:`~runtime.calibration.model_host.host_cost_summary` of its ops on the
    platform's first GPU (CUDA device ``index``), and ``"median_s"`` over all their ops."""
    # import cycle: hetsim.runtime.calibration.model_host -> hetsim.runtime.calibration -> hetsim.runtime.calibration.calibrate
    from hetsim.runtime.calibration.model_host import host_cost_summary, model_host_costs

    gpu = next(d.name for d in platform.devices if d.kind == "gpu")
    out: dict[str, Any] = {}
    every: list[float] = []
    for name in models:
        say(f"host cost per op of {name}")
        model = import_model(name, batch=1)
        per_node = model_host_costs(model.graph, wire(model.graph, model), platform, device=gpu, model=model,
                                    device_map={gpu: f"cuda:{index}"})
        out[name] = host_cost_summary(model.graph, per_node)
        every += per_node.values()
    out["median_s"] = float(statistics.median(every))
    return out


def write_calibration(cal: Calibration, out: str | os.PathLike[str]) -> dict[str, Path]:
    """Write ``platform.toml`` and ``measurements.json`` of ``cal`` into the folder ``out``."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    files = {"platform": folder / "platform.toml", "measurements": folder / "measurements.json"}
    atomic_write(files["platform"], lambda fh: fh.write(toml_text(cal.platform.to_dict())))
    atomic_write(files["measurements"], lambda fh: fh.write(json.dumps(cal.measured, indent=1) + "\n"))
    return files


def _one_thread(measure: Callable[[], Any]) -> Any:
    """``measure()`` with torch's intra-op pool at one thread (a call's host cost, not
    a parallel kernel's), the pool's size restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return measure()
    finally:
        torch.set_num_threads(before)


def _progress(progress: bool | Callable[[str], None], total: int) -> tuple[Callable[[str], None], Callable[[], None]]:
    """A step callback and its closing call: a tqdm bar, the given callable, or nothing."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda _: None), (lambda: None)
    from tqdm import tqdm

    bar = tqdm(total=total, desc="calibrating", unit="step", leave=False)
    started = [False]

    def say(step: str) -> None:
        if started[0]:
            bar.update(1)
        started[0] = True
        bar.set_postfix_str(step)

    def finish() -> None:
        bar.update(total - bar.n)
        bar.close()

    return say, finish
