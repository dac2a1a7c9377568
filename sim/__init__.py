"""Simulation layer: platforms (devices, links), plans, the SimPy engine and its results."""

from sim.engine import SimulationError, simulate
from sim.plan import DynamicPolicy, Plan, PlanError, SystemView
from sim.platform import Device, Link, Platform, PlatformError
from sim.result import SimResult
from sim.trace import chrome_trace, write_chrome_trace

__all__ = [
    "Device",
    "DynamicPolicy",
    "Link",
    "Plan",
    "PlanError",
    "Platform",
    "PlatformError",
    "SimResult",
    "SimulationError",
    "SystemView",
    "chrome_trace",
    "simulate",
    "write_chrome_trace",
]
