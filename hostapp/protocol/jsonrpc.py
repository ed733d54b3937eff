"""Sans-I/O JSON-RPC 2.0 framing for MCP.

Turns bytes into typed messages and back, with a clear :class:`ProtocolError` for
anything that is not a well-formed single JSON-RPC 2.0 message. MCP forbids batches
since 2025-06-18, so a JSON array is rejected with its own message rather than parsed.

Hot path: progress notifications arrive by the thousand per second, so parsing is one
``json.loads`` and a few dict look-ups; no model validation happens here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JSONRPC = "2.0"

# Standard and MCP error codes.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
URL_ELICITATION_REQUIRED = -32042
MISSING_REQUIRED_CAPABILITY = -32021  # tasks extension: server needs a capability
UNSUPPORTED_PROTOCOL_VERSION = -32022  # 2026-07-28: data.supported lists the server's versions
REQUEST_CANCELLED = -32800  # used locally for a request the client cancelled

#: A message larger than this is refused before parsing (64 MiB): a server that sends
#: more is broken or hostile, and holding it would starve the host of memory.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: Values nested deeper than this many levels in a message are cut at intake (replaced by
#: :data:`CUT_MARKER`): no MCP message needs more, and every later step (the journal, the
#: agent's wire, the window's views) may then walk a value recursively without running
#: out of stack. The cut is visible where it was made.
MAX_DEPTH = 128

#: What stands in place of a value nested deeper than :data:`MAX_DEPTH` levels.
CUT_MARKER = f"[cut by hostapp: nested deeper than {MAX_DEPTH} levels]"

RequestId = int | str


class ProtocolError(Exception):
    """A message that is not valid JSON-RPC 2.0 (or not acceptable to MCP)."""

    def __init__(self, message: str, code: int = INVALID_REQUEST, request_id: RequestId | None = None):
        super().__init__(message)
        self.code = code
        self.request_id = request_id


class InvalidAnswer(ProtocolError):
    """The server answered a request with something that is not a readable answer to it.

    The request is over: it failed (the server did answer), and a retry would find nothing.
    """


@dataclass(slots=True)
class ErrorObject:
    code: int
    message: str
    data: Any = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            obj["data"] = self.data
        return obj


class RpcError(Exception):
    """An error response from the peer, raised to whoever awaited the request."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} (JSON-RPC error {code})")
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def from_error(cls, err: ErrorObject) -> RpcError:
        return cls(err.code, err.message, err.data)

    def to_error(self) -> ErrorObject:
        return ErrorObject(self.code, self.message, self.data)


@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: dict[str, Any] | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": JSONRPC, "id": self.id, "method": self.method}
        if self.params is not None:
            obj["params"] = self.params
        return obj


@dataclass(slots=True)
class Notification:
    method: str
    params: dict[str, Any] | None = None

    def to_obj(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"jsonrpc": JSONRPC, "method": self.method}
        if self.params is not None:
            obj["params"] = self.params
        return obj


@dataclass(slots=True)
class Response:
    id: RequestId
    result: dict[str, Any] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {"jsonrpc": JSONRPC, "id": self.id, "result": self.result}


@dataclass(slots=True)
class ErrorResponse:
    id: RequestId | None
    error: ErrorObject

    def to_obj(self) -> dict[str, Any]:
        return {"jsonrpc": JSONRPC, "id": self.id, "error": self.error.to_obj()}


Message = Request | Notification | Response | ErrorResponse


def _check_id(value: Any) -> RequestId:
    # bool is an int subclass in Python but not a JSON-RPC id.
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ProtocolError(f"invalid JSON-RPC id {value!r}: must be a string or an integer")
    return value


def from_obj(obj: Any) -> Message:
    """Classify an already-decoded JSON value as one JSON-RPC message."""
    if isinstance(obj, list):
        raise ProtocolError("JSON-RPC batches are not supported by MCP; send one message at a time")
    if not isinstance(obj, dict):
        raise ProtocolError(f"a JSON-RPC message must be an object, got {type(obj).__name__}")
    if obj.get("jsonrpc") != JSONRPC:
        raise ProtocolError('missing or wrong "jsonrpc" member: must be "2.0"', request_id=obj.get("id"))
    method = obj.get("method")
    if method is not None:
        if not isinstance(method, str):
            raise ProtocolError("method must be a string", request_id=obj.get("id"))
        params = obj.get("params")
        if params is not None and not isinstance(params, dict):
            raise ProtocolError(f"params of {method} must be an object", INVALID_PARAMS, obj.get("id"))
        if "id" in obj:
            return Request(_check_id(obj["id"]), method, params)
        return Notification(method, params)
    if "result" in obj:
        result = obj["result"]
        if not isinstance(result, dict):
            raise ProtocolError("result must be an object", request_id=obj.get("id"))
        return Response(_check_id(obj.get("id")), result)
    if "error" in obj:
        err = obj["error"]
        if not isinstance(err, dict) or not isinstance(err.get("code"), int) or isinstance(err.get("code"), bool):
            raise ProtocolError("error must be an object with an integer code", request_id=obj.get("id"))
        rid = obj.get("id")
        return ErrorResponse(None if rid is None else _check_id(rid),
                             ErrorObject(err["code"], str(err.get("message", "")), err.get("data")))
    raise ProtocolError("message is neither a request, a notification nor a response", request_id=obj.get("id"))


_raw_decode = json.JSONDecoder().raw_decode


def _loads(data: bytes | str) -> Any:
    """``json.loads`` without its overhead per call, which is half its time on a progress
    notification (it detects the encoding of bytes and matches whitespace before and
    after): a message is UTF-8 JSON with nothing around it. Anything else (whitespace
    around it, another encoding, an error) goes through ``json.loads`` itself, so what is
    read and what is refused, with which message, is as before."""
    try:
        text = data.decode() if type(data) is bytes else data
        obj, end = _raw_decode(text)  # type: ignore[arg-type]
        if end == len(text):
            return obj
    except ValueError:  # (UnicodeDecodeError is one)
        pass
    return json.loads(data)


def cut_deep(value: Any, limit: int = MAX_DEPTH, marker: str = CUT_MARKER) -> bool:
    """Replace, in place, every object or array of ``value`` nested deeper than ``limit``
    levels by ``marker``; whether anything was cut. Walks without recursion."""
    cut = False
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in list(items):
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    node[key] = marker
                    cut = True
                else:
                    stack.append((child, depth + 1))
    return cut


def _brackets(data: bytes | str) -> int:
    if isinstance(data, str):
        return data.count("{") + data.count("[")
    return data.count(b"{") + data.count(b"[")


def parse(data: bytes | str) -> Message:
    """Decode and classify one message; raise :class:`ProtocolError` on anything malformed."""
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {len(data)} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes")
    try:
        obj = _loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed JSON: {exc}", PARSE_ERROR) from None
    except RecursionError:
        # The C decoder recurses once per level: a few kilobytes of "[[[[..." reach the
        # interpreter's limit. Not an error of ours but of the message, and a reader that
        # let RecursionError through would die with its connection.
        raise ProtocolError("JSON nested too deeply to decode", PARSE_ERROR) from None
    # Only a message with that many brackets can be that deep (counting them is cheap).
    if isinstance(obj, dict) and _brackets(data) > MAX_DEPTH:
        cut_deep(obj)
    return from_obj(obj)


def encode(message: Message | dict[str, Any]) -> bytes:
    """Serialise one message as compact UTF-8 JSON (no newline)."""
    obj = message if isinstance(message, dict) else message.to_obj()
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        # A lone surrogate, which JSON may carry as an escape ("\ud800") and a server may
        # send in an id or a value the host echoes: no UTF-8 for it, so escape it again.
        return json.dumps(obj, separators=(",", ":")).encode()


class IdAllocator:
    """The one place JSON-RPC request ids are made: increasing integers per connection.

    ``start`` lets a connection begin at ids reserved for it (the engine reserves blocks per
    server in the journal, so that no two processes ever send two operations of one server
    under the same id). With ``reserve`` and ``block``, the allocator asks ``reserve()``
    for the start of a new block once ``block`` ids of the current one are used.
    """

    def __init__(self, start: int = 1, *, reserve: Callable[[], int] | None = None, block: int | None = None):
        if (reserve is None) != (block is None):
            raise ValueError("reserve and block go together")
        self._next = start
        self._end = start + block if block is not None else None
        self._reserve = reserve
        self._block = block

    def next(self) -> int:
        if self._end is not None and self._next >= self._end:
            assert self._reserve is not None and self._block is not None
            self._next = self._reserve()
            self._end = self._next + self._block
        rid = self._next
        self._next += 1
        return rid
