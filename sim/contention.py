"""Memory-bandwidth contention between devices that share a memory.

Model
-----
A :class:`MemoryDomain` is one memory (a socket's DRAM, a GPU's HBM) with a
bandwidth ``B`` (bytes/s) and the members that draw on it: device streams (CPU
workers, GPU streams) and link directions (a DMA copy engine reading or writing
that memory). Each member has a *demand* ``d``: the bandwidth its work draws when
it runs alone (a number of bytes/s; or ``"rate"``: the work's own bytes over its
uncontended time, an op's ``bytes`` attribute or a transfer's size).

While the set ``A`` of busy members of a domain demands ``D = sum(d for A)`` and
``D > B``, the memory serves each member in proportion to its demand, so every
busy member progresses at ``B / D`` of its uncontended speed (the whole op slows,
not only its memory-bound part); with ``D <= B`` nobody slows. A member of several
domains progresses at the slowest of their rates. Progress is fluid: when a member
starts or finishes, the remaining work of every other busy member of its domains is
re-timed at the new rate (processor sharing), so the order in which two
overlapping ops started does not matter.

A domain may also declare ``linger_s``: a device stream keeps drawing its demand
for that long after its op ends, unless its next op starts sooner. This is a
worker that spin-waits for its next op (the executor's workers spin for 2 ms
before they block): on a machine where another process wants a core, a spinning
worker holds its core just as a working one does, so the other worker's ops slow
down as if both were busy. Link directions never linger. With ``linger_s = 0`` (the
default) a member draws only while its work runs.

Assumption: an op's or transfer's uncontended time (the cost model's) was measured
or modelled with its device alone on the memory, and the slowdown is the same for
all of an op's work. For a pair of identical workers, a slowdown ``s`` measured
with both busy against one (``s = D / B`` with ``D = 2 d``) is reproduced by
``d = s * B / 2`` (:meth:`MemoryDomain.from_slowdown`).

Platforms that declare no ``memory_domains`` run exactly as before: the engine
builds no :class:`Contention` and its records are unchanged.

Examples
--------
Host memory shared by a CPU worker and the copy engine streaming weights to a GPU
(PCIe reads host memory at 25 GB/s); the CPU's matmuls stream 40 GB/s on a 50 GB/s
memory, so while a copy runs both progress at 50 / 65 of their speed:

>>> from hetsim.sim.contention import MemoryDomain
>>> host = MemoryDomain("dram", 5e10, {"cpu": 4e10, "cpu->gpu": 2.5e10})
>>> round(host.rate({"cpu", "cpu->gpu"}), 4), host.rate({"cpu"})
(0.7692, 1.0)
>>> MemoryDomain.from_slowdown("host", ["cpu0", "cpu1"], slowdown=1.25,
...                            bandwidth_bytes_per_s=1.6e10).demand["cpu0"]
10000000000.0

In a platform TOML file::

    [[memory_domains]]
    name = "dram"
    bandwidth_bytes_per_s = 5e10
    [memory_domains.demand_bytes_per_s]
    cpu = 4e10            # a device: each of its busy streams draws this
    "cpu->gpu" = "rate"   # a link direction ("a<->b": both; "a--b": half-duplex)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.platform import Platform

__all__ = ["RATE", "Contention", "MemoryDomain", "MemoryDomainError", "domains_from_dicts", "member_resources"]

#: a demand that is the work's own rate: bytes / uncontended time
RATE = "rate"


class MemoryDomainError(ValueError):
    """A malformed memory domain (re-raised as ``PlatformError`` by the platform)."""


@dataclass(frozen=True)
class MemoryDomain:
    """One memory, its bandwidth and the members that draw on it.

    Parameters
    ----------
    name
        A name for the memory (free; need not be a device's ``memory_domain``).
    bandwidth_bytes_per_s
        Bandwidth the memory serves to all its members together.
    demand
        ``{member: bytes/s or "rate"}``; a member is a device name (each busy
        stream of it draws the demand), a link direction resource (``"a->b"``, a
        half-duplex ``"a--b"``) or a duplex link's name ``"a<->b"`` (both
        directions).
    linger_s
        Seconds a device stream keeps drawing its demand after its op ends, unless
        its next op starts sooner (a worker spin-waiting for its next op); 0: none.
    """

    name: str
    bandwidth_bytes_per_s: float
    demand: Mapping[str, float | str] = field(default_factory=dict)
    linger_s: float = 0.0

    def __post_init__(self) -> None:
        where = f"memory domain {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise MemoryDomainError("memory domain 'name' must be a non-empty string")
        b = self.bandwidth_bytes_per_s
        if isinstance(b, bool) or not isinstance(b, int | float) or not (0 < b < math.inf):
            raise MemoryDomainError(f"{where}: 'bandwidth_bytes_per_s' must be a positive number, got {b!r}")
        if not isinstance(self.demand, Mapping) or not self.demand:
            raise MemoryDomainError(f"{where}: 'demand_bytes_per_s' must be a non-empty table of members")
        clean: dict[str, float | str] = {}
        for member, d in self.demand.items():
            if d == RATE:
                clean[str(member)] = RATE
            elif isinstance(d, bool) or not isinstance(d, int | float) or not (0 < d < math.inf):
                raise MemoryDomainError(f"{where}: demand of {member!r} must be a positive number of "
                                        f"bytes/s or {RATE!r}, got {d!r}")
            else:
                clean[str(member)] = float(d)
        lg = self.linger_s
        if isinstance(lg, bool) or not isinstance(lg, int | float) or not (0 <= lg < math.inf):
            raise MemoryDomainError(f"{where}: 'linger_s' must be a number of seconds >= 0, got {lg!r}")
        object.__setattr__(self, "bandwidth_bytes_per_s", float(b))
        object.__setattr__(self, "demand", MappingProxyType(clean))
        object.__setattr__(self, "linger_s", float(lg))

    def __hash__(self) -> int:
        return hash((self.name, self.bandwidth_bytes_per_s, tuple(sorted(self.demand.items(), key=str)),
                     self.linger_s))

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, MemoryDomain) and self.name == other.name
                and self.bandwidth_bytes_per_s == other.bandwidth_bytes_per_s
                and dict(self.demand) == dict(other.demand) and self.linger_s == other.linger_s)

    def rate(self, busy: Iterable[str]) -> float:
        """Speed (0..1] of each busy member when ``busy`` (member names, each once;
        members with a ``"rate"`` demand count at the bandwidth) run together."""
        total = sum(self.bandwidth_bytes_per_s if self.demand[m] == RATE else self.demand[m]  # type: ignore[misc]
                    for m in busy)
        return min(1.0, self.bandwidth_bytes_per_s / total) if total > 0 else 1.0

    @classmethod
    def from_slowdown(cls, name: str, members: Iterable[str], *, slowdown: float,
                      bandwidth_bytes_per_s: float) -> MemoryDomain:
        """The domain whose ``members`` (identical workers), all busy, run ``slowdown``
        times slower than one alone: each draws ``max(slowdown, 1) * B / n``."""
        members = list(members)
        if not members:
            raise MemoryDomainError(f"memory domain {name!r}: from_slowdown needs members")
        if not (isinstance(slowdown, int | float) and math.isfinite(slowdown) and slowdown > 0):
            raise MemoryDomainError(f"memory domain {name!r}: slowdown must be a positive number, got {slowdown!r}")
        d = max(float(slowdown), 1.0) * bandwidth_bytes_per_s / len(members)
        return cls(name, bandwidth_bytes_per_s, dict.fromkeys(members, d))

    def to_dict(self) -> dict[str, Any]:
        """The TOML table (``[[memory_domains]]``)."""
        out = {"name": self.name, "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
               "demand_bytes_per_s": dict(self.demand)}
        if self.linger_s:
            out["linger_s"] = self.linger_s
        return out


def domains_from_dicts(data: Any, source: str) -> tuple[MemoryDomain, ...]:
    """``[[memory_domains]]`` tables -> domains; :class:`MemoryDomainError` naming the
    entry for a malformed one."""
    if not isinstance(data, list):
        raise MemoryDomainError(f"{source}: 'memory_domains' must be a [[memory_domains]] list of tables")
    out = []
    for i, t in enumerate(data):
        if not isinstance(t, Mapping):
            raise MemoryDomainError(f"{source}: memory_domains[{i}] must be a table, got {t!r:.60}")
        required = {"name", "bandwidth_bytes_per_s", "demand_bytes_per_s"}
        allowed = required | {"linger_s"}
        unknown = sorted(set(t) - allowed)
        if unknown:
            raise MemoryDomainError(f"{source}: memory_domains[{i}] has unknown key(s) {unknown}; "
                                    f"allowed: {sorted(allowed)}")
        missing = sorted(required - set(t))
        if missing:
            raise MemoryDomainError(f"{source}: memory_domains[{i}] misses {missing}")
        try:
            out.append(MemoryDomain(t["name"], t["bandwidth_bytes_per_s"], t["demand_bytes_per_s"],
                                    t.get("linger_s", 0.0)))
        except MemoryDomainError as e:
            raise MemoryDomainError(f"{source}: {e}") from None
    names = [d.name for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise MemoryDomainError(f"{source}: duplicate memory domain name(s) {dup}")
    return tuple(out)


def member_resources(platform: Platform, member: str) -> tuple[list[str], list[str]]:
    """The device names and link-direction resources a member name stands for;
    :class:`MemoryDomainError` for a name that is neither."""
    if member in platform:
        return [member], []
    resources = dict(platform.link_resources())
    if member in resources:
        return [], [member]
    for link in platform.links:
        if link.duplex and member == link.name:
            return [], [f"{link.src}->{link.dst}", f"{link.dst}->{link.src}"]
    raise MemoryDomainError(
        f"names unknown member {member!r}: members are devices {platform.device_names} or link "
        f"directions {sorted(resources)}")


class _Work:
    """One busy member: an op on a stream or a hop on a link direction."""

    __slots__ = ("left", "rate", "since", "done", "version", "domains", "demand", "key")

    def __init__(self, left: float, done: Any, domains: list[int], demand: list[float], key: Any = None) -> None:
        self.left, self.rate, self.since, self.done = left, 1.0, 0.0, done
        self.version, self.domains, self.demand, self.key = 0, domains, demand, key


class Contention:
    """The engine's side of the model: times work on members of memory domains.

    Built by :func:`sim.engine.simulator.simulate` only for platforms with ``memory_domains``.
    ``device[di]`` / ``link[ri]`` are None for servers outside every domain (they
    keep their plain timeouts); otherwise :meth:`run` returns the SimPy event that
    fires when the work, slowed while its domains are oversubscribed, is done.
    """

    def __init__(self, env: Any, platform: Platform, dev_names: list[str], res_names: list[str]) -> None:
        self.env = env
        self.bandwidth = [d.bandwidth_bytes_per_s for d in platform.memory_domains]
        self.total = [0.0] * len(self.bandwidth)  # demand of the busy members
        self.busy: list[dict[_Work, None]] = [{} for _ in self.bandwidth]  # in arrival order
        self.linger = [d.linger_s for d in platform.memory_domains]
        # per domain: stream key -> (demand, token) of a stream whose op ended less than linger_s ago
        self.lingering: list[dict[Any, tuple[float, object]]] = [{} for _ in self.bandwidth]
        dev_of: dict[str, list[tuple[int, float | str]]] = {}
        res_of: dict[str, list[tuple[int, float | str]]] = {}
        for i, dom in enumerate(platform.memory_domains):
            for member, d in dom.demand.items():
                devs, ress = member_resources(platform, member)
                for n in devs:
                    dev_of.setdefault(n, []).append((i, d))
                for n in ress:
                    res_of.setdefault(n, []).append((i, d))
        self.device = [dev_of.get(n) for n in dev_names]
        self.link = [res_of.get(n) for n in res_names]

    def run(self, draws: list[tuple[int, float | str]], t: float, nbytes: float, key: Any = None) -> Any:
        """An event that fires when work of uncontended time ``t`` (moving ``nbytes``)
        is done on a member that ``draws`` on its domains. ``key`` names a device
        stream: in a domain with ``linger_s`` it keeps drawing after the work ends
        until its next work (same key) starts or ``linger_s`` has passed."""
        env = self.env
        done = env.event()
        if t <= 0.0:
            done.succeed()
            return done
        demand = [(nbytes / t if d == RATE else d) for _, d in draws]
        w = _Work(t, done, [i for i, _ in draws], demand, key)
        w.since = env.now
        for i, d in zip(w.domains, demand):
            held = self.lingering[i].pop(key, None) if key is not None else None
            if held is not None:  # the stream's linger ends as its next work starts
                self.total[i] -= held[0]
            self.total[i] += d
            self.busy[i][w] = None
        self._retime(w.domains)
        return done

    def _end_linger(self, i: int, key: Any, token: object) -> Callable[[Any], None]:
        def end(_event: Any) -> None:
            held = self.lingering[i].get(key)
            if held is None or held[1] is not token:  # ended already by the stream's next work
                return
            del self.lingering[i][key]
            self.total[i] -= held[0]
            if not self.busy[i] and not self.lingering[i]:
                self.total[i] = 0.0
            self._retime([i])

        return end

    def _retime(self, domains: list[int]) -> None:
        """Re-rate every busy member of ``domains`` (after one joined or left)."""
        now = self.env.now
        seen: set[_Work] = set()
        for i in domains:
            for w in self.busy[i]:
                if w in seen:
                    continue
                seen.add(w)
                rate = min(min(1.0, self.bandwidth[j] / self.total[j]) if self.total[j] > 0 else 1.0
                           for j in w.domains)
                if w.version and rate == w.rate:
                    continue
                w.left = max(w.left - (now - w.since) * w.rate, 0.0)
                w.since, w.rate = now, rate
                w.version += 1
                self.env.timeout(w.left / rate).callbacks.append(self._finisher(w, w.version))

    def _finisher(self, w: _Work, version: int) -> Callable[[Any], None]:
        def finish(_event: Any) -> None:
            if w.version != version:  # re-timed since: a later timeout finishes it
                return
            for i, d in zip(w.domains, w.demand):
                del self.busy[i][w]
                if w.key is not None and self.linger[i] > 0.0:  # the stream keeps drawing a while
                    token = object()
                    self.lingering[i][w.key] = (d, token)
                    self.env.timeout(self.linger[i]).callbacks.append(self._end_linger(i, w.key, token))
                    continue
                self.total[i] -= d
                if not self.busy[i] and not self.lingering[i]:
                    self.total[i] = 0.0  # no drift from float sums
            self._retime(w.domains)
            w.done.succeed()

        return finish
