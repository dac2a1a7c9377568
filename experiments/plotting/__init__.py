"""Charts: the comparison, sweep and validation charts (:mod:`~experiments.plotting.charts`),
Gantt charts of simulated and measured runs (:mod:`~experiments.plotting.gantt`) and the
house style every figure shares (:mod:`~experiments.plotting.style`)."""

__all__ = ["AGGREGATES", "MAX_FIGURE_IN"]

#: how several rows per bar, point or cell may be combined (``agg=``, CLI ``--agg``)
AGGREGATES = ("mean", "median", "min", "max", "geomean")
#: largest figure side accepted, in inches (a figure past it would not fit in memory)
MAX_FIGURE_IN = 100.0
