"""Resume tokens: long work answered in slices, each with ``_meta.nextResumeToken``.

``long_resume_token`` starts a job (kind ``resume_token``) and answers after a slice of
time: with the partial progress and a resume token while the work goes on, or with the
outcome once it is done. The client sends the same call again with the token in
``_meta.resumeToken`` (and the same arguments) to get the next slice; progress of a slice
goes to the request listening now. A token is good until its outcome was delivered.

A slice is answered by the request's coroutine. If the lab restarts during the first
slice, before any token was handed out, the client can only come back by replaying that
request's stream (SSE, ``Last-Event-ID``): the restarted lab answers it with the outcome
once the work is done (:meth:`ResumeTokens.job_resumed`), so the call is not lost.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

from hostapp.lab.call import Call
from hostapp.lab.mechanisms.base import LabHost, LabMechanism, ToolHandler
from hostapp.lab.state import JobRow, handle_key, new_handle
from hostapp.protocol.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RpcError


class ResumeTokens(LabMechanism):
    """Jobs of kind ``resume_token``: ``long_resume_token``, one slice per request."""

    job_kinds = ("resume_token",)

    def __init__(self, core: LabHost) -> None:
        super().__init__(core)
        self._answering: set[asyncio.Task[None]] = set()

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_resume_token": self._tool_long_resume_token}

    async def _tool_long_resume_token(self, call: Call, args: dict[str, Any]) -> Any:
        state = self.core.state
        digest = hashlib.sha256(json.dumps(args, sort_keys=True).encode()).hexdigest()
        token = call.meta.get("resumeToken")
        if token is None:
            token = new_handle()
            job = self.core.new_job(call, "long_resume_token", args, "resume_token", handle_key(token),
                                    out_stream=None, notify_stream=call.stream, extra={"params": digest})
        else:
            found = state.job(handle_key(token)) if isinstance(token, str) else None
            if found is None or found.mechanism != "resume_token" or found.extra.get("delivered"):
                raise RpcError(INVALID_PARAMS, "invalid or expired resume token")
            if found.extra.get("params") != digest:
                raise RpcError(INVALID_PARAMS, "resumed request does not match the original parameters")
            job = found
            # progress of this slice goes to the request that is listening now
            state.update_job(job.key, notify_stream=call.stream, progress_token=call.progress_token)
        slice_seconds = min(self.core.scaled(10.0), max(self.core.scaled(0.5), job.seconds / 4))
        try:
            job = await asyncio.wait_for(self.core.wait_job(job.key), slice_seconds)
        except TimeoutError:
            job = state.job(job.key)  # type: ignore[assignment]
        if job.status == "working":
            # This request's stream ends with the partial answer; progress waits for the next resume.
            state.update_job(job.key, notify_stream=None, extra={**job.extra, "token_given": True})
            return {"content": [{"type": "text", "text": f"{job.step_done}/{job.steps} steps done"}],
                    "structuredContent": {"progress": job.step_done, "total": job.steps},
                    "_meta": {"nextResumeToken": token}}
        return self._outcome(job)

    def _outcome(self, job: JobRow) -> dict[str, Any]:
        """The ended job's outcome, delivered now (its token expires)."""
        self.core.state.update_job(job.key, extra={**job.extra, "delivered": True})
        if job.status == "completed":
            return job.result
        error = job.error or {"code": INTERNAL_ERROR, "message": job.status}
        raise RpcError(error["code"], error["message"])

    def job_resumed(self, job: JobRow) -> str | None:
        """The lab restarted during the first slice: answer that request's stream with the
        outcome once the work is done (no token was handed out to come back with)."""
        stream = self.core.state.stream(job.notify_stream) if job.notify_stream else None
        if job.extra.get("token_given") or job.extra.get("delivered") or stream is None \
                or stream["closed"] or stream["kind"] != "request":
            return None
        self._answering.add(asyncio.create_task(self._answer_first_slice(job)))
        return job.notify_stream

    async def _answer_first_slice(self, job: JobRow) -> None:
        ended = await self.core.wait_job(job.key)
        try:
            response: dict[str, Any] = {"jsonrpc": "2.0", "id": job.request_id, "result": self._outcome(ended)}
        except RpcError as err:
            response = {"jsonrpc": "2.0", "id": job.request_id, "error": err.to_error().to_obj()}
        self.core.emit(job.notify_stream, response, close=True)
