"""A configured MCP server as the journal keeps it (:class:`ServerConfig`).

Apart from :mod:`hostapp.store.journal`, which stores it, because the facade's clients
pass and receive it too: a CLI command reading a server's configuration from the agent
needs this class, not the journal's SQLite and keyring libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

#: The log levels of MCP (RFC 5424's, least severe first).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass
class ServerConfig:
    """One configured MCP server; secret header and env values are keyring references.

    ``session_ref`` and ``last_seen`` are runtime state the engine records (the keyring
    reference of the ``Mcp-Session-Id``, when it last answered). ``auth`` is how an HTTP
    server signs in, as ``hostapp.auth.settings.AuthSettings.to_dict()`` gives it (None:
    the default interactive sign-in); its secrets live in the keyring, never here.
    ``roots`` are the folders the person gave the server (MCP roots: absolute, resolved
    paths, answered to ``roots/list`` as ``file://`` URIs). ``log_level`` is the least
    severe log message the server is asked to send (``logging/setLevel``; None: the
    server's own default).
    """

    name: str
    transport: Literal["stdio", "http"]
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secret_headers: dict[str, str] = field(default_factory=dict)  # header name -> secret ref
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)  # variable name -> secret ref
    enabled: bool = True
    protocol_version: str | None = None
    session_ref: str | None = None
    last_seen: float | None = None
    auth: dict[str, Any] | None = None
    roots: list[str] = field(default_factory=list)
    log_level: str | None = None
