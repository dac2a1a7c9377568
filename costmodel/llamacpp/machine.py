"""The figures of a machine that llama.cpp's speed depends on.

A :class:`Machine` is one GPU (or none) and the host: GPU memory and its bandwidth, the
GPU's dense FP16 tensor rate with FP16 accumulation and its dense INT8 tensor rate, the PCIe link,
host memory and its bandwidth, and the CPU threads that run in parallel (physical cores:
a run's threads beyond them add nothing); the llama.cpp backend that drives the GPU
(``cuda``, ``vulkan``, ``rocm``, ``sycl``, ``metal``; ``cpu`` without a GPU) and whether
GPU and CPU share one memory (Apple silicon: no PCIe link, one pool that both draw on),
and the GPU's memory type (``GDDR6X``, ``GDDR7``, ``HBM2e``...: the fraction of its bandwidth
llama.cpp draws is fitted per class of memory, :meth:`~costmodel.llamacpp.rates.AchievedRates.gpu_bandwidth_fraction`).
Peaks, not achieved rates: :class:`~costmodel.llamacpp.rates.AchievedRates` of the
backend scales them. A :class:`Machine` is derived from a hetsim platform
(:func:`experiments.llm_machine.machine_from_platform`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from hetsim.costmodel.base import CostModelError

__all__ = ["PCIE_LANE_GB_S", "Machine", "pcie_bandwidth"]

#: usable bandwidth of one PCIe lane per generation, GB/s (after line encoding:
#: 8 GT/s x 128b/130b for gen 3, doubling each generation)
PCIE_LANE_GB_S = {3: 0.985, 4: 1.969, 5: 3.938}


def pcie_bandwidth(gen: int, lanes: int) -> float:
    """Bytes/s of a PCIe link of generation ``gen`` and ``lanes`` lanes."""
    if gen not in PCIE_LANE_GB_S:
        raise CostModelError(f"PCIe generation {gen!r} unknown; known: {', '.join(map(str, PCIE_LANE_GB_S))}")
    return PCIE_LANE_GB_S[gen] * lanes * 1e9


@dataclass(frozen=True)
class Machine:
    """Peak figures of a CPU-GPU machine (bytes, bytes/s, FLOP/s); ``gpu`` empty for a CPU-only
    one; a host figure (memory, bandwidth, threads) or the GPU's ``gpu_flops`` of 0 is not
    known (an error where a prediction needs it); ``gpu_int8_ops`` 0: no INT8 tensor cores; ``gpu_count`` identical
    GPUs, each with the figures given (llama.cpp splits the layers between them)."""

    name: str
    host_memory: float
    host_bandwidth: float
    threads: int
    gpu: str = ""
    gpu_memory: float = 0.0
    gpu_bandwidth: float = 0.0
    gpu_flops: float = 0.0
    gpu_int8_ops: float = 0.0
    pcie_bandwidth: float = 0.0
    gpu_count: int = 1
    backend: str = ""
    unified_memory: bool = False
    gpu_memory_type: str = ""

    def __post_init__(self) -> None:
        # import cycle: hetsim.costmodel.llamacpp.rates -> hetsim.costmodel.llamacpp -> hetsim.costmodel.llamacpp.machine
        from hetsim.costmodel.llamacpp.rates import BACKENDS

        if not self.backend:
            object.__setattr__(self, "backend", "cuda" if self.gpu else "cpu")
        if self.backend not in BACKENDS:
            raise CostModelError(f"machine {self.name!r}: unknown llama.cpp backend {self.backend!r}; known: "
                                 f"{', '.join(BACKENDS)}")
        if self.gpu and self.backend == "cpu":
            raise CostModelError(f"machine {self.name!r}: a GPU needs a GPU backend, not 'cpu'")
        if not isinstance(self.unified_memory, bool):
            raise CostModelError(f"machine {self.name!r}: unified_memory must be true or false, got "
                                 f"{self.unified_memory!r}")
        if not isinstance(self.gpu_memory_type, str):
            raise CostModelError(f"machine {self.name!r}: gpu_memory_type must be a name such as 'GDDR6X', got "
                                 f"{self.gpu_memory_type!r}")
        if isinstance(self.gpu_count, bool) or not isinstance(self.gpu_count, int) or self.gpu_count < 1:
            raise CostModelError(f"machine {self.name!r}: gpu_count must be an int >= 1, got {self.gpu_count!r}")
        checks: dict[str, Any] = {}
        if self.gpu:
            checks.update(gpu_memory=self.gpu_memory, gpu_bandwidth=self.gpu_bandwidth)
            if not self.unified_memory:
                checks["pcie_bandwidth"] = self.pcie_bandwidth
        for k, v in checks.items():
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
                raise CostModelError(f"machine {self.name!r}: {k} must be a positive number, got {v!r}")
        for k in ("host_memory", "host_bandwidth", "threads", "gpu_int8_ops", "gpu_flops"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
                raise CostModelError(f"machine {self.name!r}: {k} must be a number >= 0 (0: not known), got {v!r}")

    def achieved_gpu_bandwidth(self, rates) -> float:
        """Bytes/s the GPU's memory delivers to llama.cpp at ``rates``
        (:meth:`~costmodel.llamacpp.rates.AchievedRates.gpu_bandwidth_fraction`)."""
        return self.gpu_bandwidth * rates.gpu_bandwidth_fraction(self.gpu_memory_type)

    @property
    def gpu_hbm(self) -> bool:
        """Whether the GPU's memory is high-bandwidth memory (HBM)."""
        return self.gpu_memory_type.upper().startswith("HBM")

    @property
    def has_gpu(self) -> bool:
        """Whether the machine has a GPU."""
        return bool(self.gpu)

    def to_dict(self) -> dict[str, Any]:
        """The figures as a dict."""
        return asdict(self)
