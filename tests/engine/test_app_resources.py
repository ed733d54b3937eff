"""MCP Apps on the engine's side, against real servers over stdio: the npm example
server-system-monitor (its view and its app-only polling tool) and a probe server of our
own (a model-only tool). Real keyring, real journal; the same through the agent's wire."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from hostapp.engine import api, apps
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from hostapp.protocol.apps import ViewResource, tool_ui
from hostapp.store.journal import ServerConfig
from tests.support.peers import NODE, PEERS

pytestmark = pytest.mark.timeout(60)

MONITOR = PEERS / "@modelcontextprotocol" / "server-system-monitor" / "dist" / "index.js"
MONITOR_VIEW = "ui://system-monitor/mcp-app.html"
PROBE = Path(__file__).parents[1] / "support" / "app_view_server.py"


def monitor_config() -> ServerConfig:
    if not MONITOR.exists():
        pytest.fail("server-system-monitor is missing: run npm install in tests/peers")
    return ServerConfig(name="monitor", transport="stdio", command=str(NODE), args=[str(MONITOR), "--stdio"])


def probe_config(tmp_path: Path) -> ServerConfig:
    return ServerConfig(name="probe", transport="stdio", command=sys.executable,
                        args=[str(PROBE), str(tmp_path / "report.jsonl"), "http://127.0.0.1:1", "http://127.0.0.1:2"])


async def started(home: Path, recorder, *configs: ServerConfig) -> Engine:
    engine = Engine(home, recorder)
    recorder.engine = engine
    await asyncio.wait_for(engine.start(), 10)
    for cfg in configs:
        await engine.add_server(cfg)
        await engine.connected(cfg.name, 30)
    return engine


async def test_the_view_of_a_tool_is_read_and_checked(isolated_home, recorder, real_keyring):
    engine = await started(isolated_home, recorder, monitor_config())
    facade = LocalEngine(engine)
    try:
        tools = {t["name"]: t for t in await facade.list_tools("monitor")}
        assert tool_ui(tools["get-system-info"]).resource_uri == MONITOR_VIEW
        assert tool_ui(tools["poll-system-stats"]).visibility == ("app",)
        view = ViewResource.from_json(await facade.read_app_view("monitor", MONITOR_VIEW))
        assert view.uri == MONITOR_VIEW and "<html" in view.html.lower()
        assert view.csp.network == ()  # nothing declared: no network for this view
        with pytest.raises(api.AppViewRefused, match="not a ui://"):
            await facade.read_app_view("monitor", "file:///etc/passwd")
        with pytest.raises(api.ServerError):
            await facade.read_app_view("monitor", "ui://system-monitor/none.html")
    finally:
        await engine.stop()


async def test_a_call_from_a_view_is_an_operation_of_its_own(isolated_home, recorder, real_keyring):
    engine = await started(isolated_home, recorder, monitor_config())
    facade = LocalEngine(engine)
    try:
        shown = await facade.start_call("monitor", "get-system-info", {})
        assert (await facade.wait_finished(shown.id)).status == api.COMPLETED
        polled = await facade.start_app_call("monitor", "poll-system-stats", {}, view_of=shown.id)
        assert polled.id != shown.id and polled.tool == "poll-system-stats"
        done = await asyncio.wait_for(facade.wait_finished(polled.id), 30)
        assert done.status == api.COMPLETED, done.error
        assert done.result and done.result.get("structuredContent", done.result.get("content"))
        await engine.journal.flush()
        origin = [e for e in await facade.events(polled.id) if e["kind"] == apps.ORIGIN_EVENT]
        assert origin and origin[0]["data"]["app_view_of"] == shown.id
        assert (polled.id, apps.ORIGIN_EVENT, origin[0]["data"]) in recorder.events
        # The view's operation lists the call in its own timeline: what a view shown again
        # is answered from.
        listed = [e["data"] for e in await facade.events(shown.id) if e["kind"] == apps.VIEW_CALL_EVENT]
        assert [(c["operation"], c["tool"], c["arguments"]) for c in listed] == [(polled.id, "poll-system-stats", {})]
        # Journaled with the operation whose view made it: folded under it, not at top level.
        assert polled.view_of == done.view_of == shown.id and shown.view_of is None
        assert engine.journal.get_operation(polled.id).view_of == shown.id
        assert [op.id for op in await facade.operations(view_of=shown.id)] == [polled.id]
        assert polled.id not in {op.id for op in await facade.operations(top_level=True)}
        assert shown.id in {op.id for op in await facade.operations(top_level=True)}
        assert (await facade.count_operations(top_level=True), await facade.count_operations(view_of=shown.id),
                await facade.count_operations()) == (1, 1, 2)
        # Counted on the view's own operation, and its row told so as each call is made.
        assert (await facade.operation(shown.id)).view_calls == 1
        assert recorder.latest[shown.id].view_calls == 1
        again = await facade.start_app_call("monitor", "poll-system-stats", {}, view_of=shown.id)
        await asyncio.wait_for(facade.wait_finished(again.id), 30)
        assert (await facade.operation(shown.id)).view_calls == 2 and again.view_calls == 0
        assert recorder.latest[shown.id].view_calls == 2
        with pytest.raises(api.AppViewRefused, match="no tool"):
            await facade.start_app_call("monitor", "rm-rf", {}, view_of=shown.id)
        with pytest.raises(api.NoSuchOperation):
            await facade.start_app_call("monitor", "poll-system-stats", {}, view_of="nope")
    finally:
        await engine.stop()


async def test_a_view_may_not_call_a_model_only_tool_nor_another_servers(isolated_home, recorder, real_keyring,
                                                                        tmp_path):
    engine = await started(isolated_home, recorder, monitor_config(), probe_config(tmp_path))
    facade = LocalEngine(engine)
    try:
        shown = await facade.start_call("probe", "show", {})
        await facade.wait_finished(shown.id)
        before = await facade.count_operations()
        with pytest.raises(api.AppViewRefused, match="does not let its views call"):
            await facade.start_app_call("probe", "secret", {}, view_of=shown.id)
        with pytest.raises(api.AppViewRefused, match="belongs to probe"):
            await facade.start_app_call("monitor", "poll-system-stats", {}, view_of=shown.id)
        assert await facade.count_operations() == before  # nothing journaled, nothing sent
        view = ViewResource.from_json(await facade.read_app_view("probe", "ui://probe/view.html"))
        assert view.csp.connect == ("http://127.0.0.1:1",)
        declared = json.loads((tmp_path / "report.jsonl.initialize.json").read_text())
        assert declared["extensions"]["io.modelcontextprotocol/ui"] == {"mimeTypes": ["text/html;profile=mcp-app"]}
        assert "elicitation" in declared  # beside what the mechanisms declare
    finally:
        await engine.stop()



async def test_a_view_that_floods_or_sends_huge_arguments_is_refused_after_its_consent(
        isolated_home, recorder, real_keyring, tmp_path):
    """One "Yes" is not a licence to fill the journal: a view's arguments are bounded, and so
    is its rate (a burst, then a steady pace); what is refused is neither journaled nor sent."""
    engine = await started(isolated_home, recorder, probe_config(tmp_path))
    now = [0.0]
    engine.view_call_budget = apps.ViewCallBudget(lambda: now[0])
    facade = LocalEngine(engine)
    report = tmp_path / "report.jsonl"
    try:
        shown = await facade.start_call("probe", "show", {})
        await facade.wait_finished(shown.id)
        before = await facade.count_operations()

        huge = {"note": "x" * (apps.MAX_VIEW_ARGUMENT_BYTES + 1)}
        with pytest.raises(api.AppViewRefused, match="at most 64 KiB"):
            await facade.start_app_call("probe", "report", huge, view_of=shown.id)
        assert await facade.count_operations() == before

        made = [await facade.start_app_call("probe", "report", {"n": n}, view_of=shown.id)
                for n in range(apps.VIEW_CALL_BURST)]
        with pytest.raises(api.AppViewRefused, match="too often"):
            await facade.start_app_call("probe", "report", {"n": "one too many"}, view_of=shown.id)
        now[0] += 1.0  # a second later: two more
        made += [await facade.start_app_call("probe", "report", {"n": n}, view_of=shown.id) for n in ("a", "b")]
        with pytest.raises(api.AppViewRefused, match="too often"):
            await facade.start_app_call("probe", "report", {"n": "again too many"}, view_of=shown.id)
        for op in made:
            await asyncio.wait_for(facade.wait_finished(op.id), 30)
        assert await facade.count_operations() == before + apps.VIEW_CALL_BURST + 2
        sent = report.read_text()
        assert "one too many" not in sent and "again too many" not in sent and "x" * 100 not in sent
    finally:
        await engine.stop()
