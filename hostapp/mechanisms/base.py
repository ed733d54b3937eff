"""The one interface every resume mechanism implements, and what they share.

:class:`Mechanism` is a template: its public hooks do the bookkeeping every mechanism
needs (ignore everything once terminal, keep progress monotonic, stop after the first
terminal action) and delegate the mechanism-specific part to ``_on_*`` methods.
``restore_mechanism`` rebuilds any mechanism from its journaled ``state()`` and secret.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self, overload

from hostapp.mechanisms.actions import (
    TERMINAL_ACTIONS,
    Action,
    Cancelled,
    CancelRequest,
    CommitHandle,
    Deliver,
    MarkStatus,
    PartialResult,
    ReportProgress,
    ScheduleWake,
    Unknown,
)
from hostapp.protocol.jsonrpc import INVALID_PARAMS
from hostapp.protocol.timing import DEFAULT_TIMING, Timing

#: Every concrete mechanism by ``name``, for ``restore_mechanism``.
MECHANISMS: dict[str, type[Mechanism]] = {}

# Phases of an operation as a mechanism sees it.
NEW = "new"                        # created, nothing sent
SENT = "sent"                      # the request may have left; no server handle yet
HELD = "held"                      # a handle exists: the outcome can be fetched later
AWAITING_INPUT = "awaiting_input"  # the person must answer before anything goes on
CANCELLING = "cancelling"          # cancel asked for, confirmation pending
DONE = "done"                      # a terminal action was emitted
PHASES = (NEW, SENT, HELD, AWAITING_INPUT, CANCELLING, DONE)

#: How many of its server's intervals (a poll interval, stretched by back-off) an
#: operation may go without a sign of life before the host checks on it; as many again
#: after the check before it counts as stalled (see hostapp.engine.liveness).
LIVENESS_INTERVALS = 3

NEVER_SENT = "the host stopped before the request was sent; it never ran"
CANCELLED_BEFORE_SENT = "cancelled before the request was sent; it never ran"



def register(cls: type[Mechanism]) -> type[Mechanism]:
    MECHANISMS[cls.name] = cls
    return cls


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def is_invalid_handle(error: dict[str, Any]) -> bool:
    """-32602 on a request that names a handle: unknown, expired or already used."""
    return error.get("code") == INVALID_PARAMS


#: ``_meta`` keys of a result that carry a handle, removed before a result is shown or
#: stored: the outcome is journaled in SQLite, where no secret may go.
HANDLE_META_KEYS = ("nextResumeToken", "resumeToken", "io.modelcontextprotocol/related-task")


@overload
def scrub_result(result: dict[str, Any]) -> dict[str, Any]: ...
@overload
def scrub_result(result: dict[str, Any] | None) -> dict[str, Any] | None: ...
def scrub_result(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """``result`` without handle-bearing ``_meta`` keys (a copy only if one is there)."""
    if not isinstance(result, dict):
        return result
    meta = result.get("_meta")
    if not isinstance(meta, dict) or not any(key in meta for key in HANDLE_META_KEYS):
        return result
    clean_meta = {k: v for k, v in meta.items() if k not in HANDLE_META_KEYS}
    clean = {k: v for k, v in result.items() if k != "_meta"}
    if clean_meta:
        clean["_meta"] = clean_meta
    return clean


#: Stands for the secret wherever a server echoed it into journaled data (some build
#: input-request keys from the task id); swapped back on restore.
HANDLE_PLACEHOLDER = "\u27e8handle\u27e9"


def swap_text(value: Any, old: str, new: str) -> Any:
    """``value`` (JSON data) with ``old`` replaced by ``new`` in every string and key."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {swap_text(k, old, new): swap_text(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [swap_text(item, old, new) for item in value]
    return value


#: Key of a journaled state that a mechanism adopted from the one that started the
#: operation (``{"mechanism": <adopter's name>, ...its options}``): a restart rebuilds
#: the adopter around it, so that it goes on watching for what the server offers.
ADOPTER_KEY = "adopted_by"


def restore_mechanism(state: dict[str, Any], secret: str | None) -> Mechanism:
    """Rebuild whichever mechanism journaled ``state`` (its ``name`` is in it; a carrier
    adopted by another mechanism comes back inside its adopter)."""
    adopter = state.get(ADOPTER_KEY)
    name = adopter.get("mechanism") if isinstance(adopter, dict) else state.get("mechanism")
    try:
        cls = MECHANISMS[name]  # type: ignore[index]
    except (KeyError, TypeError):
        raise ValueError(f"journaled state names no known mechanism: {name!r}") from None
    return cls.restore(state, secret)


class Mechanism(ABC):
    """One way to carry an operation across a break; a pure state machine.

    States (``phase``): ``new`` -> ``sent`` -> ``held`` <-> ``awaiting_input`` ->
    ``done``, with ``cancelling`` reachable from any non-terminal state. ``done`` is
    entered with exactly one terminal action (Deliver, Cancelled or Unknown); after it
    every hook returns ``[]``, so a result that arrives twice is delivered once.

    Class attributes: ``name`` (journal key), ``durability`` (rank used by
    ``choose_mechanism``: higher survives more), ``client_token`` (the handle exists
    before the request is sent, so even a crash before any answer is recoverable).
    """

    name: ClassVar[str] = ""
    durability: ClassVar[int] = 0
    client_token: ClassVar[bool] = False

    def __init__(self, method: str = "tools/call") -> None:
        self.method = method
        self.params: dict[str, Any] = {}  # the call's params, as sent but without secrets
        self.phase = NEW
        self.status: str | None = None
        self.progress_high: float | None = None
        self.sent_at: float | None = None
        # When the server's promise to keep the handle runs out (task ttl). Advisory:
        # a server may keep it longer, so reaching it only makes the engine's
        # ``expire()`` a reasonable call, and the next poll may still succeed.
        self.expires_at: float | None = None
        self.failures = 0  # consecutive failed polls, for back-off
        # How long this mechanism's waits last (polls, back-off, retries): not journaled,
        # given by whoever runs it (use_timing), the product's defaults until then.
        self.timing: Timing = DEFAULT_TIMING
        self._load_state({}, None)

    def use_timing(self, timing: Timing) -> Self:
        """Wait by ``timing`` from now on; returns self."""
        self.timing = timing
        return self

    # ------------------------------------------------------------------ interface

    def prepare(self, params: dict[str, Any], *, now: float) -> tuple[dict[str, Any], list[Action]]:
        """Return the params to send for the original request and the actions to run
        BEFORE sending it (a CommitHandle here must be durable before the send)."""
        if self.phase != NEW:
            raise RuntimeError(f"{self.name}: prepare() called twice")
        self.params = copy.deepcopy(params)
        self.sent_at = now
        self.phase = SENT
        to_send, actions = self._prepare(copy.deepcopy(params), now)
        return to_send, self._settle(actions)

    def on_result(self, result: dict[str, Any], *, now: float, method: str | None = None) -> list[Action]:
        """A success response to the original request (``method`` None or the call's
        method) or to a request this mechanism asked for (its method)."""
        if self.phase == DONE:
            return []
        return self._settle(self._on_result(result, now, method or self.method))

    def on_error(self, error: dict[str, Any], *, now: float, method: str | None = None) -> list[Action]:
        """A JSON-RPC error object answering the request named by ``method``."""
        if self.phase == DONE:
            return []
        return self._settle(self._on_error(error, now, method or self.method))

    def on_notification(self, method: str, params: dict[str, Any], *, now: float) -> list[Action]:
        """A notification the engine routed to this operation (see ``claims``)."""
        if self.phase == DONE:
            return []
        if method == "notifications/progress":
            return self._progress(params)
        return self._settle(self._on_notification(method, params or {}, now))

    def take_progress(self, progress: float) -> None:
        """A progress value the engine already checked (a number beyond every step shown,
        so beyond ``progress_high``): the hot path of ``notifications/progress``, kept
        apart from :meth:`on_notification` so that a flood builds no action per value."""
        if self.phase != DONE:
            self.progress_high = progress

    def on_stream_event(self, event_id: str | None, retry_ms: int | None, *, now: float) -> list[Action]:
        """An SSE event (id and/or ``retry``) arrived on the original request's stream."""
        if self.phase == DONE:
            return []
        return self._settle(self._on_stream_event(event_id, retry_ms, now))

    def on_disconnect(self, *, now: float, session_lost: bool = False) -> list[Action]:
        """The connection carrying this operation dropped while the host kept running.
        ``session_lost``: the server forgot the session (HTTP 404), so session-bound
        handles are gone."""
        if self.phase in (DONE, NEW):
            return []  # NEW: nothing left yet; the send waits for the next connection
        return self._settle(self._on_disconnect(now, session_lost))

    def resume(self, *, now: float) -> list[Action]:
        """The connection is up again, after a reconnect or after the host restarted
        and restored this mechanism: say what to send."""
        if self.phase == DONE:
            return []
        if self.phase == NEW:
            # Journaled but never prepared: nothing left the process, so the outcome is
            # known (it never ran) and re-running it is the person's choice.
            return self._settle([Cancelled(NEVER_SENT)])
        return self._settle(self._resume(now))

    def wake(self, *, now: float) -> list[Action]:
        """A ScheduleWake fired."""
        if self.phase == DONE:
            return []
        return self._settle(self._wake(now))

    def answer_input(self, responses: dict[str, Any], *, now: float) -> list[Action]:
        """The person answered the questions of the last AskInput."""
        if self.phase != AWAITING_INPUT:
            return []
        return self._settle(self._answer_input(responses, now))

    def cancel(self, *, now: float) -> list[Action]:
        """The person asked to cancel."""
        if self.phase in (DONE, CANCELLING):
            return []
        if self.phase == NEW:
            return self._settle([Cancelled(CANCELLED_BEFORE_SENT)])  # nothing left: nothing to tell the server
        return self._settle(self._cancel(now))

    def expire(self, *, now: float) -> list[Action]:
        """The operation's lifetime ran out (the server's ttl/keepAlive/maxWait, or the
        engine's own deadline) before an outcome arrived."""
        if self.phase == DONE:
            return []
        return self._settle(self._expire(now))

    def life_expected_within(self) -> float | None:
        """How long the server's own hints let this operation go without a sign of life
        (an answer to a poll, progress, a stream event, a question) before the host checks
        on it; None when it gave none: a plain request may run silent as long as its tool
        takes."""
        return None

    def check_alive(self, *, now: float) -> list[Action]:
        """The host heard nothing for longer than :meth:`life_expected_within`, or the
        operation waits for input nobody was asked for: ask the server now by this
        mechanism's own means (a poll, a fetch of the result), never by sending the call
        again. Nothing to ask with by default."""
        if self.phase in (NEW, DONE):
            return []
        return self._settle(self._check_alive(now))

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        """Does this notification name this operation's handle? The engine routes
        progress by progressToken and request-scoped messages by request id itself;
        this covers task ids, stream ids and operation tokens."""
        return False

    @property
    def done(self) -> bool:
        return self.phase == DONE

    # ------------------------------------------------------------------ persistence

    def state(self) -> dict[str, Any]:
        """JSON-serialisable journal record, free of secrets."""
        record = {
            "mechanism": self.name,
            "method": self.method,
            "params": copy.deepcopy(self.params),
            "phase": self.phase,
            "status": self.status,
            "progress_high": self.progress_high,
            "sent_at": self.sent_at,
            "expires_at": self.expires_at,
        }
        record.update(self._extra_state())
        secret = self.secret()
        # The secret's one home is the keyring, even when the server put it in data.
        return swap_text(record, secret, HANDLE_PLACEHOLDER) if secret else record

    def secret(self) -> str | None:
        """The handle that must go to the keyring (task id, token, stream id...)."""
        return None

    @classmethod
    def restore(cls, state: dict[str, Any], secret: str | None) -> Mechanism:
        if state.get("mechanism") != cls.name:
            raise ValueError(f"state of {state.get('mechanism')!r} given to {cls.name!r}")
        if secret:
            state = swap_text(state, HANDLE_PLACEHOLDER, secret)
        self = cls.__new__(cls)
        Mechanism.__init__(self, state.get("method", "tools/call"))
        self.params = copy.deepcopy(state.get("params") or {})
        self.phase = state.get("phase", NEW)
        if self.phase not in PHASES:
            raise ValueError(f"journaled phase {self.phase!r} is not one of {PHASES}")
        self.status = state.get("status")
        self.progress_high = state.get("progress_high")
        self.sent_at = state.get("sent_at")
        self.expires_at = state.get("expires_at")
        self._load_state(state, secret)
        return self

    @classmethod
    def adopt(cls, other: Mechanism) -> Self:
        """Take over an operation another mechanism started, when the server offers
        this mechanism in the middle of it (see ``DirectRequest``)."""
        self = cls.__new__(cls)
        Mechanism.__init__(self, other.method)
        self.params = other.params
        self.phase = other.phase
        self.status = other.status
        self.progress_high = other.progress_high
        self.sent_at = other.sent_at
        self.timing = other.timing
        self._load_state({}, None)
        return self

    # ------------------------------------------------------------------ for subclasses

    def _prepare(self, params: dict[str, Any], now: float) -> tuple[dict[str, Any], list[Action]]:
        return params, [MarkStatus("submitted")]

    @abstractmethod
    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]: ...

    @abstractmethod
    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]: ...

    def _on_notification(self, method: str, params: dict[str, Any], now: float) -> list[Action]:
        return []

    def _on_stream_event(self, event_id: str | None, retry_ms: int | None, now: float) -> list[Action]:
        return []

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        if self.phase == SENT:
            return [Unknown("the connection dropped before the server gave a way to resume the request")]
        return [MarkStatus("reconnecting")]

    @abstractmethod
    def _resume(self, now: float) -> list[Action]: ...

    def _wake(self, now: float) -> list[Action]:
        return []

    def _answer_input(self, responses: dict[str, Any], now: float) -> list[Action]:
        return []

    def _cancel(self, now: float) -> list[Action]:
        # No server-side handle to cancel: tell the server to stop the request and
        # consider it cancelled (a late response is ignored, as the spec asks).
        return [CancelRequest("cancelled by the user"), Cancelled()]

    def _expire(self, now: float) -> list[Action]:
        return [Unknown("the operation expired before its outcome could be fetched")]

    def _check_alive(self, now: float) -> list[Action]:
        return []

    def _poll_allowance(self, interval: float | None) -> float:
        """:data:`LIVENESS_INTERVALS` polls at ``interval`` (the default poll when None),
        as the back-off stretches them now."""
        return LIVENESS_INTERVALS * (self._poll_at(0.0, interval))

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:  # noqa: B027 - optional hook
        pass

    # ------------------------------------------------------------------ helpers

    def _settle(self, actions: list[Action]) -> list[Action]:
        """Cut the list after its first terminal action and record the phase change:
        the one place where ``done`` is entered."""
        for index, action in enumerate(actions):
            if isinstance(action, Deliver) and action.result is not None:
                actions[index] = action = Deliver(result=scrub_result(action.result))
            elif isinstance(action, PartialResult):
                actions[index] = action = PartialResult(scrub_result(action.result))
            if isinstance(action, TERMINAL_ACTIONS):
                self.phase = DONE
                return actions[: index + 1]
            if isinstance(action, MarkStatus):
                self.status = action.status
        return actions

    def _progress(self, params: dict[str, Any]) -> list[Action]:
        progress = params.get("progress")
        if isinstance(progress, bool) or not isinstance(progress, (int, float)):
            return []
        # Progress must increase; a replay after a reconnect or a reordered message
        # would otherwise move the bar backwards.
        if self.progress_high is not None and progress <= self.progress_high:
            return []
        self.progress_high = progress
        total = params.get("total")
        total = total if isinstance(total, (int, float)) and not isinstance(total, bool) else None
        message = params.get("message")
        return [ReportProgress(progress, total, message if isinstance(message, str) else None)]

    def _commit(self) -> CommitHandle:
        return CommitHandle(self.state(), self.secret())

    def _poll_at(self, now: float, interval: float | None) -> float:
        """When to poll next: the server's interval, else a default, stretched by
        back-off after consecutive failures."""
        base = interval if interval is not None and interval > 0 else self.timing.poll
        if self.failures:
            base = min(self.timing.poll_backoff_cap, base * (2 ** self.failures))
        return now + base

    def _deliver_call_error(self, error: dict[str, Any]) -> list[Action]:
        return [Deliver(error=error)]

    def _retry_later(self, now: float, interval: float | None, reason: str) -> list[Action]:
        self.failures += 1
        return [ScheduleWake(self._poll_at(now, interval), reason)]
