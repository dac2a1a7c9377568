"""Validation: a plan simulated and executed on this machine, the two set side by side.

:func:`~runtime.validation.validate.validate` and ``validate_all`` plan, simulate, execute
and tabulate (:mod:`~runtime.validation.result`, :mod:`~runtime.validation.table`); the
simulator's inputs are measured in the run's own interleaved rounds
(:mod:`~runtime.validation.rounds`, :mod:`~runtime.validation.inputs`): op times in
context (:mod:`~runtime.validation.context_profile`), the hand-over and the slowdown of
workers side by side (:mod:`~runtime.validation.handoff`) and, on CUDA platforms, the
executor's copies (:mod:`~runtime.validation.link_calibration`). On CUDA platforms a fresh
calibration gives the host keys and each plan runs and is simulated in its launch mode
(:mod:`~runtime.validation.cuda_host`); a dynamic plan is simulated with the decisions its
run made (:mod:`~runtime.validation.replay`).
"""
