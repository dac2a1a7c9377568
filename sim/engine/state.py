"""Per-request state, in-flight transfers and the policy's view of :mod:`sim.engine.simulator`."""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.sim.plan import MAX_REQUESTS

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.sim.engine.run import EngineRun

__all__ = ["SimulationError", "check_arrivals"]

WAIT, QUEUED, RUNNING, DONE = 0, 1, 2, 3
STATE_NAMES = {WAIT: "waiting for inputs", QUEUED: "queued", RUNNING: "running", DONE: "done"}


class SimulationError(RuntimeError):
    """The simulation cannot run or went wrong (out of memory, deadlock, bad cost)."""


#: latest request arrival a simulation accepts, in seconds (about 32 years): past it a
#: microsecond op no longer changes a time of day in double precision
MAX_ARRIVAL_S = 1e9


def check_arrivals(requests: Any, interval_s: Any) -> None:
    """Refuse a request count other than an int in [1, :data:`~sim.plan.MAX_REQUESTS`] or
    an interval between arrivals other than a finite number >= 0 whose last arrival is
    at most :data:`MAX_ARRIVAL_S` (:func:`sim.simulate`, ``hetsim compare`` up front)."""
    if isinstance(requests, bool) or not isinstance(requests, numbers.Integral) or not 1 <= requests <= MAX_REQUESTS:
        raise SimulationError(f"requests must be an int in [1, {MAX_REQUESTS}], got {requests!r}")
    if isinstance(interval_s, bool) or not isinstance(interval_s, numbers.Real) or not math.isfinite(interval_s) \
            or interval_s < 0:
        raise SimulationError(f"interval_s must be a finite number >= 0, got {interval_s!r}")
    if interval_s * (int(requests) - 1) > MAX_ARRIVAL_S:
        raise SimulationError(f"interval_s {interval_s!r} puts the last of {requests} requests' arrivals at "
                              f"{interval_s * (int(requests) - 1):.3g} s, past the {MAX_ARRIVAL_S:g} s a "
                              "simulation accepts")


class Request:
    """State of one request in flight.

    ``r`` index; ``base`` = r * n_ops, added to a node's rank to key the ready
    heaps by (request, priority); ``pending[v]`` inputs not yet on v's device (for
    a policy-placed node: first its unfinished predecessors); ``state[v]`` one of
    ``WAIT..DONE``; ``refs[(producer, output, device)]`` readers left of each live
    buffer; ``loc[v]`` device of v; ``remaining`` ops and output transfers left;
    ``held`` graph outputs kept until the end; ``xfers`` transfers in flight by
    (producer, output, destination), for policy-placed readers to join;
    ``factors``/``rng`` the noise of this request; ``extra[v]`` the time v spends
    reading inputs from another device of its memory domain, for the ops whose
    placement (or whose producers' placement) a policy chose. Dynamic runs only:
    ``unplaced[(producer, output)]`` the policy-placed readers of a tensor not placed
    yet, ``pinned[(producer, output)]`` the devices holding a moved copy of it that
    is kept (one extra reference) until they are all placed, so that a later reader
    on that device reuses the copy instead of moving the tensor again;
    ``after[producer]`` the ``(reader, output)`` pairs placed while that producer was
    launched on a GPU but not yet done (their input follows when it is).
    """

    __slots__ = (
        "r",
        "base",
        "arrival",
        "pending",
        "state",
        "refs",
        "loc",
        "remaining",
        "held",
        "xfers",
        "factors",
        "rng",
        "extra",
        "unplaced",
        "pinned",
        "after",
    )


class Transfer:
    """One tensor on its way to one device."""

    __slots__ = (
        "req",
        "p",
        "k",
        "src",
        "dst",
        "hops",
        "times",
        "nbytes",
        "consumers",
        "is_output",
        "hop",
        "started",
        "rank",
    )

    def __init__(
        self,
        req: Request,
        p: int,
        k: int,
        src: int,
        dst: int,
        hops: tuple[int, ...],
        times: tuple[float, ...],
        nbytes: int,
        consumers: list[int],
        is_output: bool,
        rank: int,
    ) -> None:
        self.req, self.p, self.k, self.src, self.dst = req, p, k, src, dst
        self.hops, self.times, self.nbytes = hops, times, nbytes
        self.consumers, self.is_output, self.rank = consumers, is_output, rank
        self.hop, self.started = 0, False


class PolicyView:
    """:class:`sim.plan.SystemView` over the simulator's predicted state."""

    def __init__(self, run: EngineRun) -> None:
        self._run = run
        self.graph, self.platform, self.cost = run.graph, run.platform, run.cost
        self.rng = np.random.default_rng(run.seed)
        self.request: Request | None = None

    @property
    def now(self) -> float:
        """Simulated time (seconds since the first request arrived)."""
        return self._run.env.now

    def device_free_at(self, device: str) -> float:
        """When ``device`` would finish the ops running and queued on it now."""
        run = self._run
        di = run.dev_index.get(device)
        if di is None:
            raise SimulationError(f"device_free_at: unknown device {device!r}")
        now = run.env.now
        start = min(max(now, e) for e in run.stream_end[di])
        return start + max(0.0, run.queued[di]) / run.prep.streams[di]

    def location(self, node: str) -> str | None:
        """Device of ``node`` in the request being placed (None: not placed yet)."""
        run = self._run
        i = run.prep.index.get(node)
        if i is None:
            raise SimulationError(f"location: unknown node {node!r}")
        d = self.request.loc[i] if self.request is not None else run.prep.loc0[i]
        return run.prep.dev_names[d] if d >= 0 else None
