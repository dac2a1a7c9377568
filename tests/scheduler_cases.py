"""Deterministic scheduling cases that pin the plans of the schedulers.

``tests/data/scheduler_reference.json`` holds, for every (case, scheduler), a digest
of the plan the scheduler made when the reference was written (placement,
priorities, stages, micro-batches, policy and ``meta`` without the timing) and the
makespan its simulation gives (hex). ``tests/test_scheduler_reference.py`` checks
that today's schedulers make the same plans: the list schedulers (HEFT, CPOP,
PEFT, tensor-split, DONF, by-op, by-path) whatever their insertion search, the
pipelines (timeslice, antichain-dp) whatever their dynamic programme, cp-greedy
whose correction is priced incrementally since issue 15 (the full estimator's
makespans, bit for bit). tensor-split's plans were written again when it
began to keep a split only where the split shortens the makespan (issue 20). Cases: the fixture graphs of
``tests/test_schedulers.py`` and seeded random DAGs of 1-300 nodes
(:func:`engine_cases.random_graph`) on presets and hand-made platforms, priced by
the roofline, a model without ``dispatch_time`` and integer times full of ties.

Write the reference again (only when plans are meant to change)::

    PYTHONPATH=.:tests python tests/scheduler_cases.py --write
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from engine_cases import IntCost, NoDispatchCost, _num, _sha, platforms, random_graph

from hetsim import schedulers
from hetsim.costmodel import Roofline
from hetsim.graphs import Graph
from hetsim.sim import PlanError, Platform, SimulationError

REFERENCE = Path(__file__).parent / "data" / "scheduler_reference.json"
N_RANDOM = 160
#: every scheduler but ``optimal`` (CP-SAT under a time limit is not deterministic) and
#: ``refine`` (its search stops at a CPU-time bound on large graphs)
NAMES = [n for n in schedulers.names() if n not in ("optimal", "refine")]
#: these must make exactly the plans of the reference (cp-greedy too: its incremental
#: estimate equals the full one bit for bit)
PINNED = list(NAMES)


@dataclass
class Case:
    id: str
    graph: Graph
    platform: Platform
    cost: Any


def cases(fixtures: dict[str, Any] | None = None, count: int = N_RANDOM) -> list[Case]:
    """The fixture graphs on three presets, then ``count`` seeded random cases."""
    plats = platforms()
    out = []
    for gname, make in sorted((fixtures or {}).items()):
        for pname in ("xeon-p2200", "cpu2", "multi-gpu-4"):
            out.append(Case(f"fixture:{gname}:{pname}", make(), plats[pname], Roofline()))
    for i in range(count):
        rng = np.random.default_rng(5000 + i)
        pname = sorted(plats)[int(rng.integers(len(plats)))]
        n = int(rng.choice([1, 3, 8, 20, 45, 90, 300]))
        g = random_graph(rng, n)
        ck = "int" if pname == "int" else ["roofline", "roofline", "no-dispatch"][int(rng.integers(3))]
        cost = IntCost(i) if ck == "int" else Roofline() if ck == "roofline" else NoDispatchCost()
        out.append(Case(f"{i}:{g.name}:{pname}:{ck}", g, plats[pname], cost))
    return out


def outcome(case: Case, name: str) -> dict[str, Any]:
    """Digest of ``name``'s plan for ``case`` and its simulated makespan, or the error."""
    s = schedulers.get(name)
    try:
        run = s.run(case.graph, case.platform, case.cost, simulate=False)
    except (schedulers.SchedulerError, PlanError, SimulationError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    plan = run.plan.to_dict()
    plan["meta"] = {k: v for k, v in plan["meta"].items() if k != "scheduling_time_s"}
    out: dict[str, Any] = {"plan": _sha(_num(plan))}
    try:
        out["makespan"] = _num(run.simulate().result.makespan)
    except (PlanError, SimulationError) as e:
        out["makespan"] = f"{type(e).__name__}: {e}"
    return out


def main(argv: list[str]) -> None:
    if argv != ["--write"]:
        raise SystemExit("usage: PYTHONPATH=.:tests python tests/scheduler_cases.py --write")
    from test_schedulers import GRAPHS

    ref = {f"{c.id}:{name}": outcome(c, name) for c in cases(GRAPHS) for name in NAMES}
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(ref, indent=0, sort_keys=True) + "\n")
    errors = sum("error" in o for o in ref.values())
    print(f"wrote {len(ref)} plans ({errors} refused) to {REFERENCE}")


if __name__ == "__main__":
    main(sys.argv[1:])
