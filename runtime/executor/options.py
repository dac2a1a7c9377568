"""How a plan is executed and timed on the real devices: one frozen set of options that
:func:`~runtime.executor.execute.execute`, :func:`~runtime.executor.execute.execute_wired`
and :class:`~runtime.executor.execute.Execution` share, checked once when it is made.
Each of them also takes the options as keyword arguments, which set them
(:class:`hetsim.options.KeywordOptions`).

Examples
--------
>>> from hetsim.runtime.executor.options import ExecutionOptions
>>> quick = ExecutionOptions(warmup=0, repeats=1)
>>> quick.with_keywords({"check": False}, "execute").check
False
>>> ExecutionOptions(repeats=0)
Traceback (most recent call last):
...
ValueError: repeats must be an int >= 1, got 0
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetsim.options import KeywordOptions
from hetsim.runtime.validation.rounds import check_replicas

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.runtime.backends.base import Backend

__all__ = ["ExecutionOptions"]

#: the options that say how many runs are made: :func:`execute`'s, not an
#: :class:`Execution`'s (whose ``run(n)`` calls make them)
RUN_COUNTS = ("warmup", "repeats", "replicas", "trace")


@dataclass(frozen=True)
class ExecutionOptions(KeywordOptions):
    """How a plan is executed and timed (:func:`runtime.execute`).

    Parameters
    ----------
    backend
        ``"torch"`` (vendor kernels) or ``"tvm"`` (TVM-compiled kernels), or a backend.
    warmup, repeats
        Untimed runs, then timed runs.
    seed
        Seed of the dynamic policy's ``view.rng``.
    device_map
        Platform device -> real device spec (``{"gpu": "cuda:1"}``, ``{"cpu1": "cpu@2"}``).
    requests
        Requests (micro-batches) per run, all starting together; default
        ``plan.microbatches`` or 1, as :func:`sim.simulate`.
    check
        Check the first run against the references (see :class:`RunResult`).
    rtol, atol
        Tolerance of that comparison (``atol`` relative to the largest reference
        magnitude); default :func:`runtime.executor.check.tolerance`.
    timeout_s
        Give up on a run that takes longer (a deadlock would otherwise hang).
    pin_threads
        Pin each CPU worker thread to its own cores (consecutive cores of the
        process's affinity mask, ``threads`` each) when they all fit.
    tune_malloc
        Keep freed memory in the process (glibc ``mallopt``: no ``mmap`` per large
        tensor, no trimming) so that an op's output reuses warm, mapped pages as in
        the profiler's loop, instead of page-faulting fresh ones on every run; what
        PyTorch CPU deployments get from jemalloc/tcmalloc. Process-wide, kept.
    replicas
        Measure the plan as this many executions, each built apart (its own
        buffers and worker threads), their runs interleaved in ``repeats`` rounds
        (:func:`runtime.validation.rounds.round_orders`) and pooled
        (:func:`~runtime.validation.rounds.pool_runs`: ``replicas * repeats``
        makespans): one execution's memory layout is an offset that all its runs
        share (see :mod:`runtime.validation.rounds`).
    launch
        How GPU work is launched: ``"graph"`` (each segment of a GPU's ops between
        cross-device edges captured once as a CUDA graph and replayed; the default
        for static plans on the torch backend) or ``"eager"`` (one launch per op;
        the default, and the only mode, for dynamic plans and the tvm backend).
        Ignored when no GPU takes part.
    trace
        After the timed runs, run once more with a CUDA timing event pair around
        every GPU op (launched eagerly) and copy: :attr:`RunResult.trace`.
    """

    backend: str | Backend = "torch"
    warmup: int = 3
    repeats: int = 10
    seed: int | None = None
    device_map: Mapping[str, str] | None = None
    requests: int | None = None
    check: bool = True
    rtol: float | None = None
    atol: float | None = None
    timeout_s: float = 600.0
    pin_threads: bool = True
    tune_malloc: bool = True
    replicas: int = 1
    launch: str | None = None
    trace: bool = False

    def __post_init__(self) -> None:
        for name, v, low in (("warmup", self.warmup, 0), ("repeats", self.repeats, 1)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < low:
                raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
        check_replicas(self.replicas)
        n = self.requests
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise ValueError(f"requests must be an int >= 1, got {n!r}")

    @property
    def backend_name(self) -> str:
        """The backend's name (``backend`` given by name or as a backend)."""
        return self.backend if isinstance(self.backend, str) else self.backend.name
