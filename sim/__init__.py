"""Simulation layer: platforms (devices, links), plans, the SimPy engine and its results."""

from sim.plan import DynamicPolicy, Plan, PlanError, SystemView
from sim.platform import Device, Link, Platform, PlatformError

__all__ = [
    "Device",
    "DynamicPolicy",
    "Link",
    "Plan",
    "PlanError",
    "Platform",
    "PlatformError",
    "SystemView",
]
