"""Asynchronous tool execution (SEP-1391 draft), as a resume mechanism.

For a tool with ``invocationMode: "async"`` the client makes up a unique
``operation.token`` and sends it with ``tools/call``; the server answers with
``operation: {keepAlive, pollFrequency?, status}`` (and perhaps immediate content), and
the client polls ``tools/async/status {token}`` and fetches ``tools/async/result {token}``.

Because the handle is the client's own, it is committed before the request leaves
the process: after a crash before any answer, ``tools/async/status`` tells whether the
call arrived. If the server has never seen the token, the call never started and is
sent again with the same token, which the server refuses if it was used already, so a
second run cannot happen.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    Cancelled,
    CancelRequest,
    Deliver,
    MarkStatus,
    PartialResult,
    ScheduleWake,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.base import (
    CANCELLING,
    HELD,
    SENT,
    Mechanism,
    error_object,
    is_invalid_handle,
    register,
)
from hostapp.protocol.jsonrpc import REQUEST_CANCELLED

#: When the client asks for no keepAlive, how long after sending an unanswered call
#: may still be re-sent on "unknown token". Past it, the server might have run the
#: call, kept the result for its own keepAlive and purged it, so "unknown" proves nothing.
DEFAULT_RESEND_WINDOW_SECONDS = 300.0


def new_operation_token() -> str:
    """A unique, unguessable operation token (it grants access to the result)."""
    return secrets.token_urlsafe(32)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@register
class AsyncTool(Mechanism):
    """A ``tools/call`` of an async tool, tracked by a client-generated token.

    States: ``sent`` (token committed before sending; no answer yet) -> ``held``
    (the server accepted it; polling ``tools/async/status`` every ``pollFrequency``)
    -> ``done`` via ``tools/async/result``; ``cancelling`` after ``cancel()``.
    A connection drop or a restart in ``sent`` is recoverable: the status query says
    whether the call arrived. Secret: the operation token.
    """

    name = "async_tool"
    durability = 100
    client_token = True
    _token_factory: Callable[[], str] = staticmethod(new_operation_token)

    def __init__(self, method: str = "tools/call", *, keep_alive: int | None = None,
                 token_factory: Callable[[], str] = new_operation_token) -> None:
        super().__init__(method)
        self._token_factory = token_factory
        self._load_state({"keep_alive": keep_alive}, None)

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.token: str | None = secret
        self.keep_alive: int | None = state.get("keep_alive")
        self.op_status: str | None = state.get("op_status")
        self.poll_seconds: float | None = state.get("poll_seconds")
        self.accepted: bool = bool(state.get("accepted"))
        self.resent: bool = bool(state.get("resent"))
        self.cancel_requested: bool = bool(state.get("cancel_requested"))
        self.result_requested = False

    def _extra_state(self) -> dict[str, Any]:
        return {
            "keep_alive": self.keep_alive,
            "op_status": self.op_status,
            "poll_seconds": self.poll_seconds,
            "accepted": self.accepted,
            "resent": self.resent,
            "cancel_requested": self.cancel_requested,
        }

    def secret(self) -> str | None:
        return self.token

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        operation = params.get("_operation") if isinstance(params, dict) else None
        return bool(self.token) and isinstance(operation, dict) and operation.get("token") == self.token

    # -- sending

    def _call_params(self) -> dict[str, Any]:
        params = dict(self.params)
        operation: dict[str, Any] = {"token": self.token}
        if self.keep_alive is not None:
            operation["keepAlive"] = self.keep_alive
        params["operation"] = operation
        return params

    def _prepare(self, params: dict[str, Any], now: float) -> tuple[dict[str, Any], list[Action]]:
        if self.token is None:
            self.token = self._token_factory()
        # The token must be durable before the call can reach the server.
        return self._call_params(), [self._commit(), MarkStatus("submitted")]

    def _status_query(self) -> SendRequest:
        return SendRequest("tools/async/status", {"token": self.token})

    # -- the operation's state

    def _apply_status(self, status: Any, error: Any, now: float) -> list[Action]:
        """The one place an operation status transition is handled."""
        changed = status != self.op_status
        self.op_status = status
        if status == "completed":
            if self.result_requested:
                return []
            self.result_requested = True
            return [SendRequest("tools/async/result", {"token": self.token})]
        if status == "failed":
            text = error if isinstance(error, str) and error else "the tool failed"
            return [Deliver(result={"content": [{"type": "text", "text": text}], "isError": True})]
        if status == "canceled":
            if self.cancel_requested:
                return [Cancelled()]
            return [Deliver(error=error_object(REQUEST_CANCELLED, "the server cancelled the operation"))]
        if status == "unknown":
            return [Unknown("the server reports the operation's status as unknown")]
        actions: list[Action] = []
        if changed and self.phase != CANCELLING and status in ("submitted", "working", "input_required"):
            actions.append(MarkStatus("input_required" if status == "input_required" else "working"))
        actions.append(ScheduleWake(self._poll_at(now, self.poll_seconds), "poll tools/async/status"))
        return actions

    def _accept(self) -> None:
        self.accepted = True
        if self.phase == SENT:
            self.phase = HELD

    # -- hooks

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            operation = result.get("operation")
            if not isinstance(operation, dict):
                return [Deliver(result=result)]  # the server ran it synchronously
            if self.accepted and self.op_status is not None:
                return []  # a duplicate answer to the call
            self._accept()
            poll = _number(operation.get("pollFrequency"))
            if poll is not None:
                self.poll_seconds = poll
            keep_alive = operation.get("keepAlive")
            if isinstance(keep_alive, int) and not isinstance(keep_alive, bool):
                self.keep_alive = keep_alive
            actions: list[Action] = []
            if result.get("content"):
                actions.append(PartialResult({k: v for k, v in result.items() if k != "operation"}))
            actions += self._apply_status(operation.get("status"), None, now)
            return [self._commit(), *actions]
        if method == "tools/async/status":
            self.failures = 0
            first = not self.accepted
            self._accept()
            actions = self._apply_status(result.get("status"), result.get("error"), now)
            return [self._commit(), *actions] if first else actions
        if method == "tools/async/result":
            payload = result.get("result")
            return [Deliver(result=payload if isinstance(payload, dict) else result)]
        return []

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        invalid = is_invalid_handle(error)
        if method == self.method:
            if self.resent and invalid:
                return [Unknown("the server refused the re-sent call's token as already used; "
                                "the call may have run")]
            return [Deliver(error=error)]
        if method == "tools/async/status" and invalid:
            if self.accepted:
                return [Unknown("the server no longer knows the operation (expired); "
                                "its outcome cannot be fetched")]
            if self.cancel_requested:
                return [Cancelled("cancelled; the call never reached the server")]
            return self._resend(now)
        if method == "tools/async/result" and invalid:
            return [Unknown("the server no longer has the operation's result")]
        self.result_requested = False
        return self._retry_later(now, self.poll_seconds, "poll tools/async/status after an error")

    def _resend(self, now: float) -> list[Action]:
        window = self.keep_alive if self.keep_alive is not None else DEFAULT_RESEND_WINDOW_SECONDS
        if self.resent or self.sent_at is None or now - self.sent_at > window:
            return [Unknown("the server does not know the operation's token and too long has passed "
                            "to be sure the call never ran")]
        # Unknown token within the window: the call never arrived. The same token
        # makes the re-send safe, the server refuses a token it has seen.
        self.resent = True
        return [self._commit(), MarkStatus("submitted"), SendRequest(self.method, self._call_params())]

    def life_expected_within(self) -> float | None:
        return self._poll_allowance(self.poll_seconds) if self.accepted and not self.done else None

    def _check_alive(self, now: float) -> list[Action]:
        return [self._status_query()] if self.accepted else []

    def _wake(self, now: float) -> list[Action]:
        if self.accepted or self.phase == CANCELLING:
            return [self._status_query()]
        return []

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        self.result_requested = False
        return [MarkStatus("reconnecting")]

    def _resume(self, now: float) -> list[Action]:
        # Whether or not an answer came, the token lets the server tell.
        self.result_requested = False
        return [self._status_query()]

    def _cancel(self, now: float) -> list[Action]:
        self.cancel_requested = True
        self.phase = CANCELLING
        # SEP-1391: notifications/cancelled for the original request moves the
        # operation to "canceled"; polling confirms it.
        return [MarkStatus("cancelling"), self._commit(), CancelRequest("cancelled by the user"),
                ScheduleWake(self._poll_at(now, self.poll_seconds), "confirm cancellation")]

    def _expire(self, now: float) -> list[Action]:
        return [Unknown("the operation's keep-alive ended before its outcome was fetched")]
