"""Asynchronous tool calls (SEP-1391): the client names the operation, then polls it.

``long_async`` is called with ``operation.token`` (chosen by the client) and answers at
once with the operation's ``keepAlive`` and ``pollFrequency`` (job kind ``async``). The
client polls ``tools/async/status`` and fetches ``tools/async/result`` with the token; an
ended operation is kept ``keepAlive`` seconds. ``notifications/cancelled`` naming the
original request cancels the operation, even after the call was answered.
"""

from __future__ import annotations

import json
import time
from typing import Any

from hostapp.lab import tools as catalogue
from hostapp.lab.call import Call, RequestKey
from hostapp.lab.mechanisms.base import LabHost, LabMechanism, MethodHandler, ToolHandler
from hostapp.lab.state import JobRow, handle_key
from hostapp.protocol.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, RpcError

#: How long an ended operation is kept when the client names no keepAlive (seconds).
DEFAULT_KEEP_ALIVE = 3600


class AsyncTools(LabMechanism):
    """Jobs of kind ``async``. State: the operation started by each request, for cancelling."""

    job_kinds = ("async",)

    def __init__(self, core: LabHost) -> None:
        super().__init__(core)
        self._by_request: dict[RequestKey, str] = {}

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_async": self._tool_long_async}

    def methods(self) -> dict[str, MethodHandler]:
        return {"tools/async/status": self._async_status, "tools/async/result": self._async_result}

    def request_cancelled(self, request_key: RequestKey) -> None:
        key = self._by_request.pop(request_key, None)
        if key is not None:
            job = self.core.state.job(key)
            if job is not None and job.status in ("working", "input_required"):
                self.core.stop_job(key, "cancelled", "cancelled by the client")

    async def _tool_long_async(self, call: Call, args: dict[str, Any]) -> Any:
        operation = call.params.get("operation")
        token = operation.get("token") if isinstance(operation, dict) else None
        if not isinstance(token, str) or not token:
            raise RpcError(INVALID_REQUEST, "long_async is an async tool: send operation.token")
        key = handle_key(token)
        if self.core.state.has_job(key):
            raise RpcError(INVALID_PARAMS, "operation token already used")
        keep_alive = operation.get("keepAlive", DEFAULT_KEEP_ALIVE)  # type: ignore[union-attr]
        if keep_alive is not None and (not isinstance(keep_alive, (int, float)) or keep_alive < 0):
            raise RpcError(INVALID_PARAMS, "operation.keepAlive must be a non-negative number or null")
        poll = max(0.1, min(1.0, catalogue.duration(args)[0] / 10))
        # SEP-1391: notifications/cancelled for the original request id cancels the operation,
        # even after the call was answered.
        self._by_request[(call.session_key, json.dumps(call.request_id))] = key
        self.core.new_job(call, "long_async", args, "async", key, out_stream=None,
                          notify_stream=call.session_stream, extra={"keepAlive": keep_alive, "pollFrequency": poll})
        return {"content": [{"type": "text", "text": "long_async started; poll tools/async/status"}],
                "operation": {"keepAlive": keep_alive, "pollFrequency": poll, "status": "working"}}

    def _async_job(self, params: dict[str, Any]) -> JobRow:
        token = params.get("token")
        job = self.core.state.job(handle_key(token)) if isinstance(token, str) else None
        if job is None or job.mechanism != "async":
            raise RpcError(INVALID_PARAMS, "Failed to retrieve operation: Operation not found")
        keep_alive = job.extra.get("keepAlive")
        if job.status in ("completed", "failed") and keep_alive is not None \
                and time.time() > job.updated_at + keep_alive:
            raise RpcError(INVALID_PARAMS, "Failed to retrieve operation: Operation has expired")
        return job

    async def _async_status(self, call: Call) -> dict[str, Any]:
        job = self._async_job(call.params)
        status = {"cancelled": "canceled"}.get(job.status, job.status)
        result: dict[str, Any] = {"status": status}
        if job.status == "failed" and job.error:
            result["error"] = job.error.get("message", "failed")
        return result

    async def _async_result(self, call: Call) -> dict[str, Any]:
        job = self._async_job(call.params)
        if job.status != "completed":
            raise RpcError(INVALID_PARAMS, f"operation is {job.status}, not completed")
        return {"result": job.result}
