"""A llama.cpp plan: the flags for a model on a machine, its memory and llama-bench's numbers.

:func:`plan_llamacpp` evaluates the placement the user gives (``-ngl``, ``--n-cpu-moe``,
``-ot``) or suggests the fastest one that fits (:func:`schedulers.llm.llamacpp_fit.suggest_run`),
and returns a :class:`LlamaCppPlan`: :meth:`~LlamaCppPlan.table` prints it as llama-bench
does (``pp512`` / ``tg128`` rows), :meth:`~LlamaCppPlan.save` writes the plan JSON.

>>> from hetsim.graphs.llm.model_source import load_model
>>> from hetsim.experiments.llm_machine import machine_from_flags
>>> m = machine_from_flags("RTX 4090", ram_gb=64, ram_bw="75GB/s", threads=16)
>>> plan = plan_llamacpp(load_model("llama-3-8b", "Q4_K_M"), m, context=4096)
>>> plan.evaluation.flags()
'-ngl 33'
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hetsim.costmodel.llamacpp import AchievedRates, BackendRates, LlamaCppRun, Machine, rates_for
from hetsim.graphs.graph import atomic_write
from hetsim.graphs.llm.architecture import ModelWeights
from hetsim.schedulers import SchedulerError
from hetsim.schedulers.llm.llamacpp_fit import RunEvaluation, evaluate_run, suggest_run
from hetsim.schedulers.llm.residency import DEFAULT_RESERVE_BYTES
from hetsim.sim.plan import size_text

__all__ = ["BACKEND_LABELS", "PLAN_FORMAT", "LlamaCppPlan", "plan_llamacpp"]

#: llama-bench's names of the backends
BACKEND_LABELS = {"cuda": "CUDA", "vulkan": "Vulkan", "rocm": "ROCm", "sycl": "SYCL", "metal": "Metal", "cpu": "CPU"}

PLAN_FORMAT = "hetsim-llamacpp-plan-1"


@dataclass
class LlamaCppPlan:
    """A model, a machine and the evaluated run (``suggested``: chosen by the planner)."""

    model: ModelWeights
    machine: Machine
    context: int
    evaluation: RunEvaluation
    suggested: bool
    rates: AchievedRates
    notes: list[str] = field(default_factory=list)

    def _model_label(self) -> str:
        a = self.model.arch
        billions = self.model.parameters() / 1e9
        size = f"{billions:.0f}B" if billions >= 10 else f"{billions:.1f}B"
        if a.is_moe:
            size += f" ({a.experts}x{a.top_k} MoE)"
        return f"{a.arch} {size} {self.model.weights}"

    def table(self) -> str:
        """The predictions as llama-bench prints them (a Markdown table)."""
        e = self.evaluation
        backend = BACKEND_LABELS[self.machine.backend]
        head = ["model", "size", "params", "backend", "ngl", "test", "t/s"]
        rows = []
        for p in (e.pp, e.tg):
            rows.append([self._model_label(), f"{self.model.file_bytes / 2**30:.2f} GiB",
                         f"{self.model.parameters() / 1e9:.2f} B", backend, str(e.placement.ngl),
                         p.label, f"{p.tokens_per_s:.2f}"])
        widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
        right = {1, 2, 4, 5, 6}

        def line(r: list[str]) -> str:
            return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w)
                                     for i, (c, w) in enumerate(zip(r, widths, strict=True))) + " |"

        sep = "| " + " | ".join(("-" * (w - 1) + ":") if i in right else "-" * w for i, w in enumerate(widths)) + " |"
        return "\n".join([line(head), sep, *map(line, rows)])

    def memory_text(self) -> str:
        """Memory per device: weights, KV cache, compute buffer, and what the device has."""
        parts = []
        for dev, b in self.evaluation.placement.breakdown.items():
            have = self.machine.gpu_memory if dev == "gpu" else self.machine.host_memory
            if dev == "gpu" and self.machine.gpu_count > 1:
                dev = f"fullest of {self.machine.gpu_count} GPUs"
            parts.append(f"{dev}: {size_text(sum(b.values()))} (weights {size_text(b['weights'])}, KV "
                         f"{size_text(b['kv'])}, compute {size_text(b['compute'])})"
                         + (f" of {size_text(have)}" if have else ""))
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data (format :data:`PLAN_FORMAT`)."""
        e = self.evaluation
        return {
            "format": PLAN_FORMAT, "model": self.model.arch.name, "origin": self.model.origin,
            "weights": self.model.weights, "file_bytes": self.model.file_bytes,
            "bits_per_weight": round(self.model.bits_per_weight(), 3), "architecture": self.model.arch.to_dict(),
            "machine": self.machine.to_dict(), "context": self.context, "suggested": self.suggested,
            "flags": e.flags(), "fits": e.fits, "reserve_bytes": e.reserve,
            "memory_bytes": e.placement.memory, "memory_breakdown": e.placement.breakdown,
            "gpu_memory_bytes": list(e.placement.gpu_bytes),
            "pp": {"tokens": e.pp.tokens, "tokens_per_s": e.pp.tokens_per_s, "seconds": e.pp.seconds},
            "tg": {"tokens": e.tg.tokens, "depth": e.tg.depth, "tokens_per_s": e.tg.tokens_per_s,
                   "seconds": e.tg.seconds},
            "rates": self.rates.to_dict(), "notes": self.notes,
        }

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON (atomically), creating the folder."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        data = self.to_dict()
        return atomic_write(path, lambda fh: json.dump(data, fh, indent=1, allow_nan=False))


def plan_llamacpp(model: ModelWeights, machine: Machine, *, context: int | None = None,
                  run: LlamaCppRun | None = None, given: bool = False, prompt: int = 512, generate: int = 128,
                  rates: AchievedRates | BackendRates | None = None,
                  reserve: int = DEFAULT_RESERVE_BYTES) -> LlamaCppPlan:
    """Evaluate ``run`` (``given``: the user's placement) or suggest one for ``model`` on ``machine``.

    Parameters
    ----------
    context
        KV-cache tokens (default: the model's maximum, at most 8192).
    run
        Flags: batch sizes, flash attention, KV cache type and placement, and with
        ``given`` the placement itself.

    A context beyond the model's trained maximum is planned as llama.cpp runs it (rope
    scaling), with a note.

    Raises
    ------
    SchedulerError
        a context, prompt or generation of fewer than 2 / 1 / 1 tokens, a prompt longer than
        the context; a given placement that does not fit (needed and available memory per
        device); nothing that fits; no rates for the machine's backend.
    """
    rates = rates_for(rates or BackendRates.load(), machine)
    run = run or LlamaCppRun()
    a = model.arch
    if context is None:
        context = max(min(8192, a.max_context), prompt + generate if isinstance(prompt, int) and
                      isinstance(generate, int) else 0)
    for what, v, least in (("context", context, 2), ("prompt", prompt, 1), ("generated tokens", generate, 1)):
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise SchedulerError(f"{what} must be an int >= {least}, got {v!r}")
    if prompt > context:
        raise SchedulerError(f"a prompt of {prompt} tokens is longer than the context of {context}")
    notes = []
    if context > a.max_context:
        notes.append(f"context {context} is beyond {a.name!r}'s trained maximum of {a.max_context}: llama.cpp "
                     "runs it with rope scaling (its quality is not modelled)")
    if not given:
        run = suggest_run(model, machine, context=context, rates=rates, base=run, reserve=reserve).run
    e = evaluate_run(model, machine, replace(run, threads=run.threads or machine.threads), context=context,
                     rates=rates, prompt=prompt, generate=generate, reserve=reserve)
    if not e.fits:
        raise SchedulerError(f"{e.flags()} does not fit: gpu needs {size_text(e.placement.memory['gpu'])} + a "
                             f"{size_text(reserve)} reserve, has {size_text(machine.gpu_memory)}; host needs "
                             f"{size_text(e.placement.memory['host'])}")
    notes += list(e.placement.notes)
    if given and not machine.has_gpu and run.ngl:
        notes.append(f"no GPU: -ngl {run.ngl} puts nothing on a GPU")
    return LlamaCppPlan(model, machine, context, e, not given, rates, notes)
