"""How a validation runs and measures each plan: one frozen set of options that
:func:`~runtime.validation.validate.validate`, ``validate_all`` and the rounds they run
share, checked once when it is made.

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

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hetsim.runtime.validation.result import check_statistic
from hetsim.runtime.validation.rounds import check_replicas

__all__ = ["ValidationOptions"]


@dataclass(frozen=True)
class ValidationOptions:
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

    def with_keywords(self, keywords: Mapping[str, Any], caller: str) -> ValidationOptions:
        """These options with ``keywords`` (option names, as ``caller`` took them) set;
        :class:`TypeError` naming a keyword that is no option."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(keywords) - names)
        if unknown:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r} "
                            f"(options: {', '.join(sorted(names))})")
        return dataclasses.replace(self, **keywords) if keywords else self

    @classmethod
    def of(cls, options: ValidationOptions | None, keywords: Mapping[str, Any], caller: str) -> ValidationOptions:
        """``options`` (default: the defaults) with ``keywords`` set (:meth:`with_keywords`)."""
        if options is not None and not isinstance(options, ValidationOptions):
            raise TypeError(f"{caller}(): options must be ValidationOptions, got {type(options).__name__}")
        return (options or cls()).with_keywords(keywords, caller)
