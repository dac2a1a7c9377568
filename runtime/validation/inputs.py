"""The simulator's inputs measured in a validation's own rounds (the default).

Validating the simulator needs the op times and the host costs of the machine *as
it is during the validation*: a shared VM's speed drifts by +-10 % over minutes and
its host costs 2-3x with the other tenants' load, so a profile taken earlier makes
every plan look mispredicted. :class:`InRunInputs` sets up what
:func:`runtime.validation.validate.validate` and :func:`~runtime.validation.validate.validate_all` measure
when no cost model is given:

* a short in-context profile of the graphs first (``plan-profile/``), which the
  schedulers plan with;
* a :class:`~runtime.validation.context_profile.ContextProfiler` (``profile/``): every graph
  run node by node on one worker in each round, its op times the profile the plans
  are simulated with;
* a :class:`~runtime.validation.handoff.HostCalibration` on :data:`CALIBRATION_MODEL`: the
  handoff, read rate and two-worker slowdown (memory contention) of the same
  minutes.

:meth:`InRunInputs.describe` says, for the output, which inputs were measured in
the run and which came from a file.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetsim import costmodel
from hetsim.runtime.backends.tvm_backend import import_model
from hetsim.runtime.validation.context_profile import (
    ContextProfiler,
    DeviceProfilers,
    profile_in_context,
)
from hetsim.runtime.validation.handoff import HostCalibration
from hetsim.runtime.validation.link_calibration import LinkCalibration

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.tvm_backend import RelaxModel

__all__ = ["CALIBRATION_MODEL", "InRunInputs", "file_inputs", "timed_runs", "why_not_measured"]

#: the zoo model whose runs measure the host costs (one that is rarely validated)
CALIBRATION_MODEL = "squeezenet1_1"
#: the calibration model when the validated model is :data:`CALIBRATION_MODEL`
CALIBRATION_FALLBACK = "mobilenet_v2"


def why_not_measured(platform: Platform) -> str | None:
    """Why the op times cannot be measured in the run on ``platform`` (None: they can:
    every device is a CPU worker or a CUDA GPU of this machine)."""
    gpus = [d.name for d in platform.devices if d.kind != "cpu"]
    if gpus:
        import torch

        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if have < len(gpus):
            return (f"platform {platform.name!r} has GPU devices {gpus} and this machine "
                    f"{have} CUDA GPU(s): op times are measured on this machine's devices only")
    return None


def file_inputs(platform: Platform, cost_name: str, *, replicas: int, rounds: int) -> dict[str, str]:
    """The provenance lines of a validation that measured nothing in its run."""
    ops = ("roofline (analytic, from the platform's device specs)" if cost_name == "roofline"
           else f"from {cost_name} (a file, measured earlier)")
    return {"op times": ops,
            "host costs": f"from the platform {platform.name!r} (dispatch, handoff, read rate, decision: "
                          f"preset or file values)",
            "timed runs": timed_runs(rounds, replicas)}


def timed_runs(rounds: int, replicas: int) -> str:
    """The provenance line of the measured makespans: rounds and executions per plan."""
    if replicas == 1:
        return f"{rounds} per plan, one execution"
    return (f"{rounds} rounds x {replicas} executions of each plan (each built apart, its own buffers and "
            f"threads), {rounds * replicas} runs pooled")


def _fresh(folder: Path) -> Path:
    """``folder`` emptied of a profile an earlier run left (a folder with a
    ``manifest.json``, or one of such folders only, one per device); anything else
    there is refused rather than deleted."""
    if folder.exists():
        inside = list(folder.iterdir()) if folder.is_dir() else []
        per_device = bool(inside) and all(p.is_dir() and (p / "manifest.json").is_file() for p in inside)
        if not (folder / "manifest.json").is_file() and not per_device:
            raise ValueError(f"{folder}: exists and is not a profile folder; give another --out")
        shutil.rmtree(folder)
    return folder


class InRunInputs:
    """Op times and host costs measured in a validation's own rounds.

    Parameters
    ----------
    graphs
        ``(graph, relax model)`` of each model validated.
    platform
        The platform (CPU workers of this machine).
    folder
        Where ``plan-profile/`` and ``profile/`` go (None: a temporary folder,
        removed by :meth:`close`).
    backend, warmup
        As :func:`runtime.execute`.
    calibrate
        Zoo model of the host calibration (default :data:`CALIBRATION_MODEL`, or
        :data:`CALIBRATION_FALLBACK` when that one is validated); ``"none"``: keep
        the platform's host costs.
    plan_runs
        Timed runs of each graph in the short profile the schedulers plan with.
    batch
        Batch of the calibration model.
    profile
        Folder of the in-run profile (default ``folder/profile``).
    device_map
        As :func:`runtime.execute`.

    On a platform with GPUs, every device is profiled alone (one profile folder per
    device, :class:`~runtime.validation.context_profile.DeviceProfilers`), and the calibration
    model measures the copies between the first CPU device and the first GPU
    (:class:`~runtime.validation.link_calibration.LinkCalibration`) instead of two CPU workers'
    host costs.
    """

    def __init__(self, graphs: Sequence[tuple[Graph, RelaxModel]], platform: Platform,
                 folder: str | Path | None = None, *, backend: str = "torch", warmup: int = 3,
                 calibrate: str | None = None, plan_runs: int = 5, batch: int = 1,
                 profile: str | Path | None = None, device_map: Mapping[str, str] | None = None) -> None:
        # looked up when called: tests replace it on hetsim.runtime.executor.setup
        from hetsim.runtime.executor.setup import map_devices

        self._temp = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="hetsim-validate-")) if folder is None else Path(folder)
        self.platform = platform
        self.profiler_path = Path(profile) if profile is not None else self.folder / "profile"
        self.profiler: ContextProfiler | DeviceProfilers | None = None
        self.calibration: HostCalibration | LinkCalibration | None = None
        gpus = [d.name for d in platform.devices if d.kind == "gpu"]
        try:
            models = {g.name: m for g, m in graphs}
            plan_graphs = [g for g, _ in graphs]
            if gpus:  # each device alone, its own profile folder
                devices = {n: spec.name for n, spec in map_devices(platform, device_map).items()}
                root = _fresh(self.folder / "plan-profile")
                folders = {n: profile_in_context(plan_graphs, root / n, device=dev, warmup=2, runs=plan_runs,
                                                 models=models, backend=backend) for n, dev in devices.items()}
                self.plan_profile = ",".join(f"{n}={path}" for n, path in folders.items())
                self.profiler = DeviceProfilers(_fresh(self.profiler_path), devices, backend=backend)
            else:
                self.plan_profile = str(profile_in_context(
                    plan_graphs, _fresh(self.folder / "plan-profile"), warmup=2, runs=plan_runs,
                    models=models, backend=backend))  # graphs a scheduler rewrites: priced by the fallback
                self.profiler = ContextProfiler(_fresh(self.profiler_path), backend=backend)
            self.plan_cost = costmodel.from_spec(self.plan_profile, platform=platform)
            validated = {str(g.meta.get("model") or g.name) for g, _ in graphs}
            name = calibrate or (CALIBRATION_FALLBACK if CALIBRATION_MODEL in validated else CALIBRATION_MODEL)
            shared = [d.name for d in platform.devices if platform.shares_memory(platform.devices[0].name, d.name)]
            cpus = [d.name for d in platform.devices if d.kind == "cpu"]
            if name != "none" and gpus and cpus:
                cal = import_model(name, batch=batch)
                self.calibration = LinkCalibration(cal.graph, cal, platform, devices=(cpus[0], gpus[0]),
                                                   backend=backend, warmup=warmup, device_map=device_map)
            elif name != "none" and len(shared) >= 2:
                cal = import_model(name, batch=batch)
                self.calibration = HostCalibration(cal.graph, cal, platform, devices=(shared[0], shared[1]),
                                                   backend=backend, warmup=warmup)
        except BaseException:
            self.close()
            raise

    def describe(self, platform: Platform, calibrated: dict[str, Any] | None, *, rounds: int,
                 replicas: int, dispatch_s: float | None = None,
                 decisions: Mapping[str, float] | None = None) -> dict[str, str]:
        """Provenance lines: which inputs were measured in this run, which came from a file
        (``decisions``: ``"<model> <plan>"`` -> that dynamic plan's measured time per placement)."""
        out = {"plan": f"made with op times measured in context just before the rounds ({self.plan_profile})",
               "op times": f"measured in this run: each graph node by node on "
                           f"{'each device alone' if isinstance(self.profiler, DeviceProfilers) else 'one worker'}, once per round, "
                           f"{rounds} rounds interleaved with the plans' runs ({self.profiler_path})"}
        if dispatch_s is not None:
            out["dispatch"] = f"measured in this run: {dispatch_s * 1e6:.1f} us per op (the executor's work around a call)"
        if calibrated is not None and self.calibration is not None:
            out["host costs"] = (f"measured in this run on {self.calibration.graph.name}: "
                                 f"{self.calibration.describe(calibrated)}")
        else:
            out["host costs"] = f"from the platform {platform.name!r} (preset or file values)"
        if decisions:
            per_model = ", ".join(f"{m} {t * 1e6:.1f} us" for m, t in decisions.items())
            out["decision"] = (f"measured in this run: the dynamic plan's placements in its timed rounds, median "
                               f"per placement {per_model}")
        else:
            out["decision"] = (f"from the platform {platform.name!r}: {platform.decision_s * 1e6:.1f} us "
                               f"per dynamic placement")
        out["timed runs"] = timed_runs(rounds, replicas)
        return out

    def close(self) -> None:
        """Stop the calibration's and the profiler's executions; remove a temporary folder."""
        if self.calibration is not None:
            self.calibration.close()
        if self.profiler is not None:
            self.profiler.close()
        if self._temp:
            shutil.rmtree(self.folder, ignore_errors=True)
