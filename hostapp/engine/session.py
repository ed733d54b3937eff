"""The client session: one negotiated conversation with one MCP server.

Sits on a :class:`~hostapp.transport.base.Transport` and gives the layers above awaitable
requests. It correlates responses with requests, gives every request that wants progress
its own progress token and routes ``notifications/progress`` to it (dropping values that
do not increase), sends ``notifications/cancelled`` when an awaiting caller is cancelled,
dispatches server-to-client requests (elicitation, sampling, roots, ping) to pluggable
:class:`ClientHandlers`, and runs the two "ask the person, then retry" loops of the
protocol: MRTR (``resultType: "input_required"``) and error -32042 (URL elicitation
required).

It knows nothing of durability: the operations service above decides what to journal.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from hostapp import CLIENT_NAME, __version__
from hostapp.engine.server_logs import LOG_LEVEL_META
from hostapp.protocol import eras
from hostapp.protocol.eras import ServerInfo
from hostapp.protocol.excerpt import excerpt, redacted
from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
    ErrorObject,
    ErrorResponse,
    IdAllocator,
    InvalidAnswer,
    Message,
    Notification,
    ProtocolError,
    Request,
    RequestId,
    Response,
    RpcError,
    encode,
)
from hostapp.transport.base import (
    ConnectionLost,
    HttpStatusError,
    NotSent,
    SessionExpired,
    Transport,
    TransportError,
)

log = logging.getLogger(__name__)

ProgressCallback = Callable[[float, float | None, str | None], None]

#: How many times one call may come back asking for more input before we give up: a
#: server that keeps asking forever must not keep the person answering forever.
MAX_INPUT_ROUNDS = 32
#: Server request ids remembered per session to recognise a replayed request.
MAX_TAKEN_IDS = 4096

#: How often an answer to a server's request is sent again after the network lost it,
#: and the first pause (doubling): about half a minute in all. A lost answer would leave
#: the server waiting for ever (a task stays ``input_required``); an answer that did
#: arrive and is sent again is a response to an id the server has done with, which it
#: ignores.
ANSWER_RETRIES = 5
ANSWER_RETRY_SECONDS = 1.0
#: Ids of requests given up (cancelled, timed out) remembered, so that their late answer
#: is not taken for a stray one.
MAX_ABANDONED_IDS = 1024

DEFAULT_CLIENT_INFO = {"name": CLIENT_NAME, "title": "hostapp", "version": __version__}


def default_capabilities() -> dict[str, Any]:
    """What a plain session declares; the operations service adds the durable mechanisms."""
    return {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {},
        "roots": {"listChanged": False},
    }


@dataclass(slots=True)
class RequestContext:
    """Where a server-to-client request comes from, so a person can be told who asks."""

    session: ClientSession
    request_id: RequestId | None = None
    related_request_id: RequestId | None = None
    related_task_id: str | None = None
    method: str = ""


class ClientHandlers:
    """Answers to what a server may ask or tell the client. Subclass and override.

    The defaults decline everything a person would have to answer, so a headless client
    never hangs on a question nobody can see.
    """

    async def elicit(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return {"action": "decline"}

    async def create_message(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        raise RpcError(METHOD_NOT_FOUND, "sampling is not available in this client")

    async def request_as_task(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """A question or sampling request sent as a task (2025-11-25 ``tasks.requests``):
        the ``CreateTaskResult``. By default it is answered as if sent plainly (allowed to
        a client that did not declare task-augmented requests)."""
        plain = {k: v for k, v in params.items() if k != "task"}
        return await (self.elicit(plain, ctx) if method == "elicitation/create" else self.create_message(plain, ctx))

    async def client_task(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """The server's ``tasks/get``, ``tasks/result``, ``tasks/list`` or ``tasks/cancel``
        about the client's own tasks."""
        raise RpcError(METHOD_NOT_FOUND, f"the client does not handle {method}")

    async def list_roots(self, ctx: RequestContext) -> dict[str, Any]:
        return {"roots": []}

    def on_log(self, params: dict[str, Any]) -> None:
        log.info("server log: %s", params.get("data"))

    def on_list_changed(self, method: str) -> None:
        pass

    def on_notification(self, method: str, params: dict[str, Any], related_request_id: RequestId | None) -> None:
        """Every notification not consumed by the session itself (tasks status, streams, ...)."""

    def on_stream_event(self, request_id: RequestId | None, event_id: str, retry_ms: int | None) -> None:
        """An SSE event id was seen on a request's stream (journaled for resumption)."""

    def on_answer_sent(self, ctx: RequestContext) -> None:
        """The answer to the server's request ``ctx`` went out (or was refused for good):
        the server is not owed it any more."""

    def on_protocol_error(self, error: Exception) -> None:
        """Bad input from the server that the session survived (malformed, unknown id, ...)."""
        if not isinstance(error, StrayAnswer):  # the session has logged that one already
            log.warning("%s", error)

    def on_closed(self, error: Exception | None) -> None:
        """The connection ended; pending requests have already failed."""


class StrayAnswer(ProtocolError):
    """An answer for a request id nobody was waiting for (counted in :class:`StrayAnswers`)."""


@dataclass(slots=True)
class StrayAnswers:
    """Answers a server sent for request ids nobody was waiting for, on one session.

    Such an answer is dropped (there is nobody to give it to), but a request that waits
    for ever is often explained by it: a server that answers under the wrong id. Shown by
    the window and the CLI next to the server; ``last`` quotes the message (cut, escaped,
    secrets redacted, see hostapp.protocol.excerpt).
    """

    count: int = 0
    last_id: RequestId | None = None
    last: str = ""


@dataclass(slots=True)
class _Pending:
    method: str
    future: asyncio.Future
    progress_token: str | int | None = None


@dataclass(slots=True)
class _ProgressRoute:
    callback: ProgressCallback
    last: float | None = None
    #: False for a route whose owner keeps its own high-water mark (an operation's, which
    #: outlives this session): progress is then checked once, there.
    monotonic: bool = True


class ClientSession:
    """One conversation with one server.

    States: new → connecting → ready → closed. ``connect`` negotiates the era;
    requests are allowed once ready.
    """

    def __init__(self, transport: Transport, handlers: ClientHandlers | None = None, *,
                 client_info: dict[str, Any] | None = None,
                 capabilities: dict[str, Any] | Callable[[str], dict[str, Any]] | None = None,
                 ids: IdAllocator | None = None,
                 discover_timeout: float = 10.0):
        self.transport = transport
        self.handlers = handlers or ClientHandlers()
        self.client_info = dict(client_info or DEFAULT_CLIENT_INFO)
        # Either one capability object, or a function of the era (the durable mechanisms
        # declare different things to handshake-era and stateless servers).
        self._capabilities = capabilities if capabilities is not None else default_capabilities()
        self.ids = ids or IdAllocator()
        #: Which of a server's sessions this is, for telling apart requests of the same id:
        #: None for the connection's own, the session id for an adopted earlier session
        #: (each earlier host process numbered its requests from 1).
        self.scope: str | None = None
        self.discover_timeout = discover_timeout
        self.server: ServerInfo | None = None
        self.state = "new"
        self._pending: dict[RequestId, _Pending] = {}
        self._progress: dict[str | int, _ProgressRoute] = {}
        self._served: dict[RequestId, asyncio.Task] = {}
        # Ids of the server's requests already taken (bounded): a replayed stream may bring one again.
        self._taken: OrderedDict[RequestId, None] = OrderedDict()
        self._abandoned: OrderedDict[RequestId, None] = OrderedDict()
        #: Answers to ids nobody was waiting for (public: the window and CLI show it).
        self.stray_answers = StrayAnswers()
        self._closed_error: Exception | None = None
        self._token_prefix = secrets.token_hex(4)
        #: The log level every request names in the 2026-07-28 era (None: none is named,
        #: and the server sends no log messages); a handshake-era session is told it with
        #: ``logging/setLevel`` instead.
        self.log_level: str | None = None

    # -- lifecycle -------------------------------------------------------------------

    async def connect(self, version: str | None = None) -> ServerInfo:
        """Open the transport and agree on a revision.

        ``version`` pins one revision; None tries the stateless era first and falls back
        to the ``initialize`` handshake offering 2025-11-25.
        """
        self.state = "connecting"
        await self.transport.connect(self)
        if version is not None:
            eras.era_of(version)  # a clear error for a revision we do not speak
        if version in (None, eras.STATELESS_VERSION):
            info = await self._try_discover(required=version is not None)
            if info is not None:
                self.server = info
                self.state = "ready"
                return info
        offer = version or eras.HANDSHAKE_OFFER
        self.transport.set_protocol_version(None, stateless=False)
        params = eras.initialize_params(self.client_info, self.capabilities_for(eras.HANDSHAKE), offer)
        result = await self.request("initialize", params,
                                    _allow_before_ready=True)
        info = eras.accept_initialize_result(result, offer)
        self.transport.set_protocol_version(info.protocol_version, stateless=False)
        self.server = info
        self.state = "ready"
        await self.notify("notifications/initialized")
        return info

    async def adopt(self, info: ServerInfo) -> None:
        """Take over a session a previous process initialized (its id is in the transport).

        No ``initialize``: the server already knows this session. Used to resume the
        streams of operations after a host restart; a 404 will say if it is gone.
        """
        await self.transport.connect(self)
        self.transport.set_protocol_version(info.protocol_version, stateless=info.era == eras.STATELESS)
        self.server = info
        self.state = "ready"

    async def _try_discover(self, *, required: bool) -> ServerInfo | None:
        self.transport.set_protocol_version(eras.STATELESS_VERSION, stateless=True)
        self.server = ServerInfo(eras.STATELESS_VERSION, eras.STATELESS)  # so the request carries _meta
        try:
            try:
                result = await asyncio.wait_for(
                    self.request("server/discover", {}, _allow_before_ready=True), self.discover_timeout)
            except RpcError as exc:
                # -32022 names the versions the server supports: if ours is among them
                # (the first request was refused for another reason), ask once more.
                supported = exc.data.get("supported") if isinstance(exc.data, dict) else None
                if exc.code != UNSUPPORTED_PROTOCOL_VERSION or not isinstance(supported, list) \
                        or eras.STATELESS_VERSION not in supported:
                    raise
                result = await asyncio.wait_for(
                    self.request("server/discover", {}, _allow_before_ready=True), self.discover_timeout)
        except (TimeoutError, RpcError, HttpStatusError, ProtocolError) as exc:
            self.server = None
            if isinstance(exc, HttpStatusError) and exc.status in (401, 403):
                raise
            if required:
                raise TransportError(f"the server does not speak {eras.STATELESS_VERSION}: {exc}") from None
            log.debug("server/discover failed (%s); falling back to initialize", exc)
            return None
        info = eras.accept_discover_result(result)
        if info is None:
            self.server = None
            if required:
                raise TransportError(f"the server does not list {eras.STATELESS_VERSION} among its versions")
            return None
        return info

    async def close(self, *, end_session: bool = True) -> None:
        """Close the connection; ``end_session=False`` keeps an HTTP session alive on the
        server for operations that will be resumed after a restart."""
        if self.state == "closed":
            return
        self.state = "closed"
        for task in list(self._served.values()):
            task.cancel()
        try:
            await self.transport.close(end_session=end_session)
        finally:
            self._fail_all(ConnectionLost("the connection was closed"))

    async def __aenter__(self) -> ClientSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def capabilities_for(self, era: str) -> dict[str, Any]:
        caps = self._capabilities
        return caps(era) if callable(caps) else caps

    @property
    def era(self) -> str | None:
        return self.server.era if self.server else None

    # -- outgoing --------------------------------------------------------------------

    def new_progress_token(self, request_id: RequestId) -> str:
        """Progress tokens are unique per request, and across sessions too."""
        return f"{self._token_prefix}-{request_id}"

    def _with_meta(self, params: dict[str, Any] | None, extra_meta: dict[str, Any] | None) -> dict[str, Any]:
        params = dict(params or {})
        meta = dict(params.get("_meta") or {})
        if self.server is not None and self.server.era == eras.STATELESS:
            meta.update(eras.stateless_meta(self.client_info, self.capabilities_for(eras.STATELESS),
                                             self.server.protocol_version))
            if self.log_level is not None:
                meta[LOG_LEVEL_META] = self.log_level
        if extra_meta:
            meta.update(extra_meta)
        if meta:
            params["_meta"] = meta
        return params

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      on_progress: ProgressCallback | None = None,
                      progress_token: str | int | None = None,
                      request_id: RequestId | None = None,
                      meta: dict[str, Any] | None = None,
                      timeout: float | None = None,
                      on_accepted: Callable[[], None] | None = None,
                      _allow_before_ready: bool = False) -> dict[str, Any]:
        """Send one request and return its result; raise RpcError for an error answer.

        ``request_id`` reuses a known id (SEP-975's same-id ``requests/resume``); otherwise a
        fresh one is allocated. Cancelling the awaiting task tells the server.
        ``on_accepted`` is called when the server has taken the request and not answered it
        yet (a stream that will carry the answer); only on transports that can tell
        (``Transport.acknowledges_requests``).
        """
        if isinstance(self._closed_error, SessionExpired):
            # Ended because the server forgot it: this request was never sent.
            raise SessionExpired(404, str(self._closed_error), sent=False)
        if self.state != "ready" and not _allow_before_ready:
            raise NotSent(f"{method} was not sent: the session is {self.state}")
        if self._closed_error is not None:
            raise self._closed_error
        rid = request_id if request_id is not None else self.ids.next()
        extra = dict(meta or {})
        token = None
        if on_progress is not None:
            token = progress_token if progress_token is not None else self.new_progress_token(rid)
            extra["progressToken"] = token
            self._progress[token] = _ProgressRoute(on_progress)
        elif progress_token is not None:
            # The caller routes this token itself (route_progress): it outlives the request.
            extra["progressToken"] = progress_token
        msg = Request(rid, method, self._with_meta(params, extra))
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = self._pending[rid] = _Pending(method, future, token)
        try:
            try:
                await self.transport.send(msg)
            except SessionExpired as exc:
                if exc.unprocessed:
                    # The server no longer knows this session (a restart forgets them):
                    # it is over, and whoever can make a new one is told. This request was
                    # not processed, which its caller hears from the error it gets.
                    self._release(rid, entry)
                    self.on_closed(exc)
                raise
            if on_accepted is not None and not future.done() and self.transport.acknowledges_requests:
                on_accepted()
            if timeout is not None:
                return await asyncio.wait_for(asyncio.shield(future), timeout)
            return await future
        except asyncio.CancelledError:
            if not future.done():
                self._abandon(rid)
                await self._send_cancel(rid, "cancelled by the user")
            raise
        except TimeoutError:
            self._abandon(rid)
            await self._send_cancel(rid, f"no answer within {timeout} s")
            raise
        finally:
            self._release(rid, entry)

    def abandon(self, request_id: RequestId) -> bool:
        """Give up the answer to ``request_id`` the way the era has a client do it, where
        that is by closing its stream (the stateless era over HTTP: the server stops the
        work when the stream closes). True if so: whoever awaits the answer hears that it
        was abandoned, and a late answer is not taken for a stray one. False: the caller
        sends ``notifications/cancelled``, as every other era and transport has it."""
        if self.era != eras.STATELESS or not self.transport.abandon_request(request_id):
            return False
        self._abandon(request_id)
        pending = self._pending.get(request_id)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(ConnectionLost(f"{pending.method} was abandoned: its stream was closed"))
        return True

    def _abandon(self, rid: RequestId) -> None:
        self._abandoned[rid] = None
        if len(self._abandoned) > MAX_ABANDONED_IDS:
            self._abandoned.popitem(last=False)

    def _release(self, rid: RequestId, entry: _Pending) -> None:
        # Its caller is past waiting (answered, refused, cancelled, or its send failed after
        # the session closed and failed the answer too): a failure nobody will read now is
        # marked read, else asyncio reports it (at an agent's stop, once per request in flight).
        if entry.future.done() and not entry.future.cancelled():
            entry.future.exception()
        # Only our own entry: a later request may have taken the same id (same-id resume).
        if self._pending.get(rid) is entry:
            del self._pending[rid]
            if entry.progress_token is not None:
                self._progress.pop(entry.progress_token, None)

    async def await_response(self, request_id: RequestId, method: str, *,
                             on_progress: ProgressCallback | None = None,
                             progress_token: str | int | None = None) -> dict[str, Any]:
        """Wait for the answer to a request sent earlier, perhaps by a previous process.

        Used when a stream is resumed (GET with Last-Event-ID after a host restart): the
        response arrives under the original id, which this session never sent.
        """
        if progress_token is not None and on_progress is not None:
            self._progress[progress_token] = _ProgressRoute(on_progress)
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        entry = self._pending[request_id] = _Pending(method, future, progress_token)
        try:
            return await future
        finally:
            self._release(request_id, entry)

    async def _send_cancel(self, rid: RequestId, reason: str) -> None:
        try:
            await self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})
        except (TransportError, RpcError) as exc:
            log.debug("could not send cancellation for %s: %s", rid, exc)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.transport.send(Notification(method, params))

    def route_progress(self, token: str | int, callback: ProgressCallback) -> None:
        """Route progress of a token this session did not allocate (a resumed operation's).
        Values reach ``callback`` checked for their types only: its owner keeps the
        high-water mark (an operation's outlives the session)."""
        self._progress[token] = _ProgressRoute(callback, monotonic=False)

    def unroute_progress(self, token: str | int) -> None:
        self._progress.pop(token, None)

    # -- convenience -----------------------------------------------------------------

    async def list_tools(self) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(1000):  # a server that pages forever must not hang the host
            result = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(t for t in result.get("tools", []) if isinstance(t, dict))
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return tools

    def is_pending(self, request_id: RequestId) -> bool:
        """Is an answer to this request still awaited on this session?"""
        pending = self._pending.get(request_id)
        return pending is not None and not pending.future.done()

    async def ping(self) -> None:
        await self.request("ping")

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *,
                        on_progress: ProgressCallback | None = None,
                        progress_token: str | int | None = None,
                        extra_params: dict[str, Any] | None = None,
                        meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool to completion, answering input requests through the handlers.

        Returns the final result: a CallToolResult, or whatever non-input result the
        server chose (a task handle, for instance) for the caller to interpret.
        """
        params: dict[str, Any] = {"name": name, "arguments": arguments or {}}
        if extra_params:
            params.update(extra_params)
        return await self.request_with_input(
            "tools/call", params, on_progress=on_progress, progress_token=progress_token, meta=meta)

    async def request_with_input(self, method: str, params: dict[str, Any], *,
                                 on_progress: ProgressCallback | None = None,
                                 progress_token: str | int | None = None,
                                 meta: dict[str, Any] | None = None,
                                 on_round: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
                                 ) -> dict[str, Any]:
        """A request with the MRTR and -32042 loops around it.

        ``on_round`` sees each ``input_required`` result before the handlers are asked, so
        the operations service can journal the ``requestState`` (answerable after a restart).
        """
        current = dict(params)
        for _ in range(MAX_INPUT_ROUNDS):
            try:
                result = await self.request(method, current, on_progress=on_progress,
                                            progress_token=progress_token, meta=meta)
            except RpcError as exc:
                if exc.code != URL_ELICITATION_REQUIRED:
                    raise
                await self._satisfy_url_elicitations(exc, method)
                continue
            if eras.result_type(result) != "input_required":
                return result
            if on_round is not None:
                maybe = on_round(result)
                if asyncio.iscoroutine(maybe):
                    await maybe
            responses = await self.answer_input_requests(result.get("inputRequests") or {})
            current = {k: v for k, v in current.items() if k not in ("inputResponses", "requestState")}
            current["inputResponses"] = responses
            if result.get("requestState") is not None:
                current["requestState"] = result["requestState"]
        raise RpcError(INTERNAL_ERROR, f"{method} still asked for input after {MAX_INPUT_ROUNDS} rounds; giving up")

    async def answer_input_requests(self, input_requests: dict[str, Any]) -> dict[str, Any]:
        """Answer MRTR input requests by the same handlers as server-to-client requests."""
        responses: dict[str, Any] = {}
        for key, req in input_requests.items():
            if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                raise ProtocolError(f"input request {key!r} is not a request object")
            ctx = RequestContext(self, None, None, None, req["method"])
            responses[key] = await self._answer(req["method"], req.get("params") or {}, ctx)
        return responses

    async def _satisfy_url_elicitations(self, exc: RpcError, method: str) -> None:
        data = exc.data if isinstance(exc.data, dict) else {}
        elicitations = data.get("elicitations")
        if not isinstance(elicitations, list) or not elicitations:
            raise RpcError(exc.code, f"{exc.message} (the server named no URL to open)", exc.data)
        for params in elicitations:
            if not isinstance(params, dict):
                raise ProtocolError("error -32042 carries an elicitation that is not an object")
            answer = await self.handlers.elicit(dict(params, mode=params.get("mode", "url")),
                                                RequestContext(self, None, None, None, "elicitation/create"))
            if answer.get("action") != "accept":
                raise RpcError(exc.code, f"{method} needs the person to open a URL first, and they did not "
                                         f"({answer.get('action', 'decline')})", exc.data)

    # -- incoming --------------------------------------------------------------------

    def on_message(self, message: Message, related_request_id: RequestId | None = None) -> None:
        if isinstance(message, (Response, ErrorResponse)):
            self._on_response(message)
        elif isinstance(message, Notification):
            self._on_notification(message, related_request_id)
        elif isinstance(message, Request):
            self._on_request(message, related_request_id)

    def _on_response(self, message: Response | ErrorResponse) -> None:
        pending = self._pending.get(message.id) if message.id is not None else None
        if pending is None:
            if isinstance(message, ErrorResponse) and message.id is None:
                self.handlers.on_protocol_error(RpcError.from_error(message.error))
            elif message.id is not None and message.id in self._abandoned:
                del self._abandoned[message.id]
                log.debug("late answer to request %r, given up before it came", message.id)
            else:
                self._on_stray_answer(message)
            return
        if pending.future.done():
            return
        if isinstance(message, Response):
            pending.future.set_result(message.result)
        else:
            pending.future.set_exception(RpcError.from_error(message.error))

    def _on_stray_answer(self, message: Response | ErrorResponse) -> None:
        quoted = excerpt(encode(redacted(message.to_obj())))
        stray = self.stray_answers
        stray.count += 1
        stray.last_id = message.id
        stray.last = quoted
        error = StrayAnswer(f"the server answered request id {message.id!r}, which is not pending; "
                            f"ignored: {quoted}", request_id=message.id)
        # A warning whatever the handlers make of it: a request waiting for ever is often
        # explained by a server that answers under another id.
        log.warning("%s", error)
        self.handlers.on_protocol_error(error)

    def _on_notification(self, message: Notification, related: RequestId | None) -> None:
        method, params = message.method, message.params or {}
        if method == "notifications/progress":
            self._on_progress(params)
        elif method == "notifications/message":
            self.handlers.on_log(params)
        elif method == "notifications/cancelled":
            request_id = params.get("requestId")
            task = self._served.get(request_id) if isinstance(request_id, (str, int)) else None
            if task is not None:
                task.cancel()
        elif method.endswith("/list_changed"):
            self.handlers.on_list_changed(method)
        else:
            self.handlers.on_notification(method, params, related)

    def _on_progress(self, params: dict[str, Any]) -> None:
        token = params.get("progressToken")
        route = self._progress.get(token) if isinstance(token, (str, int)) else None
        if route is None:
            self.handlers.on_protocol_error(
                ProtocolError(f"progress for unknown token {token!r}; ignored"))
            return
        progress = params.get("progress")
        if isinstance(progress, bool) or not isinstance(progress, (int, float)):
            self.handlers.on_protocol_error(ProtocolError(f"progress value {progress!r} is not a number; ignored"))
            return
        if route.monotonic:
            if route.last is not None and progress <= route.last:
                return  # progress never moves backwards, nor repeats (a replayed event)
            route.last = progress
        total = params.get("total")
        message = params.get("message")
        route.callback(progress, total if isinstance(total, (int, float)) and not isinstance(total, bool) else None,
                       message if isinstance(message, str) else None)

    def _on_request(self, message: Request, related: RequestId | None) -> None:
        if self._taken_before(message.id):
            log.debug("ignoring %s id %r: a replay of a request already taken", message.method, message.id)
            return
        meta = (message.params or {}).get("_meta") or {}
        task_meta = meta.get(eras.RELATED_TASK_META_KEY) if isinstance(meta, dict) else None
        ctx = RequestContext(self, message.id, related,
                             task_meta.get("taskId") if isinstance(task_meta, dict) else None, message.method)
        task = asyncio.get_running_loop().create_task(self._serve(message, ctx))
        self._served[message.id] = task
        rid = message.id
        task.add_done_callback(lambda _t: self._served.pop(rid, None))

    def _taken_before(self, request_id: RequestId) -> bool:
        """Has this session already taken a server request with this id?

        The spec forbids reusing an id within a session, so a second one is a replay (a
        resumed SSE stream) and must not be answered again: a question would be asked
        twice. The stateless era has no session: ids there are only unique per stream.
        """
        if self.transport.stateless:
            return False
        if request_id in self._taken:
            return True
        self._taken[request_id] = None
        if len(self._taken) > MAX_TAKEN_IDS:
            self._taken.popitem(last=False)
        return False

    async def _serve(self, message: Request, ctx: RequestContext) -> None:
        try:
            result = await self._answer(message.method, message.params or {}, ctx)
            reply: Message = Response(message.id, result)
        except asyncio.CancelledError:
            return  # the server cancelled its own request: no answer is owed
        except RpcError as exc:
            reply = ErrorResponse(message.id, exc.to_error())
        except Exception as exc:  # a handler bug must not take the session down
            log.exception("handler for %s failed", message.method)
            reply = ErrorResponse(message.id, ErrorObject(INTERNAL_ERROR, f"the client failed to answer: {exc}"))
        if await self._send_answer(reply, message.method):
            self.handlers.on_answer_sent(ctx)

    async def answer_earlier_request(self, request_id: RequestId, result: dict[str, Any], method: str, *,
                                     error: RpcError | None = None) -> bool:
        """Answer a request the server sent to an earlier life of the host in this session
        (a question asked again after a restart), with ``result`` or, given one, ``error``;
        the id counts as taken, so a replay of it is not asked a third time. True once the
        server has it (or refused it for good)."""
        self._taken_before(request_id)
        reply: Message = Response(request_id, result) if error is None else ErrorResponse(request_id, error.to_error())
        return await self._send_answer(reply, method)

    async def _send_answer(self, reply: Message, method: str) -> bool:
        """Send an answer, again after a network failure; False if it was lost."""
        pause = ANSWER_RETRY_SECONDS
        for attempt in range(ANSWER_RETRIES + 1):
            try:
                await self.transport.send(reply)
                return True
            except HttpStatusError as exc:
                if exc.refused_for_good:
                    log.warning("could not answer %s: %s", method, exc)
                    return True
                error: TransportError = exc
            except TransportError as exc:
                error = exc
            if self.state == "closed" or attempt == ANSWER_RETRIES:
                break
            log.info("the answer to %s was lost (%s); sending it again in %.0f s", method, error, pause)
            await asyncio.sleep(pause)
            pause *= 2
        log.warning("could not answer %s: %s", method, error)
        return False

    async def _answer(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        if method == "ping":
            return {}
        if method in ("elicitation/create", "sampling/createMessage") and "task" in params:
            if not isinstance(params["task"], dict):
                raise RpcError(INVALID_PARAMS, "task must be an object")
            return await self.handlers.request_as_task(method, params, ctx)
        if method == "elicitation/create":
            if not isinstance(params.get("message", ""), str):
                raise RpcError(INVALID_PARAMS, "elicitation message must be a string")
            return await self.handlers.elicit(params, ctx)
        if method == "sampling/createMessage":
            return await self.handlers.create_message(params, ctx)
        if method in ("tasks/get", "tasks/result", "tasks/list", "tasks/cancel"):
            return await self.handlers.client_task(method, params, ctx)
        if method == "roots/list":
            return await self.handlers.list_roots(ctx)
        raise RpcError(METHOD_NOT_FOUND, f"the client does not handle {method}")

    def on_invalid(self, error: Exception, raw: bytes | str) -> None:
        self.handlers.on_protocol_error(error)

    def on_stream_event(self, request_id: RequestId | None, event_id: str, retry_ms: int | None) -> None:
        self.handlers.on_stream_event(request_id, event_id, retry_ms)

    def on_request_lost(self, request_id: RequestId, error: Exception) -> None:
        pending = self._pending.get(request_id)
        if pending is not None and not pending.future.done():
            if isinstance(error, InvalidAnswer):
                # The server answered, with something unreadable: the request failed, like
                # one answered with an error (nothing was lost that a retry would find).
                pending.future.set_exception(RpcError(error.code, str(error)))
                return
            # An HTTP refusal keeps its type: the caller tells "session gone" from "network".
            pending.future.set_exception(error if isinstance(error, (ConnectionLost, HttpStatusError))
                                         else ConnectionLost(f"the answer to {pending.method} was lost: {error}"))

    def on_closed(self, error: Exception | None) -> None:
        err = error or ConnectionLost("the server closed the connection")
        if not isinstance(err, TransportError):
            err = ConnectionLost(str(err))
        if self.state != "closed":
            self._closed_error = err
            self.state = "closed"
        if isinstance(err, SessionExpired):
            # The requests still waiting were taken by the server before it forgot the
            # session: what became of them is not known, unlike the refused one.
            err = SessionExpired(err.status, f"{err}; the requests it was answering are lost with it")
        self._fail_all(err)
        self.handlers.on_closed(error)

    def on_log(self, line: str) -> None:
        log.debug("server stderr: %s", line)

    def _fail_all(self, error: Exception) -> None:
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(error)
