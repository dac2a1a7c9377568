"""The platform description (devices, links, memory domains, presets), as the simulator's
layer exports it: the names of :mod:`costmodel.platform`, where the description lives so
that the cost models read it without importing the simulator.

>>> from hetsim.sim.platform import Platform
>>> Platform.preset("xeon-p2200").device_names
['cpu', 'gpu']
"""

from __future__ import annotations

from hetsim.costmodel.platform import (
    LAUNCH_MODES,
    MATMUL_PRECISIONS,
    MAX_STREAMS,
    TENSOR_MODES,
    Device,
    Link,
    MemoryDomain,
    Platform,
    PlatformError,
    read_toml,
)

__all__ = ["LAUNCH_MODES", "MATMUL_PRECISIONS", "MAX_STREAMS", "TENSOR_MODES", "Device", "Link", "MemoryDomain",
           "Platform", "PlatformError", "read_toml"]
