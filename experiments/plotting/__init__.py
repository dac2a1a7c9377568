"""Charts: the comparison, sweep and validation charts (:mod:`~experiments.plotting.charts`),
Gantt charts of simulated and measured runs (:mod:`~experiments.plotting.gantt`) and the
house style every figure shares (:mod:`~experiments.plotting.style`)."""
