"""How fast the host polls one server: a budget shared by all its operations.

Each operation's mechanism asks to poll at the interval its server suggests (a task's
``pollInterval``, one second for many). With thousands of operations on one server that
adds up to more requests than the host can send and the server answer: every request
then waits behind all the others, the first word from an operation just resumed waits
behind the tenth poll of another, and the host spends its whole CPU polling. A
:class:`PollBudget` lets the repeat polls of one server start at most ``rate`` times a
second and ``in_flight`` at once, in the order they were asked for; with more operations
than the budget covers, each one is polled less often than asked (7,500 operations at a
budget of 200 a second: about every 37 s) instead of everything slowing down. An
operation's first request after a (re)start, its original call and anything that is not
a repeat poll do not wait here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

#: Repeat polls of one server, at most per second and at once.
POLLS_PER_SECOND = 200.0
POLLS_IN_FLIGHT = 8


class PollBudget:
    """A token bucket (``rate`` per second, ``burst`` at once after a quiet spell) and a
    cap on polls in flight, taken in first-come order."""

    def __init__(self, rate: float | None = None, in_flight: int | None = None, *,
                 burst: float | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        rate = POLLS_PER_SECOND if rate is None else rate
        in_flight = POLLS_IN_FLIGHT if in_flight is None else in_flight
        if rate <= 0 or in_flight < 1:
            raise ValueError("a poll budget needs a positive rate and at least one poll in flight")
        self.rate = rate
        self.burst = max(1.0, burst if burst is not None else rate)
        self._clock = clock
        self._sleep = sleep
        self._tokens = self.burst
        self._stamp = clock()
        self._turn = asyncio.Lock()  # FIFO: waiters take tokens in the order they came
        self._slots = asyncio.Semaphore(in_flight)
        self.waiting = 0  # polls waiting for their turn (for logs and tests)

    @asynccontextmanager
    async def poll(self) -> AsyncIterator[None]:
        """Hold for one poll: waits for a token and a free slot; the slot is given back on
        leaving. A waiter that is cancelled leaves the queue without taking either."""
        self.waiting += 1
        try:
            async with self._turn:
                await self._take_token()
                await self._slots.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            self._slots.release()

    async def _take_token(self) -> None:
        while True:
            now = self._clock()
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now
            if self._tokens >= 1.0 - 1e-9:  # (a clock's rounding must not cost another sleep)
                self._tokens = max(0.0, self._tokens - 1.0)
                return
            await self._sleep((1.0 - self._tokens) / self.rate)
