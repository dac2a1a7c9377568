"""What a sweep is: a named TOML grid of parameters, checked before anything runs.

A sweep file names lists of values; their cross product is run, one
:class:`~experiments.sweep.point.Point` per combination::

    name = "pcie-sensitivity"
    description = "How much does PCIe bandwidth matter?"   # optional

    [grid]                       # model, platform, scheduler are required
    model = ["googlenet", "resnet18"]   # zoo names, graph JSON paths, or LLM workloads
                                        # "llm:NAME[,context=N,weights=q4,phase=...]"
    batch = [1, 8]               # default [1]
    granularity = ["op"]         # "op" | "fused"; default ["op"]
    platform = ["xeon-p2200"]    # preset names or platform TOML paths
    scheduler = ["all-gpu", "heft", "cp-greedy"]
    cost = ["roofline"]          # cost-model specs (costmodel.from_spec): "roofline",
                                 # a profile folder, PROFILE:KIND, a saved model file
    requests = [1]               # default [1]
    interval_s = [0.0]           # request inter-arrival time; default [0.0]
    link_bandwidth = [0.25, 0.5, 1, 2, 4]   # platform override multipliers,
    gpu_peak = [1.0]                        # default [1.0] each; also cpu_peak,
                                            # gpu_bandwidth
    noise = [0.0]                # simulator noise (CV) and its seed; default
    seed = [0]                   # [0.0] and [0]

    [model_args]                 # optional zoo keyword arguments, per model
    lstm = {seq_len = 16, hidden = 256}

    [scheduler_args]             # optional hyper-parameters, per scheduler
    random = {seed = 0}

A scalar is read as a one-element list. The whole file is checked before anything
runs: unknown keys and unknown model, scheduler, platform or cost-model names raise
:class:`SweepError` listing every problem.
"""

from __future__ import annotations

import difflib
import itertools
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetsim import schedulers
from hetsim.costmodel.platform import Platform, PlatformError, read_toml
from hetsim.experiments.sweep.caches import make_cost
from hetsim.experiments.sweep.point import OVERRIDES, Point
from hetsim.graphs.graph import GraphError
from hetsim.graphs.llm import llm_graph_from_spec
from hetsim.sim.plan import MAX_REQUESTS

__all__ = ["GRID_KEYS", "MAX_POINTS", "Sweep", "SweepError"]


class SweepError(ValueError):
    """A sweep file or a results folder is not usable (the message names the problem)."""


# ------------------------------------------------------------------- format
def _is_str(v: Any) -> bool:
    return isinstance(v, str) and v != ""


def _is_int(minimum: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= minimum


def _is_num(positive: bool) -> Callable[[Any], bool]:
    def check(v: Any) -> bool:
        ok = isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
        return ok and (v > 0 if positive else v >= 0)

    return check


#: most points one sweep holds (its grid's size): one row of results.csv each, planned
#: and listed before anything runs
MAX_POINTS = 10**6

#: grid key -> (default values or None when required, check, what a value must be);
#: the order is the nesting order of the cross product (model outermost)
GRID_KEYS: dict[str, tuple[list[Any] | None, Callable[[Any], bool], str]] = {
    "model": (None, _is_str, "a zoo model name or graph JSON path"),
    "batch": ([1], _is_int(1), "an int >= 1"),
    "granularity": (["op"], lambda v: v in ("op", "fused"), "'op' or 'fused'"),
    "platform": (None, _is_str, "a platform preset name or TOML path"),
    **{k: ([1.0], _is_num(True), "a positive multiplier") for k in OVERRIDES},
    "cost": (["roofline"], _is_str, "a cost-model spec ('roofline', a profile folder...)"),
    "scheduler": (None, _is_str, "a scheduler name"),
    "requests": ([1], lambda v: _is_int(1)(v) and v <= MAX_REQUESTS, f"an int in [1, {MAX_REQUESTS}]"),
    "interval_s": ([0.0], _is_num(False), "a number >= 0"),
    "noise": ([0.0], _is_num(False), "a number >= 0"),
    "seed": ([0], _is_int(0), "an int >= 0"),
}
_TOP_KEYS = ("name", "description", "grid", "model_args", "scheduler_args")


def is_plain_name(name: str) -> bool:
    """Whether ``name`` is one path component that stays where it is put: no separator,
    not absolute, not ``.``/``..`` or hidden, no NUL (a sweep's name sets its folder).

    >>> is_plain_name("pcie-sensitivity"), is_plain_name("../x"), is_plain_name("/tmp/x")
    (True, False, False)
    """
    return bool(name) and not any(c in name for c in "/\\\0") and not name.startswith(".")


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(where: str, keys: Iterable[str], allowed: Iterable[str]) -> list[str]:
    allowed = list(allowed)
    out = []
    for k in keys:
        if k not in allowed:
            out.append(f"{where}: unknown key {k!r}{_suggest(k, allowed)}; allowed: {allowed}")
    return out


@dataclass
class Sweep:
    """A named grid of parameters whose cross product is run.

    Build it with :meth:`from_toml` or :meth:`from_dict` (both check everything,
    names included, and raise :class:`SweepError` listing every problem).

    Attributes
    ----------
    name
        Recorded in the ``sweep`` column of every row.
    grid
        Grid key -> list of values, every key of :data:`GRID_KEYS` present
        (defaults filled in).
    model_args, scheduler_args
        Model name -> zoo keyword arguments; scheduler name -> hyper-parameters.
    """

    name: str
    grid: dict[str, list[Any]]
    model_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    scheduler_args: dict[str, dict[str, Any]] = field(default_factory=dict)
    description: str = ""
    source: str = "<dict>"

    # --------------------------------------------------------------- loading
    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Sweep:
        """Read and check a sweep file (format in the module docstring)."""
        path = Path(path)
        data = read_toml(path, "sweep", SweepError)
        data.setdefault("name", path.stem)
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> Sweep:
        """Build from the TOML structure, checking keys, values and names."""
        problems = _unknown("top level", data, _TOP_KEYS)
        grid_in = data.get("grid")
        if not isinstance(grid_in, Mapping):
            problems.append("needs a [grid] table")
            grid_in = {}
        problems += _unknown("[grid]", grid_in, GRID_KEYS)
        grid: dict[str, list[Any]] = {}
        for key, (default, check, what) in GRID_KEYS.items():
            if key not in grid_in:
                if default is None:
                    problems.append(f"[grid]: {key!r} is required ({what})")
                grid[key] = list(default or [])
                continue
            raw = grid_in[key]
            values = list(raw) if isinstance(raw, list | tuple) else [raw]
            if not values:
                problems.append(f"[grid]: {key!r} is an empty list")
            bad = [v for v in values if not check(v)]
            if bad:
                problems.append(f"[grid]: {key!r} values {bad} are not {what}")
            grid[key] = list(dict.fromkeys(v for v in values if check(v)))  # unique, in order
        tables: dict[str, dict[str, dict[str, Any]]] = {}
        for table, column in (("model_args", "model"), ("scheduler_args", "scheduler")):
            raw = data.get(table, {})
            if not isinstance(raw, Mapping) or not all(
                isinstance(v, Mapping) for v in raw.values()
            ):
                problems.append(f"[{table}] must map each {column} name to a table of arguments")
                raw = {}
            for k in raw:
                if k not in grid[column]:
                    problems.append(f"[{table}]: {k!r} is not in grid.{column} {grid[column]}")
            tables[table] = {k: dict(v) for k, v in raw.items()}
        size = math.prod(len(v) for v in grid.values())
        if size > MAX_POINTS:  # before the names are checked: a 3000 x 3000 grid is refused at once
            raise SweepError(_report(source, [*problems, "[grid]: " + " x ".join(f"{len(v)} {k}" for k, v in grid.items() if len(v) > 1)
                                              + f" = {size} points, past the {MAX_POINTS} a sweep may hold"]))
        name = data.get("name", "sweep")
        if not _is_str(name):
            problems.append(f"'name' must be a non-empty string, got {name!r}")
        elif not is_plain_name(name):
            problems.append(f"'name' must be a plain name (it names the output folder: no '/', '\\', "
                            f"leading '.' or '..'), got {name!r}")
        sweep = cls(
            name=str(name),
            grid=grid,
            model_args=tables["model_args"],
            scheduler_args=tables["scheduler_args"],
            description=str(data.get("description", "")),
            source=source,
        )
        problems += sweep.name_problems()
        if problems:
            raise SweepError(_report(source, problems))
        return sweep

    def check_names(self) -> None:
        """Check that every model, platform, scheduler and cost model exists.

        Raises
        ------
        SweepError
            listing every unknown name or bad argument.
        """
        problems = self.name_problems()
        if problems:
            raise SweepError(_report(self.source, problems))

    def name_problems(self) -> list[str]:
        # lazy: at the top it would load torch with this module
        from hetsim.graphs import zoo

        problems = []
        known_models = zoo.names()
        for m in self.grid["model"]:
            if m.endswith(".json"):
                if not Path(m).is_file():
                    problems.append(f"model {m!r}: no such graph file")
            elif m.startswith("llm:"):
                try:
                    llm_graph_from_spec(m, **self.model_args.get(m, {}))
                except (GraphError, TypeError) as e:
                    problems.append(f"model {m!r}: {e}")
            elif m not in known_models:
                problems.append(f"unknown model {m!r}{_suggest(m, known_models)}; known: {known_models}")
            elif self.model_args.get(m):
                try:
                    zoo.params(m, **self.model_args[m])
                except (GraphError, TypeError, ValueError) as e:
                    problems.append(f"[model_args] {m!r}: {e}")
        for p in self.grid["platform"]:
            try:
                _platform(p)
            except (PlatformError, OSError) as e:
                problems.append(f"platform {p!r}: {e}")
        for s in self.grid["scheduler"]:
            if s not in schedulers.names() and s not in schedulers.llm_names():
                known = schedulers.names() + schedulers.llm_names()
                problems.append(f"unknown scheduler {s!r}{_suggest(s, known)}; known: {known}")
                continue
            try:
                schedulers.get(s, **self.scheduler_args.get(s, {}))
            except schedulers.SchedulerError as e:
                problems.append(str(e))
        for c in self.grid["cost"]:
            try:
                make_cost(c)
            except Exception as e:  # noqa: BLE001 - any failure to build it is a bad name
                problems.append(f"cost model {c!r}: {type(e).__name__}: {e}")
        return problems

    def to_dict(self) -> dict[str, Any]:
        """The TOML structure (defaults filled in); :meth:`from_dict` reads it back."""
        return {
            "name": self.name,
            "description": self.description,
            "grid": {k: list(v) for k, v in self.grid.items()},
            "model_args": self.model_args,
            "scheduler_args": self.scheduler_args,
        }

    # ---------------------------------------------------------------- points
    def points(self) -> list[Point]:
        """The cross product of the grid, model outermost (graph-major order)."""
        keys = list(GRID_KEYS)
        out = []
        for combo in itertools.product(*(self.grid[k] for k in keys)):
            p = dict(zip(keys, combo))
            p["model_args"] = self.model_args.get(p["model"], {})
            p["scheduler_args"] = self.scheduler_args.get(p["scheduler"], {})
            out.append(Point(**p))
        return out

    def __len__(self) -> int:
        return math.prod(len(v) for v in self.grid.values())


def _platform(name: str) -> Any:
    return Platform.load(name)


def _report(source: str, problems: list[str]) -> str:
    if len(problems) == 1:
        return f"{source}: {problems[0]}"
    return f"{source}: {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems)
