"""A minimal MCP server that floods one tools/call with progress notifications.

The same server is read by every client in the progress-intake benchmark (the floor,
the official SDK and hostapp), so what is measured is the client. It speaks just enough
of the handshake era: ``initialize``, ``tools/list`` with one tool ``flood``, and a
``tools/call`` whose answer is an SSE stream (HTTP) or a run of lines (stdio) of
``count`` progress notifications followed by the result. Everything else is answered
with -32601, which also sends a client that tries ``server/discover`` first to the
handshake.

The wire text is produced in large slices from a template so that the server is never
the bottleneck: it writes far faster than any client reads.

A paced call (``arguments.interval`` in seconds, stdio only) is answered differently: one
progress notification every ``interval`` until ``count``, for any number of such calls at
once. That is the load of the window benchmark (1,000 operations at 10 updates a second).

HTTP:  ``python -m bench.progress_server --http 0`` prints ``url <URL>`` once listening.
stdio: ``python -m bench.progress_server --stdio``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
SLICE = 2000  # notifications per written slice

TOOL = {
    "name": "flood",
    "description": "Sends `count` progress notifications, then answers.",
    "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
}


def answer(request: dict[str, Any]) -> dict[str, Any] | None:
    """The response to any request but tools/call (None for a notification)."""
    if "id" not in request:
        return None
    method = request.get("method")
    rid = request["id"]
    if method == "initialize":
        offered = (request.get("params") or {}).get("protocolVersion") or PROTOCOL_VERSION
        version = offered if offered <= PROTOCOL_VERSION else PROTOCOL_VERSION
        return {"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": version, "capabilities": {"tools": {}},
            "serverInfo": {"name": "bench-progress", "version": "1"}}}
    if method == "tools/list":
        return {"jsonrpc": "2.0", "id": rid, "result": {"tools": [TOOL]}}
    if method == "ping":
        return {"jsonrpc": "2.0", "id": rid, "result": {}}
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}}


def flood(request: dict[str, Any], framing: str) -> Iterator[bytes]:
    """The progress notifications and the result of one tools/call, in slices of wire text.

    ``framing`` is "sse" (one ``event: message`` per message) or "lines" (stdio).
    """
    params = request.get("params") or {}
    count = int((params.get("arguments") or {}).get("count", 1000))
    token = json.dumps((params.get("_meta") or {}).get("progressToken", "none"))
    opening = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":' + token + ',"progress":'
    if framing == "sse":
        head, tail = "event: message\ndata: " + opening, "}}\n\n"
    else:
        head, tail = opening, "}}\n"
    total = f',"total":{count}'
    for start in range(1, count + 1, SLICE):
        stop = min(start + SLICE, count + 1)
        yield "".join(f"{head}{i}{total}{tail}" for i in range(start, stop)).encode()
    result = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {
        "content": [{"type": "text", "text": f"sent {count}"}], "isError": False}}, separators=(",", ":"))
    yield (f"event: message\ndata: {result}\n\n" if framing == "sse" else result + "\n").encode()


def http_app():
    """The Starlette app for Streamable HTTP (one endpoint, /mcp)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    session = "bench-session"

    async def endpoint(request: Request) -> Response:
        if request.method == "GET":
            return Response(status_code=405)
        if request.method == "DELETE":
            return Response(status_code=200)
        message = json.loads(await request.body())
        headers = {"mcp-session-id": session}
        if isinstance(message, dict) and message.get("method") == "tools/call":
            async def body() -> Any:
                for chunk in flood(message, "sse"):
                    yield chunk
            return StreamingResponse(body(), media_type="text/event-stream",
                                     headers={**headers, "cache-control": "no-cache"})
        reply = answer(message) if isinstance(message, dict) else None
        if reply is None:
            return Response(status_code=202, headers=headers)
        return JSONResponse(reply, headers=headers)

    return Starlette(routes=[Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"])])


def serve_http(port: int) -> None:
    import asyncio

    import uvicorn

    config = uvicorn.Config(http_app(), host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    async def run() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        sock = server.servers[0].sockets[0]
        print(f"url http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
        await task

    asyncio.run(run())


def serve_stdio() -> None:
    import os
    import selectors
    import time

    out = sys.stdout.buffer
    stdin = sys.stdin.buffer.raw
    selector = selectors.DefaultSelector()
    selector.register(stdin, selectors.EVENT_READ)
    paced: dict[str, list] = {}   # progress token -> [request id, sent, count, interval, next due]
    buffered = b""
    while True:
        due = min((call[4] for call in paced.values()), default=None)
        timeout = None if due is None else max(0.0, due - time.monotonic())
        if selector.select(timeout):
            data = os.read(stdin.fileno(), 1 << 16)
            if not data:
                return
            buffered += data
            *lines, buffered = buffered.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                message = json.loads(line)
                params = message.get("params") or {}
                arguments = params.get("arguments") or {}
                if message.get("method") == "tools/call" and arguments.get("interval"):
                    token = json.dumps((params.get("_meta") or {}).get("progressToken"))
                    paced[token] = [message["id"], 0, int(arguments.get("count", 10)),
                                    float(arguments["interval"]), time.monotonic()]
                elif message.get("method") == "tools/call":
                    for chunk in flood(message, "lines"):
                        out.write(chunk)
                else:
                    reply = answer(message)
                    if reply is not None:
                        out.write(json.dumps(reply).encode() + b"\n")
        now = time.monotonic()
        for token, call in list(paced.items()):
            if call[4] > now:
                continue
            call[1] += 1
            call[4] += call[3]
            # (%-formatting: the JSON's braces stay as they are on the wire)
            out.write(('{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,'  # noqa: UP031
                       '"progress":%d,"total":%d}}\n' % (token, call[1], call[2])).encode())
            if call[1] >= call[2]:
                del paced[token]
                out.write(json.dumps({"jsonrpc": "2.0", "id": call[0], "result": {
                    "content": [{"type": "text", "text": "done"}], "isError": False}}).encode() + b"\n")
        out.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--http", type=int, metavar="PORT")
    group.add_argument("--stdio", action="store_true")
    args = parser.parse_args()
    if args.stdio:
        serve_stdio()
    else:
        serve_http(args.http)


if __name__ == "__main__":
    main()
