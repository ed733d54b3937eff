"""A result nested hundreds of levels deep (valid JSON, from a real stdio server:
tests/support/hostile_server.py) is cut at intake, visibly, and never poisons the home:
the agent answers every client afterwards, across a restart."""

from __future__ import annotations

import asyncio
import json

import pytest

from hostapp.engine import api
from hostapp.protocol.jsonrpc import CUT_MARKER, MAX_DEPTH
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect
from tests.support.hostile_server import stdio_command

pytestmark = pytest.mark.timeout(180)


def _depth(value: object) -> int:
    depth = 0
    while isinstance(value, dict) and "a" in value:
        value, depth = value["a"], depth + 1
    return depth


async def test_a_deeply_nested_result_is_cut_visibly_and_the_home_stays_usable(agents: Agents):
    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        added = agents.run("servers", "add", "hostile", "--", *stdio_command())
        assert added.returncode == 0, added.stderr
        op = await engine.start_call("hostile", "nested_result", {"depth": 500})
        done = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert done.status == api.OperationStatus.COMPLETED
        structured = done.result["structuredContent"]
        assert MAX_DEPTH - 5 <= _depth(structured) < MAX_DEPTH
        assert CUT_MARKER in json.dumps(done.result)
        assert done.result["content"] == [{"type": "text", "text": "nested"}]
    finally:
        await engine.close()

    for _ in range(2):  # the running agent, then a new one reading the same journal
        listed = agents.run("ops", "--json", timeout=60)
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert row["status"] == "completed"
        servers = agents.run("servers", "list", "--json", timeout=60)
        assert servers.returncode == 0 and json.loads(servers.stdout)[0]["name"] == "hostile"
        assert agents.run("agent", "stop").returncode == 0
        agents.start("--idle-exit", "600")


async def test_a_journal_that_kept_a_deep_result_before_the_cut_is_still_served(agents: Agents):
    """A home whose journal an earlier hostapp filled with a 500-level result: every client
    still gets its answers, the value cut where it crosses the wire."""
    import sqlite3

    from hostapp.store.paths import journal_path

    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        assert agents.run("servers", "add", "hostile", "--", *stdio_command()).returncode == 0
        op = await engine.start_call("hostile", "ok", {})
        assert (await asyncio.wait_for(engine.wait_finished(op.id), 60)).status == api.OperationStatus.COMPLETED
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0

    deep = '{"a":' * 500 + '"bottom"' + "}" * 500
    with sqlite3.connect(journal_path(agents.home)) as db:
        db.execute("UPDATE operations SET result = ? WHERE id = ?",
                   ('{"content":[],"structuredContent":' + deep + "}", op.id))
    db.close()

    agents.start("--idle-exit", "600")
    listed = agents.run("ops", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    assert [row["id"] for row in json.loads(listed.stdout)] == [op.id]
    engine = await _connect(agents.home)
    try:
        [view] = await asyncio.wait_for(engine.operations(), 60)
        assert CUT_MARKER in json.dumps(view.result) and _depth(view.result["structuredContent"]) < 200
        assert (await asyncio.wait_for(engine.servers(), 60))[0].name == "hostile"
    finally:
        await engine.close()
