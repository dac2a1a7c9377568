"""Parameter sweeps: a TOML grid, run point by point on local processes or a Dask cluster.

The package, one concept per module:

=======================  ==========================================================
:mod:`.spec`             :class:`Sweep`: the TOML grid (format there), checked up front
:mod:`.point`            :class:`Point` and :func:`run_point`: one simulation, one row
:mod:`.caches`           per-process graph, cost-model and platform caches
:mod:`.results`          :class:`ResultsFile` (``results.csv``), :func:`load_results`
:mod:`.runners`          :func:`run_many`: in-process, local processes, Dask
:mod:`.run`              :func:`run_grid`, :func:`run_sweep`: points into a results folder
=======================  ==========================================================

Results are appended to ``OUT/results.csv`` as points finish (one tidy row per
point, columns :data:`COLUMNS`), flushed per row and fsynced at least every
second; a re-run skips points already in the file (by point id), and a partial
last line left by a killed run is dropped. A point that raises gives a row with
``status="error"`` and the message in ``error`` (traceback in ``OUT/errors.log``);
``retry_errors=True`` runs those points again. Worker processes exit with the
sweep, even when it is killed.

Examples
--------
>>> from hetsim.experiments.sweep import Sweep, run_sweep
>>> sweep = Sweep.from_dict({"name": "demo", "grid": {
...     "model": "lstm", "platform": "xeon-p2200", "scheduler": ["all-gpu", "heft"],
...     "link_bandwidth": [0.5, 1, 2]}, "model_args": {"lstm": {"seq_len": 4, "hidden": 32}}})
>>> len(sweep.points())
6
>>> df = run_sweep(sweep, "out/demo", workers=2)  # doctest: +SKIP
"""

from hetsim.experiments.sweep.caches import (
    GRAPH_CACHE_SIZE,
    canonical,
    clear_caches,
    graph_cache_info,
    load_graph,
    make_cost,
    make_platform,
)
from hetsim.experiments.sweep.point import (
    COLUMNS,
    METRIC_COLUMNS,
    OVERRIDES,
    PARAM_COLUMNS,
    Point,
    one_line,
    point_id,
    run_chunk,
    run_point,
    simulate_point,
)
from hetsim.experiments.sweep.results import (
    ERRORS_LOG,
    RESULTS,
    ResultsFile,
    git_commit,
    hetsim_version,
    load_results,
)
from hetsim.experiments.sweep.run import pending_points, run_grid, run_sweep
from hetsim.experiments.sweep.runners import exit_with_parent, run_many
from hetsim.experiments.sweep.spec import GRID_KEYS, Sweep, SweepError

__all__ = [
    "COLUMNS", "ERRORS_LOG", "GRAPH_CACHE_SIZE", "GRID_KEYS", "METRIC_COLUMNS", "OVERRIDES",
    "PARAM_COLUMNS", "RESULTS", "Point", "ResultsFile", "Sweep", "SweepError", "canonical",
    "graph_cache_info", "point_id",
    "clear_caches", "exit_with_parent", "git_commit", "hetsim_version", "load_graph",
    "load_results", "make_cost", "make_platform", "one_line", "pending_points", "run_chunk",
    "run_grid", "run_many", "run_point", "run_sweep", "simulate_point",
]  # fmt: skip
