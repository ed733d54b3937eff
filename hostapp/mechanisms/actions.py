"""The actions a mechanism asks the engine to carry out.

A mechanism never performs I/O: every hook returns a list of these frozen dataclasses
and the engine executes them in order (see the contract in ``hostapp.mechanisms``).
Fields that can hold a secret (request params carrying a task id or token, handle
secrets, SSE event ids) are excluded from ``repr`` so that logging an action never
leaks one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send a JSON-RPC request and feed its answer back with ``method=self.method``.

    ``reuse_jsonrpc_id``: send it under the JSON-RPC id of the operation's original
    request (SEP-975 ``requests/resume``) instead of allocating a new one.

    ``brings_original``: what this request's stream carries may include the original
    request's response under the original id (draft ``stream/resume`` copies what was
    not delivered): the host must be waiting for that id on the session it goes to.
    """

    method: str
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    reuse_jsonrpc_id: bool = False
    brings_original: bool = False


@dataclass(frozen=True, slots=True)
class SendNotification:
    """Send a JSON-RPC notification; nothing comes back."""

    method: str
    params: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Send ``notifications/cancelled`` naming the JSON-RPC id of the original request."""

    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeSseStream:
    """Reconnect the original request's SSE stream: HTTP GET with ``Last-Event-ID``.

    The session id and protocol version headers are the connection's business. What
    arrives on the new stream is fed back as before (``on_stream_event``, notifications,
    and the final response as ``on_result``/``on_error`` of the original request).
    """

    last_event_id: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ScheduleWake:
    """Call ``wake(now=...)`` once ``now >= at`` (seconds since the epoch).

    An operation has at most one pending wake: a later ScheduleWake replaces it, and
    a terminal action cancels it. The engine journals ``at`` so a wake survives restart.
    """

    at: float
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CommitHandle:
    """Journal ``state`` and store ``secret`` in the keyring, durably, before executing
    any later action of the same list. ``secret=None`` deletes a stored secret."""

    state: dict[str, Any]
    secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ReportProgress:
    """Progress to show; already filtered so ``progress`` only ever increases."""

    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class PartialResult:
    """A non-final result to show (immediate content of an async tool, a resume-token
    chunk). The operation goes on."""

    result: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AskInput:
    """Ask the person, then call ``answer_input({key: response})``.

    ``requests`` maps a key to ``{"method": "elicitation/create" | ..., "params": {...}}``;
    the keys are aliases (``q1``, ``q2``...) free of any handle, stable across restarts,
    and the answers come back under them.
    ``kind`` says who waits for the answer: ``"mrtr"`` (the request is re-sent with the
    answers) or ``"task"`` (answers go to ``tasks/update``). The same question may be
    asked again after a restart; the engine shows it once per operation.
    """

    requests: dict[str, Any]
    kind: str


@dataclass(frozen=True, slots=True)
class MarkStatus:
    """A status change to journal and show (one of ``OPERATION_STATUSES``)."""

    status: str
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Deliver:
    """Terminal: the operation's outcome, exactly one of ``result`` or ``error``
    (``error`` is a JSON-RPC error object: ``{code, message, data?}``)."""

    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Cancelled:
    """Terminal: the operation stopped without an outcome that is its own: the person
    cancelled it, or it never left the host. ``message`` says which."""

    message: str = "cancelled"


@dataclass(frozen=True, slots=True)
class Unknown:
    """Terminal: the outcome cannot be known. Never re-run the call silently; showing
    it as unknown and offering a re-run is the person's choice."""

    reason: str


Action = (
    SendRequest
    | SendNotification
    | CancelRequest
    | ResumeSseStream
    | ScheduleWake
    | CommitHandle
    | ReportProgress
    | PartialResult
    | AskInput
    | MarkStatus
    | Deliver
    | Cancelled
    | Unknown
)

TERMINAL_ACTIONS = (Deliver, Cancelled, Unknown)

#: Statuses a mechanism reports with MarkStatus. Terminal outcomes are carried by the
#: terminal actions themselves; the engine derives the final status from them.
OPERATION_STATUSES = frozenset({
    "submitted",       # sent, no answer yet
    "working",         # the server holds it (a handle exists or the stream is live)
    "input_required",  # waiting for the person (or for the server to ask on a stream)
    "reconnecting",    # the connection dropped; the mechanism will resume it
    "cancelling",      # cancellation asked for, not yet confirmed
})
