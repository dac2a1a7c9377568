"""The GPU a trace ran on, and a traced time carried to another device by the ratio
of the two devices' roofline figures."""

from __future__ import annotations

from typing import Any

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.platform import Device, Platform
from hetsim.graphs.trace.build import COMPUTE_CLASSES

__all__ = ["TRACED_GPUS", "device_ratio", "traced_device", "traced_preset"]

#: a traced device's name (as the trace's deviceProperties give it) to the preset of
#: that GPU, first match wins
TRACED_GPUS = (("H200", "h200-server"), ("H100", "h100-server"), ("A100-SXM4-80GB", "a100-server"),
               ("A100 80GB", "a100-server"), ("A100", "a100-40gb-server"), ("V100", "v100-server"),
               ("P100", "p100-server"), ("T4", "t4-server"), ("L4", "l4-server"), ("P4", "p4-server"))


def traced_preset(device_name: str | None) -> str | None:
    """The preset whose GPU a trace names (:data:`TRACED_GPUS`), or None."""
    name = device_name or ""
    return next((preset for key, preset in TRACED_GPUS if key in name), None)


def traced_device(meta: dict[str, Any], platform: str | Platform | None = None) -> Device:
    """The GPU that ran a trace (``meta`` of its graph): ``platform``'s first GPU when
    given, else that of the preset the trace's device name matches.

    Raises
    ------
    CostModelError
        A traced device no preset describes (give ``platform``), a platform without a GPU.
    """
    if platform is None:
        platform = traced_preset(meta.get("device"))
        if platform is None:
            raise CostModelError(f"trace {meta.get('trace', '')!r}: no preset describes the traced GPU "
                                 f"{meta.get('device') or '(not named in the trace)'!r}; give the platform it ran on")
    pl = Platform.load(platform)
    gpus = pl.devices_of_kind("gpu")
    if not gpus:
        raise CostModelError(f"platform {pl.name!r} has no GPU to stand for the traced one")
    return gpus[0]


def device_ratio(op: str, traced: Device, other: Device) -> float:
    """The factor of a traced time on ``other`` against ``traced``: the ratio of the
    two devices' compute peaks (``peak_flops``) for the compute-bound kernel classes
    (:data:`graphs.trace.COMPUTE_CLASSES`: convolutions, GEMMs, attention), of their
    memory bandwidths for every other kernel, copy and fill; the roofline's two
    regimes, applied to measured times."""
    if op in COMPUTE_CLASSES:
        return traced.peak_flops / other.peak_flops
    return traced.mem_bandwidth_bytes_per_s / other.mem_bandwidth_bytes_per_s
