"""Tasks of the ``io.modelcontextprotocol/tasks`` extension (2026-07-28, SEP-2663).

``long_task_ext`` answers at once with ``resultType: "task"`` and a task id (job kind
``task_ext``). The client polls ``tasks/get``, which carries everything: the status, the
questions (``inputRequests``) while the task waits for the person, then the result or
the error; it answers the questions with ``tasks/update`` and may ``tasks/cancel``.
``tasks/get`` and ``tasks/cancel`` are shared with 2025-11-25 tasks and served by
:mod:`hostapp.lab.mechanisms.tasks_2025`, which asks :meth:`TasksExtension.describe` for
this extension's tasks. A stateless client must declare the extension in its capabilities
to use any of it (:func:`opted_in`).
"""

from __future__ import annotations

from typing import Any

from hostapp.lab.call import Call, now_iso
from hostapp.lab.mechanisms.base import LabMechanism, MethodHandler, ToolHandler
from hostapp.lab.mechanisms.tasks_2025 import TASK_TTL_MS, find_task_job
from hostapp.lab.state import JobRow, handle_key, new_handle
from hostapp.protocol.eras import TASKS_EXTENSION
from hostapp.protocol.jsonrpc import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CAPABILITY,
    RpcError,
)

#: tasks/* methods of the tasks extension; a stateless client must opt in to use them.
TASKS_EXTENSION_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


def opted_in(call: Call) -> bool:
    """Whether the client declared the tasks extension in its capabilities."""
    return TASKS_EXTENSION in (call.capabilities.get("extensions") or {})


def missing_extension(what: str) -> RpcError:
    """The error for using ``what`` without having declared the extension."""
    return RpcError(MISSING_REQUIRED_CAPABILITY, f"{what} needs the {TASKS_EXTENSION} extension: "
                    "declare it in clientCapabilities.extensions",
                    {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}})


class TasksExtension(LabMechanism):
    """Jobs of kind ``task_ext``: ``long_task_ext``, ``tasks/update``, and the task object."""

    job_kinds = ("task_ext",)

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_task_ext": self._tool_long_task_ext}

    def methods(self) -> dict[str, MethodHandler]:
        return {"tasks/update": self._tasks_update}

    def describe(self, job: JobRow, task_id: str, detailed: bool) -> dict[str, Any]:
        """The task as ``tasks/get`` shows it (``detailed``) or as the call's first answer."""
        task: dict[str, Any] = {"resultType": "complete" if detailed else "task", "taskId": task_id,
                                "status": job.status, "createdAt": now_iso(job.created_at),
                                "lastUpdatedAt": now_iso(job.updated_at), "ttlMs": job.ttl_ms,
                                "pollIntervalMs": job.poll_ms}
        if job.status_message:
            task["statusMessage"] = job.status_message
        if detailed and job.status == "input_required" and "question" in job.extra:
            task["inputRequests"] = {job.extra["input_key"]: {"method": job.extra.get("input_method",
                                                                                        "elicitation/create"),
                                                              "params": job.extra["question"]}}
        elif detailed and job.status == "completed":
            task["result"] = {**job.result, "resultType": "complete"}
        elif detailed and job.status == "failed":
            task["error"] = job.error
        return task

    async def _tool_long_task_ext(self, call: Call, args: dict[str, Any]) -> Any:
        if not opted_in(call):
            raise missing_extension("long_task_ext")
        task_id = new_handle()
        poll_ms = self.core.poll_ms(args)
        job = self.core.new_job(call, "long_task_ext", args, "task_ext", handle_key(task_id), out_stream=None,
                                notify_stream=None, ttl_ms=TASK_TTL_MS, poll_ms=poll_ms)
        return self.describe(job, task_id, detailed=False)

    async def _tasks_update(self, call: Call) -> dict[str, Any]:
        job, _task_id = find_task_job(self.core.state, call.params, "task_ext")
        responses = call.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "inputResponses must be an object")
        key = job.extra.get("input_key")
        if job.status == "input_required" and key in responses:
            self.core.provide_answer(job.key, responses[key])
        return {"resultType": "complete"}  # answers nobody waits for are ignored, as the extension allows
