"""Placement policies of LLM runtimes for models larger than the GPU, as schedulers.

Each policy decides a :class:`~schedulers.llm.residency.Residency` (where each unit of
an LLM graph runs and whether its weights are streamed); :meth:`LLMPolicy.transform`
rewrites the graph with the streamed weights made explicit and
:meth:`LLMPolicy._schedule` places its nodes, so ``policy.run(graph, platform)``
plans and simulates like any scheduler.

* :class:`NGL`: llama.cpp ``-ngl N`` (Gerganov et al., llama.cpp, ``llama-model.cpp``
  ``load_tensors``): the *last* ``N`` decoder layers on the GPU, the output layer too
  when ``N`` exceeds the layer count, the token embedding on the CPU; without ``N``,
  the largest that fits, as ``--fit`` chooses it.
* :class:`ExpertOffload`: llama.cpp ``--n-cpu-moe N`` / ktransformers: everything on
  the GPU but the expert FFNs of the first ``N`` layers, which run on the CPU from
  host memory; without ``N``, the smallest that fits.
* :class:`WeightStreaming`: FlexGen (Sheng et al., ICML 2023): every op on the GPU;
  weights resident in layer order while they fit, the rest streamed from host memory
  over PCIe one layer ahead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from hetsim.graphs.llm.workload import LLMWorkload
from hetsim.schedulers.base import Scheduler, SchedulerError
from hetsim.schedulers.llm.residency import (
    DEFAULT_RESERVE_BYTES,
    Residency,
    budget_bytes,
    layer_units,
    llm_devices,
    llm_meta,
    overflow_message,
)

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.base import CostModel
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.sim.plan import Plan

__all__ = ["LLMPolicy", "NGL", "ExpertOffload", "WeightStreaming"]


class LLMPolicy(Scheduler):
    """Base of the LLM placement policies: a :meth:`residency`, applied.

    Subclasses implement :meth:`residency`; ``reserve_bytes`` of GPU memory stay free
    for activations and compute buffers.
    """

    min_devices = 2
    reserve_bytes: int = DEFAULT_RESERVE_BYTES

    def why_not(self, graph: Graph, platform: Platform) -> str | None:
        try:
            llm_meta(graph)
            llm_devices(platform)
        except SchedulerError as e:
            return f"{self.name}: {e}"
        return None

    def residency(self, graph: Graph, platform: Platform, cost: CostModel) -> Residency:
        """Where each unit of ``graph`` runs and which are streamed."""
        raise NotImplementedError

    def transform(self, graph: Graph, platform: Platform, cost: CostModel) -> Graph:
        """``graph`` with this policy's residency applied (streamed weights made explicit)."""
        reason = self.why_not(graph, platform) if graph.number_of_nodes() else None
        if reason is not None:
            raise SchedulerError(reason)
        if graph.number_of_nodes() == 0 or "residency" in graph.meta["llm"]:
            return graph
        return self.residency(graph, platform, cost).rewrite(graph, platform)

    def _schedule(self, graph: Graph, platform: Platform, cost: CostModel) -> Plan:
        llm = llm_meta(graph)
        r = Residency.from_dict(llm["residency"]) if "residency" in llm else self.residency(graph, platform, cost)
        return r.plan(graph, platform)

    def _fits(self, graph: Graph, platform: Platform, r: Residency) -> bool:
        return r.fits(graph, platform, self.reserve_bytes)

    def _given_or_first_fit(self, graph: Graph, platform: Platform, layout: Callable[[int], Residency],
                            given: int | None, top: int, tries: Iterable[int], given_fails: str,
                            none_fits: str, worst: int) -> Residency:
        """``layout(given)`` (capped at ``top``) if it fits, else the first of ``tries``
        that fits; :class:`SchedulerError` with the memory needed and available."""
        if given is not None:
            r = layout(min(given, top))
            if not self._fits(graph, platform, r):
                raise SchedulerError(overflow_message(given_fails, graph, platform, r, self.reserve_bytes))
            return r
        for n in tries:
            r = layout(n)
            if self._fits(graph, platform, r):
                return r
        raise SchedulerError(overflow_message(none_fits, graph, platform, layout(worst), self.reserve_bytes))


def _check_count(owner: str, key: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise SchedulerError(f"{owner}: {key} must be an int >= 0 or None, got {value!r}")


class NGL(LLMPolicy):
    """llama.cpp ``-ngl N``: the last ``N`` layers on the GPU (output layer when ``N > layers``).

    Parameters
    ----------
    n_gpu_layers
        ``N``; None: the largest that fits (``--fit``).
    reserve_bytes
        GPU memory left free.
    """

    name = "ngl"

    def __init__(self, *, n_gpu_layers: int | None = None, reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> None:
        _check_count("ngl", "n_gpu_layers", n_gpu_layers)
        self.n_gpu_layers = n_gpu_layers
        self.reserve_bytes = reserve_bytes

    @staticmethod
    def layout(graph: Graph, platform: Platform, n: int) -> Residency:
        """The residency of ``-ngl n``."""
        host, gpu = llm_devices(platform)
        layers = layer_units(graph)
        last = len(layers)
        devices = {u: host for u in llm_meta(graph)["units"]}
        for i, units in layers.items():
            if i >= last - n:
                devices.update(dict.fromkeys(units, gpu))
        if n > last:
            devices["output"] = gpu
        return Residency(devices)

    def residency(self, graph: Graph, platform: Platform, cost: CostModel) -> Residency:
        top = len(layer_units(graph)) + 1
        return self._given_or_first_fit(
            graph, platform, lambda n: self.layout(graph, platform, n), self.n_gpu_layers, top,
            range(top, -1, -1), f"ngl: -ngl {self.n_gpu_layers} does not fit",
            "ngl: the model fits nowhere, even with -ngl 0", 0)


class ExpertOffload(LLMPolicy):
    """llama.cpp ``--n-cpu-moe N``: the expert FFNs of the first ``N`` layers on the CPU.

    Parameters
    ----------
    n_cpu_moe
        ``N``; None: the smallest that fits.
    reserve_bytes
        GPU memory left free.
    """

    name = "expert-offload"

    def __init__(self, *, n_cpu_moe: int | None = None, reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> None:
        _check_count("expert-offload", "n_cpu_moe", n_cpu_moe)
        self.n_cpu_moe = n_cpu_moe
        self.reserve_bytes = reserve_bytes

    def why_not(self, graph: Graph, platform: Platform) -> str | None:
        reason = super().why_not(graph, platform)
        if reason is None and not LLMWorkload.of(graph).arch.is_moe:
            return f"{self.name}: {graph.meta['llm']['config']['name']!r} has no experts"
        return reason

    @staticmethod
    def layout(graph: Graph, platform: Platform, n: int) -> Residency:
        """The residency of ``--n-cpu-moe n`` (all other layers on the GPU)."""
        host, gpu = llm_devices(platform)
        devices = {u: gpu for u in llm_meta(graph)["units"]}
        devices["token_embd"] = host
        for i, units in layer_units(graph).items():
            if i < n:
                devices.update({u: host for u in units if u.endswith(".ffn_exps")})
        return Residency(devices)

    def residency(self, graph: Graph, platform: Platform, cost: CostModel) -> Residency:
        layers = len(layer_units(graph))
        return self._given_or_first_fit(
            graph, platform, lambda n: self.layout(graph, platform, n), self.n_cpu_moe, layers,
            range(layers + 1), f"expert-offload: --n-cpu-moe {self.n_cpu_moe} does not fit",
            "expert-offload: does not fit even with every expert on the CPU", layers)


class WeightStreaming(LLMPolicy):
    """FlexGen-style: all compute on the GPU, weights that do not fit streamed from the host.

    Parameters
    ----------
    window
        Layers of prefetch (streamed weights of layer ``i`` load during layer ``i - window``).
    cpu_attention
        FlexGen's CPU delegation (``--cpu-cache-compute``, the KV cache in host memory):
        every layer's attention unit (its Q/K/V/O projections, read from host memory, and
        the attention over its KV cache) runs on the CPU; the rest as above. FlexGen
        streams the projections to the GPU instead: here they cost CPU time.
    reserve_bytes
        GPU memory left free.
    """

    name = "weight-streaming"
    minimum = {"window": 1}

    def __init__(self, *, window: int = 1, cpu_attention: bool = False,
                 reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise SchedulerError(f"weight-streaming: window must be an int >= 1, got {window!r}")
        self.window = window
        self.cpu_attention = bool(cpu_attention)
        self.reserve_bytes = reserve_bytes

    def residency(self, graph: Graph, platform: Platform, cost: CostModel) -> Residency:
        host, gpu = llm_devices(platform)
        on_host = {"token_embd"} | ({u for u in llm_meta(graph)["units"] if u.endswith(".attn")}
                                    if self.cpu_attention else set())
        units = [u for u in llm_meta(graph)["units"] if u not in on_host]
        devices = {**dict.fromkeys(units, gpu), **dict.fromkeys(on_host, host)}
        r = Residency(devices, frozenset(units), self.window)

        def gpu_fits(trial: Residency) -> bool:
            return trial.memory(graph, platform)[gpu] <= budget_bytes(platform, gpu, self.reserve_bytes)

        if gpu_fits(r):
            streamed = set(units)
            for u in ["output", *[u for us in layer_units(graph).values() for u in us if u in units]]:
                trial = Residency(devices, frozenset(streamed - {u}), self.window)
                if gpu_fits(trial):
                    streamed.discard(u)
                    r = trial
        if not self._fits(graph, platform, r):
            raise SchedulerError(overflow_message("weight-streaming: the KV caches and the weights in flight "
                                                  "do not fit", graph, platform, r, self.reserve_bytes))
        return r
