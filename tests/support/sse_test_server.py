"""A Streamable HTTP test server whose every answer is scripted by the tool that is called.

Run as a process: ``python tests/support/sse_test_server.py --port PORT``. Endpoint ``/mcp``
(``/no-post`` answers 405 to everything). It records what it receives (method, headers,
JSON-RPC method, monotonic time) and when it closes a stream; ``GET /_records`` returns
the records, ``POST /_reset`` clears them, ``POST /_drop_standalone?retry=MS`` makes the
next standalone GET stream close after its first events, ``POST /_busy_standalone?times=N``
makes the next N standalone GETs answer 409 (the server still holds an earlier one).

``tools/call`` names:
- ``json``: a JSON answer.
- ``sse``: an SSE answer: priming event, ``count`` progress notifications, the response.
- ``drop``: like ``sse`` but the connection is closed after each index in ``drops``
  (event counts), with ``retry: <retry>`` in the priming event; ``GET`` with
  ``Last-Event-ID`` replays the events after that id (or answers ``resume_status``).
  With ``silent_resumes: n`` the first n resumptions send only keep-alive comments and
  hold the connection (as server-everything does with a resumed stream), the next replays.
  With ``gap: seconds`` a resumption sends its events that far apart (a slow tool's steps).
- ``drop_noid``: an SSE answer without event ids that closes before the response.
- ``bad``: an SSE answer with one malformed event between good ones.
- ``deep``: an SSE answer whose first event is JSON nested ``depth`` levels deep, then
  the response; ``deep_last``: the same event, then the stream closes (no response);
  ``deep_json``: a JSON answer nested that deep; ``other_json``: a JSON answer for
  another request id.
- ``status``: answers HTTP ``status`` with a short text body.
- ``rpc_error``: HTTP 400 with a JSON-RPC error for the request's id.
- ``flood``: ``count`` progress notifications with ids, as fast as possible.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Route

RECORDS: list[dict] = []
SESSIONS: set[str] = set()
# stream key -> list of (event id, data); replayed on GET with Last-Event-ID
STREAMS: dict[str, list[tuple[str, str]]] = {}
# stream key -> event counts after which the connection is dropped
DROPS: dict[str, list[int]] = {}
# stream key -> HTTP status every resumption GET of that stream gets
RESUME_STATUS: dict[str, int] = {}
# stream key -> how many more resumptions stay silent (keep-alive comments only)
SILENT_RESUMES: dict[str, int] = {}
# stream key -> seconds between the events of a resumption
GAPS: dict[str, float] = {}


def record(kind: str, **fields) -> None:
    RECORDS.append({"kind": kind, "time": time.monotonic(), **fields})


def sse_event(data: str = "", event_id: str | None = None, retry: int | None = None) -> str:
    lines = []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    if retry is not None:
        lines.append(f"retry: {retry}")
    lines.append(f"data: {data}")
    return "\n".join(lines) + "\n\n"


def progress(i: int, total: int) -> str:
    return json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": "p", "progress": i, "total": total}})


def result(request_id, text: str = "done") -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id,
                       "result": {"content": [{"type": "text", "text": text}]}})


# tools/list: one tool mirrors a parameter into a header, one has an invalid annotation
TOOLS = [
    {"name": "json", "inputSchema": {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}, "query": {"type": "string"}}}},
    {"name": "broken", "inputSchema": {"type": "object", "properties": {
        "ratio": {"type": "number", "x-mcp-header": "Ratio"}}}},
    {"name": "sse", "inputSchema": {"type": "object"}},
]

SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def sse_response(chunks, session: str | None) -> StreamingResponse:
    headers = dict(SSE_HEADERS)
    if session:
        headers["Mcp-Session-Id"] = session
    return StreamingResponse(chunks, media_type="text/event-stream", headers=headers)


async def replay(key: str, start: int, first_chunk: str | None = None, gap: float = 0.0):
    """Send the events of ``key`` from index ``start`` until the next drop point or the end,
    ``gap`` seconds apart."""
    if first_chunk is not None:
        yield first_chunk
    events = STREAMS[key]
    drops = DROPS.get(key, [])
    for index in range(start, len(events)):
        event_id, data = events[index]
        if gap and index > start:
            await asyncio.sleep(gap)
        yield sse_event(data, event_id)
        sent = index + 1
        if sent in drops and sent < len(events):
            drops.remove(sent)
            await asyncio.sleep(0.05)  # let the bytes leave before the close
            record("close", stream=key, after=sent)
            return
    record("end", stream=key)


async def keep_alive_only(key: str):
    """Hold a resumed connection open with comments only, until the client goes away."""
    try:
        while True:
            yield ": keepalive\n\n"
            await asyncio.sleep(0.1)
    finally:
        record("let_go", stream=key)


async def mcp(request: Request) -> Response:
    headers = {k.lower(): v for k, v in request.headers.items()}
    session = headers.get("mcp-session-id")
    if request.method == "DELETE":
        record("http", method="DELETE", headers=headers)
        SESSIONS.discard(session or "")
        return Response(status_code=200)
    if session is not None and session not in SESSIONS:
        record("http", method=request.method, headers=headers, status=404)
        return PlainTextResponse("unknown session", status_code=404)
    if request.method == "GET":
        last = headers.get("last-event-id")
        record("http", method="GET", headers=headers)
        if last is None or last.startswith("standalone:"):
            if STANDALONE_BUSY.get("times"):
                STANDALONE_BUSY["times"] -= 1
                return PlainTextResponse("Conflict: only one SSE stream per session", status_code=409)
            return sse_response(standalone(), session)
        key, _, index = last.rpartition(":")
        if key not in STREAMS:
            return PlainTextResponse("unknown event id", status_code=400)
        if key in RESUME_STATUS:
            return PlainTextResponse("not now", status_code=RESUME_STATUS[key])
        if SILENT_RESUMES.get(key):
            SILENT_RESUMES[key] -= 1
            return sse_response(keep_alive_only(key), session)
        return sse_response(replay(key, int(index), gap=GAPS.get(key, 0.0)), session)

    body = json.loads(await request.body())
    method = body.get("method")
    record("http", method="POST", headers=headers, rpc_method=method, rpc_id=body.get("id"))
    if "id" not in body:
        return Response(status_code=202)
    rid = body["id"]
    if method == "initialize":
        new_session = uuid.uuid4().hex
        SESSIONS.add(new_session)
        answer = {"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": body["params"].get("protocolVersion", "2025-11-25"),
            "capabilities": {"tools": {}}, "serverInfo": {"name": "sse-test-server", "version": "1"}}}
        return JSONResponse(answer, headers={"Mcp-Session-Id": new_session})
    if method == "tools/list":
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    if method != "tools/call":
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "result": {}})
    name = body["params"]["name"]
    args = body["params"].get("arguments") or {}
    key = uuid.uuid4().hex[:8]
    if name == "json":
        return JSONResponse(json.loads(result(rid, "json")))
    if name in ("sse", "drop", "flood"):
        count = int(args.get("count", 3))
        events = [(f"{key}:{i + 1}", progress(i + 1, count)) for i in range(count)]
        events.append((f"{key}:{count + 1}", result(rid, name)))
        STREAMS[key] = events
        DROPS[key] = list(args.get("drops", []))
        if "resume_status" in args:
            RESUME_STATUS[key] = int(args["resume_status"])
        SILENT_RESUMES[key] = int(args.get("silent_resumes", 0))
        GAPS[key] = float(args.get("gap", 0.0))
        priming = sse_event("", f"{key}:0", args.get("retry"))
        return sse_response(replay(key, 0, priming), session)
    if name == "drop_noid":
        async def no_ids():
            yield sse_event(progress(1, 2))
            await asyncio.sleep(0.05)
            record("close", stream=key)
        return sse_response(no_ids(), session)
    if name == "bad":
        async def with_bad_event():
            yield sse_event("", f"{key}:0")
            yield sse_event(progress(1, 2), f"{key}:1")
            yield sse_event("{this is not json", f"{key}:2")
            yield sse_event(progress(2, 2), f"{key}:3")
            yield sse_event(result(rid, "bad"), f"{key}:4")
        return sse_response(with_bad_event(), session)
    if name in ("deep", "deep_last", "deep_json"):
        depth = int(args.get("depth", 100_000))
        nested = "[" * depth + "]" * depth
        if name == "deep_json":
            return Response(nested, media_type="application/json")

        async def deep_events():
            yield sse_event("", f"{key}:0")
            yield sse_event(nested, f"{key}:1")
            if name == "deep":
                yield sse_event(result(rid, "deep"), f"{key}:2")
        return sse_response(deep_events(), session)
    if name == "other_json":
        return JSONResponse(json.loads(result(4242, "not yours")))
    if name == "status":
        return PlainTextResponse("something broke\nin the server", status_code=int(args["status"]))
    if name == "rpc_error":
        return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad version"}},
                            status_code=400)
    return JSONResponse({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such tool"}})


# when set, the next standalone stream sends its events with this retry and closes
STANDALONE_DROP: dict[str, int] = {}
# "times": how many more standalone GETs answer 409
STANDALONE_BUSY: dict[str, int] = {}


async def standalone():
    retry = STANDALONE_DROP.pop("retry", None)
    yield sse_event("", "standalone:0", retry)
    yield sse_event(json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                                "params": {"level": "info", "data": "hello from the standalone stream"}}),
                    "standalone:1")
    if retry is not None:
        await asyncio.sleep(0.05)
        record("close", stream="standalone")
        return
    while True:  # hold the stream open until the client goes away
        await asyncio.sleep(3600)


async def no_post(request: Request) -> Response:
    record("http", method=request.method, path="/no-post")
    return PlainTextResponse("Method Not Allowed", status_code=405)


async def records(request: Request) -> Response:
    return JSONResponse(RECORDS)


async def reset(request: Request) -> Response:
    RECORDS.clear()
    STANDALONE_DROP.clear()
    STANDALONE_BUSY.clear()
    return JSONResponse({})


async def drop_standalone(request: Request) -> Response:
    STANDALONE_DROP["retry"] = int(request.query_params["retry"])
    return JSONResponse({})


async def busy_standalone(request: Request) -> Response:
    STANDALONE_BUSY["times"] = int(request.query_params["times"])
    return JSONResponse({})


app = Starlette(routes=[
    Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
    Route("/no-post", no_post, methods=["GET", "POST", "DELETE"]),
    Route("/_records", records, methods=["GET"]),
    Route("/_reset", reset, methods=["POST"]),
    Route("/_drop_standalone", drop_standalone, methods=["POST"]),
    Route("/_busy_standalone", busy_standalone, methods=["POST"]),
])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
