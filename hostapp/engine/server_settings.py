"""Settings of a server that its live connection takes without starting again.

Most of a server's configuration is how to reach it (command, URL, headers, sign-in): a
change there starts a new connection. Its roots and its log level are what the client
tells the server inside a connection, so a change of those alone is written to the
journal, handed to the connection and told to the server on a live session: roots with
``notifications/roots/list_changed`` (as the roots capability's ``listChanged``
promises; the next ``roots/list`` is answered with them), the level with
``logging/setLevel`` (to a server that declares logging). Each new session is given the
level too (:func:`on_new_session`); in the 2026-07-28 era, which has no session, every
request names it in ``_meta``. Operations in flight are not disturbed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from hostapp.engine.server_logs import SET_LEVEL_METHOD
from hostapp.protocol import eras
from hostapp.protocol.jsonrpc import RpcError
from hostapp.protocol.roots import LIST_CHANGED
from hostapp.transport.base import TransportError

if TYPE_CHECKING:
    from hostapp.engine.session import ClientSession
    from hostapp.engine.supervisor import ServerConnection
    from hostapp.store.server_config import ServerConfig

log = logging.getLogger(__name__)

#: The configuration fields a live connection takes as they change.
LIVE_FIELDS = frozenset({"roots", "log_level"})
#: Fields the engine itself records (not settings a person changes).
RUNTIME_FIELDS = frozenset({"session_ref", "last_seen"})


def only_live_changes(old: ServerConfig, new: ServerConfig) -> bool:
    """Do ``old`` and ``new`` differ in :data:`LIVE_FIELDS` only (or not at all)?"""
    for f in dataclasses.fields(old):
        if f.name in LIVE_FIELDS or f.name in RUNTIME_FIELDS:
            continue
        if getattr(old, f.name) != getattr(new, f.name):
            return False
    return True


async def apply_live(conn: ServerConnection, updated: ServerConfig, old: ServerConfig) -> None:
    """Give the connection ``updated``'s live settings and tell the server what changed."""
    conn.cfg = dataclasses.replace(conn.cfg, **{name: getattr(updated, name) for name in LIVE_FIELDS})
    session = conn.session
    if session is None or session.state != "ready":
        return  # a session made later is given them
    if updated.log_level != old.log_level:
        await set_log_level(conn.name, session, updated.log_level)
    if updated.roots == old.roots or session.era != eras.HANDSHAKE:
        return  # the stateless era asks on each request
    try:
        await session.notify(LIST_CHANGED)
    except TransportError as exc:
        # The connection broke: the new one is asked with the new roots.
        log.info("%s: could not tell the server its roots changed: %s", conn.name, exc)


async def on_new_session(conn: ServerConnection, session: ClientSession) -> None:
    """A new session of ``conn``'s server: the configured log level, if one is."""
    if conn.cfg.log_level is not None:
        await set_log_level(conn.name, session, conn.cfg.log_level)


async def set_log_level(name: str, session: ClientSession, level: str | None) -> None:
    """Ask the server for messages at ``level`` and above (None: back to what it sends by
    default, which ``logging/setLevel`` cannot say: the level is left as it is until the
    next session)."""
    session.log_level = level
    info = session.server
    if level is None or session.era != eras.HANDSHAKE or info is None or "logging" not in info.capabilities:
        return
    try:
        await session.request(SET_LEVEL_METHOD, {"level": level})
    except (RpcError, TransportError) as exc:
        log.info("%s: logging/setLevel %s failed: %s", name, level, exc)
