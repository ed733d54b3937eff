"""Tasks of protocol revision 2025-11-25 (SEP-1686), as a resume mechanism.

The client adds ``task: {ttl}`` to ``tools/call``; the server answers at once with
``{"task": {taskId, status, pollInterval?, ttl, ...}}`` and runs the tool in the
background. The task id is the handle: with it the client polls ``tasks/get``,
fetches the outcome with ``tasks/result`` (which also carries any elicitation the task
needs, as server-to-client requests tagged with the related-task ``_meta``), and
cancels with ``tasks/cancel``. ``notifications/tasks/status`` may push status changes,
but is optional, so polling goes on regardless.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    Cancelled,
    CancelRequest,
    Deliver,
    MarkStatus,
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
from hostapp.protocol.eras import RELATED_TASK_META_KEY
from hostapp.protocol.jsonrpc import REQUEST_CANCELLED

TASK_STATUS_NOTIFICATION = "notifications/tasks/status"
TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})

#: How long a cancel asked for before the task id arrived waits for that id.
CANCEL_GRACE_SECONDS = 10.0
#: tasks/list pages read when reconciling after a crash before the task id arrived.
MAX_LIST_PAGES = 20


def _epoch(timestamp: Any) -> float | None:
    if not isinstance(timestamp, str):
        return None
    try:
        return datetime.fromisoformat(timestamp).timestamp()
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@register
class Tasks2025(Mechanism):
    """A ``tools/call`` run as a 2025-11-25 task.

    States: ``sent`` (waiting for the CreateTaskResult) -> ``held`` (task id committed;
    polling ``tasks/get`` every ``pollInterval``; ``tasks/result`` asked for once the
    task is terminal or needs input) -> ``done``; ``cancelling`` after ``cancel()``
    until the server reports the task ``cancelled`` (or finished anyway).
    Secret: the task id.
    """

    name = "tasks_2025"
    durability = 80

    def __init__(self, method: str = "tools/call", *, ttl_ms: int | None = None) -> None:
        super().__init__(method)
        self._load_state({"ttl_ms": ttl_ms}, None)

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.task_id: str | None = secret
        self.ttl_ms: int | None = state.get("ttl_ms")
        self.task_status: str | None = state.get("task_status")
        self.poll_seconds: float | None = state.get("poll_seconds")
        self.cancel_requested: bool = bool(state.get("cancel_requested"))
        # In-flight requests die with the connection or the process: never journaled.
        self.result_requested = False
        # The statusMessage shown last. Not journaled: after a restart the first poll shows
        # the current one.
        self.status_message: str | None = None
        self.list_pages = 0
        self.list_candidates = 0

    def _extra_state(self) -> dict[str, Any]:
        return {
            "ttl_ms": self.ttl_ms,
            "task_status": self.task_status,
            "poll_seconds": self.poll_seconds,
            "cancel_requested": self.cancel_requested,
        }

    def secret(self) -> str | None:
        return self.task_id

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        if self.task_id is None or not isinstance(params, dict):
            return False
        related = (params.get("_meta") or {}).get(RELATED_TASK_META_KEY) or {}
        return params.get("taskId") == self.task_id or related.get("taskId") == self.task_id

    # -- sending

    def _prepare(self, params: dict[str, Any], now: float) -> tuple[dict[str, Any], list[Action]]:
        params["task"] = {} if self.ttl_ms is None else {"ttl": self.ttl_ms}
        return params, [MarkStatus("submitted")]

    def _get(self) -> SendRequest:
        return SendRequest("tasks/get", {"taskId": self.task_id})

    def _fetch_result(self) -> list[Action]:
        if self.result_requested:
            return []
        self.result_requested = True
        return [SendRequest("tasks/result", {"taskId": self.task_id})]

    # -- the task's state

    def _apply_task(self, task: dict[str, Any], now: float) -> list[Action]:
        """Act on a Task object from CreateTaskResult, tasks/get, tasks/cancel or a
        status notification: the one place a task status transition is handled."""
        status = task.get("status")
        poll_ms = _number(task.get("pollInterval"))
        if poll_ms is not None:
            self.poll_seconds = poll_ms / 1000
        ttl_ms = _number(task.get("ttl"))
        if ttl_ms is not None and self.expires_at is None:
            # Measured on the client's clock: the server's may be skewed.
            self.expires_at = now + ttl_ms / 1000
        actions: list[Action] = []
        changed = status != self.task_status
        self.task_status = status
        message = task.get("statusMessage") if isinstance(task.get("statusMessage"), str) else None
        if message is not None and message != self.status_message:
            # A working task may tell how far it got only here: each new one is shown.
            self.status_message = message
            changed = True
        if status in ("completed", "failed"):
            return self._fetch_result()
        if status == "cancelled":
            if self.cancel_requested:
                return [Cancelled(task.get("statusMessage") or "cancelled")]
            return [Deliver(error=error_object(
                REQUEST_CANCELLED, task.get("statusMessage") or "the server cancelled the task"))]
        if changed and self.phase != CANCELLING and status in ("working", "input_required"):
            actions.append(MarkStatus(status, message))
        if status == "input_required":
            # The server delivers its questions on the tasks/result stream.
            actions += self._fetch_result()
        actions.append(ScheduleWake(self._poll_at(now, self.poll_seconds), "poll tasks/get"))
        return actions

    # -- hooks

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            task = result.get("task")
            if not isinstance(task, dict) or not isinstance(task.get("taskId"), str):
                # The server ran the call without a task: this is the outcome.
                return [Deliver(result=result)]
            if self.task_id is not None:
                return []  # a duplicate CreateTaskResult
            self.task_id = task["taskId"]
            if self.phase != CANCELLING:
                self.phase = HELD
            self.task_status = None
            actions = self._apply_task(task, now)
            actions.insert(0, self._commit())
            if self.cancel_requested and not any(isinstance(a, (Cancelled, Deliver)) for a in actions):
                actions = [actions[0], SendRequest("tasks/cancel", {"taskId": self.task_id})]
            return actions
        if method in ("tasks/get", "tasks/cancel"):
            self.failures = 0
            return self._apply_task(result, now)
        if method == "tasks/result":
            self.result_requested = False
            return [Deliver(result=result)]
        if method == "tasks/list":
            return self._reconcile(result, now)
        return []

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method:
            if self.cancel_requested:
                return [Cancelled()]
            return [Deliver(error=error)]
        if method == "tasks/result":
            self.result_requested = False
            if self.task_status in ("completed", "failed"):
                # tasks/result answers exactly what the original request would have.
                return [Deliver(error=error)]
        if method == "tasks/list":
            return [Unknown(self._lost_reason())]
        if is_invalid_handle(error):
            if method == "tasks/cancel":
                return [self._get()]  # perhaps already terminal: look
            return [Unknown("the server no longer knows the task (unknown or expired); "
                            "its outcome cannot be fetched")]
        return self._retry_later(now, self.poll_seconds, "poll tasks/get after an error")

    def _on_notification(self, method: str, params: dict[str, Any], now: float) -> list[Action]:
        if method == TASK_STATUS_NOTIFICATION and self.task_id and params.get("taskId") == self.task_id:
            return self._apply_task(params, now)
        return []

    def life_expected_within(self) -> float | None:
        return self._poll_allowance(self.poll_seconds) if self.task_id is not None and not self.done else None

    def _check_alive(self, now: float) -> list[Action]:
        if self.task_id is None:
            return []
        # Waiting for input: the questions come on the tasks/result stream, asked for again
        # unless that request is still out.
        fetch = self._fetch_result() if self.task_status == "input_required" else []
        return [self._get(), *fetch]

    def _wake(self, now: float) -> list[Action]:
        if self.task_id is None:
            if self.phase == CANCELLING:
                return [Cancelled("cancelled before the server created the task")]
            return []
        return [self._get()]

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        self.result_requested = False
        return super()._on_disconnect(now, session_lost)

    def _resume(self, now: float) -> list[Action]:
        self.result_requested = False
        if self.task_id is not None:
            return [self._get()]
        if self.phase == SENT:
            # The host died before the task id arrived. The task may exist, but nothing
            # identifies it as ours: look at the list only to tell the person.
            self.list_pages = 0
            return [SendRequest("tasks/list", {})]
        return []

    def _reconcile(self, page: dict[str, Any], now: float) -> list[Action]:
        for task in page.get("tasks") or []:
            created = _epoch(task.get("createdAt")) if isinstance(task, dict) else None
            if created is not None and self.sent_at is not None and created >= self.sent_at - 1:
                self.list_candidates += 1
        self.list_pages += 1
        cursor = page.get("nextCursor")
        if isinstance(cursor, str) and self.list_pages < MAX_LIST_PAGES:
            return [SendRequest("tasks/list", {"cursor": cursor})]
        return [Unknown(self._lost_reason())]

    def _lost_reason(self) -> str:
        reason = "the host stopped before the server answered with a task id; the call may or may not have run"
        if self.list_candidates:
            reason += f" ({self.list_candidates} task(s) on the server were created since it was sent)"
        return reason

    def _cancel(self, now: float) -> list[Action]:
        self.cancel_requested = True
        self.phase = CANCELLING
        if self.task_id is None:
            return [MarkStatus("cancelling"), CancelRequest("cancelled by the user"),
                    ScheduleWake(now + CANCEL_GRACE_SECONDS, "give up waiting for the task id")]
        return [MarkStatus("cancelling"), self._commit(), SendRequest("tasks/cancel", {"taskId": self.task_id})]

    def _expire(self, now: float) -> list[Action]:
        return [Unknown("the task's time to live ended before its outcome was fetched")]
