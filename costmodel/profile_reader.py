"""Profile folders: read and validate them (:func:`read_profile`).

The format is specified in ``costmodel/PROFILE_FORMAT.md`` (version 2; version 1
folders are read too, see :func:`read_profile`). This module reads it and holds its checks (``validate_*``: every file, every row); the writer,
:mod:`costmodel.profile_writer` (``ProfileWriter``, ``write_profile``,
``fit_links``), validates through the same checks before it writes anything, so a
folder it writes is one this module reads. Cost models read through
:func:`read_profile`. No torch needed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetsim.costmodel.base import CostModelError
from hetsim.costmodel.learned.measured import CostModelWarning
from hetsim.graphs.features import FEATURE_COLUMNS

__all__ = [
    "PROFILE_VERSION",
    "READ_VERSIONS",
    "OPS_COLUMNS",
    "LINKS_COLUMNS",
    "TEXT_COLUMNS",
    "Profile",
    "launch_included",
    "read_csv_strict",
    "read_manifest",
    "read_profile",
    "split_models",
    "union_models",
    "validate_dispatch",
    "validate_link_fits",
    "validate_links",
    "validate_manifest",
    "validate_ops",
]

#: the ``hetsim_profile`` version :mod:`costmodel.profile_writer` writes
PROFILE_VERSION = 2
#: the versions this module reads: 1 (GPU ``time_s`` measured per call between CUDA
#: events, launch included) and 2 (GPU ``time_s`` the device time in a stream, the
#: launch in ``launch_s``)
READ_VERSIONS = (1, 2)
#: the text columns of ``ops.csv``
TEXT_COLUMNS = ["signature", "device", "device_kind", "backend", "model", "node", "models", "op"]
_TIME_COLUMNS = ["time_s", "p10_s", "p90_s"]
#: required columns of ``ops.csv`` (extra columns are kept)
OPS_COLUMNS: list[str] = [*TEXT_COLUMNS, "batch", *_TIME_COLUMNS, "repeats", *FEATURE_COLUMNS]
#: required columns of ``links.csv``
LINKS_COLUMNS: list[str] = ["src", "dst", "direction", "pinned", "bytes", "time_s", "concurrent"]
_KINDS = ("cpu", "gpu")
_DIRECTIONS = ("h2d", "d2h", "d2d")


@dataclass(frozen=True, eq=False)
class Profile:
    """A validated profile folder.

    ``manifest``: the JSON; ``ops``: ``ops.csv`` in file order, numeric columns as
    numbers, text columns as strings; ``links``: ``links.csv`` (empty when absent);
    ``link_fits``: ``links.json`` without ``duplex`` (``"src->dst" -> {"latency_s",
    "bandwidth_bytes_per_s", "pinned"}``), ``duplex`` (None when absent);
    ``dispatch``: ``dispatch.json`` (profile device -> seconds per op launch).
    """

    path: Path | None
    manifest: dict[str, Any]
    ops: pd.DataFrame
    links: pd.DataFrame
    link_fits: dict[str, dict[str, Any]]
    duplex: bool | None
    dispatch: dict[str, float]

    @property
    def name(self) -> str:
        return str(self.manifest.get("name", self.path.name if self.path else "profile"))

    @property
    def device_kinds(self) -> dict[str, str]:
        """Profile device name -> kind (``cpu``/``gpu``), in manifest order."""
        return {d["name"]: d["kind"] for d in self.manifest["devices"]}

    @property
    def models(self) -> list[str]:
        """Every model named in ``ops.csv``'s ``models`` column (manifest order first)."""
        present = union_models(self.ops["models"])
        listed = [m for m in self.manifest.get("models", []) if m in present]
        return listed + [m for m in present if m not in listed]

    def model_mask(self, model: str) -> np.ndarray:
        """Boolean mask of the ``ops`` rows whose ``models`` include ``model``."""
        return self.ops["models"].map(lambda c: model in split_models(c)).to_numpy(dtype=bool)

    def call_times(self, rows: pd.DataFrame | None = None) -> np.ndarray:
        """What the learned predictors fit and are judged on: the time one call of
        the op costs its device (seconds, one per row of ``rows``, default ``ops``).

        A GPU row's is its device time (format version 2: the kernels' time in a
        stream, the launch apart in ``launch_s``; version 1: one call between CUDA
        events). A CPU row's is the measured wall time per call (``wall_s``; without
        that column, ``time_s`` plus the dispatch time): a CPU worker issues its own kernels, and a
        view op (``reshape``) or a tiny kernel has no kernel time left once the
        dispatch is taken off (``time_s`` at its floor), which no relative error can
        be asked of. :class:`~costmodel.learned.measured.MeasuredCostModel` takes the
        dispatch off again when it prices a node, because the simulator charges
        the dispatch to the host separately.
        """
        rows = self.ops if rows is None else rows
        t = rows["time_s"].to_numpy(dtype=float)
        kinds = self.device_kinds
        cpu = rows["device"].map(lambda d: kinds.get(str(d)) == "cpu").to_numpy(dtype=bool)
        nan = np.full(len(rows), np.nan)
        # the raw median per call where the profiler kept it (time_s is floored where
        # the wall time did not exceed the dispatch time), else time_s + dispatch
        wall = pd.to_numeric(rows["wall_s"], errors="coerce").to_numpy(dtype=float) if "wall_s" in rows else nan
        disp = pd.to_numeric(rows["dispatch_s"], errors="coerce").to_numpy(dtype=float) if "dispatch_s" in rows else nan
        from_json = rows["device"].map(lambda d: self.dispatch.get(str(d), 0.0)).to_numpy(dtype=float)
        disp = np.where(np.isfinite(disp) & (disp >= 0), disp, from_json)
        call = np.where(np.isfinite(wall) & (wall > 0), wall, t + disp)
        return np.where(cpu, call, t)

    def call_overhead(self) -> dict[str, float]:
        """Per CPU device: what :meth:`call_times` holds beyond the kernel time (the
        median ``dispatch_s`` of its rows, else ``dispatch.json``; 0 for a profile
        taken in context, whose rows are kernel calls). GPU devices: nothing."""
        out: dict[str, float] = {}
        for d, kind in self.device_kinds.items():
            if kind != "cpu":
                continue
            rows = self.ops[self.ops["device"] == d]
            col = pd.to_numeric(rows["dispatch_s"], errors="coerce") if "dispatch_s" in rows else None
            if col is not None and col.notna().any():
                out[d] = float(col.dropna().median())
            else:
                out[d] = float(self.dispatch.get(d, 0.0))
        return out

    def launch_times(self) -> dict[str, dict[str, float]]:
        """Per GPU device, signature -> the host time of one eager launch of its
        kernels (``launch_s``, format version 2), and ``""`` -> their median: what a
        fitted model gives as ``dispatch_time`` on that GPU. Devices without the
        column (CPUs, version-1 profiles): absent."""
        if "launch_s" not in self.ops:
            return {}
        out: dict[str, dict[str, float]] = {}
        for d, kind in self.device_kinds.items():
            rows = self.ops[(self.ops["device"] == d) & self.ops["launch_s"].notna()]
            if kind != "gpu" or rows.empty:
                continue
            per = dict(zip(rows["signature"].astype(str), rows["launch_s"].astype(float)))
            out[d] = {**per, "": float(np.median(list(per.values())))}
        return out

    def kind_link_fits(self) -> dict[tuple[str, str], tuple[float, float]]:
        """``(src kind, dst kind) -> (latency_s, bandwidth_bytes_per_s)``: the first
        ``links.json`` fit for each pair of device kinds."""
        kinds = self.device_kinds
        out: dict[tuple[str, str], tuple[float, float]] = {}
        for key, fit in self.link_fits.items():
            src, dst = key.split("->", 1)
            pair = (kinds[src], kinds[dst])
            out.setdefault(pair, (float(fit["latency_s"]), float(fit["bandwidth_bytes_per_s"])))
        return out

    def training_rows(self, backend: str | None = None) -> pd.DataFrame:
        """The ``ops`` rows of one backend (``None``: the manifest's ``backend``
        when the file mixes several, else every row)."""
        backends = self.ops["backend"].unique()
        if backend is None:
            if len(backends) <= 1:
                return self.ops
            backend = str(self.manifest.get("backend", backends[0]))
        rows = self.ops[self.ops["backend"] == backend]
        if rows.empty:
            raise CostModelError(
                f"profile {self.name!r} has no ops.csv rows for backend {backend!r} "
                f"(backends: {sorted(map(str, backends))})"
            )
        return rows


def split_models(cell: str) -> list[str]:
    """``"resnet18;vgg16"`` -> ``["resnet18", "vgg16"]``."""
    return [m for m in str(cell).split(";") if m]


def union_models(cells: Iterable[str]) -> list[str]:
    """The model names of ``models`` cells (``;``-separated), each once, in order of first appearance."""
    out: list[str] = []
    for cell in cells:
        for m in split_models(cell):
            if m not in out:
                out.append(m)
    return out


# ---------------------------------------------------------------------- reading
def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile folder.

    Raises
    ------
    CostModelError
        Naming the file (and the 1-based data row of a CSV) at fault: a missing
        manifest or ``ops.csv``, a ``hetsim_profile`` not in :data:`READ_VERSIONS`, a missing
        column, a non-finite or negative time, an unknown device, a duplicate row.
        ``links.csv``, ``links.json`` and ``dispatch.json`` may be absent (nothing
        measured); when present they are checked too.

    Examples
    --------
    >>> prof = read_profile("profiles/this-machine-cpu")  # doctest: +SKIP
    >>> prof.ops.groupby("op")["time_s"].median()         # doctest: +SKIP
    """
    folder = Path(path)
    if not folder.is_dir():
        raise CostModelError(f"profile folder {str(folder)!r} does not exist")
    manifest = read_manifest(folder / "manifest.json")
    kinds = {d["name"]: d["kind"] for d in manifest["devices"]}
    ops_path = folder / "ops.csv"
    if not ops_path.is_file() and (folder / "ops.csv.gz").is_file():
        ops_path = folder / "ops.csv.gz"
    if not ops_path.is_file():
        raise CostModelError(f"{ops_path}: missing (a profile needs ops.csv or ops.csv.gz)")
    ops = validate_ops(read_csv_strict(ops_path), kinds, where=str(ops_path))
    if launch_included(manifest) and (ops["device_kind"] == "gpu").any():
        import warnings

        warnings.warn(CostModelWarning(
            f"profile {manifest.get('name', folder.name)!r} ({folder}) is format version 1: its GPU times "
            "were measured per call between CUDA events and hold the launch; they are taken as device "
            "times (profile the GPU again with 'hetsim profile' for device and launch times)"), stacklevel=2)
    links_path = folder / "links.csv"
    if links_path.is_file():
        links = validate_links(read_csv_strict(links_path), kinds, where=str(links_path))
    else:
        links = pd.DataFrame({c: pd.Series(dtype=float) for c in LINKS_COLUMNS})
    fits, duplex = {}, None
    if (folder / "links.json").is_file():
        fits, duplex = validate_link_fits(_read_json(folder / "links.json"), kinds, where=str(folder / "links.json"))
    dispatch = {}
    if (folder / "dispatch.json").is_file():
        dispatch = validate_dispatch(_read_json(folder / "dispatch.json"), kinds, where=str(folder / "dispatch.json"))
    return Profile(folder, manifest, ops, links, fits, duplex, dispatch)


def launch_included(manifest: Mapping[str, Any]) -> bool:
    """True for a version-1 profile that hetsim's profiler measured on a GPU: its GPU
    ``time_s`` is one call between two CUDA events (the launch and the events' own
    cost included). Imported data sets (a ``source`` in the manifest, such as the
    NeuSight kernels) state their own timing and are priced by their own models."""
    return (manifest.get("hetsim_profile") == 1 and "source" not in manifest
            and any(d.get("kind") == "gpu" for d in manifest.get("devices", [])))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise CostModelError(f"{path}: missing") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CostModelError(f"{path}: not valid JSON ({e})") from None


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A profile's ``manifest.json``, checked (:func:`validate_manifest`); a
    :class:`CostModelError` naming the file when it is missing or malformed."""
    path = Path(path)
    data = _read_json(path)
    validate_manifest(data, where=str(path))
    return data


def validate_manifest(data: Any, *, where: str = "manifest.json") -> None:
    """Check a manifest dict; :class:`CostModelError` naming ``where`` and the key."""
    if not isinstance(data, dict):
        raise CostModelError(f"{where}: must be a JSON object")
    if (version := data.get("hetsim_profile")) not in READ_VERSIONS or isinstance(version, bool):
        raise CostModelError(f"{where}: 'hetsim_profile' is {version!r}; this hetsim reads versions "
                             f"{', '.join(map(str, READ_VERSIONS))}")
    devices = data.get("devices")
    if not isinstance(devices, list) or not devices:
        raise CostModelError(f"{where}: 'devices' must be a non-empty list")
    names: set[str] = set()
    for i, d in enumerate(devices):
        if not isinstance(d, dict) or not isinstance(d.get("name"), str) or not d["name"]:
            raise CostModelError(f"{where}: devices[{i}] needs a non-empty 'name'")
        if d.get("kind") not in _KINDS:
            raise CostModelError(f"{where}: device {d['name']!r}: 'kind' must be 'cpu' or 'gpu', got {d.get('kind')!r}")
        if d["name"] in names:
            raise CostModelError(f"{where}: duplicate device name {d['name']!r}")
        names.add(d["name"])
    for key in ("models", "batches"):
        if key in data and not isinstance(data[key], list):
            raise CostModelError(f"{where}: {key!r} must be a list")


def read_csv_strict(path: Path) -> pd.DataFrame:
    """The CSV as strings; a row with another number of fields than the header, or a
    last row without its newline (a write cut off mid-row), is refused. A ``.gz`` file
    is decompressed first."""
    try:
        raw = path.read_bytes()
        if path.name.endswith(".gz"):
            import gzip

            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except (OSError, EOFError) as e:
        what = "the gzip file" if path.name.endswith(".gz") else "it"
        raise CostModelError(f"{path}: cannot read {what} ({type(e).__name__}: {e})") from None
    except UnicodeDecodeError as e:
        raise CostModelError(f"{path}: cannot parse CSV (not UTF-8: {e})") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if not header:
        raise CostModelError(f"{path}: empty file (no header)")
    rows = []
    for rec in reader:
        if not rec:
            continue
        if len(rec) != len(header):
            raise CostModelError(f"{path}: line {reader.line_num} has {len(rec)} fields, the header "
                                 f"{len(header)} (a row cut off mid-write?)")
        rows.append(rec)
    if rows and not text.endswith("\n"):
        raise CostModelError(f"{path}: the last row ends without a newline: cut off mid-write? "
                             f"(line {reader.line_num}; remove it and measure again)")
    return pd.DataFrame(rows, columns=header, dtype=str)


def _require_columns(frame: pd.DataFrame, columns: list[str], where: str) -> None:
    if missing := [c for c in columns if c not in frame.columns]:
        raise CostModelError(f"{where}: missing required column(s) {missing}")


def _numeric(frame: pd.DataFrame, col: str, where: str, *, minimum: float | None = None,
             maximum: float | None = None, integer: bool = False) -> pd.Series:
    """``frame[col]`` as floats; the first bad cell raises naming its 1-based row."""
    raw = frame[col]
    v = pd.to_numeric(raw, errors="coerce").astype(float).to_numpy()
    bad = ~np.isfinite(v)
    bad |= (v < minimum) if minimum is not None else False
    bad |= (v > maximum) if maximum is not None else False
    bad |= (v != np.round(v)) if integer else False
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        need = f"a finite {'integer' if integer else 'number'}"
        need += f" >= {minimum:g}" if minimum is not None else ""
        need += f" <= {maximum:g}" if maximum is not None else ""
        raise CostModelError(f"{where}: row {i + 1}: column {col!r} is {_show(raw.iloc[i])} (need {need})")
    return pd.Series(v, index=frame.index)


def _optional_time(frame: pd.DataFrame, col: str, where: str) -> pd.Series:
    """``frame[col]`` as seconds >= 0, an empty cell NaN (a row that did not measure it)."""
    raw = frame[col]
    empty = raw.isna().to_numpy() | raw.astype(str).str.strip().isin(["", "nan", "NaN"]).to_numpy()
    v = pd.to_numeric(raw.where(~empty), errors="coerce").astype(float).to_numpy()
    bad = ~empty & ~(np.isfinite(v) & (v >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise CostModelError(f"{where}: row {i + 1}: column {col!r} is {_show(raw.iloc[i])} "
                             "(need seconds >= 0, or empty)")
    return pd.Series(np.where(empty, np.nan, v), index=frame.index)


def _show(value: Any) -> str:
    """A cell as the message shows it: quoted text as read, or the plain number."""
    return repr(value) if isinstance(value, str) else repr(getattr(value, "item", lambda: value)())


def _text(frame: pd.DataFrame, col: str, where: str, allowed: Iterable[str] | None = None) -> pd.Series:
    values = frame[col].astype(str)
    allowed = tuple(allowed) if allowed is not None else None
    for i, v in enumerate(values):
        if not v or v.lower() == "nan":
            raise CostModelError(f"{where}: row {i + 1}: column {col!r} is empty")
        if allowed is not None and v not in allowed:
            raise CostModelError(f"{where}: row {i + 1}: column {col!r} is {v!r} (one of {list(allowed)})")
    return values


def validate_ops(frame: pd.DataFrame, kinds: Mapping[str, str], *, where: str = "ops.csv") -> pd.DataFrame:
    """A checked, typed copy of an ``ops.csv`` frame (strings as read from the file,
    or values from the profiler). ``kinds``: profile device name -> kind."""
    _require_columns(frame, OPS_COLUMNS, where)
    out = frame.copy()
    for col in TEXT_COLUMNS:
        out[col] = _text(frame, col, where)
    for i, (dev, kind) in enumerate(zip(out["device"], out["device_kind"])):
        if dev not in kinds:
            raise CostModelError(f"{where}: row {i + 1}: device {dev!r} is not in the manifest ({sorted(kinds)})")
        if kind != kinds[dev]:
            raise CostModelError(
                f"{where}: row {i + 1}: device_kind {kind!r} but the manifest says {dev!r} is {kinds[dev]!r}"
            )
    for col in _TIME_COLUMNS:
        out[col] = _numeric(frame, col, where, minimum=0.0)
    out["repeats"] = _numeric(frame, "repeats", where, minimum=1.0, integer=True).astype(int)
    out["batch"] = _numeric(frame, "batch", where, minimum=1.0, integer=True).astype(int)
    for col in FEATURE_COLUMNS:
        out[col] = _numeric(frame, col, where)
    if "launch_s" in frame:
        out["launch_s"] = _optional_time(frame, "launch_s", where)
    key = out["signature"] + "\x00" + out["device"] + "\x00" + out["backend"]
    dup = key.duplicated(keep="first").to_numpy()
    if dup.any():
        i = int(np.flatnonzero(dup)[0])
        first = int(np.flatnonzero((key == key.iloc[i]).to_numpy())[0])
        raise CostModelError(
            f"{where}: row {i + 1}: duplicate of row {first + 1} (same signature, device "
            f"{out['device'].iloc[i]!r} and backend {out['backend'].iloc[i]!r})"
        )
    return out.reset_index(drop=True)


def validate_links(frame: pd.DataFrame, kinds: Mapping[str, str], *, where: str = "links.csv") -> pd.DataFrame:
    """A checked, typed copy of a ``links.csv`` frame."""
    _require_columns(frame, LINKS_COLUMNS, where)
    out = frame.copy()
    for col in ("src", "dst"):
        out[col] = _text(frame, col, where, allowed=list(kinds))
    out["direction"] = _text(frame, "direction", where, allowed=_DIRECTIONS)
    for col in ("pinned", "concurrent"):
        out[col] = _numeric(frame, col, where, minimum=0.0, maximum=1.0, integer=True).astype(int)
    out["bytes"] = _numeric(frame, "bytes", where, minimum=0.0, integer=True).astype("int64")
    out["time_s"] = _numeric(frame, "time_s", where, minimum=0.0)
    return out.reset_index(drop=True)


def validate_link_fits(
    data: Any, kinds: Mapping[str, str], *, where: str = "links.json"
) -> tuple[dict[str, dict[str, Any]], bool | None]:
    """Check a ``links.json`` object; returns ``(fits, duplex)``."""
    if not isinstance(data, dict):
        raise CostModelError(f"{where}: must be a JSON object")
    duplex = data.get("duplex")
    if duplex is not None and not isinstance(duplex, bool):
        raise CostModelError(f"{where}: 'duplex' must be true or false, got {duplex!r}")
    fits: dict[str, dict[str, Any]] = {}
    for key, fit in data.items():
        if key == "duplex":
            continue
        src, sep, dst = key.partition("->")
        if not sep or src not in kinds or dst not in kinds:
            raise CostModelError(f"{where}: key {key!r} must be 'SRC->DST' with manifest devices ({sorted(kinds)})")
        if not isinstance(fit, dict):
            raise CostModelError(f"{where}: {key!r} must be an object")
        for field, strict in (("latency_s", False), ("bandwidth_bytes_per_s", True)):
            v = fit.get(field)
            if not _finite(v) or v < 0 or (strict and v == 0):
                raise CostModelError(f"{where}: {key!r}: {field!r} is {v!r} (need a finite number {'> 0' if strict else '>= 0'})")
        fits[key] = dict(fit)
    return fits, duplex


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def validate_dispatch(data: Any, kinds: Mapping[str, str], *, where: str = "dispatch.json") -> dict[str, float]:
    """Check a ``dispatch.json`` object: manifest device -> finite seconds >= 0."""
    if not isinstance(data, dict):
        raise CostModelError(f"{where}: must be a JSON object")
    out: dict[str, float] = {}
    for dev, v in data.items():
        if dev not in kinds:
            raise CostModelError(f"{where}: device {dev!r} is not in the manifest ({sorted(kinds)})")
        if not _finite(v) or v < 0:
            raise CostModelError(f"{where}: device {dev!r}: {v!r} (need a finite time >= 0)")
        out[dev] = float(v)
    return out
