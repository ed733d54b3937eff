"""The SSE streams of the Streamable HTTP transport: reading them, and resuming them.

:class:`SseStreams` is the half of :class:`~hostapp.transport.http.StreamableHttpTransport`
that runs in background tasks: the stream that answers a POST (followed until the
request's response arrives, resumed by GET with ``Last-Event-ID`` when it drops, and
asked for again when a resumed connection stays silent; see the module text of
:mod:`hostapp.transport.http` for why) and the standalone GET stream of server-initiated
messages. The transport itself (``http.py``) owns sending, sessions, headers and the HTTP
clients; this half uses its ``_open_get``, ``_raise_for_status`` and ``_take_tools_list``.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import logging

import httpx

from hostapp.protocol.jsonrpc import (
    PARSE_ERROR,
    ErrorResponse,
    InvalidAnswer,
    Message,
    ProtocolError,
    RequestId,
    Response,
    parse,
)
from hostapp.protocol.timing import Timing
from hostapp.transport.base import (
    ConnectionLost,
    HttpStatusError,
    SessionExpired,
    StreamHabits,
    TransportError,
    TransportListener,
)
from hostapp.transport.sse import SseDecoder, SseEventTooLarge

# The streams are the transport's: they log under its name.
log = logging.getLogger("hostapp.transport.http")

# The waits (hostapp.protocol.timing.Timing, the transport's ``timing``):
# - ``resume_budget``: how long after a stream's last good connection its reconnections
#   may go on failing (refused, or bringing nothing new) before it is given up: a
#   duration, whatever number of attempts the back-off fitted in (a count spent itself in
#   seconds when drops were reported quickly, long before the network came back);
# - ``reconnect_cap``: upper bound of the back-off between failed reconnections; also how
#   long the resumed streams of a server seen sending live events on resumed connections
#   may stay silent before they are asked for again;
# - ``resumed_silence``: how long a resumed stream may carry no event before it is asked
#   for again, doubled after each silence up to ``reconnect_cap`` (None: for ever);
# - ``live_event_gap``: an event that reaches a resumed connection this long after the
#   connection opened or after its previous event was sent live, not replayed (a replay
#   is written at once);
# - ``sse_retry``: before reconnecting when the server sent no ``retry``.
#: Statuses that refuse a resumption only for now: a gateway or a restarting server, or
#: (409) a server that still holds the stream's previous connection, which it notices
#: is gone a moment later.
RESUME_LATER_STATUSES = frozenset({409, 502, 503, 504})

ACCEPT_SSE = "text/event-stream"
#: The messages that answer a request.
ANSWERS = (Response, ErrorResponse)


class _StreamEnd(enum.Enum):
    """How one SSE connection of a stream ended."""

    ANSWERED = "the response to the stream's request came"
    CLOSED = "the connection ended or dropped"
    SILENT = "no event came for the allowed silence; the client let go"
    REFUSED = "the server sent something that could not be read; the client let go"


class _StreamState:
    """Where one SSE stream stands: the last event id seen, the server's retry delay, and
    how long a resumed connection of it may stay silent (None: for ever)."""

    __slots__ = ("_first_silence", "bad_last", "last_event_id", "retry_ms", "silence")

    def __init__(self, last_event_id: str | None, silence: float | None = None):
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        #: Why the last message of the stream could not be read (None: it could).
        self.bad_last: ProtocolError | None = None
        self.silence = self._first_silence = silence

    def retry_seconds(self, default_ms: int) -> float:
        return (self.retry_ms if self.retry_ms is not None else default_ms) / 1000

    def quieter(self, cap: float) -> None:
        """A resumed connection fell silent: allow twice the silence next time, up to
        ``cap``, whether or not it brought news before falling silent. (Going
        back to the first allowance after news made a server whose events come further
        apart than it be asked for the stream again after every event: with 2,500
        streams of a progress step every 5 s, hundreds of reconnections a second.)"""
        if self.silence is None:
            return
        self.silence = min(max(self.silence * 2, self._first_silence or 0.0), cap)


def _unreadable_answer(state: _StreamState, request_id: RequestId) -> InvalidAnswer:
    """Why the request of a stream ends with the message it could not read."""
    what = "larger than the limit" if isinstance(state.bad_last, SseEventTooLarge) else "not valid JSON-RPC"
    return InvalidAnswer(f"the server's answer is {what}: {state.bad_last}", PARSE_ERROR, request_id)


class SseStreams:
    """Reading and resuming the SSE streams of one Streamable HTTP endpoint.

    A mixin of :class:`~hostapp.transport.http.StreamableHttpTransport`: the attributes
    and the three methods declared here are the transport's.
    """

    listener: TransportListener
    timing: Timing
    habits: StreamHabits
    max_message_bytes: int
    default_retry_ms: int
    resumed_silence_seconds: float | None
    live_event_gap_seconds: float
    _display_url: str
    _closing: bool
    _stateless: bool
    _session_id: str | None
    _session_gone: bool
    _tools_list_ids: dict[RequestId, bool]

    async def _open_get(self, last_event_id: str | None) -> httpx.Response:
        raise NotImplementedError

    async def _raise_for_status(self, response: httpx.Response, sent_session: bool,
                                message: Message | None, *, resumption: bool = False) -> None:
        raise NotImplementedError

    def _take_tools_list(self, answer: Response | ErrorResponse) -> None:
        raise NotImplementedError

    async def _read_events(self, response: httpx.Response, request_id: RequestId | None,
                           state: _StreamState, silence: float | None = None) -> _StreamEnd:
        """Read one SSE connection until it ends, the response to ``request_id`` comes, or
        (with ``silence``) that many seconds pass without an event.

        Hot path: per event, one decoder step, one ``parse`` and one listener call; ids are
        reported only when they change. Comments (keep-alives) are no event: a connection
        the server only keeps alive is silent. The silence is watched by a timer that looks
        at the time of the last event when it fires (cheaper than moving a timeout at every
        event, and it sees the longer allowance once the server is known to deliver live).
        """
        listener = self.listener
        # Messages on a request's stream belong to that request (an elicitation during a call).
        on_message = listener.on_message if request_id is None else functools.partial(
            listener.on_message, related_request_id=request_id)
        decoder = SseDecoder(self.max_message_bytes)
        too_large: SseEventTooLarge | None = None
        last_id = state.last_event_id
        loop = asyncio.get_running_loop()
        last_news = loop.time()
        habits = self.habits
        watchdog: asyncio.TimerHandle | None = None
        try:
            async with asyncio.timeout_at(None) as quiet:
                if silence is not None:
                    def watch() -> None:
                        nonlocal watchdog
                        allowed = max(silence, self.timing.reconnect_cap) if habits.live_after_resume \
                            else silence
                        if last_news + allowed > loop.time():
                            watchdog = loop.call_at(last_news + allowed, watch)
                        else:
                            quiet.reschedule(loop.time())  # let the connection go now

                    watchdog = loop.call_at(last_news + silence, watch)
                async for chunk in response.aiter_bytes():
                    try:
                        events = decoder.feed(chunk)
                    except SseEventTooLarge as exc:
                        events, too_large = exc.events, exc
                    if events and silence is not None:
                        now = loop.time()
                        if now - last_news >= self.live_event_gap_seconds and not habits.live_after_resume:
                            habits.live_after_resume = True
                            log.debug("%s sends live events on resumed streams", self._display_url)
                        last_news = now
                    for event_id, retry, data, _type in events:
                        if retry is not None:
                            state.retry_ms = retry
                        if event_id and event_id != last_id:
                            last_id = state.last_event_id = event_id
                            listener.on_stream_event(request_id, event_id, state.retry_ms)
                        if not data:
                            continue  # a priming event
                        try:
                            message = parse(data)
                        except ProtocolError as exc:
                            listener.on_invalid(exc, data)
                            state.bad_last = exc
                            continue
                        state.bad_last = None
                        if isinstance(message, ANSWERS):
                            if self._tools_list_ids and message.id in self._tools_list_ids:
                                self._take_tools_list(message)
                            on_message(message)
                            if request_id is not None and message.id == request_id:
                                return _StreamEnd.ANSWERED
                        else:
                            on_message(message)
                    if too_large is not None:
                        listener.on_invalid(too_large, b"")
                        state.bad_last = too_large
                        return _StreamEnd.REFUSED
        except TimeoutError:
            if quiet.expired():
                return _StreamEnd.SILENT
            raise
        except httpx.HTTPError as exc:
            log.debug("SSE connection to %s dropped: %s", self._display_url, type(exc).__name__)
        finally:
            if watchdog is not None:
                watchdog.cancel()
            await response.aclose()
        return _StreamEnd.CLOSED

    async def _follow_stream(self, response: httpx.Response, request_id: RequestId,
                             last_event_id: str | None = None, resumed: bool = False) -> None:
        """Read a request's stream until its response arrives, resuming by GET on drops.

        ``resumed``: ``response`` is already a resumption (a GET with ``Last-Event-ID``
        after a restart), so a silence asks for the stream again like any resumption.
        """
        state = _StreamState(last_event_id, self.resumed_silence_seconds)
        end = await self._read_events(response, request_id, state, state.silence if resumed else None)
        if end is _StreamEnd.ANSWERED or self._closing:
            return
        if end is _StreamEnd.REFUSED or (end is _StreamEnd.CLOSED and state.bad_last is not None):
            # The server closed the request's stream right after a message that could not
            # be read: that was its answer, and resuming would only skip past it.
            self.listener.on_request_lost(request_id, _unreadable_answer(state, request_id))
            return
        if self._stateless:
            self.listener.on_request_lost(request_id, ConnectionLost(
                "the answer stream closed before the response arrived; in the stateless era "
                "a closed stream cannot be resumed"))
            return
        if state.last_event_id is None:
            self.listener.on_request_lost(request_id, ConnectionLost(
                "the answer stream closed before the response arrived and the server gave no "
                "event id to resume from"))
            return
        if end is _StreamEnd.SILENT:
            state.quieter(self.timing.reconnect_cap)
        error = await self._resume_until_done(request_id, state)
        if error is not None and not self._closing:
            self.listener.on_request_lost(request_id, error)

    async def _resume_until_done(self, request_id: RequestId, state: _StreamState) -> Exception | None:
        """Reconnect with Last-Event-ID after each drop or silence; None once done, else why
        it gave up.

        The server's ``retry`` is waited exactly before each reconnection; only after a
        reconnection failed does the wait grow (doubling, up to ``timing.reconnect_cap``). A
        resumed connection that stays silent is no failure (the server took it), so it is
        asked for again without end, only less often while nothing new comes. Failures
        (refused, or a connection that brought nothing new) are given up once they have gone
        on for ``timing.resume_budget`` seconds since the stream last made progress.
        """
        loop = asyncio.get_running_loop()
        failures = 0
        failing_since: float | None = None  # the first failure since the stream last made progress
        delay = state.retry_seconds(self.default_retry_ms)

        def out_of_budget() -> bool:
            nonlocal failing_since
            now = loop.time()
            if failing_since is None:
                failing_since = now
            return now - failing_since >= self.timing.resume_budget

        def gave_up(why: str) -> str:
            return (f"gave up resuming the stream after {loop.time() - (failing_since or 0.0):.0f} s of failed "
                    f"reconnections ({failures} attempts): {why}")

        while not self._closing:
            await asyncio.sleep(delay)
            retry_delay = state.retry_seconds(self.default_retry_ms)
            try:
                response = await self._open_get(state.last_event_id)
            except TransportError as exc:
                failures += 1
                if out_of_budget():
                    return ConnectionLost(gave_up(str(exc)))
                delay = min(max(retry_delay, delay) * 2, self.timing.reconnect_cap)
                continue
            if response.status_code >= 400:
                try:
                    await self._raise_for_status(response, "Mcp-Session-Id" in response.request.headers, None,
                                                 resumption=True)
                except HttpStatusError as exc:
                    if exc.status in RESUME_LATER_STATUSES:
                        failures += 1
                        if not out_of_budget():
                            delay = min(max(retry_delay, delay) * 2, self.timing.reconnect_cap)
                            continue
                    return exc
                return HttpStatusError(response.status_code, "resumption refused")
            if not response.headers.get("content-type", "").startswith(ACCEPT_SSE):
                await response.aclose()
                return ProtocolError("the server answered the resumption with something other than an SSE stream")
            seen_before = state.last_event_id
            end = await self._read_events(response, request_id, state, state.silence)
            if end is _StreamEnd.ANSWERED:
                return None
            if end is _StreamEnd.REFUSED:
                return _unreadable_answer(state, request_id)
            brought_news = state.last_event_id != seen_before
            if end is _StreamEnd.SILENT:
                failures, failing_since = 0, None
                state.quieter(self.timing.reconnect_cap)
                log.debug("resumed stream of %s silent; asking for it again", self._display_url)
            elif brought_news:
                failures, failing_since = 0, None  # progress was made: a new drop, not a failing server
            else:
                failures += 1
                if out_of_budget():
                    return ConnectionLost(gave_up("the reconnections brought nothing new"))
            delay = state.retry_seconds(self.default_retry_ms)
        return None

    async def _standalone_loop(self) -> None:
        """Hold the GET stream for server-initiated messages, reconnecting when it drops."""
        state = _StreamState(None)
        loop = asyncio.get_running_loop()
        failures = 0
        failing_since: float | None = None
        while not self._closing:
            if self._session_gone:
                # The server forgot the session (a request's 404): this stream was the
                # session's, and a GET without its id would ask for nothing of it. The
                # session that replaces it opens its own.
                return
            try:
                response = await self._open_get(state.last_event_id)
                status: int | None = response.status_code
            except TransportError:
                status = None
            if status is None or status in RESUME_LATER_STATUSES:
                # Not now: no connection, or (409) the server allows one standalone stream
                # per session and still holds the one that dropped (it notices a dead
                # connection only when a write fails).
                if status is not None:
                    await response.aclose()
                failures += 1
                if failing_since is None:
                    failing_since = loop.time()
                elif loop.time() - failing_since >= self.timing.resume_budget:
                    log.info("standalone stream of %s given up after %d attempts%s", self._display_url, failures,
                             f": HTTP {status}" if status is not None else "")
                    return
                backoff = self.default_retry_ms / 1000 * 2 ** min(failures, 30)
                await asyncio.sleep(min(backoff, self.timing.reconnect_cap))
                continue
            if status >= 400:
                await response.aclose()
                if status == 404 and "Mcp-Session-Id" in response.request.headers:
                    self._session_id = None
                    self._session_gone = True
                    self.listener.on_closed(SessionExpired(
                        404, f"the server at {self._display_url} no longer knows this session (HTTP 404)"))
                elif status != 405:  # 405: the server offers no standalone stream, which is fine
                    log.info("standalone stream of %s refused: HTTP %s", self._display_url, status)
                return
            if not response.headers.get("content-type", "").startswith(ACCEPT_SSE):
                await response.aclose()
                return
            failures, failing_since = 0, None
            if await self._read_events(response, None, state) is _StreamEnd.REFUSED:
                # Asking again would only fetch the same flood.
                log.warning("standalone stream of %s given up: %s", self._display_url, state.bad_last)
                return
            if self._closing:
                return
            await asyncio.sleep(state.retry_seconds(self.default_retry_ms))
