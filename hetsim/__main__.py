"""``python -m hetsim``: the ``hetsim`` command line."""

import sys

from hetsim.experiments.cli.main import main

sys.exit(main())
