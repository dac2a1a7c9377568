"""Profiles for validation: the executor's per-op overhead, and op times in context.

* :func:`measure_overhead` -- seconds per op the executor spends on a chain of
  one-element ``relu`` ops on one worker (and how much of it is the kernel call);
* :func:`calibrate_dispatch` -- writes that overhead into a profile's
  ``dispatch.json``, so that the simulator's per-op host dispatch is what the
  executor really spends;
* :func:`profile_in_context` -- a profile whose op times are measured *inside* the
  model: each graph run node by node by the executor on one worker, the kernel-call
  time of every node recorded over many runs, and each operator signature given
  the mean over its nodes and runs (the mean, not the median: on a busy host a
  few calls are preempted, and the runs' makespans include those calls, which the
  median of each op leaves out). Operators timed alone in a loop
  (:mod:`runtime.profiler`) find their inputs, weights and output buffer hot in
  the caches; in the model they do not, and on the 2-core development machine
  convolutions take 1.2-1.5x and small memory-bound ops (batch norm, relu, concat)
  3-5x their isolated times. A profile taken in context, just before a
  validation, also sees the machine at the same speed as the validation (shared
  cloud machines drift by +-15 % over minutes).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim import costmodel, schedulers
from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.platform import Device, Platform
from hetsim.costmodel.platform import Platform as _Platform
from hetsim.graphs.features import FEATURE_COLUMNS, features
from hetsim.graphs.graph import Graph
from hetsim.runtime.backends import parse_device
from hetsim.runtime.backends.tvm_backend import import_model
from hetsim.runtime.executor.execute import Execution
from hetsim.runtime.executor.result import host_costs
from hetsim.runtime.executor.setup import Wiring, load_model, wire
from hetsim.runtime.profiler import MeasureSettings, build_manifest
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.backends.tvm_backend import RelaxModel

__all__ = ["ContextProfiler", "DeviceProfilers", "GpuContextRuns", "calibrate_dispatch", "measure_overhead",
           "profile_in_context"]


def _one_device(device: str) -> tuple[Platform, dict[str, str]]:
    """A platform with one device ``d`` running on real device ``device`` (plus a
    CPU host when it is a GPU), and the device map that says so."""
    spec = parse_device(device)
    kind = "gpu" if spec.kind == "gpu" else "cpu"
    dev = Device(name="d", kind=kind, peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=1 << 36,
                 threads=spec.threads)
    if kind == "cpu":
        return Platform(name="one-device", devices=(dev,), host="d"), {"d": spec.name}
    host = Device(name="host", kind="cpu", peak_flops=1e12, mem_bandwidth_bytes_per_s=1e11, memory_bytes=1 << 36)
    return Platform(name="one-device", devices=(dev, host), host="host"), {"d": spec.name, "host": "cpu"}


def measure_overhead(
    device: str = "cpu@1",
    backend: str = "torch",
    *,
    ops: int = 400,
    repeats: int = 15,
    kernel: bool = True,
) -> float:
    """Seconds per op that the executor spends on a chain of one-element ``relu``
    ops on one worker of ``device``.

    Parameters
    ----------
    device, backend
        Where and with which kernels.
    ops, repeats
        Chain length and timed runs (the median run counts).
    kernel
        Include the kernel call (``True``: what the simulator's per-op dispatch
        must be with a profile of isolated kernel times, which the profiler takes
        net of a bare call; ``False``: the executor's work around the call only,
        for a profile of in-context call times).

    Examples
    --------
    >>> t = measure_overhead("cpu@1")    # doctest: +SKIP
    >>> 1e-6 < t < 1e-4                  # doctest: +SKIP
    True
    """
    if ops < 2:
        raise ValueError(f"ops must be >= 2, got {ops}")
    g = Graph(name="overhead")
    names = [f"{i:05d}_relu" for i in range(ops)]
    for i, n in enumerate(names):
        g.add_op(n, "relu", inputs=[([1], "float32")], outputs=[([1], "float32")])
        if i:
            g.add_edge(names[i - 1], n)
    g.meta["inputs"] = [{"name": "x", "shape": [1], "dtype": "float32", "bytes": 4, "consumers": [names[0]]}]
    g.meta["outputs"] = [{"node": names[-1], "output": 0, "shape": [1], "dtype": "float32", "bytes": 4}]
    wiring = Wiring({n: [("node", (names[i - 1], 0))] if i else [("input", "x")] for i, n in enumerate(names)},
                    {}, {}, {"x": np.ones(1, np.float32)})
    platform, dmap = _one_device(device)
    with Execution(g, Plan(dict.fromkeys(names, "d")), platform, wiring, backend=backend, device_map=dmap,
                   check=False, traced=True) as ex:
        ex.run(3, timed=False)
        ex.run(repeats)
        run = ex.result()
    per_op = run.median / ops
    if kernel:
        return per_op
    calls = [r["end"] - r["start"] for r in run.records if r["kind"] == "op"]
    return max(per_op - float(np.median(calls)), 0.0)


def calibrate_dispatch(
    profile: str | os.PathLike[str],
    *,
    backend: str | None = None,
    ops: int = 400,
    repeats: int = 15,
) -> dict[str, float]:
    """Replace each device's entry of a profile's ``dispatch.json`` with the
    executor's measured per-op overhead (:func:`measure_overhead`; the kernel call
    included unless the profile was taken in context).

    Returns
    -------
    dict
        Device -> seconds per op, as written.
    """
    # lazy: at the top it would load pandas with this module
    from hetsim.costmodel.profile_reader import read_manifest
    from hetsim.costmodel.profile_writer import ProfileWriter

    path = Path(profile)
    if not path.is_dir():
        raise CostModelError(f"--calibrate: profile folder {str(path)!r} does not exist "
                             "(take one with 'hetsim profile')")
    manifest = read_manifest(path / "manifest.json")
    name = backend or str(manifest.get("backend", "torch"))
    in_context = str(manifest.get("timing", "")).startswith("in-context")
    new = json.loads((path / "dispatch.json").read_text()) if (path / "dispatch.json").is_file() else {}
    for d in manifest["devices"]:
        if d.get("role") == "host":
            continue
        new[d["name"]] = measure_overhead(d["name"], name, ops=ops, repeats=repeats, kernel=not in_context)
    ProfileWriter(path, manifest, backend=name).open().write_dispatch(new)
    return new


class ContextProfiler:
    """Op times measured inside running models, one single-worker execution per graph.

    The profiling runs are left to the caller, so that they can be interleaved with
    other runs: :func:`runtime.validation.validate.validate_all` with ``in_context=`` runs each
    graph once per validation round, next to the plans it validates, so that the
    op times and the measured makespans see the machine at the same speed.

    Parameters
    ----------
    out
        Profile folder (``costmodel/PROFILE_FORMAT.md``; ``manifest["timing"]`` starts
        with ``in-context``); signatures already in it are kept.
    device, backend
        Where and with which kernels (``cpu@1``: one worker thread on one core).
    granularity
        The graphs' granularity, for the manifest.
    name
        Profile name in the manifest (default: the folder's name).

    Examples
    --------
    >>> prof = ContextProfiler("out/ctx")                         # doctest: +SKIP
    >>> ex = prof.add(graph, relax_model); ex.run(15)             # doctest: +SKIP
    >>> prof.write()                                              # doctest: +SKIP
    """

    def __init__(self, out: str | os.PathLike[str], *, device: str = "cpu@1", backend: str = "torch",
                 granularity: str = "op", name: str | None = None) -> None:
        # lazy: at the top it would load pandas with this module
        from hetsim.costmodel.profile_writer import ProfileWriter

        self.device, self.backend = device, backend
        self.spec = parse_device(device)
        self.path = Path(out)
        self._one, self._dmap = _one_device(device)
        manifest = build_manifest(name or self.path.name, backend, [self.spec], granularity=granularity,
                                  settings=MeasureSettings())
        manifest["timing"] = (
            "in-context: mean kernel-call time of each signature's nodes over runs of the whole graph by the "
            "executor on one worker; dispatch.json: the executor's work around each call"
            if self.spec.kind != "gpu" else
            "in-context: mean device time of each signature's nodes in traced runs of the whole graph by the "
            "executor (each op launched behind a GPU spin between two CUDA events); launch_s: its mean host cost "
            "in eager runs (a worker's pick of the op to its next pick); dispatch.json: their median")
        self.writer = ProfileWriter(self.path, manifest, backend=backend).open()
        self._live: list[tuple[Graph, Any, Any]] = []
        self._overhead: list[float] = []

    def add(self, graph: Graph, relax: RelaxModel, *, warmup: int = 3) -> Any:
        """Prepare a single-worker execution of ``graph`` (all nodes in plan order),
        run it ``warmup`` times untimed and return it; its timed runs
        (``execution.run(n)``) are what :meth:`write` reads."""
        plan = Plan(dict.fromkeys(graph.nx, "d"))
        gpu = self.spec.kind == "gpu"
        ex = Execution(graph, plan, self._one, wire(graph, relax), backend=self.backend, device_map=self._dmap,
                       model=relax, check=False, traced=not gpu, **({"launch": "eager"} if gpu else {}))
        if gpu:
            ex = GpuContextRuns(ex)
        self._live.append((graph, features(graph), ex))
        try:
            ex.run(warmup, timed=False)
        except BaseException:
            self.close()
            raise
        return ex

    def write(self) -> Path:
        """Append every signature the added executions ran and the folder lacks (the
        mean, p10 and p90 of its nodes' kernel-call times over all timed runs of all
        added graphs), record which model uses which, write ``dispatch.json`` (the
        median over all timed runs so far of the run's time outside the kernel
        calls, per op: the executor's work around each call in context), then close
        the executions."""
        spec = self.spec
        samples: dict[str, list[float]] = {}
        launches: dict[str, list[float]] = {}
        first: dict[str, tuple[Graph, Any, str]] = {}
        used: dict[str, set[str]] = {}
        for graph, feats, ex in self._live:
            model = str(graph.meta.get("model") or graph.name)
            for recs, makespan in zip(ex.runs, ex.makespans):
                ops = [r for r in recs if r["kind"] == "op"]
                for r in ops:
                    sig = str(feats.at[r["node"], "signature"])
                    samples.setdefault(sig, []).append(r["end"] - r["start"])
                    first.setdefault(sig, (graph, feats, r["node"]))
                    used.setdefault(model, set()).add(sig)
                if ops and spec.kind != "gpu":  # the run's time outside the kernel calls, per op
                    self._overhead.append(max(makespan - sum(r["end"] - r["start"] for r in ops), 0.0) / len(ops))
            for recs in getattr(ex, "host_runs", ()):  # a GPU's eager runs: the host's cost of each op
                for node, t in host_costs(recs).items():
                    launches.setdefault(str(feats.at[node, "signature"]), []).append(t)
                    self._overhead.append(t)
        self.close()
        if self._overhead:
            self.writer.write_dispatch({spec.name: float(np.median(self._overhead))})
        done = self.writer.done(spec.name)
        rows = []
        for sig, ts in samples.items():
            if sig in done:
                continue
            graph, feats, n = first[sig]
            model = str(graph.meta.get("model") or graph.name)
            mean = float(np.mean(ts))  # what adds up to the runs' kernel time, preempted calls included
            rows.append({
                "signature": sig, "device": spec.name, "device_kind": spec.kind, "backend": self.backend,
                "model": model, "node": n, "batch": int(graph.meta.get("batch") or 1), "models": model,
                "time_s": mean, "p10_s": float(np.percentile(ts, 10)), "p90_s": float(np.percentile(ts, 90)),
                "repeats": len(ts), **{c: feats.at[n, c] for c in ("op", *FEATURE_COLUMNS)},
                "wall_s": mean if spec.kind != "gpu" else None, "dispatch_s": 0.0, "timer": "in-context",
                **({"launch_s": float(np.mean(launches[sig]))} if sig in launches else {}),
                "threads": spec.cpu_threads() if spec.kind == "cpu" else 0,
                "granularity": str(graph.meta.get("granularity", "op")),
            })
        if rows:
            self.writer.append_ops(rows)
        for model, sigs in used.items():
            self.writer.add_models(model, sigs, device=spec.name)
        return self.path

    def write_dispatch(self) -> float:
        """Measure the executor's work around each call on a chain of one-element
        ops (:func:`measure_overhead`, ``kernel=False``) and write it as the
        profile's ``dispatch.json`` (:meth:`write` replaces it with the overhead of
        the graphs' own runs, which is larger: ops with more inputs and consumers
        cost the executor more)."""
        s = measure_overhead(self.device, self.backend, kernel=False)
        self.writer.write_dispatch({self.spec.name: s})
        return s

    def close(self) -> None:
        """Close the added executions (their timed runs are dropped)."""
        live, self._live = self._live, []
        for *_, ex in live:
            ex.close()


class GpuContextRuns:
    """A GPU's in-context profiling runs: each round an eager timed run (its dispatch
    records: the host's cost of each op, :func:`host_costs`) and a traced run (each op
    launched behind a GPU spin between two CUDA events: its device time alone)."""

    def __init__(self, execution: Any) -> None:
        self.execution = execution
        #: the traced runs' records and the eager runs' makespans (what ContextProfiler.write reads)
        self.runs: list[list[dict[str, Any]]] = []
        self.makespans: list[float] = []
        #: the eager timed runs' records
        self.host_runs: list[list[dict[str, Any]]] = []

    def run(self, n: int = 1, *, timed: bool = True) -> None:
        """``n`` rounds (timed: kept)."""
        ex = self.execution
        for _ in range(n):
            (span,) = ex.run(1, timed=timed)
            if timed:
                self.host_runs.append(ex.runs[-1])
                self.makespans.append(span)
                self.runs.append(ex.trace())

    def close(self) -> None:
        self.execution.close()


class DeviceProfilers:
    """One :class:`ContextProfiler` per device of a platform with GPUs: each graph run
    node by node on each device alone (the CPU worker with its threads, each GPU),
    once per round, each device's op times and per-op work around the calls
    written to its own profile folder (``out/<device>``).

    It has :class:`ContextProfiler`'s interface: :meth:`add` returns one object
    whose ``run(n)`` runs every device's execution, and :meth:`write` returns the
    cost spec that prices each device from its folder (``"cpu=out/cpu,gpu=out/gpu"``).

    Parameters
    ----------
    out
        Folder of the profile folders.
    devices
        Platform device name -> the real device it runs on (``{"cpu": "cpu@8",
        "gpu": "cuda:0"}``; :func:`runtime.executor.setup.map_devices`).
    backend, granularity
        As :class:`ContextProfiler`.
    """

    def __init__(self, out: str | os.PathLike[str], devices: Mapping[str, str], *, backend: str = "torch",
                 granularity: str = "op") -> None:
        bad = [name for name in devices if not name or any(c in name for c in ",=/")]
        if bad:
            raise ValueError(f"device names {bad} cannot name a profile folder in a cost spec")
        self.path = Path(out)
        self.profilers: dict[str, ContextProfiler] = {}
        try:
            for name, device in devices.items():
                self.profilers[name] = ContextProfiler(self.path / name, device=device, backend=backend,
                                                       granularity=granularity, name=name)
        except BaseException:
            self.close()
            raise

    def add(self, graph: Graph, relax: RelaxModel, *, warmup: int = 3) -> _Together:
        """Prepare ``graph``'s single-device execution on every device (``warmup``
        untimed runs each); ``run(n)`` of the result runs them all."""
        return _Together([p.add(graph, relax, warmup=warmup) for p in self.profilers.values()])

    def write(self) -> str:
        """:meth:`ContextProfiler.write` on every device; the cost spec of the folders."""
        return ",".join(f"{name}={p.write()}" for name, p in self.profilers.items())

    def close(self) -> None:
        """Close every device's executions."""
        for p in self.profilers.values():
            p.close()


class _Together:
    """Executions run together, one after the other (:meth:`DeviceProfilers.add`)."""

    def __init__(self, executions: Sequence[Any]) -> None:
        self.executions = list(executions)

    def run(self, n: int = 1, **kw: Any) -> None:
        for ex in self.executions:
            ex.run(n, **kw)

    def close(self) -> None:
        for ex in self.executions:
            ex.close()


def profile_in_context(
    graphs: Sequence[str | Graph],
    out: str | os.PathLike[str],
    *,
    device: str = "cpu@1",
    backend: str = "torch",
    warmup: int = 3,
    runs: int = 15,
    batch: int = 1,
    model_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    models: Mapping[str, RelaxModel] | None = None,
    platform: Platform | str | None = None,
    transforms: Sequence[str] = ("tensor-split",),
    name: str | None = None,
) -> Path:
    """Profile every operator signature of ``graphs`` as it runs inside its model.

    Each graph runs ``warmup`` + ``runs`` times, every node in plan order on one
    worker of ``device`` (:func:`runtime.execute`); an operator signature gets the
    mean, p10 and p90 of its nodes' kernel-call times over the timed runs. The
    folder follows ``costmodel/PROFILE_FORMAT.md`` (``manifest["timing"]`` starts
    with ``in-context``) and its ``dispatch.json`` holds the executor's per-op
    work around the calls in those runs (their makespan less their kernel-call
    time, per op). See :class:`ContextProfiler` for profiling runs interleaved with
    others.

    Parameters
    ----------
    graphs
        Zoo model names (imported at ``batch``, op granularity, ``model_kwargs``) or
        graphs (zoo graphs, or graphs with their model in ``models[graph.name]``).
    out
        Profile folder; signatures already in it are kept (use a new folder for a
        fresh profile).
    device, backend
        Where and with which kernels (``cpu@1``: one worker thread on one core).
    warmup, runs
        Untimed and timed runs of each graph.
    platform, transforms
        Also profile the graphs that these schedulers' ``transform`` makes of each
        graph on ``platform`` (planned with this profile's own times), so that the
        validation of e.g. ``tensor-split`` finds its split operators measured.
    name
        Profile name in the manifest (default: the folder's name).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    items: list[tuple[Graph, RelaxModel]] = []
    for m in graphs:
        if isinstance(m, str):
            rm = import_model(m, batch=batch, **dict((model_kwargs or {}).get(m, {})))
            items.append((rm.graph, rm))
        else:
            items.append((m, (models or {}).get(m.name) or load_model(m)))
    granularity = ",".join(sorted({str(g.meta.get("granularity", "op")) for g, _ in items})) or "op"
    prof = ContextProfiler(out, device=device, backend=backend, granularity=granularity, name=name)

    def profile(graph: Graph, relax: RelaxModel) -> None:
        prof.add(graph, relax, warmup=warmup).run(runs)
        prof.write()

    for graph, relax in items:
        profile(graph, relax)
    if platform is not None and transforms:
        plat = _Platform.load(platform)
        cost = costmodel.from_spec(str(prof.path), platform=plat)
        for graph, relax in items:
            for tname in transforms:
                s = schedulers.get(tname)
                if s.why_not(graph, plat) is not None:
                    continue
                g2 = s.run(graph, plat, cost, simulate=False).graph  # the graph its plans run on
                if g2 is not graph:
                    profile(g2, relax)
    return prof.path
