"""A server built with the official `mcp` Python SDK that keeps its own record of the work
it does, run as a real process by the tests.

Usage: ``python sdk_work_server.py PORT RECORD_FILE``. Sessions live in the process's
memory, as the SDK keeps them: a restarted server answers 404 to the old session id. Tool
``work(seconds, tag)`` reports progress every 0.1 s and appends one line per event to
RECORD_FILE: ``start TAG`` when its handler begins, ``end TAG`` when it returns and
``stopped TAG`` when the SDK cancelled it (a client's cancel, or the request's stream
closed in the 2026-07-28 era). Tool ``quiet_work(seconds, tag)`` does the same without
progress, so that its answer is plain JSON. The record is the server's word on what ran and what
stopped, read by the tests after the fact.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-work-peer")
RECORD = Path(sys.argv[2]) if len(sys.argv) > 2 else None


def note(line: str) -> None:
    if RECORD is not None:
        with RECORD.open("a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
async def work(seconds: float, tag: str, ctx: Context) -> str:
    """Work for ``seconds``, reporting progress; the record says it started and ended."""
    note(f"start {tag}")
    steps = max(1, int(seconds * 10))
    try:
        for i in range(1, steps + 1):
            await asyncio.sleep(seconds / steps)
            await ctx.report_progress(i, steps)
    except asyncio.CancelledError:
        note(f"stopped {tag}")
        raise
    note(f"end {tag}")
    return f"worked {seconds} s on {tag}"


@server.tool()
async def quiet_work(seconds: float, tag: str) -> str:
    """Work for ``seconds`` without a word on the way (at 2026-07-28 its answer is plain
    JSON: nothing opens a stream before the result); the record says it started and ended."""
    note(f"start {tag}")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        note(f"stopped {tag}")
        raise
    note(f"end {tag}")
    return f"worked quietly {seconds} s on {tag}"


def records(path: Path) -> list[str]:
    """The lines of a record file (none yet: an empty list)."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
