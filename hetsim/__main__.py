"""``python -m hetsim``: the ``hetsim`` command line."""

import sys

from hetsim.experiments.cli import main

sys.exit(main())
