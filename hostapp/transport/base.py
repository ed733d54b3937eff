"""What every transport offers the engine, and the errors a transport raises.

A transport carries JSON-RPC messages to one server and hands everything that comes
back to a :class:`TransportListener`. It knows nothing of requests' meaning: the
session layer above correlates ids, the transport only keeps the byte streams alive
(and, for Streamable HTTP, resumes a dropped SSE stream by itself).
"""

from __future__ import annotations

import abc
from typing import Protocol

from hostapp.protocol.jsonrpc import Message, RequestId


class TransportError(Exception):
    """The connection to the server failed; the message says how, in plain words."""


class ConnectionLost(TransportError):
    """The server went away (process exited, socket closed) while messages were in flight."""


class NoAnswer(TransportError):
    """A request that only asks how operations are doing went out and its answer did not
    come within its bound (``Timing.poll_answer``): it is given up, its connection closed.
    The server may be fine (a proxy kept the answer, the connection stalled): asked again,
    it may answer."""


#: Requests that only ask how operations are doing: short by nature, and asked again when
#: their answer does not come (:class:`NoAnswer`). The first three are the status polls that
#: a server's operations repeat on a timer.
POLL_METHODS = frozenset({"tasks/get", "tools/async/status", "requests/getStatus"})
STATUS_METHODS = POLL_METHODS | {"tasks/list"}


class NotSent(TransportError):
    """The request did not leave: its session had ended, or was closing, before it went
    out. Nothing of it reached the server, so it cannot have run."""


class ServerExited(ConnectionLost):
    """A stdio server process ended."""

    def __init__(self, message: str, returncode: int | None = None):
        super().__init__(message)
        self.returncode = returncode


#: Statuses that say "not now" rather than anything about the request or the session: a
#: request timeout and a rate limit. Like 5xx, they are asked again after a pause.
BUSY_STATUSES = (408, 429)


class HttpStatusError(TransportError):
    """The server answered an HTTP request with an error status."""

    def __init__(self, status: int, message: str, body: str = ""):
        super().__init__(message)
        self.status = status
        self.body = body

    @property
    def refused_for_good(self) -> bool:
        """The server refused this request itself (a 4xx that is not BUSY_STATUSES):
        sending the same again would not help. 5xx and busy answers may pass later."""
        return self.status < 500 and self.status not in BUSY_STATUSES


class SessionExpired(HttpStatusError):
    """HTTP 404 on a request that carried a session id: the session is gone, initialize again.

    ``unprocessed``: the refused request itself was not processed. The specification says
    so of a request answered 404 for its session, so it may be sent again, once, in a new
    session. False for a stream asked for again: what it carried may have run.
    ``sent``: False when the request never left, because the session was known to be gone
    before it went out (it is unprocessed too).
    """

    def __init__(self, status: int, message: str, body: str = "", *, unprocessed: bool = False,
                 sent: bool = True):
        super().__init__(status, message, body)
        self.unprocessed = unprocessed or not sent
        self.sent = sent


class TransportListener(Protocol):
    """Callbacks from a transport into the session layer (all called on the event loop)."""

    def on_message(self, message: Message, related_request_id: RequestId | None = None) -> None:
        """One parsed message arrived from the server.

        ``related_request_id`` is the id of the client request whose response stream carried
        it (Streamable HTTP), or None (stdio, or the standalone GET stream). The session uses
        it to tell the person which operation a server-to-client request belongs to.
        """

    def on_invalid(self, error: Exception, raw: bytes | str) -> None:
        """Something arrived that is not a valid message; the connection stays usable."""

    def on_stream_event(self, request_id: RequestId | None, event_id: str, retry_ms: int | None) -> None:
        """An SSE event with an id was seen on the stream of ``request_id`` (None: standalone GET).

        The engine journals the last id so a stream can be resumed after a host restart.
        """

    def on_request_lost(self, request_id: RequestId, error: Exception) -> None:
        """The stream that was to carry the answer of ``request_id`` ended and cannot be resumed."""

    def on_closed(self, error: Exception | None) -> None:
        """The whole connection ended (None: closed on purpose)."""

    def on_log(self, line: str) -> None:
        """A line of the server's own log (stderr of a stdio server)."""


class StreamHabits:
    """What has been learned about one server's streams, shared by all the transports to
    it (its main session and the earlier sessions adopted after a restart)."""

    __slots__ = ("live_after_resume",)

    def __init__(self) -> None:
        #: The server sent a live event on a resumed connection (see hostapp.transport.http).
        self.live_after_resume = False


class Transport(abc.ABC):
    """A connection to one MCP server.

    ``send`` returns once the message is handed to the server (for HTTP: once the POST was
    accepted, its answer streaming in the background) and raises :class:`TransportError`
    when it could not be. Answers and server messages go to ``listener``.
    """

    listener: TransportListener
    #: Whether ``send`` returning means the server has taken a request: for Streamable HTTP
    #: its status line came (an error it answered at once has been delivered by then); for
    #: stdio the bytes were only written.
    acknowledges_requests = False

    @abc.abstractmethod
    async def connect(self, listener: TransportListener) -> None: ...

    @abc.abstractmethod
    async def send(self, message: Message) -> None: ...

    @abc.abstractmethod
    async def close(self, *, end_session: bool = True) -> None: ...

    def set_protocol_version(  # noqa: B027 - a default: transports that send no headers ignore it
            self, version: str | None, *, stateless: bool) -> None:
        """Told once the era and revision are agreed (HTTP sends them as headers).

        None (used before ``initialize``) means: send no ``MCP-Protocol-Version`` header.
        By default nothing: a transport without headers has nothing to do with it.
        """

    @property
    def session_id(self) -> str | None:
        """The server-issued session this transport speaks in (Streamable HTTP), if any."""
        return None

    def abandon_request(self, request_id: RequestId) -> bool:
        """Stop waiting for the answer to ``request_id`` by closing the stream that carries
        it, where that is how a client abandons a request (Streamable HTTP in the
        stateless era: the request lives on its response stream). True if closed; False
        when this transport has no such stream for it (the caller sends
        ``notifications/cancelled`` instead). By default False."""
        return False

    @property
    def stateless(self) -> bool:
        """Whether the stateless era's rules apply: no session, and request ids are only
        unique within one stream (so a repeated id is not a replay)."""
        return False

    @property
    def can_resume_streams(self) -> bool:
        """Whether :meth:`resume_stream` can reconnect to a request's answer stream."""
        return False

    async def resume_stream(self, request_id: RequestId, last_event_id: str) -> None:
        """Reconnect to the answer stream of ``request_id`` from ``last_event_id`` (after a
        host restart); what it replays goes to the listener. Raises :class:`TransportError`
        when it cannot; by default a transport has no streams to resume."""
        raise TransportError(f"{self.kind} cannot resume a stream")

    def reopen_standalone_stream(self) -> None:  # noqa: B027 - a default: most transports keep no such stream
        """The connection is back after a break: open the stream for server-initiated
        messages again if this transport keeps one (it may have given up meanwhile).
        By default nothing: a transport without such a stream has nothing to reopen."""

    @property
    def kind(self) -> str:
        return type(self).__name__
