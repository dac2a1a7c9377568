"""Deterministic simulation cases that pin the engine's records and results.

``tests/data/engine_reference.json`` holds, for every case of :func:`cases`, a
digest of what the engine returned (every record and every result field, floats
in hex: bit for bit) when the reference was written. ``tests/test_engine_reference.py``
checks that today's engine returns the same. The cases spread over graph shapes
(chains, forks and joins, dense, layered, windowed, independent ops, view ops,
two-output ops, graph inputs and outputs), platforms (shared memory with handoff,
PCIe, multi-hop routes, half-duplex links, several streams, several dispatch
threads, a device too small for its plan), plans (default and random priorities,
pipelines, dynamic policies, partly placed dynamic plans), cost models (roofline,
small integer times full of ties, one without ``dispatch_time``), requests,
arrival intervals, noise seeds, ``record`` and ``check_memory``.

Write the reference again (only when the engine's behaviour is meant to change)::

    PYTHONPATH=. python tests/engine_cases.py --write
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hetsim.costmodel import Roofline
from hetsim.graphs import Graph
from hetsim.sim import Device, Link, Plan, PlanError, Platform, SimulationError, Simulator, simulate

REFERENCE = Path(__file__).parent / "data" / "engine_reference.json"
N_CASES = 1200
SHAPES = ("chain", "fork-join", "layered", "windowed", "independent", "dense")
OPS = ("matmul", "conv2d", "relu", "add", "softmax", "reshape")


# ------------------------------------------------------------------ cost models
class IntCost:
    """Small integer op and dispatch times per (node, device), whatever order the
    engine asks in: many exact ties."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def _draw(self, what: str, node: str, device: Device, k: int) -> float:
        return float(zlib.crc32(f"{self.seed}/{what}/{node}/{device.name}".encode()) % k)

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return self._draw("op", node, device, 4)

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return link.latency_s + nbytes / link.bandwidth_bytes_per_s

    def dispatch_time(self, graph: Graph, node: str, device: Device) -> float:
        return self._draw("dispatch", node, device, 2)


class NoDispatchCost:
    """Only the two required methods: the engine charges each device's ``dispatch_s``."""

    def __init__(self) -> None:
        self.roofline = Roofline()

    def op_time(self, graph: Graph, node: str, device: Device) -> float:
        return self.roofline.op_time(graph, node, device) * 1.5

    def transfer_time(self, nbytes: int, link: Link) -> float:
        return self.roofline.transfer_time(nbytes, link)


# --------------------------------------------------------------------- policies
class RandomPolicy:
    """A device drawn from the view's seeded generator."""

    name = "random"

    def select(self, node: str, view: Any) -> str:
        names = view.platform.device_names
        return names[int(view.rng.integers(len(names)))]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": {}}


class LeastLoadedPolicy:
    """The device that frees first (``view.device_free_at``); near its inputs on ties."""

    name = "least-loaded"

    def select(self, node: str, view: Any) -> str:
        preds = [view.location(p) for p in view.graph.nx.predecessors(node)]
        return min(view.platform.device_names,
                   key=lambda d: (view.device_free_at(d), d not in preds, d))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "params": {}}


# -------------------------------------------------------------------- platforms
def _dev(name: str, kind: str, **kw: Any) -> Device:
    base = dict(peak_flops=1e12 if kind == "cpu" else 8e12, mem_bandwidth_bytes_per_s=1e11,
                memory_bytes=2**34, launch_overhead_s=2e-6, dispatch_s=5e-6)
    base.update(kw)
    return Device(name, kind, **base)


def _one_peak(p: Platform) -> Platform:
    """``p`` with its devices' ``tensor_flops`` dropped: the reference digests were taken
    when the presets stated one peak per GPU; the cases test the engine, not a preset."""
    devs = tuple(dataclasses.replace(d, tensor_flops=None) for d in p.devices)
    return dataclasses.replace(p, devices=devs)


def platforms() -> dict[str, Platform]:
    """Presets and hand-made platforms exercising every resource the engine has."""
    out = {name: _one_peak(Platform.preset(name)) for name in ("cpu2", "xeon-p2200", "multi-gpu-4", "h100-server")}
    out["half-duplex"] = Platform(
        "half-duplex",
        (_dev("cpu", "cpu"), _dev("gpu", "gpu", streams=2)),
        (Link("cpu", "gpu", bandwidth_bytes_per_s=1e9, latency_s=1e-5, duplex=False),),
        dispatch_threads=2,
    )
    out["hops"] = Platform(
        "hops",
        (_dev("cpu", "cpu"), _dev("cpu1", "cpu", memory_domain="cpu", handoff_s=3e-6,
                                   handoff_bandwidth_bytes_per_s=5e9),
         _dev("gpu0", "gpu"), _dev("gpu1", "gpu", streams=2)),
        (Link("cpu", "gpu0", 8e9, 1e-5), Link("gpu1", "cpu", 8e9, 1e-5)),
        decision_s=1e-6,
    )
    out["tiny-gpu"] = Platform(
        "tiny-gpu",
        (_dev("cpu", "cpu"), _dev("gpu", "gpu", memory_bytes=3_000_000)),
        (Link("cpu", "gpu", 1e9, 1e-6),),
    )
    out["int"] = Platform(  # exact binary link times for IntCost
        "int",
        (_dev("a", "cpu", streams=2), _dev("b", "gpu"), _dev("c", "gpu", memory_domain="b",
                                                                 handoff_s=0.5)),
        (Link("a", "b", bandwidth_bytes_per_s=2.0**20, latency_s=0.25),),
        dispatch_threads=2,
        decision_s=0.125,
    )
    return out


# ----------------------------------------------------------------------- graphs
def _edges(shape: str, n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    if shape == "chain":
        return [(i, i + 1) for i in range(n - 1)]
    if shape == "independent":
        return []
    if shape == "fork-join":
        if n < 3:
            return [(0, 1)] if n == 2 else []
        branches = int(rng.integers(1, max(2, (n - 2) // 2 + 1)))
        body = list(range(1, n - 1))
        out = []
        for b in range(branches):
            chain = body[b::branches]
            if chain:
                out += [(0, chain[0]), *zip(chain, chain[1:]), (chain[-1], n - 1)]
        return out
    if shape == "dense":
        return [(u, v) for v in range(n) for u in range(v) if rng.integers(0, 4) > 0]
    if shape == "layered":
        width = int(rng.integers(1, 6))
        layers = [list(range(i, min(i + width, n))) for i in range(0, n, width)]
        out = []
        for a, b in zip(layers, layers[1:]):
            for v in b:
                k = int(rng.integers(1, len(a) + 1))
                out += [(int(u), v) for u in sorted(rng.choice(a, size=k, replace=False))]
        return out
    out = []  # windowed: each node reads 0-3 of the 6 before it
    for v in range(1, n):
        lo = max(0, v - 6)
        k = int(rng.integers(0, min(3, v - lo) + 1))
        out += [(int(u), v) for u in sorted(rng.choice(np.arange(lo, v), size=k, replace=False))]
    return out


def random_graph(rng: np.random.Generator, n: int) -> Graph:
    """A random DAG of ``n`` ops: a shape, op kinds, sizes, two-output ops, graph I/O."""
    shape = SHAPES[int(rng.integers(len(SHAPES) - (n > 100)))]  # dense only when small
    edges = _edges(shape, n, rng)
    g = Graph(name=f"{shape}-{n}", meta={"granularity": "op"})
    outs = []
    scale = 10 ** int(rng.integers(0, 7))
    for i in range(n):
        op = OPS[int(rng.integers(len(OPS)))]
        n_out = 2 if rng.integers(0, 6) == 0 else 1
        elems = [int(rng.integers(0, scale + 1)) for _ in range(n_out)]
        outs.append(elems)
        params = 4 * int(rng.integers(0, scale + 1)) if op in ("matmul", "conv2d") else 0
        flops = 0.0 if op == "reshape" else float(rng.choice([0.0, 1e6, 3e8, 2e10]))
        g.add_op(f"n{i:03d}", op, inputs=[([max(elems[0], 1)], "float32")],
                 outputs=[([e], "float32") for e in elems], flops=flops, param_bytes=params,
                 bytes=4 * (2 * sum(elems)) + params)
    for u, v in edges:
        out = int(rng.integers(0, len(outs[u])))
        if rng.integers(0, 8) == 0:  # the edge's size overrides the output's shape
            g.add_edge(f"n{u:03d}", f"n{v:03d}", output=out, bytes=int(rng.integers(0, 4 * scale + 1)))
        else:
            g.add_edge(f"n{u:03d}", f"n{v:03d}", output=out)
    if rng.integers(0, 2):
        sources = [x for x in g.nx if g.nx.in_degree(x) == 0]
        sinks = [x for x in g.nx if g.nx.out_degree(x) == 0]
        g.meta["inputs"] = [{"name": f"x{j}", "bytes": int(rng.integers(0, 4 * scale + 1)),
                             "consumers": sorted(rng.choice(sources, size=min(len(sources), 1 + j),
                                                            replace=False).tolist())}
                            for j in range(int(rng.integers(1, 3)))]
        g.meta["outputs"] = [{"node": x, "output": 0, "bytes": 4 * outs[int(x[1:])][0]} for x in sinks]
        if rng.integers(0, 3) == 0 and len(outs[0]) > 1:
            g.meta["outputs"].append({"node": "n000", "output": 1, "bytes": 4 * outs[0][1]})
    return g


# ------------------------------------------------------------------------ plans
def _priority(g: Graph, rng: np.random.Generator) -> dict[str, float]:
    """Random priorities consistent with dependencies (ties included)."""
    prio: dict[str, float] = {}
    for n in g.topological_order():
        lo = max((prio[p] for p in g.nx.predecessors(n)), default=0.0)
        prio[n] = lo + float(rng.integers(0, 3))
    return prio


def random_plan(g: Graph, platform: Platform, rng: np.random.Generator, kind: str) -> Plan:
    names = platform.device_names
    topo = g.topological_order()
    fits = {n: [d.name for d in platform.devices if g.nx.nodes[n]["bytes"] <= d.memory_bytes] or names
            for n in topo}
    if kind == "pipeline":
        k = min(len(names), len(topo))
        cuts = sorted(rng.choice(np.arange(1, len(topo)), size=k - 1, replace=False).tolist()) if k > 1 else []
        stages = [topo[a:b] for a, b in zip([0, *cuts], [*cuts, len(topo)])]
        devs = [names[int(i)] for i in rng.permutation(len(names))[:k]]
        placement = {n: d for st, d in zip(stages, devs) for n in st}
        return Plan(placement, stages=stages, microbatches=int(rng.integers(1, 5)))
    placement = {n: fits[n][int(rng.integers(len(fits[n])))] for n in topo}
    prio = _priority(g, rng) if kind in ("priority", "dynamic", "partial") else {}
    if kind == "dynamic":
        return Plan({}, priority=prio, policy=RandomPolicy() if rng.integers(0, 2) else LeastLoadedPolicy())
    if kind == "partial":
        keep = {n: d for n, d in placement.items() if rng.integers(0, 2)}
        return Plan(keep, priority=prio, policy=LeastLoadedPolicy())
    return Plan(placement, priority=prio)


# ------------------------------------------------------------------------ cases
@dataclass
class Case:
    """One simulation: ``simulate(graph, platform, plan, cost, **options)``."""

    id: str
    graph: Graph
    platform: Platform
    plan: Plan
    cost: Any
    options: dict[str, Any]


def make_case(i: int, plats: dict[str, Platform]) -> Case:
    """Case ``i`` (deterministic: seeded by ``i``)."""
    rng = np.random.default_rng(1000 + i)
    pname = sorted(plats)[int(rng.integers(len(plats)))]
    platform = plats[pname]
    n = int(rng.choice([1, 2, 5, 12, 30, 60])) if i % 50 else int(rng.choice([400, 1500]))
    g = random_graph(rng, n)
    kind = ["default", "priority", "pipeline", "dynamic", "partial"][int(rng.integers(5))]
    plan = random_plan(g, platform, rng, kind)
    cost_kind = "int" if pname == "int" else ["roofline", "roofline", "no-dispatch"][int(rng.integers(3))]
    cost = IntCost(i) if cost_kind == "int" else Roofline() if cost_kind == "roofline" else NoDispatchCost()
    options: dict[str, Any] = {"record": bool(rng.integers(0, 4) > 0)}
    if rng.integers(0, 2):
        options["requests"] = int(rng.choice([2, 3, 5]))
        if rng.integers(0, 2):
            options["interval_s"] = float(rng.choice([1e-5, 0.25, 3e-4]))
    if rng.integers(0, 4) == 0:
        options["noise"] = 0.2
        options["seed"] = int(rng.integers(0, 100))
    elif plan.policy is not None:  # the seed of view.rng
        options["seed"] = int(rng.integers(0, 100))
    if pname == "tiny-gpu" or rng.integers(0, 6) == 0:
        options["check_memory"] = bool(rng.integers(0, 2))
    cid = f"{i}:{g.name}:{pname}:{kind}:{cost_kind}:" + ",".join(f"{k}={v}" for k, v in sorted(options.items()))
    return Case(cid, g, platform, plan, cost, options)


def cases(count: int = N_CASES) -> list[Case]:
    plats = platforms()
    return [make_case(i, plats) for i in range(count)]


def _num(x: Any) -> Any:
    if isinstance(x, float):
        return x.hex()
    if isinstance(x, dict):
        return {str(k): _num(v) for k, v in sorted(x.items())}
    if isinstance(x, list | tuple):
        return [_num(v) for v in x]
    return x


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:24]


def outcome(case: Case, simulator: Simulator | None = None) -> dict[str, Any]:
    """What the engine returns for ``case`` (through ``simulator``, a
    :class:`~sim.Simulator` of its graph, platform and cost, when given): digests of
    the records and the result fields (bit-exact), the makespan in hex, or the error
    message."""
    try:
        if simulator is None:
            res = simulate(case.graph, case.platform, case.plan, case.cost, **case.options)
        else:
            res = simulator.simulate(case.plan, **case.options)
    except (PlanError, SimulationError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    fields = {k: getattr(res, k) for k in (
        "makespan", "arrivals", "completions", "latencies", "throughput", "ops", "device_busy",
        "device_utilisation", "link_busy", "link_utilisation", "bytes_moved", "dispatch_busy",
        "peak_memory", "weights", "failures")}
    out = {"makespan": _num(res.makespan), "result": _sha(_num(fields))}
    if res.records is not None:
        rows = [[_num(r[c]) for c in r] for r in res.records]
        out["records"] = _sha(rows)
        out["n_records"] = len(rows)
    return out


def main(argv: list[str]) -> None:
    if argv != ["--write"]:
        raise SystemExit("usage: python tests/engine_cases.py --write")
    ref = {c.id: outcome(c) for c in cases()}
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(ref, indent=0, sort_keys=True) + "\n")
    errors = sum("error" in o for o in ref.values())
    print(f"wrote {len(ref)} cases ({errors} end in a SimulationError) to {REFERENCE}")


if __name__ == "__main__":
    main(sys.argv[1:])
