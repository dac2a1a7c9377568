"""Caches hetsim reads back are trusted only when no one else could have written them.

A cache folder (the zoo's imported graphs, the GPU cost model's fitted models) is used
only while it is a folder of this user's that no other user may write (group and
others without write permission; a default folder is created private, mode 0700). A
folder that fails these checks turns that disk cache off with a :class:`CacheWarning`:
the work is done again, never read from a file another user could have edited.

Each file is read through one open file descriptor (no link followed), and used only
when that descriptor is a regular file of this user's that no one else may write: the
check and the read see the same file, so swapping the file in between changes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
import warnings
from pathlib import Path

__all__ = ["CacheWarning", "read_own_file", "usable_folder"]


class CacheWarning(UserWarning):
    """A cache folder is not private to this user: its disk cache is off."""


def _problem(st: os.stat_result) -> str | None:
    """Why a file or folder of these stats is not this user's alone to write, or None."""
    uid = os.getuid()
    if st.st_uid != uid:
        return f"belongs to user id {st.st_uid}, not to this user ({uid})"
    if st.st_mode & 0o022:
        return f"may be written by other users (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def usable_folder(folder: str | os.PathLike[str], *, what: str) -> Path | None:
    """FOLDER, created private (0700) when missing, when it is a folder (not a link) of
    this user's that no other user may write; else None, with a :class:`CacheWarning`
    naming WHAT (``"zoo graph cache"``) and why.

    >>> import tempfile
    >>> usable_folder(tempfile.mkdtemp(), what="example cache") is not None
    True
    """
    folder = Path(folder)
    if not hasattr(os, "getuid"):  # pragma: no cover - Windows: no owner to check
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = folder.lstat()
        problem = "is not a folder" if not stat.S_ISDIR(st.st_mode) else _problem(st)
    except OSError as e:
        problem = f"cannot be used ({e.strerror or e})"
    if problem is not None:
        warnings.warn(f"{what} {folder} {problem}: it is not used", CacheWarning, stacklevel=3)
        return None
    return folder


def read_own_file(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of the cache file PATH, or None when it is missing, a link, not a regular
    file, or not this user's alone to write (a cache miss: the caller rebuilds it).

    Read through the descriptor whose owner and mode were checked.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.EACCES, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or (hasattr(os, "getuid") and _problem(st) is not None):
            return None
        return fh.read()
