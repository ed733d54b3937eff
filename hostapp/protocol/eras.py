"""Protocol eras and version negotiation, sans I/O.

Two eras (docs/protocol.md, "Two protocol eras"): the *handshake* era (``initialize`` then
``notifications/initialized``; 2024-11-05 … 2025-11-25) and the *stateless* era
(2026-07-28: optional ``server/discover``, and every request carries the client's
version, capabilities and identity in ``_meta``). The client offers the newest revision
it speaks and falls back: ``server/discover`` first, then ``initialize`` offering
2025-11-25 and accepting any older revision the server counter-offers.

The revision lists and ``_meta`` keys are those of ``mcp_types`` (the official wire
types), written out here: importing ``mcp_types`` builds its pydantic models, 0.1 s of the
app's start-up for seven strings. tests/protocol/test_eras.py fails when they differ.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hostapp.protocol.jsonrpc import ProtocolError

# As in mcp_types and mcp_types.version (checked by tests/protocol/test_eras.py).
CLIENT_CAPABILITIES_META_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_META_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_META_KEY = "io.modelcontextprotocol/logLevel"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
HANDSHAKE_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_HANDSHAKE_VERSION = "2025-11-25"
LATEST_MODERN_VERSION = "2026-07-28"

HANDSHAKE = "handshake"
STATELESS = "stateless"

STATELESS_VERSION = LATEST_MODERN_VERSION  # "2026-07-28"
HANDSHAKE_OFFER = LATEST_HANDSHAKE_VERSION  # "2025-11-25"
HANDSHAKE_VERSIONS: tuple[str, ...] = tuple(HANDSHAKE_PROTOCOL_VERSIONS)
ALL_VERSIONS: tuple[str, ...] = (*HANDSHAKE_VERSIONS, STATELESS_VERSION)

RELATED_TASK_META_KEY = "io.modelcontextprotocol/related-task"
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


def era_of(version: str) -> str:
    if version == STATELESS_VERSION:
        return STATELESS
    if version in HANDSHAKE_VERSIONS:
        return HANDSHAKE
    raise ProtocolError(f"unsupported protocol version {version!r}; hostapp speaks {', '.join(ALL_VERSIONS)}")


@dataclass(slots=True)
class ServerInfo:
    """What the client learned about a server when the connection started."""

    protocol_version: str
    era: str
    capabilities: dict[str, Any] = field(default_factory=dict)
    server_info: dict[str, Any] = field(default_factory=dict)
    instructions: str | None = None

    @property
    def name(self) -> str:
        return str(self.server_info.get("name") or "")


def initialize_params(client_info: dict[str, Any], capabilities: dict[str, Any],
                      version: str = HANDSHAKE_OFFER) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": capabilities, "clientInfo": client_info}


def accept_initialize_result(result: dict[str, Any], offered: str = HANDSHAKE_OFFER) -> ServerInfo:
    """Check the server's answer to ``initialize``; accept a counter-offer we speak."""
    version = result.get("protocolVersion")
    if not isinstance(version, str):
        raise ProtocolError("the server's initialize result has no protocolVersion")
    if version not in HANDSHAKE_VERSIONS:
        raise ProtocolError(
            f"the server offered protocol version {version!r}, which hostapp does not speak "
            f"(it offered {offered}; it accepts {', '.join(HANDSHAKE_VERSIONS)})")
    caps = result.get("capabilities")
    return ServerInfo(version, HANDSHAKE, caps if isinstance(caps, dict) else {},
                      result.get("serverInfo") or {}, result.get("instructions"))


def accept_discover_result(result: dict[str, Any]) -> ServerInfo | None:
    """Read a ``server/discover`` answer; None when the server speaks no stateless revision."""
    versions = result.get("supportedVersions")
    if not isinstance(versions, list) or STATELESS_VERSION not in versions:
        return None
    caps = result.get("capabilities")
    meta = result.get("_meta") or {}
    server_info = result.get("serverInfo") or meta.get("io.modelcontextprotocol/serverInfo") or {}
    return ServerInfo(STATELESS_VERSION, STATELESS, caps if isinstance(caps, dict) else {},
                      server_info if isinstance(server_info, dict) else {}, result.get("instructions"))


def stateless_meta(client_info: dict[str, Any], capabilities: dict[str, Any],
                   version: str = STATELESS_VERSION, log_level: str | None = None) -> dict[str, Any]:
    """The per-request ``_meta`` envelope of the stateless era."""
    meta = {
        PROTOCOL_VERSION_META_KEY: version,
        CLIENT_CAPABILITIES_META_KEY: capabilities,
        CLIENT_INFO_META_KEY: client_info,
    }
    if log_level:
        meta[LOG_LEVEL_META_KEY] = log_level
    return meta


def result_type(result: dict[str, Any]) -> str:
    """A result without ``resultType`` comes from an older server and is complete."""
    value = result.get("resultType")
    return value if isinstance(value, str) else "complete"
