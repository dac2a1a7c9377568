"""Experiments: the ``hetsim`` command line, sweeps, plots and one folder per paper figure."""
