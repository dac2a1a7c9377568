"""Profile folders: write them atomically, whole (:func:`write_profile`) or row by
row as a profiler measures (:class:`ProfileWriter`); fit the links' copy times
(:func:`fit_links`).

The format is specified in ``costmodel/PROFILE_FORMAT.md`` (version 1) and read by
:mod:`costmodel.profile_reader`, whose checks validate everything here before it is
written. The profiler (``runtime/profiler.py``) writes through :class:`ProfileWriter`.

Writer contract (for the profiler)
----------------------------------
``ProfileWriter(path, manifest).open()`` creates the folder (or reopens it: the
manifest on disk must have the same version and devices) and then:

* ``done(device)`` -> ``{signature, ...}`` already measured on ``device`` for the
  writer's backend: skip these when resuming;
* ``append_ops(rows)`` validates the rows like the reader does and rewrites
  ``ops.csv`` atomically (temporary file + ``os.replace``); a row whose
  ``(signature, device, backend)`` is already present only adds its ``models``;
* ``add_models(model, signatures)`` tags rows already measured as belonging to
  ``model`` too (a signature seen again in another model: needed for the
  leave-one-model-out evaluation), and adds ``model`` to the manifest;
* ``write_links(rows)``, ``write_link_fits(fits, duplex=...)`` (or
  :func:`fit_links` on the raw rows), ``write_dispatch(mapping)``.

One writer per folder at a time. Every file is replaced atomically, so a killed
profiler leaves the last complete state behind, and reading never sees half a row.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.profile_reader import (
    OPS_COLUMNS,
    TEXT_COLUMNS,
    Profile,
    read_csv_strict,
    read_manifest,
    read_profile,
    split_models,
    union_models,
    validate_dispatch,
    validate_link_fits,
    validate_links,
    validate_manifest,
    validate_ops,
)
from hetsim.graphs.graph import atomic_write

__all__ = ["ProfileWriter", "fit_links", "write_profile"]


def fit_links(links: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Fit ``time_s = latency_s + bytes / bandwidth_bytes_per_s`` per ``src->dst``.

    Uses the non-concurrent rows, pinned ones when a direction has any. Least
    squares with relative weights (each size counts alike); latency clipped at 0.
    Returns the ``links.json`` entries (without ``duplex``).

    Examples
    --------
    >>> rows = pd.DataFrame({"src": "cpu", "dst": "cuda:0", "direction": "h2d", "pinned": 1,
    ...                      "bytes": [1e3, 1e6, 1e8], "concurrent": 0,
    ...                      "time_s": [1e-5 + b / 1e10 for b in (1e3, 1e6, 1e8)]})
    >>> fit = fit_links(rows)["cpu->cuda:0"]
    >>> round(fit["latency_s"], 9), round(fit["bandwidth_bytes_per_s"] / 1e10, 6)
    (1e-05, 1.0)
    """
    out: dict[str, dict[str, Any]] = {}
    rows = links[links["concurrent"].astype(int) == 0]
    for (src, dst), grp in rows.groupby(["src", "dst"], sort=False):
        pinned = bool((grp["pinned"].astype(int) == 1).any())
        if pinned:
            grp = grp[grp["pinned"].astype(int) == 1]
        b = grp["bytes"].to_numpy(float)
        t = grp["time_s"].to_numpy(float)
        w = 1.0 / np.maximum(t, 1e-12)
        if len(np.unique(b)) < 2:
            raise CostModelError(f"links.csv: {src}->{dst} needs copies of at least two sizes to fit")
        a = np.column_stack([np.ones_like(b), b]) * w[:, None]
        (lat, inv_bw), *_ = np.linalg.lstsq(a, t * w, rcond=None)
        if inv_bw <= 0:
            raise CostModelError(f"links.csv: {src}->{dst}: copy time does not grow with size")
        out[f"{src}->{dst}"] = {"latency_s": max(float(lat), 0.0), "bandwidth_bytes_per_s": float(1.0 / inv_bw), "pinned": pinned}
    return out


def _tmp_name(path: Path) -> Path:
    """A fresh hidden sibling of ``path`` (created by the caller, so the umask applies)."""
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


def _write_json(path: Path, data: Any) -> None:
    atomic_write(path, lambda fh: fh.write(json.dumps(data, indent=1) + "\n"))


def _write_csv(path: Path, frame: pd.DataFrame) -> None:
    if path.name.endswith(".gz"):  # reproducible bytes: no file name or time in the gzip header
        import gzip

        data = gzip.compress(frame.to_csv(index=False).encode(), compresslevel=9, mtime=0)
        atomic_write(path, lambda fh: fh.write(data), binary=True)
        return
    atomic_write(path, lambda fh: frame.to_csv(fh, index=False))


def _ops_frame(rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    frame = (rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))).copy()
    for c in TEXT_COLUMNS:
        if c in frame.columns:
            frame[c] = frame[c].map(lambda v: "" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return frame


def write_profile(
    path: str | os.PathLike[str],
    manifest: Mapping[str, Any],
    ops: pd.DataFrame | Iterable[Mapping[str, Any]],
    *,
    links: pd.DataFrame | None = None,
    link_fits: Mapping[str, Any] | None = None,
    dispatch: Mapping[str, float] | None = None,
    overwrite: bool = False,
    ops_name: str = "ops.csv",
    extra_files: Mapping[str, str] | None = None,
) -> Path:
    """Write a whole profile folder atomically (built in a sibling temporary
    folder, then renamed). Everything is validated as :func:`read_profile` would.

    ``link_fits`` is the ``links.json`` object (``"duplex"`` key included);
    ``links``/``link_fits``/``dispatch`` left out are not written. ``ops_name``:
    ``"ops.csv"`` or ``"ops.csv.gz"`` (gzip-compressed). ``extra_files``: file name ->
    text written beside them (a ``LICENSE``, a ``README``).
    """
    if ops_name not in ("ops.csv", "ops.csv.gz"):
        raise CostModelError(f"ops_name must be 'ops.csv' or 'ops.csv.gz', got {ops_name!r}")
    folder = Path(path)
    if folder.exists() and not overwrite:
        raise CostModelError(f"{folder}: already exists (overwrite=True to replace it)")
    manifest = dict(manifest)
    validate_manifest(manifest, where=f"{folder}/manifest.json")
    kinds = {d["name"]: d["kind"] for d in manifest["devices"]}
    files: list[tuple[str, Any, Any, Any]] = [
        (ops_name, _ops_frame(ops), validate_ops, _write_csv),
        ("links.csv", links, validate_links, _write_csv),
        ("links.json", None if link_fits is None else dict(link_fits), validate_link_fits, _write_json),
        ("dispatch.json", None if dispatch is None else dict(dispatch), validate_dispatch, _write_json),
    ]
    for name, data, check, _ in files:
        if data is not None:
            check(data, kinds, where=f"{folder}/{name}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_name(folder)
    tmp.mkdir()
    try:
        _write_json(tmp / "manifest.json", manifest)
        for name, data, _, write in files:
            if data is not None:
                write(tmp / name, data)
        for name, text in (extra_files or {}).items():
            atomic_write(tmp / name, lambda fh, text=text: fh.write(text))
        if folder.exists():
            old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
            os.replace(folder, old)
            os.replace(tmp, folder)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return folder


#: what names the machine and software a profile was measured with: (section, key)
MACHINE_KEYS = (("machine", "hostname"), ("machine", "cpu_model"), ("machine", "gpu_model"), ("libraries", "torch"))


def machine_differences(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``"machine.hostname 'a' here 'b'"`` for each of :data:`MACHINE_KEYS` that both
    manifests name and that differs."""
    out = []
    for section, key in MACHINE_KEYS:
        a = (old.get(section) or {}).get(key) if isinstance(old.get(section), Mapping) else None
        b = (new.get(section) or {}).get(key) if isinstance(new.get(section), Mapping) else None
        if a is not None and b is not None and a != b:
            out.append(f"{section}.{key} {a!r:.60}, this run {b!r:.60}")
    return out


class ProfileWriter:
    """Incremental, resumable, atomic writer of one profile folder (the contract
    is in the module docstring).

    Parameters
    ----------
    path
        Profile folder (created by :meth:`open` if missing).
    manifest
        The manifest to write; when the folder exists, its manifest must have the
        same ``hetsim_profile`` and devices, and the stored one is kept (its
        ``models``/``batches`` grow as rows arrive).
    backend
        Backend that :meth:`done` reports on (default: ``manifest["backend"]``).

    Examples
    --------
    >>> w = ProfileWriter("profiles/box", manifest).open()            # doctest: +SKIP
    >>> todo = [n for n in nodes if sig[n] not in w.done("cpu")]      # doctest: +SKIP
    >>> w.append_ops(measure(todo)); w.add_models("resnet50", sigs)   # doctest: +SKIP
    """

    def __init__(self, path: str | os.PathLike[str], manifest: Mapping[str, Any], *, backend: str | None = None) -> None:
        self.path = Path(path)
        self.manifest = dict(manifest)
        self.backend = backend

    def open(self) -> ProfileWriter:
        """Create the folder and manifest, or check and reopen an existing one."""
        validate_manifest(self.manifest, where=f"{self.path}/manifest.json (new)")
        mpath = self.path / "manifest.json"
        if mpath.is_file():
            old = read_manifest(mpath)
            if old["hetsim_profile"] != self.manifest["hetsim_profile"]:
                raise CostModelError(
                    f"{mpath}: format version {old['hetsim_profile']}, the new run writes version "
                    f"{self.manifest['hetsim_profile']} (GPU times measured another way); use another folder"
                )
            other = machine_differences(old, self.manifest)
            if other:
                raise CostModelError(
                    f"{mpath}: a profile of another machine ({'; '.join(other)}): its rows and this run's "
                    "would be mixed; use another folder"
                )
            if old["devices"] != self.manifest["devices"]:
                raise CostModelError(
                    f"{mpath}: devices {old['devices']} differ from the new run's "
                    f"{self.manifest['devices']}; use another folder"
                )
            self.manifest = old
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            self.manifest.setdefault("models", [])
            _write_json(mpath, self.manifest)
        if self.backend is None:
            self.backend = str(self.manifest.get("backend", "torch"))
        return self

    @property
    def _kinds(self) -> dict[str, str]:
        return {d["name"]: d["kind"] for d in self.manifest["devices"]}

    def _ops(self) -> pd.DataFrame:
        p = self.path / "ops.csv"
        if not p.is_file():
            return pd.DataFrame(columns=OPS_COLUMNS)
        return validate_ops(read_csv_strict(p), self._kinds, where=str(p))

    def done(self, device: str | None = None) -> set[str] | set[tuple[str, str]]:
        """Signatures already in ``ops.csv`` for this backend: a set of signatures
        for one ``device``, or of ``(signature, device)`` pairs when ``device`` is None."""
        ops = self._ops()
        ops = ops[ops["backend"] == self.backend]
        if device is not None:
            return set(ops.loc[ops["device"] == device, "signature"])
        return set(zip(ops["signature"], ops["device"]))

    def append_ops(self, rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> int:
        """Add measured rows (all :data:`OPS_COLUMNS`); returns how many were new.
        A row already present (same signature, device, backend) only merges its
        ``models``. Validated before anything is written."""
        new = _ops_frame(rows)
        if new.empty:
            return 0
        old = self._ops()
        validate_ops(new, self._kinds, where=f"{self.path}/ops.csv (appended rows)")
        combined = _ops_frame(pd.concat([old, new], ignore_index=True)) if len(old) else new
        key = combined["signature"] + "\x00" + combined["device"] + "\x00" + combined["backend"]
        merged = combined.groupby(key, sort=False)["models"].agg(lambda s: ";".join(union_models(s)))
        first = combined[~key.duplicated(keep="first")].copy()
        first["models"] = merged.loc[key[first.index]].to_numpy()
        self._save_ops(first)
        self._grow_manifest(
            [m for cell in new["models"] for m in split_models(cell)],
            [int(b) for b in new["batch"]],
        )
        return len(first) - len(old)

    def add_models(self, model: str, signatures: Iterable[str], *, device: str | None = None) -> int:
        """Record that ``model`` contains ``signatures`` (rows already measured, on
        ``device`` or every device); returns the number of rows tagged."""
        sigs = set(signatures)
        ops = self._ops()
        hit = ops["signature"].isin(sigs) & (ops["backend"] == self.backend)
        if device is not None:
            hit &= ops["device"] == device
        ops.loc[hit, "models"] = ops.loc[hit, "models"].map(lambda c: ";".join(union_models([c, model])))
        if hit.any():
            self._save_ops(ops)
        self._grow_manifest([model], [])
        return int(hit.sum())

    def write_links(self, rows: pd.DataFrame | Iterable[Mapping[str, Any]]) -> None:
        """Replace ``links.csv`` with ``rows`` (all :data:`LINKS_COLUMNS`)."""
        frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
        validate_links(frame, self._kinds, where=f"{self.path}/links.csv")
        _write_csv(self.path / "links.csv", frame)

    def write_link_fits(self, fits: Mapping[str, Mapping[str, Any]], *, duplex: bool) -> None:
        """Replace ``links.json`` (``fits``: e.g. the result of :func:`fit_links`)."""
        data: dict[str, Any] = {k: dict(v) for k, v in fits.items()}
        data["duplex"] = bool(duplex)
        validate_link_fits(data, self._kinds, where=f"{self.path}/links.json")
        _write_json(self.path / "links.json", data)

    def write_dispatch(self, dispatch: Mapping[str, float]) -> None:
        """Replace ``dispatch.json``."""
        data = validate_dispatch(dict(dispatch), self._kinds, where=f"{self.path}/dispatch.json")
        _write_json(self.path / "dispatch.json", data)

    def read(self) -> Profile:
        """The folder as written so far, validated."""
        return read_profile(self.path)

    def _save_ops(self, frame: pd.DataFrame) -> None:
        cols = OPS_COLUMNS + [c for c in frame.columns if c not in OPS_COLUMNS]
        _write_csv(self.path / "ops.csv", frame[cols])

    def _grow_manifest(self, models: list[str], batches: list[int]) -> None:
        m = dict(self.manifest)
        m["models"] = union_models([";".join(m.get("models", [])), *models])
        m["batches"] = sorted(set(m.get("batches", [])) | set(batches))
        if m != self.manifest:
            self.manifest = m
            _write_json(self.path / "manifest.json", m)
