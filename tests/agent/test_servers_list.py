"""``hostapp servers list`` shows what the agent knows of each server: its state, and the
replies it sent to requests hostapp never sent (a real stdio server that answers under a
wrong id, tests/support/hostile_server.py), in text and in JSON; the wire carries the count."""

from __future__ import annotations

import asyncio
import json

import pytest

from hostapp.engine import api
from tests.agent.conftest import Agents
from tests.agent.test_owner import Seen, _connect
from tests.support.hostile_server import SECRET, TOOLS, stdio_command

pytestmark = pytest.mark.timeout(120)


async def test_servers_list_flags_a_server_that_answers_requests_nobody_sent(agents: Agents):
    agents.start("--idle-exit", "600")
    seen = Seen()
    engine = await _connect(agents.home, seen)
    try:
        added = agents.run("servers", "add", "hostile", "--", *stdio_command())
        assert added.returncode == 0, added.stderr
        [before] = json.loads(agents.run("servers", "list", "--json").stdout)
        assert before["stray_answers"] == 0

        op = await engine.start_call("hostile", "stray", {})
        done = await asyncio.wait_for(engine.wait_finished(op.id), 30)
        assert done.status == api.OperationStatus.COMPLETED
        [view] = await engine.servers()
        assert view.stray_answers == 1 and view.last_stray and SECRET not in view.last_stray
        assert any(s.stray_answers == 1 for s in seen.servers)  # told to the clients as it happened

        listed = agents.run("servers", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        [server] = json.loads(listed.stdout)
        assert server["name"] == "hostile" and server["state"] == "connected"
        assert server["stray_answers"] == 1 and SECRET not in listed.stdout
        text = agents.run("servers", "list").stdout
        assert "connected" in text and "1 reply to requests hostapp never sent" in text
        assert "calls may hang" in text
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0
    # Without an agent nothing is connected: the live columns say nothing rather than guess.
    [offline] = json.loads(agents.run("servers", "list", "--json").stdout)
    assert offline["state"] is None and offline["stray_answers"] is None
    assert "reply" not in agents.run("servers", "list").stdout


async def test_the_wire_carries_the_connection_check_and_stop_retrying(agents: Agents):
    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        command, *args = stdio_command()
        checked = await engine.check_server(api.ServerConfig(name="trial", transport="stdio", command=command,
                                                             args=args))
        assert checked["tools_count"] == len(TOOLS) and checked["server_name"] == "hostile"
        assert await engine.server_configs() == []  # checked, not saved
        with pytest.raises(api.ServerUnavailable):
            await engine.check_server(api.ServerConfig(name="gone", transport="stdio", command="/nonexistent/x"))

        await engine.add_server(api.ServerConfig(name="gone", transport="stdio", command="/nonexistent/x"))
        await engine.stop_retrying("gone")
        [view] = await engine.servers()
        assert view.state == api.ServerState.DISABLED
        with pytest.raises(api.NoSuchServer):
            await engine.stop_retrying("nobody")
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0
