"""A server built with the official `mcp` Python SDK that uses the client half of MCP:
it asks the client for its roots, run as a real process by the tests.

Usage: ``python sdk_client_features_server.py [PORT]``: Streamable HTTP on PORT, stdio
without one. Tool ``client_roots`` asks the client for its roots and returns each as
``NAME <URI>``, one a line: in the handshake era with a ``roots/list`` request mid-call
(the SDK's ``list_roots``), in the 2026-07-28 era with a ``roots/list`` input request
(multi round-trip), read from the retried call's ``inputResponses``.

Resources: ``text://hostile`` is text a terminal or a rich-text widget would act on
(:data:`HOSTILE_TEXT`: HTML, ANSI colour, an OSC 8 link, a carriage return), and
``bin://bytes`` is every byte value once (:data:`BINARY`), served as a blob. Tool
``log_each_level`` logs one message at each MCP level (the SDK sends those the client's
level allows: ``logging/setLevel``, or the request's ``_meta`` in the 2026-07-28 era).
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, ListRootsRequest, TextContent

server = MCPServer("sdk-client-features-peer")

HOSTILE_TEXT = ("<b>bold</b> <script>alert(1)</script> <a href='http://evil.example'>link</a>\n"
                "\x1b[31mred\x1b[0m \x1b]8;;http://evil.example\x07osc8\x1b]8;;\x07 over\rwritten\n")
BINARY = bytes(range(256))


@server.resource("text://hostile", name="hostile", mime_type="text/html")
def hostile() -> str:
    return HOSTILE_TEXT


@server.resource("bin://bytes", name="bytes", mime_type="application/octet-stream")
def every_byte() -> bytes:
    return BINARY


def _lines(roots: list[Any]) -> str:
    def field(root: Any, name: str) -> Any:
        return root.get(name) if isinstance(root, dict) else getattr(root, name, None)

    return "\n".join(f"{field(r, 'name')} <{field(r, 'uri')}>" for r in roots) or "no roots"


@server.tool()
async def client_roots(ctx: Context) -> CallToolResult | InputRequiredResult:
    """The roots the client gives, asked now."""
    if ctx.protocol_version == "2026-07-28":
        answer = (ctx.input_responses or {}).get("roots")
        if answer is None:
            return InputRequiredResult(input_requests={"roots": ListRootsRequest()})
        roots = answer.get("roots", []) if isinstance(answer, dict) else answer.roots
        text = "stateless: " + _lines(roots)
    else:
        text = "handshake: " + _lines((await ctx.session.list_roots()).roots)
    return CallToolResult(content=[TextContent(text=text)])


@server.tool()
async def log_each_level(ctx: Context) -> str:
    """Log one message at each level, least severe first."""
    for level in ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"):
        await ctx.log(level, f"a {level} message", logger_name="levels")
    return "logged"


if __name__ == "__main__":
    if len(sys.argv) > 1:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
    else:
        server.run("stdio")
