"""Streamable HTTP front end of the lab (Starlette), endpoint ``/mcp``.

* POST: one JSON-RPC message. Requests that may send messages before their answer
  (tools/call and friends) are answered with an SSE stream that opens with a priming
  event (id, empty data, ``retry``); handshake-era streams carry an event id on every
  event (``<stream>:<seq>``) and can be replayed by GET with ``Last-Event-ID``, also after
  a lab restart. Other requests get one JSON body.
* GET: the session's standalone stream, or a replay when ``Last-Event-ID`` is given.
* DELETE: ends the session. An unknown session id answers 404.
* ``/lab/consent/<elicitationId>``: the page a URL-mode elicitation points at; opening it
  completes that elicitation.

Handshake era: closing a response stream is not a cancellation (the work goes on and the
stream stays replayable). Stateless era (2026-07-28): closing it cancels the request.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hostapp.lab.core import HEADER_MISMATCH, STATELESS, STATELESS_VERSION, STREAMED_METHODS, HttpRpcError, LabCore
from hostapp.protocol.eras import PROTOCOL_VERSION_META_KEY
from hostapp.protocol.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CAPABILITY,
    Notification,
    ProtocolError,
    Request,
    parse,
)

#: ``retry`` sent with every priming event: how long a client waits before reconnecting.
RETRY_MS = 500


def _error(status: int, code: int, message: str, request_id: Any = None, data: Any = None) -> JSONResponse:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return JSONResponse({"jsonrpc": "2.0", "id": request_id, "error": error}, status_code=status)


def build_app(core: LabCore, loopback_only: bool = True) -> Starlette:
    """The lab's ASGI application. ``loopback_only`` refuses foreign Host/Origin headers."""

    def sse(stream_id: str, after: int, *, event_ids: bool, ephemeral: bool) -> AsyncIterator[str]:
        retry_ms = max(1, round(core.scaled(RETRY_MS)))

        async def events() -> AsyncIterator[str]:
            finished = False
            sent = 0
            last_seq = after
            try:
                yield f"id: {stream_id}:{after}\nretry: {retry_ms}\ndata: \n\n" if event_ids \
                    else f"retry: {retry_ms}\ndata: \n\n"
                async for seq, message in core.tail(stream_id, after):
                    data = json.dumps(message, separators=(",", ":"), ensure_ascii=False)
                    yield (f"id: {stream_id}:{seq}\n" if event_ids else "") + f"event: message\ndata: {data}\n\n"
                    # Written is not delivered: only the stream's clean end says the client
                    # has it (a connection that stalls and dies lost what it held).
                    last_seq = seq
                    sent += 1
                    if not ephemeral and core.faults.drop_after and sent >= core.faults.drop_after:
                        row = core.state.stream(stream_id)
                        if row is None or not (row["closed"] and not core.state.messages_after(stream_id, seq)):
                            return  # --drop-after: close the connection; the stream stays resumable
                finished = True
                core.delivered(stream_id, last_seq)
            finally:
                if not finished and ephemeral:
                    core.disconnected(stream_id)
        return events()

    def sse_response(stream_id: str, after: int, *, event_ids: bool, ephemeral: bool,
                     headers: dict[str, str] | None = None) -> StreamingResponse:
        return StreamingResponse(sse(stream_id, after, event_ids=event_ids, ephemeral=ephemeral),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", **(headers or {})})

    async def post(request: HttpRequest) -> Response:
        body = await request.body()
        try:
            message = parse(body)
        except ProtocolError as exc:
            return _error(400, exc.code, str(exc), exc.request_id)
        session_id = request.headers.get("mcp-session-id")
        header_version = request.headers.get("mcp-protocol-version")
        if isinstance(message, Notification):
            core.notification(message.method, message.params, session_id)
            return Response(status_code=202)
        if not isinstance(message, Request):
            core.client_response(message.to_obj())
            return Response(status_code=202)
        params = message.params or {}
        meta = params.get("_meta") or {}
        stateless_request = header_version == STATELESS_VERSION or PROTOCOL_VERSION_META_KEY in meta
        if message.method == "initialize" and not stateless_request:
            new_session, result = core.initialize(params)
            return JSONResponse({"jsonrpc": "2.0", "id": message.id, "result": result},
                                headers={"Mcp-Session-Id": new_session})
        try:
            call = core.make_call(message.id, message.method, params, session_id=session_id,
                                  header_version=header_version, transport="http")
        except HttpRpcError as err:
            return _error(err.status, err.code, err.message, message.id, err.data)
        if message.method == "initialize":
            return _error(404, METHOD_NOT_FOUND, "initialize is not part of the 2026-07-28 protocol", message.id)
        if call.era == STATELESS:
            mismatch = _header_mismatch(request, message.method, params)
            if mismatch:
                return _error(400, HEADER_MISMATCH, mismatch, message.id)
        early = core.precheck(call)
        if early is not None:
            return _error(400, early.code, early.message, message.id, early.data)
        if message.method not in STREAMED_METHODS:
            response = await core.answer(call)
            code = (response or {}).get("error", {}).get("code")
            status = 200
            if call.era == STATELESS:
                status = {METHOD_NOT_FOUND: 404, MISSING_REQUIRED_CAPABILITY: 400}.get(code, 200)
            return JSONResponse(response, status_code=status)
        stream_id = core.start_streamed(call)
        ephemeral = call.era == STATELESS
        if "text/event-stream" in request.headers.get("accept", "text/event-stream"):
            return sse_response(stream_id, 0, event_ids=not ephemeral, ephemeral=ephemeral)
        # A client that takes only JSON gets the answer alone; the messages before it are dropped.
        answer = None
        async for _seq, sent in core.tail(stream_id, 0):
            if "method" not in sent and sent.get("id") == message.id:
                answer = sent
        return JSONResponse(answer) if answer is not None else Response(status_code=204)

    async def get(request: HttpRequest) -> Response:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None:
            return _error(405 if request.headers.get("mcp-protocol-version") == STATELESS_VERSION else 400,
                          INVALID_REQUEST, "GET needs an Mcp-Session-Id")
        session = core.state.session(session_id)
        if session is None:
            return _error(404, INVALID_REQUEST, "unknown or ended session; initialize again")
        last_event_id = request.headers.get("last-event-id")
        if last_event_id:
            stream_id, _, seq_text = last_event_id.rpartition(":")
            row = core.state.stream(stream_id) if stream_id else None
            if row is None or row["session_key"] != session.key or not seq_text.isdigit():
                return _error(404, INVALID_REQUEST, "unknown Last-Event-ID for this session")
            return sse_response(stream_id, int(seq_text), event_ids=True, ephemeral=False)
        row = core.state.stream(session.session_stream)
        assert row is not None  # a session's own stream lives as long as the session
        return sse_response(session.session_stream, row["delivered_seq"], event_ids=True, ephemeral=False)

    async def delete(request: HttpRequest) -> Response:
        session_id = request.headers.get("mcp-session-id")
        if session_id is None or not core.end_session(session_id):
            return _error(404, INVALID_REQUEST, "unknown or ended session")
        return Response(status_code=204)

    async def mcp(request: HttpRequest) -> Response:
        if core.faults.refusing():
            return Response("lab refusing requests (--refuse-for)", status_code=503,
                            headers={"Retry-After": "1"})
        if loopback_only and rebinding_suspect(request):
            return _error(403, INVALID_REQUEST, "Host or Origin is not a loopback address")
        if request.method == "POST":
            return await post(request)
        if request.method == "GET":
            return await get(request)
        return await delete(request)

    async def consent(request: HttpRequest) -> Response:
        if not core.url_visited(request.path_params["elicitation_id"]):
            return HTMLResponse("<h1>Unknown or finished request</h1>", status_code=404)
        return HTMLResponse("<h1>Thank you</h1><p>The lab got your confirmation; you can close this page.</p>")

    return Starlette(routes=[
        Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]),
        Route("/lab/consent/{elicitation_id}", consent, methods=["GET"]),
    ])


#: Methods whose target (tool or prompt name, resource URI) travels in ``Mcp-Name``.
NAMED_METHODS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def _header_mismatch(request: HttpRequest, method: str, params: dict[str, Any]) -> str | None:
    """2026-07-28 routing headers (SEP-2243) must be present and agree with the body."""
    header_method = request.headers.get("mcp-method")
    if header_method is None:
        return "missing Mcp-Method header"
    if header_method.strip() != method:
        return f"Mcp-Method header {header_method.strip()!r} does not match the body's method {method!r}"
    name = params.get(NAMED_METHODS[method]) if method in NAMED_METHODS else None
    header_name = request.headers.get("mcp-name")
    if name is not None and header_name is None:
        return "missing Mcp-Name header"
    if name is not None and header_name is not None and header_name.strip() != name:
        return f"Mcp-Name header {header_name.strip()!r} does not match {name!r}"
    return None


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def _host_of(value: str) -> str:
    """The host part of a Host header or an Origin URL, without port."""
    value = value.split("://", 1)[-1].split("/", 1)[0]
    if value.startswith("["):
        return value[: value.find("]") + 1]
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def rebinding_suspect(request: HttpRequest) -> bool:
    """A loopback lab answers only pages and clients that name a loopback host (DNS rebinding).

    ``Origin: null`` is refused like any foreign origin: browsers send it from sandboxed
    frames, ``data:`` and ``file:`` pages and after cross-origin redirects, and a simple
    request (a ``text/plain`` POST, no preflight) from such a page could otherwise reach
    the lab (a ``notifications/cancelled`` ends a call in flight). Clients that are not
    browsers send no Origin at all."""
    host = request.headers.get("host")
    if host is not None and _host_of(host).lower() not in LOOPBACK_HOSTS:
        return True
    origin = request.headers.get("origin")
    return origin is not None and (origin.strip().lower() == "null" or _host_of(origin).lower() not in LOOPBACK_HOSTS)
