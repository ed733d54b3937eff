"""StreamableHttpTransport against a real scripted server process on loopback (tests/support)."""

from __future__ import annotations

import asyncio
import itertools

import httpx
import pytest

from hostapp.engine.session import ClientSession
from hostapp.protocol.jsonrpc import (
    PARSE_ERROR,
    ErrorResponse,
    InvalidAnswer,
    Notification,
    ProtocolError,
    Request,
    Response,
    RpcError,
)
from hostapp.protocol.timing import Timing
from hostapp.transport.base import HttpStatusError, SessionExpired, TransportError
from hostapp.transport.http import StreamableHttpTransport
from tests.support.waiting import until_async

INIT_PARAMS = {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "hostapp-tests", "version": "0"}}


def call(request_id: int, tool: str, **arguments) -> Request:
    return Request(request_id, "tools/call", {"name": tool, "arguments": arguments})


async def initialized(server, listener, **kwargs) -> StreamableHttpTransport:
    """A transport through the handshake: initialize, version agreed, initialized sent."""
    transport = StreamableHttpTransport(server.url, {"Authorization": "Bearer sekrit-token"}, **kwargs)
    await transport.connect(listener)
    await transport.send(Request(0, "initialize", INIT_PARAMS))
    assert listener.has_response(0)  # a JSON answer is delivered before send() returns
    transport.set_protocol_version("2025-11-25", stateless=False)
    await transport.send(Notification("notifications/initialized"))
    return transport


def posts(server, rpc_method=None):
    return [r for r in server.records()
            if r["kind"] == "http" and r["method"] == "POST" and (rpc_method is None or r["rpc_method"] == rpc_method)]


async def test_json_answer_session_and_version_headers(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        assert transport.session_id
        await transport.send(call(1, "json"))
        assert listener.response_for(1) == Response(1, {"content": [{"type": "text", "text": "json"}]})
    finally:
        await transport.close()
    init, notified, called = posts(sse_server)
    assert init["headers"]["accept"] == "application/json, text/event-stream"
    assert init["headers"]["content-type"] == "application/json"
    assert "mcp-session-id" not in init["headers"] and "mcp-protocol-version" not in init["headers"]
    for later in (notified, called):
        assert later["headers"]["mcp-session-id"] == transport_session(sse_server)
        assert later["headers"]["mcp-protocol-version"] == "2025-11-25"
        assert later["headers"]["authorization"] == "Bearer sekrit-token"
        assert "mcp-method" not in later["headers"]  # handshake era: no mirrored headers


def transport_session(server) -> str:
    [init] = [r for r in server.records() if r.get("rpc_method") == "notifications/initialized"]
    return init["headers"]["mcp-session-id"]


async def test_sse_answer_with_priming_event(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "sse", count=3))
        await listener.wait_for(lambda: listener.has_response(1))
        assert listener.progress_values() == [1, 2, 3]
        assert listener.related == [None, 1, 1, 1, 1]  # initialize answered by JSON, then call 1's stream
        # priming + 3 notifications + response, each id reported once, for request 1
        assert [rid for rid, _, _ in listener.stream_events] == [1] * 5
        assert listener.invalid == [] and listener.lost == []
    finally:
        await transport.close()


async def test_dropped_stream_resumes_after_exactly_retry_ms(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "drop", count=6, drops=[2, 4], retry=500))
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    # every message exactly once, in order, then the final response
    assert listener.progress_values() == [1, 2, 3, 4, 5, 6]
    assert listener.messages[-1] == Response(1, {"content": [{"type": "text", "text": "drop"}]})
    assert listener.lost == [] and listener.invalid == []
    assert all(retry == 500 for _, _, retry in listener.stream_events)

    records = sse_server.records()
    closes = [r for r in records if r["kind"] == "close"]
    gets = [r for r in records if r["kind"] == "http" and r["method"] == "GET"]
    assert len(closes) == 2 and len(gets) == 2
    assert len(posts(sse_server, "tools/call")) == 1  # never re-POSTed
    for close, get in zip(closes, gets, strict=True):
        waited = get["time"] - close["time"]
        assert 0.5 <= waited < 0.9, f"reconnected after {waited:.3f}s, retry was 0.5s"
        key = close["stream"]
        assert get["headers"]["last-event-id"] == f"{key}:{close['after']}"
        assert get["headers"]["mcp-session-id"] == transport_session(sse_server)
        assert get["headers"]["mcp-protocol-version"] == "2025-11-25"
        assert get["headers"]["accept"] == "text/event-stream"


async def test_default_retry_is_used_when_the_server_sends_none(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False, default_retry_ms=200)
    try:
        await transport.send(call(1, "drop", count=2, drops=[1]))
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    [close] = [r for r in sse_server.records() if r["kind"] == "close"]
    [get] = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert 0.2 <= get["time"] - close["time"] < 0.6
    assert listener.progress_values() == [1, 2]


async def test_drop_without_event_id_loses_the_request(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "drop_noid"))
        await listener.wait_for(lambda: listener.lost)
        [(request_id, error)] = listener.lost
        assert request_id == 1 and "no event id" in str(error)
        assert listener.progress_values() == [1]
    finally:
        await transport.close()
    assert not [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]


async def test_stateless_stream_drop_is_not_resumed(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url, protocol_version="2026-07-28", stateless=True)
    await transport.connect(listener)
    try:
        await transport.send(call(1, "drop", count=4, drops=[1], retry=100))
        await listener.wait_for(lambda: listener.lost)
        assert "stateless" in str(listener.lost[0][1])
    finally:
        await transport.close()
    assert not [r for r in sse_server.records() if r["kind"] == "http" and r["method"] in ("GET", "DELETE")]


async def test_resume_stream_after_a_restart(sse_server, listener, make_listener):
    first = await initialized(sse_server, listener, standalone_stream=False)
    await first.send(call(1, "drop", count=4, drops=[2], retry=60_000))
    await listener.wait_for(lambda: len(listener.progress_values()) == 2)
    session_id, last_event_id = first.session_id, listener.stream_events[-1][1]
    # the host goes away without closing the session (a crash): cancel the background work only
    for task in list(first._tasks):
        task.cancel()
    await first._client.aclose()

    again = make_listener()
    second = StreamableHttpTransport(sse_server.url, session_id=session_id, protocol_version="2025-11-25",
                                     standalone_stream=False)
    await second.connect(again)
    try:
        await second.resume_stream(1, last_event_id)
        await again.wait_for(lambda: again.has_response(1))
        assert again.progress_values() == [3, 4]
    finally:
        await second.close()
    [get] = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert get["headers"]["last-event-id"] == last_event_id
    assert len(posts(sse_server, "tools/call")) == 1


async def test_a_silent_resumed_stream_is_asked_for_again(sse_server, listener):
    """A server may replay and then write nothing more to the resumed connection (only
    keep-alive comments, which are no events): the client lets go after the allowed
    silence and resumes again from the same event id; the silence doubles while nothing
    new comes."""
    transport = await initialized(sse_server, listener, standalone_stream=False, resumed_silence_seconds=0.3)
    try:
        await transport.send(call(1, "drop", count=4, drops=[2], retry=100, silent_resumes=2))
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    assert listener.progress_values() == [1, 2, 3, 4]
    assert listener.lost == [] and listener.invalid == []
    records = sse_server.records()
    gets = [r for r in records if r["kind"] == "http" and r["method"] == "GET"]
    assert len(gets) == 3
    assert len({g["headers"]["last-event-id"] for g in gets}) == 1  # the silent ones brought nothing
    assert len([r for r in records if r["kind"] == "let_go"]) == 2
    first_wait, second_wait = (b["time"] - a["time"] for a, b in itertools.pairwise(gets))
    assert first_wait >= 0.3 + 0.1 and second_wait >= 0.6 + 0.1
    assert len(posts(sse_server, "tools/call")) == 1


async def test_a_resumed_stream_with_slow_events_is_not_asked_for_after_every_event(sse_server, listener):
    """Events further apart than the allowed silence: each silence doubles the allowance
    (news or not), so the client soon waits long enough instead of resuming again after
    every event."""
    transport = await initialized(sse_server, listener, standalone_stream=False, resumed_silence_seconds=0.2)
    try:
        await transport.send(call(1, "drop", count=8, drops=[1], retry=20, gap=0.5))
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    assert listener.progress_values() == list(range(1, 9))
    gets = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    # 0.2 s, then 0.4 s, then 0.8 s: three resumptions, not one per event (eight).
    assert len(gets) <= 3, len(gets)
    assert len(posts(sse_server, "tools/call")) == 1


async def test_a_server_seen_sending_live_events_on_a_resumed_stream_is_given_longer(sse_server, listener):
    """Once a resumed connection carried an event sent well after the replay, the server is
    known to deliver live: its resumed streams are no longer asked for again after the
    short silence (a replay, written at once, teaches nothing: see the silent-stream test
    above, whose allowance keeps doubling from 0.3 s)."""
    transport = await initialized(sse_server, listener, standalone_stream=False, resumed_silence_seconds=0.8)
    transport.live_event_gap_seconds = 0.3
    try:
        # Events 0.5 s apart on the resumed connection: within the allowance, and live.
        await transport.send(call(1, "drop", count=4, drops=[1], retry=20, gap=0.5))
        await listener.wait_for(lambda: listener.has_response(1))
        assert transport.habits.live_after_resume
        # Events 1.2 s apart: longer than the allowance, which no longer applies.
        await transport.send(call(2, "drop", count=3, drops=[1], retry=20, gap=1.2))
        await listener.wait_for(lambda: listener.has_response(2))
    finally:
        await transport.close()
    gets = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert len(gets) == 2, len(gets)  # one resumption per dropped stream
    assert listener.lost == []


async def test_resumed_silence_can_be_held_for_ever(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False, resumed_silence_seconds=None)
    try:
        await transport.send(call(1, "drop", count=2, drops=[1], retry=50, silent_resumes=1))
        await until_async(lambda: [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"],
                          what="the dropped stream's resumption", interval=0.05)
        await asyncio.sleep(1.5)  # the resumed stream stays silent, and is kept: no answer, no new resumption
        assert not listener.has_response(1)
    finally:
        await transport.close()
    assert listener.progress_values() == [1]
    assert len([r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]) == 1


async def test_malformed_sse_event_is_reported_and_the_stream_goes_on(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "bad"))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, raw)] = listener.invalid
        assert isinstance(error, ProtocolError) and raw == "{this is not json"
        assert listener.progress_values() == [1, 2]
    finally:
        await transport.close()


async def test_unknown_session_raises_session_expired(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url, session_id="gone-session-0123",
                                        protocol_version="2025-11-25", standalone_stream=False)
    await transport.connect(listener)
    try:
        with pytest.raises(SessionExpired) as caught:
            await transport.send(call(1, "json"))
        assert caught.value.status == 404
        assert "gone-session-0123" not in str(caught.value)
        assert transport.session_id is None  # the next initialize goes without it
    finally:
        await transport.close()


@pytest.mark.parametrize("status, words", [(500, "internal error (HTTP 500)"), (503, "HTTP 503"),
                                           (401, "refused access")])
async def test_error_status_is_a_clear_http_status_error(sse_server, listener, status, words):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        with pytest.raises(HttpStatusError) as caught:
            await transport.send(call(1, "status", status=status))
        assert caught.value.status == status
        assert words in str(caught.value)
        assert "something broke in the server" in str(caught.value)
        assert transport.session_id not in str(caught.value)
        assert "sekrit-token" not in str(caught.value)
    finally:
        await transport.close()


async def test_405_on_post_says_this_is_no_mcp_endpoint(sse_server, listener):
    transport = StreamableHttpTransport(f"{sse_server.base}/no-post?token=query-secret")
    await transport.connect(listener)
    try:
        with pytest.raises(HttpStatusError) as caught:
            await transport.send(Request(0, "initialize", INIT_PARAMS))
        assert caught.value.status == 405
        assert "does not accept HTTP POST" in str(caught.value)
        assert "query-secret" not in str(caught.value)
    finally:
        await transport.close()


async def test_json_rpc_error_with_http_400_is_an_answer(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(7, "rpc_error"))
        answer = listener.response_for(7)
        assert isinstance(answer, ErrorResponse) and answer.error.code == -32602
    finally:
        await transport.close()


async def test_refused_connection_is_a_transport_error(listener, unused_port):
    port = unused_port
    transport = StreamableHttpTransport(f"http://127.0.0.1:{port}/mcp")
    await transport.connect(listener)
    try:
        with pytest.raises(TransportError, match=rf"cannot connect to http://127.0.0.1:{port}/mcp: "):
            await transport.send(Request(0, "initialize", INIT_PARAMS))
    finally:
        await transport.close()


async def test_close_deletes_the_session_and_cancels_streams(sse_server, listener):
    transport = await initialized(sse_server, listener)  # with the standalone stream
    session_id = transport.session_id
    await listener.wait_for(lambda: any(isinstance(m, Notification) and m.method == "notifications/message"
                                        for m in listener.messages))
    assert (None, "standalone:1", None) in listener.stream_events
    await transport.close()
    assert listener.closed == [None]
    [delete] = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "DELETE"]
    assert delete["headers"]["mcp-session-id"] == session_id
    [get] = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert "last-event-id" not in get["headers"]
    assert not transport._tasks


async def test_standalone_stream_405_is_fine(sse_server, listener):
    # a server that refuses GET: the transport carries on without a standalone stream
    async with httpx.AsyncClient() as client:
        transport = StreamableHttpTransport(f"{sse_server.base}/no-post", client=client,
                                            protocol_version="2025-11-25", session_id="x")
        await transport.connect(listener)
        transport.open_standalone_stream()
        await transport._standalone_task
        assert listener.closed == [] and listener.messages == []
        await transport.close()
        assert not client.is_closed  # a client given to us stays open


async def test_stateless_requests_carry_method_and_name_headers(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url)
    transport.set_protocol_version("2026-07-28", stateless=True)
    await transport.connect(listener)
    try:
        await transport.send(call(1, "json"))
        await transport.send(Request(2, "resources/read", {"uri": "file:///a b/ü.txt"}))
        await transport.send(Request(3, "prompts/get", {"name": "=?base64?x?="}))
        await transport.send(Request(4, "tools/list", {}))
    finally:
        await transport.close()
    first, second, third, fourth = posts(sse_server)
    assert first["headers"]["mcp-method"] == "tools/call" and first["headers"]["mcp-name"] == "json"
    assert first["headers"]["mcp-protocol-version"] == "2026-07-28"
    assert second["headers"]["mcp-name"] == "=?base64?ZmlsZTovLy9hIGIvw7wudHh0?="
    assert third["headers"]["mcp-name"] == "=?base64?PT9iYXNlNjQ/eD89?="
    assert fourth["headers"]["mcp-method"] == "tools/list" and "mcp-name" not in fourth["headers"]
    assert not any("mcp-session-id" in p["headers"] for p in (first, second, third, fourth))
    # no session: nothing to DELETE
    assert not [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "DELETE"]


async def test_probe_with_meta_version_gets_matching_headers_before_agreement(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url)
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "server/discover", {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}))
    finally:
        await transport.close()
    [probe] = posts(sse_server)
    assert probe["headers"]["mcp-protocol-version"] == "2026-07-28"
    assert probe["headers"]["mcp-method"] == "server/discover"


async def test_tool_designated_parameters_are_mirrored_in_the_stateless_era(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url, protocol_version="2026-07-28", stateless=True)
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "tools/list", {}))
        # the tool with an invalid x-mcp-header annotation is left out of the answer
        assert [tool["name"] for tool in listener.response_for(1).result["tools"]] == ["json", "sse"]
        await transport.send(call(2, "json", region="us-west1", query="q"))
        await transport.send(call(3, "sse", count=1))
        await listener.wait_for(lambda: listener.has_response(3))
    finally:
        await transport.close()
    _, designated, plain = posts(sse_server)
    assert designated["headers"]["mcp-param-region"] == "us-west1"
    assert [name for name in designated["headers"] if name.startswith("mcp-param-")] == ["mcp-param-region"]
    assert not [name for name in plain["headers"] if name.startswith("mcp-param-")]


async def test_handshake_era_tools_list_is_passed_through_whole(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(Request(1, "tools/list", {}))
        assert len(listener.response_for(1).result["tools"]) == 3
    finally:
        await transport.close()


# 409: the server still holds the stream's previous connection (it notices the drop later)
@pytest.mark.parametrize("status", [503, 409])
async def test_resumption_refused_by_a_busy_server_is_retried_then_given_up(sse_server, listener, status):
    # Refusals go on being retried for the resumption budget (a duration), then given up.
    transport = await initialized(sse_server, listener, standalone_stream=False,
                                  timing=Timing(resume_budget=0.25))
    try:
        await transport.send(call(1, "drop", count=3, drops=[1], retry=50, resume_status=status))
        await listener.wait_for(lambda: listener.lost)
    finally:
        await transport.close()
    [(request_id, error)] = listener.lost
    assert request_id == 1 and isinstance(error, HttpStatusError) and error.status == status
    gets = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert len(gets) >= 2
    assert len(posts(sse_server, "tools/call")) == 1


async def test_resumption_of_an_expired_session_loses_the_request(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "drop", count=3, drops=[1], retry=50, resume_status=404))
        await listener.wait_for(lambda: listener.lost)
    finally:
        await transport.close()
    [(request_id, error)] = listener.lost
    assert request_id == 1 and isinstance(error, SessionExpired)


async def test_close_can_keep_the_session_for_a_restart(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    await transport.close(end_session=False)
    assert not [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "DELETE"]
    assert listener.closed == [None]


async def test_standalone_stream_reconnects_after_the_server_closes_it(sse_server, listener):
    async with httpx.AsyncClient() as control:
        await control.post(f"{sse_server.base}/_drop_standalone?retry=150")
    transport = await initialized(sse_server, listener)
    try:
        await listener.wait_for(lambda: len([m for m in listener.messages if isinstance(m, Notification)
                                             and m.method == "notifications/message"]) == 2)
    finally:
        await transport.close()
    first, second = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    [close] = [r for r in sse_server.records() if r["kind"] == "close"]
    assert "last-event-id" not in first["headers"]
    assert second["headers"]["last-event-id"] == "standalone:1"
    assert second["time"] - close["time"] >= 0.15
    assert (None, "standalone:0", 150) in listener.stream_events


async def test_standalone_stream_refused_while_the_server_holds_an_earlier_one_is_tried_again(sse_server, listener):
    async with httpx.AsyncClient() as control:
        await control.post(f"{sse_server.base}/_busy_standalone?times=2")
    transport = await initialized(sse_server, listener, default_retry_ms=50)
    try:
        await listener.wait_for(lambda: any(isinstance(m, Notification) and m.method == "notifications/message"
                                            for m in listener.messages))
    finally:
        await transport.close()
    gets = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert len(gets) == 3  # two 409s, then the stream


async def test_adopted_session_opens_its_standalone_stream_when_the_version_is_set(sse_server, listener, make_listener):
    first = await initialized(sse_server, listener, standalone_stream=False)
    session_id = first.session_id
    await first.close(end_session=False)

    again = make_listener()
    adopted = StreamableHttpTransport(sse_server.url, session_id=session_id)
    await adopted.connect(again)
    adopted.set_protocol_version("2025-11-25", stateless=False)  # no initialize: the session is adopted
    try:
        await again.wait_for(lambda: any(isinstance(m, Notification) for m in again.messages))
    finally:
        await adopted.close()
    [get] = [r for r in sse_server.records() if r["kind"] == "http" and r["method"] == "GET"]
    assert get["headers"]["mcp-session-id"] == session_id


async def test_initialize_starts_a_new_session_without_the_old_id(sse_server, listener):
    transport = StreamableHttpTransport(sse_server.url, session_id="stale-session-id", standalone_stream=False)
    await transport.connect(listener)
    try:
        await transport.send(Request(0, "initialize", INIT_PARAMS))
        assert transport.session_id not in (None, "stale-session-id")
    finally:
        await transport.close()
    [init] = posts(sse_server, "initialize")
    assert "mcp-session-id" not in init["headers"]


async def test_json_nested_too_deeply_on_a_stream_is_reported_and_the_stream_goes_on(sse_server, listener):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, "deep"))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, _raw)] = listener.invalid
        assert isinstance(error, ProtocolError) and "nested too deeply" in str(error)
        assert listener.lost == []
    finally:
        await transport.close()


@pytest.mark.parametrize("tool, words", [
    ("deep_last", "not valid JSON-RPC: JSON nested too deeply"),  # the last event of its stream
    ("deep_json", "not valid JSON-RPC: JSON nested too deeply"),  # the JSON body of the POST
    ("other_json", "the answer to request 4242, not the response to request 1"),
])
async def test_an_unreadable_answer_ends_its_request_with_the_reason(sse_server, listener, tool, words):
    transport = await initialized(sse_server, listener, standalone_stream=False)
    try:
        await transport.send(call(1, tool))
        await listener.wait_for(lambda: listener.lost)
        [(request_id, error)] = listener.lost
        assert request_id == 1 and isinstance(error, InvalidAnswer)
        assert "the server's answer" in str(error) and words in str(error), str(error)
        # the connection is still usable
        await transport.send(call(2, "json"))
        assert listener.has_response(2)
    finally:
        await transport.close()


async def test_a_session_fails_a_request_whose_answer_is_unreadable(sse_server):
    session = ClientSession(StreamableHttpTransport(sse_server.url, standalone_stream=False))
    await session.connect("2025-11-25")
    try:
        with pytest.raises(RpcError) as caught:
            await asyncio.wait_for(session.call_tool("deep_json"), 10)
        assert caught.value.code == PARSE_ERROR and "nested too deeply" in caught.value.message
        assert (await session.call_tool("json"))["content"][0]["text"] == "json"
    finally:
        await session.close()


@pytest.mark.parametrize("tool", ["endless_line", "endless_event", "endless_json", "huge_json"])
async def test_an_answer_over_the_size_limit_ends_its_request_while_it_is_read(hostile_url, listener, tool):
    transport = StreamableHttpTransport(hostile_url, standalone_stream=False, max_message_bytes=1024 * 1024)
    await transport.connect(listener)
    try:
        await transport.send(Request(0, "initialize", INIT_PARAMS))
        transport.set_protocol_version("2025-06-18", stateless=False)
        started = asyncio.get_running_loop().time()
        await transport.send(call(1, tool))
        await listener.wait_for(lambda: listener.lost)
        elapsed = asyncio.get_running_loop().time() - started
        [(request_id, error)] = listener.lost
        assert request_id == 1 and isinstance(error, InvalidAnswer), error
        assert "limit of 1048576" in str(error), str(error)
        assert elapsed < 5
        await transport.send(call(2, "ok"))  # the connection is still usable
        assert listener.has_response(2)
    finally:
        await transport.close()
