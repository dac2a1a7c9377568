"""Built-in profiles shipped with hetsim (package data under ``costmodel/profiles``).

The GPU profiles (``gpu-t4``, ``gpu-p4``, ``gpu-p100``, ``gpu-v100``,
``gpu-a100-40gb``, ``gpu-a100-80gb``, ``gpu-l4``, ``gpu-h100``) are the NeuSight
kernel data set converted by ``hetsim profile import`` (MIT licence: the
``LICENSE`` in each folder and ``THIRD_PARTY_NOTICES`` beside them). They are found
the same way from a checkout and from an installed wheel.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from hetsim.costmodel.base import CostModelError

__all__ = ["builtin_profile", "builtin_profiles"]


def builtin_profiles() -> dict[str, Path]:
    """Name -> folder of every built-in profile, sorted by name."""
    root = Path(str(resources.files("hetsim.costmodel") / "profiles"))
    if not root.is_dir():
        return {}
    return {p.name: p for p in sorted(root.iterdir()) if (p / "manifest.json").is_file()}


def builtin_profile(name: str) -> Path:
    """The folder of built-in profile ``name``; the error lists the known ones."""
    found = builtin_profiles()
    if name not in found:
        raise CostModelError(f"unknown built-in profile {name!r}; built-in profiles: {list(found)}")
    return found[name]
