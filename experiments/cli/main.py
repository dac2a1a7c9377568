"""The ``hetsim`` command line.

Each subcommand lives in its own module ``experiments/cli/<name>.py`` with
``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports (torch, TVM)
happen inside ``run`` so that ``hetsim --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from hetsim.graphs.graph import GraphError

#: subcommand modules, in the order ``hetsim --help`` lists them
SUBCOMMANDS = ["graph", "replay", "simulate", "compare", "profile", "profile_import", "costmodel", "calibrate", "validate", "sweep",
               "plot",
               "llm"]


#: packages hetsim installs only with an extra -> what a command that needs one says
OPTIONAL_PACKAGES = {
    "torch": "this needs PyTorch (the model zoo, model import, execution and profiling), which hetsim "
             "installs only with its 'torch' extra: pip install torch --index-url "
             "https://download.pytorch.org/whl/cpu (the CPU build), or pip install 'hetsim[torch]'",
}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def version_text() -> str:
    """``hetsim 0.1.0 (git 1ac8187, /path/to/checkout)``: the version, and which code runs."""
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    import hetsim

    root = Path(hetsim.__file__).resolve().parent.parent
    where = [str(root)]
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"],
                                 capture_output=True, text=True, timeout=5, check=True)  # fmt: skip
            where.insert(0, f"git {out.stdout.strip()}")
        except (OSError, subprocess.SubprocessError):
            pass
    return f"hetsim {hetsim.__version__} ({', '.join(where)})"


class _VersionAction(argparse.Action):
    """``--version``: computed only when asked (it may run git)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_text())
        parser.exit()


def one_line_warning(prefix: str) -> Callable[..., None]:
    """A :func:`warnings.showwarning` that prints ``PREFIX: warning: MESSAGE`` on one
    line of stderr: a command-line user is told what is wrong, not which line of
    hetsim's source noticed it."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:  # fmt: skip
        text = " | ".join(part.strip() for part in str(message).splitlines() if part.strip())
        print(f"{prefix}: warning: {text}", file=file or sys.stderr)

    return show


def os_error_text(e: OSError) -> str:
    """One line for an error of the operating system: the path, then what went wrong
    (``out/x: Is a directory``, ``out/x: No space left on device``)."""
    what = e.strerror or str(e) or type(e).__name__
    if e.filename is None:
        return what
    other = f" -> {e.filename2}" if e.filename2 is not None else ""
    return f"{e.filename}{other}: {what}"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only`` (a subcommand's module name), that subcommand's
    alone: a command imports what its own subcommand needs, not what every other one does."""
    parser = argparse.ArgumentParser(
        prog="hetsim",
        description="Simulate DNN execution on CPU-GPU platforms and compare schedulers.",
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(f"hetsim.experiments.cli.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"hetsim.experiments.cli.{name}":
                continue  # subcommand not shipped in this version
            raise
        p = mod.add_parser(sub)
        p.set_defaults(run_command=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hetsim`` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["profile", "import"]:  # 'hetsim profile import' is a command of its own
        argv = ["profile-import", *argv[2:]]
    first = argv[0].replace("-", "_") if argv else ""
    parser = build_parser(first if first in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if getattr(args, "run_command", None) is None:
        parser.print_help()
        return 1
    # lazy: a command's module loads only what its parser needs (hetsim --help)
    from hetsim.costmodel.base import CostModelError
    from hetsim.costmodel.platform import PlatformError
    from hetsim.experiments.output_folder import FolderLockedError
    from hetsim.schedulers.base import SchedulerError
    from hetsim.sim.engine.state import SimulationError
    from hetsim.sim.plan import PlanError

    user_errors: tuple[type[BaseException], ...] = (
        CLIError,
        GraphError,
        PlatformError,
        PlanError,
        CostModelError,
        SchedulerError,
        SimulationError,
        FolderLockedError,
    )
    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line_warning(f"hetsim {args.command}")
            return int(args.run_command(args) or 0)
    except user_errors as e:
        print(f"hetsim {args.command.replace('-', ' ')}: error: {e}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:
        if e.name not in OPTIONAL_PACKAGES:
            raise
        print(f"hetsim {args.command.replace('-', ' ')}: error: {OPTIONAL_PACKAGES[e.name]}", file=sys.stderr)
        return 2
    except OSError as e:  # a path the command reads or writes: a folder, under a file, read-only, disk full
        print(f"hetsim {args.command.replace('-', ' ')}: error: {os_error_text(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hetsim {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
