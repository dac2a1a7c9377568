"""A CUDA device in virtual time for the executor (:mod:`runtime.executor.virtual.device`):
the GPU path of every plan run and checked without a GPU."""

from hetsim.runtime.executor.virtual.device import CudaRuleError, VirtualCuda
from hetsim.runtime.executor.virtual.kernels import TimedCall, VirtualBackend

__all__ = ["CudaRuleError", "TimedCall", "VirtualBackend", "VirtualCuda"]
