"""Figure 5: heuristics against the CP-SAT optimum on small graphs (optimality gap).

Every heuristic of ``sweep.toml`` beside this file and the ``optimal`` scheduler
(CP-SAT, :mod:`schedulers.optimal`) plan each small graph: seeded random DAGs of
8-20 nodes (:func:`random_dag`) and small real subgraphs (GoogLeNet inception
blocks, a 2-step LSTM, a 3-step GRU, fused granularity); every plan is simulated
for one request. One tidy row per (graph, platform, cost model, scheduler) is
appended to ``results.csv`` in this folder (rows already there are skipped)::

    python experiments/fig5_optimality_gap/run.py && python experiments/fig5_optimality_gap/plot.py

``plot.py`` computes gap = heuristic makespan / reference - 1, the reference being
the simulated makespan of the optimal plan when CP-SAT proved it optimal
(``opt_status == "OPTIMAL"``), else CP-SAT's lower bound (``opt_bound_s``: the gap
is then an upper bound). ``--quick`` runs two 6-node random DAGs and three
heuristics (for the tests). CP-SAT runs in this process with the ``workers``
of ``[optimal]`` (2 threads), graphs one after the other.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
import tomllib
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetsim.graphs.graph import Graph, tensor_bytes

HERE = Path(__file__).resolve().parent

#: columns of results.csv, in order
COLUMNS = (
    "point_id", "status", "family", "graph", "nodes", "edges", "n", "seed", "max_in", "model",
    "batch", "model_args", "regions", "platform", "cost", "scheduler", "scheduler_args",
    "makespan_s", "opt_status", "opt_objective_s", "opt_bound_s", "opt_lower_bound_s",
    "solve_time_s", "sched_time_s", "sim_time_s", "error", "sweep", "git_commit",
    "hetsim_version", "finished_at",
)  # fmt: skip

# op kind -> probability, FLOPs per output element range (log10) for the random DAGs
_KINDS = {"conv2d": 0.35, "matmul": 0.25, "relu": 0.25, "add": 0.15}


# -------------------------------------------------------------------- graphs
def random_dag(n: int, seed: int, *, max_in: int = 3, window: int = 6) -> Graph:
    """A seeded random DNN-like DAG of ``n`` nodes (same arguments, same graph).

    Node ``v`` reads 1..``max_in`` distinct earlier nodes among the ``window``
    before it (so the graph is deep as well as wide). Op kinds are conv2d (35 %),
    matmul (25 %), relu (25 %) and add (15 %); an output has 10^4-10^6.5 float32
    elements (40 kB-13 MB); a conv2d or matmul does 10^7.5-10^10 FLOPs and reads
    10^4-10^6.5 float32 weights, an element-wise op one FLOP per element. ``bytes``
    is inputs + output + weights, the edge bytes the producer's output size.
    Sources read the graph input ``x`` (1 MB); sinks are the graph outputs.

    Examples
    --------
    >>> g = random_dag(10, seed=1)
    >>> g.number_of_nodes(), random_dag(10, seed=1).to_dict() == g.to_dict()
    (10, True)
    """
    if n < 1 or max_in < 1 or window < 1:
        raise ValueError(f"need n, max_in, window >= 1, got {n}, {max_in}, {window}")
    rng = np.random.default_rng(seed)
    kinds = list(_KINDS)
    preds: list[list[int]] = [[]]
    for v in range(1, n):
        pool = list(range(max(0, v - window), v))
        k = int(rng.integers(1, min(max_in, len(pool)) + 1))
        preds.append(sorted(int(u) for u in rng.choice(pool, size=k, replace=False)))
    elems = [int(10 ** rng.uniform(4.0, 6.5)) for _ in range(n)]
    g = Graph(name=f"rand-n{n}-s{seed}", meta={"source": "random_dag", "seed": seed,
                                               "granularity": "synthetic"})  # fmt: skip
    for v in range(n):
        kind = str(rng.choice(kinds, p=list(_KINDS.values())))
        ins = [([elems[u]], "float32") for u in preds[v]] or [([250_000], "float32")]
        if kind in ("conv2d", "matmul"):
            flops = float(10 ** rng.uniform(7.5, 10.0))
            weights = 4 * int(10 ** rng.uniform(4.0, 6.5))
        else:
            flops, weights = float(elems[v]), 0
        nbytes = sum(tensor_bytes(s, d) for s, d in ins) + 4 * elems[v] + weights
        g.add_op(f"n{v:02d}", kind, inputs=ins, outputs=[([elems[v]], "float32")], flops=flops,
                 bytes=nbytes, param_bytes=weights)  # fmt: skip
    for v in range(1, n):
        for u in preds[v]:
            g.add_edge(f"n{u:02d}", f"n{v:02d}")
    sources = [x for x in g.nx if g.nx.in_degree(x) == 0]
    sinks = [x for x in g.nx if g.nx.out_degree(x) == 0]
    g.meta["inputs"] = [{"name": "x", "shape": [250_000], "dtype": "float32", "bytes": 1_000_000,
                         "consumers": sources}]  # fmt: skip
    g.meta["outputs"] = [{"node": x, "output": 0, "bytes": 4 * elems[int(x[1:])]} for x in sinks]
    return g


def subgraph(graph: Graph, nodes: list[str], name: str) -> Graph:
    """The induced subgraph of ``nodes`` as a standalone graph.

    Tensors entering it from outside become graph inputs (one per producer output,
    on the host, named after the producer); nodes whose outputs leave it (or that
    were graph outputs) become graph outputs.
    """
    keep = set(nodes)
    g = Graph(graph.nx.subgraph(nodes).copy(), name=name, meta=dict(graph.meta))
    inputs: dict[tuple[str, int], dict[str, Any]] = {}
    for u, v, d in graph.nx.in_edges(nodes, data=True):
        if u not in keep:
            key = (u, int(d.get("output", 0)))
            spec = inputs.setdefault(key, {"name": f"{u}[{key[1]}]", "bytes": int(d["bytes"]),
                                           "consumers": []})  # fmt: skip
            spec["consumers"].append(v)
    for spec in graph.meta.get("inputs") or []:
        cons = [c for c in spec.get("consumers") or [] if c in keep]
        if cons:
            inputs[(spec["name"], -1)] = {**spec, "consumers": cons}
    outputs: dict[tuple[str, int], dict[str, Any]] = {}
    for u, v, d in graph.nx.out_edges(nodes, data=True):
        if v not in keep:
            k = int(d.get("output", 0))
            outputs[(u, k)] = {"node": u, "output": k, "bytes": int(d["bytes"])}
    for spec in graph.meta.get("outputs") or []:
        if spec.get("node") in keep:
            outputs[(spec["node"], int(spec.get("output", 0)))] = dict(spec)
    g.meta["inputs"] = list(inputs.values())
    g.meta["outputs"] = list(outputs.values())
    g.meta["subgraph_of"] = graph.name
    return g


def real_graph(spec: Mapping[str, Any], cache: str | None) -> Graph:
    """A ``[[real]]`` entry of ``sweep.toml`` as a graph (zoo import, fused, cached)."""
    # lazy: at the top it would load simpy with this module
    from hetsim.experiments.sweep import load_graph
    from hetsim.schedulers.by_path import fork_regions

    full = load_graph(spec["model"], batch=int(spec.get("batch", 1)), granularity="fused",
                      model_args=spec.get("args", {}), cache_dir=cache)  # fmt: skip
    regions = spec.get("regions", "all")
    if regions == "all":
        return subgraph(full, list(full.nx), spec["name"])
    found = fork_regions(full)
    lo, hi = int(regions[0]), int(regions[1])
    if not 0 <= lo <= hi < len(found):
        raise ValueError(f"{spec['name']}: regions {regions} not in 0..{len(found) - 1}")
    nodes: list[str] = []
    for fork, join, branches in found[lo : hi + 1]:
        for x in [fork, *(n for b in branches for n in b), join]:
            if x is not None and x not in nodes:
                nodes.append(x)
    return subgraph(full, nodes, spec["name"])


# ------------------------------------------------------------------- config
@dataclass(frozen=True)
class Case:
    """One graph of the figure: a random DAG or a real subgraph."""

    family: str
    name: str
    n: int | None = None
    seed: int | None = None
    max_in: int | None = None
    spec: Mapping[str, Any] = field(default_factory=dict)

    def columns(self) -> dict[str, Any]:
        """The graph's parameter columns."""
        return {
            "family": self.family, "graph": self.name, "n": self.n, "seed": self.seed,
            "max_in": self.max_in, "model": self.spec.get("model"), "batch": self.spec.get("batch"),
            "model_args": json.dumps(self.spec.get("args", {}), sort_keys=True) if self.spec else None,
            "regions": json.dumps(self.spec.get("regions")) if self.spec else None,
        }  # fmt: skip

    def build(self, cache: str | None) -> Graph:
        """The graph."""
        if self.family == "random":
            return random_dag(int(self.n), int(self.seed), max_in=int(self.max_in))
        return real_graph(self.spec, cache)


@dataclass(frozen=True)
class Config:
    """What ``sweep.toml`` asks for."""

    name: str
    cases: list[Case]
    platforms: list[str]
    costs: list[str]
    schedulers: list[str]
    optimal: dict[str, Any]


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Read the structure of ``sweep.toml``."""
    grid, rnd = data["grid"], data.get("random", {})
    cases = [Case("random", f"rand-n{n}-s{s}", n=int(n), seed=int(s), max_in=int(rnd.get("max_in", 3)))
             for n in rnd.get("nodes", []) for s in rnd.get("seeds", [])]  # fmt: skip
    cases += [Case("real", str(r["name"]), spec=dict(r)) for r in data.get("real", [])]
    return Config(name=str(data.get("name", "fig5")), cases=cases, platforms=list(grid["platform"]),
                  costs=list(grid.get("cost", ["roofline"])), schedulers=list(grid["scheduler"]),
                  optimal=dict(data.get("optimal", {})))  # fmt: skip


def full_config() -> Config:
    """The figure's configuration (``sweep.toml``)."""
    with (HERE / "sweep.toml").open("rb") as fh:
        return config_from_dict(tomllib.load(fh))


def quick_config() -> Config:
    """Two 6-node random DAGs, three heuristics, a 2 s CP-SAT budget."""
    return config_from_dict({
        "name": "fig5-quick", "grid": {"platform": ["xeon-p2200"], "scheduler": ["all-gpu", "heft", "cp-greedy"]},
        "optimal": {"time_limit_s": 2.0, "workers": 2}, "random": {"nodes": [6], "seeds": [0, 1]},
    })  # fmt: skip


# ------------------------------------------------------------------- running
@dataclass(frozen=True)
class Job:
    """One row: a case planned by one scheduler on one platform with one cost model."""

    case: Case
    platform: str
    cost: str
    scheduler: str
    args: Mapping[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """The parameter columns."""
        return {**self.case.columns(), "platform": self.platform, "cost": self.cost,
                "scheduler": self.scheduler, "scheduler_args": json.dumps(dict(self.args), sort_keys=True)}  # fmt: skip

    @property
    def id(self) -> str:
        """Stable hash of the parameters."""
        key = {**self.case.columns(), "platform": self.platform, "cost": self.cost,
               "scheduler": self.scheduler, "scheduler_args": dict(self.args)}  # fmt: skip
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def graph_key(self) -> str:
        """The case: the jobs of one graph run in one task, which builds it once."""
        return self.case.name


def jobs(config: Config) -> list[Job]:
    """Every (case, platform, cost model, scheduler) of ``config``; ``optimal`` last per case."""
    scheds = [(s, {}) for s in config.schedulers] + [("optimal", dict(config.optimal))]
    return [Job(case, pname, cname, s, args) for case in config.cases for pname in config.platforms
            for cname in config.costs for s, args in scheds]  # fmt: skip


def run_jobs(chunk: list[Job], *, cache_dir: str | None = None) -> list[dict[str, Any]]:
    """Build the chunk's graph once, then plan and simulate each job (a row each)."""
    # lazy: at the top it would load simpy with this module
    from hetsim import schedulers
    from hetsim.experiments.sweep import make_cost, make_platform, one_line

    rows = []
    graph: Graph | None = None
    build_error: Exception | None = None
    for job in chunk:
        row: dict[str, Any] = {**job.params(), "point_id": job.id}
        try:
            if graph is None and build_error is None:
                try:
                    graph = job.case.build(cache_dir)
                except Exception as e:  # noqa: BLE001 - reported in every row of the case
                    build_error = e
            if build_error is not None:
                raise build_error
            run = schedulers.get(job.scheduler, **dict(job.args)).run(
                graph, make_platform(job.platform), make_cost(job.cost, job.platform), requests=1)
            row.update(run.metrics(), status="ok", error="", edges=graph.number_of_edges())
            if job.scheduler == "optimal":
                m = run.plan.meta
                row.update(opt_status=m.get("status"), opt_objective_s=m.get("objective_s"),
                           opt_bound_s=m.get("bound_s"), opt_lower_bound_s=m.get("lower_bound_s"),
                           solve_time_s=m.get("solve_time_s"))  # fmt: skip
        except Exception as e:  # noqa: BLE001 - one failing plan must not stop the figure
            row.update(status="error", error=one_line(e), traceback=traceback.format_exc())
        row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
        rows.append(row)
    return rows


def run(config: Config, out: str | os.PathLike[str], *, progress: bool = True) -> pd.DataFrame:
    """Run the points not yet ``ok`` in ``out/results.csv`` (a row each, appended as
    they finish), in this process (CP-SAT uses ``[optimal] workers`` threads); return
    the rows of this configuration."""
    # lazy: at the top it would load simpy with this module
    from hetsim.experiments.figures import graph_cache
    from hetsim.experiments.sweep import run_grid

    todo = jobs(config)
    return run_grid(todo, out, name=config.name, columns=COLUMNS, task=run_jobs, workers=0,
                    retry_errors=True, cache_dir=graph_cache(), chunksize=len(todo) or 1,
                    progress=progress)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced grid (smoke test)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder of results.csv")
    args = ap.parse_args(argv)
    config = quick_config() if args.quick else full_config()
    t0 = time.perf_counter()
    df = run(config, args.out)
    bad = df[df["status"] != "ok"]
    print(f"{len(df)} rows ({len(bad)} errors) in {args.out / 'results.csv'}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
