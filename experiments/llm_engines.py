"""The two engines of ``hetsim llm plan`` on the placement both price.

llama.cpp's engine (:func:`costmodel.llamacpp.predict`) prices a placement with the rates
llama.cpp's kernels achieve, fitted on published runs; the simulated engine
(:func:`experiments.llm_plan.plan_llm`) simulates the graph of a decode step on the
platform. Where a placement policy's residency is a llama.cpp ``-ngl N`` placement, both
price it: :func:`compare_engines` predicts that placement's decode step at the full
context with llama.cpp's engine and simulates it again on :func:`achieved_platform` (the
platform at the same achieved rates: GPU and host bandwidth, PCIe) plus llama.cpp's fixed
per-token costs (the GPU's per-token and per-layer overheads, the CPU-GPU hand-overs). The
engines agree when these two are within :data:`AGREEMENT` of each other; otherwise the
text says which part differs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from hetsim.costmodel.llamacpp import AchievedRates, predict
from hetsim.costmodel.platform import Platform
from hetsim.graphs.llm import llm_graph
from hetsim.graphs.llm.simulated_model import weight_format_of

__all__ = ["AGREEMENT", "EngineAgreement", "achieved_platform", "compare_engines"]

#: relative difference within which the two engines agree
AGREEMENT = 0.10


@dataclass(frozen=True)
class EngineAgreement:
    """Decode tokens/s of one placement by each engine (NaN where not priced)."""

    flags: str
    llamacpp_decode: float
    simulated_decode: float
    simulated_at_achieved: float
    reason: str
    llamacpp_prefill: float = float("nan")
    simulated_prefill: float = float("nan")
    prefill_reason: str = ""

    @property
    def difference(self) -> float:
        """``simulated_at_achieved / llamacpp_decode - 1``."""
        return self.simulated_at_achieved / self.llamacpp_decode - 1

    @property
    def agree(self) -> bool:
        """Whether the engines agree within :data:`AGREEMENT`."""
        return abs(self.difference) <= AGREEMENT

    def text(self) -> str:
        """One line for the plan's output."""
        if not self.flags:
            return f"engines: not compared: {self.reason}"
        head = (f"engines on {self.flags} (decode at the full context): llama.cpp {self.llamacpp_decode:,.2f} "
                f"tok/s, simulated at the same achieved rates {self.simulated_at_achieved:,.2f} "
                f"({100 * self.difference:+.1f} %), simulated at the platform's peaks {self.simulated_decode:,.2f}")
        head += f": agree within {100 * AGREEMENT:.0f} %" if self.agree else f": differ: {self.reason}"
        if abs(self.simulated_prefill / self.llamacpp_prefill - 1) > AGREEMENT:
            head += (f"\nengines on prefill: llama.cpp {self.llamacpp_prefill:,.1f} tok/s, simulated "
                     f"{self.simulated_prefill:,.1f}: they differ because {self.prefill_reason}")
        return head

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data."""
        out = dataclasses.asdict(self)
        out.update(agree=self.agree if self.flags else None)
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in out.items()}


def achieved_platform(platform: Platform, rates: AchievedRates, threads: int, memory_type: str = "") -> Platform:
    """``platform`` at llama.cpp's achieved rates: each GPU's memory bandwidth times the fraction
    of its ``memory_type`` (:meth:`~costmodel.llamacpp.rates.AchievedRates.gpu_bandwidth_fraction`)
    and no launch costs of its own (llama.cpp's per-token and per-layer costs
    take their place), the CPU's bandwidth times ``cpu_bw_frac`` (at most ``threads`` x
    ``cpu_thread_bw``), the links' times ``pcie_frac``; shared memory domains scaled as the CPU."""
    devices, cpu_scale = [], rates.cpu_bw_frac
    for d in platform.devices:
        if d.kind == "gpu":  # launches: llama.cpp's per-token and per-layer costs, added by compare_engines
            d = dataclasses.replace(d, mem_bandwidth_bytes_per_s=d.mem_bandwidth_bytes_per_s * rates.gpu_bandwidth_fraction(memory_type),
                                    cost=None, launch_overhead_s=0.0, dispatch_s=0.0, graph_launch_s=0.0)
        else:
            bw = min(d.mem_bandwidth_bytes_per_s * rates.cpu_bw_frac, threads * rates.cpu_thread_bw)
            cpu_scale = bw / d.mem_bandwidth_bytes_per_s
            d = dataclasses.replace(d, mem_bandwidth_bytes_per_s=bw, cost=None)
        devices.append(d)
    links = tuple(dataclasses.replace(k, bandwidth_bytes_per_s=k.bandwidth_bytes_per_s * rates.pcie_frac)
                  for k in platform.links)
    domains = tuple(dataclasses.replace(m, bandwidth_bytes_per_s=m.bandwidth_bytes_per_s * cpu_scale)
                    for m in platform.memory_domains)
    return platform.replace(devices=tuple(devices), links=links, memory_domains=domains)


def compare_engines(plan, report, platform: Platform | str) -> EngineAgreement:
    """Both engines on the first ``-ngl N`` placement of ``report`` (see the module docstring).

    ``plan`` is the llama.cpp plan (:class:`~experiments.llm_llamacpp_plan.LlamaCppPlan`),
    ``report`` the simulated one (:class:`~experiments.llm_plan.LLMPlanReport`) of the same
    model on ``platform``.
    """
    # lazy: at the top it would load simpy with this module
    from hetsim.schedulers import run_plan
    from hetsim.schedulers.llm.residency import Residency

    nan = float("nan")
    exact = [p for p in report.predictions if p.ok and p.llama_cpp and p.llama_cpp_note == "exact"
             and re.fullmatch(r"-ngl \d+", p.llama_cpp)]
    if not exact:
        return EngineAgreement("", nan, nan, nan, "no simulated placement is a plain -ngl N placement")
    if report.batch != 1:
        return EngineAgreement("", nan, nan, nan, f"llama.cpp's engine prices one sequence, the simulated batch "
                                                  f"is {report.batch}")
    p = exact[0]
    ngl = int(p.llama_cpp.split()[1])
    model, machine, rates = plan.model, plan.machine, plan.rates
    if model.weights != report.weights:
        return EngineAgreement("", nan, nan, nan, f"the engines price different weights: llama.cpp's engine a "
                                                  f"{model.weights} file, the simulated one {report.weights} "
                                                  "tensors (give --weights as a llama.cpp file type)")
    ctx = report.context
    run = dataclasses.replace(plan.evaluation.run, ngl=ngl, n_cpu_moe=0, override_cpu=(), context=ctx,
                              depth=ctx - 1, harness="llama-bench")
    cpp = predict(model, machine, run, "tg", 1, rates)
    platform = Platform.load(platform)
    rated = achieved_platform(platform, rates, run.threads or machine.threads, machine.gpu_memory_type)

    decode = llm_graph(model.arch, phase="decode", kv_length=ctx, context=ctx, weights=weight_format_of(model),
                       kv_dtype=report.kv_dtype)
    residency = Residency.from_dict(p.residency)
    try:
        g2, splan = residency.apply(decode, rated)
        sim_s = run_plan(g2, rated, splan, "roofline").result.makespan
    except Exception as e:  # noqa: BLE001 - a comparison that cannot run is said, not raised
        return EngineAgreement("", nan, nan, nan, f"the -ngl {ngl} placement does not simulate at the achieved "
                                                  f"rates: {str(e).splitlines()[0]}")
    fixed = sum(v for k, v in cpp.seconds.items() if k in ("switch", "front end"))
    if machine.has_gpu:
        layers = sum(1 for d in run_layers(model, ngl))
        fixed += rates.gpu_token_s + (rates.graph_layer_s if run.cuda_graphs else rates.gpu_layer_s) * layers
    at_achieved = 1.0 / (sim_s + fixed)
    gpu_read = cpp.seconds.get("gpu", 0.0) - fixed
    reason = (f"llama.cpp's engine spends {1e3 * cpp.seconds.get('host', 0.0):.2f} ms per token on the host and "
              f"{1e3 * max(gpu_read, 0.0):.2f} ms reading GPU memory; the simulated graph's ops at those rates "
              f"take {1e3 * sim_s:.2f} ms (its ops read activations and run compute the achieved-rate model "
              "leaves out)")
    pp = predict(model, machine, dataclasses.replace(run, depth=0), "pp", report.prompt, rates)
    host_layers = ngl < model.arch.layers
    why_pp = ("llama.cpp copies the weights of layers in host memory to the GPU for each micro-batch of 32 rows "
              "or more, where the simulated placement computes those layers on the CPU" if host_layers else
              f"the simulated engine prices the matrix products at the platform's peaks ({report.platform}'s "
              "roofline), llama.cpp's at the tensor-core rates its kernels achieve")
    return EngineAgreement(f"-ngl {ngl}", cpp.tokens_per_s, p.decode_tok_s, at_achieved, reason,
                           pp.tokens_per_s, p.prefill_tok_s, why_pp)


def run_layers(model, ngl: int) -> range:
    """The layers ``-ngl ngl`` puts on the GPU (the last ``ngl`` of them)."""
    n = model.arch.layers
    return range(n - min(ngl, n), n)


