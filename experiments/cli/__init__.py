"""The command line, ``hetsim``: :func:`main` (in :mod:`~experiments.cli.main`) and one
module per subcommand (``add_parser``, ``run``), with the checks they share in
:mod:`~experiments.cli.common`."""

from hetsim.experiments.cli.main import main

__all__ = ["main"]
