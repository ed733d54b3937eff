"""The host's half of a view's protocol (hostapp/ui/apps/bridge.py, no Qt) against a real
engine and the lab: what a view sends is checked, its calls are operations, and one view
cannot flood the journal with calls."""

from __future__ import annotations

import asyncio
import json

import pytest

from hostapp.engine import api
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from hostapp.protocol.apps import PROTOCOL_VERSION, ViewResource
from hostapp.store.journal import ServerConfig
from hostapp.ui.apps.bridge import MAX_CALLS_IN_FLIGHT, NOT_ALLOWED, AppBridge, ConsentBook
from tests.support.faults import LabProcess
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(90)


class NoListener:
    def operation_changed(self, op): ...
    def operation_event(self, op_id, kind, data): ...
    def server_changed(self, server): ...
    def input_requested(self, request): ...
    def input_withdrawn(self, request_id): ...
    def server_removed(self, name): ...
    def problem(self, kind, message): ...


@pytest.fixture
def lab(tmp_path):
    proc = LabProcess(tmp_path / "lab.sqlite3").start()
    yield proc
    proc.stop()


async def refuse(*_args) -> bool:
    raise AssertionError("nobody should be asked")


def request(rid, method, params) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})


async def test_a_view_is_answered_and_held_to_its_limits(isolated_home, lab):
    engine = Engine(isolated_home, NoListener())
    await asyncio.wait_for(engine.start(), 10)
    facade = LocalEngine(engine)
    try:
        await facade.add_server(ServerConfig(name="lab", transport="http", url=lab.url))
        await facade.wait_connected("lab", 30)
        started = await facade.start_call("lab", "sleep_with_progress", {"seconds": 0.1, "steps": 1})
        shown = await facade.wait_finished(started.id)
        assert shown.result is not None
        sent: list[dict] = []
        consent = ConsentBook(refuse)
        consent.grant("lab", "sleep_with_progress")
        bridge = AppBridge(facade, shown, None, ViewResource("ui://lab/v.html", "<html></html>"),
                           sent.append, consent=consent, open_link=refuse, resized=lambda _h: None)
        bridge.receive(request(1, "ui/initialize", {"protocolVersion": PROTOCOL_VERSION, "appInfo": {},
                                                    "appCapabilities": {}}))
        bridge.receive(json.dumps({"jsonrpc": "2.0", "method": "ui/notifications/initialized"}))
        bridge.receive(request(2, "resources/read", {"uri": "file:///etc/passwd"}))
        for rid in range(10, 11 + MAX_CALLS_IN_FLIGHT):
            bridge.receive(request(rid, "tools/call", {"name": "sleep_with_progress",
                                                       "arguments": {"seconds": 2, "steps": 2}}))

        def answer(rid):
            return next((m for m in sent if m.get("id") == rid), None)

        # every call answered (they end in any order), the one past the limit refused at once
        await until_async(lambda: all(answer(rid) is not None for rid in range(10, 11 + MAX_CALLS_IN_FLIGHT)),
                          what=f"an answer to each call; sent={sent}")
        assert answer(1)["result"]["hostInfo"]["name"] == "hostapp"
        assert answer(2)["error"]["code"] == -32601  # resources/read is not for views
        methods = [m.get("method") for m in sent]
        assert methods.index("ui/notifications/tool-input") < methods.index("ui/notifications/tool-result")
        assert sent[methods.index("ui/notifications/tool-result")]["params"] == shown.result
        refused = answer(10 + MAX_CALLS_IN_FLIGHT)
        assert refused["error"]["code"] == NOT_ALLOWED and "in flight" in refused["error"]["message"]
        assert len(bridge.calls) == MAX_CALLS_IN_FLIGHT
        for rid in range(10, 10 + MAX_CALLS_IN_FLIGHT):
            assert answer(rid)["result"].get("isError") is not True, answer(rid)
        finals = [await facade.operation(op_id) for op_id in bridge.calls]
        assert {op.status for op in finals} == {api.COMPLETED}
        await bridge.teardown(timeout=0.2)
        assert bridge.closed and sent[-1]["method"] == "ui/resource-teardown"
    finally:
        await engine.stop()
