"""How a validation runs and measures each plan: one frozen set of options that
:func:`~runtime.validation.validate.validate`, ``validate_all`` and the rounds they run
share, checked once when it is made (each of them also takes the options as keyword
arguments, :class:`hetsim.options.KeywordOptions`); each execution's own options
(:class:`~runtime.executor.options.ExecutionOptions`) come from it.

Examples
--------
>>> from hetsim.runtime.validation.options import ValidationOptions
>>> quick = ValidationOptions(warmup=1, repeats=3, replicas=1)
>>> quick.with_keywords({"repeats": 5}, "validate").repeats
5
>>> ValidationOptions(replicas=0)
Traceback (most recent call last):
...
ValueError: replicas must be an int >= 1 (executions of each plan), got 0
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hetsim.options import KeywordOptions
from hetsim.runtime.executor.options import ExecutionOptions
from hetsim.runtime.validation.result import check_statistic
from hetsim.runtime.validation.rounds import check_replicas

__all__ = ["ValidationOptions"]


@dataclass(frozen=True)
class ValidationOptions(KeywordOptions):
    """How each plan of a validation is run, measured and simulated.

    Parameters
    ----------
    backend, warmup, repeats, device_map, seed
        As :func:`runtime.execute`.
    requests
        Requests per run, in the execution and in the simulation (None: one).
    replicas
        Each plan measured as this many executions, each built apart (its own buffers
        and threads), run in the same interleaved rounds, their ``replicas * repeats``
        timed runs pooled (:mod:`runtime.validation.rounds`).
    launch
        How a plan's GPU ops are launched, in the run and in the simulation:
        ``"graph"`` (default where the plan uses a GPU) or ``"eager"``
        (:func:`~runtime.validation.cuda_host.plan_launch`).
    statistic
        The statistic of the measured makespans set beside the simulation:
        ``"median"``, ``"mean"`` or None (the validation's default).
    trace
        Whether a traced run of each plan adds per-op GPU times (:func:`runtime.execute`).
    """

    backend: str = "torch"
    warmup: int = 3
    repeats: int = 10
    requests: int | None = None
    device_map: Mapping[str, str] | None = None
    seed: int | None = None
    replicas: int = 3
    launch: str | None = None
    statistic: str | None = None
    trace: bool = False

    def __post_init__(self) -> None:
        check_replicas(self.replicas)
        check_statistic(self.statistic)
        self.execution()  # warmup, repeats, requests checked as the executor checks them

    def execution(self, launch: str | None = None) -> ExecutionOptions:
        """The options of a plan's execution (:func:`runtime.execute`) with these
        settings and launch mode ``launch`` (None: the executor's default)."""
        return ExecutionOptions(backend=self.backend, warmup=self.warmup, repeats=self.repeats,
                                requests=self.requests, device_map=self.device_map, seed=self.seed,
                                replicas=self.replicas, launch=launch, trace=self.trace)
