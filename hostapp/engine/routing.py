"""Which operation a server's message is about: the engine's request ownership.

A server names an operation by the request it is about: a response, a server-to-client
request on that request's stream, an SSE event id, a notification's related request id.
:class:`RequestRouting` keeps the operations of this process and answers "whose is it":
which operation sent which request id in which session of which server, which one claims
a notification no request names, which are in flight on a server, and which share an
HTTP session (an adopted earlier session is ended when its last operation ends).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hostapp.protocol.jsonrpc import RequestId

if TYPE_CHECKING:
    from hostapp.engine.runner import OperationRunner
    from hostapp.engine.session import ClientSession

#: (server, ClientSession.scope, request id): a request id is unique per session only,
#: and each earlier host process whose session was adopted numbered its requests from 1.
RequestKey = tuple[str, str | None, RequestId]


class RequestRouting:
    """The operations of this process and the requests each one owns.

    ``runners``: every operation this process carries, by id (ended ones leave it).
    """

    def __init__(self) -> None:
        self.runners: dict[str, OperationRunner] = {}
        self._owner: dict[RequestKey, OperationRunner] = {}
        # operation id -> its keys in _owner, so that ending one does not look at all of them
        self._owned: dict[str, set[RequestKey]] = {}
        # (server, HTTP session id) -> the operations whose handles live in that session
        self._session_users: dict[tuple[str, str], set[OperationRunner]] = {}

    def add(self, runner: OperationRunner) -> None:
        self.runners[runner.id] = runner

    def in_flight_of(self, server: str) -> list[OperationRunner]:
        """The operations of ``server`` that have not ended."""
        return [r for r in self.runners.values() if r.server == server and not r.done]

    # -- requests ------------------------------------------------------------------

    def own(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        """``runner`` sent (or awaits the answer to) request ``rid`` in ``session``."""
        key = (runner.server, session.scope, rid)
        self._owner[key] = runner
        self._owned.setdefault(runner.id, set()).add(key)

    def disown(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        key = (runner.server, session.scope, rid)
        owned = self._owned.get(runner.id)
        if owned is not None:
            owned.discard(key)
        if self._owner.get(key) is runner:
            del self._owner[key]

    def owner(self, server: str, scope: str | None, rid: RequestId | None) -> OperationRunner | None:
        """The operation that sent request ``rid`` in the session ``scope`` of ``server``."""
        if rid is None:
            return None
        return self._owner.get((server, scope, rid))

    def claimant(self, server: str, method: str, params: dict[str, Any]) -> OperationRunner | None:
        """The operation whose mechanism recognises a message no request id names."""
        for runner in self.in_flight_of(server):
            if runner.mech.claims(method, params):
                return runner
        return None

    def still_answering(self, server: str, session: ClientSession) -> set[OperationRunner]:
        """The operations whose requests in ``session`` still await their answers there."""
        return {owner for (srv, _scope, rid), owner in self._owner.items()
                if srv == server and owner.session is session and session.is_pending(rid)}

    # -- HTTP sessions ---------------------------------------------------------------

    def bind_http_session(self, runner: OperationRunner, old: tuple[str, str] | None,
                          new: tuple[str, str] | None) -> None:
        """The HTTP session ``runner``'s handle lives in changed from ``old`` to ``new``."""
        if old is not None:
            key = (runner.server, old[0])
            peers = self._session_users.get(key)
            if peers is not None:
                peers.discard(runner)
                if not peers:
                    del self._session_users[key]
        if new is not None:
            self._session_users.setdefault((runner.server, new[0]), set()).add(runner)

    def shares_http_session(self, runner: OperationRunner, session_id: str) -> bool:
        """Does another operation's handle live in the HTTP session ``session_id`` too?"""
        return any(r is not runner for r in self._session_users.get((runner.server, session_id), ()))

    # -- ending --------------------------------------------------------------------

    def forget(self, runner: OperationRunner) -> None:
        """An ended operation: it owns nothing any more."""
        self.runners.pop(runner.id, None)
        for key in self._owned.pop(runner.id, ()):
            if self._owner.get(key) is runner:
                del self._owner[key]
