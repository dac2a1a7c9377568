"""Files hetsim writes: never through a planted link, never replacing what is not a file.

Every writer of hetsim goes through these functions:

- :func:`atomic_write` writes a file the user named (``--out``, ``--json``, ``--trace``)
  or one of a command's outputs. A regular file (or a missing one) is replaced
  atomically through a temporary sibling. A device or a FIFO (``/dev/null``, a pipe
  to another program) is written through, never replaced by a regular file. A
  symbolic link is refused, except one to a device or a FIFO (``/dev/stdout``), which
  is written through to it: a link planted in an output folder
  (``OUT/results.csv -> ~/.bashrc``) can make hetsim write nothing outside the folder.
- :func:`open_own_file` opens a file hetsim keeps in a folder (a lock file, a log it
  appends to, a results table it extends) without following a link, and only when it
  is a regular file.

A refused path raises :class:`OSError` with the path as its ``filename``, which the
command line prints as one line.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

__all__ = ["atomic_write", "open_own_file", "refuse_link"]

#: what a refused link says
LINK_REFUSED = "is a symbolic link: hetsim writes through no link but one to a device or a FIFO (name the file itself)"


def refuse_link(path: str | os.PathLike[str]) -> None:
    """Raise :class:`OSError` when PATH is a symbolic link (to anything).

    >>> refuse_link("/nonexistent-path-for-the-example")  # missing: nothing to refuse
    """
    if os.path.islink(path):
        raise OSError(errno.ELOOP, "is a symbolic link: hetsim opens its own files through no link", str(path))


def open_own_file(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` of a file hetsim keeps in a folder, with ``O_NOFOLLOW``: a link there
    is refused, and so is anything but a regular file (a FIFO, a device, a folder).

    Parameters
    ----------
    path
        The file.
    flags
        ``os.O_*`` flags (``O_NOFOLLOW`` and ``O_CLOEXEC`` are added).
    mode
        Permission bits of a file created (the umask applies).

    Returns
    -------
    int
        An open file descriptor, the caller's to close.
    """
    try:  # O_NONBLOCK: a FIFO planted there must not hang the open; refused below
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link: hetsim opens its own files through no link",
                          str(path)) from None
        if e.errno == errno.ENXIO:  # a FIFO with no reader
            raise OSError(errno.EINVAL, "is not a regular file (hetsim keeps only regular files there)",
                          str(path)) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "is not a regular file (hetsim keeps only regular files there)", str(path))
    os.set_blocking(fd, True)
    return fd


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[Any]], Any], *, binary: bool = False) -> Path:
    """Write a text (or, with ``binary``, a bytes) file atomically: ``write(fh)`` fills a
    temporary file in the same folder, which then replaces ``path``; on any failure
    ``path`` is left as it was.

    The contents are flushed to disk before the rename. A device or a FIFO at ``path``
    (or a link to one, ``/dev/stdout``) is written through instead, never replaced; any
    other link is refused (:data:`LINK_REFUSED`). Used by every hetsim writer of graph,
    plan, profile, cost-model and result files.

    Raises
    ------
    OSError
        with ``path`` as its filename: a link refused, a folder, a full disk.
    """
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        st = None  # mkdir below names the file in the way
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            target = None
        if target is None or not (stat.S_ISCHR(target.st_mode) or stat.S_ISFIFO(target.st_mode)):
            raise OSError(errno.ELOOP, LINK_REFUSED, str(path))
        return _write_through(path, write, binary)
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISBLK(st.st_mode)
                           or stat.S_ISSOCK(st.st_mode)):  # fmt: skip
        if stat.S_ISBLK(st.st_mode) or stat.S_ISSOCK(st.st_mode):
            raise OSError(errno.EINVAL, "is a block device or a socket, not a file hetsim writes", str(path))
        return _write_through(path, write, binary)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    # a fresh hidden sibling, created here so that the umask applies (mkstemp gives 0600);
    # "x" is O_CREAT | O_EXCL, which follows no link
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") if binary else open(tmp, "x", newline="", encoding="utf-8") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk fails a write or fsync, which name no file: name ``path``
        Path(tmp).unlink(missing_ok=True)
        if e.filename is None and e.errno is not None:
            raise type(e)(e.errno, e.strerror or os.strerror(e.errno), str(path)) from e
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _write_through(path: Path, write: Callable[[IO[Any]], Any], binary: bool) -> Path:
    """Write into the character device or FIFO at PATH (or that PATH links to) as it is:
    no temporary file, no replacement; a regular file found there by then is refused."""
    fd = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):  # swapped for a file since it was looked at
            raise OSError(errno.EINVAL, "changed into a regular file while hetsim opened it", str(path))
        with os.fdopen(fd, "wb" if binary else "w", newline=None if binary else "",
                       encoding=None if binary else "utf-8", closefd=True) as fh:  # fmt: skip
            fd = -1
            write(fh)
            fh.flush()
    except OSError as e:
        if e.filename is None and e.errno is not None:
            raise type(e)(e.errno, e.strerror or os.strerror(e.errno), str(path)) from e
        raise
    finally:
        if fd >= 0:
            os.close(fd)
    return path
