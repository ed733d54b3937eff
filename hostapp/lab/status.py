"""The lab's resource that changes: ``lab://status``, a few lines of plain text.

It names a tick that advances every :data:`TICK_SECONDS` of the lab's clock (scaled by
``--time-scale``) and counts the lab's jobs, so reading it twice a few seconds apart shows
a change. Handshake-era sessions may ``resources/subscribe`` to it: each new tick sends
``notifications/resources/updated`` on the session's own stream (the standalone SSE
stream on HTTP, stdout on stdio). The 2026-07-28 era has no subscriptions in the lab
(its ``subscriptions/listen`` is not served): there it is listed and read only.

Subscriptions live in memory, per session: a lab restart forgets them, as a server that
keeps them in memory does (the host subscribes again in each new session).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["STATUS_URI", "TICK_SECONDS", "StatusResource"]

STATUS_URI = "lab://status"
#: Seconds of the lab's clock between two ticks (real seconds times ``--time-scale``).
TICK_SECONDS = 5.0

ENTRY = {"uri": STATUS_URI, "name": "status", "title": "Lab status",
         "description": f"The lab's jobs and a tick that advances every {TICK_SECONDS:g} s; subscribe to see it change",
         "mimeType": "text/plain"}


class StatusResource:
    """``lab://status``: its text, who watches it, and the ticks that tell them."""

    def __init__(self, *, scaled: Callable[[float], float], job_counts: Callable[[], tuple[int, int]],
                 notify: Callable[[str, dict[str, Any]], bool]):
        #: Lab seconds -> real seconds (the core's ``scaled``).
        self._scaled = scaled
        #: (running, all) jobs of the lab.
        self._job_counts = job_counts
        #: Sends a notification to one session (by key); False when the session is gone.
        self._notify = notify
        self._started = time.monotonic()
        self._subscribers: set[str] = set()
        self._ticker: asyncio.Task[None] | None = None

    @property
    def period(self) -> float:
        """Real seconds between two ticks."""
        return max(0.01, self._scaled(TICK_SECONDS))

    def tick(self) -> int:
        return int((time.monotonic() - self._started) / self.period)

    def text(self) -> str:
        running, total = self._job_counts()
        return (f"hostapp lab\ntick {self.tick()} (one every {TICK_SECONDS:g} s of the lab's clock)\n"
                f"jobs running: {running}\njobs in all: {total}\n")

    def read(self) -> dict[str, Any]:
        return {"contents": [{"uri": STATUS_URI, "mimeType": "text/plain", "text": self.text()}]}

    def subscribe(self, session_key: str) -> None:
        self._subscribers.add(session_key)
        if self._ticker is None or self._ticker.done():
            self._ticker = asyncio.create_task(self._tick_loop())

    def unsubscribe(self, session_key: str) -> None:
        self._subscribers.discard(session_key)

    def subscribers(self) -> frozenset[str]:
        return frozenset(self._subscribers)

    async def _tick_loop(self) -> None:
        while self._subscribers:
            elapsed = (time.monotonic() - self._started) / self.period
            await asyncio.sleep((math.floor(elapsed) + 1 - elapsed) * self.period)
            for key in list(self._subscribers):
                if not self._notify(key, {"jsonrpc": "2.0", "method": "notifications/resources/updated",
                                          "params": {"uri": STATUS_URI}}):
                    self._subscribers.discard(key)  # the session ended

    async def stop(self) -> None:
        self._subscribers.clear()
        if self._ticker is not None:
            self._ticker.cancel()
            await asyncio.gather(self._ticker, return_exceptions=True)
