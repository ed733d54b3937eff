"""The window's event loop schedules asyncio callbacks as asyncio does, from one Qt timer."""

from __future__ import annotations

import asyncio

import pytest
from PySide6.QtWidgets import QApplication

from hostapp.ui.event_loop import HostEventLoop


@pytest.fixture
def loop(qapp: QApplication):
    loop = HostEventLoop(qapp)
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()
    asyncio.set_event_loop(None)


def test_callbacks_run_in_order_and_cancelled_ones_never(loop):
    ran: list[str] = []

    async def scenario() -> None:
        loop.call_later(0.03, ran.append, "later")
        loop.call_later(0.01, ran.append, "sooner")
        loop.call_later(0.01, ran.append, "sooner, second")
        loop.call_soon(ran.append, "soon")
        loop.call_soon(ran.append, "soon, second")
        loop.call_later(0.02, ran.append, "cancelled").cancel()
        loop.call_soon(ran.append, "cancelled too").cancel()
        await asyncio.sleep(0.06)

    loop.run_until_complete(scenario())
    assert ran == ["soon", "soon, second", "sooner", "sooner, second", "later"]


def test_timeouts_tasks_and_executor_work(loop):
    async def never() -> None:
        await asyncio.Event().wait()

    async def scenario() -> tuple[int, bool, int]:
        total = sum(await asyncio.gather(*(asyncio.sleep(0.001 * (i % 5), result=i) for i in range(500))))
        try:
            await asyncio.wait_for(never(), 0.02)
            timed_out = False
        except TimeoutError:
            timed_out = True
        in_thread = await loop.run_in_executor(None, sum, [1, 2, 3])
        return total, timed_out, in_thread

    assert loop.run_until_complete(scenario()) == (sum(range(500)), True, 6)


def test_cancelled_timers_do_not_pile_up(loop):
    """Timeouts armed and cancelled at once (httpx does so around every request) are
    dropped from the schedule instead of waiting out their delay."""

    async def scenario() -> int:
        for _ in range(20_000):
            loop.call_later(30, lambda: None).cancel()
        await asyncio.sleep(0.01)
        return len(loop._timer._scheduled)

    assert loop.run_until_complete(scenario()) < 4096


def test_many_live_timers_are_not_scanned_every_turn(loop):
    """Thousands of live timers (a wake per operation) stay in the schedule; they are looked
    through for cancelled entries again only once the schedule has doubled, not at every
    turn of the loop (cancelled ones are still dropped once they make up most of it)."""
    looked_at = 0

    class Counted(asyncio.Handle):
        @property
        def _cancelled(self) -> bool:  # read by the scheduler's scan of its heap
            nonlocal looked_at
            looked_at += 1
            return self.__dict__.get("cancelled_flag", False)

        @_cancelled.setter
        def _cancelled(self, value: bool) -> None:
            self.__dict__["cancelled_flag"] = value

    scheduler = loop._timer

    async def scenario() -> tuple[int, int]:
        for _ in range(5_000):
            scheduler.add_callback(Counted(lambda: None, (), loop), 60)
        for _ in range(3):  # the first turn past the threshold scans once
            await asyncio.sleep(0)
        before = looked_at
        for _ in range(50):
            await asyncio.sleep(0)
        return before, looked_at - before

    first, later = loop.run_until_complete(scenario())
    assert first >= 5_000  # scanned once
    assert later < 1_000, later  # not 50 more scans of 5,000


def test_in_debug_mode_coroutines_and_non_callables_are_refused(loop):
    async def coroutine_function() -> None: ...

    loop.set_debug(True)
    try:
        with pytest.raises(TypeError, match="coroutines"):
            loop.call_soon(coroutine_function)
        with pytest.raises(TypeError, match="callable"):
            loop.call_later(1, "not callable")
    finally:
        loop.set_debug(False)
    assert isinstance(loop.call_at(loop.time() + 1, print), asyncio.Handle)


def test_callbacks_wait_while_the_loop_is_not_running(loop, qapp: QApplication):
    """Qt processes its events outside the asyncio loop too (a test between two
    ``run_until_complete``, a dialog before the app's loop starts): a callback due then waits
    for the loop to run, as asyncio's own do, instead of stepping a task with no running
    loop (which raised "no running event loop" inside it and ended it for good)."""
    steps: list[str] = []

    async def background() -> None:
        await asyncio.sleep(0)
        steps.append("first")
        await asyncio.sleep(0.01)
        asyncio.get_running_loop()  # what a task's code may ask at any step
        steps.append("second")

    async def start() -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(background())

    task = loop.run_until_complete(start())
    deadline = loop.time() + 0.5
    while loop.time() < deadline:  # the loop is not running: only Qt's events are processed
        qapp.processEvents()
    assert steps == [] and not task.done()
    loop.run_until_complete(task)
    assert steps == ["first", "second"]


@pytest.mark.parametrize("hurried", [False, True])
def test_what_is_hurried_runs_before_the_next_paint(loop, qapp: QApplication, hurried: bool):
    """A callback made ready while a widget waits to be repainted runs after the repaint,
    unless the loop is hurried (the history's next page asked for as the person scrolls):
    then before it."""
    from PySide6.QtGui import QPaintEvent
    from PySide6.QtWidgets import QWidget

    order: list[str] = []

    class Painted(QWidget):
        def paintEvent(self, event: QPaintEvent) -> None:
            order.append("painted")

    widget = Painted()
    widget.resize(200, 100)
    widget.show()

    async def scenario() -> None:
        for _ in range(20):  # shown and painted once
            await asyncio.sleep(0.01)
        order.clear()
        widget.update()  # a repaint waits
        loop.call_soon(order.append, "ran")
        if hurried:
            loop.hurry()
        for _ in range(20):
            await asyncio.sleep(0.01)

    loop.run_until_complete(scenario())
    widget.close()
    assert order[:2] == (["ran", "painted"] if hurried else ["painted", "ran"]), order
