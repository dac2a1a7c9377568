"""The links of a virtual-time CUDA device: one copy at a time per link direction.

A copy occupies every link of its route, hop after hop, as a GPU's copy engines
share a PCIe or NVLink direction: copies issued on different streams (each compute
stream's own device-to-host stream, say) do not overlap on one link. Times are
computed when a copy is issued, so a copy takes the earliest gap on each hop that
starts no earlier than it can (its stream's queue and the events it waits for), and
copies issued earlier keep their places: a copy that becomes ready first goes first
unless it cannot end before a copy already placed starts.
"""

from __future__ import annotations

from bisect import insort
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.platform import Link, Platform

__all__ = ["LinkTimeline"]


class LinkTimeline:
    """The busy intervals of each link direction of ``platform`` since the last full
    synchronisation (:meth:`clear`).

    Examples
    --------
    >>> from hetsim.sim.platform import Platform
    >>> links = LinkTimeline(Platform.preset("xeon-p2200"))
    >>> links.place("cpu", "gpu", 10.0, lambda link: 2.0)
    (10.0, 12.0)
    >>> links.place("cpu", "gpu", 9.0, lambda link: 2.0)   # ends after the first starts
    (12.0, 14.0)
    >>> links.place("cpu", "gpu", 5.0, lambda link: 2.0)   # fits before it
    (5.0, 7.0)
    >>> links.place("gpu", "cpu", 10.0, lambda link: 2.0)  # the other direction
    (10.0, 12.0)
    """

    def __init__(self, platform: Platform) -> None:
        self.platform = platform
        self.busy: dict[tuple[int, bool | None], list[tuple[float, float]]] = {}

    def hops(self, src: str, dst: str) -> list[tuple[tuple[int, bool | None], Link]]:
        """``(direction key, link)`` of each hop from device ``src`` to ``dst``: a
        duplex link's two directions are two keys, a half-duplex link is one."""
        out = []
        here = src
        for link in self.platform.route(src, dst):
            forward = link.src == here
            out.append(((id(link), forward if link.duplex else None), link))
            here = link.dst if forward else link.src
        return out

    def place(self, src: str, dst: str, ready: float, seconds: object) -> tuple[float, float]:
        """Place a copy from ``src`` to ``dst`` that may start at ``ready``, each hop
        lasting ``seconds(link)``: its (start, end)."""
        start = t = ready
        for i, (key, link) in enumerate(self.hops(src, dst)):
            d = float(seconds(link))  # type: ignore[operator]
            busy = self.busy.setdefault(key, [])
            for s, e in busy:
                if e <= t:
                    continue
                if s >= t + d:
                    break
                t = e
            if d > 0.0:
                insort(busy, (t, t + d))
            if i == 0:
                start = t
            t += d
        return start, t

    def clear(self) -> None:
        """Forget every interval (every copy has ended)."""
        self.busy.clear()
