"""Resumable streams (draft): a request's stream gets an id the client can come back with.

``long_stream`` turns its request's stored stream into a *draft stream*: it announces
``notifications/stream/create`` with a stream id and a resume interval, then runs its job
(kind ``stream``) on that stream. A client that lost the connection asks
``stream/resume`` with the id (the lab copies what was not yet delivered onto the new
request's stream), or looks first with ``stream/poll`` / ``stream/poll/all``. The job ends
with the response, then ``notifications/stream/end``. A stream not touched for longer than
its resume interval is abandoned.
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

#: The resume interval announced for draft streams (seconds); ``max`` is also how long an
#: untouched stream is kept.
STREAM_RESUME_INTERVAL = {"min": 1, "max": 3600}


class Streams(LabMechanism):
    """Jobs of kind ``stream``: ``long_stream`` and the ``stream/*`` methods."""

    job_kinds = ("stream",)

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_stream": self._tool_long_stream}

    def methods(self) -> dict[str, MethodHandler]:
        return {"stream/resume": self._stream_resume, "stream/poll": self._stream_poll,
                "stream/poll/all": self._stream_poll_all}

    def job_completed(self, job: JobRow, result: dict[str, Any]) -> None:
        if not job.out_stream:
            return
        self.core.respond(job, result, close=False)
        stream_id = self._stream_handle_from_log(job.out_stream)
        self.core.emit(job.out_stream, {"jsonrpc": "2.0", "method": "notifications/stream/end",
                                        "params": {"streamId": stream_id}}, close=True)

    def _stream_handle_from_log(self, stream: str) -> str | None:
        for _seq, message in self.core.state.messages_after(stream, 0):
            if message.get("method") == "notifications/stream/create":
                stream_id: str = message["params"]["stream"]["streamId"]
                return stream_id
        return None

    async def _tool_long_stream(self, call: Call, args: dict[str, Any]) -> Any:
        stream_id = new_handle()
        self.core.state.adopt_stream(call.stream, "draft", stream_id, STREAM_RESUME_INTERVAL["max"])
        # ``min`` at the lab's time scale; ``max`` (how long an untouched stream is kept) is
        # a retention, not a wait, and stays.
        interval = {"min": self.core.scaled(STREAM_RESUME_INTERVAL["min"]), "max": STREAM_RESUME_INTERVAL["max"]}
        self.core.emit(call.stream, {"jsonrpc": "2.0", "method": "notifications/stream/create", "params": {
            "stream": {"streamId": stream_id, "resumeInterval": interval}}})
        self.core.new_job(call, "long_stream", args, "stream", uuid.uuid4().hex, out_stream=call.stream,
                          notify_stream=call.stream, extra={"stateless": call.era == STATELESS})
        return DEFERRED

    def _draft_stream(self, params: dict[str, Any]) -> sqlite3.Row:
        stream_id = params.get("streamId")
        row = self.core.state.stream_by_handle(stream_id) if isinstance(stream_id, str) else None
        if row is None or row["kind"] != "draft":
            raise RpcError(INVALID_PARAMS, "unknown or abandoned stream")
        if row["max_idle"] is not None and not row["closed"] and time.time() > row["touched_at"] + row["max_idle"]:
            raise RpcError(INVALID_PARAMS, "stream abandoned")
        self.core.state.touch_stream(row["id"])
        return row

    def _poll_row(self, row: sqlite3.Row, stream_id: str) -> dict[str, Any]:
        current: Any = self.core.state.stream(row["id"])
        return {"streamId": stream_id, "status": "completed" if current["closed"] else "live",
                **self.core.state.pending_summary(current["id"], current["delivered_seq"])}

    async def _stream_poll(self, call: Call) -> dict[str, Any]:
        row = self._draft_stream(call.params)
        return self._poll_row(row, call.params["streamId"])

    async def _stream_poll_all(self, call: Call) -> dict[str, Any]:
        streams = []
        for row in self.core.state.streams_with_handles(call.session_key):
            if row["kind"] != "draft":
                continue
            # The stream's own first message names it; the lab keeps no other copy of the id.
            for _seq, message in self.core.state.messages_after(row["id"], 0)[:1]:
                stream_id = message.get("params", {}).get("stream", {}).get("streamId")
                if stream_id:
                    streams.append(self._poll_row(row, stream_id))
        return {"streams": streams}

    async def _stream_resume(self, call: Call) -> dict[str, Any]:
        row = self._draft_stream(call.params)
        await self.core.copy_pending(call, row["id"])
        return {}
