"""A profiler trace as a cost source: the measured kernel and host times of a traced
step (:class:`TraceCostModel`, spec ``trace:PATH``) and the platform figures a trace
shows (:func:`trace_figures`, ``hetsim calibrate --from-trace``)."""

from __future__ import annotations

from hetsim.costmodel.trace.devices import TRACED_GPUS, device_ratio, traced_device, traced_preset
from hetsim.costmodel.trace.figures import TraceFigures, calibrated_from_trace, trace_figures
from hetsim.costmodel.trace.measured import TraceCostModel

__all__ = ["TRACED_GPUS", "TraceCostModel", "TraceFigures", "calibrated_from_trace", "device_ratio", "trace_figures",
           "traced_device", "traced_preset"]
