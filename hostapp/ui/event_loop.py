"""The window's asyncio event loop: qasync's, with callbacks run from one Qt timer.

qasync runs every ``call_soon``/``call_later`` callback from a Qt timer of its own, and a
cancelled callback keeps its Qt timer until it would have fired. httpx arms a 30-second
write, connect and pool timeout around every request and cancels it a millisecond
later, an SSE reader re-arms its silence timeout on every chunk: with a few hundred
operations polling or streaming, tens of thousands of dead Qt timers pile up, and Qt's
timer bookkeeping is linear in their number on every start and kill. At 1,000 resumed
operations that bookkeeping took a third of the GUI thread.

:class:`CallbackScheduler` keeps the loop's callbacks the way asyncio's own loop does (a
queue of ready callbacks and a heap of timed ones, cancelled ones dropped when reached)
and asks Qt for one timer only, armed for whatever is due first. Each timer event runs
the callbacks that were ready when it fired, then control goes back to Qt for input,
sockets and painting.
"""

from __future__ import annotations

import asyncio
import collections
import heapq
import itertools
import logging
import math
import time
from typing import Any

import qasync
from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, QTimer

log = logging.getLogger(__name__)

#: The event :meth:`CallbackScheduler.hurry` posts.
_RUN_NOW = QEvent.Type(QEvent.registerEventType())

#: Heaps at least this long are rebuilt without their cancelled entries once those make up
#: most of them (the timeouts httpx cancels at once would otherwise sit there for 30 s).
_COMPACT_AT = 4096


class CallbackScheduler(QObject):
    """Runs an event loop's callbacks from a single Qt timer.

    States: running → stopped (``stop``: nothing runs any more). The interface is the
    one qasync's loop expects of its timer: ``add_callback``, ``stop``, ``set_debug``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._ready: collections.deque[Any] = collections.deque()
        self._scheduled: list[tuple[float, int, Any]] = []  # (due, sequence, handle)
        self._sequence = itertools.count()
        self._compact_at = _COMPACT_AT  # heap length at which cancelled entries are dropped
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.timeout.connect(self._run_due)
        self._armed_for: float | None = None  # monotonic time the Qt timer fires at
        self._stopped = False
        self._debug = False

    def add_callback(self, handle: Any, delay: float = 0) -> Any:
        if delay <= 0:
            self._ready.append(handle)
            self._arm(time.monotonic())
        else:
            due = time.monotonic() + delay
            heapq.heappush(self._scheduled, (due, next(self._sequence), handle))
            self._arm(due)
        return handle

    def stop(self) -> None:
        self._stopped = True
        self._timer.stop()
        self._ready.clear()
        self._scheduled.clear()

    def set_debug(self, enabled: bool) -> None:
        self._debug = enabled

    def _arm(self, due: float) -> None:
        """Make the Qt timer fire no later than ``due``."""
        if self._stopped or (self._armed_for is not None and self._armed_for <= due):
            return
        self._armed_for = due
        self._timer.start(max(0, math.ceil((due - time.monotonic()) * 1000)))

    def wake(self) -> None:
        """The loop starts running: what waited for it is due (see :meth:`_run_due`)."""
        if self._ready:
            self._arm(time.monotonic())
        elif self._scheduled:
            self._arm(self._scheduled[0][0])

    def _run_due(self) -> None:
        self._armed_for = None
        if asyncio._get_running_loop() is None:
            # Qt processes its events outside the asyncio loop too (between two
            # run_until_complete, a dialog shown before the loop starts): asyncio runs its
            # callbacks only inside the loop, so these wait for it (run_forever wakes them).
            # Run now, a task's step would find no running loop and end with that error.
            return
        now = time.monotonic()
        scheduled = self._scheduled
        while scheduled and scheduled[0][0] <= now:
            handle = heapq.heappop(scheduled)[2]
            if not handle._cancelled:
                self._ready.append(handle)
        # Only what is ready now: callbacks these add wait for the next turn, after Qt's.
        for _ in range(len(self._ready)):
            if self._stopped:
                return
            handle = self._ready.popleft()
            if handle._cancelled:
                continue
            if self._debug:
                self._run_timed(handle)
            else:
                handle._run()
        if len(scheduled) >= self._compact_at:
            # Looked at again only once the heap has doubled since: with thousands of live
            # timers (one wake per operation) a scan every turn cost 6 % of the GUI thread.
            live = [entry for entry in scheduled if not entry[2]._cancelled]
            if len(live) * 2 < len(scheduled):
                heapq.heapify(live)
                self._scheduled = scheduled = live
            self._compact_at = max(_COMPACT_AT, 2 * len(live))
        if self._ready:
            self._arm(now)
        elif scheduled:
            self._arm(scheduled[0][0])

    def hurry(self) -> None:
        """Run what is ready before Qt paints: a posted event, which Qt delivers before its
        low-priority update requests, where the timer fires only after them. For a request
        the person is waiting for (the next page of the history as they scroll): it leaves
        while the table repaints, instead of after (3-6 ms later)."""
        if not self._stopped and self._ready:
            QCoreApplication.postEvent(self, QEvent(_RUN_NOW))

    def event(self, event: QEvent) -> bool:
        if event.type() == _RUN_NOW:
            if self._ready:
                self._run_due()
            return True
        return super().event(event)

    def _run_timed(self, handle: Any) -> None:
        loop = handle._loop
        started = time.monotonic()
        loop._current_handle = handle
        try:
            handle._run()
        finally:
            loop._current_handle = None
        took = time.monotonic() - started
        if took >= loop.slow_callback_duration:
            log.warning("executing %s took %.3f seconds", handle, took)


class HostEventLoop(qasync.QEventLoop):
    """qasync's event loop over the QApplication, scheduling through :class:`CallbackScheduler`."""

    def __init__(self, app: Any = None, set_running_loop: bool = False, already_running: bool = False):
        super().__init__(app, set_running_loop=set_running_loop, already_running=already_running)
        self._timer = CallbackScheduler()

    # qasync's call_soon goes through call_later, which checks the callback with
    # ``asyncio.iscoroutinefunction`` and formats a debug message on every call; asyncio's
    # own loop checks callbacks only in debug mode. These run for every resumed future
    # and every httpx timeout (a few percent of the GUI thread while a thousand
    # operations re-attach), so they go straight to the scheduler.
    def call_soon(self, callback, *args, context=None):
        if self.get_debug():
            self._check_callback(callback, "call_soon")
        return self._timer.add_callback(asyncio.Handle(callback, args, self, context=context))

    def call_later(self, delay, callback, *args, context=None):
        if self.get_debug():
            self._check_callback(callback, "call_later")
        return self._timer.add_callback(asyncio.Handle(callback, args, self, context=context), delay)

    def call_at(self, when, callback, *args, context=None):
        return self.call_later(when - time.monotonic(), callback, *args, context=context)

    def hurry(self) -> None:
        """What is ready runs before Qt's next paint (see :meth:`CallbackScheduler.hurry`)."""
        self._timer.hurry()

    def _before_run_forever(self) -> None:
        super()._before_run_forever()
        self._timer.wake()

    @staticmethod
    def _check_callback(callback: Any, method: str) -> None:
        if asyncio.iscoroutine(callback) or asyncio.iscoroutinefunction(callback):
            raise TypeError(f"coroutines cannot be used with {method}()")
        if not callable(callback):
            raise TypeError(f"a callable object was expected by {method}(), got {callback!r}")
