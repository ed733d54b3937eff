"""Resumable requests (SEP-975, draft): the same request id, asked again, picks up the answer.

When the client has the ``resumableRequests`` capability, ``long_resumable`` announces
``notifications/requests/resumePolicy`` with a resume token and ``maxWait``, and runs its
job (kind ``resumable``) on the request's stored stream. After a break the client asks
``requests/getStatus`` with the token and the request id, then sends
``requests/resume`` with the original request's id: the lab copies what was not yet
delivered, up to and including the response. Without the capability the tool is a plain
call (job kind ``call``, :mod:`hostapp.lab.mechanisms.sse`).
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from typing import Any

from hostapp.lab.call import DEFERRED, Call
from hostapp.lab.mechanisms.base import LabMechanism, MethodHandler, ToolHandler
from hostapp.lab.state import JobRow, new_handle
from hostapp.protocol.eras import STATELESS
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

#: The ``maxWait`` announced in the resume policy (seconds), also how long an untouched
#: request is kept.
RESUMABLE_MAX_WAIT = 3600


def wants_resumable(call: Call) -> bool:
    """Whether the client declared ``resumableRequests`` (top-level or under experimental)."""
    caps = call.capabilities
    return "resumableRequests" in caps or "resumableRequests" in (caps.get("experimental") or {})


class ResumableRequests(LabMechanism):
    """Jobs of kind ``resumable``: ``long_resumable``, ``requests/getStatus``, ``requests/resume``."""

    job_kinds = ("resumable",)

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_resumable": self._tool_long_resumable}

    def methods(self) -> dict[str, MethodHandler]:
        return {"requests/getStatus": self._requests_get_status, "requests/resume": self._requests_resume}

    def job_completed(self, job: JobRow, result: dict[str, Any]) -> None:
        if job.out_stream:
            self.core.respond(job, result)

    async def _tool_long_resumable(self, call: Call, args: dict[str, Any]) -> Any:
        if wants_resumable(call):
            token = new_handle()
            self.core.state.adopt_stream(call.stream, "resumable", token, RESUMABLE_MAX_WAIT)
            self.core.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/requests/resumePolicy",
                                         "params": {"requestId": call.request_id, "resumeToken": token,
                                                    "maxWait": RESUMABLE_MAX_WAIT}})
            mechanism = "resumable"
        else:
            mechanism = "call"
        self.core.new_job(call, "long_resumable", args, mechanism, uuid.uuid4().hex, out_stream=call.stream,
                          notify_stream=call.stream,
                          extra={"ephemeral": call.era == STATELESS and mechanism == "call",
                                 "stateless": call.era == STATELESS})
        return DEFERRED

    def _resumable_stream(self, params: dict[str, Any]) -> tuple[sqlite3.Row, JobRow]:
        state = self.core.state
        token = params.get("resumeToken")
        row = state.stream_by_handle(token) if isinstance(token, str) else None
        if row is None or row["kind"] != "resumable":
            raise RpcError(INVALID_PARAMS, "invalid or expired resumeToken")
        if not row["closed"] and row["max_idle"] is not None and time.time() > row["touched_at"] + row["max_idle"]:
            raise RpcError(INVALID_PARAMS, "resumeToken expired")
        jobs = [j for j in state.jobs(mechanism="resumable") if j.out_stream == row["id"]]
        if not jobs:
            raise RpcError(INVALID_PARAMS, "invalid or expired resumeToken")
        state.touch_stream(row["id"])
        return row, jobs[0]

    async def _requests_get_status(self, call: Call) -> dict[str, Any]:
        row, job = self._resumable_stream(call.params)
        if call.params.get("requestId") != job.request_id:
            raise RpcError(INVALID_PARAMS, "requestId does not match the resumeToken")
        current: Any = self.core.state.stream(row["id"])
        summary = self.core.state.pending_summary(current["id"], current["delivered_seq"])
        status = "processing" if job.status == "working" else ("completed" if job.status == "completed" else "failed")
        return {"status": status, "hasPendingMessages": summary["pendingMessages"],
                "hasInputRequest": summary["hasRequest"]}

    async def _requests_resume(self, call: Call) -> Any:
        row, job = self._resumable_stream(call.params)
        if call.request_id != job.request_id:
            raise RpcError(INVALID_PARAMS, "requests/resume must reuse the original request's id")
        if await self.core.copy_pending(call, row["id"], stop_at_response_for=job.request_id):
            return DEFERRED
        raise RpcError(INVALID_PARAMS, "the request's response was already delivered")
