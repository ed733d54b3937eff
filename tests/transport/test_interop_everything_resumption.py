"""SSE resumption against the real @modelcontextprotocol/server-everything (npm peer).

What server-everything does (its ``InMemoryEventStore`` in dist/transports/streamableHttp.js,
under the SDK's ``WebStandardStreamableHTTPServerTransport``): every message of a request's
stream is stored with a fresh event id, also when no connection carries it any more. A GET
with ``Last-Event-ID`` replays every stored event after that id (of any stream of the
session) and then keeps the connection open, but files it under the last replayed event id
instead of the stream id (``replayEventsAfter`` is meant to answer with the stream id). So
nothing the request sends later reaches that connection: its remaining progress and its
response are only stored, and come with the next GET with ``Last-Event-ID``. The
transport asks again for a resumed stream that stays silent; these tests pin both the
server's behaviour and the transport's answer to it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from hostapp.protocol.jsonrpc import Notification, Request, Response
from hostapp.protocol.timing import Timing
from hostapp.transport.http import StreamableHttpTransport
from tests.support.faults import LoopbackProxy
from tests.support.peers import (
    EVERYTHING,
    NODE,
    Peer,
    PeerMissing,
    free_port,
    require_everything,
)
from tests.support.waiting import until_async

VERSION = "2025-11-25"
INIT_PARAMS = {"protocolVersion": VERSION, "capabilities": {},
               "clientInfo": {"name": "hostapp-tests", "version": "0"}}
TOOL = "trigger-long-running-operation"


@pytest.fixture
def everything() -> Iterator[Peer]:
    try:
        require_everything()
    except PeerMissing as exc:
        pytest.fail(str(exc))
    port = free_port()
    peer = Peer([str(NODE), str(EVERYTHING), "streamableHttp"], port, env={"PORT": str(port)})
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture
def proxy(everything: Peer) -> Iterator[LoopbackProxy]:
    proxied = LoopbackProxy(everything.port).start()
    try:
        yield proxied
    finally:
        proxied.stop()


def long_call(request_id: int, duration: float, steps: int) -> Request:
    return Request(request_id, "tools/call", {"name": TOOL, "arguments": {"duration": duration, "steps": steps},
                                              "_meta": {"progressToken": "p"}})


async def initialized(url: str, listener, **kwargs) -> StreamableHttpTransport:
    transport = StreamableHttpTransport(url, **kwargs)
    await transport.connect(listener)
    await transport.send(Request(0, "initialize", INIT_PARAMS))
    await listener.wait_for(lambda: listener.has_response(0))
    transport.set_protocol_version(VERSION, stateless=False)
    await transport.send(Notification("notifications/initialized"))
    return transport


def resumptions(proxy: LoopbackProxy) -> list[str]:
    return [r.headers["last-event-id"] for r in list(proxy.requests)
            if r.method == "GET" and "last-event-id" in r.headers]


def completed(answer) -> bool:
    return isinstance(answer, Response) and "completed" in answer.result["content"][0]["text"]


async def test_a_call_survives_a_dropped_connection(proxy, listener):
    transport = await initialized(proxy.url(), listener)
    try:
        await transport.send(long_call(1, duration=2, steps=4))
        await listener.wait_for(lambda: len(listener.progress_values()) >= 1)
        assert await asyncio.to_thread(proxy.drop_connections) > 0
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    assert listener.progress_values() == [1, 2, 3, 4]  # each once, in order
    assert completed(listener.response_for(1))
    assert listener.lost == []
    assert len(proxy.tool_calls(TOOL)) == 1  # never re-POSTed
    # the first resumption replays what was stored and then falls silent; a later one
    # (from a newer event id) brings the rest and the response
    resumed_from = resumptions(proxy)
    assert len(resumed_from) >= 2 and len(set(resumed_from)) == len(resumed_from)


async def test_a_network_cut_longer_than_eight_attempts_but_within_the_budget_is_resumed(proxy, listener):
    # The transport's reconnections go on for a duration (``resume_budget``), not for a
    # number of attempts: a cut that outlasts many quick attempts (a back-off capped at
    # 0.1 s here) but not the budget ends with the stream resumed and the call answered.
    timing = Timing(sse_retry=0.05, reconnect_cap=0.1, resumed_silence=0.5, resume_budget=60.0)
    transport = await initialized(proxy.url(), listener, standalone_stream=False, timing=timing)
    try:
        await transport.send(long_call(1, duration=2, steps=4))
        await listener.wait_for(lambda: len(listener.progress_values()) >= 1)
        await asyncio.to_thread(proxy.refuse)
        try:
            await until_async(lambda: proxy.refused >= 12 or listener.lost, what="twelve refused reconnections")
        finally:
            proxy.let_through()
        await listener.wait_for(lambda: listener.has_response(1) or bool(listener.lost))
    finally:
        await transport.close()
    assert listener.lost == []
    assert proxy.refused >= 12
    assert completed(listener.response_for(1))
    assert listener.progress_values() == [1, 2, 3, 4]
    assert len(proxy.tool_calls(TOOL)) == 1  # never re-POSTed


async def test_a_stream_resumed_after_a_restart_completes(everything, listener, make_listener):
    first = await initialized(everything.url, listener, standalone_stream=False)
    await first.send(long_call(1, duration=2, steps=4))
    await listener.wait_for(lambda: len(listener.progress_values()) >= 1)
    session_id, last_event_id = first.session_id, listener.stream_events[-1][1]
    # the host goes away without ending the session (a crash): stop the background work only
    for task in list(first._tasks):
        task.cancel()
    await asyncio.gather(*first._tasks, return_exceptions=True)
    await first._client.aclose()

    again = make_listener()
    second = StreamableHttpTransport(everything.url, session_id=session_id, protocol_version=VERSION,
                                     standalone_stream=False)
    await second.connect(again)
    try:
        await second.resume_stream(1, last_event_id)
        await again.wait_for(lambda: again.has_response(1))
    finally:
        await second.close()
    assert again.progress_values() == [p for p in [1, 2, 3, 4] if p not in listener.progress_values()]
    assert completed(again.response_for(1))
    assert again.lost == []


async def test_a_silent_answer_stream_is_held_not_resumed(proxy, listener):
    """The silence rule is for resumed connections only: the POST's own stream is live."""
    transport = await initialized(proxy.url(), listener, standalone_stream=False, resumed_silence_seconds=0.5)
    try:
        await transport.send(long_call(1, duration=1.5, steps=1))
        await listener.wait_for(lambda: listener.has_response(1))
    finally:
        await transport.close()
    assert completed(listener.response_for(1))
    assert resumptions(proxy) == []


async def test_everything_writes_nothing_live_to_a_resumed_stream_but_replays_it_later(everything):
    """The server's side, on the raw wire: why a silent resumed stream is asked for again."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=None)) as client:
        init = await client.post(everything.url, headers=headers, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize", "params": INIT_PARAMS})
        headers |= {"Mcp-Session-Id": init.headers["mcp-session-id"], "MCP-Protocol-Version": VERSION}
        await client.post(everything.url, headers=headers,
                          json={"jsonrpc": "2.0", "method": "notifications/initialized"})

        post = client.build_request("POST", everything.url, headers=headers, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": long_call(1, 1.5, 3).params})
        async with client.stream(post.method, post.url, headers=post.headers, content=post.content) as answer:
            priming_id = await first_event_id(answer)  # the priming event; then the client goes away

        get_headers = {k: v for k, v in headers.items() if k != "Content-Type"} | {
            "Accept": "text/event-stream", "Last-Event-ID": priming_id}
        async with client.stream("GET", everything.url, headers=get_headers) as resumed:
            assert resumed.status_code == 200
            # the tool ends after 1.5 s; the resumed connection carries none of it
            early = await read_for(resumed, 2.5)
        assert "notifications/progress" not in early and '"result"' not in early, early

        async with client.stream("GET", everything.url, headers=get_headers) as again:
            later = await read_for(again, 1.0)
        assert later.count("notifications/progress") == 3 and '"result"' in later, later


async def first_event_id(response: httpx.Response) -> str:
    text = ""
    async for chunk in response.aiter_text():
        text += chunk
        if "\n\n" in text:
            break
    [event_id] = [line[3:].strip() for line in text.split("\n\n")[0].splitlines() if line.startswith("id:")]
    return event_id


async def read_for(response: httpx.Response, seconds: float) -> str:
    text = ""
    try:
        async with asyncio.timeout(seconds):
            async for chunk in response.aiter_text():
                text += chunk
    except TimeoutError:
        pass
    return text
