"""The busy intervals of one device stream, with a gap index for insertion search.

HEFT-style list schedulers place an op in the first idle gap of a stream that
holds it (the insertion-based policy). Scanning the stream from its first
interval makes a schedule quadratic in the number of ops; :class:`Timeline`
keeps the intervals in blocks of at most ``2 * BLOCK``, each with the largest gap
before one of its intervals, and a max segment tree over the blocks, so that a
search starts at the first interval beginning at or after the op's ready time
(bisection) and jumps over every block whose largest gap is too short. The answer is exactly the linear scan's: same start,
same position, bit for bit.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from operator import sub

__all__ = ["Timeline"]

BLOCK = 32


class Timeline:
    """Non-overlapping busy intervals ``(start, end)`` of one stream, in start order.

    :meth:`earliest` answers where an op of a given duration would go,
    :meth:`insert` puts it there: O(BLOCK + log n) each, plus O(n / BLOCK) for the
    tree on the one insertion in ``BLOCK`` that splits a block.

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

    __slots__ = ("_starts", "_ends", "_firsts", "_maxgap", "_tree", "_leaves", "end", "size")

    def __init__(self) -> None:
        self._starts: list[list[float]] = []
        self._ends: list[list[float]] = []
        self._firsts: list[float] = []  # start of each block's first interval
        self._maxgap: list[float] = []  # largest (start - previous end) in each block
        self._leaves = 1  # the tree: _tree[_leaves + b] = _maxgap[b], parents the max
        self._tree: list[float] = [-math.inf, -math.inf]
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
            # later gaps all start after ready: the first block that has one long enough
            # (the tolerance covers rounding of the stored gaps; the scan decides)
            b = self._first(b + 1, dur - 1e-12 * (dur + self.end))
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
            self._rebuild()
            return
        bs, be = self._starts[b], self._ends[b]
        bs.insert(i, start)
        be.insert(i, end)
        self.size += 1
        self._firsts[b] = bs[0]
        last_block = b == len(self._starts) - 1
        if last_block and i == len(bs) - 1:  # appended: one new gap, the others stay
            self.end = end
            g = start - (be[i - 1] if i else self._ends[b - 1][-1] if b else 0.0)
            if g > self._maxgap[b]:
                self._set_gap(b, g)
        else:
            self._regap(b)
            if i == len(bs) - 1:
                self._regap(b + 1)  # its first gap now starts at end
        if len(bs) > 2 * BLOCK:
            self._starts[b + 1:b + 1] = [bs[BLOCK:]]
            self._ends[b + 1:b + 1] = [be[BLOCK:]]
            del bs[BLOCK:], be[BLOCK:]
            self._firsts.insert(b + 1, self._starts[b + 1][0])
            self._maxgap.insert(b + 1, 0.0)
            self._regap(b)
            self._regap(b + 1)
            self._rebuild()

    def _regap(self, b: int) -> None:
        prev = self._ends[b - 1][-1] if b else 0.0
        be = self._ends[b]
        self._set_gap(b, max(map(sub, self._starts[b], [prev, *be[:-1]])))

    def _set_gap(self, b: int, g: float) -> None:
        self._maxgap[b] = g
        tree, i = self._tree, self._leaves + b
        if i < len(tree):
            tree[i] = g
            i >>= 1
            while i:
                tree[i] = max(tree[2 * i], tree[2 * i + 1])
                i >>= 1

    def _rebuild(self) -> None:
        """The tree over the blocks' largest gaps, after the blocks changed."""
        nb = len(self._maxgap)
        leaves = 1
        while leaves < nb:
            leaves *= 2
        level = self._maxgap + [-math.inf] * (leaves - nb)
        levels = [level]
        while len(level) > 1:
            level = list(map(max, level[0::2], level[1::2]))
            levels.append(level)
        tree = [-math.inf]  # index 0 unused; the root at 1, node i's children at 2i, 2i + 1
        for level in reversed(levels):
            tree += level
        self._tree, self._leaves = tree, leaves

    def _first(self, b: int, least: float) -> int:
        """The first block at or after ``b`` whose largest gap is ``>= least``, else
        the number of blocks."""
        nb = len(self._maxgap)
        if b >= nb:
            return nb
        tree, leaves = self._tree, self._leaves
        i = leaves + b
        while tree[i] < least:
            while i & 1:  # a right child: up until a left one
                i >>= 1
            if i == 0:
                return nb
            i += 1
        while i < leaves:
            i = 2 * i if tree[2 * i] >= least else 2 * i + 1
        return i - leaves if i - leaves < nb else nb
