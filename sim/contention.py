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

>>> from hetsim.costmodel.memory_domain import MemoryDomain
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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hetsim.costmodel.memory_domain import (
    RATE,
    MemoryDomain,
    MemoryDomainError,
    domains_from_dicts,
    member_resources,
)

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.platform import Platform

__all__ = ["RATE", "Contention", "MemoryDomain", "MemoryDomainError", "domains_from_dicts", "member_resources"]


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
