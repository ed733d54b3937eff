"""fastmcp with the tasks extension (fastmcp-tasks) as a Streamable HTTP peer for the fault tests.

Run as a process: ``python tests/faults/fastmcp_tasks_server.py PORT COUNT_FILE``. Endpoint
``/mcp``. Tool ``slow_count(seconds, steps)`` requires a task (SEP-2663) and appends one
line to COUNT_FILE each time its work really starts, so a test can count executions on
the server side. Tool ``crunch(steps)`` (a task too) reports each step only as its
progress message, "crunch i/steps", which fastmcp shows as the task's ``statusMessage``.
Tasks live in the ``memory://`` Docket backend: a restarted server has forgotten them.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path

from fastmcp import Context, FastMCP
from fastmcp.utilities.tasks import TaskConfig
from fastmcp_tasks import TasksExtension


def build(count_file: Path) -> FastMCP:
    server = FastMCP("fault-tests-fastmcp")
    server.add_extension(TasksExtension())

    @server.tool(task=TaskConfig(mode="required", poll_interval=timedelta(milliseconds=300)))
    async def slow_count(seconds: float = 4.0, steps: int = 8) -> str:
        """Count to ``steps`` over ``seconds``, as a background task."""
        with count_file.open("a") as f:
            f.write("started\n")
        for _ in range(steps):
            await asyncio.sleep(seconds / steps)
        return f"counted to {steps}"

    @server.tool(task=TaskConfig(mode="required", poll_interval=timedelta(milliseconds=100)))
    async def crunch(ctx: Context, steps: int = 4) -> str:
        """Crunch ``steps`` steps, telling how far it got in the task's status message."""
        for i in range(1, steps + 1):
            await asyncio.sleep(0.4)
            await ctx.report_progress(i, steps, f"crunch {i}/{steps}")
        await asyncio.sleep(0.4)
        return f"crunched {steps}"

    return server


if __name__ == "__main__":
    port, count_file = int(sys.argv[1]), Path(sys.argv[2])
    build(count_file).run(transport="http", host="127.0.0.1", port=port, path="/mcp", show_banner=False)
