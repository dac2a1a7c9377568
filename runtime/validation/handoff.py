"""The handoff between workers: how long an op waits for an input from another worker.

On a CPU-only platform every worker reads the others' outputs in place, so an edge
between two workers costs no copy; it costs a *handoff*: the consumer's worker,
idle and waiting, must notice that its input is ready (a thread woken on another
core, the GIL handed over). The simulator charges it as ``Device.handoff_s``.

* :func:`handoff_gaps` -- from the records of a run: for every op whose worker was
  idle when its last input became ready, the gap from that moment to the worker
  picking the op, and whether that input came from another worker;
* :func:`handoff_stats` -- from those gaps, the handoff to charge: the mean gap
  after an input from another worker less the mean after one from the same
  worker (winsorised at the 99th percentile);
* :func:`measure_handoff` -- executes a plan and returns those statistics
  (the executor's own bookkeeping, which the per-op dispatch already prices);
* :class:`HostCalibration` -- all of these, and the slowdown of two workers busy
  at once against one alone (memory contention), in rounds interleaved with the
  runs being validated;
* :func:`measure_read_bandwidth` -- the other half of the handoff: an op reading a
  tensor the other worker produced runs longer than one whose input is hot in its
  own core's caches. Runs a one-worker plan and a plan whose every edge crosses
  workers in alternating rounds, and divides the extra kernel (busy) time by the
  bytes that crossed (``Device.handoff_bandwidth_bytes_per_s``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.costmodel.memory_domain import MemoryDomain
from hetsim.costmodel.platform import Platform as _Platform
from hetsim.graphs.graph import Graph as _Graph
from hetsim.runtime.executor.execute import Execution, execute
from hetsim.runtime.executor.setup import Wiring as _Wiring
from hetsim.runtime.executor.setup import wire
from hetsim.runtime.validation.link_calibration import crossing_plan
from hetsim.sim.plan import Plan

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph
    from hetsim.runtime.executor.setup import Wiring
    from hetsim.sim.plan import Plan

__all__ = ["HANDOFF_COLUMNS", "HostCalibration", "calibrated_platform", "handoff_gaps", "handoff_stats", "measure_handoff", "measure_read_bandwidth"]

#: columns of :func:`handoff_gaps`
HANDOFF_COLUMNS = ["node", "request", "device", "source", "cross", "gap_s"]


def handoff_gaps(records: Iterable[Mapping[str, Any]], graph: Graph) -> pd.DataFrame:
    """Gaps between an op's last input becoming ready and its worker picking it.

    Parameters
    ----------
    records
        Records in the simulator's format (``RunResult.records``): ``op`` records
        (kernel start and end) and, where present, ``dispatch`` records (whose start
        is when the worker took the op; without them the kernel start counts).
    graph
        The graph that ran (its edges say which op waited for which).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`HANDOFF_COLUMNS`, one row per op with predecessors whose
        worker had finished its previous op before the last input was ready (a
        busy worker finds the input waiting: no handoff). ``source`` is the device
        of the last input's producer, ``cross`` whether it is another device.
    """
    import pandas as pd

    ops: dict[tuple[str, int], Mapping[str, Any]] = {}
    picks: dict[tuple[str, int], float] = {}
    for r in records:
        key = (str(r["node"]), int(r["request"]))
        if r["kind"] == "op":
            ops[key] = r
        elif r["kind"] == "dispatch":
            picks[key] = float(r["start"])
    lanes: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for r in ops.values():
        lanes.setdefault((str(r["resource"]), int(r["stream"])), []).append((float(r["start"]), float(r["end"])))
    previous: dict[tuple[str, int], float] = {}
    for (res, stream), spans in lanes.items():
        spans.sort()
        prev_end = -np.inf
        for start, end in spans:
            previous[(res, stream, start)] = prev_end  # type: ignore[index]
            prev_end = end
    rows = []
    for (v, req), rec in ops.items():
        if v not in graph.nx:
            continue
        ins = [ops[(p, req)] for p in graph.nx.predecessors(v) if (p, req) in ops]
        if not ins:
            continue
        last = max(ins, key=lambda r: float(r["end"]))
        ready = float(last["end"])
        start = float(rec["start"])
        prev_end = previous[(str(rec["resource"]), int(rec["stream"]), start)]  # type: ignore[index]
        if prev_end > ready:
            continue
        pick = picks.get((v, req), start)
        rows.append({"node": v, "request": req, "device": str(rec["resource"]), "source": str(last["resource"]),
                     "cross": str(last["resource"]) != str(rec["resource"]), "gap_s": pick - ready})
    return pd.DataFrame(rows, columns=HANDOFF_COLUMNS)


def measure_handoff(
    graph: Graph,
    plan: Plan,
    platform: Platform | str,
    *,
    backend: str = "torch",
    warmup: int = 3,
    repeats: int = 10,
    seed: int | None = None,
) -> dict[str, Any]:
    """Execute ``plan`` and measure the handoff between its workers.

    Returns
    -------
    dict
        :func:`handoff_stats` of the timed runs' gaps (``handoff_s``, ``cross_s``,
        ``same_s``, ``n_cross``, ``n_same``), and ``gaps`` (the :func:`handoff_gaps`
        frame of the median run).

    Raises
    ------
    ValueError
        When the run has no idle wait after an input from another worker (the
        plan keeps every edge on one worker).
    """
    plat = _Platform.load(platform) if isinstance(platform, str) else platform
    run = execute(graph, plan, plat, backend=backend, warmup=warmup, repeats=repeats, seed=seed, check=False)
    gaps = handoff_gaps(run.records, graph)
    stats = handoff_stats(gaps, empty=f"plan for {graph.name!r}: no op waited for an input from another worker; "
                             f"use a plan that places neighbours on different devices (e.g. round-robin)")
    return {**stats, "gaps": gaps}


def handoff_stats(gaps: pd.DataFrame, *, empty: str = "no op waited for an input from another worker",
                  clip: float = 0.99) -> dict[str, Any]:
    """The handoff a simulator should charge, from :func:`handoff_gaps` rows.

    ``handoff_s`` is the mean gap after an input from another worker less the mean
    gap after one from the same worker, floored at 0; ``cross_s`` and ``same_s``
    are those means, ``n_cross`` and ``n_same`` the gaps counted. Each mean is taken
    after clipping its gaps at their ``clip`` quantile (a winsorised mean), so
    that a rare preemption of tens of milliseconds does not set the figure.

    The mean, not the median: a makespan adds up the handoffs on its critical
    path, so what it pays per handoff is the mean gap. On a quiet host the two are
    close; with another process on the cores, the gaps after a cross-worker input
    are heavy-tailed (the woken worker waits for its core): in a validation on
    ``cpu2`` with one CPU-bound process beside it, the median was 63-85 us and the
    mean 324-565 us, and the median under-predicted every plan that crosses often.

    Raises
    ------
    ValueError
        ``empty``, when no gap follows an input from another worker.

    Examples
    --------
    >>> import pandas as pd
    >>> gaps = pd.DataFrame({"cross": [True] * 4 + [False] * 2,
    ...                      "gap_s": [50e-6, 60e-6, 70e-6, 420e-6, 10e-6, 10e-6]})
    >>> stats = handoff_stats(gaps, clip=1.0)
    >>> round(stats["handoff_s"] * 1e6, 1), round(stats["cross_s"] * 1e6, 1), stats["n_cross"]
    (140.0, 150.0, 4)
    """
    if not 0.5 <= clip <= 1.0:
        raise ValueError(f"clip must be a quantile in [0.5, 1], got {clip!r}")
    cross, same = gaps[gaps["cross"]]["gap_s"], gaps[~gaps["cross"]]["gap_s"]
    if cross.empty:
        raise ValueError(empty)

    def clipped_mean(x: pd.Series) -> float:
        return float(x.clip(upper=x.quantile(clip)).mean())

    same_s = clipped_mean(same) if len(same) else 0.0
    cross_s = clipped_mean(cross)
    return {"handoff_s": max(cross_s - same_s, 0.0), "cross_s": cross_s,
            "same_s": same_s, "n_cross": int(len(cross)), "n_same": int(len(same))}


def _busy(records: Iterable[Mapping[str, Any]], nodes: frozenset[str] | None = None, *, prefix: str = "") -> float:
    """Kernel time of a run: the summed durations of its ``op`` records (of ``nodes``
    only, when given; of nodes whose name starts with ``prefix``)."""
    return sum(r["end"] - r["start"] for r in records if r["kind"] == "op"
               and (nodes is None or r["node"] in nodes) and str(r["node"]).startswith(prefix))


def _one_and_crossing(graph: Graph, platform: Platform, devices: tuple[str, str] | None) -> tuple[Plan, Plan, int]:
    """The two plans that measure the read rate: every node on the first of
    ``devices`` (default: the platform's first two), and nodes alternating between
    the two in topological order; and the bytes of the edges the second crosses."""
    a, b = devices or tuple(platform.device_names[:2])
    if not platform.shares_memory(a, b):
        raise ValueError(f"{platform.name}: devices {a!r} and {b!r} do not share memory "
                         f"(a link moves their tensors)")
    crossing = crossing_plan(graph, (a, b))  # placed in topological order
    cross_bytes = sum(int(d["bytes"]) for u, v, d in graph.nx.edges(data=True)
                      if crossing.placement[u] != crossing.placement[v])
    if cross_bytes == 0:
        raise ValueError(f"graph {graph.name!r}: no edge crosses between {a!r} and {b!r}")
    return Plan(dict.fromkeys(crossing.placement, a)), crossing, cross_bytes


def side_by_side(graph: Graph, wiring: Wiring, devices: tuple[str, str]) -> tuple[Graph, Wiring, Plan]:
    """Two independent copies of ``graph`` (nodes and inputs prefixed ``a/`` and
    ``b/``), their wiring (constants shared) and the plan that runs copy ``a`` on
    ``devices[0]`` and copy ``b`` on ``devices[1]``: both workers busy at once,
    each with the work a one-worker run gives it alone."""
    import copy

    import networkx as nx

    def ref(tag: str, src: tuple[str, Any]) -> tuple[str, Any]:
        kind, val = src
        if kind == "node":
            return ("node", (f"{tag}/{val[0]}", val[1]))
        return (kind, f"{tag}/{val}") if kind == "input" else (kind, val)

    g = nx.DiGraph()
    meta = copy.deepcopy(graph.meta)
    meta["inputs"], meta["outputs"] = [], []
    sources: dict[str, list[tuple[str, Any]]] = {}
    slices: dict[str, dict[int, tuple[int, int, int]]] = {}
    inputs: dict[str, Any] = {}
    placement: dict[str, str] = {}
    for tag, dev in zip(("a", "b"), devices):
        g.update(nx.relabel_nodes(graph.nx, {n: f"{tag}/{n}" for n in graph.nx}, copy=True))
        for i in graph.meta.get("inputs", []):
            meta["inputs"].append({**i, "name": f"{tag}/{i['name']}", "consumers": [f"{tag}/{c}" for c in i["consumers"]]})
        for o in graph.meta.get("outputs", []):
            meta["outputs"].append({**o, "node": f"{tag}/{o['node']}"})
        for n, srcs in wiring.sources.items():
            sources[f"{tag}/{n}"] = [ref(tag, x) for x in srcs]
        slices.update({f"{tag}/{n}": dict(v) for n, v in wiring.slices.items()})
        inputs.update({f"{tag}/{k}": v for k, v in wiring.inputs.items()})
        placement.update({f"{tag}/{n}": dev for n in graph.nx})
    pair = _Graph(g, name=f"{graph.name}-side-by-side", meta=meta)
    return pair, _Wiring(sources, wiring.consts, slices, inputs), Plan(placement)


def _read_rate(extra: list[float], cross_bytes: int) -> tuple[float, float]:
    """Seconds per crossing byte (median extra kernel time / bytes) and its inverse
    (inf when the crossing runs were not slower)."""
    per_byte = float(np.median(extra)) / cross_bytes
    return per_byte, (1.0 / per_byte if per_byte > 0 else math.inf)


def measure_read_bandwidth(
    graph: Graph,
    platform: Platform | str,
    *,
    devices: tuple[str, str] | None = None,
    backend: str = "torch",
    rounds: int = 5,
    warmup: int = 2,
    repeats: int = 7,
) -> dict[str, Any]:
    """Rate at which an op reads inputs that another worker of its memory produced.

    Alternates, ``rounds`` times, a plan with every node on ``devices[0]`` and a
    round-robin plan over both ``devices`` (every edge of a chain crosses), each
    executed with ``warmup`` + ``repeats`` runs; per round, the round-robin run's
    kernel (busy) time less the one-worker run's is the time spent reading
    crossing inputs. Alternating rounds cancel a machine that drifts in speed.

    Parameters
    ----------
    graph, platform
        What to run and where (two devices sharing memory, e.g. ``cpu2``).
    devices
        The two workers (default: the first two devices of the platform).

    Returns
    -------
    dict
        ``bandwidth_bytes_per_s`` (crossing bytes / median extra busy time; inf when
        the extra time is not positive), ``s_per_byte``, ``extra_s`` (per round),
        ``cross_bytes`` (per round-robin run) and ``busy_s`` (``{"one": [...],
        "crossing": [...]}``, per round).

    Raises
    ------
    ValueError
        When the two devices do not share memory, or no edge crosses.
    """
    plat = _Platform.load(platform) if isinstance(platform, str) else platform
    one, crossing, cross_bytes = _one_and_crossing(graph, plat, devices)
    busy: dict[str, list[float]] = {"one": [], "crossing": []}
    for _ in range(rounds):
        for key, plan in (("one", one), ("crossing", crossing)):
            run = execute(graph, plan, plat, backend=backend, warmup=warmup, repeats=repeats, check=False)
            busy[key].append(_busy(run.records))
    extra = [c - o for c, o in zip(busy["crossing"], busy["one"])]
    per_byte, rate = _read_rate(extra, cross_bytes)
    return {"bandwidth_bytes_per_s": rate, "s_per_byte": per_byte, "extra_s": extra, "cross_bytes": cross_bytes,
            "busy_s": busy}


class HostCalibration:
    """The handoff between two workers measured in rounds interleaved with other runs.

    Two executions of ``graph`` on ``platform``: every node on the first worker, and
    neighbours in topological order alternating between the two (every edge of a
    chain crosses). The caller runs both once per round, next to the runs it
    measures (:func:`runtime.validation.validate.validate_all` with ``calibrate=``), so that the
    host costs it derives are those of the same minutes: on a shared VM, waking the
    other core's thread costs 20 us in a quiet hour and 50 us in a busy one.

    A third execution runs two copies of ``graph`` side by side, one per worker
    (:func:`side_by_side`): both workers busy at once. A fourth runs every node but
    the first on the second worker: that worker alone, on its own core.

    :meth:`result` pools the crossing runs' :func:`handoff_gaps` (:func:`handoff_stats`:
    ``handoff_s``, the mean gap after an input from the other worker less the mean
    after one from the same worker), divides the crossing runs' extra kernel time over the
    one-worker runs' by the bytes that crossed (``handoff_bandwidth_bytes_per_s``,
    as :func:`measure_read_bandwidth`), divides the second worker's kernel time alone
    by the first's on the same ops (``second_worker_ratio``: on a shared VM the two
    virtual cores are not equally fast; in six validation runs here the second
    ran the same ops 1.5-8 % slower on average, by model, and 18 % in one run), and divides
    each worker's kernel time side by side by its own time alone (``slowdown``: the
    two workers' contention for the memory, the caches and the interpreter);
    :meth:`apply` writes the handoff and read rate into a platform's devices and the
    slowdown as a memory domain (:mod:`sim.contention`). The second worker's ratio
    is for the cost model: :class:`costmodel.DeviceScaled` prices that worker's ops
    (a profile measured on the first worker's core) by it.

    Parameters
    ----------
    graph, relax
        The calibration workload and its model (use one that is not being
        validated, so that no validated plan calibrates its own simulation).
    platform
        Two devices sharing memory (e.g. ``cpu2``).
    devices
        The two workers (default: the platform's first two devices).
    backend, warmup
        As :func:`runtime.execute`.
    """

    def __init__(self, graph: Graph, relax: Any, platform: Platform, *, devices: tuple[str, str] | None = None,
                 backend: str = "torch", warmup: int = 3) -> None:
        one, crossing, self.cross_bytes = _one_and_crossing(graph, platform, devices)
        self.graph = graph
        self.worker = next(iter(one.placement.values()))
        self.workers = (self.worker, next(d for d in crossing.placement.values() if d != self.worker))
        order = graph.topological_order()
        # the second worker alone on every node but the first (which keeps the first
        # worker active, so that the second is pinned to its own core, not the first's)
        second = Plan({n: self.workers[0] if i == 0 else self.workers[1] for i, n in enumerate(order)})
        self.second_nodes = frozenset(order[1:])
        self.on_second = frozenset(n for n, d in crossing.placement.items() if d == self.workers[1])
        self.one = self.crossing = self.pair = self.second = None
        try:
            self.one = Execution(graph, one, platform, wire(graph, relax), backend=backend, model=relax,
                                 check=False)
            self.crossing = Execution(graph, crossing, platform, wire(graph, relax), backend=backend,
                                      model=relax, check=False)
            pair_graph, pair_wiring, pair_plan = side_by_side(graph, wire(graph, relax), self.workers)
            self.pair = Execution(pair_graph, pair_plan, platform, pair_wiring, backend=backend, check=False)
            self.second = Execution(graph, second, platform, wire(graph, relax), backend=backend, model=relax,
                                    check=False)
            for ex in self.executions:
                ex.run(warmup, timed=False)
        except BaseException:
            self.close()
            raise

    @property
    def executions(self) -> list[Any]:
        """The one-worker, the crossing, the side-by-side and the second-worker
        execution (run each once per round)."""
        return [self.one, self.crossing, self.pair, self.second]

    def result(self, since: int = 0) -> dict[str, Any]:
        """``handoff_s``, ``handoff_bandwidth_bytes_per_s`` (inf when the crossing runs
        were not slower than their ops alone on their workers, the second worker's at
        its ratio), ``slowdown``, ``second_worker_ratio`` (median over the rounds),
        ``cross_s``/``same_s`` (mean gaps, :func:`handoff_stats`), ``n_cross``,
        ``extra_s`` (that extra kernel time of the crossing run, per round) and ``rounds``,
        from the timed runs from number ``since`` on."""
        import pandas as pd

        runs_c, runs_o = self.crossing.runs[since:], self.one.runs[since:]
        if not runs_c:
            raise ValueError(f"calibration on {self.graph.name!r}: no timed run since run {since}")
        gaps = pd.concat([handoff_gaps(recs, self.graph) for recs in runs_c], ignore_index=True)
        stats = handoff_stats(gaps, empty=f"calibration on {self.graph.name!r}: no op waited for the other worker")
        del stats["n_same"]
        alone = [_busy(o) for o in runs_o]  # the first worker alone, per round
        # the second worker alone against the first alone, on the same ops
        nodes = self.second_nodes
        speed = [_busy(r, nodes) / a for r, a in zip(self.second.runs[since:], (_busy(o, nodes) for o in runs_o))
                 if a > 0]
        second = float(np.median(speed)) if speed else 1.0
        # reading crossing inputs: the crossing run's kernel time over what its ops take
        # alone on their workers (the second worker's at its ratio)
        on_b = self.on_second
        crossing = [_busy(c) for c in runs_c]
        expected = [a + (second - 1.0) * _busy(o, on_b) for o, a in zip(runs_o, alone)]
        extra = [c - e for c, e in zip(crossing, expected)]
        # both workers busy (side by side) against each alone: each copy's kernel time
        # over that worker's own time alone (the second's: the first's times its ratio)
        ratios = [(_busy(p, prefix="a/") / a + _busy(p, prefix="b/") / (a * second)) / 2
                  for p, a in zip(self.pair.runs[since:], alone) if a > 0]
        slowdown = float(np.median(ratios)) if ratios else 1.0
        # the workers spin this long for their next op: with the contention model, the
        # crossing run's idle worker lingers between its ops, so every op of that run
        # is charged the slowdown, and only the rest of its extra time is reading
        linger = self.crossing.engine.idle_spin_s
        charged = [c - max(slowdown, 1.0) * e for c, e in zip(crossing, expected)] if linger else extra
        return {**stats, "handoff_bandwidth_bytes_per_s": _read_rate(charged, self.cross_bytes)[1],
                "handoff_bandwidth_alone_bytes_per_s": _read_rate(extra, self.cross_bytes)[1],
                "slowdown": slowdown, "second_worker_ratio": second, "linger_s": linger,
                "extra_s": extra, "rounds": len(extra)}

    def apply(self, platform: Platform, result: Mapping[str, Any] | None = None, *,
              contention: bool = True) -> Platform:
        """``platform`` with the measured ``handoff_s`` and read bandwidth on every
        device that shares memory with the calibrated workers (a platform
        without them stays as it is), and, with ``contention`` and a ``slowdown``
        above 1, a memory domain of those devices in which two busy at once
        reproduce it (:func:`calibrated_platform`; replacing a domain of the same
        name)."""
        res = result if result is not None else self.result()
        return calibrated_platform(platform, res, self.worker, contention=contention)

    def describe(self, result: Mapping[str, Any]) -> str:
        """One line of what was measured."""
        bw = result["handoff_bandwidth_bytes_per_s"]
        return (f"handoff {result['handoff_s'] * 1e6:.1f} us, read rate "
                f"{'-' if bw == float('inf') else f'{bw / 1e9:.2f} GB/s'}, two workers busy "
                f"{result['slowdown']:.3f}x slower (memory contention)"
                + (f", the second worker alone {result['second_worker_ratio']:.3f}x the first's op times"
                   if "second_worker_ratio" in result else ""))

    def close(self) -> None:
        """Stop both executions' workers."""
        for ex in (self.one, self.crossing, self.pair, self.second):
            if ex is not None:
                ex.close()


def calibrated_platform(platform: Platform, result: Mapping[str, Any], worker: str, *,
                        contention: bool = True) -> Platform:
    """``platform`` with a calibration's host costs (:meth:`HostCalibration.result`:
    ``handoff_s``, ``handoff_bandwidth_bytes_per_s``, ``slowdown``, ``linger_s``) on
    every device sharing memory with ``worker``; with ``contention`` and a slowdown
    above 1, a memory domain of those devices (named after their ``memory_domain``,
    replacing a domain of that name) in which two busy at once run ``slowdown``
    times slower (each draws ``slowdown * B / 2`` of ``B``, ``worker``'s memory
    bandwidth) and a worker keeps drawing for ``linger_s`` after its op (it spins
    for its next one). Without the contention model, the read rate is the one that
    charges the crossing runs' whole extra time to reading
    (``handoff_bandwidth_alone_bytes_per_s``, where the result has it)."""
    from dataclasses import replace

    slowdown = float(result.get("slowdown", 1.0))
    modelled = contention and slowdown > 1.0
    key = "handoff_bandwidth_bytes_per_s"
    if not modelled and "handoff_bandwidth_alone_bytes_per_s" in result:
        key = "handoff_bandwidth_alone_bytes_per_s"
    bw = float(result[key])
    members = [d.name for d in platform.devices if platform.shares_memory(worker, d.name)]
    devices = tuple(
        replace(d, handoff_s=float(result["handoff_s"]),
                handoff_bandwidth_bytes_per_s=None if math.isinf(bw) else bw)
        if d.name in members else d
        for d in platform.devices)
    domains = platform.memory_domains
    if modelled:
        name = platform.device(worker).memory_domain
        b = platform.device(worker).mem_bandwidth_bytes_per_s
        linger = float(result.get("linger_s", 0.0))
        linger = 0.0 if math.isnan(linger) else linger
        domains = (*(d for d in domains if d.name != name),
                   MemoryDomain(name, b, dict.fromkeys(members, slowdown * b / 2), linger))
    return platform.replace(devices=devices, memory_domains=domains)
