"""The ``torch`` backend: each Relax operator runs as the equivalent torch function.

These are the vendor kernels a PyTorch deployment runs: oneDNN / MKL on the CPU,
cuBLAS / cuDNN on CUDA GPUs. The op table is :data:`TORCH_OPS`
(:data:`runtime.backends.torch_ops.OPS` and
:data:`runtime.backends.torch_ops_tensor.MORE_OPS`: every operator TVM's frontends
emit but those of :data:`~runtime.backends.torch_ops_tensor.TVM_ONLY`);
an op kind without an entry raises :class:`~runtime.backends.base.BackendError`
naming it. Graphs must be imported at ``op`` granularity (a fused TVM kernel has no
single torch equivalent: use the ``tvm`` backend for those).

Examples
--------
>>> from hetsim.graphs import Graph
>>> g = Graph()
>>> g.add_op("r", "relu", inputs=[([2, 3], "float32")], outputs=[([2, 3], "float32")])
>>> k = TorchBackend().prepare(g, "r", "cpu")
>>> import torch
>>> k.run_with([torch.tensor([[-1.0, 0.0, 2.0]] * 2)])[0][0].tolist()
[0.0, 0.0, 2.0]
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hetsim.graphs.graph import Graph
from hetsim.runtime.backends.base import (
    BackendError,
    DeviceSpec,
    InputSpec,
    check_available,
    input_specs,
    merge_inputs,
    node_op,
    parse_device,
)
from hetsim.runtime.backends.torch_ops import OPS, Unsupported, torch_dtype
from hetsim.runtime.backends.torch_ops_tensor import MORE_OPS
from hetsim.runtime.stream_timer import BusyWait

__all__ = ["TORCH_OPS", "CudaTimer", "TorchBackend", "TorchKernel", "as_torch", "evaluate_op", "supported_ops"]

#: Relax operator -> builder of its torch function
TORCH_OPS = {**OPS, **MORE_OPS}


def supported_ops() -> list[str]:
    """Relax operators the torch backend runs, sorted."""
    return sorted(TORCH_OPS)


def as_torch(x: Any, device: torch.device, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` (torch tensor, TVM tensor, numpy array or scalar) as a torch tensor on ``device``."""
    if isinstance(x, torch.Tensor):
        t = x
    elif isinstance(x, np.ndarray | np.generic | int | float | bool):
        arr = np.asarray(x)  # (np.ascontiguousarray would make 0-d arrays 1-d)
        t = torch.from_numpy(arr if arr.flags.c_contiguous and arr.flags.writeable else arr.copy())
    elif hasattr(x, "__dlpack__"):
        t = torch.from_dlpack(x)
    else:
        t = torch.as_tensor(x)
    if t.device != device or (dtype is not None and t.dtype != dtype):
        t = t.to(device=device, dtype=dtype or t.dtype)
    return t


class TorchKernel:
    """One node as a torch call on resident inputs (see :class:`~runtime.backends.base.Kernel`)."""

    backend = "torch"

    def __init__(
        self, node: str, op: str, device: DeviceSpec, fn: Any, inputs: list[torch.Tensor]
    ) -> None:
        self.node = node
        self.op = op
        self.device = device
        self.fn = fn
        self.inputs = inputs
        self._tdev = torch.device(device.torch_device)

    def __call__(self) -> Any:
        return self.fn(*self.inputs)

    def run_with(self, inputs: Sequence[Any] | Mapping[int, Any]) -> list[torch.Tensor]:
        args = merge_inputs(self.node, self.inputs, inputs)
        args = [a if isinstance(a, torch.Tensor) and a.device == self._tdev else as_torch(a, self._tdev) for a in args]
        return _as_list(self.fn(*args))

    def __repr__(self) -> str:
        return f"TorchKernel({self.node!r}, op={self.op!r}, device={self.device.name!r})"


def _as_list(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, tuple | list) else [out]


def _random(spec: InputSpec, device: torch.device, gen: torch.Generator) -> torch.Tensor:
    shape = spec.shape
    if spec.is_float:
        t = torch.rand(shape, generator=gen, device=device, dtype=torch.float32) * 0.9 + 0.1
        return t.to(torch_dtype(spec.dtype))
    if spec.dtype == "bool":
        return torch.rand(shape, generator=gen, device=device) < 0.5
    return torch.randint(0, spec.high, shape, generator=gen, device=device).to(torch_dtype(spec.dtype))


class TorchBackend:
    """Runs ``op``-granularity nodes with torch functions (see the module docstring)."""

    name = "torch"

    def __init__(self) -> None:
        self._checked: set[str] = set()

    def _device(self, device: str | DeviceSpec) -> DeviceSpec:
        dev = parse_device(device)
        if dev.name not in self._checked:
            check_available(dev)
            self._checked.add(dev.name)
        return dev

    def prepare(
        self,
        graph: Graph,
        node: str,
        device: str | DeviceSpec,
        *,
        values: Mapping[int, Any] | None = None,
        seed: int = 0,
    ) -> TorchKernel:
        """Materialise ``node``'s inputs on ``device`` and return its kernel.

        The kernel is run once here and its outputs checked against the node's
        output shapes and dtypes.

        Raises
        ------
        BackendError
            For a fused node, an op kind with no torch mapping, attributes the
            mapping does not support, or outputs that differ from the graph's.
        """
        dev = self._device(device)
        if node not in graph:
            raise BackendError(f"graph {graph.name!r} has no node {node!r}")
        data = graph.nodes[node]
        op = node_op(graph, node)
        if data["op"] == "fused":
            raise BackendError(
                f"node {node!r} is a fused TVM kernel ({op}): the torch backend runs single "
                "Relax operators; import the graph with granularity='op', or use the tvm backend"
            )
        builder = TORCH_OPS.get(op)
        if builder is None:
            raise BackendError(
                f"op {op!r} (node {node!r}) has no mapping in the torch backend; use the tvm "
                "backend (--backend tvm), which compiles any Relax operator"
            )
        tdev = torch.device(dev.torch_device)
        try:
            fn = builder(dict(data["attrs"]), data["inputs"], data["outputs"], tdev)
        except (Unsupported, KeyError, TypeError, ValueError) as e:
            raise BackendError(
                f"op {op!r} (node {node!r}): the torch backend cannot map attrs "
                f"{data['attrs']}: {e}; try the tvm backend"
            ) from None
        gen = torch.Generator(device=tdev).manual_seed(seed)
        values = values or {}
        inputs = []
        for i, spec in enumerate(input_specs(graph, node)):
            if i in values:
                inputs.append(as_torch(values[i], tdev, torch_dtype(spec.dtype)))
            else:
                inputs.append(_random(spec, tdev, gen))
        kernel = TorchKernel(node, op, dev, fn, inputs)
        try:
            outs = _as_list(kernel())
        except Exception as e:  # torch raises RuntimeError, IndexError, ...
            raise BackendError(f"op {op!r} (node {node!r}): torch failed: {type(e).__name__}: {e}") from e
        _check_outputs(node, op, outs, data["outputs"])
        return kernel

    def configure(self, device: str | DeviceSpec) -> None:
        """Set torch's intra-op thread count for a CPU device."""
        dev = self._device(device)
        if dev.kind == "cpu":
            torch.set_num_threads(dev.cpu_threads())

    def synchronize(self, device: str | DeviceSpec) -> None:
        """Wait for the device's queued kernels (a no-op on the CPU)."""
        dev = parse_device(device)
        if dev.kind == "gpu":
            torch.cuda.synchronize(dev.torch_device)


def evaluate_op(
    op: str,
    attrs: Mapping[str, Any],
    inputs: Sequence[Mapping[str, Any]],
    outputs: Sequence[Mapping[str, Any]],
    values: Sequence[Any],
) -> list[np.ndarray]:
    """Run one Relax operator with its torch function on the CPU: the evaluator with
    which the executor computes the weights folded at import
    (:func:`graphs.fold.fold_weight_only`).

    Raises
    ------
    BackendError
        For an operator without a torch mapping (naming it).
    """
    builder = TORCH_OPS.get(op)
    if builder is None:
        raise BackendError(f"op {op!r} has no mapping in the torch backend")
    cpu = torch.device("cpu")
    fn = builder(dict(attrs), list(inputs), list(outputs), cpu)
    args = [as_torch(v, cpu, torch_dtype(s["dtype"])) for v, s in zip(values, inputs)]
    with torch.no_grad():
        return [o.detach().numpy() for o in _as_list(fn(*args))]


def _check_outputs(node: str, op: str, outs: list[Any], specs: list[dict[str, Any]]) -> None:
    got = [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs]
    want = [(list(s["shape"]), s["dtype"]) for s in specs]
    if got != want:
        raise BackendError(
            f"op {op!r} (node {node!r}): the torch mapping produced outputs {got}, the graph "
            f"says {want}; this mapping is wrong for these attrs, use the tvm backend"
        )


class CudaTimer:
    """Per-call CUDA-event times of kernels on one GPU (the link timings' and executor's timer;
    the profiler times ops in a stream, :mod:`runtime.stream_timer`).

    :meth:`samples` queues ``n`` calls, each between two CUDA events, behind a
    ``torch.cuda._sleep`` that keeps the GPU busy while the host enqueues them, so
    that the events measure the kernels' device time rather than launch gaps.
    """

    def __init__(self, device: DeviceSpec) -> None:
        import torch

        self.torch = torch
        self.device = device
        self._keep_busy = BusyWait(torch.cuda)

    def samples(self, fn: Callable[[], Any], n: int, host_per_call: float) -> tuple[list[float], list[float]]:
        """Device seconds of each of ``n`` calls of ``fn``, and the host seconds per call
        (enqueue time; ``n`` copies). ``host_per_call``: an estimate of the latter, which
        sizes the busy wait (capped at 0.2 s)."""
        torch = self.torch
        with torch.cuda.device(self.device.index):
            starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            self._keep_busy(2.0 * n * min(max(host_per_call, 5e-6), 1e-4) + 50e-6)  # while we enqueue
            t0 = time.perf_counter()
            for s, e in zip(starts, ends):
                s.record()
                fn()
                e.record()
            host = (time.perf_counter() - t0) / n
            ends[-1].synchronize()
            return [s.elapsed_time(e) * 1e-3 for s, e in zip(starts, ends)], [host] * n
