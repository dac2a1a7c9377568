"""Where fitted GPU models are kept: the models shipped with hetsim, and the user's cache.

Every fitted thing of a :class:`~costmodel.gpu.model.GPUBank` (a family model, a GPU's
calibrated roofline and kernel families, the bank's bandwidth fraction) is stored
under a key: a hash of the content of the profiles it comes from, its parameters and
:data:`MODEL_VERSION`. A key is looked up first in the user's cache
(``$HETSIM_CACHE/gpu-models``, else ``~/.cache/hetsim/gpu-models``), then in the
models that ship with the package (:data:`SHIPPED`, ``costmodel/data/gpu-models``,
fitted on the built-in profiles with the default parameters): the built-in GPUs'
presets price their first graph without fitting anything. What is fitted is written
to the user's cache only.

An entry is ``KEY.json`` (its description) and, for a family model, ``KEY.npz``
(its trees, :class:`~costmodel.gpu.trees.TreeEnsemble`), checked against the SHA-1
the description records. :func:`ship` writes the shipped folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.gpu.trees import TreeEnsemble
from hetsim.graphs.graph import atomic_write
from hetsim.graphs.private_cache import read_own_file, usable_folder

__all__ = ["MODEL_VERSION", "SHIPPED", "ModelStore", "cache_dir", "copy_entries", "ship", "store_key"]

#: bump when the features or the fitting change: stored models are then refitted
MODEL_VERSION = 3
#: the models fitted on the built-in GPU profiles, shipped as package data
SHIPPED = Path(__file__).resolve().parents[1] / "data" / "gpu-models"


def cache_dir() -> Path:
    """The user's folder of fitted GPU models (``$HETSIM_CACHE/gpu-models``, else
    ``~/.cache/hetsim/gpu-models``)."""
    env = os.environ.get("HETSIM_CACHE")
    return (Path(env) if env else Path.home() / ".cache" / "hetsim") / "gpu-models"


def store_key(what: Mapping[str, Any]) -> str:
    """The key of a stored thing described by ``what`` (JSON-able), with :data:`MODEL_VERSION`."""
    blob = json.dumps({"v": MODEL_VERSION, **what}, sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:20]


class ModelStore:
    """Entries read from ``folders`` in order (the first that has a key answers) and
    written to ``write`` (None: nothing is written)."""

    def __init__(self, folders: Sequence[Path], write: Path | None) -> None:
        self.folders = [Path(f) for f in folders]
        self.write = Path(write) if write is not None else None

    def __repr__(self) -> str:
        return f"ModelStore({[str(f) for f in self.folders]}, write={self.write})"

    def get(self, key: str) -> tuple[dict[str, Any], TreeEnsemble | None] | None:
        """``(description, trees or None)`` of ``key``, or None when no folder has a
        sound entry (a damaged one is passed over: it is fitted again)."""
        for folder in self.folders:
            meta_path = folder / f"{key}.json"
            if not meta_path.is_file():
                continue
            private = folder == self.write  # the user's cache: only a folder no one else may write
            if private and usable_folder(folder, what="GPU model cache") is None:
                continue
            try:
                return read_entry(meta_path, private=private)
            except (OSError, ValueError, KeyError, TypeError, CostModelError):
                continue
        return None

    def put(self, key: str, meta: Mapping[str, Any], trees: TreeEnsemble | None = None) -> None:
        """Write ``key`` into the writable folder (nothing without one, or when it is not
        a folder of this user's alone to write: :func:`graphs.private_cache.usable_folder`,
        which creates it private)."""
        if self.write is not None and usable_folder(self.write, what="GPU model cache") is not None:
            write_entry(self.write, key, meta, trees)


def read_entry(meta_path: Path, *, private: bool = False) -> tuple[dict[str, Any], TreeEnsemble | None]:
    """One stored entry: its description and, when it has one, its trees. ``private``
    (the user's cache): each file is read only when it is a regular file of this
    user's that no one else may write, through the descriptor checked
    (:func:`graphs.private_cache.read_own_file`); else it is passed over."""

    def read(path: Path) -> bytes:
        if not private:
            return path.read_bytes()
        data = read_own_file(path)
        if data is None:
            raise CostModelError(f"{path}: missing, a link, or writable by another user")
        return data

    meta = json.loads(read(meta_path))
    if not isinstance(meta, dict) or meta.get("hetsim_gpu_model") != MODEL_VERSION:
        raise CostModelError(f"{meta_path}: another model version")
    if "trees_sha1" not in meta:
        return meta, None
    raw = read(meta_path.with_suffix(".npz"))
    if hashlib.sha1(raw).hexdigest() != meta["trees_sha1"]:
        raise CostModelError(f"{meta_path}: its trees file does not match")
    return meta, TreeEnsemble.from_bytes(raw, where=str(meta_path.with_suffix(".npz")))


def write_entry(folder: Path, key: str, meta: Mapping[str, Any], trees: TreeEnsemble | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"hetsim_gpu_model": MODEL_VERSION, **meta}
    if trees is not None:
        raw = trees.to_bytes()
        atomic_write(folder / f"{key}.npz", lambda fh: fh.write(raw), binary=True)
        out["trees_sha1"] = hashlib.sha1(raw).hexdigest()
    atomic_write(folder / f"{key}.json", lambda fh: fh.write(json.dumps(out, sort_keys=True) + "\n"))


def copy_entries(keys: Iterable[str], source: ModelStore, folder: Path) -> list[str]:
    """Copy the entries ``keys`` from ``source`` into ``folder``; the names written."""
    names = []
    for key in dict.fromkeys(keys):
        got = source.get(key)
        if got is None:
            raise CostModelError(f"model {key} is in none of {source.folders}")
        meta, trees = got
        write_entry(folder, key, {k: v for k, v in meta.items() if k not in ("hetsim_gpu_model", "trees_sha1")},
                    trees)
        names += [f"{key}.json"] + ([f"{key}.npz"] if trees is not None else [])
    return names


def ship(folder: str | os.PathLike[str] = SHIPPED, *, bank: Any = None) -> list[Path]:
    """Write the models of ``bank`` (default: :meth:`~costmodel.gpu.model.GPUBank.builtin`) into ``folder``
    (default: the package's shipped models), fitting what no store has, and remove the
    entries of ``folder`` no longer used; the files written. Run it when a built-in
    profile, the features or :data:`~costmodel.gpu.model.DEFAULT_PARAMS` change."""
    # import cycle: hetsim.costmodel.gpu.model -> hetsim.costmodel.gpu.store
    from hetsim.costmodel.gpu.model import GPUBank

    bank = bank or GPUBank.builtin(cache=None)
    out = Path(folder)
    keys = bank.fit_all()
    names = set(copy_entries(keys, bank.store, out))
    for stale in [*out.glob("*.json"), *out.glob("*.npz")]:
        if stale.name not in names:
            stale.unlink()
    return sorted(out / n for n in names)
