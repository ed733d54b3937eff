"""The lab's resource that changes (lab://status): listed and read in both eras, and in
the handshake era subscribed to, with its updates on the session's stream (HTTP and stdio)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hostapp.lab.status import STATUS_URI
from tests.support.faults import LabProcess

from .conftest import Exchange, McpClient, read_sse, wait_until
from .test_lab_stdio import StdioPeer

#: A tick every 5 s of the lab's clock is one every 0.1 s here.
SCALE = "0.02"


@pytest.fixture(scope="module")
def shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabProcess]:
    lab = LabProcess(tmp_path_factory.mktemp("lab") / "lab.sqlite3", "--time-scale", SCALE).start()
    yield lab
    lab.stop()


def _status_text(client: McpClient) -> str:
    contents = client.request("resources/read", {"uri": STATUS_URI}).result["contents"]
    assert [c["uri"] for c in contents] == [STATUS_URI] and contents[0]["mimeType"] == "text/plain"
    return contents[0]["text"]


def test_the_handshake_era_lists_reads_and_tells_a_subscriber_of_each_change(shared_lab):
    client = McpClient(shared_lab.url)
    try:
        assert client.initialize()["capabilities"]["resources"] == {"subscribe": True}
        listed = client.request("resources/list").result["resources"]
        assert [r["uri"] for r in listed] == [STATUS_URI] and listed[0]["mimeType"] == "text/plain"
        first = _status_text(client)
        assert first.startswith("hostapp lab\ntick ") and "jobs running: " in first
        wait_until(lambda: _status_text(client) != first, what="the status to change")

        assert client.request("resources/subscribe", {"uri": STATUS_URI}).result == {}
        with client.http.stream("GET", client.url, headers=client.headers()) as stream:
            seen = read_sse(stream, Exchange(), None, max_messages=2)
        assert [m["method"] for m in seen.messages] == ["notifications/resources/updated"] * 2
        assert all(m["params"] == {"uri": STATUS_URI} for m in seen.messages)
        assert client.request("resources/unsubscribe", {"uri": STATUS_URI}).result == {}
        missing = client.request("resources/subscribe", {"uri": "lab://nothing"}).error
        assert missing["code"] == -32002
    finally:
        client.close()


def test_the_stateless_era_lists_and_reads_but_has_no_subscriptions(shared_lab):
    client = McpClient(shared_lab.url, stateless=True)
    try:
        assert client.request("server/discover").result["capabilities"]["resources"] == {}
        listed = client.request("resources/list").result
        assert listed["resultType"] == "complete" and [r["uri"] for r in listed["resources"]] == [STATUS_URI]
        assert "tick " in _status_text(client)
        refused = client.request("resources/subscribe", {"uri": STATUS_URI})
        assert refused.error["code"] == -32601
    finally:
        client.close()


def test_a_stdio_subscriber_gets_its_updates_on_stdout(tmp_path: Path):
    lab = LabProcess(tmp_path / "lab.sqlite3", "--time-scale", SCALE, stdio=True).start()
    try:
        peer = StdioPeer(lab)
        peer.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert peer.until_response(1)[1]["result"]["capabilities"]["resources"]["subscribe"] is True
        peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        peer.send({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": STATUS_URI}})
        assert peer.until_response(2)[1]["result"] == {}
        update = peer.receive()
        assert update == {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": STATUS_URI}}
    finally:
        lab.stop()
