"""Figure 6: simulated vs measured makespan of every scheduler's plan (validation).

Every applicable scheduler plans GoogLeNet, ResNet-18, BERT-base (32 tokens) and
MobileNetV2 (op granularity) on the ``cpu2`` platform (two single-thread CPU workers: the machine this project's
validation runs on), the plan is simulated with the cost model and executed for
real (:func:`runtime.validation.validate.validate_all`, torch kernels; cost ``measured``: the op
times and host costs measured in the validation's own rounds), and one tidy row per
(model, scheduler, cost model) is appended to ``results.csv`` in this folder
(points already there are skipped). Configuration: ``sweep.toml`` beside this
file; with ``reuse = true`` the rows of a ``validation.csv`` already written in
the checkout by ``hetsim validate --all`` (same platform, cost model and backend)
are taken instead of executing again::

    python experiments/fig6_sim_vs_measured/run.py && python experiments/fig6_sim_vs_measured/plot.py

Measured times are wall-clock times of this machine: run it on an idle machine.
``--quick`` validates three schedulers on a 32-pixel SqueezeNet with the roofline
(for the tests; no reuse).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import sys
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TRACES = HERE.parent / ".cache" / "fig6"

#: measured-vs-simulated columns (those of runtime.validation.validate.VALIDATION_COLUMNS)
VALIDATION = (
    "model", "scheduler", "status", "simulated_s", "measured_s", "error_pct", "measured_p10_s",
    "measured_p90_s", "spread_pct", "in_band", "relative_error_pct", "simulated_rank", "measured_rank", "kendall_tau", "kendall_p",
    "ops", "requests", "platform", "backend", "cost", "note",
)  # fmt: skip
#: columns of results.csv, in order
COLUMNS = ("point_id", *VALIDATION, "batch", "granularity", "warmup", "repeats", "model_args",
           "load_average", "source", "sweep", "git_commit", "hetsim_version", "finished_at")  # fmt: skip


@dataclass(frozen=True)
class Config:
    """What ``sweep.toml`` asks for."""

    name: str
    models: list[str]
    platform: str
    costs: list[str]
    backend: str = "torch"
    batch: int = 1
    warmup: int = 3
    repeats: int = 10
    reuse: bool = True
    schedulers: list[str] | None = None
    model_args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Read the structure of ``sweep.toml``."""
    g = data["grid"]
    costs = [c for c in _list(g.get("cost", ["roofline"]))
             if c in ("roofline", MEASURED) or (REPO / c).is_dir() or Path(c).is_dir()]  # fmt: skip
    return Config(
        name=str(data.get("name", "fig6")), models=_list(g["model"]), platform=str(g.get("platform", "cpu2")),
        costs=costs, backend=str(g.get("backend", "torch")), batch=int(g.get("batch", 1)),
        warmup=int(g.get("warmup", 3)), repeats=int(g.get("repeats", 10)), reuse=bool(g.get("reuse", True)),
        schedulers=_list(g["scheduler"]) if "scheduler" in g else None,
        model_args=dict(data.get("model_args", {})),
    )  # fmt: skip


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list | tuple) else [v]


def full_config() -> Config:
    """The figure's configuration (``sweep.toml``; cost models whose profile is missing dropped)."""
    with (HERE / "sweep.toml").open("rb") as fh:
        return config_from_dict(tomllib.load(fh))


def quick_config() -> Config:
    """A 32-pixel SqueezeNet, three schedulers, roofline, 1 + 2 runs per plan."""
    return Config(name="fig6-quick", models=["squeezenet1_1"], platform="cpu2", costs=["roofline"],
                  warmup=1, repeats=2, reuse=False, schedulers=["all-cpu", "heft", "round-robin"],
                  model_args={"squeezenet1_1": {"image_size": 32}})  # fmt: skip


# ----------------------------------------------------------------- helpers
#: the cost "model" of a validation that measures its inputs in its own rounds (no --cost)
MEASURED = "measured"


def cost_key(cost: str) -> str:
    """A cost spec as compared between files: ``roofline``, ``measured`` (inputs measured
    in the run: ``validate_all`` without a cost model) or the profile's folder name."""
    cost = str(cost)
    if cost in ("", "roofline"):
        return "roofline"
    if cost == MEASURED or "measured in this run" in cost:
        return MEASURED
    return Path(cost.split(":")[0]).name


def point_id(cfg: Config, model: str, scheduler: str, cost: str) -> str:
    """Stable hash of one row's parameters."""
    key = {"model": model, "scheduler": scheduler, "platform": cfg.platform, "cost": cost_key(cost),
           "backend": cfg.backend, "batch": cfg.batch, "model_args": dict(cfg.model_args.get(model, {}))}  # fmt: skip
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def find_validation_csvs(root: Path = REPO) -> list[Path]:
    """``validation*.csv`` files in the checkout (newest first), this folder excluded."""
    skip = {".git", ".venv", "node_modules", "__pycache__"}
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        here = Path(dirpath).resolve()
        if here == HERE or here.is_relative_to(TRACES.resolve()):
            continue
        found += [Path(dirpath) / f for f in filenames if f.startswith("validation") and f.endswith(".csv")]
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def reused_source(path: Path) -> str:
    """The ``source`` of rows taken from the validation file PATH: the command that writes
    such a file and the file's name, not the folder of the run that wrote it (a name of
    the user's, meaningless in a committed result)."""
    return f"hetsim validate --all ({path.name})"


def reusable_rows(cfg: Config, model: str, cost: str, files: list[Path]) -> tuple[pd.DataFrame, str] | None:
    """The rows of the newest file that validated ``model`` on this platform, backend and cost,
    and their ``source`` (:func:`reused_source`)."""
    for path in files:
        try:
            t = pd.read_csv(path)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if not {"model", "scheduler", "status", "platform", "backend", "cost"} <= set(t.columns):
            continue
        sel = t[(t["model"] == model) & (t["platform"] == cfg.platform) & (t["backend"] == cfg.backend)
                & (t["cost"].astype(str).map(cost_key) == cost_key(cost))]  # fmt: skip
        if len(sel) and (sel["status"] == "ok").any():
            return sel, reused_source(path)
    return None


@dataclass(frozen=True)
class Job:
    """One row: a scheduler's plan of a model, validated with a cost model."""

    cfg: Config
    model: str
    scheduler: str
    cost: str

    def params(self) -> dict[str, Any]:
        """The parameter columns."""
        return {"model": self.model, "scheduler": self.scheduler, "platform": self.cfg.platform,
                "cost": self.cost, "backend": self.cfg.backend, "batch": self.cfg.batch, "granularity": "op",
                "model_args": json.dumps(dict(self.cfg.model_args.get(self.model, {})), sort_keys=True)}  # fmt: skip

    @property
    def id(self) -> str:
        """Stable hash of the parameters (:func:`point_id`)."""
        return point_id(self.cfg, self.model, self.scheduler, self.cost)

    def graph_key(self) -> tuple[str, str]:
        """(model, cost): the plans of one model run in one task, interleaved in rounds."""
        return (self.model, self.cost)


def validate_jobs(chunk: list[Job], *, cache_dir: str | None = None, traces: str, files: tuple[str, ...] = (),
                  progress: bool = True) -> list[dict[str, Any]]:  # fmt: skip
    """The rows of one (model, cost): taken from a ``validation*.csv`` of ``files`` that
    has them, else measured (:func:`~runtime.validation.validate.validate_all`)."""
    # lazy: at the top it would load networkx with this module
    from hetsim.runtime.validation.validate import validate_all

    cfg, model, cost = chunk[0].cfg, chunk[0].model, chunk[0].cost
    want = {j.scheduler: j for j in chunk}
    hit = reusable_rows(cfg, model, cost, [Path(f) for f in files]) if files else None
    if hit is not None:
        table, source = hit
        table = table[table["scheduler"].isin(want)]
        extra: dict[str, Any] = {"warmup": "", "repeats": "", "load_average": ""}
    else:
        say = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else None
        extra = {"warmup": cfg.warmup, "repeats": cfg.repeats, "load_average": round(os.getloadavg()[0], 2)}
        table = validate_all([model], cfg.platform, list(want), None if cost == MEASURED else cost,
                             backend=cfg.backend, warmup=cfg.warmup,
                             repeats=cfg.repeats, batch=cfg.batch, model_kwargs=cfg.model_args,
                             out=Path(traces) / cost_key(cost), progress=say)  # fmt: skip
        source = "validate_all"
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    rows = []
    for rec in table.to_dict("records"):
        job = want[rec["scheduler"]]
        row = {k: rec.get(k) for k in VALIDATION}
        row.update(job.params(), **extra, source=source, finished_at=stamp, point_id=job.id)
        rows.append(row)
    return rows


def run(cfg: Config, out: str | os.PathLike[str], *, progress: bool = True,
        traces: str | os.PathLike[str] | None = None) -> pd.DataFrame:  # fmt: skip
    """Validate (or reuse) every (model, cost) not yet in ``out/results.csv``; return the rows.

    ``traces``: where :func:`~runtime.validation.validate.validate_all` writes its tables and
    traces (default ``experiments/.cache/fig6`` for this folder, else ``out/traces``).
    """
    # lazy: at the top it would load networkx, simpy with this module
    from hetsim import schedulers as sched_mod
    from hetsim.experiments.sweep import run_grid

    out = Path(out)
    if traces is None:
        traces = TRACES if out.resolve() == HERE else out / "traces"
    names = cfg.schedulers or sched_mod.names()
    todo = [Job(cfg, m, s, c) for c in cfg.costs for m in cfg.models for s in names]
    files = tuple(str(f) for f in find_validation_csvs()) if cfg.reuse else ()
    task = functools.partial(validate_jobs, traces=str(traces), files=files, progress=progress)
    return run_grid(todo, out, name=cfg.name, columns=COLUMNS, task=task, workers=0, done=("ok", "skipped"),
                    retry_errors=True, chunksize=len(names), progress=False)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run.py [--quick] [--out DIR]``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="reduced grid (smoke test)")
    ap.add_argument("--out", type=Path, default=HERE, help="folder of results.csv")
    args = ap.parse_args(argv)
    cfg = quick_config() if args.quick else full_config()
    t0 = time.perf_counter()
    df = run(cfg, args.out)
    ok = df[df["status"] == "ok"]
    print(f"{len(df)} rows ({len(ok)} ok) in {args.out / 'results.csv'}; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
