"""Cheap events on simpy's clock.

simpy stays the clock: its queue orders events by (time, priority, sequence number),
and the simulator's results depend on that order for simultaneous events (see
``docs/pecode.md``, "Same-cycle order"). What costs is simpy's general ``Event`` and
``Timeout`` objects, built for every forward, task end and SIMD step. The events here
carry only what ``Environment.step`` and ``Process._resume`` read (``callbacks``,
``_ok``, ``_value``) and enter the queue exactly as ``Timeout`` and ``Event.succeed``
do (normal priority, the environment's next sequence number at the moment of
scheduling), so the order of every event, and with it every figure, stays the same.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappush
from typing import Any

import simpy

NORMAL = 1  # simpy.events.NORMAL: the priority of timeouts and succeeded events


class Wake:
    """An event a process may ``yield``: a timeout (:meth:`Clock.timeout`) or a signal
    another party fires once (:meth:`Clock.signal`, :meth:`fire`)."""

    __slots__ = ("_ok", "_value", "callbacks", "clock", "fired")

    def __init__(self, clock: Clock) -> None:
        self.callbacks: list[Callable[[Any], None]] | None = []
        self._ok = True
        self._value = None
        self.clock = clock
        self.fired = False

    @property
    def triggered(self) -> bool:
        return self.fired

    def fire(self) -> None:
        """Trigger now (as ``Event.succeed``): waiting processes resume in this cycle,
        after the events already scheduled for it."""
        self.fired = True
        env = self.clock.env
        heappush(self.clock.queue, (env._now, NORMAL, next(env._eid), self))

    succeed = fire


class Clock:
    """Scheduling on a simpy environment without simpy's event objects."""

    __slots__ = ("env", "queue")

    def __init__(self, env: simpy.Environment) -> None:
        self.env = env
        self.queue: list[Any] = env._queue  # (holds Wakes too)

    def now(self) -> int:
        return int(self.env._now)

    def call_after(self, delay: int, callback: Callable[[Any], None]) -> None:
        """Run ``callback(event)`` ``delay`` cycles from now (as a ``Timeout`` would)."""
        wake = Wake(self)
        wake.callbacks = [callback]
        wake.fired = True
        env = self.env
        heappush(self.queue, (env._now + delay, NORMAL, next(env._eid), wake))

    def timeout(self, delay: int) -> Wake:
        """An event ``delay`` cycles from now, for a process to yield."""
        wake = Wake(self)
        wake.fired = True
        env = self.env
        heappush(self.queue, (env._now + delay, NORMAL, next(env._eid), wake))
        return wake

    def signal(self) -> Wake:
        """An event that happens when someone calls its :meth:`Wake.fire`."""
        return Wake(self)
