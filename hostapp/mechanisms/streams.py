"""Resumable streams (draft "Streams"; docs/protocol.md, "6. Streams"), as a resume mechanism.

The server announces ``notifications/stream/create {stream: {streamId, resumeInterval:
{min, max}}}`` for a request. After a break the client waits at least ``min`` seconds,
then sends ``stream/resume {streamId}`` and receives what it missed (the request's
response among it), followed by ``notifications/stream/end``. A stream nobody resumed
or polled for ``max`` seconds may be abandoned. ``stream/poll {streamId}`` reports a
stream's state without fetching; ``stream/poll/all`` lists every stream, the way back
after a restart. Stream ids give access to message history, so they are secrets.
"""

from __future__ import annotations

from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    Deliver,
    MarkStatus,
    ScheduleWake,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.base import (
    HELD,
    SENT,
    Mechanism,
    register,
)
from hostapp.protocol.jsonrpc import METHOD_NOT_FOUND

STREAM_CREATE = "notifications/stream/create"
STREAM_END = "notifications/stream/end"

#: Resumes in a row that answered without the response and brought no progress, before
#: the operation ends unknown. Only a server without ``stream/poll`` gets that far: with
#: it, the poll after each such resume tells a stream still at work from one whose
#: response went out on a connection that was lost.
MAX_EMPTY_RESUMES = 5


def _seconds(value: Any, default: float | None) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 \
        else default


@register
class StreamRequest(Mechanism):
    """A request whose messages flow on a server-created resumable stream.

    States: ``sent`` -> ``held`` (stream id committed) -> ``done`` when the response
    arrives (or Unknown when the stream ends or is abandoned without it). While
    disconnected: ``stream/resume`` no earlier than ``min`` seconds after the break and,
    with retries, before ``max`` runs out; after a restart ``stream/poll/all`` first. A
    resume answered without the response is followed by ``stream/poll``: a completed
    stream with nothing pending has handed the response out on a connection that was
    lost (Unknown); a live one is resumed again later.
    Secret: the stream id.
    """

    name = "streams"
    durability = 55

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.stream_id: str | None = secret
        self.min_s: float = state.get("min_s", 0.0)
        self.max_s: float | None = state.get("max_s")
        self.last_contact: float | None = state.get("last_contact")
        self.not_before: float | None = state.get("not_before")
        self.ended: bool = bool(state.get("ended"))
        # After a restart the first contact is a poll of all streams.
        self.restored = bool(state)
        self.resume_wanted = False
        self.reconnecting = False
        self.empty_resumes = 0
        self._progress_at_resume: float | None = None

    def _extra_state(self) -> dict[str, Any]:
        return {"min_s": self.min_s, "max_s": self.max_s, "last_contact": self.last_contact,
                "not_before": self.not_before, "ended": self.ended}

    def secret(self) -> str | None:
        return self.stream_id

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        if self.stream_id is None or not isinstance(params, dict):
            return False
        stream = params.get("stream")
        return params.get("streamId") == self.stream_id or (
            isinstance(stream, dict) and stream.get("streamId") == self.stream_id)

    # -- timing

    def _deadline(self) -> float | None:
        if self.max_s is None or self.last_contact is None:
            return None
        return self.last_contact + self.max_s

    def _next_attempt(self, now: float) -> float:
        """No earlier than ``min`` after the break, and, however long the back-off,
        before the server may abandon the stream."""
        retry = self.timing.stream_retry  # between attempts when the server's ``min`` is zero
        delay = max(self.min_s, retry * (2.0 ** self.failures))
        at = max(now + delay, self.not_before or now)
        deadline = self._deadline()
        if deadline is not None and now + retry < deadline <= at:
            # Halve the time left rather than miss the deadline; ``min`` still rules.
            at = max(self.not_before or now, now + max(retry / 2, (deadline - now) / 2))
        return at

    def _contact(self, now: float) -> None:
        self.last_contact = now
        self.failures = 0
        self.reconnecting = False

    # -- hooks

    def _on_notification(self, method: str, params: dict[str, Any], now: float) -> list[Action]:
        if method == STREAM_CREATE:
            stream = params.get("stream") or {}
            if self.stream_id is not None or not isinstance(stream.get("streamId"), str):
                return []
            interval = stream.get("resumeInterval") or {}
            self.stream_id = stream["streamId"]
            self.min_s = _seconds(interval.get("min"), 0.0) or 0.0
            self.max_s = _seconds(interval.get("max"), None)
            self._contact(now)
            self.phase = HELD
            return [self._commit(), MarkStatus("working")]
        if method == STREAM_END and self.claims(method, params):
            self.ended = True
            # The response comes before the end; an end without it means it is lost.
            return [Unknown("the stream ended without the request's response")]
        if self.stream_id is not None:
            self.last_contact = now
        return []

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            return [Deliver(result=result)]
        self._contact(now)
        if method == "stream/poll/all":
            streams = result.get("streams")
            mine = [s for s in streams if isinstance(s, dict) and s.get("streamId") == self.stream_id] \
                if isinstance(streams, list) else []
            if not mine:
                # poll/all may list only this connection's streams (a restarted host has a
                # new one): the stream id itself still names it, so ask for it directly;
                # a refusal of that is the server's word that the stream is gone.
                return self._resume_stream(now)
            return self._on_poll(mine[0], now)
        if method == "stream/poll":
            return self._on_poll(result, now)
        if method == "stream/resume":
            # The resume answered without the response. A server may flush what was
            # pending and return while the work goes on; or the response went out on an
            # earlier resume's connection that was lost, and the server counts it as
            # delivered: resuming again would bring nothing, for ever. The stream's state
            # tells which (poll), and the next resume waits a while either way.
            brought_progress = self.progress_high != self._progress_at_resume
            self.empty_resumes = 0 if brought_progress else self.empty_resumes + 1
            if self.empty_resumes >= MAX_EMPTY_RESUMES:
                return [Unknown(f"the stream was resumed {self.empty_resumes} times in a row without "
                                "bringing the response or any progress")]
            self.not_before = now + max(self.min_s, self.timing.poll)
            self.resume_wanted = True
            return [MarkStatus("working"), SendRequest("stream/poll", {"streamId": self.stream_id})]
        return []

    def _on_poll(self, poll: dict[str, Any], now: float) -> list[Action]:
        if poll.get("status") == "completed" and not poll.get("pendingMessages"):
            return [Unknown("the stream completed and holds no undelivered response")]
        return self._resume_stream(now)

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            return [Deliver(error=error)]
        if method in ("stream/poll", "stream/poll/all") and error.get("code") == METHOD_NOT_FOUND:
            return self._resume_stream(now)  # a server without polls: resume, as for a live stream
        if method in ("stream/resume", "stream/poll", "stream/poll/all"):
            # An invalid stream id is how a server says the stream was abandoned.
            # The server's message is left out: it may quote the stream id.
            return [Unknown(f"the server refused {method} (error {error.get('code')}); the stream is gone")]
        return []

    def _resume_stream(self, now: float) -> list[Action]:
        if self.not_before is not None and now < self.not_before:
            self.resume_wanted = True
            return [ScheduleWake(self.not_before, "resume the stream")]
        self.resume_wanted = False
        self._progress_at_resume = self.progress_high
        # The response comes on the resumed stream under the original request's id.
        return [SendRequest("stream/resume", {"streamId": self.stream_id}, brings_original=True)]

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        if self.stream_id is None:
            return super()._on_disconnect(now, session_lost)
        if self.reconnecting:
            self.failures += 1  # a resume attempt failed: back off
        else:
            self.reconnecting = True
            self.failures = 0
        # ``min`` applies from the break and between attempts.
        self.not_before = now + self.min_s
        self.resume_wanted = True
        return [self._commit(), MarkStatus("reconnecting"),
                ScheduleWake(self._next_attempt(now), "resume the stream")]

    def _wake(self, now: float) -> list[Action]:
        if self.stream_id is None or not self.resume_wanted:
            return []
        return self._resume_stream(now)

    def _resume(self, now: float) -> list[Action]:
        if self.stream_id is None:
            if self.phase == SENT:
                return [Unknown("the request was in flight before the server created a stream; "
                                "it may or may not have run")]
            return []
        if self.restored:
            self.restored = False
            return [SendRequest("stream/poll/all", {})]
        return self._resume_stream(now)

    def _expire(self, now: float) -> list[Action]:
        return [Unknown("the stream was not resumed in time and may have been abandoned")]
