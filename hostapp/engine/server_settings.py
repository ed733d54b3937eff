"""Settings of a server that its live connection takes without starting again.

Most of a server's configuration is how to reach it (command, URL, headers, sign-in): a
change there starts a new connection. Its roots are what the client tells the server
inside a connection, so a change of roots alone is written to the journal, handed to the
connection (the next ``roots/list`` is answered with it) and told to the server with
``notifications/roots/list_changed``, on a live handshake-era session, as the roots
capability's ``listChanged`` promises. Operations in flight are not disturbed.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING

from hostapp.protocol import eras
from hostapp.protocol.roots import LIST_CHANGED
from hostapp.transport.base import TransportError

if TYPE_CHECKING:
    from hostapp.engine.supervisor import ServerConnection
    from hostapp.store.server_config import ServerConfig

log = logging.getLogger(__name__)

#: The configuration fields a live connection takes as they change.
LIVE_FIELDS = frozenset({"roots"})
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
    if updated.roots == old.roots or session is None or session.state != "ready" or session.era != eras.HANDSHAKE:
        return  # a session made later asks anew; the stateless era asks on each request
    try:
        await session.notify(LIST_CHANGED)
    except TransportError as exc:
        # The connection broke: the new one is asked with the new roots.
        log.info("%s: could not tell the server its roots changed: %s", conn.name, exc)
