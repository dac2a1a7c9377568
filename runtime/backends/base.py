"""The kernel-backend contract: devices, kernels, backends, errors, input sampling.

A *backend* turns one node of a :class:`~graphs.graph.Graph` into a *kernel* on one
device: :meth:`Backend.prepare` materialises the node's inputs (weights included) on
the device once, and the kernel then runs the operator on them, as often as asked.
This module imports neither torch nor TVM.

Device specs
------------
``cpu``
    the host CPU with all the threads this process may use;
``cpu@N``
    the host CPU limited to ``N`` threads (``torch.set_num_threads``, TVM's pool);
``cuda`` / ``cuda:K``
    CUDA GPU ``K`` (default 0).

The spec string is also the device's name in profiles (``cpu``, ``cpu@1``, ``cuda:0``).
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hetsim.graphs.graph import Graph

__all__ = [
    "Backend",
    "BackendError",
    "DeviceSpec",
    "InputSpec",
    "Kernel",
    "available_cores",
    "check_available",
    "cpu_model",
    "input_specs",
    "parse_device",
    "parse_devices",
    "random_array",
    "to_numpy",
]

#: op kinds whose integer input ``i`` indexes axis ``attrs["axis"]`` of input 0
_INDEX_INPUTS: dict[str, int] = {"take": 1}


class BackendError(RuntimeError):
    """A backend cannot run a node (unmapped op, unsupported attrs, missing device...).

    The message names the op (and node) and, where it helps, suggests the other backend.
    """


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@dataclass(frozen=True)
class DeviceSpec:
    """One device to run kernels on.

    Attributes
    ----------
    name
        Profile device name: the normalised spec (``cpu``, ``cpu@1``, ``cuda:0``).
    kind
        ``"cpu"`` or ``"gpu"``.
    torch_device
        ``"cpu"`` or ``"cuda:K"``.
    index
        GPU index (0 for the CPU).
    threads
        CPU threads (``None``: every core of the affinity mask; always None for GPUs).
    """

    name: str
    kind: str
    torch_device: str
    index: int = 0
    threads: int | None = None

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"

    def cpu_threads(self) -> int:
        """Threads a CPU device runs with (the affinity mask's cores when unset)."""
        return self.threads if self.threads is not None else available_cores()


def parse_device(spec: str | DeviceSpec, *, threads: int | None = None) -> DeviceSpec:
    """Parse a device spec (see the module docstring).

    Parameters
    ----------
    spec
        ``cpu``, ``cpu@N``, ``cuda`` or ``cuda:K`` (a :class:`DeviceSpec` is returned as is).
    threads
        Thread count for a plain ``cpu`` spec (its name stays ``cpu``).

    Examples
    --------
    >>> parse_device("cpu@1")
    DeviceSpec(name='cpu@1', kind='cpu', torch_device='cpu', index=0, threads=1)
    >>> parse_device("cuda").name
    'cuda:0'
    """
    if isinstance(spec, DeviceSpec):
        return spec
    text = str(spec).strip().lower()
    if text == "cpu" or text.startswith("cpu@"):
        n = threads
        if text != "cpu":
            try:
                n = int(text[4:])
            except ValueError:
                n = 0
            if n < 1:
                raise BackendError(f"device {spec!r}: thread count must be an int >= 1 (e.g. cpu@1)")
        if n is not None and n < 1:
            raise BackendError(f"device {spec!r}: thread count must be >= 1, got {n}")
        name = "cpu" if text == "cpu" else f"cpu@{n}"
        return DeviceSpec(name=name, kind="cpu", torch_device="cpu", threads=n)
    if text == "cuda" or text.startswith("cuda:"):
        idx_text = text[5:] or "0"
        if not idx_text.isdigit():
            raise BackendError(f"device {spec!r}: expected cuda or cuda:K with K an integer")
        k = int(idx_text)
        return DeviceSpec(name=f"cuda:{k}", kind="gpu", torch_device=f"cuda:{k}", index=k)
    raise BackendError(f"unknown device {spec!r}; use cpu, cpu@N (N threads), cuda or cuda:K")


def parse_devices(specs: str | Sequence[str | DeviceSpec], *, threads: int | None = None) -> list[DeviceSpec]:
    """Parse ``"cpu,cuda:0"`` (or a list of specs); duplicates are an error."""
    items = [s for s in specs.split(",") if s.strip()] if isinstance(specs, str) else list(specs)
    if not items:
        raise BackendError("no device given; use e.g. --devices cpu or --devices cpu,cuda:0")
    out = [parse_device(s, threads=threads) for s in items]
    names = [d.name for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise BackendError(f"device(s) {dup} given twice")
    return out


def check_available(device: DeviceSpec) -> None:
    """Raise :class:`BackendError` unless ``device`` exists on this machine."""
    if device.kind == "cpu":
        cores = available_cores()
        if device.threads is not None and device.threads > cores:
            raise BackendError(
                f"device {device.name!r}: {device.threads} threads asked for, but this process "
                f"may use {cores} CPU core(s)"
            )
        return
    import torch

    if not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise BackendError(
            f"device {device.name!r} asked for, but torch sees no CUDA GPU on this machine "
            f"(torch {torch.__version__} is {build}); profile the GPU on a machine with one, "
            "or use --devices cpu"
        )
    count = torch.cuda.device_count()
    if device.index >= count:
        raise BackendError(f"device {device.name!r}: this machine has {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})")


@dataclass(frozen=True)
class InputSpec:
    """How to sample one input of a node: shape, dtype and, for integers, ``[0, high)``."""

    shape: tuple[int, ...]
    dtype: str
    high: int = 2

    @property
    def is_float(self) -> bool:
        return self.dtype.startswith(("float", "bfloat"))


def input_specs(graph: Graph, node: str) -> list[InputSpec]:
    """Sampling specs of a node's inputs: floats in [0.1, 1) (positive: valid variances,
    divisors and square roots), integer indices within the axis they index, other
    integers in [0, 2) (0 in fused kernels that gather, whose indices are not told apart)."""
    data = graph.nodes[node]
    ins = data["inputs"]
    # a fused kernel that gathers: any integer may be an index, and only 0 is surely in bounds
    high = 1 if data["op"] == "fused" and "take" in data.get("ops", []) else 2
    specs = [InputSpec(tuple(t["shape"]), t["dtype"], high) for t in ins]
    idx = _INDEX_INPUTS.get(data["op"])
    if idx is not None and len(ins) > idx and ins and ins[0]["shape"]:
        shape = ins[0]["shape"]
        axis = int(data.get("attrs", {}).get("axis") or 0)
        axis = axis + len(shape) if axis < 0 else axis
        if 0 <= axis < len(shape):
            specs[idx] = InputSpec(specs[idx].shape, specs[idx].dtype, max(1, int(shape[axis])))
    return specs


def random_array(spec: InputSpec, rng: np.random.Generator) -> np.ndarray:
    """A numpy array following ``spec`` (see :func:`input_specs`)."""
    if spec.is_float:
        dtype = "float32" if spec.dtype == "bfloat16" else spec.dtype
        return (rng.random(spec.shape, dtype=np.float32) * 0.9 + 0.1).astype(dtype, copy=False)
    if spec.dtype == "bool":
        return rng.random(spec.shape) < 0.5
    return rng.integers(0, spec.high, size=spec.shape).astype(spec.dtype)


def to_numpy(x: Any) -> np.ndarray:
    """A backend tensor (torch, TVM) or array as a numpy array (copied to the host)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "detach"):  # torch.Tensor
        return x.detach().cpu().numpy()
    if hasattr(x, "numpy"):  # tvm.runtime.Tensor
        return x.numpy()
    return np.asarray(x)


@runtime_checkable
class Kernel(Protocol):
    """One node ready to run on one device, its inputs resident there.

    Attributes
    ----------
    node, op
        Graph node id and op kind (``fused:...`` for fused nodes).
    device
        Where it runs.
    backend
        Backend name.
    """

    node: str
    op: str
    device: DeviceSpec
    backend: str

    def __call__(self) -> Any:
        """Run once on the materialised inputs (asynchronous on GPUs: no synchronisation)."""
        ...

    def run_with(self, inputs: Sequence[Any] | Mapping[int, Any]) -> list[Any]:
        """Run once on other inputs and return the outputs (backend tensors, on the device).

        ``inputs``: every input in order, or ``{input index: tensor}`` replacing some of
        the materialised ones (e.g. the activations, keeping the resident weights).
        """
        ...


@runtime_checkable
class Backend(Protocol):
    """Turns graph nodes into kernels on devices."""

    name: str

    def prepare(
        self,
        graph: Graph,
        node: str,
        device: str | DeviceSpec,
        *,
        values: Mapping[int, Any] | None = None,
        seed: int = 0,
    ) -> Kernel:
        """Materialise ``node``'s inputs on ``device`` (``values`` for some input
        indices, e.g. real weights; random ones per :func:`input_specs` for the rest)
        and return its kernel. Raises :class:`BackendError` naming the op when it
        cannot run the node."""
        ...

    def configure(self, device: str | DeviceSpec) -> None:
        """Apply the device's settings (CPU thread count) before kernels run on it."""
        ...

    def synchronize(self, device: str | DeviceSpec) -> None:
        """Wait until every kernel queued on ``device`` has finished."""
        ...


def merge_inputs(
    node: str, current: Sequence[Any], inputs: Sequence[Any] | Mapping[int, Any]
) -> list[Any]:
    """``current`` with ``inputs`` applied (a full sequence, or index -> tensor)."""
    if isinstance(inputs, Mapping):
        out = list(current)
        for i, v in inputs.items():
            if not isinstance(i, int) or not 0 <= i < len(out):
                raise BackendError(f"node {node!r}: no input {i!r} (it has {len(out)})")
            out[i] = v
        return out
    inputs = list(inputs)
    if len(inputs) != len(current):
        raise BackendError(f"node {node!r}: {len(inputs)} inputs given, it takes {len(current)}")
    return inputs


def node_op(graph: Graph, node: str) -> str:
    """``op`` of a node, ``fused:a+b`` for fused nodes."""
    data = graph.nodes[node]
    if data["op"] == "fused":
        return "fused:" + "+".join(data.get("ops", []))
    return str(data["op"])
