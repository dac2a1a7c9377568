"""Memories that devices and link directions share: plain data of a platform.

A :class:`MemoryDomain` is one memory (a socket's DRAM, a GPU's HBM), its bandwidth and
what each member (a device's streams, a link direction) draws on it; a platform lists
them under ``[[memory_domains]]`` (:mod:`costmodel.platform`). The model that slows
work while a memory is oversubscribed is the simulator's (:mod:`sim.contention`).

Examples
--------
>>> from hetsim.costmodel.memory_domain import MemoryDomain
>>> host = MemoryDomain("dram", 5e10, {"cpu": 4e10, "cpu->gpu": 2.5e10})
>>> round(host.rate({"cpu", "cpu->gpu"}), 4), host.rate({"cpu"})
(0.7692, 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform

__all__ = ["RATE", "MemoryDomain", "MemoryDomainError", "domains_from_dicts", "member_resources"]

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
