"""Replace a command's output files in a folder all at once, or not at all.

A command that writes several files (``hetsim compare --out``: a table, plans,
charts) must not leave its folder half new, half old when something fails while
it saves. :func:`replace_outputs` has the files written into a staging folder
inside the output folder; only when all of them are written do they replace the
previous run's (every name the command owns is moved aside first, so a file the
new run does not write does not survive from the old one either). Files in the
folder that the command does not own are left alone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["replace_outputs"]


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
    out.mkdir(parents=True, exist_ok=True)
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
