"""Plan: what a scheduler produces and what the simulator and the runtime execute.

A plan places every node on a device and orders the ready nodes of each device by
``priority`` (lower runs first). Pipelines add ``stages`` (lists of nodes, one
device each, in pipeline order) and ``microbatches``. A dynamic plan carries a
``policy`` that picks the device of a node when it becomes ready; the same policy
object drives the simulator and the runtime through :class:`SystemView`.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

import numpy as np

from hetsim.graphs.graph import atomic_write, first_line

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform
    from hetsim.graphs.graph import Graph

__all__ = ["Plan", "PlanError", "DynamicPolicy", "SystemView", "MAX_REQUESTS", "PLAN_SCHEMA_VERSION", "NodeMemory",
           "node_memory", "policy_select", "size_text"]  # fmt: skip

#: most requests (or micro-batches) one simulation runs: a plan's ``microbatches``,
#: ``simulate(requests=)``, a sweep's ``requests``, ``--requests`` (each request holds
#: its own state: 10**6 requests of a 200-node graph take minutes and gigabytes)
MAX_REQUESTS = 10**6

PLAN_SCHEMA_VERSION = 1


def size_text(nbytes: float) -> str:
    """A size for a message: bytes below 1 MiB, else MiB or GiB with one decimal.

    >>> size_text(600), size_text(3 * 2**20), size_text(5 * 2**30)
    ('600 bytes', '3.0 MiB', '5.0 GiB')
    """
    if nbytes < 2**20:
        return f"{int(nbytes)} bytes"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes < 2**30 else f"{nbytes / 2**30:.1f} GiB"


class PlanError(ValueError):
    """A plan cannot run on this graph/platform; the message names the node or device."""


@runtime_checkable
class SystemView(Protocol):
    """What a dynamic policy may look at when it places a ready node.

    Implemented by the simulator (predicted state) and by the runtime (observed
    state), so one policy runs unchanged in both.
    """

    graph: Graph
    platform: Platform
    cost: Any

    @property
    def now(self) -> float:
        """Current simulated (or wall-clock) time in seconds since the run started;
        the same time base as :meth:`device_free_at`."""

    def device_free_at(self, device: str) -> float:
        """Predicted time at which ``device`` has finished the work queued on it."""

    def location(self, node: str) -> str | None:
        """Device holding ``node``'s output (None while the node is not placed)."""


@runtime_checkable
class DynamicPolicy(Protocol):
    """Run-time placement: choose a device for ``node`` when it becomes ready."""

    name: str

    def select(self, node: str, view: SystemView) -> str:
        """Return the name of the device that runs ``node``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description ``{"name": ..., "params": {...}}``."""


def policy_select(
    policy: DynamicPolicy,
    node: str,
    view: SystemView,
    dev_index: Mapping[str, int],
    dev_names: Sequence[str],
    error: type[Exception],
) -> int:
    """The index (in ``dev_index``) of the device ``policy`` picks for ``node``, as the
    simulator and the executor ask it; ``error`` naming the policy, the node and the
    device when it picks a device that is not one of ``dev_names``."""
    dev = policy.select(node, view)
    d = dev_index.get(dev)
    if d is None:
        raise error(
            f"policy {getattr(policy, 'name', policy)!r} placed node {node!r} on "
            f"unknown device {dev!r}; devices: {list(dev_names)}"
        )
    return d


@dataclass
class Plan:
    """Placement and order of a graph's operators on a platform.

    Parameters
    ----------
    placement
        ``node -> device name``; may be partial only when ``policy`` is given.
    priority
        ``node -> float``; among ready ops on one device the lowest runs first.
        Missing entries default to the node's topological index.
    stages
        Optional pipeline stages, in pipeline order: lists of nodes.
    microbatches
        Optional number of micro-batches a pipeline splits a batch into.
    policy
        Optional :class:`DynamicPolicy` for run-time placement.
    meta
        Free-form JSON-safe data: scheduler name, hyper-parameters, scheduling time.

    Examples
    --------
    >>> p = Plan(placement={"a": "cpu", "b": "gpu"}, priority={"a": 0, "b": 1})
    >>> Plan.from_dict(p.to_dict()) == p
    True
    """

    placement: dict[str, str]
    priority: dict[str, float] = field(default_factory=dict)
    stages: list[list[str]] | None = None
    microbatches: int | None = None
    policy: DynamicPolicy | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    # ---------------------------------------------------------------- checking
    def validate(self, graph: Graph, platform: Platform, *, memory: NodeMemory | None = None) -> Plan:
        """Check the plan against a graph and platform; return ``self``. ``memory``: the
        graph's :func:`node_memory`, when the caller keeps it (a :class:`sim.Simulator`).

        Raises
        ------
        PlanError
            for a node without a device, an unknown node or device, a device whose
            memory cannot hold an op's tensors or the weights placed on it,
            priorities that contradict dependencies, or malformed stages.
        """
        nodes = graph.nx
        names = set(platform.device_names)
        placement = self.placement
        # a placement listing the graph's nodes in its order (as schedulers write it) is
        # read alongside the nodes; else set operations check whole graphs in C
        in_order = list(placement) == list(nodes)
        try:
            placed_ok = (in_order or placement.keys() <= set(nodes)) and set(placement.values()) <= names
        except TypeError:  # a device that is not hashable: named below
            placed_ok = False
        for n, dev in () if placed_ok else placement.items():
            if not isinstance(dev, str):
                raise PlanError(f"plan places node {n!r} on {dev!r:.60}, not a device name")
            if n not in nodes:
                raise PlanError(f"plan places unknown node {n!r} (not in graph {graph.name!r})")
            if dev not in names:
                raise PlanError(
                    f"plan places node {n!r} on unknown device {dev!r}; "
                    f"platform {platform.name!r} has {sorted(names)}"
                )
        if self.policy is None and not (placed_ok and len(placement) == len(nodes)):
            missing = [n for n in nodes if n not in self.placement]
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise PlanError(f"node {missing[0]!r} has no device{more}")
        for n, p in self.priority.items():
            if n not in nodes:
                raise PlanError(f"plan gives a priority to unknown node {n!r}")
            if isinstance(p, bool) or not isinstance(p, numbers.Real) or math.isnan(p):
                raise PlanError(f"node {n!r}: priority must be a number, got {p!r}")
        # memory: one op's working set, and the weights resident on each device (checked
        # on arrays; node by node, naming the culprit, where they may not fit)
        weights: dict[str, int] = {}
        caps = {d.name: d.memory_bytes for d in platform.devices}
        devs = list(placement.values()) if in_order else list(map(placement.get, nodes))
        if memory is None:
            memory = node_memory(graph)
        fits = memory is not None and _plainly_fits(memory, devs, platform)
        pairs = () if fits else zip(nodes.nodes(data=True), devs)
        for (n, d), dev in pairs:  # graph order
            if dev is None:
                continue
            cap = caps[dev]
            if d["bytes"] > cap:
                raise PlanError(f"node {n!r} needs {size_text(d['bytes'])} but device {dev!r} has {size_text(cap)}")
            weights[dev] = weights.get(dev, 0) + int(d["param_bytes"])
        for dev, w in weights.items():
            cap = platform.device(dev).memory_bytes
            if w > cap:
                raise PlanError(f"weights placed on device {dev!r} take {size_text(w)}; it has {size_text(cap)}")
        if self.priority:
            for u, v in nodes.edges:
                du, dv = self.placement.get(u), self.placement.get(v)
                if du is not None and du == dv and u in self.priority and v in self.priority:
                    if self.priority[v] < self.priority[u]:
                        raise PlanError(
                            f"priority of node {v!r} ({self.priority[v]}) is before its input "
                            f"{u!r} ({self.priority[u]}) on device {du!r}"
                        )
        if self.microbatches is not None and (
            isinstance(self.microbatches, bool)
            or not isinstance(self.microbatches, numbers.Integral)
            or not 1 <= self.microbatches <= MAX_REQUESTS
        ):
            raise PlanError(f"microbatches must be an int in [1, {MAX_REQUESTS}], got {self.microbatches!r}")
        if self.stages is not None:
            self._validate_stages(graph)
        return self

    def _validate_stages(self, graph: Graph) -> None:
        stage_of: dict[str, int] = {}
        for i, stage in enumerate(self.stages or []):
            if isinstance(stage, str) or not isinstance(stage, list | tuple):
                raise PlanError(f"stage {i} must be a list of node ids, got {stage!r:.60}")
            for n in stage:
                if not isinstance(n, str):
                    raise PlanError(f"stage {i} holds {n!r:.60}, not a node id")
            devs = {self.placement.get(n) for n in stage}
            if len(devs) > 1:
                raise PlanError(f"stage {i} spans several devices {sorted(map(str, devs))}")
            for n in stage:
                if n not in graph.nx:
                    raise PlanError(f"stage {i} names unknown node {n!r}")
                if n in stage_of:
                    raise PlanError(f"node {n!r} is in stages {stage_of[n]} and {i}")
                stage_of[n] = i
        missing = [n for n in graph.nx if n not in stage_of]
        if missing:
            raise PlanError(f"node {missing[0]!r} is in no stage")
        for u, v in graph.nx.edges:
            if stage_of[v] < stage_of[u]:
                raise PlanError(
                    f"edge {u!r} -> {v!r} goes backwards from stage {stage_of[u]} to {stage_of[v]}"
                )

    # ------------------------------------------------------------------ helpers
    def devices_used(self) -> list[str]:
        return sorted(set(self.placement.values()))

    def order(self, graph: Graph) -> list[str]:
        """All nodes sorted by (priority, topological index): the plan's global order."""
        topo = graph.topological_order()
        index = {n: i for i, n in enumerate(topo)}
        return sorted(topo, key=lambda n: (self.priority.get(n, index[n]), index[n]))

    # -------------------------------------------------------------- (de)serialise
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hetsim_plan": PLAN_SCHEMA_VERSION,
            "placement": dict(self.placement),
            "priority": {k: float(v) for k, v in self.priority.items()},
            "meta": dict(self.meta),
        }
        if self.stages is not None:
            out["stages"] = [list(s) for s in self.stages]
        if self.microbatches is not None:
            out["microbatches"] = self.microbatches
        if self.policy is not None:
            out["policy"] = self.policy.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str = "<dict>") -> Plan:
        """Inverse of :meth:`to_dict`. A dynamic policy is restored only as its
        description in ``meta["policy"]``; ``schedulers.load_plan`` rebuilds it."""
        if not isinstance(data, Mapping) or "hetsim_plan" not in data:
            raise PlanError(f"{source}: not a hetsim plan (no 'hetsim_plan' key)")
        if data["hetsim_plan"] != PLAN_SCHEMA_VERSION:
            raise PlanError(f"{source}: plan schema version {data['hetsim_plan']!r} is not supported")
        placement = data.get("placement")
        if not isinstance(placement, Mapping) or not all(isinstance(v, str) for v in placement.values()):
            raise PlanError(f"{source}: 'placement' must be a mapping node -> device name")
        priority = data.get("priority") or {}
        if not isinstance(priority, Mapping):
            raise PlanError(f"{source}: 'priority' must be a mapping node -> number, got {priority!r:.60}")
        for n, p in priority.items():
            if isinstance(p, bool) or not isinstance(p, numbers.Real) or not _float_range(p) or math.isnan(p):
                raise PlanError(f"{source}: priority of node {n!r} must be a number, got {p!r:.60}")
        stages = data.get("stages")
        if stages is not None and not (
            isinstance(stages, list) and all(isinstance(s, list) for s in stages)
        ):
            raise PlanError(f"{source}: 'stages' must be a list of lists of nodes, got {stages!r:.60}")
        for i, stage in enumerate(stages or []):
            for n in stage:
                if not isinstance(n, str):
                    raise PlanError(f"{source}: stage {i} holds {n!r:.60}, not a node id")
        microbatches = data.get("microbatches")
        if microbatches is not None and (isinstance(microbatches, bool) or not isinstance(microbatches, numbers.Integral)
                                         or not 1 <= microbatches <= MAX_REQUESTS):
            raise PlanError(f"{source}: 'microbatches' must be an int in [1, {MAX_REQUESTS}], "
                            f"got {microbatches!r:.60}")
        meta = data.get("meta") or {}
        if not isinstance(meta, Mapping):
            raise PlanError(f"{source}: 'meta' must be a mapping, got {meta!r:.60}")
        meta = dict(meta)
        if "policy" in data:
            meta["policy"] = data["policy"]
        return cls(
            placement={str(k): v for k, v in placement.items()},
            priority={str(k): float(v) for k, v in priority.items()},
            stages=[list(s) for s in stages] if stages is not None else None,
            microbatches=microbatches,
            meta=meta,
        )

    def to_json(self, path: str | os.PathLike[str]) -> Path:
        """Write the plan as JSON atomically."""
        return atomic_write(path, lambda fh: json.dump(self.to_dict(), fh, indent=1, sort_keys=True))

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Plan:
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise PlanError(f"{path}: no such plan file") from None
        except IsADirectoryError:
            raise PlanError(f"{path}: is a folder, not a plan file") from None
        except OSError as e:
            raise PlanError(f"{path}: cannot read the plan file ({e.strerror or e})") from None
        except (ValueError, UnicodeDecodeError, RecursionError) as e:  # JSONDecodeError is a ValueError
            raise PlanError(f"{path}: malformed plan JSON ({first_line(e)})") from None
        return cls.from_dict(data, source=str(path))


class NodeMemory(NamedTuple):
    """Each node's ``bytes`` (float64) and ``param_bytes`` (int64), in the graph's order
    (:func:`node_memory`)."""

    nbytes: np.ndarray
    params: np.ndarray


def node_memory(graph: Graph) -> NodeMemory | None:
    """The arrays of :class:`NodeMemory`, read a column at a time; None when a value is
    not a plain number (an int for ``param_bytes``) or the ints' sums may not fit int64
    (:meth:`Plan.validate` then checks node by node)."""
    data = [d for _, d in graph.nx.nodes(data=True)]
    try:
        nbytes = list(map(itemgetter("bytes"), data))
        params = list(map(itemgetter("param_bytes"), data))
        if not (set(map(type, nbytes)) <= {int, float} and set(map(type, params)) <= {int}):
            return None
        b = np.array(nbytes, dtype=np.float64)
        w = np.array(params, dtype=np.int64)
    except (KeyError, TypeError, OverflowError):
        return None
    if len(w) and (w.min() < 0 or int(w.max()) * len(w) >= 1 << 62):
        return None  # a sum that int64 may not hold
    return NodeMemory(b, w)


def _plainly_fits(memory: NodeMemory, devs: list[str | None], platform: Platform) -> bool:
    """True when every node's ``bytes`` fits the memory of its device (``devs``: names
    in graph order, None for a node the plan leaves to its policy) and the weights
    placed on each device fit it together, checked on arrays; False when they may not
    (:meth:`Plan.validate` then checks node by node, naming the culprit)."""
    names = platform.device_names
    code = dict(zip(names, range(len(names))))
    code[None] = -1
    where = np.fromiter(map(code.__getitem__, devs), dtype=np.int64, count=len(devs))
    b, w = memory
    caps = [d.memory_bytes for d in platform.devices]
    placed = where >= 0
    if not placed.all():
        where, b, w = where[placed], b[placed], w[placed]
    # exact b > cap implies float(b) >= float(cap): the floats screen
    if len(b) and (b >= np.array(caps, dtype=np.float64)[where]).any():
        return False
    return all(int(w[where == i].sum()) <= cap for i, cap in enumerate(caps))


def _float_range(value: int | float) -> bool:
    """Whether a number converts to a float (an int of 400 digits does not)."""
    try:
        float(value)
    except OverflowError:
        return False
    return True
