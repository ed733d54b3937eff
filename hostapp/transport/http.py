"""The Streamable HTTP transport (MCP 2025-03-26 .. 2025-11-25, and the stateless 2026-07-28).

Every message is its own POST to the MCP endpoint. A request is answered either by one
JSON body or by an SSE stream that carries the request's notifications and, last, its
response; that stream is read in a background task. The handshake era keeps a session
(``Mcp-Session-Id``) and lets a dropped stream be resumed: after the server's ``retry``
delay the transport reconnects with GET and ``Last-Event-ID``, and the server replays what
was missed. A request is never POSTed twice. In the stateless era (2026-07-28) there is no
session and no resumption; instead each request mirrors its method and name into headers.

A resumed stream that then stays silent is asked for again: the client closes it and sends
another GET with the newest ``Last-Event-ID``, after a silence that doubles up to
the reconnect cap of its timing. The specification expects the server to go on sending the request's
later messages on the resumed connection, but some servers replay what is stored and then
write nothing more to it (server-everything: its event store answers the replay with an
event id where the SDK expects the stream id, so the SDK files the new connection under
the wrong stream); what the request sends later, its response included, is only stored,
and reaches the client by the next replay. Once a server has sent an event on a resumed
connection well after the replay (a live one), it is known to deliver, and its resumed
streams may stay silent for that cap: thousands of streams resumed
after a restart, of a tool that reports every few seconds, are then not each asked for
again while they wait for their next step. The streams are read and resumed in
hostapp.transport.http_streams; their waits are the transport's ``timing``
(hostapp.protocol.timing). This module sends, keeps the session and builds the headers.

Secrets: the session id and the configured headers (they may hold tokens) never appear in
exception text or logs; URLs in messages are shown without their query string.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import logging
import sys
from collections.abc import Mapping
from types import EllipsisType
from typing import Any

import httpx

if importlib.util.find_spec("sniffio") is None:
    # httpcore asks for sniffio on every request and connection-pool change and takes
    # asyncio when it is missing; a failed import is not remembered, so each attempt
    # searched sys.path again (a sixth of the GUI thread with a few hundred polls a
    # second). Recorded as absent once, the answer is the same and costs nothing.
    sys.modules["sniffio"] = None  # type: ignore[assignment]

from hostapp.protocol.jsonrpc import (
    MAX_MESSAGE_BYTES,
    PARSE_ERROR,
    ErrorResponse,
    InvalidAnswer,
    Message,
    Notification,
    ProtocolError,
    Request,
    RequestId,
    Response,
    encode,
    parse,
)
from hostapp.protocol.timing import DEFAULT_TIMING, Timing
from hostapp.transport.base import (
    STATUS_METHODS,
    ConnectionLost,
    HttpStatusError,
    NoAnswer,
    NotSent,
    SessionExpired,
    StreamHabits,
    Transport,
    TransportError,
    TransportListener,
)
from hostapp.transport.http_headers import (
    InvalidHeaderAnnotation,
    header_params,
    param_headers,
    standard_headers,
)
from hostapp.transport.http_streams import (
    ACCEPT_SSE,
    ANSWERS,
    SseStreams,
)
from hostapp.transport.pool import client_with_pool

log = logging.getLogger(__name__)

#: The revision from which on there are no sessions and no resumable streams.
STATELESS_REVISION = "2026-07-28"
#: The ``_meta`` key in which a stateless-era request names its revision.
PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion"

#: How much of an error body is quoted in an exception.
BODY_EXCERPT_CHARS = 300
#: The largest body of an HTTP error status that is read (for its JSON-RPC error or its words).
MAX_ERROR_BODY_BYTES = 1024 * 1024

_ACCEPT_POST = "application/json, text/event-stream"
# Streams may stay silent for hours (a long tool call); only connecting is bounded (and a
# status request's wait for its answer: Timing.poll_answer).
_STREAM_TIMEOUT = httpx.Timeout(30.0, read=None)
# Every SSE stream in flight holds an HTTP/1.1 connection of its own for as long as its
# request runs, so connections are not capped (httpx's default cap of 100 queued the 101st
# request behind streams that last for hours); idle ones are kept for the polls that
# follow each other (tasks/get). Clients send through hostapp.transport.pool, whose work
# per request does not grow with the number of connections (httpx's own pool walks them
# all, twice per request). Streams (GET resumptions, the standalone stream, calls that
# may answer with a stream) still get a client of their own, so that a poll never waits
# behind a stream's connection setup or its auth flow.
#: POSTs of one transport waiting for their answer's status line at once: thousands of
#: first polls started together (operations resumed at start-up) would otherwise open
#: thousands of connections to one server at once. A stream that follows the status line
#: no longer counts. Repeat polls are bounded further by the engine's poll budget. (32
#: until the connection pool's cost per request stopped growing with its connections; in
#: the stateless era every operation of a server shares one transport, and resuming 10,000
#: operations took 20.7 s at 32, 18.9 s at 64 and 13.5 s at 128 in flight.)
MAX_REQUESTS_IN_FLIGHT = 128
#: Requests whose answer may be a stream held as long as a tool runs: they go through the
#: streams' connection pool too, so that polls never share a pool with hours-long streams.
_LONG_METHODS = frozenset({"tools/call", "tasks/result", "requests/resume", "stream/resume",
                           "subscriptions/listen"})


def _display_url(url: httpx.URL) -> str:
    """The URL as shown to a person: no user info, no query (either may carry a token)."""
    return str(url.copy_with(query=None, fragment=None, username=None, password=None))


class StreamableHttpTransport(SseStreams, Transport):
    """A connection to one MCP endpoint over Streamable HTTP.

    States: created -> connected -> (initialized: session id known, standalone stream open)
    -> closed. Background streams: one per request answered with SSE (until its response
    arrives, resuming by GET when the connection drops, and again when a resumed
    connection stays silent), plus the standalone GET stream; those are read and resumed
    by :class:`~hostapp.transport.http_streams.SseStreams`.

    ``send`` returns once the server answered the POST's status line: for an SSE answer
    that is at once, for a JSON answer when the whole answer is there (it is handed to the
    listener before ``send`` returns). A JSON-RPC error that the server sends with an HTTP
    error status for the request's own id (the stateless era does that: 400 for an
    unsupported version, 404 for an unknown method) is handed to the listener like any
    answer; other error statuses raise :class:`HttpStatusError`.
    """

    acknowledges_requests = True

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        session_id: str | None = None,
        protocol_version: str | None = None,
        stateless: bool = False,
        client: httpx.AsyncClient | None = None,
        standalone_stream: bool = True,
        timing: Timing = DEFAULT_TIMING,
        default_retry_ms: int | None = None,
        resumed_silence_seconds: float | EllipsisType | None = ...,
        auth: httpx.Auth | None = None,
        habits: StreamHabits | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ):
        self.url = httpx.URL(url)
        self._display_url = _display_url(self.url)
        self._headers = dict(headers or {})
        self._session_id = session_id
        self._session_restored = session_id is not None
        self._protocol_version = protocol_version
        self._stateless = stateless
        self._client = client
        self._owns_client = client is None
        self._stream_client: httpx.AsyncClient | None = None  # made on the first GET stream
        # Signs requests in (OAuth, see hostapp.auth); only used for a client made here.
        self._auth = auth
        self.standalone_stream = standalone_stream
        # The waits come from ``timing``; a test may set one of them alone.
        self.timing = timing
        self.default_retry_ms = round(timing.sse_retry * 1000) if default_retry_ms is None else default_retry_ms
        # None: a resumed stream is held however long it stays silent.
        self.resumed_silence_seconds = timing.resumed_silence if resumed_silence_seconds is ... \
            else resumed_silence_seconds
        self.live_event_gap_seconds = timing.live_event_gap
        self.habits = habits or StreamHabits()
        #: The most one message from the server may hold (a JSON body, an SSE event or
        #: line), enforced while it is read: a server that sends more is refused before it
        #: has cost the host more memory than that.
        self.max_message_bytes = max_message_bytes
        self._tasks: set[asyncio.Task[None]] = set()
        self._request_slots = asyncio.Semaphore(MAX_REQUESTS_IN_FLIGHT)
        # A status request waits poll_answer for each read of its answer (the status line
        # first); a stream's reads are not bounded.
        self._status_timeout = httpx.Timeout(_STREAM_TIMEOUT.connect, read=timing.poll_answer)
        self._standalone_task: asyncio.Task[None] | None = None
        self._tool_param_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        # ids of tools/list requests in flight -> whether it asked for the first page
        self._tools_list_ids: dict[RequestId, bool] = {}
        self._closing = False
        self._connected = False
        # The server answered 404 for this transport's session: it must be initialized again.
        self._session_gone = False
        # The task reading each request's own answer stream (POST answered with SSE).
        self._answer_streams: dict[RequestId, asyncio.Task[None]] = {}

    # -- the Transport contract -------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        return self._session_id

    @property
    def protocol_version(self) -> str | None:
        return self._protocol_version

    @property
    def stateless(self) -> bool:
        return self._stateless

    @property
    def can_resume_streams(self) -> bool:
        return True

    def abandon_request(self, request_id: RequestId) -> bool:
        """In the stateless era a request lives on its HTTP response, and closing it is how
        a client abandons it (the server stops the work): the response of ``request_id``
        (an SSE stream, or a JSON answer not yet come) is closed, unread. In the handshake
        era a closed stream is no cancellation (it may be resumed): nothing is closed here."""
        if not self._stateless:
            return False
        reader = self._answer_streams.pop(request_id, None)
        if reader is None or reader.done():
            return False
        reader.cancel()  # its reader closes the response, and so the connection
        return True

    def _answer_stream_ended(self, request_id: RequestId, reader: asyncio.Task[None]) -> None:
        if self._answer_streams.get(request_id) is reader:
            del self._answer_streams[request_id]

    def reopen_standalone_stream(self) -> None:
        if self.standalone_stream:
            self.open_standalone_stream()

    async def connect(self, listener: TransportListener) -> None:
        self.listener = listener
        if self._client is None:
            self._client = client_with_pool(timeout=_STREAM_TIMEOUT, auth=self._auth)
            self._owns_client = True
        self._connected = True
        self._closing = False

    def set_protocol_version(self, version: str | None, *, stateless: bool) -> None:
        """The agreed revision (None: not agreed yet, send no version header).

        With a session id given to the constructor (restored after a restart), this is
        when the standalone stream opens. A session id is kept while the stateless era is
        tried (a fallback to the handshake may still adopt a restored one) but never sent
        in that era.
        """
        self._protocol_version = version
        self._stateless = stateless
        if (self._session_restored and not stateless and version is not None and self.standalone_stream
                and self._connected and self._session_id is not None):
            # A session adopted after a restart sees no new notifications/initialized, which
            # is what opens the standalone stream otherwise.
            self.open_standalone_stream()

    async def send(self, message: Message) -> None:
        client = self._require_client()
        if isinstance(message, Request) and message.method == "initialize":
            # A new session begins: it goes without the old id and takes the one it is given.
            self._session_id = None
            self._session_restored = False
            self._session_gone = False
        elif self._session_gone:
            # The server said the session is gone: nothing more goes out in it (without an
            # id, a server would refuse it for another reason, or take it for a new client).
            raise SessionExpired(404, f"the server at {self._display_url} no longer knows this session; "
                                      "the request was not sent", sent=False)
        headers = self._post_headers(message)
        timeout = _STREAM_TIMEOUT
        if isinstance(message, Request):
            if message.method in _LONG_METHODS:
                client = self._streams_client()
            elif message.method in STATUS_METHODS:
                # Its answer comes at once or was lost: waited for poll_answer, then given up.
                timeout = self._status_timeout
        request = client.build_request("POST", self.url, content=encode(message), headers=headers,
                                       timeout=timeout)
        sent_session = "Mcp-Session-Id" in headers
        if isinstance(message, Request) and message.method == "tools/list":
            self._tools_list_ids[message.id] = not (message.params or {}).get("cursor")
        if not (self._stateless and isinstance(message, Request) and message.method in _LONG_METHODS):
            await self._exchange(message, request, client, sent_session)
            return
        # In the stateless era a request lives on its HTTP exchange, a JSON answer's as much
        # as a stream's: the exchange of a request that may run long is a task of its own,
        # which abandon_request cancels (closing the connection) until a stream reader
        # takes its place.
        exchange = asyncio.ensure_future(self._exchange(message, request, client, sent_session))
        self._answer_streams[message.id] = exchange
        exchange.add_done_callback(functools.partial(self._answer_stream_ended, message.id))
        try:
            await exchange
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if exchange.cancelled() and (current is None or not current.cancelling()):
                return  # abandoned: whoever waits for the answer was told so
            raise

    async def _exchange(self, message: Message, request: httpx.Request, client: httpx.AsyncClient,
                        sent_session: bool) -> None:
        """POST ``message`` and take its answer: a JSON body, an SSE stream (read in a task
        of its own), or nothing (a notification)."""
        async with self._request_slots:
            response = await self._send_http(request, client)
        unread: httpx.Response | None = response  # closed on the way out, unless a task took it
        try:
            if response.status_code >= 400:
                await self._raise_for_status(response, sent_session, message)
                return  # a JSON-RPC error for this request went to the listener
            if not self._stateless and self._session_id is None:
                # The initialize answer assigns the session.
                self._session_id = response.headers.get("mcp-session-id") or None
            if not isinstance(message, Request):
                await response.aclose()  # 202 Accepted, nothing to read
                if (isinstance(message, Notification) and message.method == "notifications/initialized"
                        and self.standalone_stream and not self._stateless):
                    self.open_standalone_stream()
                return
            if response.status_code == 202:
                await response.aclose()
                self.listener.on_request_lost(message.id, ProtocolError(
                    f"the server accepted {message.method} (HTTP 202) but will not answer it"))
                return
            content_type = response.headers.get("content-type", "")
            if content_type.startswith(ACCEPT_SSE):
                reader = self._spawn(self._follow_stream(response, message.id), f"sse-{message.method}")
                self._answer_streams[message.id] = reader
                reader.add_done_callback(functools.partial(self._answer_stream_ended, message.id))
                unread = None  # the task owns it now
                return
            body = await self._read_body(response, self.max_message_bytes)
            await response.aclose()
            if body is None:
                error = InvalidAnswer(f"the server's answer to {message.method} is larger than the limit of "
                                      f"{self.max_message_bytes} bytes; it was not read", request_id=message.id)
                self.listener.on_invalid(error, b"")
                self.listener.on_request_lost(message.id, error)
                return
            self._take_json_answer(body, message, response.status_code)
        except httpx.ReadTimeout:
            raise self._no_answer() from None
        except httpx.HTTPError as exc:
            raise ConnectionLost(f"connection to {self._display_url} lost while reading the answer: "
                                 f"{type(exc).__name__}") from None
        finally:
            if unread is not None and not unread.is_closed:
                await unread.aclose()

    async def close(self, *, end_session: bool = True) -> None:
        """Stop the background streams and, unless told otherwise, end the session (DELETE).

        ``end_session=False`` is for a host that quits while operations are still running
        on this session: it will resume their streams after its restart, which needs the
        session alive.
        """
        if self._closing:
            return
        self._closing = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        client = self._client
        if end_session and client is not None and self._session_id is not None and not self._stateless:
            try:
                request = client.build_request("DELETE", self.url, headers=self._base_headers(), timeout=5.0)
                # Streamed and closed unread: only the status matters, whatever the body holds.
                response = await client.send(request, stream=True)
                await response.aclose()
                if response.status_code not in (200, 202, 204, 404, 405):
                    log.info("DELETE of the session at %s answered HTTP %s", self._display_url,
                             response.status_code)
            except httpx.HTTPError as exc:
                log.info("could not end the session at %s: %s", self._display_url, type(exc).__name__)
        if client is not None and self._owns_client:
            await client.aclose()
            self._client = None
        stream_client, self._stream_client = self._stream_client, None
        if stream_client is not None:
            await stream_client.aclose()
        was_connected, self._connected = self._connected, False
        if was_connected:
            self.listener.on_closed(None)

    # -- beyond the contract -------------------------------------------------------------

    async def resume_stream(self, request_id: RequestId, last_event_id: str) -> None:
        """Reconnect to the stream of ``request_id`` (after a host restart) at once.

        Raises like :meth:`send` when the GET is refused (404 with a session id:
        :class:`SessionExpired`); otherwise the replay is read in the background and a
        further drop is resumed after the server's ``retry`` delay.
        """
        if self._stateless:
            raise TransportError("a stream of the stateless era cannot be resumed")
        response = await self._open_get(last_event_id)
        if response.status_code >= 400:
            await self._raise_for_status(response, "Mcp-Session-Id" in response.request.headers, None,
                                         resumption=True)
            return
        if not response.headers.get("content-type", "").startswith(ACCEPT_SSE):
            await response.aclose()
            raise TransportError(f"the server at {self._display_url} answered the resumption "
                                 "with something other than an SSE stream")
        self._spawn(self._follow_stream(response, request_id, last_event_id=last_event_id, resumed=True),
                    "sse-resume")

    def open_standalone_stream(self) -> None:
        """Open the GET stream for server-initiated messages (done by itself after initialization)."""
        if self._standalone_task is None or self._standalone_task.done():
            self._standalone_task = self._spawn(self._standalone_loop(), "sse-standalone")

    def set_tool_schemas(self, tools: list[Mapping[str, Any]], *, replace: bool = True) -> None:
        """Learn which tool arguments are mirrored into ``Mcp-Param-*`` headers (2026-07-28).

        Done by itself for every ``tools/list`` answer that passes through; public for a
        host that restores a cached tool list. Tools with invalid annotations are skipped.
        """
        designated = {} if replace else dict(self._tool_param_headers)
        for tool in tools:
            schema = tool.get("inputSchema")
            name = tool.get("name")
            if not isinstance(schema, Mapping) or not isinstance(name, str):
                continue
            try:
                params = header_params(schema)
            except InvalidHeaderAnnotation:
                continue
            if params:
                designated[name] = params
            else:
                designated.pop(name, None)
        self._tool_param_headers = designated

    def _take_tools_list(self, answer: Response | ErrorResponse) -> None:
        """A ``tools/list`` answer: learn the header designations, drop invalid tools.

        The specification makes this the Streamable HTTP client's duty: a tool whose
        ``x-mcp-header`` annotations are invalid is excluded from the result (with a
        warning), so that one bad definition does not make the others unusable.
        """
        first_page = self._tools_list_ids.pop(answer.id)  # type: ignore[arg-type]
        tools = answer.result.get("tools") if isinstance(answer, Response) else None
        if not isinstance(tools, list):
            return
        if not self._stateless:  # a rule of 2026-07-28; older servers know no such annotation
            self.set_tool_schemas([t for t in tools if isinstance(t, dict)], replace=first_page)
            return
        valid = []
        for tool in tools:
            schema = tool.get("inputSchema") if isinstance(tool, dict) else None
            if isinstance(schema, Mapping):
                try:
                    header_params(schema)
                except InvalidHeaderAnnotation as exc:
                    log.warning("tool %r of %s left out: %s", tool.get("name"), self._display_url, exc)
                    continue
            valid.append(tool)
        if len(valid) != len(tools) and isinstance(answer, Response):
            answer.result = {**answer.result, "tools": valid}
        self.set_tool_schemas(valid, replace=first_page)

    # -- headers --------------------------------------------------------------------------

    def _base_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self._session_id is not None and not self._stateless:
            headers["Mcp-Session-Id"] = self._session_id
        if self._protocol_version is not None:
            headers["MCP-Protocol-Version"] = self._protocol_version
        return headers

    def _post_headers(self, message: Message) -> dict[str, str]:
        headers = self._base_headers()
        headers["Accept"] = _ACCEPT_POST
        headers["Content-Type"] = "application/json"
        if isinstance(message, Request):
            params = message.params
            meta = params.get("_meta") if params else None
            # A request that names its revision in _meta must carry the same in the header;
            # this also covers the era probe (server/discover) sent before anything is agreed.
            body_version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
            if isinstance(body_version, str):
                headers["MCP-Protocol-Version"] = body_version
            if self._stateless or body_version is not None:
                headers.update(standard_headers(message.method, params))
                if message.method == "tools/call" and params and self._tool_param_headers:
                    designated = self._tool_param_headers.get(params.get("name"))  # type: ignore[arg-type]
                    if designated:
                        headers.update(param_headers(designated, params.get("arguments")))
        return headers

    # -- HTTP plumbing --------------------------------------------------------------------

    def _require_client(self) -> httpx.AsyncClient:
        if self._client is None or self._closing:
            raise NotSent(f"the connection to {self._display_url} is closed; the request was not sent")
        return self._client

    async def _send_http(self, request: httpx.Request, client: httpx.AsyncClient | None = None) -> httpx.Response:
        # Checked again here: a request may have waited for a slot while the transport closed.
        client = self._require_client() if client is None or self._closing else client
        try:
            return await client.send(request, stream=True)
        except httpx.ReadTimeout:
            raise self._no_answer() from None
        except httpx.ConnectError as exc:
            raise TransportError(f"cannot connect to {self._display_url}: {_reason(exc)}") from None
        except httpx.TimeoutException:
            raise TransportError(f"cannot connect to {self._display_url}: timed out") from None
        except httpx.HTTPError as exc:
            raise ConnectionLost(f"connection to {self._display_url} failed: {_reason(exc)}") from None

    def _no_answer(self) -> NoAnswer:
        """A read timed out: only a status request's reads are bounded (``_status_timeout``)."""
        return NoAnswer(f"no answer from {self._display_url} within {self.timing.poll_answer:g} s; "
                        "the request was given up")

    async def _open_get(self, last_event_id: str | None) -> httpx.Response:
        headers = self._base_headers()
        headers["Accept"] = ACCEPT_SSE
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        client = self._streams_client()
        request = client.build_request("GET", self.url, headers=headers, timeout=_STREAM_TIMEOUT)
        return await self._send_http(request, client)

    def _streams_client(self) -> httpx.AsyncClient:
        """The client for long streams (the given one, when a client was given)."""
        client = self._require_client()
        if not self._owns_client:
            return client
        if self._stream_client is None:
            self._stream_client = client_with_pool(timeout=_STREAM_TIMEOUT, auth=self._auth)
        return self._stream_client

    async def _raise_for_status(self, response: httpx.Response, sent_session: bool,
                                message: Message | None, *, resumption: bool = False) -> None:
        """Turn an HTTP error status into the right exception (or a JSON-RPC error answer).

        ``resumption``: the response refused a GET with ``Last-Event-ID``. Its 404 says
        the stream cannot be had in this session (a server may say so for a stream of
        another session, too); the session id is kept for the transport's other requests,
        which would otherwise all go out without one. Whether the session itself is gone
        is for a request of the session to tell.
        """
        try:
            # Only a JSON-RPC error or a few words are of use here: a larger body is not read.
            raw = await self._read_body(response, MAX_ERROR_BODY_BYTES)
            body = raw.decode("utf-8", errors="replace") if raw is not None else ""
        except httpx.HTTPError:
            body = ""
        finally:
            await response.aclose()
        status = response.status_code
        excerpt = " ".join(body.split())[:BODY_EXCERPT_CHARS]
        if status == 404 and sent_session and resumption:
            raise SessionExpired(status, f"the server at {self._display_url} knows no such stream in this "
                                         "session (HTTP 404)", excerpt)
        if status == 404 and sent_session:
            self._session_id = None  # the next initialize must go without it
            self._session_gone = True
            raise SessionExpired(status, f"the server at {self._display_url} no longer knows this session "
                                         "(HTTP 404); it must be initialized again", excerpt, unprocessed=True)
        if isinstance(message, Request) and body:
            answer = self._error_answer_for(body, message.id)
            if answer is not None:
                self.listener.on_message(answer)
                return
        if status == 405:
            what = "POST" if message is not None else response.request.method
            text = (f"the server at {self._display_url} does not accept HTTP {what} (405 Method Not Allowed); "
                    "is this the address of an MCP endpoint?")
        elif status == 500:
            text = f"the server at {self._display_url} failed with an internal error (HTTP 500)"
        elif status in (401, 403):
            text = f"the server at {self._display_url} refused access (HTTP {status} {response.reason_phrase})"
        else:
            text = f"the server at {self._display_url} answered HTTP {status} {response.reason_phrase}"
        if excerpt:
            text = f"{text}: {excerpt}"
        raise HttpStatusError(status, text, excerpt)

    @staticmethod
    def _error_answer_for(body: str, request_id: RequestId) -> ErrorResponse | None:
        try:
            answer = parse(body)
        except ProtocolError:
            return None
        if isinstance(answer, ErrorResponse) and answer.id == request_id:
            return answer
        return None

    @staticmethod
    async def _read_body(response: httpx.Response, limit: int) -> bytes | None:
        """The body of ``response``, or None when it is larger than ``limit`` bytes.

        Read in chunks and counted as it comes (not read whole, then measured): an endless
        body costs no more than the limit. A Content-Length over the limit is refused
        before anything is read.
        """
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return None
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)

    def _take_json_answer(self, body: bytes, request: Request, status: int) -> None:
        """The JSON body that answers ``request``. Nothing else will come for the request on
        this POST, so a body that is not its answer (empty, not JSON-RPC, another message)
        ends the request with the reason instead of leaving it waiting for ever."""
        if not body.strip():
            reason = f"it is empty (HTTP {status})"
            self.listener.on_invalid(ProtocolError(f"empty answer (HTTP {status}) to {request.method}"), body)
        else:
            try:
                answer = parse(body)
            except ProtocolError as exc:
                self.listener.on_invalid(exc, body)
                reason = str(exc)
            else:
                if type(answer) is ErrorResponse and answer.id is None:
                    # JSON-RPC's "id": null means the server could not tell which request
                    # it answers; the body of this POST can only answer this one.
                    answer = ErrorResponse(request.id, answer.error)
                self._deliver(answer)
                if isinstance(answer, ANSWERS) and answer.id == request.id:
                    return
                reason = f"it is {_describe(answer)}, not the response to request {request.id!r}"
        self.listener.on_request_lost(request.id, InvalidAnswer(
            f"the server's answer to {request.method} is not valid JSON-RPC: {reason}", PARSE_ERROR, request.id))

    def _deliver(self, message: Message) -> None:
        if self._tools_list_ids and isinstance(message, ANSWERS) and message.id in self._tools_list_ids:
            self._take_tools_list(message)
        self.listener.on_message(message)

    def _spawn(self, coro: Any, name: str) -> asyncio.Task[None]:
        task = asyncio.create_task(self._logging_failures(coro, name), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _logging_failures(self, coro: Any, name: str) -> None:
        # A background stream has nobody to raise to: a bug (in a listener, say) is logged
        # rather than left as a task exception nobody retrieves.
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("background stream %s of %s failed", name, self._display_url)

def _describe(message: Message) -> str:
    """A message as named in an error: its kind and method or id, never its contents."""
    if isinstance(message, Request):
        return f"a request ({message.method})"
    if isinstance(message, Notification):
        return f"a notification ({message.method})"
    return f"the answer to request {message.id!r}"


def _reason(exc: BaseException) -> str:
    # httpx wraps the OS error; its text is the plain reason ("[Errno 111] Connection refused")
    # and never contains request headers.
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]
