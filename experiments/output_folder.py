"""Replace a command's output files in a folder all at once, or not at all.

A command that writes several files (``hetsim compare --out``: a table, plans,
charts) must not leave its folder half new, half old when something fails while
it saves. :func:`replace_outputs` has the files written into a staging folder
inside the output folder; only when all of them are written do they replace the
previous run's (every name the command owns is moved aside first, so a file the
new run does not write does not survive from the old one either). Files in the
folder that the command does not own are left alone.

An output folder is written by one process at a time: :func:`lock_folder` holds an
exclusive lock on its ``.hetsim.lock`` file (which records the holder's pid) while
a command writes there; a second writer is refused at once with
:class:`FolderLockedError` naming that pid. Sweeps (``results.csv``) and
:func:`replace_outputs` take the same lock.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hetsim.graphs.files import open_own_file

__all__ = ["LOCK_FILE", "FolderLockedError", "lock_folder", "replace_outputs"]

#: the lock file of an output folder
LOCK_FILE = ".hetsim.lock"


class FolderLockedError(RuntimeError):
    """Another process is writing into the output folder; the message names its pid."""


@contextmanager
def lock_folder(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the exclusive write lock of ``folder`` (created when missing) while the
    ``with`` block runs.

    A POSIX record lock (``fcntl.lockf``) on ``folder/.hetsim.lock``: it dies with its
    process (a killed writer leaves no stale lock), and worker processes forked while
    it is held do not inherit it. The lock file is opened without following a link
    (a link or anything but a regular file there is refused) and removed when the
    lock is released; a writer that locked a lock file removed meanwhile tries again.
    Where ``fcntl`` is missing (Windows) nothing is locked.

    Raises
    ------
    FolderLockedError
        when another process holds the lock: ``"out: locked by pid 1234 (another hetsim
        command is writing there)"``.
    OSError
        when ``folder/.hetsim.lock`` is a link or not a regular file.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield folder
        return
    path = folder / LOCK_FILE
    while True:
        fd = open_own_file(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            raise FolderLockedError(f"{folder}: locked by pid {holder} (another hetsim command is writing "
                                    "there)") from None
        try:
            same = os.path.samestat(os.fstat(fd), os.lstat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # its holder removed it as we opened it: lock the one there now
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield folder
    finally:
        try:
            os.unlink(path)  # still held: a writer that opened it finds it gone and tries again
        except FileNotFoundError:
            pass
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN)
            os.close(fd)


def replace_outputs(out: str | os.PathLike[str], write: Callable[[Path], None], owned: Iterable[str]) -> Path:
    """Fill a staging folder with ``write(stage)``, then swap it into ``out``.

    Parameters
    ----------
    out
        The output folder (created when missing).
    write
        Writes the outputs into the folder it is given; may raise, in which case
        ``out`` is left exactly as it was.
    owned
        Top-level names (files or folders) that the outputs consist of: these are
        replaced as a whole, and ``write`` may create nothing else.

    Returns
    -------
    pathlib.Path
        ``out``.
    """
    out = Path(out)
    owned = set(owned)
    with lock_folder(out):
        _clean_up_interrupted(out)
        return _replace(out, write, owned)


def _clean_up_interrupted(out: Path) -> None:
    """Remove what a writer killed mid-way left (the lock is held: nobody else writes):
    staging folders, and the previous outputs it had moved aside, which go back where
    nothing replaced them."""
    for stale in sorted(out.glob(".staging-*")):
        shutil.rmtree(stale, ignore_errors=True)
    for previous in sorted(out.glob(".previous-*")):
        for entry in sorted(previous.iterdir()):
            if not os.path.lexists(out / entry.name):
                os.replace(entry, out / entry.name)
        shutil.rmtree(previous, ignore_errors=True)


def _replace(out: Path, write: Callable[[Path], None], owned: set[str]) -> Path:
    stage = Path(tempfile.mkdtemp(prefix=".staging-", dir=out))
    try:
        write(stage)
        stray = sorted(p.name for p in stage.iterdir() if p.name not in owned)
        if stray:
            raise ValueError(f"outputs {stray} are not among the names the command owns {sorted(owned)}")
        previous = Path(tempfile.mkdtemp(prefix=".previous-", dir=out))
        moved_aside: list[str] = []
        moved_in: list[str] = []
        try:
            for name in sorted(owned):
                if os.path.lexists(out / name):
                    os.replace(out / name, previous / name)
                    moved_aside.append(name)
            for entry in sorted(stage.iterdir()):
                os.replace(entry, out / entry.name)
                moved_in.append(entry.name)
        except BaseException:  # put the previous run back as it was
            for name in moved_in:
                _remove(out / name)
            for name in moved_aside:
                os.replace(previous / name, out / name)
            previous.rmdir()  # empty again (left in place, with the old files, if not)
            raise
        shutil.rmtree(previous, ignore_errors=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
