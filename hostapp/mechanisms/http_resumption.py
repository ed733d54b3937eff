"""Streamable HTTP resumption (2025-11-25, SEP-1699), as a resume mechanism.

A request's SSE stream carries event ids (the server SHOULD send a priming event with
an id and empty data) and may carry ``retry: <ms>``. The server may close the
connection without ending the stream; that is not a cancellation. The client then
waits ``retry`` milliseconds and reconnects with HTTP GET and ``Last-Event-ID``; the
server replays what the stream missed. The resumption is bound to the HTTP session: a
404 means the session, and the stream with it, is gone.
"""

from __future__ import annotations

from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    Deliver,
    MarkStatus,
    ResumeSseStream,
    ScheduleWake,
    Unknown,
)
from hostapp.mechanisms.base import HELD, SENT, Mechanism, register


@register
class HttpStreamResumption(Mechanism):
    """A request whose SSE stream can be resumed with ``Last-Event-ID``.

    States: ``sent`` -> ``held`` (an event id committed) -> ``done``. On a break:
    wait ``retry`` ms (doubling after failed reconnects), then ResumeSseStream; when a
    reconnect fails ``timing.resume_budget`` seconds or more after the break, unknown. A break
    reported again while the reconnect waits (by the other requests of the connection)
    is the same break: only a reconnect that was made and failed is a failure.
    The first event id is committed at once; later ones are held in memory and
    committed on a break and every ``timing.commit_every`` seconds of the stream's own
    time while events come, since replaying a little more after a quit or a crash is
    harmless (progress stays monotonic and a result is delivered once) and a keyring
    write per event is not; the interval bounds what a restart replays (a stream resumed
    from its first event id after an hour would replay the whole hour).
    Secret: the last event id.
    """

    name = "http_resumption"
    durability = 20

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.last_event_id: str | None = secret
        self.retry_ms: int | None = state.get("retry_ms")
        self.reconnect_pending = False
        self.reconnecting = False  # a reconnect was made, and its outcome not heard yet
        self.broken_at: float | None = None  # when the stream was last heard of, before a break
        self.committed_at: float | None = None  # when this process last committed the id

    def _extra_state(self) -> dict[str, Any]:
        return {"retry_ms": self.retry_ms}

    def secret(self) -> str | None:
        return self.last_event_id

    def _on_stream_event(self, event_id: str | None, retry_ms: int | None, now: float) -> list[Action]:
        if isinstance(retry_ms, int) and not isinstance(retry_ms, bool) and retry_ms >= 0:
            self.retry_ms = retry_ms
        if not event_id:
            return []
        first = self.last_event_id is None
        self.last_event_id = event_id
        self.failures = 0
        self.reconnect_pending = self.reconnecting = False
        self.broken_at = None
        if first:
            self.phase = HELD
            self.committed_at = now
            return [self._commit()]
        if self.committed_at is None:
            self.committed_at = now  # restored: the journal's id is recent enough for now
        elif now - self.committed_at >= self.timing.commit_every:
            self.committed_at = now
            return [self._commit()]
        return []

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        return [Deliver(result=result)] if method == self.method else []

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        return [Deliver(error=error)] if method == self.method else []

    def _delay(self) -> float:
        base = self.retry_ms / 1000 if self.retry_ms is not None else self.timing.sse_retry
        if self.failures:
            base = min(self.timing.reconnect_cap, max(base, self.timing.reconnect_base) * (2 ** self.failures))
        return base

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        if session_lost:
            return [Unknown("the server no longer knows the HTTP session (it restarted, or ended it), and the "
                            "request's stream is gone with it; the call may or may not have finished")]
        if self.last_event_id is None:
            return [Unknown("the connection dropped before the stream carried an event id; "
                            "the request may or may not have run")]
        if self.reconnect_pending:
            if not self.reconnecting:
                return []  # the same break, reported again while the reconnect waits
            self.reconnecting = False
            self.failures += 1  # the reconnect itself failed
            if self.broken_at is not None and now - self.broken_at >= self.timing.resume_budget:
                self.reconnect_pending = False
                return [Unknown(f"the server's stream could not be resumed within {self.timing.resume_budget:.0f} s "
                                f"of the break ({self.failures} attempts); the call may or may not have finished")]
        else:
            self.broken_at = now
        self.reconnect_pending = True
        # The spec: wait ``retry`` before reconnecting, not less.
        self.committed_at = now
        return [self._commit(), MarkStatus("reconnecting"),
                ScheduleWake(now + self._delay(), "reconnect the SSE stream")]

    def _wake(self, now: float) -> list[Action]:
        if not self.reconnect_pending or self.last_event_id is None:
            return []
        self.reconnecting = True
        return [ResumeSseStream(self.last_event_id)]

    def _resume(self, now: float) -> list[Action]:
        if self.last_event_id is None:
            if self.phase == SENT:
                return [Unknown("the request was in flight before its stream carried an event id; "
                                "it may or may not have run")]
            return []
        if self.reconnect_pending:
            return []  # the scheduled wake reconnects, after ``retry``
        self.reconnect_pending = self.reconnecting = True
        if self.broken_at is None:
            self.broken_at = now  # restored: the break is the host's restart
        return [ResumeSseStream(self.last_event_id)]
