"""The llama.cpp flags that fit a model on a machine and run it fastest.

:func:`suggest_run` tries, as llama.cpp's users do, the largest ``-ngl`` whose GPU
memory (weights, KV cache, compute buffer: :func:`costmodel.llamacpp.place`) leaves
``reserve`` bytes free, and for a mixture of experts every layer on the GPU with the
routed experts of the fewest leading layers in host memory (``--n-cpu-moe``); of those
that fit it keeps the one with the highest predicted generation speed.
:func:`evaluate_run` prices a placement the user gives and says when it does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hetsim.costmodel.llamacpp import (
    AchievedRates,
    BackendRates,
    LlamaCppRun,
    Machine,
    Placement,
    Prediction,
    place,
    predict,
)
from hetsim.graphs.llm.architecture import ModelWeights
from hetsim.schedulers.base import SchedulerError
from hetsim.schedulers.llm.residency import DEFAULT_RESERVE_BYTES
from hetsim.sim.plan import size_text

__all__ = ["RunEvaluation", "evaluate_run", "fitting_runs", "suggest_run"]


@dataclass(frozen=True)
class RunEvaluation:
    """A run's placement, whether it fits and its predicted pp / tg speeds."""

    run: LlamaCppRun
    placement: Placement
    pp: Prediction
    tg: Prediction
    reserve: int
    fits: bool

    def flags(self) -> str:
        """The llama.cpp flags of the run."""
        parts = [f"-ngl {self.placement.ngl}"]
        if self.run.n_cpu_moe:
            parts.append(f"--n-cpu-moe {self.run.n_cpu_moe}")
        parts += [f'-ot "{p}=CPU"' for p in self.run.override_cpu]
        if self.run.flash_attn:
            parts.append("-fa 1")
        if self.run.ubatch != 512:
            parts.append(f"-ub {self.run.ubatch}")
        return " ".join(parts)


def _fits(pl: Placement, machine: Machine, reserve: int) -> bool:
    if not machine.has_gpu:
        return True
    if machine.unified_memory and machine.host_memory and pl.memory["gpu"] + pl.memory["host"] > machine.host_memory:
        return False  # one pool: the GPU's share and the host's together
    return pl.memory["gpu"] + reserve <= machine.gpu_memory


def evaluate_run(model: ModelWeights, machine: Machine, run: LlamaCppRun, *, context: int,
                 rates: AchievedRates | BackendRates,
                 prompt: int = 512, generate: int = 128, reserve: int = DEFAULT_RESERVE_BYTES) -> RunEvaluation:
    """Price ``run`` with a KV cache of ``context``: pp of ``prompt`` tokens after ``run.depth``
    cached ones, and tg of ``generate`` tokens at the depth that prompt leaves."""
    pl = place(model, run, context, has_gpu=machine.has_gpu, gpus=machine.gpu_count)
    run = replace(run, context=context)
    return RunEvaluation(run, pl, predict(model, machine, run, "pp", prompt, rates, pl),
                         predict(model, machine, replace(run, depth=run.depth + prompt), "tg", generate, rates, pl),
                         reserve, _fits(pl, machine, reserve))


def fitting_runs(model: ModelWeights, machine: Machine, *, context: int, base: LlamaCppRun | None = None,
                 reserve: int = DEFAULT_RESERVE_BYTES) -> list[LlamaCppRun]:
    """The largest ``-ngl`` that fits and, for a mixture of experts that does not fit whole,
    the smallest ``--n-cpu-moe`` with every layer on the GPU (see the module docstring).

    Raises
    ------
    SchedulerError
        nothing fits (needed and available memory).
    """
    base = base or LlamaCppRun()
    n = model.arch.layers
    if not machine.has_gpu:
        return [replace(base, ngl=0)]
    candidates = []

    def fits(run: LlamaCppRun) -> bool:
        return _fits(place(model, run, context, gpus=machine.gpu_count), machine, reserve)

    # GPU memory grows with -ngl and shrinks with --n-cpu-moe: bisect for the largest / smallest that fits
    ngl = _last_true(0, n + 1, lambda k: fits(replace(base, ngl=k, n_cpu_moe=0)))
    if ngl is not None:
        candidates.append(replace(base, ngl=ngl, n_cpu_moe=0))
    if model.arch.is_moe and (not candidates or candidates[0].ngl <= n):
        k = _last_true(-(n), -1, lambda j: fits(replace(base, ngl=n + 1, n_cpu_moe=-j)))
        if k is not None:
            candidates.append(replace(base, ngl=n + 1, n_cpu_moe=-k))
    if not candidates:
        pl = place(model, replace(base, ngl=0), context, gpus=machine.gpu_count)
        raise SchedulerError(f"{model.arch.name!r} fits no placement on {machine.name!r}: with -ngl 0 the GPU "
                             f"needs {size_text(pl.memory['gpu'] + reserve)} (with a {size_text(reserve)} reserve) "
                             f"and has {size_text(machine.gpu_memory)}")
    return candidates


def _last_true(lo: int, hi: int, ok) -> int | None:
    """The largest ``k`` in ``lo..hi`` with ``ok(k)``, for an ``ok`` true up to some ``k`` and
    false above it; None when ``ok(lo)`` is false."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def suggest_run(model: ModelWeights, machine: Machine, *, context: int, rates: AchievedRates | BackendRates,
                base: LlamaCppRun | None = None, reserve: int = DEFAULT_RESERVE_BYTES) -> RunEvaluation:
    """The fitting run of :func:`fitting_runs` with the highest predicted generation speed.

    Raises
    ------
    SchedulerError
        as :func:`fitting_runs`; the host memory too small for what stays there.
    """
    candidates = fitting_runs(model, machine, context=context, base=base, reserve=reserve)
    evals = [evaluate_run(model, machine, r, context=context, rates=rates, reserve=reserve) for r in candidates]
    best = max(evals, key=lambda e: e.tg.tokens_per_s)
    host_need = best.placement.memory["host"]
    if machine.host_memory and host_need > machine.host_memory:
        raise SchedulerError(f"{model.arch.name!r} needs {size_text(host_need)} of host memory with "
                             f"{best.flags()}; {machine.name!r} has {size_text(machine.host_memory)}")
    return best
