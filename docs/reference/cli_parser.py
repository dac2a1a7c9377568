"""The ``hetsim`` parser as the command reference renders it (``reference/cli.md``).

sphinx-argparse reads each subcommand's epilog as reStructuredText; the epilogs of
``compare`` and ``simulate`` are aligned plain-text tables (what ``--help`` prints),
so they are given to it as literal blocks, shown as ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import textwrap

from hetsim.experiments.cli.main import build_parser


def literal_epilogs(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """PARSER with the epilog of it and of every subcommand below it made a literal block.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Changed in place.

    Returns
    -------
    argparse.ArgumentParser
        The same parser.
    """
    if parser.epilog:
        parser.epilog = "::\n\n" + textwrap.indent(parser.epilog, "    ")
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                literal_epilogs(sub)
    return parser


def reference_parser() -> argparse.ArgumentParser:
    """The full ``hetsim`` parser, every subcommand included, epilogs as literal blocks."""
    return literal_epilogs(build_parser())
