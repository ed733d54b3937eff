"""MCP Apps over the agent's wire: a client of the owner reads a tool's view and starts a
view's call; a refusal crosses the wire as the facade's own exception."""

from __future__ import annotations

import asyncio
import json
import sys

from hostapp.engine import api
from hostapp.protocol.apps import ViewResource
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect
from tests.engine.test_app_resources import PROBE


async def test_a_client_of_the_owner_reads_a_view_and_starts_its_calls(agents: Agents, tmp_path):
    agents.start("--idle-exit", "600")
    client = await _connect(agents.home)
    report = tmp_path / "report.jsonl"
    try:
        await client.add_server(api.ServerConfig(
            name="probe", transport="stdio", command=sys.executable,
            args=[str(PROBE), str(report), "http://127.0.0.1:1", "http://127.0.0.1:2"]))
        await client.wait_connected("probe", timeout=60)
        shown = await asyncio.wait_for(client.wait_finished((await client.start_call("probe", "show", {})).id), 60)
        view = ViewResource.from_json(await client.read_app_view("probe", "ui://probe/view.html"))
        assert "Probe view" in view.html and view.csp.connect == ("http://127.0.0.1:1",)
        call = await client.start_app_call("probe", "report", {"from": "the wire"}, shown.id)
        done = await asyncio.wait_for(client.wait_finished(call.id), 60)
        assert done.status == api.OperationStatus.COMPLETED
        assert json.loads(report.read_text()) == {"from": "the wire"}
        # Over the wire too: the call names its view's operation, and the list filters by it.
        assert call.view_of == done.view_of == shown.id
        assert [op.id for op in await client.operations(view_of=shown.id)] == [call.id]
        assert [op.id for op in await client.operations(top_level=True)] == [shown.id]
        assert await client.count_operations(top_level=True) == 1
        assert await client.count_operations(view_of=shown.id) == 1
        try:
            await client.start_app_call("probe", "secret", {}, shown.id)
        except api.AppViewRefused as exc:
            assert "does not let its views call" in str(exc)
        else:
            raise AssertionError("a model-only tool was called for a view")
    finally:
        await client.close()
    assert agents.run("agent", "stop").returncode == 0
