"""The host threads of an execution run one at a time, in virtual-time order.

A :class:`~runtime.executor.virtual.device.VirtualCuda` gives each host thread its
own clock; real threads race, so without an order the virtual times a run reaches
would depend on which thread the OS ran first. :class:`Sequencer` hands one token
from thread to thread: during a run only the holder runs, and at each point where a
thread touches shared state (a device call, the executor's lock) it hands the token
to the runnable thread with the smallest clock. Threads at the same clock go in the
order a discrete-event simulation gives simultaneous events, first scheduled first: a
thread's arrival at a later clock was scheduled when it last took the token (the start
of the host work that brought it there), a woken thread's when it was woken, and a
thread that touches shared state again without its clock moving keeps its place (it
goes on with what it was doing at that instant); remaining ties by thread name. A thread that
waits for work (:class:`IdleList`: the executor's idle workers) gives the token up;
the thread that wakes it makes it runnable at its own clock. The main thread's wait
for the run's end (:class:`SequencedDone`) likewise. The order is on from the start
of a run (the executor resets its ``done`` lock) to the device synchronisation that
ends it; outside runs, threads are not ordered.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from hetsim.runtime.executor.setup import ExecutionError

__all__ = ["IdleList", "SequencedDone", "SequencedLock", "Sequencer"]

STALL_S = 120.0  # real seconds a thread waits for its turn before the order is declared stuck
START_S = 2.0  # real seconds a run's start waits for the workers to wait for work


class Sequencer:
    """One token for the host threads of a run (see the module)."""

    def __init__(self, clocks: Any) -> None:
        #: ``clocks(ident)`` -> that thread's :class:`HostThread` (clock, name)
        self.clocks = clocks
        self.cond = threading.Condition()
        self.on = False
        self.holder: int | None = None
        self.ready: dict[int, float] = {}
        self.turns = 0  # tokens handed out and threads woken so far: the order of scheduling
        self.stamp: dict[int, int] = {}  # when a thread's arrival at its clock was scheduled
        self.granted: dict[int, tuple[float, int]] = {}  # a thread's clock and turn when it last took the token
        self.idle: set[int] = set()
        self.waiting_for: dict[int, int] = {}  # id(wake lock) -> its idle thread

    # -------------------------------------------------------------- on and off
    def start(self, expected_idle: int) -> None:
        """Turn the order on for a run, the calling thread holding the token, once
        ``expected_idle`` worker threads wait for work."""
        me = threading.get_ident()
        until = time.monotonic() + START_S
        with self.cond:
            # a worker still starting takes its turn at its first touch of shared state
            while len(self.idle) < expected_idle and self.cond.wait(timeout=max(0.0, until - time.monotonic())):
                pass
            self.on = True
            self.holder = me
            self.ready.clear()
            self.stamp.clear()
            self.granted.clear()

    def stop(self) -> None:
        """Turn the order off (the run has ended, or failed)."""
        with self.cond:
            self.on = False
            self.holder = None
            self.ready.clear()
            self.cond.notify_all()

    # ------------------------------------------------------------------ turns
    def _pick(self) -> None:
        if self.holder is None and self.ready:
            stamp = self.stamp
            nxt = min(self.ready, key=lambda i: (self.ready[i], stamp.get(i, 0), self.clocks(i).name))
            self.turns += 1
            self.granted[nxt] = (self.ready.pop(nxt), self.turns)
            self.holder = nxt
            self.cond.notify_all()

    def arrive(self, me: int, clock: float) -> None:
        """Thread ``me`` is runnable at ``clock`` (condition held): past the clock of its
        last turn, that turn scheduled its arrival; at the same clock it keeps its place."""
        self.ready[me] = clock
        last = self.granted.get(me)
        if last is not None and clock > last[0]:
            self.stamp[me] = last[1]

    def _wait_turn(self, me: int) -> None:
        until = time.monotonic() + STALL_S
        while self.on and self.holder != me:
            if not self.cond.wait(timeout=max(0.0, until - time.monotonic())):
                holder = self.clocks(self.holder).name if self.holder is not None else "nobody"
                self.on = False
                self.cond.notify_all()
                raise ExecutionError(f"virtual device: thread {self.clocks(me).name!r} waited {STALL_S:.0f} s "
                                     f"for its turn (held by {holder})")

    def point(self) -> None:
        """The calling thread is about to touch shared state at its clock: the
        runnable thread with the smallest clock goes first."""
        if not self.on:
            return
        me = threading.get_ident()
        with self.cond:
            if not self.on:
                return
            if self.holder == me:
                self.holder = None
            self.idle.discard(me)
            self.arrive(me, self.clocks(me).clock)
            self._pick()
            self._wait_turn(me)

    def block(self, wake: Any = None) -> None:
        """The calling thread is about to wait for work (on ``wake``): it gives up the token."""
        me = threading.get_ident()
        with self.cond:
            if wake is not None:
                self.waiting_for[id(wake)] = me
            self.idle.add(me)
            self.ready.pop(me, None)
            if self.holder == me:
                self.holder = None
            self._pick()
            self.cond.notify_all()

    def wake(self, wake: Any) -> None:
        """The calling thread wakes the thread waiting on ``wake``: runnable from its clock."""
        with self.cond:
            who = self.waiting_for.pop(id(wake), None)
            if who is None:
                return
            self.idle.discard(who)
            if not self.on:
                return
            h = self.clocks(who)
            h.clock = max(h.clock, self.clocks(threading.get_ident()).clock)
            self.turns += 1
            self.ready[who] = h.clock
            self.stamp[who] = self.turns
            self.granted[who] = (h.clock, self.turns)
            self._pick()

    def resume(self) -> None:
        """The calling thread, woken, waits for its turn."""
        me = threading.get_ident()
        with self.cond:
            self.idle.discard(me)
            if not self.on or self.holder == me:
                return
            if me not in self.ready:
                self.arrive(me, self.clocks(me).clock)
            self._pick()
            self._wait_turn(me)


class SequencedLock:
    """The executor's lock, taken in turn (:meth:`Sequencer.point` first)."""

    def __init__(self, lock: Any, seq: Sequencer) -> None:
        self.inner, self.seq = lock, seq

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.seq.point()
        return self.inner.acquire(blocking, timeout)

    def release(self) -> None:
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()

    def __enter__(self) -> SequencedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class IdleList(list):
    """The executor's list of idle workers' wake locks: a worker that appends its
    lock gives up its turn; the thread that pops it makes it runnable."""

    def __init__(self, seq: Sequencer) -> None:
        super().__init__()
        self.seq = seq

    def append(self, wake: Any) -> None:
        self.seq.block(wake)
        super().append(wake)

    def pop(self, index: int = -1) -> Any:
        wake = super().pop(index)
        self.seq.wake(wake)
        return wake


class SequencedDone:
    """The executor's end-of-run lock: resetting it starts the order; the main
    thread's wait for it gives up its turn, the release makes it runnable."""

    def __init__(self, lock: Any, seq: Sequencer, engine: Any) -> None:
        self.inner, self.seq, self.engine = lock, seq, engine
        self.main: int | None = None

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking:  # a run starts
            got = self.inner.acquire(False)
            self.main = threading.get_ident()
            self.seq.start(len(self.engine.threads))
            return got
        self.seq.block(self)
        got = self.inner.acquire(True, timeout)
        if self.engine.error is not None or not got:
            self.seq.stop()
        else:
            self.seq.resume()
        return got

    def release(self) -> None:
        self.seq.wake(self)
        self.inner.release()

    def locked(self) -> bool:
        return self.inner.locked()
