"""Hardware description: devices and the links between them (plain data, no SimPy).

A platform is loaded from TOML (:meth:`Platform.from_toml`) or a built-in preset
(:meth:`Platform.preset`). SI units everywhere, units in key names::

    name = "my-box"
    host = "cpu"                       # device that dispatches kernels and holds inputs
    decision_s = 2e-5                  # host time of one run-time placement decision (dynamic plans)

    [[devices]]
    name = "cpu"
    kind = "cpu"
    peak_flops = 1.5e12
    mem_bandwidth_bytes_per_s = 1.2e11
    memory_bytes = 68719476736
    launch_overhead_s = 2e-6           # device-side fixed cost per kernel
    dispatch_s = 5e-6                  # host time to issue one op to this device

    [[links]]
    src = "cpu"
    dst = "gpu"
    bandwidth_bytes_per_s = 1.2e10
    latency_s = 1e-5
    duplex = true                      # one resource per direction

Devices with the same ``memory_domain`` share memory: tensors move between them for
free and need no link; an op waiting for another such device's output starts
``handoff_s`` (of the consumer's device) after it is ready, the time to wake a
worker on another core, and takes ``bytes / handoff_bandwidth_bytes_per_s`` longer
to read that output from the other core's caches.

A GPU device may say how its kernels are issued (``launch = "graph"`` or ``"eager"``, with
``graph_launch_s``, ``launch_queue_depth``, ``event_s``, ``copy_issue_s``), and the
platform whether its workers share one interpreter lock (``interpreter_lock = true``);
a ``[calibration]`` table (``machine``, ``date``, ``format``, ``hetsim_version``) says where
a calibrated platform's figures were measured. A platform without these keys simulates
the host as a dispatch slot held before each op, in series with its stream.

Optional ``[[memory_domains]]`` tables declare memories whose bandwidth devices and
link directions share, and what each draws on it; the simulator then slows work
while a memory is oversubscribed (:mod:`sim.contention`). A platform without them
models no contention.

The description is plain data (no SimPy): the cost models read it (a device's peaks, a
link's bandwidth) as the simulator, the schedulers and the runtime do, so it sits in the
cost-model layer, below all of them; ``hetsim.sim`` exports the same names.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
import tomllib
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from hetsim.costmodel.memory_domain import (
    MemoryDomain,
    MemoryDomainError,
    domains_from_dicts,
    member_resources,
)

__all__ = ["LAUNCH_MODES", "MATMUL_PRECISIONS", "TENSOR_MODES", "Device", "Link", "MemoryDomain", "Platform", "PlatformError", "read_toml"]

#: the most streams (workers) of one device, and dispatch threads of a platform: the
#: simulator and the executor keep state per stream
MAX_STREAMS = 1024

#: how a GPU's kernels are issued (``Device.launch``)
LAUNCH_MODES = ("eager", "graph")
#: math modes of a GPU's tensor-core peaks (``Device.tensor_flops`` keys)
TENSOR_MODES = ("tf32", "fp16", "bf16", "fp8", "int8")
#: ``torch.set_float32_matmul_precision`` settings (``Device.matmul_precision``)
MATMUL_PRECISIONS = ("highest", "high", "medium")


class PlatformError(ValueError):
    """A platform description is invalid; the message names the key or device."""


@dataclass(frozen=True)
class Device:
    """One compute device (or one worker of a device).

    Parameters
    ----------
    name
        Unique device name (``"cpu"``, ``"gpu0"``, ...).
    kind
        ``"cpu"`` or ``"gpu"``.
    peak_flops
        Peak floating-point throughput (FLOP/s) for the dtype the model uses.
    mem_bandwidth_bytes_per_s
        Sustainable memory bandwidth.
    memory_bytes
        Memory capacity available to the model.
    launch_overhead_s
        Fixed device-side cost added to every kernel.
    dispatch_s
        Host CPU time to issue one op to this device (held on the platform's
        dispatcher resource; see ``Platform.dispatch_threads``).
    streams
        Concurrent kernels the device runs (CUDA streams, CPU worker threads).
    threads
        Intra-op threads of a CPU worker (None: library default).
    memory_domain
        Devices with the same domain share memory (free transfers). Defaults to
        the device name.
    handoff_s
        Delay between an input that another device of the same memory domain
        produced and this device starting the op that reads it: the wake-up of a
        worker thread waiting on another core (tens of microseconds on a cloud
        VM). Inputs that arrive by a transfer are priced by the link instead.
    handoff_bandwidth_bytes_per_s
        Rate at which an op on this device reads an input that another device of
        its memory domain produced: such an op runs ``bytes / rate`` longer than
        its measured time (which had its inputs in its own core's caches). None:
        no such cost. Ops of zero time (views) read nothing and pay nothing.
    sm_count, clock_hz, l2_bytes, tdp_w
        Published figures of a GPU (streaming multiprocessors, boost clock, L2
        cache, board power): with ``peak_flops`` (FP32) and
        ``mem_bandwidth_bytes_per_s``, what the cross-GPU cost model
        (:mod:`costmodel.gpu.model`) prices a GPU nobody measured from. Optional;
        None: not stated.
    cost
        The cost source that prices this device when a cost spec does not name it
        (``costmodel.from_spec``): a built-in GPU profile (``"gpu-a100-80gb"``),
        ``"cross-gpu"``, a profile folder, ``"roofline"``... None: the roofline.
    launch
        How the host issues this GPU's kernels (GPU devices only): ``"eager"``, one
        launch per op on its worker's host thread; ``"graph"``, the ops of a segment
        between cross-device edges captured once as a CUDA graph and replayed with one
        launch. Either way the host runs ahead of the GPU up to
        ``launch_queue_depth`` launches. None: the host issues an op and then the
        stream runs it, in series (no launch queue).
    graph_launch_s
        Host time of one CUDA-graph launch (a segment's replay), ``launch="graph"``.
    launch_queue_depth
        Launches the host may run ahead of the GPU before it blocks (CUDA's queue).
    event_s
        Host time to record an event on a producer's stream at a cross-device edge,
        and to make the consumer wait on it, each.
    copy_issue_s
        Host time, on the producer's thread, to issue one asynchronous copy.
    tensor_flops
        GPU tensor-core peaks by math mode (FLOP/s; keys of :data:`TENSOR_MODES`:
        ``tf32``, ``fp16``, ``bf16``, ``fp8``, ``int8``), TOML
        ``tensor_flops = {tf32 = 1.56e14, fp16 = 3.12e14}``. With it, ``peak_flops`` is
        the FP32 (CUDA-core) peak and the roofline prices each convolution and matmul
        at the peak of the math mode PyTorch runs it in (``costmodel.math_mode``); a
        stated table without ``tf32`` is a GPU without TF32 (FP32 ops stay FP32).
        None: ``peak_flops`` prices every op.
    matmul_precision
        ``torch.set_float32_matmul_precision`` of the run (GPU): ``"highest"`` (FP32
        matmuls), ``"high"`` (TF32) or ``"medium"`` (BF16). None: PyTorch's default,
        ``"highest"``.
    """

    name: str
    kind: Literal["cpu", "gpu"]
    peak_flops: float
    mem_bandwidth_bytes_per_s: float
    memory_bytes: int
    launch_overhead_s: float = 0.0
    dispatch_s: float = 0.0
    streams: int = 1
    threads: int | None = None
    memory_domain: str | None = None
    description: str = ""
    handoff_s: float = 0.0
    handoff_bandwidth_bytes_per_s: float | None = None
    sm_count: int | None = None
    clock_hz: float | None = None
    l2_bytes: int | None = None
    tdp_w: float | None = None
    cost: str | None = None
    launch: str | None = None
    graph_launch_s: float = 0.0
    launch_queue_depth: int = 1024
    event_s: float = 0.0
    copy_issue_s: float = 0.0
    tensor_flops: Mapping[str, float] | None = field(default=None, hash=False)
    matmul_precision: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PlatformError(f"device 'name' must be a non-empty string, got {self.name!r:.60}")
        where = f"device {self.name!r}"
        if not isinstance(self.kind, str) or self.kind not in ("cpu", "gpu"):
            raise PlatformError(f"{where}: 'kind' must be 'cpu' or 'gpu', got {self.kind!r:.60}")
        for key in ("peak_flops", "mem_bandwidth_bytes_per_s"):
            _positive(where, key, getattr(self, key))
            if not RATE_RANGE[0] <= getattr(self, key) <= RATE_RANGE[1]:
                raise PlatformError(f"{where}: {key!r} {getattr(self, key)!r:.30} is outside [{RATE_RANGE[0]:g}, "
                                    f"{RATE_RANGE[1]:g}] (per second): no device runs so slow or so fast")
        object.__setattr__(self, "memory_bytes", _whole_bytes(where, "memory_bytes", self.memory_bytes))
        for key in ("description", "memory_domain", "launch"):
            _string(where, key, getattr(self, key), optional=key != "description")
        for key in ("launch_overhead_s", "dispatch_s", "handoff_s", "graph_launch_s", "event_s",
                    "copy_issue_s"):
            _non_negative(where, key, getattr(self, key))
        if self.launch is not None:
            if self.launch not in LAUNCH_MODES:
                raise PlatformError(f"{where}: unknown 'launch' {self.launch!r}; modes: {list(LAUNCH_MODES)}")
            if self.kind != "gpu":
                raise PlatformError(f"{where}: 'launch' applies to GPU devices only, not {self.kind!r}")
        if (isinstance(self.launch_queue_depth, bool) or not isinstance(self.launch_queue_depth, numbers.Integral)
                or self.launch_queue_depth < 1):
            raise PlatformError(f"{where}: 'launch_queue_depth' must be an int >= 1, got {self.launch_queue_depth!r}")
        if self.handoff_bandwidth_bytes_per_s is not None:
            _positive(where, "handoff_bandwidth_bytes_per_s", self.handoff_bandwidth_bytes_per_s)
        for key in ("sm_count", "l2_bytes"):
            v = getattr(self, key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1):
                raise PlatformError(f"{where}: {key!r} must be an int >= 1, got {v!r}")
        for key in ("clock_hz", "tdp_w"):
            if getattr(self, key) is not None:
                _positive(where, key, getattr(self, key))
        if self.cost is not None and (not isinstance(self.cost, str) or not self.cost):
            raise PlatformError(f"{where}: 'cost' must be a non-empty cost spec string, got {self.cost!r}")
        if (isinstance(self.streams, bool) or not isinstance(self.streams, numbers.Integral) or self.streams < 1
                or self.streams > MAX_STREAMS):
            raise PlatformError(f"{where}: 'streams' must be an int from 1 to {MAX_STREAMS}, got {self.streams!r:.60}")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, numbers.Integral)
                                         or self.threads < 1):
            raise PlatformError(f"{where}: 'threads' must be an int >= 1, got {self.threads!r}")
        if self.memory_domain is None:
            object.__setattr__(self, "memory_domain", self.name)
        if self.matmul_precision is not None and self.matmul_precision not in MATMUL_PRECISIONS:
            raise PlatformError(f"{where}: unknown 'matmul_precision' {self.matmul_precision!r}; "
                                f"choose from {list(MATMUL_PRECISIONS)}")
        if self.tensor_flops is not None:
            if not isinstance(self.tensor_flops, Mapping):
                raise PlatformError(f"{where}: 'tensor_flops' must be a table of FLOP/s by math mode, "
                                    f"got {self.tensor_flops!r}")
            if self.kind != "gpu":
                raise PlatformError(f"{where}: 'tensor_flops' applies to GPU devices only")
            for mode, v in self.tensor_flops.items():
                if mode not in TENSOR_MODES:
                    raise PlatformError(f"{where}: unknown tensor_flops mode {mode!r}; modes: {list(TENSOR_MODES)}")
                _positive(where, f"tensor_flops.{mode}", v)
            object.__setattr__(self, "tensor_flops", {str(k): float(v) for k, v in self.tensor_flops.items()})


@dataclass(frozen=True)
class Link:
    """A point-to-point interconnect (PCIe, NVLink) between two devices.

    With ``duplex=True`` each direction is its own resource (full duplex); with
    ``duplex=False`` both directions share one.
    """

    src: str
    dst: str
    bandwidth_bytes_per_s: float
    latency_s: float = 0.0
    duplex: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        where = f"link {self.src!r:.60} -> {self.dst!r:.60}"
        for key in ("src", "dst"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise PlatformError(f"{where}: {key!r} must be a device name (a non-empty string)")
        _positive(where, "bandwidth_bytes_per_s", self.bandwidth_bytes_per_s)
        _non_negative(where, "latency_s", self.latency_s)
        if not isinstance(self.duplex, bool):
            raise PlatformError(f"{where}: 'duplex' must be true or false, got {self.duplex!r:.60}")
        _string(where, "description", self.description)
        if self.src == self.dst:
            raise PlatformError(f"{where}: a link needs two different devices")

    @property
    def name(self) -> str:
        return f"{self.src}<->{self.dst}" if self.duplex else f"{self.src}--{self.dst}"


@dataclass(frozen=True)
class Platform:
    """Devices, links and the host that dispatches kernels.

    Examples
    --------
    >>> p = Platform.preset("xeon-p2200")
    >>> [d.kind for d in p.devices]
    ['cpu', 'gpu']
    >>> p.route("cpu", "gpu")[0].bandwidth_bytes_per_s > 1e9
    True
    """

    name: str
    devices: tuple[Device, ...]
    links: tuple[Link, ...] = ()
    host: str | None = None
    dispatch_threads: int = 1
    description: str = ""
    #: host time one run-time placement decision takes (the ``policy.select`` of a
    #: dynamic plan, run in the runtime's interpreter): the node becomes ready for
    #: its device this long after the policy is asked.
    decision_s: float = 0.0
    #: memories whose bandwidth several devices or link directions share
    #: (:mod:`sim.contention`); empty: no contention is modelled.
    memory_domains: tuple[MemoryDomain, ...] = ()
    #: the workers are threads of one Python process: the host part of every op (a CPU
    #: op's call, a launch) holds the interpreter lock, one lock for all workers.
    interpreter_lock: bool = False
    #: where the figures came from when a calibration wrote this platform
    #: (``machine``, ``date``, ``format``, ``hetsim_version``: strings); empty otherwise.
    calibration: Mapping[str, Any] = field(default_factory=dict, compare=False)
    _by_name: dict[str, Device] = field(default=None, init=False, repr=False, compare=False)  # type: ignore[assignment]
    _routes: dict[tuple[str, str], tuple[Link, ...]] = field(
        default=None, init=False, repr=False, compare=False
    )  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise PlatformError(f"platform 'name' must be a non-empty string, got {self.name!r:.60}")
        _string(f"platform {self.name!r}", "host", self.host, optional=True)
        _string(f"platform {self.name!r}", "description", self.description)
        if isinstance(self.devices, str | bytes) or not isinstance(self.devices, tuple | list):
            raise PlatformError(f"platform {self.name!r}: 'devices' must be a list of Device, got {self.devices!r:.60}")
        for d in self.devices:
            if not isinstance(d, Device):
                raise PlatformError(f"platform {self.name!r}: devices holds {d!r:.60}, not a Device")
        if isinstance(self.links, str | bytes) or not isinstance(self.links, tuple | list):
            raise PlatformError(f"platform {self.name!r}: 'links' must be a list of Link, got {self.links!r:.60}")
        for lk in self.links:
            if not isinstance(lk, Link):
                raise PlatformError(f"platform {self.name!r}: links holds {lk!r:.60}, not a Link")
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "links", tuple(self.links))
        if not self.devices:
            raise PlatformError(f"platform {self.name!r}: needs at least one device")
        by_name: dict[str, Device] = {}
        for d in self.devices:
            if d.name in by_name:
                raise PlatformError(f"platform {self.name!r}: duplicate device name {d.name!r}")
            by_name[d.name] = d
        object.__setattr__(self, "_by_name", by_name)
        seen: set[frozenset[str]] = set()
        for link in self.links:
            for end in (link.src, link.dst):
                if end not in by_name:
                    raise PlatformError(
                        f"platform {self.name!r}: link {link.src!r} -> {link.dst!r} names "
                        f"unknown device {end!r} (devices: {sorted(by_name)})"
                    )
            pair = frozenset((link.src, link.dst))
            if pair in seen:
                raise PlatformError(
                    f"platform {self.name!r}: duplicate link between {link.src!r} and {link.dst!r}"
                )
            seen.add(pair)
        if self.host is None:
            cpus = [d.name for d in self.devices if d.kind == "cpu"]
            object.__setattr__(self, "host", cpus[0] if cpus else self.devices[0].name)
        elif self.host not in by_name:
            raise PlatformError(
                f"platform {self.name!r}: host {self.host!r} is not a device ({sorted(by_name)})"
            )
        if (isinstance(self.dispatch_threads, bool) or not isinstance(self.dispatch_threads, numbers.Integral)
                or not 1 <= self.dispatch_threads <= MAX_STREAMS):
            raise PlatformError(f"platform {self.name!r}: 'dispatch_threads' must be an int from 1 to {MAX_STREAMS}, "
                                f"got {self.dispatch_threads!r:.60}")
        if (isinstance(self.decision_s, bool) or not isinstance(self.decision_s, numbers.Real)
                or not 0.0 <= float(self.decision_s) < math.inf):
            raise PlatformError(f"platform {self.name!r}: 'decision_s' must be a finite number >= 0, "
                                f"got {self.decision_s!r}")
        object.__setattr__(self, "decision_s", float(self.decision_s))
        if not isinstance(self.interpreter_lock, bool):
            raise PlatformError(f"platform {self.name!r}: 'interpreter_lock' must be true or false, "
                                f"got {self.interpreter_lock!r}")
        if not isinstance(self.calibration, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.calibration.items()):
            raise PlatformError(f"platform {self.name!r}: 'calibration' must be a table of strings, "
                                f"got {self.calibration!r}")
        object.__setattr__(self, "calibration", dict(self.calibration))
        object.__setattr__(self, "_routes", {})
        object.__setattr__(self, "memory_domains", tuple(self.memory_domains))
        for dom in self.memory_domains:
            if not isinstance(dom, MemoryDomain):
                raise PlatformError(f"platform {self.name!r}: memory_domains holds {dom!r:.60}, not a MemoryDomain")
            for member in dom.demand:
                try:
                    member_resources(self, member)
                except MemoryDomainError as e:
                    raise PlatformError(f"platform {self.name!r}: memory domain {dom.name!r} {e}") from None

    # ------------------------------------------------------------------ queries
    @property
    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    def device(self, name: str) -> Device:
        """The device called ``name``; :class:`PlatformError` listing the known ones."""
        try:
            return self._by_name[name]
        except KeyError:
            raise PlatformError(
                f"platform {self.name!r} has no device {name!r}; devices: {self.device_names}"
            ) from None

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def devices_of_kind(self, kind: str) -> list[Device]:
        return [d for d in self.devices if d.kind == kind]

    def shares_memory(self, a: str, b: str) -> bool:
        return self.device(a).memory_domain == self.device(b).memory_domain

    def route(self, src: str, dst: str) -> tuple[Link, ...]:
        """Links a tensor crosses from ``src`` to ``dst`` (shortest hop path).

        Empty when the two devices share memory. Raises :class:`PlatformError`
        when no path of links connects them.
        """
        key = (src, dst)
        cached = self._routes.get(key)
        if cached is not None:
            return cached
        self.device(src)
        self.device(dst)
        if src == dst or self.shares_memory(src, dst):
            path: tuple[Link, ...] = ()
        else:
            path = self._bfs(src, dst)
        self._routes[key] = path
        return path

    def link_directions(self, src: str, dst: str) -> tuple[tuple[str, Link], ...]:
        """``(resource, link)`` for each hop a tensor crosses from ``src`` to ``dst``.

        ``resource`` names the link direction the hop occupies, as the simulator,
        the schedulers and the executor's records name it: ``"a->b"`` for a duplex
        link crossed from ``a`` to ``b``, ``link.name`` (``"a--b"``) for a
        half-duplex one, whose two directions share one resource. Empty when the
        two devices share memory.

        Examples
        --------
        >>> Platform.preset("xeon-p2200").link_directions("gpu", "cpu")[0][0]
        'gpu->cpu'
        """
        out: list[tuple[str, Link]] = []
        cur = src
        for link in self.route(src, dst):
            forward = self.shares_memory(cur, link.src)
            a, b = (link.src, link.dst) if forward else (link.dst, link.src)
            out.append((f"{a}->{b}" if link.duplex else link.name, link))
            cur = b
        return tuple(out)

    def link_resources(self) -> tuple[tuple[str, Link], ...]:
        """Every link-direction resource as ``(name, link)``, in link order: a duplex
        link gives ``"src->dst"`` then ``"dst->src"``, a half-duplex one its ``name``."""
        out: list[tuple[str, Link]] = []
        for link in self.links:
            if link.duplex:
                out += [(f"{link.src}->{link.dst}", link), (f"{link.dst}->{link.src}", link)]
            else:
                out.append((link.name, link))
        return tuple(out)

    def _bfs(self, src: str, dst: str) -> tuple[Link, ...]:
        adj: dict[str, list[tuple[str, Link]]] = {d: [] for d in self._by_name}
        for link in self.links:
            adj[link.src].append((link.dst, link))
            adj[link.dst].append((link.src, link))
        # devices sharing memory are free hops
        for a in self._by_name:
            for b in self._by_name:
                if a != b and self.shares_memory(a, b):
                    adj[a].append((b, None))  # type: ignore[arg-type]
        prev: dict[str, tuple[str, Link | None]] = {src: (src, None)}
        queue = deque([src])
        while queue:
            u = queue.popleft()
            if u == dst:
                break
            for v, link in adj[u]:
                if v not in prev:
                    prev[v] = (u, link)
                    queue.append(v)
        if dst not in prev:
            raise PlatformError(
                f"platform {self.name!r}: no link path from {src!r} to {dst!r}; declare a [[links]] entry"
            )
        hops: list[Link] = []
        node = dst
        while node != src:
            node, link = prev[node]
            if link is not None:
                hops.append(link)
        return tuple(reversed(hops))

    # --------------------------------------------------------------- variations
    def replace(self, **changes: Any) -> Platform:
        """A copy with top-level fields replaced (``devices``, ``links``, ``name``...)."""
        return dataclasses.replace(self, **changes)

    def only(self, devices: Iterable[str], *, name: str | None = None) -> Platform:
        """A copy with only ``devices`` (the host among them) and the links between them."""
        keep = set(devices)
        unknown = sorted(keep - set(self.device_names))
        if unknown or self.host not in keep:
            raise PlatformError(f"platform {self.name!r}: only({sorted(keep)}) "
                                + (f"names unknown devices {unknown}" if unknown else f"leaves out the host {self.host!r}"))
        d = self.to_dict()
        d["name"] = name or self.name
        d["devices"] = [x for x in d["devices"] if x["name"] in keep]
        d["links"] = [x for x in d["links"] if x["src"] in keep and x["dst"] in keep]
        return Platform.from_dict(d, source=f"{self.name}.only")

    def scaled(
        self,
        *,
        link_bandwidth: float = 1.0,
        gpu_peak: float = 1.0,
        cpu_peak: float = 1.0,
        gpu_bandwidth: float = 1.0,
        name: str | None = None,
    ) -> Platform:
        """A copy with link bandwidth and device speeds multiplied (for sweeps).

        A device whose speed changes is no longer the machine that was measured:
        its ``cost`` source (a measured profile) is dropped, so that it is priced
        by the roofline of its new figures, unless that source is ``"cross-gpu"``
        (priced from the figures themselves)."""
        for key, val in dict(
            link_bandwidth=link_bandwidth, gpu_peak=gpu_peak, cpu_peak=cpu_peak, gpu_bandwidth=gpu_bandwidth
        ).items():
            _positive("scaled()", key, val)
        devs = []
        for d in self.devices:
            if d.kind == "gpu":
                d = dataclasses.replace(
                    d,
                    peak_flops=d.peak_flops * gpu_peak,
                    mem_bandwidth_bytes_per_s=d.mem_bandwidth_bytes_per_s * gpu_bandwidth,
                    cost=d.cost if (gpu_peak, gpu_bandwidth) == (1.0, 1.0) or d.cost == "cross-gpu" else None,
                )
            else:
                d = dataclasses.replace(d, peak_flops=d.peak_flops * cpu_peak,
                                        cost=d.cost if cpu_peak == 1.0 else None)
            devs.append(d)
        links = [
            dataclasses.replace(lk, bandwidth_bytes_per_s=lk.bandwidth_bytes_per_s * link_bandwidth)
            for lk in self.links
        ]
        return dataclasses.replace(self, name=name or self.name, devices=tuple(devs), links=tuple(links))

    # ----------------------------------------------------------------- loading
    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> Platform:
        """Build from the TOML structure; unknown keys raise :class:`PlatformError`."""
        top = {"name", "host", "dispatch_threads", "decision_s", "description", "devices", "links",
               "memory_domains", "interpreter_lock", "calibration"}
        _no_unknown(source, "platform", data, top)
        devs = data.get("devices")
        if not isinstance(devs, list) or not devs:
            raise PlatformError(f"{source}: needs a non-empty [[devices]] list")
        devices = [
            _entry(Device, source, f"devices[{i}]" + (f" ({d.get('name', '?')!r})" if isinstance(d, Mapping) else ""),
                   d, ("name", "kind", "peak_flops", "mem_bandwidth_bytes_per_s", "memory_bytes"))
            for i, d in enumerate(devs)
        ]
        if not isinstance(data.get("links", []), list):
            raise PlatformError(f"{source}: 'links' must be a [[links]] list of tables")
        links = [_entry(Link, source, f"links[{i}]", lk, ("src", "dst", "bandwidth_bytes_per_s"))
                 for i, lk in enumerate(data.get("links", []))]
        try:
            domains = domains_from_dicts(data.get("memory_domains", []), source)
        except MemoryDomainError as e:
            raise PlatformError(str(e)) from None
        try:
            return cls(
                name=data.get("name", Path(source).stem),
                devices=tuple(devices),
                links=tuple(links),
                host=data.get("host"),
                dispatch_threads=data.get("dispatch_threads", 1),
                description=data.get("description", ""),
                decision_s=data.get("decision_s", 0.0),
                memory_domains=domains,
                interpreter_lock=data.get("interpreter_lock", False),
                calibration=data.get("calibration", {}),
            )
        except PlatformError as e:
            raise PlatformError(f"{source}: {e}") from None

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Platform:
        """Load a platform TOML file (see the module docstring for the format)."""
        return cls.from_dict(read_toml(path, "platform", PlatformError), source=str(path))

    def to_dict(self) -> dict[str, Any]:
        """The TOML structure (round-trips through :meth:`from_dict`)."""

        def clean(obj: Any) -> dict[str, Any]:
            return {
                k: v
                for k, v in dataclasses.asdict(obj).items()
                if v is not None and v != "" and not k.startswith("_")
            }

        out = {
            "name": self.name,
            "host": self.host,
            "dispatch_threads": self.dispatch_threads,
            "decision_s": self.decision_s,
            "description": self.description,
            "devices": [clean(d) for d in self.devices],
            "links": [clean(lk) for lk in self.links],
        }
        if self.memory_domains:
            out["memory_domains"] = [dom.to_dict() for dom in self.memory_domains]
        if self.interpreter_lock:
            out["interpreter_lock"] = True
        if self.calibration:
            out["calibration"] = dict(self.calibration)
        return out

    @staticmethod
    def presets() -> list[str]:
        """Names of the built-in platform presets."""
        folder = resources.files("hetsim.costmodel") / "presets"
        return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))

    @classmethod
    def preset(cls, name: str) -> Platform:
        """A built-in platform; :class:`PlatformError` lists the names on a typo."""
        if not isinstance(name, str) or name not in cls.presets():  # a name, never a path
            raise PlatformError(f"unknown platform preset {name!r:.80}; presets: {cls.presets()}")
        folder = resources.files("hetsim.costmodel") / "presets"
        res = folder / f"{name}.toml"
        if not res.is_file():
            raise PlatformError(f"unknown platform preset {name!r}; presets: {cls.presets()}")
        data = tomllib.loads(res.read_text())
        return cls.from_dict(data, source=f"preset {name!r}")

    @classmethod
    def load(cls, name_or_path: str | os.PathLike[str] | Platform) -> Platform:
        """A preset name, a TOML path, or a :class:`Platform` (returned as is)."""
        if isinstance(name_or_path, Platform):
            return name_or_path
        s = str(name_or_path)
        if s.endswith(".toml") or os.path.sep in s:
            return cls.from_toml(s)
        return cls.preset(s)


def read_toml(path: str | os.PathLike[str], what: str, error: type[Exception]) -> dict[str, Any]:
    """The tables of a TOML file; ``error`` with a one-line message naming the file for
    a missing file, a folder, bytes that are not UTF-8 or malformed TOML.

    ``what`` names the kind of file in the messages (``"platform"``, ``"sweep"``).
    """
    path = Path(path)
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise error(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a folder, not a {what} TOML file") from None
    except UnicodeDecodeError as e:
        raise error(f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: malformed TOML ({e})") from None


#: accepted range of a device's ``peak_flops`` and ``mem_bandwidth_bytes_per_s``: below 1
#: per second an op's time overflows into 300-digit figures, past 1e21 it vanishes
RATE_RANGE = (1.0, 1e21)


def _finite(value: Any) -> bool:
    """Whether ``value`` is an int or float (not a bool) within float range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _positive(where: str, key: str, value: Any) -> None:
    if not _finite(value) or value <= 0:
        raise PlatformError(f"{where}: {key!r} must be a positive number, got {value!r:.60}")


def _whole_bytes(where: str, key: str, value: Any) -> int:
    """``value`` as an int of bytes >= 1: an int, or a float with no fraction (``8e9``)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise PlatformError(f"{where}: {key!r} must be a positive number of whole bytes, got {value!r:.60}")
    return value


def _string(where: str, key: str, value: Any, *, optional: bool = False) -> None:
    if optional and value is None:
        return
    if not isinstance(value, str):
        raise PlatformError(f"{where}: {key!r} must be a string, got {value!r:.60}")


def _non_negative(where: str, key: str, value: Any) -> None:
    if not _finite(value) or value < 0:
        raise PlatformError(f"{where}: {key!r} must be a number >= 0, got {value!r:.60}")


def _entry(cls: type[Any], source: str, where: str, data: Any, required: tuple[str, ...]) -> Any:
    """``cls(**data)`` for the [[devices]] or [[links]] table at ``where``: unknown and
    missing keys, and the class's own refusals, named with ``source`` and ``where``."""
    _no_unknown(source, where, data, {f.name for f in dataclasses.fields(cls)})
    missing = [k for k in required if k not in data]
    if missing:
        raise PlatformError(f"{source}: {where} misses {missing}")
    try:
        return cls(**data)
    except PlatformError as e:
        raise PlatformError(f"{source}: {e}") from None


def _no_unknown(source: str, where: str, data: Any, allowed: set[str]) -> None:
    if not isinstance(data, Mapping):
        raise PlatformError(f"{source}: {where} must be a table, got {data!r:.60}")
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise PlatformError(f"{source}: {where} has unknown key(s) {unknown}; allowed: {sorted(allowed)}")
