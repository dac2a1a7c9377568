"""A CUDA device in virtual time: the executor's GPU path checked without a GPU.

:class:`VirtualCuda` implements :class:`~runtime.executor.device.CudaDevice`. Its
kernels are the executor's own calls, built for the CPU (a GPU of the platform is a
CPU memory of its own, ``cpu:K``), so that every value a plan computes is real and
is checked against the single-device reference; what it adds is time and CUDA's
rules:

* **Time.** Each host thread has its own virtual clock; a stream is a FIFO queue
  with a virtual tail. A host call costs its price on the calling thread's clock:
  a kernel launch the op's dispatch time (the cost model's), a graph replay the
  device's ``graph_launch_s``, an event record or stream wait ``event_s``, a copy
  ``copy_issue_s``. A kernel starts at ``max(stream tail, launch issued)`` and
  lasts the cost model's ``op_time``; a copy lasts its links' ``transfer_time``, one
  copy at a time on each link direction (:class:`~runtime.executor.virtual.links.LinkTimeline`);
  a replay runs its captured kernels back to back. An event records its stream's
  tail; a stream wait moves the stream's tail to the event's time; a host wait
  moves the thread's clock to it. A CPU op costs its dispatch and op time on its
  worker's clock. A value carries the host time at which it was produced (or
  launched): a thread that uses it cannot be earlier (the causality of the
  executor's ready queues).
* **Ordering.** Each stream and host thread keeps a vector clock of the stream
  work it is ordered after (its own queue, the events it waited on). Reading a
  value whose producer ran on another stream and that no event wait ordered
  before the reader raises :class:`CudaRuleError` naming both ops, as does a
  kernel reading a tensor of another memory.
* **Capture.** Entering a capture synchronises the device and empties the
  allocator (as ``torch.cuda.graph`` does): another capture in progress on the
  same GPU, from any thread, is an error, and so is a device synchronisation or an
  allocator flush (:meth:`VirtualCuda.empty_cache`) while a capture is in
  progress; a host wait inside a capture is refused. A replay launches the
  captured kernels as one launch.

:meth:`VirtualCuda.execution` builds an :class:`~runtime.executor.execute.Execution`
of a plan on this device (kernels for the CPU, each GPU's memory its own);
:meth:`VirtualCuda.clock` is the calling thread's virtual time and
:attr:`VirtualCuda.last_makespan` the virtual makespan of the last run.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.base import as_cost_model, host_dispatch
from hetsim.costmodel.platform import Platform
from hetsim.runtime.backends.base import DeviceSpec, parse_device
from hetsim.runtime.executor.execute import Execution
from hetsim.runtime.executor.setup import (
    CheckedPlan,
    ExecutionError,
    load_model,
    plan_devices,
    resolve_launch,
    wire,
)
from hetsim.runtime.executor.virtual.kernels import TimedCall, VirtualBackend
from hetsim.runtime.executor.virtual.links import LinkTimeline
from hetsim.runtime.executor.virtual.sequencer import (
    IdleList,
    SequencedDone,
    SequencedLock,
    Sequencer,
)

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan
    from hetsim.sim.platform import Device

__all__ = ["CudaRuleError", "VirtualCuda", "VirtualEvent", "VirtualGraph", "VirtualStream"]

HOST = -1  # memory index of the host


class CudaRuleError(ExecutionError):
    """A call that breaks a CUDA rule (a race between streams, a capture collision)."""


@dataclass(eq=False)
class VirtualStream:
    """A FIFO queue of GPU work on a virtual clock."""

    id: int
    gpu: int
    name: str
    tail: float = 0.0
    pos: int = 0  # work items queued so far
    vc: dict[int, int] = field(default_factory=dict)  # stream id -> last position it is ordered after

    def __repr__(self) -> str:
        return self.name


@dataclass(eq=False)
class VirtualEvent:
    """An event: the recording stream's tail, and what it orders."""

    id: int
    timing: bool
    time: float = 0.0
    host_time: float = 0.0
    recorded: bool = False
    gpu: int = 0
    vc: dict[int, int] = field(default_factory=dict)


@dataclass(eq=False)
class VirtualGraph:
    """A captured graph: its kernels (node, call, arguments, static outputs, seconds)
    and what it reads from outside."""

    id: int
    gpu: int
    kernels: list[tuple[str, Any, list[Any], tuple[Any, ...], float]] = field(default_factory=list)
    external: list[tuple[str, Any]] = field(default_factory=list)
    time_s: float = 0.0
    replays: int = 0
    name: str = ""


@dataclass(eq=False)
class Producer:
    """Who produced a value: the op, its stream and place in it (None on the host),
    its memory, and the host time from which others may use it."""

    name: str
    stream: VirtualStream | None
    pos: int
    memory: int
    host_time: float


@dataclass(eq=False)
class HostThread:
    """One host thread's clock, vector clock, current stream, capture."""

    name: str
    clock: float = 0.0
    vc: dict[int, int] = field(default_factory=dict)
    stream: VirtualStream | None = None
    capturing: VirtualGraph | None = None


def _merge(into: dict[int, int], other: Mapping[int, int]) -> None:
    for k, v in other.items():
        if into.get(k, -1) < v:
            into[k] = v


def _aliased(value: Any, args: list[Any]) -> Any:
    """The argument ``value`` is, or shares its memory with (a view), else None."""
    ptr = _storage(value)
    for a in args:
        if a is value or (ptr and _storage(a) == ptr):
            return a
    return None


def _storage(value: Any) -> int:
    try:
        return int(value.untyped_storage().data_ptr())
    except (AttributeError, RuntimeError):
        return 0


class VirtualCuda:
    """:class:`~runtime.executor.device.CudaDevice` in virtual time (see the module).

    Parameters
    ----------
    platform
        The platform whose devices' launch figures (``dispatch``, ``graph_launch_s``,
        ``event_s``, ``copy_issue_s``) and links price the host calls and copies.
    cost
        Cost model pricing each op (``op_time``, ``dispatch_time``) and copy
        (``transfer_time``): :func:`costmodel.as_cost_model` (None: each device's own).
    """

    def __init__(self, platform: Platform | str, cost: Any = None) -> None:
        self.platform = Platform.preset(platform) if isinstance(platform, str) else platform
        self.cost = as_cost_model(cost, platform=self.platform)
        self.gpus: list[Device] = [d for d in self.platform.devices if d.kind == "gpu"]
        self.host_device = self.platform.device(self.platform.host)
        self.lock = threading.RLock()
        self.streams: list[VirtualStream] = []
        self.events: list[VirtualEvent] = []
        self.graphs: list[VirtualGraph] = []
        self.threads: dict[int, HostThread] = {}
        self.tags: dict[int, tuple[weakref.ref, Producer]] = {}
        #: GPU index -> (thread, graph) of the capture in progress there
        self.capture_on: dict[int, tuple[HostThread, VirtualGraph]] = {}
        self.invalid: dict[int, str] = {}  # graph id -> why its capture was invalidated
        self.floor = 0.0  # every thread's clock once the host synchronised with everything
        #: virtual seconds from the end of the run before to the end of the last run
        self.last_makespan = 0.0
        self.graph: Graph | None = None
        self.prices: dict[tuple[str, str], tuple[float, float]] = {}
        self.memory_of: dict[str, int] = {}  # torch device string -> memory index
        self.device_of: dict[str, str] = {}  # worker thread name prefix -> platform device
        self.kernels = 0  # kernels launched eagerly
        #: the host threads of a run taken in virtual-time order
        self.seq = Sequencer(self.thread_state)
        self.launches = 0  # host launches (kernels and replays)
        #: each link direction's copies (one at a time)
        self.links = LinkTimeline(self.platform)

    # ------------------------------------------------------------------ set-up
    def specs(self) -> dict[str, Any]:
        """Platform device -> the real device its kernels run on: the host's CPU for
        every CPU device, a CPU memory of its own (``cpu:K``) for the K-th GPU."""
        out: dict[str, Any] = {}
        k = 0
        for d in self.platform.devices:
            if d.kind == "gpu":
                out[d.name] = DeviceSpec(f"cuda:{k}", "gpu", f"cpu:{k}", k)
                self.memory_of[f"cpu:{k}"] = k
                k += 1
            else:
                out[d.name] = parse_device("cpu@1")
        self.memory_of["cpu"] = HOST
        return out

    def execution(self, graph: Graph, plan: Plan, wiring: Any = None, *, launch: str | None = None,
                  **kw: Any) -> Any:
        """An :class:`~runtime.executor.execute.Execution` of ``plan`` on this device
        (``wiring``: the graph's dataflow, :func:`runtime.executor.setup.wire` of its
        zoo model when None; ``kw`` as ``Execution``)."""
        plan.validate(graph, self.platform)
        model = kw.pop("model", None)
        if wiring is None:
            model = model if model is not None else load_model(graph)
            wiring = wire(graph, model)
        specs = self.specs()
        active = plan_devices(plan, self.platform)
        gpu = any(specs[d].kind == "gpu" for d in active)
        mode = resolve_launch(launch, dynamic=plan.policy is not None, backend="torch", gpu=gpu)
        checked = CheckedPlan(self.platform, specs, active, mode)
        kw.setdefault("pin_threads", False)
        kw.setdefault("backend", VirtualBackend())
        return Execution(graph, plan, self.platform, wiring, checked=checked, cuda_device=self, model=model, **kw)

    def bind(self, engine: Any) -> None:
        """Time the calls of ``engine`` (an :class:`~runtime.executor.run.Engine` built
        with this device's :meth:`specs`): each prepared call is wrapped to price
        and check it, the graph inputs are marked as host values."""
        self.graph = engine.graph
        for i, name in enumerate(engine.mem_names):
            m = self.memory_of.get(name, HOST)
            calls = engine.calls[i]
            for u, call in enumerate(calls):
                if call is not None and not isinstance(call, TimedCall):
                    calls[u] = TimedCall(self, call, engine.names[u], m)
        for value in engine.input_values:
            self.tag(value, Producer("graph input", None, 0, HOST, 0.0))
        for name in engine.dev_names:
            self.device_of[f"hetsim-{name}-"] = name
        if not isinstance(engine.lock, SequencedLock):
            engine.lock = SequencedLock(engine.lock, self.seq)
            engine.idle = [IdleList(self.seq) for _ in engine.idle]
            engine.done = SequencedDone(engine.done, self.seq, engine)

    def price(self, node: str, device: str) -> tuple[float, float]:
        """(host dispatch seconds, kernel seconds) of ``node`` on platform ``device``."""
        key = (node, device)
        p = self.prices.get(key)
        if p is None:
            dev = self.platform.device(device)
            p = (host_dispatch(self.cost, self.graph, node, dev), float(self.cost.op_time(self.graph, node, dev)))
            self.prices[key] = p
        return p

    # ------------------------------------------------------------------ threads
    def host(self) -> HostThread:
        """The calling thread's state (its clock no earlier than the last full synchronisation)."""
        return self.thread_state(threading.get_ident())

    def thread_state(self, ident: int) -> HostThread:
        """The state of the thread ``ident``."""
        h = self.threads.get(ident)
        if h is None:
            names = {t.ident: t.name for t in threading.enumerate()}
            h = self.threads[ident] = HostThread(names.get(ident, str(ident)))
        if h.clock < self.floor:
            h.clock = self.floor
        return h

    def clock(self) -> float:
        """The calling thread's virtual time, in seconds."""
        with self.lock:
            return self.host().clock

    def platform_device(self, thread: HostThread) -> str | None:
        """The platform device whose worker ``thread`` is (None for other threads)."""
        for prefix, name in self.device_of.items():
            if thread.name.startswith(prefix) and thread.name[len(prefix):].isdigit():
                return name
        return None

    # ------------------------------------------------------------------ values
    def tag(self, value: Any, producer: Producer) -> None:
        """Mark ``value`` (a tensor or a tuple of them) as made by ``producer``."""
        if isinstance(value, tuple | list):
            for v in value:
                self.tag(v, producer)
            return
        try:
            ref = weakref.ref(value)
        except TypeError:
            return
        self.tags[id(value)] = (ref, producer)

    def tag_outputs(self, out: Any, args: list[Any], producer: Producer) -> None:
        """Mark the outputs of a call on ``args`` as made by ``producer``, except an
        output that is (a view of) an argument: it keeps that argument's producer
        (a kernel that hands back an input, such as batch_norm's running statistics
        in inference, writes nothing)."""
        for o in out if isinstance(out, tuple | list) else (out,):
            src = _aliased(o, args)
            if src is None:
                self.tag(o, producer)
                continue
            p = self.producer(src)
            if p is not None:
                self.tag(o, p)
            else:
                self.tags.pop(id(o), None)

    def producer(self, value: Any) -> Producer | None:
        entry = self.tags.get(id(value))
        if entry is None or entry[0]() is not value:
            return None
        return entry[1]

    def check_read(self, reader: str, stream: VirtualStream | None, h: HostThread, value: Any,
                    memory: int | None) -> float:
        """Check that ``reader`` (on ``stream``, or on the host when None) may read
        ``value``; the host time from which it exists."""
        p = self.producer(value)
        if p is None:
            return 0.0
        if memory is not None and p.memory != memory:
            where = "the host" if memory == HOST else f"GPU {memory}"
            there = "the host" if p.memory == HOST else f"GPU {p.memory}"
            raise CudaRuleError(f"{reader!r} on {where} reads the output of {p.name!r}, which is in the memory "
                                f"of {there} (no copy brought it)")
        if p.stream is not None:
            seen = stream.vc if stream is not None else h.vc
            if p.stream is not stream and seen.get(p.stream.id, 0) < p.pos:
                on = f"stream {stream.name}" if stream is not None else f"the host (thread {h.name!r})"
                raise CudaRuleError(
                    f"{reader!r} on {on} reads the output of {p.name!r} on stream {p.stream.name}, "
                    "which it never waited for (no event wait orders them)")
        return p.host_time

    def _enqueue(self, h: HostThread, stream: VirtualStream, seconds: float) -> float:
        """Queue ``seconds`` of work on ``stream`` after the host's launch: its end."""
        _merge(stream.vc, h.vc)  # work queued after what the host has waited for
        start = max(stream.tail, h.clock)
        stream.tail = start + seconds
        stream.pos += 1
        stream.vc[stream.id] = stream.pos
        return stream.tail

    # ----------------------------------------------------------------- kernels
    def run_kernel(self, call: Any, node: str, memory: int, args: list[Any], request: int) -> Any:
        """Launch (or capture, or run on the host) one prepared call."""
        self.seq.point()
        with self.lock:
            h = self.host()
            device = self.platform_device(h) if memory == HOST else self.gpus[memory].name
            if device is None:  # outside the workers (the reference run): untimed
                return call(args, request)
            if memory == HOST:
                return self._host_op(h, call, node, device, args, request)
            stream = h.stream
            if stream is None or stream.gpu != memory:
                raise CudaRuleError(f"{node!r} is launched on GPU {memory} outside a stream of it")
            if h.capturing is not None:
                return self._capture_kernel(h, call, node, device, stream, args, request)
            ready = max((self.check_read(node, stream, h, a, memory) for a in args), default=0.0)
            dispatch, seconds = self.price(node, device)
            h.clock = max(h.clock, ready) + dispatch
            out = call(list(args), request)
            self._enqueue(h, stream, seconds)
            self.kernels += 1
            self.launches += 1
            self.tag_outputs(out, args, Producer(node, stream, stream.pos, memory, h.clock))
            return out

    def _host_op(self, h: HostThread, call: Any, node: str, device: str, args: list[Any], request: int) -> Any:
        ready = max((self.check_read(node, None, h, a, HOST) for a in args), default=0.0)
        dispatch, seconds = self.price(node, device)
        h.clock = max(h.clock, ready) + dispatch + seconds
        out = call(list(args), request)
        self.tag_outputs(out, args, Producer(node, None, 0, HOST, h.clock))
        return out

    def _capture_kernel(self, h: HostThread, call: Any, node: str, device: str, stream: VirtualStream,
                        args: list[Any], request: int) -> Any:
        graph = h.capturing
        assert graph is not None
        inside = {id(o) for _, _, _, outs, _ in graph.kernels for o in outs}
        for a in args:
            if id(a) not in inside and self.producer(a) is not None:
                graph.external.append((node, a))
        kept = list(args)
        out = call(list(args), request)
        _, seconds = self.price(node, device)
        graph.kernels.append((node, call, kept, out, seconds))
        graph.time_s += seconds
        graph.name = graph.name or node
        return out

    # --------------------------------------------------------- CudaDevice calls
    def stream(self, index: int) -> VirtualStream:
        """A new stream on GPU ``index``."""
        with self.lock:
            if not 0 <= index < len(self.gpus):
                raise CudaRuleError(f"no GPU {index}: the platform has {len(self.gpus)}")
            s = VirtualStream(len(self.streams), index, f"gpu{index}.s{len(self.streams)}")
            self.streams.append(s)
            return s

    def event(self, *, timing: bool) -> VirtualEvent:
        """A new event."""
        with self.lock:
            ev = VirtualEvent(len(self.events), timing)
            self.events.append(ev)
            return ev

    def record(self, event: VirtualEvent, stream: VirtualStream) -> None:
        """Record ``event`` on ``stream``: the time its queued work ends."""
        self.seq.point()
        with self.lock:
            h = self.host()
            h.clock += float(self.gpus[stream.gpu].event_s)
            _merge(stream.vc, h.vc)
            event.time = max(stream.tail, h.clock)
            event.host_time = h.clock
            event.gpu = stream.gpu
            event.vc = dict(stream.vc)
            event.recorded = True

    def wait(self, stream: VirtualStream, event: VirtualEvent) -> None:
        """Order ``stream``'s later work after ``event``."""
        self.seq.point()
        with self.lock:
            h = self.host()
            h.clock = max(h.clock, event.host_time) + float(self.gpus[stream.gpu].event_s)
            if event.recorded:
                stream.tail = max(stream.tail, event.time)
                _merge(stream.vc, event.vc)

    def wait_host(self, event: VirtualEvent) -> None:
        """The calling thread waits for ``event``."""
        self.seq.point()
        with self.lock:
            h = self.host()
            if h.capturing is not None:
                raise CudaRuleError("a host wait on an event inside a capture (not capturable)")
            if event.recorded:  # the event, then the wait's return to the host
                h.clock = max(h.clock, event.time, event.host_time) + float(self.gpus[event.gpu].event_s)
                _merge(h.vc, event.vc)

    def done(self, event: VirtualEvent) -> bool:
        """Whether ``event`` has happened by the calling thread's time (a query: no cost,
        no wait)."""
        with self.lock:
            return event.recorded and event.time <= self.host().clock

    def elapsed_s(self, start: VirtualEvent, end: VirtualEvent) -> float:
        """Seconds from timing event ``start`` to ``end``."""
        if not (start.timing and end.timing):
            raise CudaRuleError("elapsed time between events created without timing")
        if not (start.recorded and end.recorded):
            raise CudaRuleError("elapsed time of an event never recorded")
        return end.time - start.time

    def empty(self, like: Any, device: str) -> Any:
        """An uninitialised tensor shaped like ``like`` in the memory of ``device``."""
        import torch

        m = self.memory_of.get(device)
        if m is None or m == HOST:
            raise CudaRuleError(f"no GPU memory {device!r} on this device")
        t = torch.empty(like.shape, dtype=like.dtype)
        self.tag(t, Producer(f"buffer on {device}", None, 0, m, 0.0))
        return t

    def pinned(self, like: Any) -> Any:
        """An uninitialised host buffer shaped like ``like``."""
        import torch

        t = torch.empty(like.shape, dtype=like.dtype)
        self.tag(t, Producer("pinned buffer", None, 0, HOST, 0.0))
        return t

    def copy(self, dst: Any, src: Any, stream: VirtualStream) -> None:
        """Copy ``src`` into ``dst`` on ``stream`` after the host's issue."""
        self.seq.point()
        with self.lock:
            h = self.host()
            sp, dp = self.producer(src), self.producer(dst)
            if sp is not None and sp.memory != HOST:
                name = f"copy of {sp.name}"
            else:  # the host staged the data in a pinned buffer
                name = "a host-to-device copy"
            ready = self.check_read(name, stream, h, src, None)
            src_mem = sp.memory if sp is not None else HOST
            dst_mem = dp.memory if dp is not None else HOST
            h.clock = max(h.clock, ready) + float(self.gpus[stream.gpu].copy_issue_s)
            nbytes = src.numel() * src.element_size()
            dst.copy_(src)
            a = self.host_device.name if src_mem == HOST else self.gpus[src_mem].name
            b = self.host_device.name if dst_mem == HOST else self.gpus[dst_mem].name
            _merge(stream.vc, h.vc)  # queued after what the host has waited for, as _enqueue
            _, stream.tail = self.links.place(a, b, max(stream.tail, h.clock),
                                              lambda link: self.cost.transfer_time(nbytes, link))
            stream.pos += 1
            stream.vc[stream.id] = stream.pos
            self.tag(dst, Producer(name, stream, stream.pos, dst_mem, h.clock))

    def capture(self, body: Callable[[], Any], stream: VirtualStream) -> tuple[VirtualGraph, Any]:
        """Warm ``body`` up on ``stream``, then capture it (see the module's rules)."""
        with self.lock:
            h = self.host()
            self._device_sync(h, stream.gpu, "a capture's start (torch.cuda.graph synchronises the device "
                                             "and empties the allocator)")
        body()  # warm-up: launched eagerly
        with self.lock:
            h = self.host()
            self._device_sync(h, stream.gpu, "a capture's start (torch.cuda.graph synchronises the device "
                                             "and empties the allocator)")
            graph = VirtualGraph(len(self.graphs), stream.gpu)
            self.graphs.append(graph)
            self.capture_on[stream.gpu] = (h, graph)
            h.capturing = graph
        try:
            out = body()
        finally:
            with self.lock:
                h.capturing = None
                self.capture_on.pop(stream.gpu, None)
        why = self.invalid.pop(graph.id, None)
        if why is not None:
            raise CudaRuleError(f"the capture of {graph.name!r} on stream {stream.name} was invalidated: {why}")
        return graph, out

    def replay(self, graph: VirtualGraph, stream: VirtualStream) -> None:
        """Launch a captured graph on ``stream``: its kernels back to back, one launch."""
        self.seq.point()
        with self.lock:
            h = self.host()
            if stream.gpu != graph.gpu:
                raise CudaRuleError(f"graph {graph.name!r} of GPU {graph.gpu} replayed on stream {stream.name}")
            ready = max((self.check_read(f"graph {graph.name}: {node}", stream, h, a, graph.gpu)
                         for node, a in graph.external), default=0.0)
            h.clock = max(h.clock, ready) + float(self.gpus[graph.gpu].graph_launch_s)
            for _node, call, args, outs, _ in graph.kernels:
                new = call(list(args), 0)
                for static, value in zip(outs, new):
                    if static is not value:
                        static.copy_(value)
            self._enqueue(h, stream, graph.time_s)
            graph.replays += 1
            self.launches += 1
            for node, _, args, outs, _ in graph.kernels:
                self.tag_outputs(outs, args, Producer(node, stream, stream.pos, graph.gpu, h.clock))

    def busy(self, stream: VirtualStream, seconds: float) -> None:
        """Keep ``stream`` busy for ``seconds`` from the host's call (a spin kernel)."""
        self.seq.point()
        with self.lock:
            h = self.host()
            self._enqueue(h, stream, float(seconds))

    def synchronize(self, index: int) -> None:
        """The calling thread waits for every stream of GPU ``index``."""
        self.seq.point()
        with self.lock:
            h = self.host()
            self._device_sync(h, index, "a device synchronisation")
            end = max(h.clock, *(t.clock for t in self.threads.values()),
                      *(s.tail for s in self.streams))
            if end > self.floor:  # work since the last full synchronisation: a run ended
                self.last_makespan = end - self.floor
                self.floor = end
                self.links.clear()
            h.clock = end
        self.seq.stop()

    def empty_cache(self, index: int) -> None:
        """Flush the allocator's cache of GPU ``index`` (an error while it captures)."""
        with self.lock:
            self._refuse_during_capture(self.host(), index, "an allocator flush (empty_cache)")

    @contextlib.contextmanager
    def using(self, index: int, stream: VirtualStream) -> Iterator[None]:
        """Make ``stream`` the calling thread's current one."""
        if stream.gpu != index:
            raise CudaRuleError(f"stream {stream.name} is not a stream of GPU {index}")
        with self.lock:
            h = self.host()
            before = h.stream
            h.stream = stream
        try:
            yield
        finally:
            with self.lock:
                h.stream = before

    # ------------------------------------------------------------------ rules
    def _refuse_during_capture(self, h: HostThread, index: int, what: str) -> None:
        busy = self.capture_on.get(index)
        if busy is None:
            return
        other, graph = busy
        why = (f"{what} on GPU {index} from thread {h.name!r} while thread {other.name!r} captures "
               f"(the segment from {graph.name or 'its first op'!r})")
        self.invalid[graph.id] = why
        raise CudaRuleError(why + ": it invalidates that capture (an implicit dependency on a capturing stream)")

    def _device_sync(self, h: HostThread, index: int, what: str) -> None:
        self._refuse_during_capture(h, index, what)
        for s in self.streams:
            if s.gpu == index:
                h.clock = max(h.clock, s.tail)
                _merge(h.vc, s.vc)
