"""How one simulation runs: :class:`SimOptions`, the options of :func:`sim.simulate`,
:meth:`Simulator.simulate <sim.engine.simulator.Simulator.simulate>`,
:meth:`Scheduler.run <schedulers.base.Scheduler.run>` and :func:`schedulers.run_plan`,
passed whole from the function a user calls to the engine run that reads them; each
of those also takes the options as keyword arguments (:class:`hetsim.options.KeywordOptions`).

Examples
--------
>>> from hetsim.sim.options import SimOptions
>>> busy = SimOptions(requests=8, interval_s=0.001)
>>> busy.with_keywords({"seed": 3}, "simulate").seed
3
>>> SimOptions(noise=-1)
Traceback (most recent call last):
...
hetsim.sim.engine.state.SimulationError: noise must be a finite number >= 0, got -1
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from hetsim.options import KeywordOptions
from hetsim.sim.engine.state import SimulationError

__all__ = ["SimOptions"]


@dataclass(frozen=True)
class SimOptions(KeywordOptions):
    """How one simulation runs (:func:`sim.simulate`).

    Parameters
    ----------
    requests
        Inference requests (or micro-batches) that flow through the plan, arriving
        every ``interval_s``. ``None``: ``plan.microbatches`` or 1.
    interval_s
        Time between request arrivals (0: all arrive at once, a batch).
    record
        Keep one record per op, transfer hop and dispatch (``SimResult.records``).
    seed, noise
        ``noise`` is the coefficient of variation of a mean-one log-normal factor
        applied to every kernel and transfer hop; ``seed`` seeds it (and
        ``view.rng``, a :class:`numpy.random.Generator` that dynamic policies may use).
    check_memory
        Raise :class:`~sim.engine.state.SimulationError` when a device's memory
        overflows (default); ``False``: finish the run and report it in
        ``SimResult.failures``.

    The request count and the interval are checked against each other when the
    simulation starts (the plan may give the count: ``check_arrivals``); ``noise`` here.
    """

    requests: int | None = None
    interval_s: float = 0.0
    record: bool = False
    seed: int | None = None
    noise: float = 0.0
    check_memory: bool = True

    def __post_init__(self) -> None:
        noise = self.noise
        if isinstance(noise, bool) or not isinstance(noise, numbers.Real) or not math.isfinite(noise) or noise < 0:
            raise SimulationError(f"noise must be a finite number >= 0, got {noise!r}")
