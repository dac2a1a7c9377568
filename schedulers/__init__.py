"""Schedulers: ``Scheduler.schedule(graph, platform, cost) -> Plan``, one file per algorithm.

>>> from hetsim import schedulers
>>> "heft" in schedulers.names()
True
>>> schedulers.get("random", seed=3).seed
3
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hetsim.schedulers.antichain_dp import AntichainDP
from hetsim.schedulers.base import Scheduler, SchedulerError
from hetsim.schedulers.by_op import ByOp
from hetsim.schedulers.by_path import ByPath
from hetsim.schedulers.cp_greedy import CPGreedy
from hetsim.schedulers.cpop import CPOP
from hetsim.schedulers.donf import DONF
from hetsim.schedulers.dynamic import Dynamic, EarliestFinishPolicy
from hetsim.schedulers.heft import HEFT
from hetsim.schedulers.llm.policies import NGL, ExpertOffload, WeightStreaming
from hetsim.schedulers.llm.search import PlacementSearch
from hetsim.schedulers.optimal import Optimal
from hetsim.schedulers.peft import PEFT
from hetsim.schedulers.random_placement import RandomPlacement
from hetsim.schedulers.refine import Refine
from hetsim.schedulers.round_robin import RoundRobin
from hetsim.schedulers.run import RUN_COLUMNS, PlanRun, run_plan
from hetsim.schedulers.single_device import SingleDevice
from hetsim.schedulers.tensor_split import TensorSplit
from hetsim.schedulers.timeslice import TimeslicePipeline
from hetsim.sim.plan import Plan, PlanError

__all__ = [
    "LLM_REGISTRY",
    "REGISTRY",
    "RUN_COLUMNS",
    "EarliestFinishPolicy",
    "PlanRun",
    "Scheduler",
    "SchedulerError",
    "get",
    "llm_names",
    "load_plan",
    "names",
    "register",
    "run_plan",
]

# name -> (class, default keyword arguments)
REGISTRY: dict[str, tuple[type[Scheduler], dict[str, Any]]] = {
    "all-cpu": (SingleDevice, {"kind": "cpu"}),
    "all-gpu": (SingleDevice, {"kind": "gpu"}),
    "round-robin": (RoundRobin, {}),
    "random": (RandomPlacement, {}),
    "heft": (HEFT, {}),
    "cpop": (CPOP, {}),
    "peft": (PEFT, {}),
    "cp-greedy": (CPGreedy, {}),
    "donf": (DONF, {}),
    "by-op": (ByOp, {}),
    "by-path": (ByPath, {}),
    "dynamic": (Dynamic, {}),
    "timeslice-pipeline": (TimeslicePipeline, {}),
    "antichain-dp": (AntichainDP, {}),
    "tensor-split": (TensorSplit, {}),
    "refine": (Refine, {}),
    "optimal": (Optimal, {}),
}

#: placement policies for LLMs larger than the GPU: they plan only LLM graphs
#: (``hetsim.graphs.llm``), so :func:`names` (what a comparison runs by default) leaves
#: them out; :func:`get` knows them and :func:`llm_names` lists them.
LLM_REGISTRY: dict[str, tuple[type[Scheduler], dict[str, Any]]] = {
    "ngl": (NGL, {}),
    "expert-offload": (ExpertOffload, {}),
    "weight-streaming": (WeightStreaming, {}),
    "llm-search": (PlacementSearch, {}),
}


def names() -> list[str]:
    """Registered scheduler names for any graph, in registry order (baselines first)."""
    return list(REGISTRY)


def llm_names() -> list[str]:
    """Registered LLM placement policies (:data:`LLM_REGISTRY`)."""
    return list(LLM_REGISTRY)


def register(name: str, cls: type[Scheduler], *, llm: bool = False, **defaults: Any) -> None:
    """Add a scheduler class under ``name`` (``defaults``: fixed keyword arguments;
    ``llm``: an LLM placement policy, listed by :func:`llm_names`)."""
    if name in REGISTRY or name in LLM_REGISTRY:
        raise SchedulerError(f"scheduler {name!r} is already registered")
    (LLM_REGISTRY if llm else REGISTRY)[name] = (cls, dict(defaults))


def get(name: str, **kw: Any) -> Scheduler:
    """A new scheduler instance by registry name, with hyper-parameters ``kw``.

    Raises
    ------
    SchedulerError
        for an unknown name (listing the known ones) or an unknown parameter
        (listing the accepted ones).
    """
    try:
        cls, defaults = REGISTRY[name] if name in REGISTRY else LLM_REGISTRY[name]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(name), [*names(), *llm_names()], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise SchedulerError(
            f"unknown scheduler {name!r}{hint}; known: {', '.join(names())}; for LLMs: {', '.join(llm_names())}"
        ) from None
    fixed = set(defaults) & set(kw)
    if fixed:
        raise SchedulerError(f"scheduler {name!r}: parameter(s) {sorted(fixed)} are fixed by its name")
    try:
        return cls(**defaults, **kw)
    except TypeError as e:
        import inspect

        accepted = [
            p for p, spec in inspect.signature(cls.__init__).parameters.items()
            if spec.kind is inspect.Parameter.KEYWORD_ONLY and p not in defaults
        ]
        raise SchedulerError(
            f"scheduler {name!r}: bad parameters {sorted(kw)} ({e}); accepted: {accepted}"
        ) from None


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read a plan written by :meth:`Plan.to_json`, rebuilding its dynamic policy.

    ``Plan.from_json`` keeps a policy only as its description in
    ``meta["policy"]`` (``{"name": ..., "params": {...}}``); the scheduler of that
    name is instantiated with those parameters and its ``make_policy()`` gives the
    policy object back.
    """
    plan = Plan.from_json(path)
    desc = plan.meta.pop("policy", None)
    if desc is not None:
        if not isinstance(desc, dict) or not isinstance(desc.get("name"), str):
            raise PlanError(f"{path}: malformed policy description {desc!r:.80} (need {{'name': str, 'params': {{...}}}})")
        params = desc.get("params") or {}
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise PlanError(f"{path}: policy {desc['name']!r:.40}: 'params' must be a table of names to values, "
                            f"got {params!r:.60}")
        try:
            sched = get(desc["name"], **params)
        except SchedulerError as e:
            raise PlanError(f"{path}: policy: {e}") from None
        make: Callable[[], Any] | None = getattr(sched, "make_policy", None)
        if make is None:
            raise PlanError(f"{path}: scheduler {desc['name']!r} has no dynamic policy")
        plan.policy = make()
    return plan


