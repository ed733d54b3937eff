"""A server's log level on the wire: given to each new session with logging/setLevel, and
changed on the live one without a new connection; what a server sends below it is not
kept. (End to end against real servers: tests/interop/test_cli_logs.py.)"""

from __future__ import annotations

import dataclasses

import pytest

from hostapp.engine import supervisor
from hostapp.engine.server_logs import ServerLogs, below_level, log_entry
from hostapp.engine.service import Engine
from hostapp.protocol.jsonrpc import Notification
from hostapp.store.journal import ServerConfig
from hostapp.store.secrets import InMemoryKeyring, SecretStore
from tests.support.memory_transport import FakeServer
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(30)


async def test_the_level_is_set_in_each_session_and_changed_on_the_live_one(tmp_path, monkeypatch):
    server = FakeServer()
    server.capabilities = {"logging": {}}
    server.methods["logging/setLevel"] = lambda params: {}
    monkeypatch.setattr(supervisor, "make_transport", server.transport_factory)
    engine = Engine(tmp_path, secrets=SecretStore(tmp_path, InMemoryKeyring()))
    await engine.start()
    try:
        cfg = ServerConfig(name="fake", transport="stdio", command="unused", log_level="warning")
        await engine.add_server(cfg)
        await engine.connected("fake")
        await until_async(lambda: server.calls_of("logging/setLevel"), what="the level to be set")
        await engine.update_server(dataclasses.replace(cfg, log_level="debug"))
        await until_async(lambda: len(server.calls_of("logging/setLevel")) == 2, what="the new level")
        assert [c["params"] for c in server.calls_of("logging/setLevel")] == [{"level": "warning"}, {"level": "debug"}]
        assert len(server.links) == 1  # the same connection

        await engine.update_server(dataclasses.replace(cfg, log_level="error"))
        await until_async(lambda: len(server.calls_of("logging/setLevel")) == 3, what="the third level")
        link = server.links[0]
        for level in ("info", "error", "alert"):
            link.to_client(Notification("notifications/message", {"level": level, "data": f"{level}!"}))
        await until_async(lambda: len(engine.context.server_logs.entries("fake")) == 2, what="the kept messages")
        assert [e["data"] for e in await engine.server_log("fake")] == ["error!", "alert!"]
    finally:
        await engine.stop()


def test_kept_messages_are_bounded_cut_and_ordered():
    logs = ServerLogs(kept=3)
    for i in range(5):
        logs.add("s", {"level": "info", "data": i}, float(i))
    assert [e["data"] for e in logs.entries("s")] == [2, 3, 4] and [e["data"] for e in logs.entries("s", 1)] == [4]
    big = log_entry({"level": "loud", "logger": 7, "data": "x" * 20_000}, 0.0)
    assert big["level"] == "info" and big["logger"] is None and big["data"].endswith("…(cut)")
    assert len(big["data"]) < 17_000
    assert below_level("debug", "info") and not below_level("error", "info") and not below_level("debug", None)
