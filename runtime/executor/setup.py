"""What :func:`runtime.executor.execute.execute` prepares before anything is timed.

* **the plan checked** -- once per :func:`~runtime.executor.execute.execute`
  (:func:`check_plan`: the plan against the graph and platform, the launch mode,
  the devices mapped to real ones (:func:`map_devices`) and checked to exist on
  this machine before any work);
* **wiring** -- where every input slot of every node comes from (a node output, a
  graph input, or a constant with its value), from the model's Relax module
  (:class:`~runtime.backends.tvm_backend.RelaxModel`); graphs rewritten by
  :func:`graphs.transforms.split_op` (the ``tensor-split`` scheduler) are wired
  through their original node, the parts reading slices of its inputs;
* **calls** -- one lean callable per (node, real device) around the backend's
  kernel: constants (weights) materialised once per device, activations filled in
  at run time, preallocated outputs where the backend has them;
(The references the first run is checked against are in :mod:`runtime.executor.check`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.platform import Platform
from hetsim.runtime.backends.base import BackendError, DeviceSpec, check_available, parse_device
from hetsim.runtime.backends.relax_model import source_model

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.backends.base import Backend
    from hetsim.runtime.backends.tvm_backend import RelaxModel
    from hetsim.sim.plan import Plan

__all__ = [
    "LAUNCH_MODES",
    "CheckedPlan",
    "ExecutionError",
    "Wiring",
    "check_plan",
    "resolve_launch",
    "build_calls",
    "check_devices",
    "load_model",
    "map_devices",
    "plan_devices",
    "wire",
]


class ExecutionError(RuntimeError):
    """A plan cannot be executed, or its execution went wrong (wrong result, OOM...)."""


#: how GPU work is launched: a CUDA graph per segment, or one launch per op
LAUNCH_MODES = ("graph", "eager")


def resolve_launch(launch: str | None, *, dynamic: bool, backend: str, gpu: bool) -> str | None:
    """The launch mode of an execution: ``launch`` checked, or its default.

    The default is ``"graph"`` for a static plan on the torch backend and
    ``"eager"`` otherwise; None when no GPU takes part (nothing is launched).
    ``"graph"`` with a dynamic plan (placed at run time: nothing to capture before
    it runs) or the tvm backend is an error, not a silent fallback.

    Examples
    --------
    >>> resolve_launch(None, dynamic=False, backend="torch", gpu=True)
    'graph'
    >>> resolve_launch(None, dynamic=True, backend="torch", gpu=True)
    'eager'
    >>> resolve_launch("graph", dynamic=False, backend="torch", gpu=False) is None
    True
    """
    if launch is not None and launch not in LAUNCH_MODES:
        raise ExecutionError(f"launch must be one of {list(LAUNCH_MODES)}, got {launch!r}")
    if launch == "graph" and dynamic:
        raise ExecutionError("launch 'graph' needs a static plan: a dynamic plan places its ops at run "
                             "time, so its GPU work cannot be captured before it runs; use launch 'eager'")
    if launch == "graph" and backend != "torch":
        raise ExecutionError(f"launch 'graph' needs the torch backend (CUDA graphs of torch kernels), "
                             f"not {backend!r}; use launch 'eager'")
    if not gpu:
        return None
    if launch is None:
        return "eager" if dynamic or backend != "torch" else "graph"
    return launch


@dataclass(frozen=True)
class CheckedPlan:
    """A plan checked for execution on a platform (:func:`check_plan`).

    Attributes
    ----------
    platform
        The platform loaded.
    specs
        Platform device -> the real device it runs on.
    active
        Platform devices the plan may run ops on.
    launch
        ``"graph"``, ``"eager"``, or None when no GPU takes part.
    """

    platform: Platform
    specs: dict[str, DeviceSpec]
    active: list[str]
    launch: str | None


def check_plan(graph: Graph, plan: Plan, platform: Platform | str, *, device_map: Mapping[str, str] | None = None,
               backend: str = "torch", launch: str | None = None) -> CheckedPlan:
    """Everything about a plan that is checked before anything runs, done once: the
    platform loaded, the plan validated against the graph and the platform, the
    launch mode (:func:`resolve_launch`), the devices mapped (:func:`map_devices`)
    and present on this machine, the host a CPU.

    Raises
    ------
    sim.PlanError
        For a plan that does not fit the graph or the platform.
    ExecutionError
        For a launch mode the plan or backend cannot use, a device this machine
        lacks, a host that is not a CPU.
    """
    platform = Platform.load(platform)
    plan.validate(graph, platform)
    specs = map_devices(platform, device_map)
    active = plan_devices(plan, platform)
    mode = resolve_launch(launch, dynamic=plan.policy is not None, backend=backend,
                          gpu=any(specs[d].kind == "gpu" for d in active))
    check_devices(specs, sorted(set(active) | {platform.host}))
    if specs[platform.host].kind != "cpu":
        raise ExecutionError(f"platform host {platform.host!r} must run on a CPU, not {specs[platform.host].name!r}")
    return CheckedPlan(platform, specs, active, mode)


# ------------------------------------------------------------------------ devices
def map_devices(platform: Platform, device_map: Mapping[str, str] | None = None) -> dict[str, DeviceSpec]:
    """Platform device name -> the real device it runs on.

    A ``cpu`` device becomes ``cpu@{threads}`` (``cpu`` when ``threads`` is unset),
    the ``K``-th ``gpu`` device (platform order) ``cuda:K``; ``device_map``
    (platform device -> spec such as ``"cpu@1"`` or ``"cuda:1"``) overrides either.

    Examples
    --------
    >>> from hetsim.sim.platform import Platform
    >>> {k: v.name for k, v in map_devices(Platform.preset("cpu2")).items()}
    {'cpu0': 'cpu@1', 'cpu1': 'cpu@1'}
    """
    device_map = dict(device_map or {})
    unknown = sorted(set(device_map) - set(platform.device_names))
    if unknown:
        raise ExecutionError(
            f"device_map names {unknown}, not devices of platform {platform.name!r} "
            f"({platform.device_names})"
        )
    out: dict[str, DeviceSpec] = {}
    k = 0
    for d in platform.devices:
        if d.kind == "cpu":
            default = f"cpu@{d.threads}" if d.threads else "cpu"
        else:
            default = f"cuda:{k}"
            k += 1
        spec = device_map.get(d.name, default)
        try:
            out[d.name] = parse_device(spec)
        except BackendError as e:
            raise ExecutionError(f"platform device {d.name!r}: {e}") from None
    return out


def check_devices(specs: Mapping[str, DeviceSpec], used: Sequence[str]) -> None:
    """Raise :class:`ExecutionError` unless every device in ``used`` exists here."""
    for name in used:
        spec = specs[name]
        try:
            check_available(spec)
        except BackendError as e:
            raise ExecutionError(
                f"platform device {name!r} runs on {spec.name!r}, which this machine cannot "
                f"provide: {e}. Execute on a machine that has it, or map the device elsewhere "
                f"(device_map={{{name!r}: 'cpu'}})"
            ) from None


# ------------------------------------------------------------------------- wiring
@dataclass
class Wiring:
    """Where each input slot of each node of a graph comes from.

    Attributes
    ----------
    sources
        Node -> per input slot ``("node", (producer, output))``, ``("input", name)``
        or ``("const", key)`` (``key`` into :attr:`consts`).
    consts
        Constant values (weights, literals), each stored once.
    slices
        Node -> slot -> ``(axis, start, length)``: the part of a node-produced
        input that a split part reads (``tensor-split`` graphs).
    inputs
        Graph input name -> its value (the model's example input).
    """

    sources: dict[str, list[tuple[str, Any]]]
    consts: dict[int, np.ndarray]
    slices: dict[str, dict[int, tuple[int, int, int]]] = field(default_factory=dict)
    inputs: dict[str, np.ndarray] = field(default_factory=dict)

    def const_values(self, node: str) -> dict[int, np.ndarray]:
        """Input slot -> value of ``node``'s constant inputs."""
        return {i: self.consts[key] for i, (kind, key) in enumerate(self.sources[node]) if kind == "const"}


def load_model(graph: Graph) -> RelaxModel:
    """The Relax model (dataflow and real weights) behind a graph.

    A graph imported by :func:`graphs.from_torch` in this process carries its exported
    model (``graph.program``); a zoo graph names its model (``meta["model"]``, rebuilt
    with the graph's batch, options and seed); a graph loaded from a model spec
    (:func:`graphs.load_model_spec`) names the spec (``meta["model_spec"]``). A graph
    rewritten by ``split_op`` gets the model of the graph it was split from
    (:func:`wire` maps the parts).

    Raises
    ------
    ExecutionError
        When the graph has none of these (e.g. a graph JSON of a module imported
        elsewhere): pass ``model=`` (from
        :func:`runtime.backends.tvm_backend.import_module`) to ``execute`` instead.
    """
    if getattr(graph, "program", None) is None and not graph.meta.get("model") and not graph.meta.get("model_spec"):
        raise ExecutionError(
            f"graph {graph.name!r} names no model (it was not imported by graphs.from_torch in "
            "this process, nor from the zoo or a model spec): its weights and dataflow are "
            "unknown; pass model=runtime.backends.tvm_backend.import_module(module, inputs) to execute()"
        )
    try:
        return source_model(graph, exact=True)
    except BackendError as e:
        raise ExecutionError(f"graph {graph.name!r}: cannot rebuild its model: {e}") from e


def _const_array(c: Any) -> np.ndarray:
    if hasattr(c, "value"):  # a Relax constant
        arr = c.value.numpy()
    else:  # a runtime tensor (a weight bound as a parameter, a folded value) or an array
        arr = c.numpy() if hasattr(c, "numpy") else np.asarray(c)
    return _contiguous(arr)


def _contiguous(arr: np.ndarray) -> np.ndarray:
    """C-contiguous ``arr`` (0-d arrays stay 0-d, unlike ``np.ascontiguousarray``)."""
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def wire(graph: Graph, model: RelaxModel) -> Wiring:
    """Where every input of every node of ``graph`` comes from, per ``model``.

    Nodes are matched by id; the parts and concat of an operator split by
    :func:`graphs.transforms.split_op` are wired through the original node (the
    parts read slices of its inputs: constants are sliced here, node outputs at run
    time). Every wiring is checked against the graph's edges.

    Raises
    ------
    ExecutionError
        Naming the first node that the model does not explain.
    """
    mgraph = model.graph
    consts: dict[int, np.ndarray] = {}
    const_ids: dict[int, int] = {}
    shared = model.const_arrays  # one array per constant for all wirings of the model

    held: list[Any] = []  # keeps every keyed object alive: an id is unique only while it lives

    def const(c: Any) -> int:
        key = const_ids.get(id(c))
        if key is None:
            key = const_ids[id(c)] = len(consts)
            held.append(c)
            if isinstance(c, np.ndarray):  # a slice made for this wiring (split parts)
                consts[key] = _const_array(c)
                return key
            hit = shared.get(id(c))
            if hit is None:  # keep the model's constant with its array: its id stays its own
                hit = shared[id(c)] = (c, _const_array(c))
            consts[key] = hit[1]
        return key

    def redirect(src: tuple[str, Any]) -> tuple[str, Any]:
        kind, val = src
        if kind == "node" and val[0] not in graph.nx and f"{val[0]}/concat" in graph.nx:
            return ("node", (f"{val[0]}/concat", 0))
        if kind == "const":
            return ("const", const(val))
        return (kind, val)

    sources: dict[str, list[tuple[str, Any]]] = {}
    slices: dict[str, dict[int, tuple[int, int, int]]] = {}
    nodes = graph.nx.nodes
    for n in graph.nx:
        data = nodes[n]
        attrs = data.get("attrs") or {}
        orig = attrs.get("split_of")
        if n in model.sources and orig is None:
            md = mgraph.nx.nodes[n]
            if md["op"] != data["op"] or md["inputs"] != data["inputs"]:
                raise ExecutionError(f"node {n!r} of graph {graph.name!r} differs from the model's node {n!r}")
            sources[n] = [redirect(s) for s in model.sources[n]]
        elif orig is not None and orig in model.sources and "split_part" in attrs:
            sources[n], sl = _split_part(graph, n, orig, model, redirect)
            if sl:
                slices[n] = sl
        elif orig is not None and data["op"] == "concat":
            parts = [f"{orig}/part{j}" for j in range(len(data["inputs"]))]
            missing = [p for p in parts if p not in graph.nx]
            if missing:
                raise ExecutionError(f"node {n!r} joins a split of {orig!r}, but part {missing[0]!r} is missing")
            sources[n] = [("node", (p, 0)) for p in parts]
        else:
            raise ExecutionError(
                f"node {n!r} of graph {graph.name!r} is not in the model {mgraph.name!r} it names "
                "(a graph of another model, or rewritten by an unsupported transform)"
            )
    _check_edges(graph, sources)
    inputs = {k: _contiguous(np.asarray(v)) for k, v in model.example_inputs.items()}
    used = {v for srcs in sources.values() for kind, v in srcs if kind == "input"}
    missing_in = sorted(used - set(inputs))
    if missing_in:
        raise ExecutionError(f"graph input(s) {missing_in} have no value in the model")
    return Wiring(sources, consts, slices, inputs)


def _split_part(graph: Graph, n: str, orig: str, model: RelaxModel, redirect: Any) -> tuple[list, dict]:
    """Sources and run-time slices of part ``n`` of the split of ``orig``."""
    attrs = graph.nx.nodes[n]["attrs"]
    i_part = int(attrs["split_part"])
    ins = graph.nx.nodes[n]["inputs"]
    orig_ins = model.graph.nx.nodes[orig]["inputs"]
    if len(ins) != len(orig_ins):
        raise ExecutionError(f"split part {n!r} has {len(ins)} inputs, {orig!r} has {len(orig_ins)}")
    srcs: list[tuple[str, Any]] = []
    slices: dict[int, tuple[int, int, int]] = {}
    for slot, (src, spec, ospec) in enumerate(zip(model.sources[orig], ins, orig_ins)):
        shape, oshape = list(spec["shape"]), list(ospec["shape"])
        if shape == oshape:
            srcs.append(redirect(src))
            continue
        axes = [a for a, (x, y) in enumerate(zip(shape, oshape)) if x != y]
        if len(shape) != len(oshape) or len(axes) != 1:
            raise ExecutionError(f"split part {n!r}: input {slot} shape {shape} is not a slice of {oshape}")
        ax = axes[0]
        start = 0
        for j in range(i_part):
            other = f"{orig}/part{j}"
            if other not in graph.nx:
                raise ExecutionError(f"split part {n!r}: sibling {other!r} is missing")
            start += int(graph.nx.nodes[other]["inputs"][slot]["shape"][ax])
        length = int(shape[ax])
        kind, val = redirect(src)
        if kind == "const":
            model_const = _const_array(src[1])
            index = [slice(None)] * model_const.ndim
            index[ax] = slice(start, start + length)
            srcs.append(("const", _add_const(redirect, model_const[tuple(index)])))
        else:
            srcs.append((kind, val))
            slices[slot] = (ax, start, length)
    return srcs, slices


def _add_const(redirect: Any, value: np.ndarray) -> int:
    """Store a new constant through ``redirect``'s table (an array is its own key)."""
    return redirect(("const", value))[1]


def _check_edges(graph: Graph, sources: Mapping[str, list[tuple[str, Any]]]) -> None:
    inputs_of: dict[str, set[str]] = {}
    for spec in graph.meta.get("inputs") or []:
        for c in spec.get("consumers") or []:
            inputs_of.setdefault(c, set()).add(str(spec.get("name")))
    for n, srcs in sources.items():
        wired = {v[0] for kind, v in srcs if kind == "node"}
        edges = set(graph.nx.predecessors(n))
        if wired != edges:
            extra, lack = sorted(wired - edges), sorted(edges - wired)
            raise ExecutionError(
                f"node {n!r}: the model feeds it from {sorted(wired)}, the graph's edges from "
                f"{sorted(edges)} (extra {extra}, missing {lack}): graph and model disagree"
            )
        fed = {v for kind, v in srcs if kind == "input"}
        if fed != inputs_of.get(n, set()):
            raise ExecutionError(
                f"node {n!r}: the model feeds it graph input(s) {sorted(fed)}, the graph's "
                f"meta['inputs'] say {sorted(inputs_of.get(n, set()))}"
            )


# -------------------------------------------------------------------------- calls
class TorchCall:
    """One node as a torch call: ``fn(*args)`` with the resident constants in place.

    ``slots``: ``(slot, producer index, output index)`` of the activations.
    """

    __slots__ = ("fn", "tmpl", "slots", "slices")

    def __init__(self, fn: Any, tmpl: list[Any], slots: list[tuple[int, int, int]],
                 slices: dict[int, tuple[int, int, int]] | None = None) -> None:
        self.fn, self.tmpl, self.slots, self.slices = fn, tmpl, slots, slices or None

    def __call__(self, args: list[Any], request: int = 0) -> tuple[Any, ...]:
        if self.slices is not None:
            for slot, (ax, start, length) in self.slices.items():
                args[slot] = args[slot].narrow(ax, start, length).contiguous()
        out = self.fn(*args)
        return out if type(out) is tuple else (out,)


class TvmCall:
    """One node as a TVM kernel: a PrimFunc called on preallocated outputs (one set
    per request), else the kernel's ``run_with``."""

    __slots__ = ("kernel", "fn", "tmpl", "slots", "slices", "n_in", "outs", "device")

    def __init__(self, kernel: Any, tmpl: list[Any], slots: list[tuple[int, int, int]], device: Any) -> None:
        self.kernel, self.tmpl, self.slots, self.slices = kernel, tmpl, slots, None
        self.n_in = len(tmpl)
        self.device = device
        self.fn = kernel.fn if getattr(kernel, "kind", "") == "primfunc" else None
        self.outs: list[list[Any]] = [list(kernel.outputs)] if self.fn is not None else []

    def outputs_for(self, request: int) -> list[Any]:
        """The preallocated outputs of request ``request`` (allocated on first use)."""
        import tvm

        while len(self.outs) <= request:
            self.outs.append([tvm.runtime.empty(o.shape, o.dtype, self.device) for o in self.outs[0]])
        return self.outs[request]

    def __call__(self, args: list[Any], request: int = 0) -> tuple[Any, ...]:
        if self.fn is None:
            return tuple(self.kernel.run_with(args))
        outs = self.outs[request] if request < len(self.outs) else self.outputs_for(request)
        self.fn(*args, *outs)
        return tuple(outs)


def build_calls(
    graph: Graph,
    wiring: Wiring,
    backend: Backend,
    device: DeviceSpec,
    nodes: Sequence[str],
    index: Mapping[str, int],
    *,
    seed: int = 0,
) -> dict[str, Any]:
    """Prepare ``nodes`` on ``device`` with ``backend``: node -> call.

    Constants are materialised on the device once each (shared by every node that
    reads them); activation slots are filled at run time from the producers'
    outputs (``index``: node or graph-input name -> producer index).
    """
    consts = _materialise(wiring, backend, device, nodes)
    calls: dict[str, Any] = {}
    for n in nodes:
        srcs = wiring.sources[n]
        values = {i: consts[key] for i, (kind, key) in enumerate(srcs) if kind == "const"}
        slots = []
        for i, (kind, val) in enumerate(srcs):
            if kind == "node":
                slots.append((i, index[val[0]], int(val[1])))
            elif kind == "input":
                slots.append((i, index[val], 0))
        kernel = backend.prepare(graph, n, device, values=values, seed=seed)
        calls[n] = _call(kernel, slots, wiring.slices.get(n), device)
    return calls


def _materialise(wiring: Wiring, backend: Backend, device: DeviceSpec, nodes: Sequence[str]) -> dict[int, Any]:
    keys = {key for n in nodes for kind, key in wiring.sources[n] if kind == "const"}
    out: dict[int, Any] = {}
    if backend.name == "torch":
        import torch

        tdev = torch.device(device.torch_device)
        for key in keys:
            out[key] = torch.from_numpy(wiring.consts[key]).to(tdev)
    else:
        import tvm

        tdev = tvm.cuda(device.index) if device.kind == "gpu" else tvm.cpu(0)
        for key in keys:
            out[key] = tvm.runtime.tensor(wiring.consts[key], tdev)
    return out


def _call(kernel: Any, slots: list[tuple[int, int, int]], slices: dict | None, device: DeviceSpec) -> Any:
    if getattr(kernel, "backend", "") == "torch":
        tmpl = list(kernel.inputs)
        for i, _, _ in slots:
            tmpl[i] = None  # the random placeholder is not kept
        return TorchCall(kernel.fn, tmpl, slots, slices)
    if slices:
        raise BackendError(
            f"node {kernel.node!r} (op {kernel.op!r}) is a part of a tensor-split operator: the "
            "tvm backend runs the model's own kernels only; use the torch backend"
        )
    import tvm

    tmpl = list(kernel.inputs)
    for i, _, _ in slots:
        tmpl[i] = None
    return TvmCall(kernel, tmpl, slots, tvm.cuda(device.index) if device.kind == "gpu" else tvm.cpu(0))


def plan_devices(plan: Plan, platform: Platform) -> list[str]:
    """Platform devices a plan may run ops on (all of them for a dynamic policy)."""
    if plan.policy is not None:
        return list(platform.device_names)
    used = set(plan.placement.values())
    return [d for d in platform.device_names if d in used]
