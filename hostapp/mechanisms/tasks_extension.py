"""The tasks extension ``io.modelcontextprotocol/tasks`` (SEP-2663, 2026-07-28).

The client opts in on each request (``clientCapabilities.extensions``); the server may
answer ``tools/call`` with a flat ``{"resultType": "task", taskId, status, ttlMs,
pollIntervalMs?, ...}``. ``tasks/get`` returns the task with exactly one of ``result``
(completed), ``error`` (failed) or ``inputRequests`` (input_required);
``tasks/update {taskId, inputResponses}`` answers questions; ``tasks/cancel`` is a
cooperative request acknowledged with an empty result. Status changes may be pushed
as ``notifications/tasks`` on a ``subscriptions/listen`` stream; polling goes on
regardless. There is no ``tasks/result``, no ``tasks/list`` and no task progress: a
working task tells how far it got only in its ``statusMessage``, so each new one is shown.

Before a task exists the server may still answer with an MRTR question, so this
mechanism extends :class:`Mrtr`.
"""

from __future__ import annotations

from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    Cancelled,
    Deliver,
    MarkStatus,
    ScheduleWake,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.base import (
    AWAITING_INPUT,
    CANCELLING,
    HELD,
    error_object,
    is_invalid_handle,
    register,
)
from hostapp.mechanisms.mrtr import Mrtr
from hostapp.protocol.jsonrpc import REQUEST_CANCELLED

TASK_NOTIFICATION = "notifications/tasks"


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@register
class TasksExtension(Mrtr):
    """A ``tools/call`` the server may run as a SEP-2663 task.

    States: ``sent`` -> (``awaiting_input`` for an MRTR question before any task) ->
    ``held`` (task id committed; ``tasks/get`` every ``pollIntervalMs``; a
    ``subscriptions/listen`` for its notifications) <-> ``awaiting_input`` (the task's
    ``inputRequests`` asked; answered with ``tasks/update``) -> ``done``;
    ``cancelling`` after ``cancel()`` until the task reports ``cancelled`` (or finishes).
    Secret: the task id once there is one, before that the MRTR ``requestState``.
    """

    name = "tasks_extension"
    durability = 80

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        has_task = bool(state.get("has_task"))
        super()._load_state(state, None if has_task else secret)
        self.task_id: str | None = secret if has_task else None
        self.task_status: str | None = state.get("task_status")
        self.poll_seconds: float | None = state.get("poll_seconds")
        self.cancel_requested: bool = bool(state.get("cancel_requested"))
        # The statusMessage shown last. Not journaled: after a restart the first poll shows
        # the current one.
        self.status_message: str | None = None
        # Keys answered since the last (re)connect: tasks/get may still show them
        # until the server has taken the update in. Not journaled on purpose: after a
        # restart an unanswered question must be asked again.
        self.answered: set[str] = set()

    def _extra_state(self) -> dict[str, Any]:
        record = super()._extra_state()
        record.update({
            "has_task": self.task_id is not None,
            "task_status": self.task_status,
            "poll_seconds": self.poll_seconds,
            "cancel_requested": self.cancel_requested,
        })
        return record

    def secret(self) -> str | None:
        return self.task_id if self.task_id is not None else self.request_state

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        return self.task_id is not None and isinstance(params, dict) and params.get("taskId") == self.task_id

    def _get(self) -> SendRequest:
        return SendRequest("tasks/get", {"taskId": self.task_id})

    def _listen(self) -> SendRequest:
        return SendRequest("subscriptions/listen", {"notifications": {"taskIds": [self.task_id]}})

    # -- the task's state

    def _apply_task(self, task: dict[str, Any], now: float) -> list[Action]:
        """Act on a task from the creation result, tasks/get or notifications/tasks:
        the one place a task status transition is handled."""
        status = task.get("status")
        poll_ms = _number(task.get("pollIntervalMs"))
        if poll_ms is not None:
            self.poll_seconds = poll_ms / 1000
        ttl_ms = _number(task.get("ttlMs"))
        if ttl_ms is not None and self.expires_at is None:
            self.expires_at = now + ttl_ms / 1000  # the client's clock, not the server's
        changed = status != self.task_status
        self.task_status = status
        message = task.get("statusMessage") if isinstance(task.get("statusMessage"), str) else None
        message_changed = message is not None and message != self.status_message
        if message_changed:
            self.status_message = message
        if status == "completed":
            result = task.get("result")
            return [Deliver(result=result)] if isinstance(result, dict) else [self._get()]
        if status == "failed":
            error = task.get("error")
            return [Deliver(error=error)] if isinstance(error, dict) else [self._get()]
        if status == "cancelled":
            if self.cancel_requested:
                return [Cancelled(task.get("statusMessage") or "cancelled")]
            return [Deliver(error=error_object(
                REQUEST_CANCELLED, task.get("statusMessage") or "the server cancelled the task"))]
        actions: list[Action] = []
        if status == "input_required":
            requests = task.get("inputRequests")
            if not isinstance(requests, dict):
                return [self._get()]  # a notification without the questions
            fresh = {key: value for key, value in requests.items() if key not in self.answered}
            if fresh and self.phase == HELD:
                self.input_requests = fresh
                self.phase = AWAITING_INPUT
                actions += [self._commit(), *self._ask("task", task.get("statusMessage"))]
        elif status == "working" and (changed or message_changed) and self.phase != CANCELLING:
            actions.append(MarkStatus("working", message))
        actions.append(ScheduleWake(self._poll_at(now, self.poll_seconds), "poll tasks/get"))
        return actions

    # -- hooks

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method and result.get("resultType") == "task":
            if self.task_id is not None or not isinstance(result.get("taskId"), str):
                return []
            self.task_id = result["taskId"]
            self.request_state = None
            self.input_requests = {}
            if self.phase != CANCELLING:
                self.phase = HELD
            actions = self._apply_task(result, now)
            if self.cancel_requested:
                return [self._commit(), SendRequest("tasks/cancel", {"taskId": self.task_id}), *actions]
            return [self._commit(), self._listen(), *actions]
        if method == "tasks/get":
            self.failures = 0
            return self._apply_task(result, now)
        if method in ("tasks/update", "tasks/cancel"):
            return [self._get()]  # an empty acknowledgement: look at the task
        if method == "subscriptions/listen":
            return []  # the server ended the subscription; polling goes on
        if self.task_id is not None:
            return []
        return super()._on_result(result, now, method)

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            if self.cancel_requested and self.task_id is None:
                return [Cancelled()]
            return super()._on_error(error, now, method)
        if method == "subscriptions/listen":
            return []  # notifications are optional; polling carries on
        if is_invalid_handle(error):
            if method == "tasks/get":
                return [Unknown("the server no longer knows the task (unknown or expired); "
                                "its outcome cannot be fetched")]
            return [self._get()]
        return self._retry_later(now, self.poll_seconds, f"retry after {method} failed")

    def _on_notification(self, method: str, params: dict[str, Any], now: float) -> list[Action]:
        if method == TASK_NOTIFICATION and self.task_id is not None and params.get("taskId") == self.task_id:
            return self._apply_task(params, now)
        return []

    def _answer_input(self, responses: dict[str, Any], now: float) -> list[Action]:
        if self.task_id is None:
            return super()._answer_input(responses, now)
        responses = self._unalias(responses)
        self.answered.update(responses)
        self.input_requests = {}
        self.phase = HELD
        return [self._commit(), MarkStatus("working"),
                SendRequest("tasks/update", {"taskId": self.task_id, "inputResponses": responses})]

    def life_expected_within(self) -> float | None:
        return self._poll_allowance(self.poll_seconds) if self.task_id is not None and not self.done else None

    def _check_alive(self, now: float) -> list[Action]:
        return [self._get()] if self.task_id is not None else []

    def _wake(self, now: float) -> list[Action]:
        return [self._get()] if self.task_id is not None else []

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        if self.task_id is None:
            return super()._on_disconnect(now, session_lost)
        return [MarkStatus("reconnecting")]

    def _resume(self, now: float) -> list[Action]:
        if self.task_id is None:
            return super()._resume(now)
        self.answered.clear()
        actions: list[Action] = []
        if self.phase == AWAITING_INPUT:
            actions += self._ask("task")
        return [*actions, self._get(), self._listen()]

    def _cancel(self, now: float) -> list[Action]:
        if self.task_id is None and self.phase == AWAITING_INPUT:
            return super()._cancel(now)
        self.cancel_requested = True
        self.phase = CANCELLING
        if self.task_id is None:
            return super()._cancel(now)
        return [MarkStatus("cancelling"), self._commit(), SendRequest("tasks/cancel", {"taskId": self.task_id})]

    def _expire(self, now: float) -> list[Action]:
        if self.task_id is None:
            return super()._expire(now)
        return [Unknown("the task's time to live ended before its outcome was fetched")]
