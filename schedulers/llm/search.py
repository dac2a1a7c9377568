"""A search over where an LLM's weights live, with the simulator as its objective.

:class:`PlacementSearch` chooses, for every unit of an LLM graph (a layer's attention
with its KV cache, its FFN, its experts, the output layer), one of three homes: GPU
resident, host memory computed on the CPU, or host memory streamed to the GPU. It
maximises predicted decode tokens/s (``objective="decode"``: the decode step at the
full context) or minimises time to first token (``objective="ttft"``: the prefill of
``prompt`` tokens) under the GPU memory budget:

1. the candidates of the fixed policies (``ngl`` with ``--fit``, ``expert-offload``,
   ``weight-streaming``) are simulated, so the search is never worse than they are;
2. the GPU is filled greedily by the time a unit saves there per byte (its time off
   the GPU, on the CPU or streamed, whichever is faster, less its GPU time; each
   priced by the cost model);
3. the units left over are ordered by how much faster streaming is than the CPU for
   them, and the number ``k`` streamed (the rest on the CPU) is searched by ternary
   search on the simulated step time, which is unimodal in ``k`` as long as the link
   and the CPU run side by side: streaming too little leaves the link idle, too much
   makes it the bottleneck. A streamed unit's weights in flight take GPU memory: the
   least dense resident units make room.

Every candidate is simulated whole (``max_evals`` at most); the best is returned.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from hetsim.graphs.llm.build import llm_graph
from hetsim.graphs.llm.workload import LLMWorkload
from hetsim.schedulers.base import SchedulerError
from hetsim.schedulers.llm.policies import NGL, ExpertOffload, LLMPolicy, WeightStreaming
from hetsim.schedulers.llm.residency import (
    DEFAULT_RESERVE_BYTES,
    Residency,
    llm_devices,
    llm_meta,
    unit_bytes,
)
from hetsim.sim.engine.simulator import SimulationError, simulate
from hetsim.sim.plan import PlanError

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph

__all__ = ["OBJECTIVES", "PlacementSearch", "objective_graph"]

OBJECTIVES = ("decode", "ttft")


def objective_graph(graph: Graph, objective: str, prompt: int) -> Graph:
    """The graph whose simulated time is the objective: ``graph`` itself when its phase
    matches, else the other phase of the same model, batch, context and formats."""
    llm_meta(graph)  # a SchedulerError when it is no LLM graph
    w = LLMWorkload.of(graph)
    phase = "decode" if objective == "decode" else "prefill"
    if w.phase == phase:
        return graph
    common = dict(batch=w.batch, context=w.context, weights=w.weights, kv_dtype=w.kv_dtype)
    if phase == "decode":
        return llm_graph(w.arch, phase="decode", kv_length=w.context, **common)
    return llm_graph(w.arch, phase="prefill", tokens=min(prompt, w.context), **common)


class PlacementSearch(LLMPolicy):
    """Per-unit homes (GPU, CPU, streamed) chosen by simulation under the memory budget.

    Parameters
    ----------
    objective
        ``"decode"`` (maximise decode tokens/s) or ``"ttft"`` (minimise time to first token).
    prompt
        Prompt tokens of the prefill that ``"ttft"`` prices (capped at the context).
    window
        Layers of prefetch for streamed weights.
    max_evals
        Simulations at most (the fixed policies' candidates included).
    reserve_bytes
        GPU memory left free.
    """

    name = "llm-search"
    minimum = {"prompt": 1, "window": 1, "max_evals": 1}

    def __init__(self, *, objective: str = "decode", prompt: int = 512, window: int = 1, max_evals: int = 24,
                 reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> None:
        if objective not in OBJECTIVES:
            raise SchedulerError(f"llm-search: objective must be one of {OBJECTIVES}, got {objective!r}")
        for key, v in (("prompt", prompt), ("window", window), ("max_evals", max_evals)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SchedulerError(f"llm-search: {key} must be an int >= 1, got {v!r}")
        self.objective, self.prompt, self.window = objective, prompt, window
        self.max_evals, self.reserve_bytes = max_evals, reserve_bytes

    def residency(self, graph: Graph, platform: Platform, cost: CostModel) -> Residency:
        target = objective_graph(graph, self.objective, self.prompt)
        host, gpu = llm_devices(platform)
        evals: dict[tuple, float] = {}

        def score(r: Residency) -> float:
            key = (tuple(sorted(r.devices.items())), r.streamed)
            if key not in evals:
                if len(evals) >= self.max_evals or not self._fits(target, platform, r):
                    return math.inf
                try:
                    g2, plan = r.apply(target, platform)
                    evals[key] = simulate(g2, platform, plan, cost).makespan
                except (SimulationError, PlanError):
                    evals[key] = math.inf
            return evals[key]

        best: tuple[float, Residency | None] = (math.inf, None)

        def consider(r: Residency) -> float:
            nonlocal best
            t = score(r)
            if t < best[0]:
                best = (t, r)
            return t

        for policy in (NGL(reserve_bytes=self.reserve_bytes), ExpertOffload(reserve_bytes=self.reserve_bytes),
                       WeightStreaming(window=self.window, reserve_bytes=self.reserve_bytes)):
            if policy.why_not(target, platform) is None:
                try:
                    consider(policy.residency(target, platform, cost))
                except SchedulerError:
                    pass
        for r in self._ladder(target, platform, cost, host, gpu, consider):
            consider(r)
        if best[1] is None:
            raise SchedulerError(f"llm-search: no placement of {graph.name!r} fits {platform.name!r} "
                                 f"(the fixed policies' errors say what is needed)")
        return best[1]

    def _ladder(self, g: Graph, platform: Platform, cost: CostModel, host: str, gpu: str,
                consider: Callable[[Residency], float]) -> list[Residency]:
        """Step 2-3 of the search; calls ``consider`` on each candidate it simulates."""
        nodes, units = g.nx.nodes, llm_meta(g)["units"]
        frac = float(llm_meta(g).get("expert_read_fraction", 1.0))
        dev_g, dev_c = platform.device(gpu), platform.device(host)
        links = platform.route(host, gpu)
        resident_bytes = unit_bytes(g)
        info: dict[str, tuple[float, float, float, int]] = {}
        for u, ns in units.items():
            if u == "token_embd":
                continue
            tg = sum(cost.op_time(g, n, dev_g) for n in ns)
            tc = sum(cost.op_time(g, n, dev_c) for n in ns)
            read = sum(nodes[n]["param_bytes"] * (frac if "moe_block" in nodes[n] else 1.0)
                       for n in ns if nodes[n]["op"] != "attention")
            ts = max(tg, sum(cost.transfer_time(int(read), lk) for lk in links))
            info[u] = (tg, tc, ts, resident_bytes[u])
        density = {u: (min(tc, ts) - tg) / max(rb, 1) for u, (tg, tc, ts, rb) in info.items()}
        # ties (identical layers) fill the GPU from the last layer down, as llama.cpp's -ngl does
        order = sorted(reversed(list(info)), key=lambda u: -density[u])
        base = {u: host for u in units}

        def build(resident: set[str], streamed: set[str]) -> Residency:
            devices = dict(base)
            devices.update(dict.fromkeys(resident | streamed, gpu))
            return Residency(devices, frozenset(streamed), self.window)

        resident: set[str] = set()
        for u in order:
            if self._fits(g, platform, build(resident | {u}, set())):
                resident.add(u)
        rest = sorted((u for u in info if u not in resident), key=lambda u: info[u][1] - info[u][2], reverse=True)

        def with_k(k: int) -> Residency:
            streamed, keep = set(rest[:k]), set(resident)
            r = build(keep, streamed)
            for u in sorted(keep, key=lambda u: density[u]):  # make room for weights in flight
                if self._fits(g, platform, r):
                    break
                keep.discard(u)
                streamed.add(u)
                r = build(keep, streamed)
            return r

        lo, hi = 0, len(rest)
        consider(with_k(lo))
        if hi:
            consider(with_k(hi))
        while hi - lo > 2:
            m1, m2 = lo + (hi - lo) // 3, hi - (hi - lo) // 3
            if consider(with_k(m1)) <= consider(with_k(m2)):
                hi = m2
            else:
                lo = m1
        return [with_k(k) for k in range(lo, hi + 1)]
