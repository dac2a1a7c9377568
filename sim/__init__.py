"""Simulation layer: platforms (devices, links), plans, the SimPy engine and its results."""

from hetsim.costmodel.memory_domain import MemoryDomain
from hetsim.costmodel.platform import Device, Link, Platform, PlatformError
from hetsim.sim.engine.simulator import SimulationError, Simulator, simulate
from hetsim.sim.options import SimOptions
from hetsim.sim.plan import DynamicPolicy, Plan, PlanError, SystemView
from hetsim.sim.result import SimResult
from hetsim.sim.trace import chrome_trace, write_chrome_trace

__all__ = [
    "Device",
    "DynamicPolicy",
    "Link",
    "MemoryDomain",
    "Plan",
    "PlanError",
    "Platform",
    "PlatformError",
    "SimOptions",
    "SimResult",
    "SimulationError",
    "Simulator",
    "SystemView",
    "chrome_trace",
    "simulate",
    "write_chrome_trace",
]
