"""The busy intervals of one device stream, with a gap index for insertion search.

HEFT-style list schedulers place an op in the first idle gap of a stream that
holds it (the insertion-based policy). Scanning the stream from its first
interval makes a schedule quadratic in the number of ops; :class:`Timeline`
keeps the intervals in blocks of at most ``2 * BLOCK``, each with the largest gap
before one of its intervals, so that a search starts at the first interval
beginning at or after the op's ready time (bisection) and skips every block whose
largest gap is too short. The answer is exactly the linear scan's: same start,
same position, bit for bit.
"""

from __future__ import annotations

from bisect import bisect_left
from operator import sub

__all__ = ["Timeline"]

BLOCK = 128


class Timeline:
    """Non-overlapping busy intervals ``(start, end)`` of one stream, in start order.

    :meth:`earliest` answers where an op of a given duration would go,
    :meth:`insert` puts it there. Both cost O(log n + BLOCK + n / BLOCK) at worst;
    appending after the last interval (the common case) O(log n).

    Examples
    --------
    >>> t = Timeline()
    >>> t.insert(t.earliest(0.0, 2.0)[1], 0.0, 2.0)
    >>> t.insert(t.earliest(5.0, 1.0)[1], 5.0, 6.0)
    >>> t.earliest(0.0, 3.0)[0], t.earliest(0.0, 4.0)[0]
    (2.0, 6.0)
    >>> t.intervals()
    [(0.0, 2.0), (5.0, 6.0)]
    """

    __slots__ = ("_starts", "_ends", "_firsts", "_maxgap", "end", "size")

    def __init__(self) -> None:
        self._starts: list[list[float]] = []
        self._ends: list[list[float]] = []
        self._firsts: list[float] = []  # start of each block's first interval
        self._maxgap: list[float] = []  # largest (start - previous end) in each block
        self.end = 0.0  # end of the last interval (0 when empty)
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def intervals(self) -> list[tuple[float, float]]:
        """Every interval, in order."""
        return [iv for s, e in zip(self._starts, self._ends) for iv in zip(s, e)]

    def tail(self) -> tuple[int, int]:
        """The position after the last interval (for :meth:`insert`)."""
        if not self._starts:
            return (0, 0)
        return (len(self._starts) - 1, len(self._starts[-1]))

    def earliest(self, ready: float, dur: float) -> tuple[float, tuple[int, int]]:
        """Earliest start ``>= ready`` of ``dur`` seconds in a gap or after the end.

        Returns ``(start, position)``: the first gap ``[previous end, next start)``
        in which ``max(ready, previous end) + dur <= next start`` holds, else
        ``max(ready, end)``; the position is for :meth:`insert`. ``dur >= 0``.
        """
        starts = self._starts
        if not starts:
            return max(ready, 0.0), (0, 0)
        b = bisect_left(self._firsts, ready) - 1
        if b < 0:
            b = 0
        bs = starts[b]
        k = bisect_left(bs, ready)
        # no gap before the first interval that starts at or after ready can fit:
        # an op there would start at >= ready > that gap's end
        ends = self._ends
        if k:
            prev = ends[b][k - 1]
        else:
            prev = ends[b - 1][-1] if b else 0.0
        nb = len(starts)
        while True:
            be = ends[b]
            for i in range(k, len(bs)):
                s = ready if ready > prev else prev
                if s + dur <= bs[i]:
                    return s, (b, i)
                prev = be[i]
            b += 1
            # later gaps all start after ready: skip the blocks none of whose gaps can
            # hold dur (the tolerance covers rounding of the stored gaps)
            maxgap = self._maxgap
            while b < nb and maxgap[b] < dur - 1e-12 * (dur + ends[b][-1]):
                b += 1
            if b == nb:
                break
            bs, k = starts[b], 0
            prev = ends[b - 1][-1]
        return (ready if ready > self.end else self.end), self.tail()

    def insert(self, pos: tuple[int, int], start: float, end: float) -> None:
        """Add ``(start, end)`` at a position :meth:`earliest` returned."""
        b, i = pos
        if not self._starts:
            self._starts.append([start])
            self._ends.append([end])
            self._firsts.append(start)
            self._maxgap.append(start)
            self.end, self.size = end, 1
            return
        bs, be = self._starts[b], self._ends[b]
        bs.insert(i, start)
        be.insert(i, end)
        self.size += 1
        self._firsts[b] = bs[0]
        last_block = b == len(self._starts) - 1
        if last_block and i == len(bs) - 1:
            self.end = end
        self._regap(b)
        if i == len(bs) - 1 and not last_block:
            self._regap(b + 1)  # its first gap now starts at end
        if len(bs) > 2 * BLOCK:
            self._starts[b + 1:b + 1] = [bs[BLOCK:]]
            self._ends[b + 1:b + 1] = [be[BLOCK:]]
            del bs[BLOCK:], be[BLOCK:]
            self._firsts.insert(b + 1, self._starts[b + 1][0])
            self._maxgap.insert(b + 1, 0.0)
            self._regap(b)
            self._regap(b + 1)

    def _regap(self, b: int) -> None:
        prev = self._ends[b - 1][-1] if b else 0.0
        be = self._ends[b]
        self._maxgap[b] = max(map(sub, self._starts[b], [prev, *be[:-1]]))
