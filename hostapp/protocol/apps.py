"""MCP Apps (the ``io.modelcontextprotocol/ui`` extension, SEP-1865): sans-I/O parts.

A tool declares a view with ``_meta.ui.resourceUri`` (a ``ui://`` resource of the same
server, HTML of the MIME type :data:`RESOURCE_MIME`); the host reads it with
``resources/read``, renders it in a sandbox and speaks JSON-RPC with it over one bridge.
This module knows the shapes and the rules, and nothing of Qt or of the network:

- :func:`tool_ui` reads a tool's ``_meta.ui`` (and the legacy ``ui/resourceUri`` key);
- :func:`parse_view_resource` checks a ``resources/read`` answer (MIME type, size, URI) and
  keeps the resource's declared ``csp`` only when every entry is a plain origin;
- :func:`content_security_policy` and :func:`url_allowed` turn the declared domains into
  the policy of the view's document and the rule of the network filter (nothing declared:
  no network at all);
- :func:`check_view_message` validates one message from the view: size, JSON-RPC shape,
  known method, params. Nothing the view sends is trusted.

See ``docs/mcp-apps.md`` for what hostapp implements.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

#: The extension's identifier in client capabilities (``extensions``).
EXTENSION_ID = "io.modelcontextprotocol/ui"
#: The MIME type of an app view resource.
RESOURCE_MIME = "text/html;profile=mcp-app"
#: The protocol version of the view bridge hostapp speaks.
PROTOCOL_VERSION = "2026-01-26"
#: The largest view document accepted, in bytes (UTF-8).
MAX_VIEW_BYTES = 8 * 1024 * 1024
#: The largest message accepted from a view, in bytes of its JSON text.
MAX_MESSAGE_BYTES = 1024 * 1024
#: Most domains kept per CSP list.
MAX_DOMAINS = 32
#: Longest tool name and link a view may send.
MAX_NAME = 256
MAX_URL = 4096
#: Largest size a view may ask for, in pixels.
MAX_DIMENSION = 100_000

LEGACY_URI_KEY = "ui/resourceUri"

# JSON-RPC error codes the bridge answers with.
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602


class AppResourceError(ValueError):
    """A view resource hostapp refuses to render; the message says why, for a person."""


class BridgeRefused(ValueError):
    """A message from a view that is refused. ``rid`` is its request id when it had one
    (the bridge then answers with ``code``); a refused notification is dropped."""

    def __init__(self, message: str, code: int = INVALID_REQUEST, rid: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.rid = rid


# -- tools ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ToolUi:
    """What a tool's ``_meta.ui`` says: its view (if any) and who may call it."""

    resource_uri: str | None
    visibility: tuple[str, ...] = ("model", "app")

    @property
    def app_callable(self) -> bool:
        return "app" in self.visibility

    @property
    def model_visible(self) -> bool:
        return "model" in self.visibility


def tool_ui(tool: Any) -> ToolUi:
    """The ``_meta.ui`` of a tool as ``tools/list`` gave it; a malformed value counts as absent."""
    meta = tool.get("_meta") if isinstance(tool, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    ui = meta.get("ui")
    ui = ui if isinstance(ui, dict) else {}
    uri = ui.get("resourceUri", meta.get(LEGACY_URI_KEY))
    if not (isinstance(uri, str) and uri.startswith("ui://") and len(uri) <= MAX_URL):
        uri = None
    raw = ui.get("visibility")
    visibility: tuple[str, ...] = ("model", "app")
    if isinstance(raw, list):
        visibility = tuple(v for v in raw if v in ("model", "app"))
    return ToolUi(uri, visibility)


def find_tool(tools: list[Any], name: str) -> dict[str, Any] | None:
    for tool in tools:
        if isinstance(tool, dict) and tool.get("name") == name:
            return tool
    return None


# -- the view resource ------------------------------------------------------------------------

# An origin a view may declare: a scheme, a host (a leading "*." allowed) and an optional
# port; no path, no quote, no space, no semicolon (which would inject a CSP directive).
_ORIGIN = re.compile(r"^(https?|wss?)://(\*\.)?[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*(:[0-9]{1,5})?/?$")
_CSP_KEYS = ("connectDomains", "resourceDomains", "frameDomains", "baseUriDomains")


@dataclass(frozen=True, slots=True)
class ViewCsp:
    """The origins a view declared, each list checked (:data:`_ORIGIN`)."""

    connect: tuple[str, ...] = ()
    resource: tuple[str, ...] = ()
    frame: tuple[str, ...] = ()
    base_uri: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {key: list(value) for key, value in zip(_CSP_KEYS, (self.connect, self.resource, self.frame,
                                                                    self.base_uri), strict=True) if value}

    @property
    def network(self) -> tuple[str, ...]:
        """Every origin the network filter lets through (nested frames are never loaded,
        so ``frameDomains`` opens nothing)."""
        return self.connect + self.resource


@dataclass(frozen=True, slots=True)
class ViewResource:
    uri: str
    html: str
    csp: ViewCsp = field(default_factory=ViewCsp)
    prefers_border: bool | None = None
    permissions: tuple[str, ...] = ()  # requested, never granted by hostapp

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "html": self.html, "csp": self.csp.to_json(),
                "prefersBorder": self.prefers_border, "permissions": list(self.permissions)}

    @classmethod
    def from_json(cls, data: Any) -> ViewResource:
        """Rebuilt from :meth:`to_json` (checked again: it may have crossed a socket)."""
        if not isinstance(data, dict) or not isinstance(data.get("html"), str) or not isinstance(data.get("uri"), str):
            raise AppResourceError("malformed view resource")
        return cls(data["uri"], data["html"], parse_csp(data.get("csp"), data["uri"]),
                   data.get("prefersBorder") if isinstance(data.get("prefersBorder"), bool) else None,
                   tuple(p for p in data.get("permissions") or () if isinstance(p, str)))


def parse_csp(raw: Any, uri: str) -> ViewCsp:
    """The declared origins; :class:`AppResourceError` if any entry is not a plain origin."""
    if raw is None:
        return ViewCsp()
    if not isinstance(raw, dict):
        raise AppResourceError(f"{uri}: its csp is not an object")
    lists: list[tuple[str, ...]] = []
    for key in _CSP_KEYS:
        value = raw.get(key)
        if value is None:
            lists.append(())
            continue
        if not isinstance(value, list) or len(value) > MAX_DOMAINS:
            raise AppResourceError(f"{uri}: csp {key} must be a list of at most {MAX_DOMAINS} origins")
        for entry in value:
            if not isinstance(entry, str) or not _ORIGIN.match(entry):
                raise AppResourceError(f"{uri}: csp {key} holds {str(entry)[:80]!r}, which is not an origin")
        lists.append(tuple(entry.rstrip("/") for entry in value))
    return ViewCsp(*lists)


def parse_view_resource(result: Any, uri: str) -> ViewResource:
    """The view in a ``resources/read`` result for ``uri``, checked."""
    if not uri.startswith("ui://"):
        raise AppResourceError(f"{uri!r} is not a ui:// resource")
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        raise AppResourceError(f"{uri}: the server's answer holds no contents")
    item = next((c for c in contents if isinstance(c, dict) and c.get("uri") == uri), None)
    if item is None:
        item = contents[0] if len(contents) == 1 and isinstance(contents[0], dict) else None
    if item is None:
        raise AppResourceError(f"{uri}: the server's answer holds no content for this URI")
    mime = str(item.get("mimeType") or "").replace(" ", "").lower()
    if mime != RESOURCE_MIME:
        raise AppResourceError(f"{uri}: its type is {str(item.get('mimeType'))[:80]!r}, not {RESOURCE_MIME}")
    text = item.get("text")
    if not isinstance(text, str):
        raise AppResourceError(f"{uri}: the view is not given as text")
    if len(text) > MAX_VIEW_BYTES or len(text.encode("utf-8")) > MAX_VIEW_BYTES:
        raise AppResourceError(f"{uri}: the view is larger than {MAX_VIEW_BYTES // (1024 * 1024)} MiB")
    meta = item.get("_meta")
    ui = meta.get("ui") if isinstance(meta, dict) else None
    ui = ui if isinstance(ui, dict) else {}
    permissions = ui.get("permissions")
    border = ui.get("prefersBorder")
    return ViewResource(uri, text, parse_csp(ui.get("csp"), uri), border if isinstance(border, bool) else None,
                        tuple(sorted(permissions)) if isinstance(permissions, dict) else ())


def content_security_policy(csp: ViewCsp) -> str:
    """The policy of the view's document: inline code and its own data, only the declared
    origins on the network (none when nothing is declared), and no nested frames."""
    res = " ".join(csp.resource)
    connect = " ".join(csp.connect) or "'none'"
    base = " ".join(csp.base_uri) or "'none'"
    return "; ".join(part.strip() for part in (
        "default-src 'none'",
        f"script-src 'unsafe-inline' 'unsafe-eval' blob: data: {res}",
        f"style-src 'unsafe-inline' blob: data: {res}",
        f"img-src blob: data: {res}",
        f"font-src blob: data: {res}",
        f"media-src blob: data: {res}",
        f"connect-src {connect}",
        "frame-src 'none'",  # hostapp loads no nested frame, declared or not
        "object-src 'none'",
        f"base-uri {base}",
        "form-action 'none'",
    ))


def url_allowed(url: str, origins: tuple[str, ...]) -> bool:
    """Whether the network filter lets a request to ``url`` through: only to a declared
    origin (``*.`` matches subdomains), never anything else on the network."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme in ("data", "blob", "about"):
        return True
    if scheme not in ("http", "https", "ws", "wss") or not host:
        return False
    default = {"http": 80, "ws": 80, "https": 443, "wss": 443}[scheme]
    for origin in origins:
        o = urlsplit(origin)
        o_host = (o.hostname or "").lower()
        o_port = o.port or {"http": 80, "ws": 80, "https": 443, "wss": 443}.get(o.scheme, 0)
        if o.scheme != scheme or o_port != (port or default):
            continue
        if o_host.startswith("*."):
            if host.endswith(o_host[1:]) and host != o_host[2:]:
                return True
        elif host == o_host:
            return True
    return False


# -- the bridge -------------------------------------------------------------------------------

#: Requests a view may send, and notifications a view may send; anything else is refused.
VIEW_REQUESTS = frozenset({"ui/initialize", "tools/call", "ui/open-link", "ui/request-display-mode",
                           "ui/message", "ui/update-model-context", "ping"})
VIEW_NOTIFICATIONS = frozenset({"ui/notifications/initialized", "ui/notifications/size-changed",
                                "ui/notifications/request-teardown", "notifications/message"})


@dataclass(frozen=True, slots=True)
class ViewMessage:
    """A checked message from a view: a request (``rid`` set), a notification, or an
    answer to a request of the host (``method`` is None)."""

    method: str | None
    params: dict[str, Any]
    rid: str | int | None = None
    result: Any = None
    error: Any = None

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.rid is not None


def _rid(value: Any) -> str | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, str) and len(value) > 128):
        raise BridgeRefused("the id is not a short string or an integer")
    return value


def check_view_message(text: str) -> ViewMessage:
    """Validate one message a view sent (its JSON text); :class:`BridgeRefused` if it is
    too large, malformed, of an unknown method or with bad params."""
    if len(text) > MAX_MESSAGE_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_MESSAGE_BYTES:
        raise BridgeRefused(f"the message is larger than {MAX_MESSAGE_BYTES // 1024} KiB")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise BridgeRefused("the message is not JSON") from None
    if not isinstance(data, dict) or data.get("jsonrpc") != "2.0":
        raise BridgeRefused("the message is not a JSON-RPC 2.0 object")
    rid = _rid(data.get("id"))
    method = data.get("method")
    if method is None:
        if rid is None or ("result" in data) == ("error" in data):
            raise BridgeRefused("an answer needs an id and either a result or an error")
        return ViewMessage(None, {}, rid, data.get("result"), data.get("error"))
    if not isinstance(method, str):
        raise BridgeRefused("the method is not a string", rid=rid)
    known = VIEW_REQUESTS if rid is not None else VIEW_NOTIFICATIONS
    if method not in known:
        raise BridgeRefused(f"unknown method {method[:80]!r}", METHOD_NOT_FOUND, rid)
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise BridgeRefused("params must be an object", INVALID_PARAMS, rid)
    problem = _PARAM_CHECKS.get(method, _no_check)(params)
    if problem:
        raise BridgeRefused(f"{method}: {problem}", INVALID_PARAMS, rid)
    return ViewMessage(method, params, rid)


def _no_check(params: dict[str, Any]) -> str | None:
    return None


def _check_initialize(params: dict[str, Any]) -> str | None:
    if not isinstance(params.get("protocolVersion"), str) or len(params["protocolVersion"]) > 64:
        return "protocolVersion must be a short string"
    for key in ("appInfo", "appCapabilities"):
        if key in params and not isinstance(params[key], dict):
            return f"{key} must be an object"
    return None


def _check_tools_call(params: dict[str, Any]) -> str | None:
    name = params.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME:
        return "name must be a tool name"
    if "arguments" in params and params["arguments"] is not None and not isinstance(params["arguments"], dict):
        return "arguments must be an object"
    return None


def _check_open_link(params: dict[str, Any]) -> str | None:
    url = params.get("url")
    if not isinstance(url, str) or len(url) > MAX_URL:
        return "url must be a string"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "url is malformed"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "only http and https links are opened"
    return None


def _dimension(value: Any) -> bool:
    return (value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)
                              and math.isfinite(value) and 0 <= value <= MAX_DIMENSION))


def _check_size(params: dict[str, Any]) -> str | None:
    if not (_dimension(params.get("width")) and _dimension(params.get("height"))):
        return f"width and height must be numbers from 0 to {MAX_DIMENSION}"
    return None


def _check_display_mode(params: dict[str, Any]) -> str | None:
    return None if params.get("mode") in ("inline", "fullscreen", "pip") else "mode must be inline, fullscreen or pip"


_PARAM_CHECKS = {
    "ui/initialize": _check_initialize,
    "tools/call": _check_tools_call,
    "ui/open-link": _check_open_link,
    "ui/notifications/size-changed": _check_size,
    "ui/request-display-mode": _check_display_mode,
}


# -- what the host sends ----------------------------------------------------------------------

def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def answer(rid: str | int, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def refusal(rid: str | int, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def initialize_result(*, host_name: str, host_version: str, tool: dict[str, Any] | None, csp: ViewCsp,
                      theme: str, width: int, max_height: int) -> dict[str, Any]:
    """hostapp's answer to ``ui/initialize``: what it offers a view (tool calls to the
    same server, links opened after the person agrees, logs) and where it is shown."""
    context: dict[str, Any] = {
        "theme": theme, "displayMode": "inline", "availableDisplayModes": ["inline"],
        "platform": "desktop", "containerDimensions": {"width": width, "maxHeight": max_height},
        "deviceCapabilities": {"touch": False, "hover": True},
    }
    if tool is not None:
        context["toolInfo"] = {"tool": tool}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "hostInfo": {"name": host_name, "version": host_version},
        "hostCapabilities": {"openLinks": {}, "serverTools": {}, "logging": {},
                             "sandbox": {"permissions": {}, "csp": csp.to_json()}},
        "hostContext": context,
    }
