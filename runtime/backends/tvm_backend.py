"""The ``tvm`` backend: each node's PrimFunc compiled with TVM for the device.

* ``op`` granularity: the node's Relax operator call is rebuilt alone in a tiny
  module (its tensor arguments, weights included, become parameters) and legalized;
  a single resulting PrimFunc is compiled and called with preallocated outputs,
  anything else (an op that legalizes into several kernels) runs through Relax's VM.
* ``fused`` granularity: the fused PrimFunc that TVM's fusion passes (the ones the
  importer runs) produced for the node.
* Reshape-like nodes (``reshape``, ``expand_dims``, ``squeeze``, ``flatten``, fused
  ``view`` kernels) are views at run time, as in TVM's own pipeline: no kernel.

Targets: ``llvm`` for the host CPU (``mcpu`` = this CPU), ``cuda`` (``arch`` from the
GPU) with TVM's default GPU schedules (dlight). TVM IR cannot be persisted, so the
Relax module is rebuilt from the zoo model the graph names (:func:`model_for`), or
given by the caller (:func:`import_module`, :meth:`TvmBackend.register`). Compiled
kernels are cached on disk (:class:`KernelCache`: ``$HETSIM_CACHE/tvm`` or
``~/.cache/hetsim/tvm``, one ``.so`` per kernel plus ``index.json``), keyed by the
kernel's TVMScript text, the target and the TVM version.

:class:`RelaxModel` (also used by the correctness tests and the executor) pairs a
graph with its Relax module: each node's call and where each of its inputs comes
from (a node output, a graph input, or a constant with its value).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hetsim.graphs.features import signature
from hetsim.graphs.graph import VIEW_OPS, Graph
from hetsim.runtime.backends.base import (
    BackendError,
    DeviceSpec,
    check_available,
    input_specs,
    merge_inputs,
    node_op,
    parse_device,
    random_array,
)

__all__ = ["KernelCache", "RelaxModel", "TvmBackend", "TvmKernel", "import_model", "import_module", "model_for"]

_SYMBOL = "hetsim_kernel"


def _first_line(e: BaseException) -> str:
    text = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), "")[:300]
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


# ------------------------------------------------------------------- Relax models
@dataclass
class RelaxModel:
    """A graph together with the Relax module it was walked from.

    Attributes
    ----------
    graph
        The graph (same node ids as :func:`graphs.zoo.load` gives).
    mod
        The walked module: the frontend's output (``op``) or the fused module.
    calls
        Node -> its Relax call (an operator call, or a ``call_tir`` when fused).
    sources
        Node -> per input slot ``("node", (src, output))``, ``("input", name)`` or
        ``("const", tvm constant)``.
    example_inputs
        Graph input name -> the example value the model was imported with.
    const_arrays
        ``id(constant)`` -> ``(constant, array)``: each constant converted once and
        shared by every wiring of the model (:func:`runtime.executor_setup.wire`),
        so that the executions of one model's plans hold its weights once.
    """

    graph: Graph
    mod: Any
    calls: dict[str, Any]
    sources: dict[str, list[tuple[str, Any]]]
    example_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    const_arrays: dict[int, tuple[Any, np.ndarray]] = field(default_factory=dict, repr=False, compare=False)

    def constants(self, node: str) -> dict[int, np.ndarray]:
        """Input index -> value of the node's constant inputs (weights, literals)."""
        return {i: v.value.numpy() if hasattr(v, "value") else v.numpy() if hasattr(v, "numpy") else np.asarray(v)
                for i, (kind, v) in enumerate(self.sources[node]) if kind == "const"}


def import_module(
    module: Any, example_inputs: Sequence[Any], *, granularity: str = "op", name: str = "model",
    exact: bool = True,
) -> RelaxModel:
    """Import a torch module (``torch.export`` + TVM's frontend) as a :class:`RelaxModel`.

    Parameters
    ----------
    module, example_inputs
        The model and its example inputs (their shapes become static shapes).
    granularity
        ``"op"`` or ``"fused"``.
    name
        Model name.
    exact
        Fused granularity only: fold constants with TVM's ``FoldConstant`` (real
        values, slower) instead of the importer's structure-only fold (same kernels,
        zero-valued folded constants: enough to time kernels, not to check results).
    """
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    from hetsim.graphs import relax_import

    try:
        ep = torch.export.export(module.eval(), tuple(example_inputs))
        mod = from_exported_program(ep)
    except Exception as e:  # torch / TVM raise many types
        raise BackendError(f"model {name!r}: export to Relax failed: {_first_line(e)}") from e
    graph = relax_import.from_relax(mod, granularity=granularity, name=name, source="torch")
    if granularity == "fused":
        walked, members = relax_import._fuse(mod, name, exact_fold=exact)
    else:
        walked, members = mod, None
    model = _align(graph, walked, members, name)
    names = [i["name"] for i in graph.meta.get("inputs", [])]
    params = [p.name for p in mod["main"].params]
    model.example_inputs = {
        p: np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)
        for p, x in zip(params, example_inputs)
        if p in names
    }
    return model


def import_model(
    name: str, *, batch: int = 1, granularity: str = "op", seed: int = 0, exact: bool = True, **kw: Any
) -> RelaxModel:
    """A zoo model (built as :func:`graphs.zoo.build` does) as a :class:`RelaxModel`;
    its graph equals ``graphs.zoo.load(name, batch=..., granularity=..., seed=..., **kw)``."""
    from hetsim.graphs import zoo

    module, inputs = zoo.build(name, batch=batch, seed=seed, **kw)
    model = import_module(module, inputs, granularity=granularity, name=name, exact=exact)
    if name in zoo.RECURRENT:
        model.graph = zoo.tag_steps(model.graph)
    model.graph.meta.update(model=name, zoo_kwargs=dict(kw), zoo_seed=seed)
    return model


def model_for(graph: Graph, *, exact: bool = False) -> RelaxModel:
    """Rebuild the Relax module of a zoo graph (from ``meta["model"]``, ``batch``,
    ``zoo_kwargs``, ``zoo_seed``, ``granularity``) and check it matches ``graph``."""
    meta = graph.meta
    model_name = meta.get("model")
    if not model_name:
        raise BackendError(
            f"graph {graph.name!r} names no zoo model (meta['model']); the tvm backend needs its "
            "Relax module: TvmBackend().register(graph, import_module(module, inputs))"
        )
    model = import_model(
        str(model_name), batch=int(meta.get("batch") or 1), granularity=str(meta.get("granularity", "op")),
        seed=int(meta.get("zoo_seed", 0)), exact=exact, **dict(meta.get("zoo_kwargs") or {}),
    )
    _check_same(graph, model.graph)
    model.graph = graph
    return model


def _check_same(graph: Graph, rebuilt: Graph) -> None:
    if list(graph) != list(rebuilt):
        raise BackendError(
            f"graph {graph.name!r} differs from its model rebuilt now ({len(graph)} vs "
            f"{len(rebuilt)} nodes, or other node ids): it was imported by another hetsim/TVM "
            "version; re-import it (clear the zoo cache)"
        )
    for n in graph:
        a, b = graph.nodes[n], rebuilt.nodes[n]
        if a["op"] != b["op"] or a["inputs"] != b["inputs"] or a["outputs"] != b["outputs"]:
            raise BackendError(f"graph {graph.name!r}: node {n!r} differs from the rebuilt model's")


def _align(graph: Graph, walked: Any, members: Any, name: str) -> RelaxModel:
    """Walk ``walked`` again and pair its live records with the graph's nodes, in order
    (the order :func:`graphs.relax_import.from_relax` gives them)."""
    from hetsim.graphs import relax_ops

    class Walker(relax_ops.RelaxWalker):
        """Also remembers the Relax call behind each record."""

        rec_calls: dict[int, Any] = {}

        def call(self, call: Any, var: str) -> Any:
            n = len(self.recs)
            out = super().call(call, var)
            if len(self.recs) > n:
                self.rec_calls[self.recs[-1].index] = call
            return out

    walker = Walker(walked, model=name, members=members)
    walker.rec_calls = {}
    outputs = walker.walk()
    live: set[int] = set()
    stack = [r.key for r in outputs if r.kind == "node"]
    while stack:
        i = stack.pop()
        if i not in live:
            live.add(i)
            stack.extend(r.key for r in walker.recs[i].inputs if r.kind == "node")
    recs = [r for r in walker.recs if r.index in live]
    nodes = list(graph)
    if len(recs) != len(nodes):
        raise BackendError(f"model {name!r}: {len(recs)} kernels in the module, {len(nodes)} graph nodes")
    func = walked["main"]
    attrs = func.attrs or {}
    n_in = int(attrs["num_input"]) if "num_input" in attrs else len(func.params)
    bound = dict(zip(func.params[n_in:], attrs["params"])) if "params" in attrs else {}
    ids = {rec.index: n for rec, n in zip(recs, nodes)}
    calls: dict[str, Any] = {}
    sources: dict[str, list[tuple[str, Any]]] = {}
    for rec, n in zip(recs, nodes):
        d = graph.nodes[n]
        if d["op"] != rec.op or [r.spec for r in rec.inputs] != d["inputs"]:
            raise BackendError(f"model {name!r}: node {n!r} does not match the module's binding {rec.var!r}")
        calls[n] = walker.rec_calls[rec.index]
        src: list[tuple[str, Any]] = []
        for r in rec.inputs:
            if r.kind == "node":
                src.append(("node", (ids[r.key], r.output)))
            elif r.kind == "input":
                src.append(("input", r.key))
            else:
                kind, obj = r.key
                src.append(("const", obj if kind == "const" else bound[obj]))
        sources[n] = src
    return RelaxModel(graph, walked, calls, sources)


# ------------------------------------------------------------------ kernel building
def _single_op_module(call: Any) -> Any:
    """The Relax call alone in a module whose parameters are its tensor arguments."""
    from tvm import relax

    params: list[Any] = []

    def fresh(arg: Any) -> Any:
        if isinstance(arg, relax.Tuple):
            return relax.Tuple([fresh(a) for a in arg.fields])
        if isinstance(arg.ty, relax.TensorType | relax.TupleType):
            v = relax.Var(f"arg{len(params)}", arg.ty)
            params.append(v)
            return v
        return arg

    new = relax.Call(call.op, [fresh(a) for a in call.args], call.attrs, call.ty_args)
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(new)
        bb.emit_func_output(out)
    return bb.get()


def _plan(model: RelaxModel, node: str) -> tuple[str, Any]:
    """``("view", None)``, ``("primfunc", PrimFunc)`` or ``("vm", IRModule)``."""
    import tvm
    from tvm import relax

    data = model.graph.nodes[node]
    call = model.calls[node]
    if data["op"] == "fused":
        if data["attrs"].get("view"):
            return "view", None
        return "primfunc", model.mod[call.args[0]]
    if data["op"] in VIEW_OPS:
        return "view", None
    tiny = _single_op_module(call)
    leg = relax.transform.LegalizeOps()(tiny)
    main = leg["main"]
    binds = [b for block in main.body.blocks for b in block.bindings]
    if len(binds) == 1:
        v = binds[0].value
        if (
            isinstance(v, relax.Call)
            and isinstance(v.op, tvm.ir.Op)
            and v.op.name == "relax.call_tir"
            and len(v.args) == 2
            and list(v.args[1].fields) == list(main.params)
            and main.body.body.same_as(binds[0].var)
        ):
            return "primfunc", leg[v.args[0]]
    return "vm", tiny


def _target(device: DeviceSpec) -> dict[str, Any]:
    if device.kind == "gpu":
        import torch

        major, minor = torch.cuda.get_device_capability(device.index)
        return {"kind": "cuda", "arch": f"sm_{major}{minor}"}
    from tvm.target import codegen

    return {"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu())}


def _build(kind: str, obj: Any, target: dict[str, Any]) -> Any:
    import tvm

    tgt = tvm.target.Target(target)
    if kind == "vm":
        return tvm.compile(obj, target=tgt)
    mod = tvm.IRModule({_SYMBOL: obj.with_attr("global_symbol", _SYMBOL)})
    if target["kind"] == "cuda":
        from tvm.s_tir import dlight as dl

        with tgt:
            mod = dl.ApplyDefaultSchedule(
                dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                dl.gpu.GeneralReduction(), dl.gpu.Fallback(),
            )(mod)
    return tvm.compile(mod, target=tgt)


class KernelCache:
    """Compiled kernels on disk (``KEY.so`` + ``index.json``) and a bounded in-memory LRU.

    Parameters
    ----------
    directory
        Cache folder; default ``$HETSIM_CACHE/tvm`` or ``~/.cache/hetsim/tvm``.
        ``False`` disables the disk cache.
    max_loaded
        Loaded modules kept in memory.
    """

    def __init__(self, directory: str | os.PathLike[str] | bool | None = None, *, max_loaded: int = 256) -> None:
        if directory is None or directory is True:
            env = os.environ.get("HETSIM_CACHE")
            directory = Path(env) / "tvm" if env else Path.home() / ".cache" / "hetsim" / "tvm"
        self.directory = None if directory is False else Path(directory)
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, Any] = OrderedDict()
        self.builds = 0

    @staticmethod
    def key(text: str, target: Mapping[str, Any]) -> str:
        import tvm

        h = hashlib.sha256(f"{tvm.__version__}\n{json.dumps(dict(target), sort_keys=True)}\n{text}".encode())
        return h.hexdigest()[:24]

    def get(self, key: str, build: Callable[[], Any], info: Mapping[str, Any]) -> Any:
        """The runtime module of ``key``: from memory, from disk, or built and stored."""
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        import tvm

        lib = None
        path = self.directory / f"{key}.so" if self.directory else None
        if path is not None and path.is_file():
            try:
                lib = tvm.runtime.load_module(str(path))
            except Exception:  # a corrupt or foreign file: rebuild it
                lib = None
        if lib is None:
            lib = build()
            self.builds += 1
            if path is not None:
                lib = self._store(path, lib, key, info)
        self._loaded[key] = lib
        while len(self._loaded) > self.max_loaded:
            self._loaded.popitem(last=False)
        return lib

    def _store(self, path: Path, ex: Any, key: str, info: Mapping[str, Any]) -> Any:
        import tvm

        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".so")
        os.close(fd)
        try:
            ex.export_library(tmp)
            os.replace(tmp, path)
        except Exception:  # no C compiler, read-only folder...: keep it in memory only
            Path(tmp).unlink(missing_ok=True)
            return ex
        index = path.parent / "index.json"  # what each file holds, for people
        try:
            entries = json.loads(index.read_text()) if index.is_file() else {}
        except (OSError, json.JSONDecodeError):
            entries = {}
        entries[key] = {**info, "file": path.name, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        fd, tmpi = tempfile.mkstemp(dir=path.parent, prefix=".index.", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(entries, fh, indent=1)
        os.replace(tmpi, index)
        return tvm.runtime.load_module(str(path))


# ------------------------------------------------------------------------- kernels
class TvmKernel:
    """One node as a compiled TVM kernel on resident inputs (see
    :class:`~runtime.backends.base.Kernel`). ``kind``: ``primfunc``, ``vm`` or ``view``."""

    backend = "tvm"

    def __init__(
        self, node: str, op: str, device: DeviceSpec, kind: str, fn: Any, inputs: list[Any],
        out_specs: list[dict[str, Any]], tvm_device: Any,
    ) -> None:
        self.node, self.op, self.device, self.kind, self.fn, self.inputs = node, op, device, kind, fn, inputs
        self._specs = [(tuple(int(d) for d in s["shape"]), s["dtype"]) for s in out_specs]
        self._dev = tvm_device
        self.outputs = self._alloc() if kind == "primfunc" else []  # reused by __call__
        self._args = [*inputs, *self.outputs]

    @property
    def tvm_device(self) -> Any:
        """The TVM device (``tvm.cpu(0)``, ``tvm.cuda(K)``) the kernel runs on."""
        return self._dev

    def _alloc(self) -> list[Any]:
        import tvm

        return [tvm.runtime.empty(shape, dtype, self._dev) for shape, dtype in self._specs]

    def __call__(self) -> Any:
        if self.kind == "primfunc":
            self.fn(*self._args)
            return self.outputs
        return self._run(self.inputs, None)

    def _run(self, inputs: list[Any], outs: list[Any] | None) -> list[Any]:
        if self.kind == "view":
            shape, dtype = self._specs[0]
            return [inputs[0]._create_view(shape, dtype)]
        if self.kind == "vm":
            out = self.fn(*inputs)
            return list(out) if not hasattr(out, "shape") else [out]
        outs = self._alloc() if outs is None else outs
        self.fn(*inputs, *outs)
        return outs

    def run_with(self, inputs: Sequence[Any] | Mapping[int, Any]) -> list[Any]:
        args = [_as_tvm(a, self._dev) for a in merge_inputs(self.node, self.inputs, inputs)]
        return self._run(args, None)

    def __repr__(self) -> str:
        return f"TvmKernel({self.node!r}, op={self.op!r}, kind={self.kind!r}, device={self.device.name!r})"


def _as_tvm(x: Any, dev: Any) -> Any:
    """``x`` (TVM tensor, torch tensor, numpy array) as a TVM tensor on ``dev``; torch
    tensors are shared through DLPack (copied first when misaligned or elsewhere)."""
    import tvm

    if isinstance(x, tvm.runtime.Tensor):
        return x if x.device == dev else tvm.runtime.tensor(x.numpy(), dev)
    if type(x).__module__.startswith("torch"):
        import torch

        t = x.detach()
        on_gpu = dev.device_type == tvm.cuda(0).device_type
        if t.is_cuda != on_gpu:
            t = t.to(f"cuda:{dev.device_id}" if on_gpu else "cpu")
        if not t.is_contiguous() or t.data_ptr() % 64:
            t = t.clone(memory_format=torch.contiguous_format)
        return tvm.runtime.from_dlpack(t)
    arr = np.asarray(x)
    return tvm.runtime.tensor(arr if arr.flags.c_contiguous else arr.copy(), dev)


class TvmBackend:
    """Compiles graph nodes with TVM (see the module docstring).

    Parameters
    ----------
    cache
        Kernel cache folder (default per :class:`KernelCache`), or ``False``.
    max_models
        Rebuilt Relax models kept in memory (each holds a model's weights).
    """

    name = "tvm"

    def __init__(self, *, cache: str | os.PathLike[str] | bool | None = None, max_models: int = 2) -> None:
        self.cache = KernelCache(cache)
        self.max_models = max_models
        self._models: OrderedDict[int, tuple[Graph, RelaxModel | BackendError]] = OrderedDict()
        self._checked: set[str] = set()

    def register(self, graph: Graph, model: RelaxModel) -> None:
        """Use ``model`` (e.g. from :func:`import_module`) for ``graph``'s kernels."""
        _check_same(graph, model.graph)
        self._remember(graph, model)

    def _remember(self, graph: Graph, model: RelaxModel | BackendError) -> None:
        self._models[id(graph)] = (graph, model)
        self._models.move_to_end(id(graph))
        while len(self._models) > self.max_models:
            self._models.popitem(last=False)

    def model(self, graph: Graph) -> RelaxModel:
        """The Relax model of ``graph`` (registered, or rebuilt from the zoo once)."""
        hit = self._models.get(id(graph))
        if hit is not None and hit[0] is graph:
            self._models.move_to_end(id(graph))
            if isinstance(hit[1], BackendError):
                raise hit[1]  # rebuilding failed before: do not try again for every node
            return hit[1]
        try:
            model = model_for(graph)
        except BackendError as e:
            self._remember(graph, e)
            raise
        self._remember(graph, model)
        return model

    def _device(self, device: str | DeviceSpec) -> DeviceSpec:
        dev = parse_device(device)
        if dev.name not in self._checked:
            check_available(dev)
            self._checked.add(dev.name)
        return dev

    def prepare(
        self, graph: Graph, node: str, device: str | DeviceSpec, *,
        values: Mapping[int, Any] | None = None, seed: int = 0,
    ) -> TvmKernel:
        """Compile (or load from the cache) ``node``'s kernel for ``device``, materialise
        its inputs there and run it once, checking the output shapes.

        Raises
        ------
        BackendError
            When the graph's Relax module cannot be had, or TVM fails to legalize,
            compile or run the node (naming the op; the torch backend is suggested).
        """
        import tvm

        dev = self._device(device)
        if node not in graph:
            raise BackendError(f"graph {graph.name!r} has no node {node!r}")
        data = graph.nodes[node]
        op = node_op(graph, node)
        model = self.model(graph)
        tdev = tvm.cuda(dev.index) if dev.kind == "gpu" else tvm.cpu(0)
        try:
            kind, obj = _plan(model, node)
            fn = None
            if kind != "view":
                target = _target(dev)
                text = obj.script()
                info = {"signature": signature(data), "op": op, "kind": kind, "target": target}
                lib = self.cache.get(self.cache.key(text, target), lambda: _build(kind, obj, target), info)
                if kind == "vm":
                    fn = tvm.relax.VirtualMachine(lib, tdev)["main"]
                else:
                    fn = lib[_SYMBOL]
        except BackendError:
            raise
        except Exception as e:  # TVM errors of all kinds
            raise BackendError(
                f"op {op!r} (node {node!r}): TVM could not build it: {_first_line(e)}; try the torch backend"
            ) from e
        rng = np.random.default_rng(seed)
        values = values or {}
        inputs = []
        for i, spec in enumerate(input_specs(graph, node)):
            value = values[i] if i in values else random_array(spec, rng)
            inputs.append(_as_tvm(value, tdev))
        kernel = TvmKernel(node, op, dev, kind, fn, inputs, data["outputs"], tdev)
        try:
            outs = kernel()
        except Exception as e:  # TVM runtime errors
            raise BackendError(f"op {op!r} (node {node!r}): TVM kernel failed: {_first_line(e)}") from e
        got = [(list(o.shape), str(o.dtype)) for o in outs]
        want = [(list(s["shape"]), s["dtype"]) for s in data["outputs"]]
        if got != want:
            raise BackendError(f"op {op!r} (node {node!r}): TVM kernel gave outputs {got}, the graph says {want}")
        return kernel

    def configure(self, device: str | DeviceSpec) -> None:
        """Size TVM's CPU thread pool for a CPU device (legalized, unscheduled CPU
        kernels are serial loops: threads only help scheduled ones)."""
        dev = self._device(device)
        if dev.kind == "cpu":
            os.environ.setdefault("TVM_NUM_THREADS", str(dev.cpu_threads()))
            import tvm

            tvm.get_global_func("runtime.config_threadpool")(1, dev.cpu_threads())

    def synchronize(self, device: str | DeviceSpec) -> None:
        """Wait for the device's queued kernels (TVM's and torch's streams)."""
        dev = parse_device(device)
        if dev.kind == "gpu":
            import torch
            import tvm

            tvm.cuda(dev.index).sync()
            torch.cuda.synchronize(dev.torch_device)
