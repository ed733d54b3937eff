"""A server's resources on request: browsed, read, and watched for updates.

Listing and reading go through :func:`hostapp.engine.diagnostics.server_session`: the
connection the owner keeps (a stdio server is never started twice), or, where no owner
keeps one, a connection for the question alone. Nothing is read ahead of a person's asking.

Watching needs the live connection: ``resources/subscribe`` holds for the session it was
sent in, so :class:`ResourceWatches` counts the watchers of each resource (the window's
dialog, a ``hostapp resources … watch``), subscribes on the first and unsubscribes after
the last, and subscribes again in every new session of the server (a reconnect, a
server restart). Each ``notifications/resources/updated`` reaches the clients as the
server-wide event ``resource_updated`` (``{"server", "uri"}``; see
:mod:`hostapp.engine.traffic`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hostapp.engine.diagnostics import server_session
from hostapp.protocol import eras
from hostapp.protocol.jsonrpc import METHOD_NOT_FOUND, RpcError
from hostapp.protocol.resources import (
    LIST_METHOD,
    MAX_PAGES,
    READ_METHOD,
    SUBSCRIBE_METHOD,
    TEMPLATES_METHOD,
    UNSUBSCRIBE_METHOD,
    entries,
    parse_contents,
)
from hostapp.transport.base import TransportError

if TYPE_CHECKING:
    from hostapp.engine.port import EnginePort
    from hostapp.engine.session import ClientSession

log = logging.getLogger(__name__)

#: How long browsing waits for the server's connection (a server that is offline says so).
CONNECT_TIMEOUT_SECONDS = 30.0


class ResourcesRefused(ValueError):
    """What cannot be done with this server's resources, in plain words (it offers none, it
    cannot be subscribed to, the engine holds no connection to keep a subscription on)."""


async def _all_pages(session: ClientSession, method: str, key: str, uri_field: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page, cursor = entries(await session.request(method, {"cursor": cursor} if cursor else {}), key, uri_field)
        found.extend(page)
        if cursor is None or cursor in seen:
            break
        seen.add(cursor)
    return found


async def list_resources(engine: EnginePort, name: str) -> dict[str, Any]:
    """Every resource and resource template server ``name`` lists (all pages), and whether
    it offers subscriptions: ``{"resources", "templates", "subscribe"}``."""
    async with server_session(engine, name, CONNECT_TIMEOUT_SECONDS) as (session, info):
        offered = info.capabilities.get("resources")
        if not isinstance(offered, dict):
            raise ResourcesRefused(f"{name} offers no resources (it does not declare the resources capability)")
        resources = await _all_pages(session, LIST_METHOD, "resources", "uri")
        try:
            templates = await _all_pages(session, TEMPLATES_METHOD, "resourceTemplates", "uriTemplate")
        except RpcError as exc:
            if exc.code != METHOD_NOT_FOUND:
                raise
            templates = []
    return {"resources": resources, "templates": templates,
            "subscribe": bool(offered.get("subscribe")) and info.era == eras.HANDSHAKE}


async def read_resource(engine: EnginePort, name: str, uri: str) -> dict[str, Any]:
    """``resources/read`` of ``uri`` on server ``name``: ``{"contents": [...]}``, each content
    with its ``uri``, ``mimeType`` and ``text`` or ``blob`` (base64) as the server sent it."""
    async with server_session(engine, name, CONNECT_TIMEOUT_SECONDS) as (session, _info):
        return {"contents": parse_contents(await session.request(READ_METHOD, {"uri": uri}))}


class ResourceWatches:
    """Who watches which resource of which server, and the subscriptions that follow."""

    def __init__(self) -> None:
        self._watchers: dict[tuple[str, str], int] = {}

    def uris(self, server: str) -> list[str]:
        return [uri for (name, uri), count in self._watchers.items() if name == server and count > 0]

    async def watch(self, engine: EnginePort, server: str, uri: str) -> None:
        """One more watcher of ``uri``; the first subscribes on the live connection."""
        if not engine.holds_connections:
            raise ResourcesRefused("watching a resource needs the agent's connection to the server")
        _conn, session = await engine.live_session(server, CONNECT_TIMEOUT_SECONDS)
        key = (server, uri)
        if self._watchers.get(key, 0) == 0:
            info = session.server
            offered = info.capabilities.get("resources") if info is not None else None
            if session.era != eras.HANDSHAKE:
                raise ResourcesRefused(f"{server} speaks {info.protocol_version if info else 'a newer revision'}, "
                                       "where updates come on a subscriptions/listen stream, which hostapp does "
                                       "not hold for resources")
            if not isinstance(offered, dict) or not offered.get("subscribe"):
                raise ResourcesRefused(f"{server} does not offer subscriptions to its resources")
            await session.request(SUBSCRIBE_METHOD, {"uri": uri})
        self._watchers[key] = self._watchers.get(key, 0) + 1

    async def unwatch(self, engine: EnginePort, server: str, uri: str) -> None:
        """One watcher fewer; after the last, the server is told (when it is connected)."""
        key = (server, uri)
        count = self._watchers.get(key, 0)
        if count <= 1:
            self._watchers.pop(key, None)
        else:
            self._watchers[key] = count - 1
            return
        conn = engine.connections.get(server)
        session = conn.session if conn is not None else None
        if count == 1 and session is not None and session.state == "ready":
            try:
                await session.request(UNSUBSCRIBE_METHOD, {"uri": uri})
            except (RpcError, TransportError) as exc:  # it ends with the session anyway
                log.info("%s: resources/unsubscribe %s failed: %s", server, uri, exc)

    async def resubscribe(self, server: str, session: ClientSession) -> None:
        """A new session of ``server``: subscribe again to what is watched."""
        for uri in self.uris(server):
            try:
                await session.request(SUBSCRIBE_METHOD, {"uri": uri})
            except (RpcError, TransportError) as exc:
                log.info("%s: could not subscribe again to %s: %s", server, uri, exc)

    def forget(self, server: str) -> None:
        for key in [k for k in self._watchers if k[0] == server]:
            del self._watchers[key]
