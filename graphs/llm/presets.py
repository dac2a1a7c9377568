"""The one registry of model presets: published ``config.json`` fields kept in
``graphs/llm/configs/NAME.json`` (each with its ``_source``), read into the
:class:`~graphs.llm.architecture.Architecture` that the llama.cpp planner and the
simulated placement policies both use.

A name is matched as written, then without case, hyphens, dots and underscores
(``llama3-70b`` is ``llama-3-70b``); an unknown name is an "unknown model" error that
lists the known ones.

>>> preset_architecture("llama3-8b").name
'llama-3-8b'
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from pathlib import Path

from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm.architecture import Architecture
from hetsim.graphs.llm.hf_config import architecture_from_hf, read_hf_config

__all__ = ["CONFIG_DIR", "canonical_preset", "preset_architecture", "preset_names"]

CONFIG_DIR = Path(__file__).with_name("configs")


@lru_cache(maxsize=1)
def preset_names() -> list[str]:
    """Names of the model presets (``graphs/llm/configs/*.json``)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.json"))


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def canonical_preset(name: str) -> str | None:
    """The preset ``name`` spells (exactly, or up to case and punctuation), or None."""
    if not isinstance(name, str):
        return None
    names = preset_names()
    if name in names:
        return name
    by_key = {_key(n): n for n in names}
    return by_key.get(_key(name))


@cache
def preset_architecture(name: str) -> Architecture:
    """The :class:`Architecture` of preset ``name``.

    Raises
    ------
    GraphError
        ``unknown model NAME; known: ...``.
    """
    canonical = canonical_preset(name)
    if canonical is None:
        raise GraphError(f"unknown model {name!r}; known: {', '.join(preset_names())} (or a .gguf file, "
                         "a config.json or a model folder)")
    cfg = read_hf_config(CONFIG_DIR / f"{canonical}.json")
    return architecture_from_hf(cfg, name=canonical)
