"""The cost of a copy between a CPU worker and a GPU, as the executor pays it, and how
the two workers slow each other.

A profile's link fit (:func:`runtime.profiler.measure_links`) times bare
``cudaMemcpyAsync`` calls: on the H100 machine 3-4 us plus 55 GB/s. The executor's
copies cost more: the producer's worker issues each copy after its op (a CPU tensor
staged into a pinned buffer first), a GPU tensor's copy waits for its producer's
event and then for a synchronisation thread before its CPU consumers may start
(:mod:`runtime.executor.cuda`). On that machine a 100 KB copy inside a running
model ended 90-160 us after its producer, not 6 us. And the op times of the two
workers measured each alone (:class:`~runtime.validation.context_profile.DeviceProfilers`)
grow when both are active: at batch 1 a GPU op's time in context is mostly its
launch, host work of the GPU worker's thread, which competes with the CPU worker
(its ops, its spin-wait for the next op) for the host and the interpreter.

:class:`LinkCalibration` measures these in a validation's own rounds, as
:class:`~runtime.validation.handoff.HostCalibration` does for two CPU workers: a calibration
model runs once per round with its nodes alternating between the CPU worker and
the GPU in topological order (every edge crosses), and once on each device alone,
and :func:`link_costs` reads from their records

* ``latency_s`` -- the median over the copies of the time from the producer's end
  (the copy's start for a graph input) to the copy's end, less its bytes at the
  link's bandwidth: the simulator starts a copy when its producer ends and takes
  ``latency_s + bytes / bandwidth``;
* ``handoff_s`` -- the median wait of a CPU op whose input came from the GPU,
  between the end of that copy and the op's start, when the CPU worker was idle by
  then (the synchronisation thread's hand-over);
* ``slowdown`` -- the crossing runs' op time on each device over the same ops' time
  in that device's one-device runs, the mean of the two devices' ratios (between
  1 and 2).

:meth:`LinkCalibration.apply` writes them into the platform: the link's
``latency_s`` (its bandwidth as declared), the CPU device's ``handoff_s``, and a
memory domain ``host`` of the two devices (:mod:`sim.contention`) in which both
active run ``slowdown`` times slower, each lingering for the executor's spin after
its op when the CPU worker is pinned (it polls for its next op). Modelling the
two workers' interference as a shared memory is an approximation: what they share
is the host's cores and the interpreter, which the model treats alike (every op's
whole time stretches while both are active). On a CUDA platform whose host costs a
fresh calibration measured (:func:`runtime.validation.cuda_host.host_model`), the
simulator's host model charges them where they arise (launches, events, hand-overs,
the interpreter lock), and validation applies this calibration with
``contention=False``: the link's latency and the hand-over only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.memory_domain import MemoryDomain
from hetsim.runtime.executor.execute import Execution
from hetsim.runtime.executor.setup import wire
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph

__all__ = ["LinkCalibration", "crossing_plan", "link_costs"]


def crossing_plan(graph: Graph, devices: tuple[str, str]) -> Any:
    """The plan that puts ``graph``'s nodes on ``devices`` alternately, in topological
    order (every chain edge crosses between the two)."""
    return Plan({n: devices[i % 2] for i, n in enumerate(graph.topological_order())})


def link_costs(runs: Sequence[Sequence[Mapping[str, Any]]], graph: Graph, platform: Platform,
               cpu: str, gpu: str, *, alone: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]] | None = None,
               ) -> dict[str, Any]:
    """The per-copy latency, the GPU-to-CPU hand-over and the two workers' slowdown
    measured in ``runs`` (each the records of one run of a plan over ``cpu`` and
    ``gpu``, as :meth:`runtime.executor.execute.RunResult.records` gives them).

    Parameters
    ----------
    runs
        The crossing runs' records.
    graph, platform, cpu, gpu
        Their graph, platform and devices.
    alone
        Device -> records of runs of the same graph on that device alone, one per
        crossing run (the same rounds): the baseline of ``slowdown``; None: 1.

    Returns
    -------
    dict
        ``latency_s`` (median over every copy of the time from its producer's end,
        or its own start for a graph input, to its end, less ``bytes / bandwidth``
        at the bandwidth the platform declares for the link), ``handoff_s`` (median
        wait of a CPU op fed by a copy from the GPU, from the copy's end to the op's
        start, when the CPU worker had finished its previous op by then; 0 when no
        such op), ``slowdown`` (the mean over the two devices of the median over
        rounds of a crossing run's op time on the device over the same ops' time in
        the round's run on that device alone, clipped to [1, 2]), ``cpu_ratio`` and
        ``gpu_ratio`` (those medians), ``n_copies``, ``n_handoffs``, ``copy_s``
        (median copy time, start to end) and ``rounds``.

    Raises
    ------
    ValueError
        When the runs hold no copy between the two devices.
    """
    link = platform.route(cpu, gpu)
    if len(link) != 1:
        raise ValueError(f"{platform.name}: {cpu!r} and {gpu!r} are not joined by one link")
    bw = link[0].bandwidth_bytes_per_s
    over: list[float] = []
    durs: list[float] = []
    waits: list[float] = []
    for recs in runs:
        copies = [r for r in recs if r["kind"] == "transfer"]
        ends = {r["node"]: r["end"] for r in recs if r["kind"] == "op"}
        for r in copies:
            durs.append(r["end"] - r["start"])
            over.append(r["end"] - min(ends.get(r["node"], r["start"]), r["start"]) - r["bytes"] / bw)
        cpu_ops = sorted((r for r in recs if r["kind"] == "op" and r["resource"] == cpu), key=lambda r: r["start"])
        arrived = {r["node"]: r["end"] for r in copies if r["dst"] == cpu}
        prev_end = 0.0
        for r in cpu_ops:
            ins = [arrived[u] for u in graph.nx.predecessors(r["node"]) if u in arrived]
            if ins:
                ready = max(ins)
                if prev_end <= ready <= r["start"]:
                    waits.append(r["start"] - ready)
            prev_end = r["end"]
    if not over:
        raise ValueError(f"calibration on {graph.name!r}: no copy between {cpu!r} and {gpu!r} in its runs")
    ratios = {dev: _ratio(runs, (alone or {}).get(dev), dev) for dev in (cpu, gpu)}
    slowdown = min(max((ratios[cpu] + ratios[gpu]) / 2, 1.0), 2.0)
    return {"latency_s": max(float(np.median(over)), 0.0), "handoff_s": float(np.median(waits)) if waits else 0.0,
            "slowdown": slowdown, "cpu_ratio": ratios[cpu], "gpu_ratio": ratios[gpu],
            "n_copies": len(over), "n_handoffs": len(waits), "copy_s": float(np.median(durs)),
            "rounds": len(runs)}


def _ratio(runs: Sequence[Sequence[Mapping[str, Any]]], alone: Sequence[Sequence[Mapping[str, Any]]] | None,
           device: str) -> float:
    """Median over paired runs of the op time on ``device`` in the crossing run over
    the same nodes' op time in the one-device run (1.0 without a baseline)."""
    if not alone:
        return 1.0
    out = []
    for recs, base in zip(runs, alone):
        mine = {r["node"]: r["end"] - r["start"] for r in recs if r["kind"] == "op" and r["resource"] == device}
        ref = sum(r["end"] - r["start"] for r in base if r["kind"] == "op" and r["node"] in mine)
        if ref > 0:
            out.append(sum(mine.values()) / ref)
    return float(np.median(out)) if out else 1.0


class LinkCalibration:
    """A calibration model run with every edge crossing between a CPU worker and a
    GPU, and on each of the two alone, once per validation round: the copy latency,
    hand-over and slowdown of the same minutes (:func:`link_costs`).

    Parameters
    ----------
    graph, relax
        The calibration workload and its model (one that is not validated).
    platform
        A platform with a CPU device and a GPU joined by a link.
    devices
        ``(cpu, gpu)`` (default: the platform's first CPU and first GPU).
    backend, warmup, device_map
        As :func:`runtime.execute`.
    """

    def __init__(self, graph: Graph, relax: Any, platform: Platform, *, devices: tuple[str, str] | None = None,
                 backend: str = "torch", warmup: int = 3, device_map: Mapping[str, str] | None = None) -> None:
        if devices is None:
            cpus = [d.name for d in platform.devices if d.kind == "cpu"]
            gpus = [d.name for d in platform.devices if d.kind == "gpu"]
            if not cpus or not gpus:
                raise ValueError(f"{platform.name}: a link calibration needs a CPU and a GPU device")
            devices = (cpus[0], gpus[0])
        self.graph, self.platform, self.workers = graph, platform, devices
        plans = [crossing_plan(graph, devices), *(Plan(dict.fromkeys(graph.nx, d)) for d in devices)]
        self._executions: list[Any] = []
        try:
            for plan in plans:
                self._executions.append(Execution(graph, plan, platform, wire(graph, relax), backend=backend,
                                                  model=relax, check=False, device_map=device_map, traced=True))
            for ex in self._executions:
                ex.run(warmup, timed=False)
        except BaseException:
            self.close()
            raise
        self.crossing = self._executions[0]

    @property
    def executions(self) -> list[Any]:
        """The crossing execution and the two one-device executions (run each once
        per round)."""
        return list(self._executions)

    def result(self, since: int = 0) -> dict[str, Any]:
        """:func:`link_costs` of the timed runs from number ``since`` on, with
        ``linger_s``: the executor's spin when the CPU worker was pinned, else 0."""
        runs = self.crossing.runs[since:]
        if not runs:
            raise ValueError(f"calibration on {self.graph.name!r}: no timed run since run {since}")
        alone = {d: ex.runs[since:] for d, ex in zip(self.workers, self._executions[1:])}
        res = link_costs(runs, self.graph, self.platform, *self.workers, alone=alone)
        res["linger_s"] = self.crossing.engine.idle_spin_s
        return res

    def apply(self, platform: Platform, result: Mapping[str, Any] | None = None, *,
              contention: bool = True) -> Platform:
        """``platform`` with the measured ``latency_s`` on the link between the two
        devices, ``handoff_s`` on the CPU device and, with ``contention`` and a
        slowdown above 1, the memory domain ``host`` of the two devices in which both
        active run ``slowdown`` times slower (each drawing ``slowdown * B / 2`` of
        ``B``, the CPU device's memory bandwidth), each lingering ``linger_s`` after
        its op (replacing a domain of that name)."""
        res = result if result is not None else self.result()
        cpu, gpu = self.workers
        link = platform.route(cpu, gpu)[0]
        links = tuple(dataclasses.replace(k, latency_s=res["latency_s"]) if k is link else k for k in platform.links)
        devices = tuple(dataclasses.replace(d, handoff_s=res["handoff_s"]) if d.name == cpu else d
                        for d in platform.devices)
        domains = tuple(platform.memory_domains)
        slowdown = float(res.get("slowdown", 1.0))
        if contention and slowdown > 1.0:
            dom = MemoryDomain.from_slowdown("host", [cpu, gpu], slowdown=slowdown,
                                             bandwidth_bytes_per_s=platform.device(cpu).mem_bandwidth_bytes_per_s)
            dom = dataclasses.replace(dom, linger_s=float(res.get("linger_s", 0.0)))
            domains = (*(m for m in domains if m.name != "host"), dom)
        return platform.replace(links=links, devices=devices, memory_domains=domains)

    def describe(self, result: Mapping[str, Any]) -> str:
        """One line of what was measured."""
        cpu, gpu = self.workers
        return (f"copy latency {result['latency_s'] * 1e6:.1f} us ({cpu}<->{gpu}: producer's end to the copy's "
                f"end less its bytes at the link's rate, median of {result['n_copies']} copies; each copy "
                f"{result['copy_s'] * 1e6:.1f} us), {gpu}->{cpu} hand-over {result['handoff_s'] * 1e6:.1f} us, "
                f"the two active {result.get('slowdown', 1.0):.3f}x slower ({cpu} ops "
                f"{result.get('cpu_ratio', 1.0):.3f}x, {gpu} ops {result.get('gpu_ratio', 1.0):.3f}x their "
                f"time alone)")

    def close(self) -> None:
        """Stop the executions' workers."""
        for ex in getattr(self, "_executions", []):
            ex.close()
