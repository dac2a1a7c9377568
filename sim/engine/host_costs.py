"""Host time on a platform whose GPUs launch their work: the launch modes, the
host time of an op's cross-device edges, the graph segments a GPU launches and the
handoff of a GPU's output to a CPU (:mod:`sim.engine.host` runs them)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetsim.sim.segments import cut_segments

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.prep import Prepared
    from hetsim.sim.platform import Device, Platform

__all__ = ["EAGER", "GRAPH", "LAUNCH_MODES", "SERIAL", "edge_host_costs", "gpu_end", "gpu_to_cpu_handoffs",
           "host_resource", "partition_segments"]

#: how a worker issues its ops: host part then op in series (CPUs, GPUs without a
#: launch mode), one launch per op, one launch per graph segment
SERIAL, EAGER, GRAPH = 0, 1, 2
#: a device's ``launch`` -> how its worker issues its ops
LAUNCH_MODES = {None: SERIAL, "eager": EAGER, "graph": GRAPH}


def host_resource(device: str) -> str:
    """The record resource of the host threads of ``device``'s workers (one stream
    per worker): ``"gpu.host"``."""
    return f"{device}.host"


def partition_segments(prep: Prepared, loc: list[int], device: int) -> list[list[int]]:
    """The graph segments of ``device``: its ops in the plan's priority order
    (``prep.order``), cut before an op with an input from another device and after
    an op with a reader on another device (the executor's segments,
    ``runtime.executor.segments``).

    Graph inputs and outputs do not cut a segment: inputs are copied when the
    request starts, an output when its segment has run.
    """
    n = prep.n_ops
    preds, succs = prep.preds, prep.succs
    return cut_segments(prep.order, lambda u: loc[u] == device,
                        lambda u: any(p < n and loc[p] != device for p, _ in preds[u]),
                        lambda u: any(loc[v] != device for v, _ in succs[u]))


def edge_host_costs(prep: Prepared, devices: list[Device], u: int, du: int, loc: list[int]) -> tuple[float, float]:
    """Host time of op ``u`` on device ``du`` at its cross-device edges (placements
    ``loc``, -1: not placed yet, no cost): ``(before, after)``.

    Only edges with a GPU at one end cost host time, the GPU's ``event_s`` and
    ``copy_issue_s`` (the producer's when both are GPUs). ``before``: one event wait
    per producer op on another device. ``after``: one event record per other device
    that reads an output (the host counts for a graph output) and one copy issue per
    tensor sent to another memory domain (one per output and destination device).
    """
    n, host = prep.n_ops, prep.host
    before = 0.0
    seen: set[int] = set()
    for p, _ in prep.preds[u]:
        dp = loc[p] if p < n else -1
        if dp < 0 or dp == du or p in seen:
            continue
        seen.add(p)
        g = gpu_end(devices, dp, du)
        if g is not None:
            before += float(g.event_s)
    after = 0.0
    readers: set[int] = set()
    copies: set[tuple[int, int]] = set()
    same = prep.domain_same[du]
    for v, k in prep.succs[u]:
        dv = loc[v]
        if dv >= 0 and dv != du:
            readers.add(dv)
            if not same[dv]:
                copies.add((k, dv))
    if u < n and host != du:
        for k in prep.graph_outputs.get(u, ()):
            readers.add(host)
            if not same[host]:
                copies.add((k, host))
    for dv in sorted(readers):
        g = gpu_end(devices, du, dv)
        if g is not None:
            after += float(g.event_s)
    for _, dv in sorted(copies):
        g = gpu_end(devices, du, dv)
        if g is not None:
            after += float(g.copy_issue_s)
    return before, after


def gpu_to_cpu_handoffs(platform: Platform) -> list[list[float]]:
    """``[src][dst]``: the delay with which a tensor a GPU ``src`` produced, moved to a
    CPU ``dst`` of another memory domain, reaches its readers there (``dst``'s
    ``handoff_s``: the CPU worker waking on the copy's event); 0 otherwise."""
    devices = platform.devices
    return [[float(b.handoff_s) if a.kind == "gpu" and b.kind == "cpu"
             and not platform.shares_memory(a.name, b.name) else 0.0 for b in devices] for a in devices]


def gpu_end(devices: list[Device], src: int, dst: int) -> Device | None:
    """The GPU at one end of an edge (the producer's when both are), or None."""
    if devices[src].kind == "gpu":
        return devices[src]
    return devices[dst] if devices[dst].kind == "gpu" else None
