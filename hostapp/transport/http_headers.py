"""The HTTP headers that mirror JSON-RPC body fields (Streamable HTTP, revision 2026-07-28).

Sans-I/O: the rules for ``Mcp-Method``, ``Mcp-Name`` and the tool-designated
``Mcp-Param-{Name}`` headers (``x-mcp-header`` in a tool's ``inputSchema``), and the value
encoding they share: a value that is not plain visible ASCII travels as
``=?base64?<base64 of its UTF-8>?=``.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

#: Which body field a request's ``Mcp-Name`` header mirrors, by method.
NAME_FIELD_BY_METHOD: dict[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    # the tasks extension (io.modelcontextprotocol/tasks) names the task
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

_BASE64_PREFIX = "=?base64?"
_BASE64_SUFFIX = "?="
# RFC 9110 field-value characters: visible ASCII, space and tab (no leading/trailing blanks).
_PLAIN_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?\Z")
# RFC 9110 token (tchar), the syntax of a header field name.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
# JavaScript's safe integer range: the largest integers every peer can represent exactly.
_MAX_SAFE_INTEGER = 2**53 - 1
_HEADER_TYPES = ("string", "integer", "boolean")


class InvalidHeaderAnnotation(ValueError):
    """A tool's ``x-mcp-header`` annotation breaks the rules; the tool must not be offered."""


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: itself when plain visible ASCII, else the Base64 sentinel."""
    if value and _PLAIN_VALUE.match(value) and not (
            value.startswith(_BASE64_PREFIX) and value.endswith(_BASE64_SUFFIX)):
        return value
    return _BASE64_PREFIX + base64.b64encode(value.encode()).decode("ascii") + _BASE64_SUFFIX


def decode_header_value(value: str) -> str:
    """Undo :func:`encode_header_value` (what a server does before comparing with the body)."""
    if value.startswith(_BASE64_PREFIX) and value.endswith(_BASE64_SUFFIX):
        inner = value[len(_BASE64_PREFIX):-len(_BASE64_SUFFIX)]
        return base64.b64decode(inner, validate=True).decode()
    return value


def standard_headers(method: str, params: Mapping[str, Any] | None) -> dict[str, str]:
    """``Mcp-Method`` and, where the method has one, ``Mcp-Name`` for a request."""
    headers = {"Mcp-Method": method}
    field = NAME_FIELD_BY_METHOD.get(method)
    if field is not None and params is not None:
        name = params.get(field)
        if isinstance(name, str):
            headers["Mcp-Name"] = encode_header_value(name)
    return headers


def header_params(input_schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The ``Mcp-Param-*`` headers a tool designates: header name -> property path.

    Raises :class:`InvalidHeaderAnnotation` when an annotation breaks a rule of the
    specification (empty or not a token, duplicated, on a non-primitive or ``number``
    property, or not reachable from the root through ``properties`` alone).
    """
    found: dict[str, tuple[str, ...]] = {}
    seen_lower: set[str] = set()

    def walk(schema: Mapping[str, Any], path: tuple[str, ...]) -> None:
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            return
        for key, sub in properties.items():
            if not isinstance(sub, Mapping):
                continue
            sub_path = (*path, key)
            if "x-mcp-header" in sub:
                name = sub["x-mcp-header"]
                where = ".".join(sub_path)
                if not isinstance(name, str) or not name:
                    raise InvalidHeaderAnnotation(f"x-mcp-header of {where} is empty or not a string")
                if not _TOKEN.match(name):
                    raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} of {where} is not a valid header name")
                if name.lower() in seen_lower:
                    raise InvalidHeaderAnnotation(f"x-mcp-header {name!r} is used twice")
                if sub.get("type") not in _HEADER_TYPES:
                    raise InvalidHeaderAnnotation(
                        f"x-mcp-header {name!r} is on {where} of type {sub.get('type')!r}; "
                        "only string, integer and boolean parameters may be mirrored")
                seen_lower.add(name.lower())
                found[name] = sub_path
            walk(sub, sub_path)

    walk(input_schema, ())
    total = _count_annotations(input_schema)
    if total != len(found):
        raise InvalidHeaderAnnotation(
            "an x-mcp-header annotation is not reachable from the schema root through properties alone")
    return found


def _count_annotations(node: Any) -> int:
    if isinstance(node, Mapping):
        own = 1 if "x-mcp-header" in node and not isinstance(node.get("x-mcp-header"), Mapping) else 0
        return own + sum(_count_annotations(value) for value in node.values())
    if isinstance(node, list):
        return sum(_count_annotations(item) for item in node)
    return 0


def param_headers(designated: Mapping[str, tuple[str, ...]], arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``Mcp-Param-{Name}`` headers for one call; a missing or null value sends no header."""
    headers: dict[str, str] = {}
    for name, path in designated.items():
        value: Any = arguments
        for key in path:
            if not isinstance(value, Mapping) or key not in value:
                value = None
                break
            value = value[key]
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            if abs(value) > _MAX_SAFE_INTEGER:
                continue
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            continue  # not a primitive the annotation allows: the server cannot expect it
        headers[f"Mcp-Param-{name}"] = encode_header_value(text)
    return headers
