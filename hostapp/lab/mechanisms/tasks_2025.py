"""Tasks of MCP 2025-11-25 (SEP-1686): a task-augmented ``tools/call``.

``long_task`` needs ``tools/call`` with a ``task`` field; it answers at once with a
CreateTaskResult (job kind ``task``). The client polls ``tasks/get``, waits for the
outcome with ``tasks/result`` (where the lab also asks its question, tagged with the
task, while the task is ``input_required``), lists tasks with ``tasks/list`` and cancels
with ``tasks/cancel``. Status changes are announced by ``notifications/tasks/status`` on
the session's stream.

Task ids are handles: the lab stores only their digests, so ``tasks/list`` and the status
notifications can name only the tasks created since this process started. ``tasks/get``
and ``tasks/cancel`` also serve tasks of the tasks extension
(:mod:`hostapp.lab.mechanisms.tasks_extension`), whose ids look up the same way.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from hostapp.lab.call import Call, now_iso
from hostapp.lab.mechanisms.base import LabHost, LabMechanism, MethodHandler, ToolHandler
from hostapp.lab.state import JobRow, LabState, handle_key, new_handle
from hostapp.protocol.eras import RELATED_TASK_META_KEY
from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RpcError,
)


class ExtensionTasks(Protocol):
    """How the tasks extension's mechanism shows one of its tasks (``tasks/get`` of a
    task of either kind is answered here)."""

    def describe(self, job: JobRow, task_id: str, detailed: bool) -> dict[str, Any]: ...

#: A task's time to live (milliseconds) when the client names none.
TASK_TTL_MS = 3_600_000


def find_task_job(state: LabState, params: dict[str, Any], *mechanisms: str) -> tuple[JobRow, str]:
    """The job of ``params["taskId"]`` among jobs of kinds ``mechanisms``, and the id;
    RpcError if there is none or its time to live ran out after it ended."""
    task_id = params.get("taskId")
    job = state.job(handle_key(task_id)) if isinstance(task_id, str) else None
    if job is None or job.mechanism not in mechanisms:
        raise RpcError(INVALID_PARAMS, "unknown or expired taskId")
    terminal = job.status not in ("working", "input_required", "submitted")
    if terminal and job.ttl_ms is not None and time.time() > job.updated_at + job.ttl_ms / 1000:
        raise RpcError(INVALID_PARAMS, "unknown or expired taskId")  # ttl counts from completion
    return job, task_id  # type: ignore[return-value]


class Tasks2025(LabMechanism):
    """Jobs of kind ``task``: ``long_task`` and the ``tasks/*`` methods.

    State: the ids of the tasks this process handed out, by job key.
    """

    job_kinds = ("task",)

    def __init__(self, core: LabHost, extension: ExtensionTasks) -> None:
        super().__init__(core)
        self._extension = extension
        # Task ids handed out by this process, by job key: the database keeps only digests,
        # so tasks/list and notifications/tasks/status can name only these.
        self._task_ids: dict[str, str] = {}

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_task": self._tool_long_task}

    def methods(self) -> dict[str, MethodHandler]:
        return {"tasks/get": self._tasks_get, "tasks/result": self._tasks_result,
                "tasks/list": self._tasks_list, "tasks/cancel": self._tasks_cancel}

    def job_completed(self, job: JobRow, result: dict[str, Any]) -> None:
        self._status_notification(job.key)

    def job_waiting(self, job: JobRow) -> None:
        self._status_notification(job.key)

    def _status_notification(self, key: str) -> None:
        job = self.core.state.job(key)
        if job is not None and job.mechanism == "task" and job.notify_stream and key in self._task_ids:
            task = self._task_object(job, self._task_ids[key])
            self.core.emit(job.notify_stream, {"jsonrpc": "2.0", "method": "notifications/tasks/status",
                                               "params": task})

    def _task_object(self, job: JobRow, task_id: str) -> dict[str, Any]:
        task = {"taskId": task_id, "status": job.status, "createdAt": now_iso(job.created_at),
                "lastUpdatedAt": now_iso(job.updated_at), "ttl": job.ttl_ms, "pollInterval": job.poll_ms}
        if job.status_message:
            task["statusMessage"] = job.status_message
        return task

    async def _tool_long_task(self, call: Call, args: dict[str, Any]) -> Any:
        task_params = call.params.get("task")
        if not isinstance(task_params, dict):
            raise RpcError(METHOD_NOT_FOUND, "long_task requires a task-augmented tools/call "
                           "(execution.taskSupport is \"required\"), which only MCP 2025-11-25 has"
                           + ("" if call.protocol_version == "2025-11-25" else
                              f"; this connection speaks {call.protocol_version}: call it on a server "
                              "entry pinned to 2025-11-25"))
        ttl = task_params.get("ttl")
        ttl = int(ttl) if isinstance(ttl, (int, float)) and not isinstance(ttl, bool) else TASK_TTL_MS
        task_id = new_handle()
        poll_ms = self.core.poll_ms(args)
        job = self.core.new_job(call, "long_task", args, "task", handle_key(task_id), out_stream=None,
                                notify_stream=call.session_stream, ttl_ms=ttl, poll_ms=poll_ms)
        self._task_ids[job.key] = task_id
        return {"task": self._task_object(job, task_id)}

    async def _tasks_get(self, call: Call) -> dict[str, Any]:
        job, task_id = find_task_job(self.core.state, call.params, "task", "task_ext")
        if job.mechanism == "task":
            return self._task_object(job, task_id)
        return self._extension.describe(job, task_id, detailed=True)

    async def _tasks_result(self, call: Call) -> dict[str, Any]:
        job, task_id = find_task_job(self.core.state, call.params, "task")
        related = {RELATED_TASK_META_KEY: {"taskId": task_id}}
        while True:
            job = self.core.state.job(job.key)  # type: ignore[assignment]
            if job.status == "input_required" and "answer" not in job.extra:
                # The task waits for the person: ask on this tasks/result stream, tagged with the task.
                question = {**job.extra["question"], "_meta": related}
                method = job.extra.get("input_method", "elicitation/create")
                try:
                    answer = await self.core.ask_client(call, method, question)
                except RpcError as exc:  # a sampling request refused: the task goes on, saying so
                    answer = {"refused": exc.message}
                self.core.provide_answer(job.key, answer)
                continue
            if job.status not in ("working", "input_required", "submitted"):
                break
            await self.core.job_changed(job.key).wait()
        if job.status == "completed":
            result = dict(job.result)
            result["_meta"] = {**(result.get("_meta") or {}), **related}
            return result
        error = job.error or {"code": INTERNAL_ERROR, "message": f"task {job.status}"}
        raise RpcError(error["code"], error["message"], {**(error.get("data") or {}), "_meta": related})

    async def _tasks_list(self, call: Call) -> dict[str, Any]:
        # Only tasks created since this process started can be listed (ids are stored as
        # digests); clients keep the ids they were given and reach older tasks by tasks/get.
        tasks = []
        for key, task_id in self._task_ids.items():
            job = self.core.state.job(key)
            if job is not None:
                tasks.append(self._task_object(job, task_id))
        return {"tasks": tasks}

    async def _tasks_cancel(self, call: Call) -> dict[str, Any]:
        job, task_id = find_task_job(self.core.state, call.params, "task", "task_ext")
        if job.status not in ("working", "input_required"):
            raise RpcError(INVALID_PARAMS, f"task is already {job.status}")
        self.core.stop_job(job.key, "cancelled", "cancelled by the client")
        job = self.core.state.job(job.key)  # type: ignore[assignment]
        if job.mechanism == "task":
            return self._task_object(job, task_id)
        return {"resultType": "complete"}
