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
GPU) with TVM's default GPU schedules (dlight). The Relax module behind a graph comes
from :func:`model_for` (the graph's in-memory program, its zoo model or its model
spec), or from the caller (:func:`import_module`, :meth:`TvmBackend.register`). Compiled
kernels are cached on disk (:class:`KernelCache`: ``$HETSIM_CACHE/tvm`` or
``~/.cache/hetsim/tvm``, one ``.so`` per kernel plus ``index.json``), keyed by the
kernel's TVMScript text, the target and the TVM version.

:class:`RelaxModel` (:mod:`runtime.backends.relax_model`; also used by the executor)
pairs a graph with its Relax module: each node's call and where each of its inputs
comes from (a node output, a graph input, or a constant with its value).
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tempfile
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hetsim.graphs.features import signature
from hetsim.graphs.graph import VIEW_OPS, Graph, atomic_write, first_line
from hetsim.graphs.private_cache import read_own_file
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
from hetsim.runtime.backends.relax_model import (  # the models it compiles, exported here too
    RelaxModel,
    check_same,
    import_model,
    import_module,
    model_for,
    relax_model,
)

# TVM's thread pool pins the thread that first runs a parallel kernel (and its own
# workers) to cores unless told not to. The executor pins its CPU workers itself, and
# a pinned caller would leave every later execution of the process seeing one core
# (runtime.executor.view.pin_cores: nothing pinned). Set before any kernel runs; TVM
# reads it when its pool starts.
os.environ.setdefault("TVM_BIND_THREADS", "0")

__all__ = [
    "KernelCache", "KernelCacheWarning", "RelaxModel", "TvmBackend", "TvmKernel", "hash_path", "keyed_digest",
    "import_model", "import_module", "load_intact", "model_for", "relax_model",
]

_SYMBOL = "hetsim_kernel"



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
    """Compiled kernels on disk (``KEY.so``, its ``KEY.so.sha256`` and ``index.json``) and a
    bounded in-memory LRU.

    A cached kernel is a shared library that loading runs: whoever can write the cache
    folder can run code in the process that loads from it. So the folder is per user
    (``$HETSIM_CACHE/tvm-UID``, ``~/.cache/hetsim/tvm``), created private (mode 0700) and
    used only while it is this user's and no one else may write it, checked again at
    every load. Each library is written with a keyed hash of its bytes beside it
    (HMAC-SHA256 under ``.key``, a secret of this user's in the folder, mode 0600): a
    writer without this user's rights cannot compute it. A library is read once, through
    a descriptor that follows no link, checked against its hash, and loaded from a
    private copy of exactly those bytes, so that swapping the file after the check
    loads nothing. Another file is rebuilt, never loaded. A folder that fails these
    checks turns the disk cache off with a :class:`KernelCacheWarning`.

    Parameters
    ----------
    directory
        Cache folder; default ``$HETSIM_CACHE/tvm-UID`` or ``~/.cache/hetsim/tvm``.
        ``False`` disables the disk cache.
    max_loaded
        Loaded modules kept in memory.
    """

    def __init__(self, directory: str | os.PathLike[str] | bool | None = None, *, max_loaded: int = 256) -> None:
        if directory is None or directory is True:
            env = os.environ.get("HETSIM_CACHE")
            directory = Path(env) / f"tvm-{os.getuid()}" if env else Path.home() / ".cache" / "hetsim" / "tvm"
        self.directory = None if directory is False else Path(directory)
        self.max_loaded = max_loaded
        self._loaded: OrderedDict[str, Any] = OrderedDict()
        self._checked = False
        self.builds = 0

    @staticmethod
    def key(text: str, target: Mapping[str, Any]) -> str:
        import tvm

        h = hashlib.sha256(f"{tvm.__version__}\n{json.dumps(dict(target), sort_keys=True)}\n{text}".encode())
        return h.hexdigest()[:24]

    def folder(self) -> Path | None:
        """The cache folder, created private (0700) on first use and checked at every call;
        None when the disk cache is off, or the folder is not this user's or others may
        access it (a warning says so, once)."""
        if self.directory is None:
            return None
        problem = None
        try:
            if not self._checked:
                self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.directory.lstat()
            if not stat.S_ISDIR(st.st_mode):
                problem = "is not a folder"
            elif st.st_uid != os.getuid():
                problem = f"belongs to user id {st.st_uid}, not to this user ({os.getuid()})"
            elif st.st_mode & 0o077:
                if self._checked:  # opened up since it was made private: not ours to trust
                    problem = f"was opened to other users (mode {stat.S_IMODE(st.st_mode):04o})"
                else:
                    os.chmod(self.directory, 0o700)
        except OSError as e:
            problem = f"cannot be made private ({e.strerror or e})"
        self._checked = True
        if problem is not None:
            warnings.warn(f"kernel cache {self.directory} {problem}: compiled kernels are kept in memory only",
                          KernelCacheWarning, stacklevel=3)
            self.directory = None
        return self.directory

    def secret(self, folder: Path) -> bytes:
        """This user's key of the keyed hashes in FOLDER (``.key``, created 0600 when missing)."""
        path = folder / ".key"
        if not path.exists():
            # written whole under a name of its own, then linked in: another process
            # sharing the folder reads either no key or a whole one, never a half-written one
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".key-")  # mode 0600
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(os.urandom(32))
                os.link(tmp, path)
            except FileExistsError:
                pass  # another process linked its key first: that one is used
            finally:
                os.unlink(tmp)
        key = read_own_file(path)
        if not key or len(key) < 32:
            raise OSError(f"kernel cache key {path} is not a private file of this user's")
        return key

    def get(self, key: str, build: Callable[[], Any], info: Mapping[str, Any]) -> Any:
        """The runtime module of ``key``: from memory, from disk (when its recorded hash
        matches), or built and stored."""
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]

        lib = None
        folder = self.folder()
        path = folder / f"{key}.so" if folder is not None else None
        if path is not None:
            try:
                lib = load_intact(path, self.secret(path.parent))
            except Exception:  # a library this TVM cannot load, a key it cannot read: rebuild it
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

        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{key}.", suffix=".so")
        os.close(fd)
        try:
            ex.export_library(tmp)
            digest = keyed_digest(Path(tmp).read_bytes(), self.secret(path.parent))
            atomic_write(hash_path(path), lambda fh: fh.write(digest + "\n"))
            os.replace(tmp, path)
        except Exception:  # no C compiler, read-only folder...: keep it in memory only
            Path(tmp).unlink(missing_ok=True)
            return ex
        index = path.parent / "index.json"  # what each file holds, for people
        try:
            entries = json.loads(index.read_text()) if index.is_file() else {}
        except (OSError, json.JSONDecodeError):
            entries = {}
        entries[key] = {**info, "file": path.name, "hmac_sha256": digest,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}  # fmt: skip
        atomic_write(index, lambda fh: json.dump(entries, fh, indent=1))
        return tvm.runtime.load_module(str(path))


class KernelCacheWarning(UserWarning):
    """The kernel cache folder is not private to this user: its disk cache is off."""


def keyed_digest(data: bytes, key: bytes) -> str:
    """HMAC-SHA256 of DATA under KEY, hex: what a cached library's ``.sha256`` file records."""
    import hmac

    return hmac.new(key, data, hashlib.sha256).hexdigest()


def hash_path(library: Path) -> Path:
    """Where the keyed hash of a cached library is recorded: ``KEY.so.sha256`` beside it."""
    return library.with_name(library.name + ".sha256")


def load_intact(library: Path, key: bytes) -> Any:
    """The runtime module of a cached library whose bytes have the keyed hash recorded
    when it was written, else None. The bytes are read once, through a descriptor that
    follows no link and is this user's alone to write, and loaded from a private copy of
    them: the file checked is the file loaded."""
    import hmac

    import tvm

    data, recorded = read_own_file(library), read_own_file(hash_path(library))
    if data is None or recorded is None:
        return None
    if not hmac.compare_digest(keyed_digest(data, key), recorded.decode("ascii", "replace").strip()):
        return None
    fd, copy = tempfile.mkstemp(dir=library.parent, prefix=".load-", suffix=".so")  # mode 0600
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return tvm.runtime.load_module(copy)
    finally:
        Path(copy).unlink(missing_ok=True)


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
        check_same(graph, model.graph)
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
                f"op {op!r} (node {node!r}): TVM could not build it: {first_line(e)}; try the torch backend"
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
            raise BackendError(f"op {op!r} (node {node!r}): TVM kernel failed: {first_line(e)}") from e
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
