"""The ``hetsim`` parser as the command reference renders it (``reference/cli.md``).

sphinx-argparse reads each subcommand's epilog as reStructuredText; the epilogs of
``compare`` and ``simulate`` are aligned plain-text tables (what ``--help`` prints),
so they are given to it as literal blocks, shown as ``--help`` shows them. Help texts
and descriptions are reStructuredText too, where ``cpu@threads`` would be read as an
e-mail address and rendered as a mailto link: their ``@`` is escaped.
"""

from __future__ import annotations

import argparse
import re
import textwrap

from hetsim.experiments.cli.main import build_parser


def parser_tree(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """PARSER and every subcommand's parser below it, PARSER first."""
    out = [parser]
    for action in parser._actions:  # noqa: SLF001 - argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub in action.choices.values():
                out += parser_tree(sub)
    return out


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
    for p in parser_tree(parser):
        if p.epilog:
            p.epilog = "::\n\n" + textwrap.indent(p.epilog, "    ")
    return parser


#: ``word@word``: what reStructuredText renders as an e-mail address
ADDRESS_AT = re.compile(r"(?<=\w)@(?=\w)")


def plain_addresses(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """PARSER with ``@`` between word characters escaped in its description and every
    option's help, and so in every subcommand below it (``cpu@threads`` stays text).

    Parameters
    ----------
    parser : argparse.ArgumentParser
        Changed in place.

    Returns
    -------
    argparse.ArgumentParser
        The same parser.
    """
    for p in parser_tree(parser):
        if p.description:
            p.description = ADDRESS_AT.sub(r"\\@", p.description)
        for action in p._actions:  # noqa: SLF001 - argparse keeps options only here
            if action.help:
                action.help = ADDRESS_AT.sub(r"\\@", action.help)
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for choice in action._choices_actions:  # noqa: SLF001 - the subcommands' one-line helps
                    if choice.help:
                        choice.help = ADDRESS_AT.sub(r"\\@", choice.help)
    return parser


def reference_parser() -> argparse.ArgumentParser:
    """The full ``hetsim`` parser, every subcommand included, epilogs as literal blocks,
    no ``word@word`` read as an e-mail address."""
    return plain_addresses(literal_epilogs(build_parser()))
