"""What a request is to the lab: the :class:`Call`, and the ways a handler can answer it.

Shared by the core (:mod:`hostapp.lab.core`), which makes calls and dispatches them, and
the mechanism modules (:mod:`hostapp.lab.mechanisms`), which handle them. A handler
returns a result, returns :data:`DEFERRED` when a job will write the response later,
raises :class:`InputRequired` (stateless era) when it needs an answer first, or raises
an :class:`~hostapp.protocol.jsonrpc.RpcError`.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any, TypeAlias

from hostapp.protocol.jsonrpc import RequestId, RpcError

SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "hostapp-lab", "title": "hostapp lab server", "version": "0.1.0"}

#: A request as the lab keeps track of it: (session key or None, JSON of its request id).
RequestKey: TypeAlias = tuple[str | None, str]


class Deferred:
    """Returned by a handler whose response a job (or a copy loop) will write later."""


DEFERRED = Deferred()


class InputRequired(Exception):
    """Raised in the stateless era when a handler needs an answer it does not have yet."""

    def __init__(self, input_requests: dict[str, Any], state: dict[str, Any] | None):
        super().__init__("input required")
        self.input_requests = input_requests
        self.state = state


class HttpRpcError(RpcError):
    """An RpcError that the HTTP front end answers with a particular status code."""

    def __init__(self, status: int, code: int, message: str, data: Any = None):
        super().__init__(code, message, data)
        self.status = status


@dataclass
class Call:
    """One request as the core sees it, whatever carried it."""

    request_id: RequestId
    method: str
    params: dict[str, Any]
    era: str
    protocol_version: str
    session_key: str | None
    session_stream: str | None
    capabilities: dict[str, Any]
    log_level: str | None
    stream: str | None = None  # stored stream the answer goes to (streamed methods)
    transport: str = "http"

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.params.get("_meta") or {}
        return meta

    @property
    def progress_token(self) -> Any:
        return self.meta.get("progressToken")


def stateless_result(result: dict[str, Any]) -> dict[str, Any]:
    """A 2026-07-28 result: says its type and names the server in ``_meta``."""
    meta = {**(result.get("_meta") or {}), SERVER_INFO_META_KEY: SERVER_INFO}
    return {"resultType": "complete", **result, "_meta": meta}


def now_iso(ts: float | None = None) -> str:
    """``ts`` (default: now) as an ISO 8601 UTC time with milliseconds, as tasks show it."""
    moment = dt.datetime.fromtimestamp(time.time() if ts is None else ts, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
