"""``results.csv``: the one results writer of sweeps and figure scripts.

One tidy row per point, appended as points finish, flushed per row and fsynced at
least every second; a partial last line left by a killed writer is dropped when
the file is opened again, and an exclusive lock keeps two writers out of one
folder. Each writer names its columns (sweeps: :data:`~experiments.sweep.point.COLUMNS`;
every figure script its own); a file written with other columns is refused.
Every row carries the point's ``point_id`` and ``status``, which is how a re-run
knows what is done.
"""

from __future__ import annotations

import csv
import io
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from hetsim.experiments.output_folder import FolderLockedError, lock_folder
from hetsim.experiments.sweep.point import COLUMNS, METRIC_COLUMNS
from hetsim.experiments.sweep.spec import SweepError
from hetsim.graphs.files import atomic_write, open_own_file

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["ERRORS_LOG", "RESULTS", "ResultsFile", "git_commit", "hetsim_version", "load_results"]

#: file names in a results folder
RESULTS = "results.csv"
ERRORS_LOG = "errors.log"


def _cell(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    return v


class ResultsFile:
    """``results.csv``: append-only, crash-safe, one row per point.

    Opening it (as a context manager) takes an exclusive lock on the folder,
    drops a partial last line left by a killed writer and checks the header;
    :meth:`append` writes one row, flushes it to the OS and fsyncs at least every
    ``fsync_s`` seconds (and on close).

    Parameters
    ----------
    path
        The CSV file (its folder is created).
    columns
        The columns, in file order; ``point_id`` and ``status`` among them.
    fsync_s
        Longest time between two fsyncs.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, columns: Sequence[str] = COLUMNS, fsync_s: float = 1.0
    ) -> None:
        self.path = Path(path)
        self.columns = tuple(columns)
        missing = {"point_id", "status"} - set(self.columns)
        if missing:
            raise ValueError(f"results columns need {sorted(missing)}")
        self.fsync_s = fsync_s
        self._fh: Any = None
        self._lock: Any = None
        self._last_sync = 0.0

    def __enter__(self) -> ResultsFile:
        self._lock = ExitStack()
        try:  # the output folder's lock (forked workers do not inherit it, it dies with this process)
            self._lock.enter_context(lock_folder(self.path.parent))
        except FolderLockedError as e:
            self._lock = None
            raise SweepError(str(e)) from None
        try:
            self.recover()
            self._fh = self._open_append()
        except BaseException:
            self._lock.close()
            self._lock = None
            raise
        if self._fh.tell() == 0:
            self._fh.write(",".join(self.columns) + "\n")
            self._sync(force=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._sync(force=True)
            self._fh.close()
            self._fh = None
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def _open_append(self) -> IO[str]:
        """The file opened to append rows, created when missing; never through a link."""
        fd = open_own_file(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        return os.fdopen(fd, "a", newline="", encoding="utf-8")

    def recover(self) -> int:
        """Check the header, then drop a partial trailing line. Returns the bytes dropped.

        The columns are checked before anything is truncated: a file of other columns
        (a user's table, another kind of run) is refused as it is, and so is a link or
        anything but a regular file at :attr:`path`.
        """
        if not os.path.lexists(self.path):
            return 0
        fd = open_own_file(self.path, os.O_RDONLY)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read()
        keep = data.rfind(b"\n") + 1
        ours = ",".join(self.columns)
        if keep:
            header = data[: data.find(b"\n")].decode("utf-8", "replace").strip()
            if header != ours:
                old = next(csv.reader([header]), [])
                if not set(old) < set(self.columns):
                    raise SweepError(
                        f"{self.path}: written with other columns (another hetsim version, or another "
                        "kind of run?); use another output folder"
                    )
        elif data and not ours.startswith(data.decode("utf-8", "replace")):  # no line at all: not our header
            raise SweepError(f"{self.path}: not a hetsim results table (its first line is not a header of "
                             "hetsim's columns); use another output folder")  # fmt: skip
        if keep < len(data):
            with os.fdopen(open_own_file(self.path, os.O_RDWR), "r+b") as fh:
                fh.truncate(keep)
                os.fsync(fh.fileno())
            print(
                f"{self.path}: dropped a partial last line ({len(data) - keep} bytes) "
                "left by an interrupted run",
                file=sys.stderr,
            )
        if keep and header != ours:
            self._add_columns(old)
        return len(data) - keep

    def _add_columns(self, old: list[str]) -> None:
        """Rewrite a file written by an earlier version, whose columns are a subset of
        :attr:`columns`, with every column (the new ones empty in its rows), atomically."""
        rows = 0

        def write(dst: IO[str]) -> None:
            nonlocal rows
            with open(self.path, newline="", encoding="utf-8") as src:
                reader = csv.reader(src)
                next(reader)
                writer = csv.writer(dst, lineterminator="\n")
                writer.writerow(self.columns)
                for rec in reader:
                    cells = dict(zip(old, rec))
                    writer.writerow([cells.get(c, "") for c in self.columns])
                    rows += 1

        atomic_write(self.path, write)
        added = [c for c in self.columns if c not in old]
        print(f"{self.path}: added the column(s) {', '.join(added)} of this hetsim version "
              f"(empty in the {rows} row(s) written before)", file=sys.stderr)

    def append(self, row: Mapping[str, Any]) -> None:
        """Write one row (its missing columns empty; extra keys ignored) and flush it."""
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([_cell(row.get(c)) for c in self.columns])
        self._fh.write(buf.getvalue())
        self._sync()

    def _sync(self, force: bool = False) -> None:
        self._fh.flush()
        now = time.monotonic()
        if force or now - self._last_sync >= self.fsync_s:
            os.fsync(self._fh.fileno())
            self._last_sync = now

    def status(self) -> dict[str, str]:
        """point id -> status of the rows in the file (the last row wins)."""
        if not self.path.exists():
            return {}
        out = {}
        with open(self.path, newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                return {}
            i_id, i_status = header.index("point_id"), header.index("status")
            for rec in reader:
                if len(rec) == len(header):
                    out[rec[i_id]] = rec[i_status]
        return out

    def drop(self, point_ids: set[str]) -> None:
        """Rewrite the file without the rows of ``point_ids`` (atomically)."""
        if self._fh is not None:
            self._sync(force=True)
            self._fh.close()

        def write(dst: IO[str]) -> None:
            with open(self.path, newline="", encoding="utf-8") as src:
                header = src.readline()
                dst.write(header)
                i_id = header.strip().split(",").index("point_id")
                for line in src:
                    rec = next(csv.reader([line]), [])
                    if len(rec) > i_id and rec[i_id] not in point_ids:
                        dst.write(line)

        atomic_write(self.path, write)
        if self._fh is not None:
            self._fh = self._open_append()


def load_results(path: str | os.PathLike[str], *, ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Read a results table: ``results.csv``/``.parquet`` or the folder holding it.

    Malformed lines (a crash mid-write) are skipped; ``error`` is "" for ok rows;
    a point with several rows (a file that an older hetsim appended retries to)
    gives its last. With ``ids``: only the rows of those point ids, in that order.
    """
    import pandas as pd

    path = Path(path)
    if path.is_dir():
        path = path / RESULTS
    if not path.exists():
        raise FileNotFoundError(f"{path}: no results file")
    if path.suffix == ".parquet":
        df = pd.read_parquet(path)
    else:
        df = pd.read_csv(
            path,
            on_bad_lines="skip",
            dtype={"point_id": str, "model_args": str, "scheduler_args": str, "error": str},
            keep_default_na=False,
            na_values=[""],
        )
        for col in ("error", "model_args", "scheduler_args"):
            if col in df:
                df[col] = df[col].fillna("")
        for col in METRIC_COLUMNS:  # a number per cell, or empty: a word there is named, never divided
            if col in df and not pd.api.types.is_numeric_dtype(df[col]):
                numbers = pd.to_numeric(df[col], errors="coerce")
                bad = df[col].notna() & numbers.isna() & (df[col].astype(str).str.strip().str.lower() != "nan")
                if bad.any():
                    row = int(bad.to_numpy().nonzero()[0][0])
                    raise ValueError(f"{path}: column {col!r} holds {df[col].iloc[row]!r:.40} in data row "
                                     f"{row + 1}, not a number")
                df[col] = numbers
    if "point_id" in df:
        df = df.drop_duplicates("point_id", keep="last")
    if ids is None:
        return df.reset_index(drop=True)
    order = {pid: i for i, pid in enumerate(dict.fromkeys(ids))}
    df = df[df["point_id"].isin(order)]
    return df.sort_values("point_id", key=lambda s: s.map(order)).reset_index(drop=True)


def git_commit() -> str:
    """``git rev-parse HEAD`` of the hetsim checkout, or ``"unknown"``."""
    root = Path(__file__).resolve().parents[2]
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def hetsim_version() -> str:
    """The installed hetsim version, or ``"unknown"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("hetsim")
    except PackageNotFoundError:
        return "unknown"
