"""Following an operation the owner carries, and letting go of it: Ctrl+C detaches.

A command that follows operations (``call``, ``follow``, ``resume --wait``) is only
watching: the owner carries the work. So the first Ctrl+C detaches (the operation goes on
in the background, and the command says how to follow or cancel it), and a second Ctrl+C
within :data:`DETACH_GRACE_SECONDS`, or the first with ``--cancel-on-interrupt``, cancels
it. Either way the command ends with :data:`~hostapp.cli.exits.EXIT_INTERRUPTED` (130),
as a command ended by Ctrl+C does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Awaitable, Iterator
from typing import Any, TypeVar

from hostapp.cli.exits import EXIT_INTERRUPTED
from hostapp.engine.api import TERMINAL, EngineApi, EngineError, OperationView

T = TypeVar("T")

#: After a detach, a second Ctrl+C within this many seconds cancels the operation.
DETACH_GRACE_SECONDS = 2.0

#: How long a cancel asked by Ctrl+C is waited for before the command ends anyway.
CANCEL_WAIT_SECONDS = 30.0


class Interrupts:
    """Ctrl+C (SIGINT) while following, counted instead of raised."""

    def __init__(self) -> None:
        self.count = 0  # every Ctrl+C so far
        self._acted_on = 0  # those the command acted on
        self._hit = asyncio.Event()
        self._installed = False

    def _on_sigint(self) -> None:
        self.count += 1
        self._hit.set()

    @contextlib.contextmanager
    def catching(self) -> Iterator[Interrupts]:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._on_sigint)
            self._installed = True
        except (NotImplementedError, RuntimeError):  # no signal handlers on this loop (Windows)
            pass
        try:
            yield self
        finally:
            if self._installed:
                loop.remove_signal_handler(signal.SIGINT)

    async def next(self, timeout: float | None = None) -> bool:
        """Until a Ctrl+C not acted on yet (one that came meanwhile counts at once); False
        when ``timeout`` passed without one."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self.count <= self._acted_on:
            self._hit.clear()
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return False
            try:
                await asyncio.wait_for(self._hit.wait(), left)
            except TimeoutError:
                return False
        self._acted_on += 1
        return True


INTERRUPTED: Any = object()


async def unless_interrupted(waiting: Awaitable[T], interrupts: Interrupts) -> T:
    """``waiting``'s result, or :data:`INTERRUPTED` (``waiting`` cancelled) on Ctrl+C."""
    work = asyncio.ensure_future(waiting)
    hit = asyncio.ensure_future(interrupts.next())
    try:
        await asyncio.wait({work, hit}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hit.cancel()
    if work.done():  # ended as the Ctrl+C came: its outcome is what the person wants to see
        return work.result()
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await work
    return INTERRUPTED


def say(message: str) -> None:
    from hostapp.cli.text import echo

    echo(message, file=sys.stderr, flush=True)


async def interrupted(engine: EngineApi, op: OperationView, interrupts: Interrupts, *,
                      cancel_on_interrupt: bool, emit_final: Any) -> int:
    """What Ctrl+C on a followed operation does: detach, or (a second Ctrl+C, or
    ``cancel_on_interrupt``) cancel it and show how it ended. ``emit_final`` prints an
    ended operation's last lines."""
    if not cancel_on_interrupt:
        say(f"hostapp: detached; operation {op.id} ({op.server}/{op.tool}) goes on in the background.\n"
            f"  follow it:  hostapp follow {op.id}\n"
            f"  cancel it:  hostapp cancel {op.id}\n"
            f"  (Ctrl+C again within {DETACH_GRACE_SECONDS:g} s cancels it now)")
        if not await interrupts.next(DETACH_GRACE_SECONDS):
            return EXIT_INTERRUPTED
    say(f"hostapp: cancelling operation {op.id}...")
    try:
        await engine.cancel(op.id)
    except EngineError as exc:
        say(f"hostapp: could not cancel {op.id}: {exc}")
        return EXIT_INTERRUPTED
    try:
        final = await unless_interrupted(asyncio.wait_for(engine.wait_finished(op.id), CANCEL_WAIT_SECONDS),
                                         interrupts)
    except TimeoutError:
        final = None
    if final is INTERRUPTED or final is None:
        say(f"hostapp: the cancel of {op.id} was asked; 'hostapp ops' shows how it ends")
    else:
        emit_final(final)
    return EXIT_INTERRUPTED


async def carried_by_owner(engine: EngineApi, ops: list[OperationView]) -> tuple[list[OperationView], list[str]]:
    """Of ``ops`` (unfinished when read), those someone drives, and the ids nobody drives
    (in the journal unfinished, but not carried by the owner: never waited on)."""
    from hostapp.agent.client import RemoteEngine

    if not isinstance(engine, RemoteEngine):  # the engine runs in this process: it drives what it resumed
        return ops, []
    carried = set(await engine.control.carried())
    kept, orphans = [], []
    for op in ops:
        if op.id in carried:
            kept.append(op)
            continue
        now = await engine.operation(op.id)
        if now is not None and now.status in TERMINAL:
            kept.append(op)  # it ended meanwhile: its outcome is shown
        else:
            orphans.append(op.id)
    return kept, orphans
