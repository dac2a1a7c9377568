"""Plan an LLM larger than the GPU before loading it: every placement policy, predicted.

:func:`plan_llm` builds the decode step (at the full context) and the prefill (of
``prompt`` tokens) of a model, lets every LLM placement policy choose where its
weights live (:func:`schedulers.llm_names`), simulates both phases of each choice,
and returns an :class:`LLMPlanReport`: per policy prefill and decode tokens/s, time
to first token, peak memory per device, PCIe bytes per generated token and the
equivalent llama.cpp flags; :meth:`LLMPlanReport.save` writes the best plan as JSON.
``hetsim llm plan`` is its command line.

Assumptions (stated): costs are the analytic roofline unless ``cost`` says otherwise
(device peaks and bandwidths of the platform); CPU compute and PCIe transfers share
host-memory bandwidth where the platform declares the host memory a contended domain
(the LLM presets do: :mod:`sim.contention`, each drawing its own rate, both slowed in
proportion when together they exceed it); the experts of a mixture are priced at
their expectation under uniform routing.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hetsim.costmodel.base import as_cost_model
from hetsim.costmodel.platform import Platform
from hetsim.experiments.llm_flags import llama_cpp_flags
from hetsim.graphs.graph import atomic_write
from hetsim.graphs.llm import Architecture, LLMWorkload, WeightFormat, llm_graph
from hetsim.graphs.llm.simulated_model import simulated_model
from hetsim.schedulers import SchedulerError, get, llm_names, run_plan
from hetsim.schedulers.llm.residency import DEFAULT_RESERVE_BYTES, Residency, llm_devices
from hetsim.sim.plan import size_text

__all__ = ["LLMPlanReport", "PolicyPrediction", "plan_llm"]

PLAN_FORMAT = 1


@dataclass
class PolicyPrediction:
    """What one policy's placement is predicted to do (``error`` set when it has none);
    ``busy_s``: seconds each device computes in the decode step and in the prefill."""

    policy: str
    prefill_tok_s: float = math.nan
    decode_tok_s: float = math.nan
    ttft_s: float = math.nan
    memory_bytes: dict[str, int] = field(default_factory=dict)
    pcie_bytes_per_token: float = math.nan
    llama_cpp: str | None = None
    llama_cpp_note: str = ""
    residency: dict[str, Any] | None = None
    busy_s: dict[str, dict[str, float]] = field(default_factory=dict)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class LLMPlanReport:
    """Every policy's prediction for one model on one platform; :attr:`best` first choice."""

    model: str
    platform: str
    context: int
    batch: int
    prompt: int
    weights: str
    kv_dtype: str
    objective: str
    predictions: list[PolicyPrediction]

    @property
    def best(self) -> PolicyPrediction:
        """The fastest placement: highest decode tokens/s, or lowest TTFT (``objective="ttft"``)."""
        ok = [p for p in self.predictions if p.ok]
        if self.objective == "ttft":
            return min(ok, key=lambda p: p.ttft_s)
        return max(ok, key=lambda p: p.decode_tok_s)

    def table(self) -> str:
        """The predictions as an aligned text table."""
        head = ["policy", "prefill tok/s", "decode tok/s", "TTFT s", "memory", "PCIe MB/token", "llama.cpp"]
        rows = []
        for p in self.predictions:
            if not p.ok:
                rows.append([p.policy, "-", "-", "-", "-", "-", f"({p.error})"])
                continue
            mem = ", ".join(f"{d} {size_text(b)}" for d, b in p.memory_bytes.items())
            rows.append([p.policy, f"{p.prefill_tok_s:,.1f}", f"{p.decode_tok_s:,.2f}", f"{p.ttft_s:.3f}", mem,
                         f"{p.pcie_bytes_per_token / 1e6:,.1f}", p.llama_cpp or f"({p.llama_cpp_note})"])
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head) - 1)]
        lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + str(r[-1])
                 for r in [head, *rows]]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        best = self.best
        return {
            "hetsim_llm_plan": PLAN_FORMAT,
            "model": self.model, "platform": self.platform, "context": self.context, "batch": self.batch,
            "prompt": self.prompt, "weights": self.weights, "kv_dtype": self.kv_dtype,
            "objective": self.objective,
            "best": _json_safe(asdict(best)),
            "predictions": [_json_safe(asdict(p)) for p in self.predictions],
        }

    def save(self, path: str | Path) -> Path:
        """Write :meth:`to_dict` as JSON (atomically)."""
        data = self.to_dict()
        return atomic_write(path, lambda fh: json.dump(data, fh, indent=1, allow_nan=False))


def plan_llm(
    model: str | Path | Architecture,
    platform: str | Platform,
    *,
    context: int = 8192,
    batch: int = 1,
    prompt: int = 512,
    weights: str | WeightFormat | None = None,
    kv_dtype: str = "f16",
    policies: list[str] | None = None,
    objective: str = "decode",
    cost: Any = None,
    reserve_bytes: int = DEFAULT_RESERVE_BYTES,
    policy_args: dict[str, dict[str, Any]] | None = None,
) -> LLMPlanReport:
    """Predict every placement policy for ``model`` on ``platform`` (nothing is loaded).

    Parameters
    ----------
    model
        An :class:`~graphs.llm.architecture.Architecture`, a preset (``Architecture.presets()``),
        a GGUF file, a ``config.json`` or model folder
        (:func:`graphs.llm.simulated_model.simulated_model`).
    platform
        A platform preset, TOML path or :class:`Platform` with a CPU (host memory) and a GPU.
    context
        Tokens of context the KV cache holds; the decode step is priced at this length.
    batch
        Sequences decoded together.
    prompt
        Prompt tokens of the prefill that gives the time to first token (capped at ``context``).
    weights, kv_dtype
        Weight type in llama.cpp's vocabulary: a ggml type (:data:`graphs.llm.WEIGHT_FORMATS`)
        or a file type such as ``Q4_K_M``, counted as llama.cpp writes it (default ``Q4_K_M``,
        MXFP4_MOE for gpt-oss; a GGUF file's own) and KV-cache dtype (``KV_DTYPES``).
    policies
        Policy names (default: :func:`schedulers.llm_names`).
    objective
        ``"decode"`` or ``"ttft"``: what the search optimises and what :attr:`LLMPlanReport.best` ranks by.
    cost
        Cost model or spec (None: the roofline).
    reserve_bytes
        GPU memory every policy leaves free for activations.
    policy_args
        Keyword arguments per policy name, e.g. ``{"ngl": {"n_gpu_layers": 40}}`` for
        llama.cpp's ``-ngl 40`` (default: each policy chooses by memory).

    Raises
    ------
    GraphError
        unknown model or quantisation, a context longer than the model allows.
    SchedulerError
        a platform without host memory or GPU; a model that fits nowhere (needed and
        available memory per device).
    """
    model, weights = simulated_model(model, weights)
    platform = Platform.load(platform)
    host, gpu = llm_devices(platform)
    cost = as_cost_model(cost, platform=platform)
    decode = llm_graph(model, phase="decode", batch=batch, kv_length=context, context=context,
                       weights=weights, kv_dtype=kv_dtype)
    prompt = min(prompt, context)  # the prefill's tokens
    prefill = llm_graph(model, phase="prefill", batch=batch, tokens=prompt, context=context,
                        weights=weights, kv_dtype=kv_dtype)
    workload = LLMWorkload.of(decode)
    _check_fits_somewhere(decode, platform, host, gpu, reserve_bytes)
    names = list(policies) if policies is not None else llm_names()
    preds = []
    for name in names:
        kw: dict[str, Any] = {"reserve_bytes": reserve_bytes}
        if name == "llm-search":
            kw.update(objective=objective, prompt=prompt)
        kw.update((policy_args or {}).get(name, {}))
        policy = get(name, **kw)
        reason = policy.why_not(decode, platform)
        if reason is not None:
            preds.append(PolicyPrediction(name, error=reason))
            continue
        try:
            run = policy.run(decode, platform, cost)
            residency = Residency.from_dict(run.graph.meta["llm"]["residency"])
            g2, plan = residency.apply(prefill, platform)
            runs = {"decode": run.result, "prefill": run_plan(g2, platform, plan, cost).result}
        except Exception as e:  # noqa: BLE001 - a policy's failure is a row
            preds.append(PolicyPrediction(name, error=str(e).splitlines()[0]))
            continue
        preds.append(_prediction(name, residency, runs, decode, platform, batch, prompt))
    report = LLMPlanReport(workload.arch.name, platform.name, context, batch, prompt,
                           workload.weights.name, kv_dtype, objective, preds)
    if not any(p.ok for p in preds):
        raise SchedulerError(f"no policy places {report.model!r} on {platform.name!r}: "
                             + "; ".join(f"{p.policy}: {p.error}" for p in preds))
    return report


def _json_safe(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with NaN (a policy without a placement) as None: strict JSON."""
    return {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}


def _prediction(name: str, residency: Residency, runs: dict, decode, platform: Platform, batch: int,
                prompt: int) -> PolicyPrediction:
    d, p = runs["decode"], runs["prefill"]
    memory = {k: int(max(d.peak_memory.get(k, 0), p.peak_memory.get(k, 0))) for k in d.peak_memory}
    pcie = sum(d.bytes_moved.values()) / batch
    flags, note = llama_cpp_flags(residency, decode, platform)
    return PolicyPrediction(
        name, prefill_tok_s=batch * prompt / p.makespan, decode_tok_s=batch / d.makespan, ttft_s=p.makespan,
        memory_bytes=memory, pcie_bytes_per_token=pcie, llama_cpp=flags, llama_cpp_note=note,
        residency=residency.to_dict(),
        busy_s={"decode": dict(d.device_busy), "prefill": dict(p.device_busy)},
    )


def _check_fits_somewhere(graph, platform: Platform, host: str, gpu: str, reserve_bytes: int) -> None:
    need = graph.param_bytes
    g, h = platform.device(gpu), platform.device(host)
    have = max(g.memory_bytes - reserve_bytes, 0) + h.memory_bytes
    if need > have:
        w = LLMWorkload.of(graph)
        kv = sum(graph.nodes[n]["param_bytes"] for n in graph.nx if graph.nodes[n]["op"] == "attention")
        raise SchedulerError(
            f"{w.arch.name!r} ({w.weights.name} weights {size_text(need - kv)}, KV cache "
            f"{size_text(kv)} at context {w.context} x batch {w.batch}) fits nowhere on "
            f"{platform.name!r}: needs {size_text(need)}; {gpu} has {size_text(max(g.memory_bytes - reserve_bytes, 0))} "
            f"(after a {size_text(reserve_bytes)} reserve), {host} has {size_text(h.memory_bytes)}"
        )
