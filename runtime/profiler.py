"""The profiler: measure operators, links and dispatch on this machine into a profile.

``profile_models(["resnet18", "googlenet"], "cpu", "torch", "profiles/box")`` times
every distinct operator signature (:func:`graphs.signature`: identical layers are
measured once) of the models at the given batch sizes on each device with the
backend's kernels, and writes a profile folder in the format of
``costmodel/PROFILE_FORMAT.md`` through :class:`costmodel.profile_writer.ProfileWriter`
(atomic writes, resumable: signatures already in ``ops.csv`` for a device and
backend are skipped).

What is measured
----------------
* **ops** -- per signature and device: warm-up, then timed calls in rounds until the
  median moves less than ``rtol`` between rounds (after ``min_time_s``), or
  ``max_repeats`` / ``max_time_s`` is reached; ``time_s`` is the median, ``p10_s`` /
  ``p90_s`` the spread. CPU: wall time per call (the call is synchronous) minus the
  device's dispatch time, so that ``time_s`` is the kernel's own time and the host
  dispatch is priced once, from ``dispatch.json`` (``wall_s`` keeps the raw median).
  GPU (:func:`time_kernel`, :mod:`runtime.stream_timer`): ``time_s`` is the
  op's device time as it runs in a stream (calls captured as one CUDA graph and
  replayed, or queued back to back behind a busy wait, divided by the calls), and
  ``launch_s`` the host time of one eager launch, measured apart: the simulator
  prices the two separately (``op_time``, ``dispatch_time``). View ops
  (:data:`graphs.VIEW_OPS`) run no kernel and are not timed on a GPU.
  With ``passes=N`` (``--passes N``) every signature is measured N times, in N
  passes over all of them, and the medians of the passes make the row (``passes``,
  ``pass_spread`` = (max - min) / median of the pass medians): on a shared machine
  a kernel's speed wanders by 10-20 % over seconds, and passes minutes apart average
  that out. A run stopped part-way keeps each signature with the passes it had.
* **dispatch** -- host time of one kernel call through the backend's Kernel object
  for a one-element ``relu``: CPU, the whole call (Python + framework dispatch; the
  kernel itself is ~0); GPU, the host time to enqueue it.
* **links** (CUDA devices only) -- host-to-device and device-to-host copies from
  1 KiB to 1 GiB (powers of 4; pinned and pageable), fitted as
  ``latency_s + bytes / bandwidth_bytes_per_s`` (:func:`costmodel.profile_writer.fit_links`),
  and duplex: a concurrent h2d + d2h on two streams against the two alone.

Devices: ``cpu`` (every core of the affinity mask), ``cpu@N`` (N threads), ``cuda:K``.
"""

from __future__ import annotations

import gc
import importlib.metadata
import os
import platform
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hetsim.graphs.features import FEATURE_COLUMNS, features
from hetsim.graphs.graph import VIEW_OPS, Graph
from hetsim.runtime.backends import BACKENDS, BackendError, DeviceSpec, get_backend, parse_devices
from hetsim.runtime.backends.base import (
    Backend,
    Kernel,
    available_cores,
    check_available,
    cpu_model,
)
from hetsim.runtime.backends.tvm_backend import import_module
from hetsim.runtime.link_timing import measure_links
from hetsim.runtime.stream_timer import CudaStreamTimer, calls_per_replay

__all__ = ["MeasureSettings", "ProfileRun", "Timing", "measure_dispatch", "measure_links",
           "profile_graphs", "profile_models", "time_kernel"]

#: smallest kernel time written: a CPU op whose wall time does not exceed the dispatch
#: time is recorded as this (its kernel is too short to tell apart from the dispatch)
_FLOOR_S = 1e-8


@dataclass(frozen=True)
class MeasureSettings:
    """How long to time each operator (seconds unless named otherwise)."""

    warmup_s: float = 0.02
    min_time_s: float = 0.05
    max_time_s: float = 1.0
    min_repeats: int = 5
    max_repeats: int = 2000
    rtol: float = 0.02
    #: times every signature is measured, in separate passes over all of them
    passes: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.passes, int) or self.passes < 1:
            raise ValueError(f"passes must be an int >= 1, got {self.passes!r}")
        for k in ("warmup_s", "min_time_s", "max_time_s", "rtol"):
            if not getattr(self, k) >= 0:
                raise ValueError(f"{k} must be >= 0, got {getattr(self, k)!r}")
        if not 1 <= self.min_repeats <= self.max_repeats:
            raise ValueError(f"need 1 <= min_repeats <= max_repeats, got {self.min_repeats}, {self.max_repeats}")


@dataclass(frozen=True)
class Timing:
    """Timing of one kernel: median and spread of the per-call times, in seconds."""

    time_s: float
    p10_s: float
    p90_s: float
    repeats: int
    wall_s: float
    #: GPU: host seconds of one eager launch (None: not measured, a CPU op)
    launch_s: float | None = None
    #: how the time was measured: ``wall`` (CPU), ``cuda_graph`` or ``cuda_stream`` (GPU)
    method: str = "wall"


@dataclass
class ProfileRun:
    """What a profiling run did."""

    path: Path
    measured: int = 0
    skipped: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    dispatch: dict[str, float] = field(default_factory=dict)


# -------------------------------------------------------------------------- timing
def _cuda_timer(device: DeviceSpec) -> Any:
    return CudaStreamTimer(device.index)


def _cpu_samples(fn: Callable[[], Any], n: int) -> list[float]:
    pc = time.perf_counter
    out = []
    for _ in range(n):
        t0 = pc()
        fn()
        out.append(pc() - t0)
    return out


def _converge(draw: Callable[[int], list[float]], est: float, st: MeasureSettings, cap: int) -> list[float]:
    """Samples from ``draw(k)`` (``k`` new samples) in rounds until their median moves
    less than ``st.rtol`` (after ``st.min_time_s`` and ``st.min_repeats``), or
    ``st.max_repeats`` / ``st.max_time_s`` is reached; ``est``: seconds per sample."""
    samples: list[float] = []
    start, prev = time.perf_counter(), None
    while True:
        left = st.max_repeats - len(samples)
        k = int(st.min_time_s / 4 / max(est, 1e-7))
        k = max(1, min(left, max(k, st.min_repeats), cap))
        samples += draw(k)
        med = float(np.median(samples))
        elapsed = time.perf_counter() - start
        if len(samples) >= st.max_repeats or elapsed >= st.max_time_s:
            return samples
        if (prev is not None and len(samples) >= st.min_repeats and elapsed >= st.min_time_s
                and abs(med - prev) <= st.rtol * prev):
            return samples
        prev = med


def _warm_up(kernel: Callable[[], Any], sync: Callable[[], None], st: MeasureSettings) -> float:
    """Call ``kernel`` (at least twice, for ``st.warmup_s``); seconds per synchronised call."""
    t0, n = time.perf_counter(), 0
    while n < 2 or (time.perf_counter() - t0 < st.warmup_s and n < st.max_repeats):
        kernel()
        sync()
        n += 1
    return (time.perf_counter() - t0) / n


def time_kernel(
    kernel: Kernel | Callable[[], Any],
    device: DeviceSpec,
    settings: MeasureSettings | None = None,
    *,
    sync: Callable[[], None] | None = None,
    timer: Any = None,
) -> Timing:
    """Time ``kernel()`` on ``device`` (see the module docstring for the method).

    CPU: wall time per call. GPU: the device time per call as the op runs in a
    stream, and its eager launch time (:func:`_stream_timing`; ``sync`` waits for
    the device, ``timer`` reuses a :class:`~runtime.stream_timer.CudaStreamTimer`).
    """
    st = settings or MeasureSettings()
    if device.kind == "gpu":
        return _stream_timing(kernel, st, sync or (lambda: None), timer or _cuda_timer(device))
    gc_was = gc.isenabled()
    gc.disable()
    try:
        est = _warm_up(kernel, lambda: None, st)
        samples = _converge(lambda k: _cpu_samples(kernel, k), est, st, 10_000)
    finally:
        if gc_was:
            gc.enable()
    p10, p90 = np.percentile(samples, [10, 90])
    med = float(np.median(samples))
    return Timing(med, float(p10), float(p90), len(samples), med)


def _stream_timing(kernel: Callable[[], Any], st: MeasureSettings, sync: Callable[[], None], timer: Any) -> Timing:
    """Device time per call of ``kernel`` as it runs in a stream, and its eager launch
    time (:mod:`runtime.stream_timer`).

    A probe replay of one call sizes the replays (:func:`~runtime.stream_timer.calls_per_replay`:
    about 1 ms each); replays are drawn until their median settles (``st``).
    ``time_s`` is the median per-call device time, ``repeats`` the calls timed,
    ``launch_s`` (and ``wall_s``) the host seconds per eager call, ``method``
    ``cuda_graph`` or ``cuda_stream``.
    """
    host = _warm_up(kernel, sync, st)
    probe, _ = timer.device_times(kernel, 1, 3, host_per_call=host)
    calls = calls_per_replay(float(np.median(probe)))
    method: list[str] = []

    def draw(k: int) -> list[float]:
        times, how = timer.device_times(kernel, calls, k, host_per_call=host)
        method.append(how)
        return times

    samples = _converge(draw, float(np.median(probe)) * calls, st, 200)
    launch = float(timer.launch_time(kernel, calls=max(5, min(calls, 50))))
    p10, p90 = np.percentile(samples, [10, 90])
    return Timing(float(np.median(samples)), float(p10), float(p90), len(samples) * calls, launch,
                  launch_s=launch, method=method[-1])


# ------------------------------------------------------------------------ dispatch
def _tiny_kernel(backend: Backend, device: DeviceSpec) -> Kernel:
    """A one-element ``relu`` kernel of ``backend`` on ``device``."""
    if backend.name == "tvm":
        import torch

        model = import_module(torch.nn.ReLU(), (torch.rand(1),), name="dispatch")
        backend.register(model.graph, model)  # type: ignore[attr-defined]
        graph = model.graph
    else:
        graph = Graph(name="dispatch")
        graph.add_op("0000_relu", "relu", inputs=[([1], "float32")], outputs=[([1], "float32")])
    return backend.prepare(graph, next(iter(graph)), device)


def measure_dispatch(backend: Backend, device: DeviceSpec, *, calls: int = 200, rounds: int = 15) -> float:
    """Host seconds per kernel call through ``backend`` on ``device`` (median of rounds).

    CPU: the whole call of a one-element ``relu``; GPU: the time to enqueue it.
    """
    kernel = _tiny_kernel(backend, device)
    per_round = []
    for _ in range(rounds):
        backend.synchronize(device)
        t0 = time.perf_counter()
        for _ in range(calls):
            kernel()
        per_round.append((time.perf_counter() - t0) / calls)
    backend.synchronize(device)
    return float(np.median(per_round[2:] if rounds > 4 else per_round))


# ------------------------------------------------------------------------ manifest
def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _driver() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def device_entries(devices: Sequence[DeviceSpec]) -> list[dict[str, Any]]:
    """Manifest ``devices``: each device, plus the host CPU (``cpu``) when only GPUs
    are profiled (link rows name it)."""
    out = []
    for d in devices:
        entry: dict[str, Any] = {"name": d.name, "kind": d.kind, "torch_device": d.torch_device}
        if d.kind == "cpu":
            entry.update(threads=d.cpu_threads(), model=cpu_model())
        else:
            import torch

            entry.update(threads=None, model=torch.cuda.get_device_name(d.index))
        out.append(entry)
    if not any(d.kind == "cpu" for d in devices):
        out.append({"name": "cpu", "kind": "cpu", "torch_device": "cpu", "threads": available_cores(),
                    "model": cpu_model(), "role": "host"})
    return out


def build_manifest(
    name: str, backend: str, devices: Sequence[DeviceSpec], *, granularity: str,
    settings: MeasureSettings,
) -> dict[str, Any]:
    """The ``manifest.json`` of a new profile (``models``/``batches`` grow as rows arrive)."""
    import torch

    # lazy: at the top it would load pandas with this module
    from hetsim.costmodel.profile_reader import PROFILE_VERSION

    entries = device_entries(devices)
    gpus = sorted({e["model"] for e in entries if e["kind"] == "gpu"})
    return {
        "hetsim_profile": PROFILE_VERSION,
        "name": name,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"hostname": socket.gethostname(), "cpu_model": cpu_model(),
                    "cpu_cores": os.cpu_count(), "gpu_model": "; ".join(gpus) or None,
                    "driver": _driver() if gpus else None,
                    "cuda": torch.version.cuda},
        "libraries": {"torch": torch.__version__, "tvm": _version("apache-tvm"),
                      "hetsim": _version("hetsim"), "numpy": np.__version__,
                      "python": platform.python_version()},
        "backend": backend,
        "devices": entries,
        "models": [],
        "batches": [],
        "granularity": granularity,
        "settings": asdict(settings),
        "timing": "cpu: median wall time per call minus dispatch.json (wall_s: raw); "
                  "gpu: median device time per call in a stream (calls replayed as one CUDA graph, "
                  "or queued back to back), launch_s: host time per eager call; views not timed",
    }


# ------------------------------------------------------------------------- profile
def _is_view(op: str) -> bool:
    """True for an op kind that runs no kernel (:data:`graphs.VIEW_OPS`), or a fused
    kernel made of such ops only (``fused:reshape+squeeze``)."""
    members = op[len("fused:"):].split("+") if op.startswith("fused:") else [op]
    return all(m in VIEW_OPS for m in members if m) and any(members)


def _check_request(
    devices: str | Sequence[str | DeviceSpec], backend: str, granularities: set[str], threads: int | None
) -> list[DeviceSpec]:
    """Parsed devices; :class:`BackendError` for an unknown backend, a missing device
    or the torch backend on fused graphs."""
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}; choose from {list(BACKENDS)}")
    devs = parse_devices(devices, threads=threads)
    for d in devs:
        check_available(d)
    if backend == "torch" and "fused" in granularities:
        raise BackendError("the torch backend runs op-granularity graphs; use granularity 'op' or the tvm backend")
    return devs


def profile_graphs(
    graphs: Sequence[Graph],
    devices: str | Sequence[str | DeviceSpec] = "cpu",
    backend: str = "torch",
    out: str | os.PathLike[str] = "profiles/this-machine",
    *,
    threads: int | None = None,
    settings: MeasureSettings | None = None,
    links: bool = True,
    dispatch: bool = True,
    progress: bool = True,
    flush_every: int = 10,
    on_error: str = "raise",
    name: str | None = None,
    seed: int = 0,
    backend_obj: Backend | None = None,
) -> ProfileRun:
    """Profile the distinct operator signatures of ``graphs`` into the folder ``out``.

    Parameters
    ----------
    graphs
        Imported graphs (one per model and batch); ``meta["model"]`` (else the
        graph's name) and ``meta["batch"]`` label the rows.
    devices
        ``"cpu,cuda:0"`` or a list of specs (see the module docstring).
    backend
        ``"torch"`` or ``"tvm"``.
    out
        Profile folder; created, or resumed (same devices required).
    threads
        Threads of a plain ``cpu`` device (default: every core).
    settings
        Timing settings (:class:`MeasureSettings`).
    links, dispatch
        Also measure links (CUDA devices only) and dispatch overhead.
    progress
        Show a tqdm progress bar (ops done / total, time left).
    flush_every
        Write ``ops.csv`` after this many new measurements (and at the end, or when
        interrupted: measured rows are never lost, the files never half-written).
    on_error
        ``"raise"`` stops at the first node the backend cannot run; ``"skip"`` lists
        it in :attr:`ProfileRun.failed` and goes on.
    name
        Profile name in the manifest (default: the folder's name).
    seed
        Seed of the random inputs.
    backend_obj
        A backend instance to use instead of a new one (e.g. a TVM backend with
        registered models).

    Raises
    ------
    BackendError
        Before anything is measured, for an unknown backend or device, or a device
        this machine lacks (e.g. ``cuda:0`` without a GPU).
    """
    # lazy: at the top it would load pandas with this module
    from hetsim.costmodel.profile_reader import split_models
    from hetsim.costmodel.profile_writer import ProfileWriter, fit_links

    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    devs = _check_request(devices, backend, {str(g.meta.get("granularity", "op")) for g in graphs}, threads)
    st = settings or MeasureSettings()
    bk = backend_obj or get_backend(backend)
    t_start = time.perf_counter()
    path = Path(out)
    granularity = ",".join(sorted({str(g.meta.get("granularity", "op")) for g in graphs})) or "op"
    manifest = build_manifest(name or path.name, backend, devs, granularity=granularity, settings=st)
    writer = ProfileWriter(path, manifest, backend=backend).open()
    run = ProfileRun(path)

    # every distinct signature, where it is first seen, and every model holding it
    first: dict[str, tuple[Graph, str, dict[str, Any]]] = {}
    holders: dict[str, list[str]] = {}
    per_model: dict[str, set[str]] = {}
    for g in graphs:
        model = str(g.meta.get("model") or g.name)
        feats = features(g)
        for n in g:
            sig = str(feats.at[n, "signature"])
            per_model.setdefault(model, set()).add(sig)
            holders.setdefault(sig, [])
            if model not in holders[sig]:
                holders[sig].append(model)
            if sig not in first:
                row = {c: feats.at[n, c] for c in ("op", *FEATURE_COLUMNS)}
                first[sig] = (g, n, row)
    todo: dict[str, list[str]] = {}
    old = writer.read().ops if (path / "ops.csv").is_file() else None
    for d in devs:
        done = writer.done(d.name)
        todo[d.name] = [s for s in first if s not in done and not (d.kind == "gpu" and _is_view(first[s][2]["op"]))]
        run.skipped += len(first) - len(todo[d.name])
        for model, sigs in per_model.items():  # tag rows measured before for another model
            if old is not None and sigs & done:
                rows = old[(old["device"] == d.name) & (old["backend"] == backend) & old["signature"].isin(sigs)]
                if any(model not in split_models(c) for c in rows["models"]):
                    writer.add_models(model, sigs & done, device=d.name)

    from tqdm.auto import tqdm

    bar = tqdm(total=st.passes * sum(len(v) for v in todo.values()), unit="op", desc=f"profile {path.name}",
               disable=not progress, dynamic_ncols=True)
    buffer: list[dict[str, Any]] = []
    # (device, signature) -> the timings of the passes so far
    partial: dict[tuple[str, str], list[Timing]] = {}

    def flush() -> None:
        if buffer:
            writer.append_ops(buffer)
            buffer.clear()

    def row(d: DeviceSpec, sig: str, tms: list[Timing], disp: float) -> dict[str, Any]:
        g, n, feat = first[sig]
        shift = disp if d.kind == "cpu" else 0.0
        med = [t.time_s for t in tms]
        tm = Timing(float(np.median(med)), float(np.median([t.p10_s for t in tms])),
                    float(np.median([t.p90_s for t in tms])), sum(t.repeats for t in tms),
                    float(np.median([t.wall_s for t in tms])))
        gpu = d.kind == "gpu"
        launch = float(np.median([t.launch_s for t in tms if t.launch_s is not None])) if gpu else float("nan")
        return {
            "signature": sig, "device": d.name, "device_kind": d.kind, "backend": backend,
            "model": str(g.meta.get("model") or g.name), "node": n,
            "batch": int(g.meta.get("batch") or 1), "models": ";".join(holders[sig]),
            "time_s": max(tm.time_s - shift, _FLOOR_S), "p10_s": max(tm.p10_s - shift, _FLOOR_S),
            "p90_s": max(tm.p90_s - shift, _FLOOR_S), "repeats": tm.repeats, **feat,
            "wall_s": float("nan") if gpu else tm.wall_s, "dispatch_s": disp, "launch_s": launch,
            "timer": tms[-1].method,
            "threads": d.cpu_threads() if d.kind == "cpu" else 0,
            "granularity": str(g.meta.get("granularity", "op")),
            "passes": len(tms), "pass_spread": (max(med) - min(med)) / max(tm.time_s, 1e-12),
        }

    import torch

    torch_threads = torch.get_num_threads()  # configure() changes it per device
    try:
        for d in devs:
            bk.configure(d)
            disp = measure_dispatch(bk, d) if dispatch or d.kind == "cpu" else 0.0
            run.dispatch[d.name] = disp
            timer = _cuda_timer(d) if d.kind == "gpu" else None
            sync = (lambda d=d: bk.synchronize(d)) if d.kind == "gpu" else None
            failed: set[str] = set()
            for p in range(st.passes):
                last = p == st.passes - 1
                for sig in todo[d.name]:
                    if sig in failed:
                        continue
                    g, n, feat = first[sig]
                    bar.set_postfix_str(f"{d.name} {feat['op']}" + (f" pass {p + 1}" if st.passes > 1 else ""),
                                        refresh=False)
                    try:
                        kernel = bk.prepare(g, n, d, seed=seed)
                    except BackendError as e:
                        if on_error == "raise":
                            raise
                        run.failed.append(f"{d.name} {g.name}/{n}: {e}")
                        failed.add(sig)
                        bar.update(st.passes - p)
                        continue
                    tm = time_kernel(kernel, d, st, sync=sync, timer=timer)
                    del kernel
                    tms = partial.setdefault((d.name, sig), [])
                    tms.append(tm)
                    if last:
                        buffer.append(row(d, sig, partial.pop((d.name, sig)), disp))
                        run.measured += 1
                    bar.update(1)
                    if len(buffer) >= flush_every:
                        flush()
        flush()
    except BaseException:
        try:  # complete measurements are kept (with the passes they had); the files stay whole
            devices = {x.name: x for x in devs}
            buffer.extend(row(devices[dn], sig, tms, run.dispatch.get(dn, 0.0))
                          for (dn, sig), tms in partial.items())
            flush()
        except Exception:  # noqa: S110 - the original error matters more
            pass
        raise
    finally:
        bar.close()
        torch.set_num_threads(torch_threads)
    if dispatch:
        old = writer.read().dispatch
        writer.write_dispatch({**old, **run.dispatch})
    gpus = [d for d in devs if d.kind == "gpu"]
    if links and gpus:
        _profile_links(writer, gpus, devs, fit_links)
    run.seconds = time.perf_counter() - t_start
    return run


def _profile_links(writer: Any, gpus: list[DeviceSpec], devs: list[DeviceSpec], fit_links: Any) -> None:
    import pandas as pd

    prof = writer.read()
    host = next((d.name for d in devs if d.kind == "cpu"), "cpu")
    old = prof.links
    frames = [old] if len(old) else []
    duplex = prof.duplex if prof.duplex is not None else True
    for g in gpus:
        if len(old) and ((old["src"] == host) & (old["dst"] == g.name)).any():
            continue  # measured by an earlier run: resume
        rows, dup = measure_links(host, g)
        frames.append(pd.DataFrame(rows))
        duplex = duplex and dup
    links = pd.concat(frames, ignore_index=True)
    writer.write_links(links)
    writer.write_link_fits(fit_links(links), duplex=bool(duplex))


def profile_models(
    models: Sequence[str | Graph],
    devices: str | Sequence[str | DeviceSpec] = "cpu",
    backend: str = "torch",
    out: str | os.PathLike[str] = "profiles/this-machine",
    *,
    batches: Sequence[int] = (1,),
    granularity: str = "op",
    model_kwargs: Mapping[str, Mapping[str, Any]] | None = None,
    **kw: Any,
) -> ProfileRun:
    """Import zoo models at each batch size and profile them (:func:`profile_graphs`).

    Parameters
    ----------
    models
        Zoo model names (or already imported graphs, profiled as they are).
    batches
        Batch sizes to import each zoo model at.
    granularity
        ``"op"`` or ``"fused"`` (fused needs the tvm backend).
    model_kwargs
        Model name -> zoo options (``{"bert_base": {"seq_len": 32}}``).
    **kw
        Passed on to :func:`profile_graphs` (``threads``, ``settings``, ``links``...).

    Examples
    --------
    >>> run = profile_models(["resnet18"], "cpu", "torch", "profiles/box",
    ...                      batches=[1, 4])  # doctest: +SKIP
    >>> run.measured, run.skipped  # doctest: +SKIP
    """
    # lazy: at the top it would load torch with this module
    from hetsim.graphs import zoo

    devs = _check_request(devices, backend, {granularity}, kw.get("threads"))  # before any import
    bad = [b for b in batches if isinstance(b, bool) or not isinstance(b, int) or b < 1]
    if bad or not batches:
        raise ValueError(f"batches must be ints >= 1, got {list(batches)}")
    names = [m for m in models if isinstance(m, str)]
    unknown = sorted(set(names) - set(zoo.names()))
    if unknown:
        raise BackendError(f"unknown zoo model(s) {unknown}; known: {zoo.names()}")
    graphs: list[Graph] = []
    for m in models:
        if isinstance(m, Graph):
            graphs.append(m)
            continue
        opts = dict((model_kwargs or {}).get(m, {}))
        graphs.extend(zoo.load(m, batch=b, granularity=granularity, **opts) for b in batches)
    return profile_graphs(graphs, devs, backend, out, **kw)
