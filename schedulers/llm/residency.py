"""Where an LLM's weights live and where its ops run: a :class:`Residency` and the plan it gives.

An LLM graph (:func:`graphs.llm.llm_graph`) is cut into *units*, the groups of
nodes a placement moves together (``token_embd``, ``blk.{i}.attn`` with its KV cache,
``blk.{i}.ffn``, ``blk.{i}.ffn_exps``, ``output``). A residency gives each unit a
device, and for a unit on the GPU whether its weights stay resident in GPU memory or
live in host memory and are streamed (:func:`graphs.llm.stream_weights`). The KV
cache of a layer lives with its ``attn`` unit's device (llama.cpp's default, and
FlexGen's with the cache on the GPU).

Memory on the GPU: resident weights and KV caches, the streamed weights in flight
(``window + 1`` layers' worth), and ``reserve_bytes`` for activations and compute
buffers (llama.cpp ``--fit`` leaves 1 GiB by default: ``--fit-target``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hetsim.graphs.llm.streaming import WEIGHT_SUFFIX, stream_weights
from hetsim.schedulers.base import SchedulerError, topo_priority
from hetsim.sim.plan import Plan, size_text

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph

__all__ = [
    "DEFAULT_RESERVE_BYTES",
    "Residency",
    "budget_bytes",
    "layer_units",
    "llm_devices",
    "llm_meta",
    "overflow_message",
    "unit_bytes",
]

#: GPU memory kept free for activations and compute buffers (llama.cpp --fit-target 1024 MiB)
DEFAULT_RESERVE_BYTES = 1 << 30


def llm_meta(graph: Graph) -> dict[str, Any]:
    """``graph.meta["llm"]``; :class:`SchedulerError` when the graph is no LLM graph."""
    llm = graph.meta.get("llm")
    if not isinstance(llm, Mapping) or "units" not in llm:
        raise SchedulerError(
            f"graph {graph.name!r} is not an LLM graph (build one with hetsim.graphs.llm.llm_graph)"
        )
    return dict(llm)


def llm_devices(platform: Platform) -> tuple[str, str]:
    """(host CPU, GPU) of ``platform``: the first CPU and the first GPU.

    Raises
    ------
    SchedulerError
        when the platform has no CPU (no host memory to offload to) or no GPU.
    """
    cpus, gpus = platform.devices_of_kind("cpu"), platform.devices_of_kind("gpu")
    if not cpus:
        raise SchedulerError(
            f"platform {platform.name!r} has no host memory: it needs a 'cpu' device with "
            f"memory_bytes (devices: {platform.device_names})"
        )
    if not gpus:
        raise SchedulerError(f"platform {platform.name!r} has no GPU (devices: {platform.device_names})")
    host = platform.host if platform.device(platform.host).kind == "cpu" else cpus[0].name
    return host, gpus[0].name


def budget_bytes(platform: Platform, device: str, reserve_bytes: int) -> int:
    """Memory of ``device`` a residency may fill: a GPU's less ``reserve_bytes``."""
    d = platform.device(device)
    return d.memory_bytes - (reserve_bytes if d.kind == "gpu" else 0)


def unit_bytes(graph: Graph) -> dict[str, int]:
    """Resident bytes (weights, KV cache) of each unit."""
    nodes = graph.nx.nodes
    return {u: sum(int(nodes[n]["param_bytes"]) for n in ns) for u, ns in llm_meta(graph)["units"].items()}


@dataclass(frozen=True)
class Residency:
    """Device of every unit, and the GPU units whose weights are streamed from the host.

    Parameters
    ----------
    devices
        ``{unit: device name}`` for every unit of the graph.
    streamed
        Units on the GPU whose weights live in host memory (their KV cache stays on
        the GPU).
    window
        Layers of prefetch for streamed weights.
    """

    devices: Mapping[str, str]
    streamed: frozenset[str] = field(default_factory=frozenset)
    window: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "devices", dict(self.devices))
        object.__setattr__(self, "streamed", frozenset(self.streamed))

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict[str, Any]:
        return {"devices": dict(self.devices), "streamed": sorted(self.streamed), "window": self.window}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Residency:
        return cls(data["devices"], frozenset(data.get("streamed", ())), int(data.get("window", 1)))

    # ------------------------------------------------------------- queries
    def streamed_nodes(self, graph: Graph) -> list[str]:
        """Ops with weights in the streamed units (KV caches of ``attention`` ops excluded)."""
        nodes, units = graph.nx.nodes, llm_meta(graph)["units"]
        return [n for u in sorted(self.streamed) for n in units[u]
                if nodes[n]["param_bytes"] > 0 and nodes[n]["op"] != "attention"]

    def memory(self, graph: Graph, platform: Platform) -> dict[str, int]:
        """Bytes resident on each device (weights, KV caches; streamed weights in flight
        on the GPU, ``window + 1`` layers of them, and their home on the host)."""
        host, gpu = llm_devices(platform)
        units = llm_meta(graph)["units"]
        self.check(graph, platform)
        data = dict(graph.nx.nodes(data=True))  # one look-up per node below, not three views
        use = {d.name: 0 for d in platform.devices}
        per_layer: dict[Any, int] = {}
        streamed = self.streamed
        for u, ns in units.items():
            if u not in streamed:
                use[self.devices[u]] += sum(int(data[n]["param_bytes"]) for n in ns)
                continue
            dev = self.devices[u]
            for n in ns:
                d = data[n]
                b = int(d["param_bytes"])
                if d["op"] != "attention":
                    use[host] += b
                    key = d.get("layer", u)
                    per_layer[key] = per_layer.get(key, 0) + b
                else:
                    use[dev] += b
        if per_layer:
            use[gpu] += sum(sorted(per_layer.values(), reverse=True)[: self.window + 1])
        return use

    def check(self, graph: Graph, platform: Platform) -> None:
        """:class:`SchedulerError` for a unit without a device, an unknown device, or a
        streamed unit that is not on a GPU."""
        units = llm_meta(graph)["units"]
        missing = [u for u in units if u not in self.devices]
        if missing:
            raise SchedulerError(f"residency gives no device to unit(s) {missing[:3]}")
        for u, d in self.devices.items():
            if d not in platform:
                raise SchedulerError(f"residency: unit {u!r} on unknown device {d!r} ({platform.device_names})")
        for u in self.streamed:
            if u not in units or platform.device(self.devices[u]).kind != "gpu":
                raise SchedulerError(f"residency: streamed unit {u!r} must be a unit on a GPU")

    def fits(self, graph: Graph, platform: Platform, reserve_bytes: int = DEFAULT_RESERVE_BYTES) -> bool:
        """True when every device holds what :meth:`memory` puts there (GPUs less the reserve)."""
        for dev, b in self.memory(graph, platform).items():
            if b > budget_bytes(platform, dev, reserve_bytes):
                return False
        return True

    # --------------------------------------------------------------- plans
    def rewrite(self, graph: Graph, platform: Platform) -> Graph:
        """The graph with the streamed weights made explicit (weight-source nodes);
        ``meta["llm"]["residency"]`` of the result records ``self``."""
        self.check(graph, platform)
        if "residency" in llm_meta(graph):
            raise SchedulerError(f"graph {graph.name!r} already has a residency applied")
        streamed = self.streamed_nodes(graph)
        g2 = stream_weights(graph, streamed, window=self.window) if streamed else graph.copy()
        g2.meta["llm"] = {**g2.meta["llm"], "residency": self.to_dict()}
        return g2

    def plan(self, graph: Graph, platform: Platform) -> Plan:
        """The plan of a graph :meth:`rewrite` made: nodes on their unit's device, weight
        sources on the host."""
        host, _ = llm_devices(platform)
        llm = llm_meta(graph)
        if self.streamed and "residency" not in llm:
            raise SchedulerError(
                f"graph {graph.name!r} has no weight-source nodes: rewrite it first (Residency.rewrite)"
            )
        placement: dict[str, str] = {}
        for u, ns in llm["units"].items():
            for n in ns:
                placement[n] = self.devices[u]
        for n in llm.get("streamed", []):
            placement[n + WEIGHT_SUFFIX] = host
        return Plan(placement=placement, priority=topo_priority(graph), meta={"residency": self.to_dict()})

    def apply(self, graph: Graph, platform: Platform) -> tuple[Graph, Plan]:
        """:meth:`rewrite` and :meth:`plan`: the graph to simulate and its plan."""
        g2 = self.rewrite(graph, platform)
        return g2, self.plan(g2, platform)


def layer_units(graph: Graph) -> dict[int, list[str]]:
    """Units of each decoder layer, in layer order."""
    out: dict[int, list[str]] = {}
    for u in llm_meta(graph)["units"]:
        if u.startswith("blk."):
            out.setdefault(int(u.split(".")[1]), []).append(u)
    return dict(sorted(out.items()))


def overflow_message(what: str, graph: Graph, platform: Platform, residency: Residency,
                     reserve_bytes: int) -> str:
    """One line: what does not fit, the memory needed and available per device."""
    use = residency.memory(graph, platform)
    parts = []
    for d in platform.devices:
        avail = budget_bytes(platform, d.name, reserve_bytes)
        parts.append(f"{d.name} needs {size_text(use.get(d.name, 0))}, has {size_text(max(avail, 0))}")
    return f"{what}: {'; '.join(parts)}"
