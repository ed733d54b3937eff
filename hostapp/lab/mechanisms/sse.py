"""Plain calls answered on a resumable SSE stream (Streamable HTTP, ``Last-Event-ID``).

``sleep_with_progress`` and ``long_sse`` start a job (kind ``call``) whose progress and
final response go into the request's stored stream. A client that lost the connection
replays that stream with ``Last-Event-ID`` (:mod:`hostapp.lab.http` serves the replay from
the core's stored streams), also after a lab restart. In the stateless era the call lives
only as long as its response stream: closing it cancels the job, and a restarted lab
abandons it (``ephemeral``).
"""

from __future__ import annotations

import uuid
from typing import Any

from hostapp.lab.call import DEFERRED, Call
from hostapp.lab.mechanisms.base import LabMechanism, ToolHandler
from hostapp.lab.state import JobRow
from hostapp.protocol.eras import STATELESS


class SseCalls(LabMechanism):
    """Jobs of kind ``call``: the answer is written onto the request's own stream."""

    job_kinds = ("call",)

    def tools(self) -> dict[str, ToolHandler]:
        return {"sleep_with_progress": self._tool_plain_job, "long_sse": self._tool_plain_job}

    async def _tool_plain_job(self, call: Call, args: dict[str, Any]) -> Any:
        name = call.params["name"]
        self.core.new_job(call, name, args, "call", uuid.uuid4().hex, out_stream=call.stream,
                          notify_stream=call.stream,
                          extra={"ephemeral": call.era == STATELESS, "stateless": call.era == STATELESS})
        return DEFERRED

    def job_completed(self, job: JobRow, result: dict[str, Any]) -> None:
        if job.out_stream:
            self.core.respond(job, result)
