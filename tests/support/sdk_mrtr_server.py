"""A server built with the official `mcp` Python SDK (2.x), run as a real process by the tests.

Its tool ``confirm_action`` asks the person a question. In the 2026-07-28 era it does so
by multi round-trip requests (it answers ``InputRequiredResult`` and reads the answer from
the retried request's ``inputResponses``); in the handshake era it sends
``elicitation/create`` mid-call. Usage: ``python sdk_mrtr_server.py PORT [STATE_KEY]``.

The SDK seals ``requestState`` under a key held only by the process, so a restarted
server rejects the state it issued before; with STATE_KEY (what a deployment of several
processes shares) a restarted one accepts it.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp_types import CallToolResult, ElicitRequest, ElicitRequestFormParams, InputRequiredResult, TextContent
from pydantic import BaseModel

server = MCPServer("sdk-mrtr-peer", request_state_security=RequestStateSecurity(keys=[sys.argv[2]])
                   if len(sys.argv) > 2 else None)

SCHEMA = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "title": "Go ahead?", "default": False},
                   "note": {"type": "string", "title": "Note"}},
    "required": ["confirm"],
}


class Confirmation(BaseModel):
    confirm: bool = False
    note: str | None = None


@server.tool()
async def confirm_action(action: str, ctx: Context) -> CallToolResult | InputRequiredResult:
    """Ask the person to confirm an action, then report the answer."""
    message = f"Really {action}?"
    if ctx.protocol_version == "2026-07-28":
        responses = ctx.input_responses or {}
        answer = responses.get("confirm")
        if answer is None:
            return InputRequiredResult(
                input_requests={"confirm": ElicitRequest(params=ElicitRequestFormParams(
                    message=message, requested_schema=SCHEMA))},
                request_state=f"asked:{action}")
        data = answer.model_dump(by_alias=True, exclude_none=True) if hasattr(answer, "model_dump") else dict(answer)
        state = ctx.request_state
    else:
        result = await ctx.elicit(message, Confirmation)
        content = result.data.model_dump() if getattr(result, "data", None) is not None else None
        data = {"action": result.action, "content": content}
        state = None
    text = f"{action}: {data.get('action')} {data.get('content') or {}} state={state}"
    return CallToolResult(content=[TextContent(text=text)])


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
