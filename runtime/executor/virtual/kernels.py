"""The executor's kernels on a :class:`~runtime.executor.virtual.device.VirtualCuda`:
GPU ops built for the CPU (:class:`VirtualBackend`), every prepared call priced and
checked by the device (:class:`TimedCall`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hetsim.runtime.backends.base import DeviceSpec

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.executor.virtual.device import VirtualCuda

__all__ = ["TimedCall", "VirtualBackend"]


class TimedCall:
    """A prepared call of the executor, priced and checked by a :class:`VirtualCuda`."""

    __slots__ = ("device", "call", "node", "memory", "tmpl", "slots", "slices")

    def __init__(self, device: VirtualCuda, call: Any, node: str, memory: int) -> None:
        self.device, self.call, self.node, self.memory = device, call, node, memory
        self.tmpl, self.slots = call.tmpl, call.slots
        self.slices = getattr(call, "slices", None)

    def __call__(self, args: list[Any], request: int = 0) -> Any:
        return self.device.run_kernel(self.call, self.node, self.memory, args, request)


class VirtualBackend:
    """The torch backend with a :class:`VirtualCuda`'s GPUs (``cpu:K`` memories)
    prepared as CPU devices: their kernels run on CPU tensors."""

    name = "torch"

    def __init__(self, backend: Any = None) -> None:
        # lazy: at the top it would load torch with this module
        from hetsim.runtime.backends.torch_backend import TorchBackend

        self.inner = backend if backend is not None else TorchBackend()

    @staticmethod
    def on_cpu(device: Any) -> Any:
        """A GPU spec as the CPU spec its kernels run with (its own memory string kept)."""
        if getattr(device, "kind", "cpu") != "gpu":
            return device
        return DeviceSpec("cpu@1", "cpu", device.torch_device, 0, 1)

    def prepare(self, graph: Any, node: str, device: Any, **kw: Any) -> Any:
        return self.inner.prepare(graph, node, self.on_cpu(device), **kw)

    def configure(self, device: Any) -> None:
        if getattr(device, "kind", "cpu") != "gpu":
            self.inner.configure(device)

    def synchronize(self, device: Any) -> None:
        """Nothing to wait for: the virtual device's work runs when it is launched."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
