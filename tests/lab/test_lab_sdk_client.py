"""The official MCP Python SDK client (a real peer) against the lab, in both eras."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_types import ElicitResult


async def answer_form(_context, params):
    return ElicitResult(action="accept", content={"name": "Ada", "email": "ada@example.org"})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_lists_calls_with_progress_and_answers_a_form(lab, mode):
    progress = []

    async def on_progress(value, total, message):
        progress.append(value)

    async with Client(lab.url, mode=mode, elicitation_callback=answer_form) as client:
        tools = await client.list_tools()
        assert "long_async" in {t.name for t in tools.tools}
        slept = await client.call_tool("sleep_with_progress", {"seconds": 0.2, "steps": 2},
                                       progress_callback=on_progress)
        assert slept.structured_content["steps"] == 2
        assert progress == [1, 2]
        asked = await client.call_tool("ask_form", {})
        assert asked.structured_content["content"]["name"] == "Ada"
