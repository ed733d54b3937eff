"""What servers log to the host (``notifications/message``), kept per server.

Kept in the engine's memory, the last :data:`KEPT_PER_SERVER` messages of each server,
and not in the journal: a server may log several times a second for as long as it runs,
and every journal write competes with the operations' own (their progress and outcomes,
which must survive a crash; a log line need not). The agent keeps them while it runs,
which outlives every window and command: ``hostapp servers log SERVER`` and the window's log
view read them from there, then follow the ``log`` events as they come. A message is
kept as the server sent it (``level``, ``logger``, ``data``), with the time it arrived:
server text, shown as plain text. Each message is cut to :data:`MAX_DATA_CHARS` of JSON.
A message below the server's configured level is dropped here too (:func:`below_level`).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from hostapp.store.server_config import LOG_LEVELS

#: Messages kept per server (the oldest go first).
KEPT_PER_SERVER = 1000
#: How much of one message's data is kept, as JSON text.
MAX_DATA_CHARS = 16_384

SET_LEVEL_METHOD = "logging/setLevel"
#: The 2026-07-28 era has no session to set a level on: each request names it in ``_meta``.
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"


def below_level(level: Any, least: str | None) -> bool:
    """Is a message of ``level`` less severe than ``least`` (the level the server was asked
    for)? Such a message is not kept: servers are to filter by ``logging/setLevel``, but
    some leave it to their application. An unknown level is kept (shown as info)."""
    if least is None or level not in LOG_LEVELS or least not in LOG_LEVELS:
        return False
    return LOG_LEVELS.index(level) < LOG_LEVELS.index(least)


def log_entry(params: dict[str, Any], at: float) -> dict[str, Any]:
    """One kept message: ``at``, ``level`` (an MCP level, else ``"info"``), ``logger``
    (a string or None) and ``data`` (as sent; cut, as a string, when its JSON is too long)."""
    level = params.get("level")
    logger = params.get("logger")
    data = params.get("data")
    try:
        text = json.dumps(data, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(data)
    if len(text) > MAX_DATA_CHARS:
        data = text[:MAX_DATA_CHARS] + " …(cut)"
    return {"at": at, "level": level if level in LOG_LEVELS else "info",
            "logger": logger if isinstance(logger, str) else None, "data": data}


class ServerLogs:
    """The last messages of each server."""

    def __init__(self, kept: int = KEPT_PER_SERVER) -> None:
        self._kept = kept
        self._logs: dict[str, deque[dict[str, Any]]] = {}

    def add(self, server: str, params: dict[str, Any], at: float) -> dict[str, Any]:
        entry = log_entry(params, at)
        self._logs.setdefault(server, deque(maxlen=self._kept)).append(entry)
        return entry

    def entries(self, server: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The kept messages of ``server``, oldest first (the last ``limit`` of them)."""
        kept = list(self._logs.get(server, ()))
        return kept if limit is None or limit >= len(kept) else kept[len(kept) - max(0, limit):]

    def forget(self, server: str) -> None:
        self._logs.pop(server, None)
