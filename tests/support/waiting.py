"""Waiting on a condition, not on a budget: the suite's one way to wait for something.

A test waits until what it needs is true, checked often, with a deadline that is generous
on purpose: the deadline is how long the test lets a broken host hang before it says so,
never how long the work should take. A loaded machine (CI, pytest-xdist workers, both cores
busy) makes the wait longer, never makes the test fail.

* :func:`until` – a synchronous predicate, from a synchronous test;
* :func:`until_async` – a predicate (plain or a coroutine function) from a coroutine,
  yielding to the event loop between checks;
* :func:`run_until` – from a synchronous Qt test: runs the window's (qasync) loop until the
  predicate holds.

Each returns the predicate's first true value and raises :class:`AssertionError` naming
``what`` when the deadline passes.
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: The default deadline (seconds): long enough for any condition of the suite on a loaded
#: 2-core machine, short enough that a hang fails before pytest-timeout's stack dump.
DEADLINE = 60.0
#: How often a condition is checked: fast enough not to add to a test's time, slow enough
#: not to take a core from the processes under test.
INTERVAL = 0.02


def _timed_out(what: str, timeout: float, last: Any) -> AssertionError:
    tail = f" (last value: {last!r})" if last is not None else ""
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}{tail}")


def until(predicate: Callable[[], T], timeout: float = DEADLINE, what: str = "the condition",
          interval: float = INTERVAL) -> T:
    """Call ``predicate`` until it returns a true value, and return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(interval)


async def until_async(predicate: Callable[[], T | Awaitable[T]], timeout: float = DEADLINE,
                      what: str = "the condition", interval: float = INTERVAL) -> T:
    """As :func:`until`, in a coroutine: ``predicate`` may be a coroutine function."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if loop.time() >= deadline:
            raise _timed_out(what, timeout, value)
        await asyncio.sleep(interval)


def run_until(qloop: asyncio.AbstractEventLoop, predicate: Callable[[], T | Awaitable[T]],
              timeout: float = DEADLINE, what: str = "the condition", interval: float = INTERVAL) -> T:
    """Run ``qloop`` (the window's event loop) until ``predicate`` holds; return its value."""
    return qloop.run_until_complete(until_async(predicate, timeout, what, interval))


def interrupted(proc: subprocess.Popen[str], timeout: float = DEADLINE) -> str:
    """Ctrl+C to ``proc`` (SIGINT), then its end: its standard error. A command that does
    not end by ``timeout`` fails the test saying how it stood (its signal masks and state
    from /proc, where there is one: a SIGINT blocked or ignored there was inherited from
    whatever started it), then it is killed."""
    proc.send_signal(signal.SIGINT)
    try:
        _out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{proc.pid}/status")
        shown = [line for line in (status.read_text().splitlines() if status.exists() else [])
                 if line.split(":")[0] in ("State", "Threads", "SigBlk", "SigIgn", "SigCgt")]
        proc.kill()
        _out, err = proc.communicate()
        raise AssertionError(f"{proc.args!r} did not end within {timeout:g} s of Ctrl+C; it stood: {shown}; "
                             f"stderr: {err!r}") from None
    return err
