"""Op and dispatch times for :mod:`sim.engine.simulator`, asked of the cost model once per
(node, device) through a :class:`costmodel.priced.PricedGraph`.

The ops a plan places are priced before the run, all the ops of one device not
priced yet in one call when the cost model prices many at once
(:func:`costmodel.price_nodes`: the model's ``price_nodes``, as
:class:`~costmodel.roofline.Roofline` does); the ops a dynamic policy places are
priced on first use. Every answer is checked: a finite number of seconds >= 0, else a
:class:`~sim.engine.prep.PrepError` naming the op and the device.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from hetsim.sim.engine.prep import PrepError, check_time

if TYPE_CHECKING:  # pragma: no cover
    from hetsim.costmodel.priced import PricedGraph
    from hetsim.sim.engine.prep import Prepared

__all__ = ["Prices"]

_INF = math.inf


def _checked_array(times: Any) -> np.ndarray | None:
    """``times`` (a float array, or a list) as an array when every time is a float,
    finite and >= 0, else None (checked in C: sets and numpy, no Python loop)."""
    if isinstance(times, np.ndarray):
        arr = times
    elif set(map(type, times)) != {float}:
        return None
    else:
        arr = np.array(times)
    return arr if ((arr >= 0.0) & (arr < _INF)).all() else None


class Prices:
    """Op time and host dispatch time per (node, device) of one simulation, read from
    the simulation's :class:`costmodel.priced.PricedGraph` (shared with the schedulers
    and with the other simulations of a :class:`sim.Simulator`) and checked.

    ``op[u]``, ``dispatch[u]``: the times of every statically placed op on its
    device (0 for the others); :meth:`get` the times of any op on any device.
    ``positions[u]``: op ``u``'s position in ``priced``'s tables (None: ``u``).
    """

    def __init__(self, priced: PricedGraph, prep: Prepared, positions: list[int] | None = None) -> None:
        self.priced, self.prep, self.positions = priced, prep, positions
        n = prep.n_ops
        node_data = prep.node_data
        self._cache: dict[tuple[int, int], tuple[float, float]] = {}
        loc = prep.loc_array[:n]
        at = None if positions is None else np.asarray(positions, dtype=np.int64)
        op = np.zeros(n)
        dispatch = np.zeros(n)
        errors: list[tuple[int, PrepError]] = []
        for d in range(len(prep.dev_names)):
            nodes = np.flatnonzero(loc == d)
            if not len(nodes):
                continue
            ops, disp = priced.times(d, nodes if at is None else at[nodes],
                                     lambda js, nodes=nodes: list(map(node_data.__getitem__, nodes[js].tolist())),
                                     as_arrays=True)
            for times, out, what in ((ops, op, "op"), (disp, dispatch, "dispatch")):
                good = _checked_array(times) if len(times) == len(nodes) else None
                if good is not None:
                    out[nodes] = good
                    continue
                try:  # one by one: convert, or name the first bad answer
                    for u, t in zip(nodes.tolist(), times if isinstance(times, list) else times.tolist()):
                        out[u] = self._check(t, u, d, what)
                except PrepError as e:  # report the first bad answer in topological order
                    errors.append((u, e))
        if errors:
            raise min(errors, key=lambda ue: ue[0])[1]
        self.op: list[float] = op.tolist()
        self.dispatch: list[float] = dispatch.tolist()

    def _check(self, t: Any, u: int, d: int, what: str) -> float:
        name, dev = self.prep.names[u], self.prep.dev_names[d]
        if what == "op":
            return check_time(t, f"op {name!r} on {dev!r}")
        return check_time(t, f"dispatching {name!r} to {dev!r}")

    def get(self, u: int, d: int) -> tuple[float, float]:
        """(op time, dispatch time) of op ``u`` on device ``d``, priced on first use."""
        hit = self._cache.get((u, d))
        if hit is None:
            t, ds = self.priced.time(d, u if self.positions is None else self.positions[u])
            if not (type(t) is float and 0.0 <= t < _INF):
                t = self._check(t, u, d, "op")
            if not 0.0 <= ds < _INF:
                ds = self._check(ds, u, d, "dispatch")
            hit = self._cache[(u, d)] = (t, ds)
        return hit
