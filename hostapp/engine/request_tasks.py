"""Task-augmented requests to the client (MCP 2025-11-25 ``tasks.requests``).

A server may send its ``elicitation/create`` or ``sampling/createMessage`` with a
``task`` field: the client then answers at once with a ``CreateTaskResult`` and asks the
person in the background; the server follows the task with ``tasks/get``, fetches the
answer with ``tasks/result`` (which waits until there is one), and may list and cancel
the client's tasks. :class:`RequestTasks` keeps these tasks for one session.

The tasks live in memory: a host that stops loses them, and the server's next
``tasks/get`` is answered "unknown task" (-32602), which tells it the answer will not
come (unlike a question kept in the journal, the request cannot be answered again
under its own id: it was answered already, with the task).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hostapp.protocol.eras import RELATED_TASK_META_KEY
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

#: The longest a finished task is kept for its ``tasks/result`` (the server's ``ttl``, at most this).
MAX_TTL_MS = 3_600_000
#: How often the server is told to poll ``tasks/get``.
POLL_INTERVAL_MS = 1000
TERMINAL = frozenset({"completed", "failed", "cancelled"})


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


@dataclass(slots=True)
class _Task:
    id: str
    method: str
    ttl_ms: int
    created: float
    updated: float
    status: str = "working"
    message: str | None = None
    outcome: asyncio.Future[dict[str, Any]] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    work: asyncio.Task[Any] | None = None

    def view(self) -> dict[str, Any]:
        task: dict[str, Any] = {"taskId": self.id, "status": self.status, "createdAt": _iso(self.created),
                                "lastUpdatedAt": _iso(self.updated), "ttl": self.ttl_ms,
                                "pollInterval": POLL_INTERVAL_MS}
        if self.message:
            task["statusMessage"] = self.message
        return task


class RequestTasks:
    """The client's tasks of one session, by id. ``spawn`` runs the background work (the
    engine's, cancelled when it stops); ``clock`` is wall time, for the timestamps."""

    def __init__(self, spawn: Callable[[Coroutine[Any, Any, Any]], asyncio.Task[Any]],
                 clock: Callable[[], float] = time.time):
        self._spawn = spawn
        self._clock = clock
        self._tasks: dict[str, _Task] = {}

    def create(self, method: str, task_params: Any, answer: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        """Start answering a request as a task (``answer`` asks the person); the
        ``CreateTaskResult`` for the server."""
        self._forget_expired()
        ttl = task_params.get("ttl") if isinstance(task_params, dict) else None
        ttl_ms = min(int(ttl), MAX_TTL_MS) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) \
            and ttl > 0 else MAX_TTL_MS
        now = self._clock()
        task = _Task(uuid.uuid4().hex, method, ttl_ms, now, now, status="input_required",
                     message="waiting for the person's answer")
        self._tasks[task.id] = task
        task.work = self._spawn(self._run(task, answer))
        return {"task": task.view()}

    async def _run(self, task: _Task, answer: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            result = await answer()
        except RpcError as exc:  # refused (a declined sampling request): what the request would have answered
            self._end(task, "failed", exc.message)
            task.outcome.set_exception(exc)
            task.outcome.exception()  # (retrieved: the server may never ask for it)
            return
        except asyncio.CancelledError:
            if task.status not in TERMINAL:  # the host stops: the task is lost with it
                self._end(task, "cancelled", "hostapp stopped")
            if not task.outcome.done():
                task.outcome.cancel()
            raise
        self._end(task, "completed", None)
        task.outcome.set_result(result)

    def _end(self, task: _Task, status: str, message: str | None) -> None:
        task.status, task.message, task.updated = status, message, self._clock()

    def _find(self, params: dict[str, Any]) -> _Task:
        self._forget_expired()
        task_id = params.get("taskId")
        task = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            raise RpcError(INVALID_PARAMS, "unknown or expired taskId")
        return task

    def _forget_expired(self) -> None:
        now = self._clock()
        for task_id, task in list(self._tasks.items()):
            if task.status in TERMINAL and now - task.updated > task.ttl_ms / 1000:
                del self._tasks[task_id]

    async def serve(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer the server's ``tasks/*`` request about the client's tasks."""
        if method == "tasks/list":
            self._forget_expired()
            return {"tasks": [task.view() for task in self._tasks.values()]}
        task = self._find(params)
        if method == "tasks/get":
            return task.view()
        if method == "tasks/cancel":
            if task.status in TERMINAL:
                raise RpcError(INVALID_PARAMS, f"task is already {task.status}")
            self._end(task, "cancelled", "cancelled by the server")
            if task.work is not None:
                task.work.cancel()  # the person's prompt is withdrawn with it
            return task.view()
        # tasks/result: what the request would have answered, once there is an answer.
        related = {RELATED_TASK_META_KEY: {"taskId": task.id}}
        try:
            result = await asyncio.shield(task.outcome)
        except asyncio.CancelledError:
            if task.status == "cancelled" and not asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise RpcError(INVALID_PARAMS, "the task was cancelled", {"_meta": related}) from None
            raise
        except RpcError as exc:
            raise RpcError(exc.code, exc.message, {"_meta": related}) from None
        return {**result, "_meta": {**(result.get("_meta") or {}), **related}}
