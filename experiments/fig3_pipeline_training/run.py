"""Figure 3: pipeline-parallel training on 4 and 8 GPUs, antichain-DP partition vs one GPU.

PipeDream (Narayanan et al., SOSP 2019) partitions a model's layers into pipeline
stages, one per GPU, with a dynamic program, and streams micro-batches through
them; the antichain-DP planners generalise the DP to branching graphs. The
published speedups of such partitions over one GPU are 3.4 (4 GPUs) and 3.76
(8 GPUs). The importer has no backward pass, so the training step is built by
mirroring the forward graph (:func:`experiments.training.training_graph`: an
approximation). For every model, platform and plan kind of ``sweep.toml`` beside
it, this script plans the training graph, simulates ``microbatches`` micro-batches
and appends one tidy row to ``results.csv`` in this folder (rows already there
are skipped)::

    python experiments/fig3_pipeline_training/run.py && python experiments/fig3_pipeline_training/plot.py

Speedup (``plot.py``) = steady-state throughput (micro-batches/s) of a plan on N
GPUs / that of ``all-gpu`` (everything on one GPU). ``--quick`` runs a 32-pixel
ResNet-18 on ``multi-gpu-4`` (for the tests).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import sys
import time
import tomllib
import traceback
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform

HERE = Path(__file__).resolve().parent
PLANS = ("all-gpu", "antichain-dp", "antichain-dp-colocated")

#: columns of results.csv, in order
COLUMNS = (
    "point_id", "status", "model", "batch", "granularity", "model_args", "platform", "gpus_only",
    "gpus", "plan", "scheduler_args", "cost", "microbatches", "nodes", "stages", "stage_devices",
    "mode", "stage_time_estimate_s", "throughput_per_s", "makespan_s", "latency_mean_s",
    "gpu_util", "cpu_util", "link_util", "dispatch_util", "bytes_moved", "peak_memory_gpu_bytes",
    "memory_overflows", "graph_time_s", "sched_time_s", "sim_time_s", "error", "sweep",
    "git_commit", "hetsim_version", "finished_at",
)  # fmt: skip


@dataclass(frozen=True)
class Config:
    """One row's parameters."""

    model: str
    platform: str
    plan: str
    batch: int = 1
    granularity: str = "fused"
    model_args: Mapping[str, Any] = field(default_factory=dict)
    scheduler_args: Mapping[str, Any] = field(default_factory=dict)
    cost: str = "roofline"
    microbatches: int = 32
    gpus_only: bool = False

    def params(self) -> dict[str, Any]:
        """The parameter columns (``*_args`` as canonical JSON)."""
        # lazy: at the top it would load networkx, simpy with this module
        from hetsim.experiments.sweep import canonical

        out = asdict(self)
        for k in ("model_args", "scheduler_args"):
            out[k] = canonical(out[k])
        return out

    @property
    def id(self) -> str:
        """Stable hash of the parameters."""
        # lazy: at the top it would load networkx, simpy with this module
        from hetsim.experiments.sweep import point_id

        return point_id(self.params())

    def graph_key(self) -> tuple[str, int, str, str]:
        """What identifies the forward graph (points of one graph run in one task)."""
        return (self.model, self.batch, self.granularity, self.params()["model_args"])


def configs_from_dict(data: Mapping[str, Any]) -> list[Config]:
    """The cross product of ``data["grid"]`` (format: ``sweep.toml``), model-major."""
    grid = dict(data["grid"])
    unknown = set(grid) - {"model", "platform", "plan", "granularity", "cost", "microbatches",
                           "gpus_only"}
    if unknown:
        raise ValueError(f"[grid]: unknown key(s) {sorted(unknown)}")
    bad = [p for p in _list(grid["plan"]) if p not in PLANS]
    if bad:
        raise ValueError(f"[grid].plan: unknown plan kind(s) {bad}; known: {list(PLANS)}")
    out = []
    for m in _list(grid["model"]):
        for p, only, plan in itertools.product(_list(grid["platform"]),
                                               _list(grid.get("gpus_only", False)), _list(grid["plan"])):
            out.append(Config(
                model=m, platform=p, plan=plan, batch=int(data.get("batch", {}).get(m, 1)),
                granularity=grid.get("granularity", "fused"),
                model_args=dict(data.get("model_args", {}).get(m, {})),
                scheduler_args={} if plan == "all-gpu" else dict(data.get("scheduler_args", {})),
                cost=grid.get("cost", "roofline"), microbatches=int(grid.get("microbatches", 32)),
                gpus_only=bool(only),
            ))  # fmt: skip
    return out


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else [v]


def full_configs() -> tuple[str, list[Config]]:
    """The sweep name and points of ``sweep.toml``."""
    with (HERE / "sweep.toml").open("rb") as fh:
        data = tomllib.load(fh)
    return str(data.get("name", "fig3")), configs_from_dict(data)


def quick_configs() -> tuple[str, list[Config]]:
    """A 32-pixel ResNet-18, micro-batches of 8, on 4 GPUs: every plan kind."""
    return "fig3-quick", configs_from_dict({
        "grid": {"model": "resnet18", "platform": "multi-gpu-4", "plan": list(PLANS),
                 "microbatches": 8},
        "batch": {"resnet18": 8}, "model_args": {"resnet18": {"image_size": 32}},
    })  # fmt: skip


# ------------------------------------------------------------------- running
def gpus_only(platform: Platform) -> Platform:
    """``platform`` without its CPUs: the GPUs and the links between them, host ``gpu0``.

    antichain-dp gives every device of a platform a stage; on the multi-GPU presets
    that includes the host CPU. This variant is the GPUs-only pipeline PipeDream
    builds; graph inputs then start on the first GPU (the input copy over PCIe is
    left out).
    """
    # lazy: at the top it would load networkx with this module
    from hetsim.costmodel.platform import Platform as _Platform

    gpus = tuple(d for d in platform.devices if d.kind == "gpu")
    names = {d.name for d in gpus}
    links = tuple(lk for lk in platform.links if lk.src in names and lk.dst in names)
    return _Platform(name=f"{platform.name}-gpus-only", devices=gpus, links=links, host=gpus[0].name,
                     dispatch_threads=platform.dispatch_threads,
                     description=f"{platform.description} (GPUs only)")  # fmt: skip


def run_config(cfg: Config, cache: str | None = None) -> dict[str, Any]:
    """Plan and simulate one point; an error becomes a row with ``status="error"``."""
    # lazy: at the top it would load networkx, simpy with this module
    from hetsim import schedulers
    from hetsim.experiments.sweep import load_graph, make_cost, make_platform, one_line
    from hetsim.experiments.training import colocated_plan, training_graph

    row: dict[str, Any] = {**cfg.params(), "point_id": cfg.id}
    try:
        t0 = time.perf_counter()
        fwd = load_graph(cfg.model, batch=cfg.batch, granularity=cfg.granularity,
                         model_args=cfg.model_args, cache_dir=cache)  # fmt: skip
        train = training_graph(fwd)
        t_graph = time.perf_counter() - t0
        platform = make_platform(cfg.platform)
        if cfg.gpus_only:
            platform = gpus_only(platform)
        cost = make_cost(cfg.cost, cfg.platform)
        sim = {"requests": cfg.microbatches, "check_memory": False}
        if cfg.plan == "antichain-dp-colocated":
            t1 = time.perf_counter()
            plan = colocated_plan(train, fwd, platform, cost, microbatches=cfg.microbatches,
                                  **cfg.scheduler_args)  # fmt: skip
            run = replace(schedulers.run_plan(train, platform, plan, cost, **sim),
                          scheduling_time_s=time.perf_counter() - t1)
        else:
            kw = {"microbatches": cfg.microbatches} if cfg.plan == "antichain-dp" else {}
            run = schedulers.get(cfg.plan, **kw, **cfg.scheduler_args).run(train, platform, cost, **sim)
        devs = run.plan.meta.get("stage_devices") or sorted(set(run.plan.placement.values()))
        row.update(run.metrics())
        row.update(
            status="ok", error="", stages=len(devs), stage_devices=" ".join(devs),
            mode=run.plan.meta.get("mode", ""),
            stage_time_estimate_s=run.plan.meta.get("stage_time_estimate", math.nan),
            gpus=len(platform.devices_of_kind("gpu")), memory_overflows=len(run.result.failures),
            graph_time_s=t_graph,
        )  # fmt: skip
    except Exception as e:  # noqa: BLE001 - one failing point must not stop the figure
        row.update(status="error", error=one_line(e), traceback=traceback.format_exc())
    row["finished_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    return row


def run_configs(configs: list[Config], *, cache_dir: str | None = None) -> list[dict[str, Any]]:
    """:func:`run_config` over a chunk of points (the task of the sweep runners)."""
    return [run_config(c, cache_dir) for c in configs]


def run(name: str, configs: list[Config], out: str | os.PathLike[str], *,
        workers: int = 2, progress: bool = True) -> pd.DataFrame:  # fmt: skip
    """Run the points not yet ``ok`` in ``out/results.csv`` (appending a row each);
    return the table's rows of these points."""
    # lazy: at the top it would load networkx, simpy with this module
    from hetsim.experiments.figures import graph_cache
    from hetsim.experiments.sweep import run_grid

    return run_grid(configs, out, name=name, columns=COLUMNS, task=run_configs, workers=workers,
                    retry_errors=True, cache_dir=graph_cache(), chunksize=len(PLANS) * 4,
                    progress=progress)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR] [--workers N]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced grid (smoke test)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder of results.csv")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (0: inline)")
    args = ap.parse_args(argv)
    name, configs = quick_configs() if args.quick else full_configs()
    t0 = time.perf_counter()
    df = run(name, configs, args.out, workers=args.workers)
    bad = df[df["status"] != "ok"]
    print(f"{len(df)} rows ({len(bad)} errors) in {args.out / 'results.csv'}; "
          f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
