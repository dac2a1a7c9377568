"""The ``hetsim`` command line.

Each subcommand lives in its own module ``experiments/cli_<name>.py`` with
``add_parser(subparsers)`` and ``run(args) -> int``; heavy imports (torch, TVM)
happen inside ``run`` so that ``hetsim --help`` is instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from hetsim.graphs.graph import GraphError

#: subcommand modules, in the order ``hetsim --help`` lists them
SUBCOMMANDS = ["graph", "simulate", "compare", "profile", "profile_import", "costmodel", "validate", "sweep", "plot"]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hetsim",
        description="Simulate DNN execution on CPU-GPU platforms and compare schedulers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"hetsim.experiments.cli_{name}")
        except ModuleNotFoundError as e:
            if e.name == f"hetsim.experiments.cli_{name}":
                continue  # subcommand not shipped in this version
            raise
        p = mod.add_parser(sub)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``hetsim`` console script."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["profile", "import"]:  # 'hetsim profile import' is a command of its own
        argv = ["profile-import", *argv[2:]]
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 1
    from hetsim.costmodel.base import CostModelError
    from hetsim.schedulers.base import SchedulerError
    from hetsim.sim.engine_state import SimulationError
    from hetsim.sim.plan import PlanError
    from hetsim.sim.platform import PlatformError

    user_errors: tuple[type[BaseException], ...] = (
        CLIError,
        GraphError,
        PlatformError,
        PlanError,
        CostModelError,
        SchedulerError,
        SimulationError,
        FileNotFoundError,
    )
    try:
        return int(args._run(args) or 0)
    except user_errors as e:
        print(f"hetsim {args.command.replace('-', ' ')}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"hetsim {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
