"""A server's resources as the host reads them: listings, contents, updates.

``resources/list`` and ``resources/templates/list`` are paginated (``nextCursor``);
:func:`entries` keeps the well-formed entries of a page (an object with a string ``uri``,
or ``uriTemplate`` for a template) and drops the rest. ``resources/read`` answers
``contents``: each with its ``uri`` and either ``text`` or ``blob`` (base64);
:func:`parse_contents` checks that shape and decodes nothing but the base64 it is asked
for (:func:`blob_bytes`). Everything a server wrote here is server text: shown as plain
text by the window and through the CLI's sanitizer.

Subscriptions (``resources/subscribe``, then ``notifications/resources/updated``) are a
handshake-era feature on a session; the 2026-07-28 era replaces them with a
``subscriptions/listen`` stream, which hostapp does not hold for resources.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

LIST_METHOD = "resources/list"
TEMPLATES_METHOD = "resources/templates/list"
READ_METHOD = "resources/read"
SUBSCRIBE_METHOD = "resources/subscribe"
UNSUBSCRIBE_METHOD = "resources/unsubscribe"
UPDATED = "notifications/resources/updated"
LIST_CHANGED = "notifications/resources/list_changed"

#: Pages of a listing followed at most (a server that repeats its cursor stops sooner).
MAX_PAGES = 50


class ResourceError(ValueError):
    """A server's answer about its resources that cannot be used as the protocol defines it."""


def entries(result: Any, key: str, uri_field: str = "uri") -> tuple[list[dict[str, Any]], str | None]:
    """The well-formed entries under ``key`` of one page, and its ``nextCursor``."""
    if not isinstance(result, dict) or not isinstance(result.get(key, []), list):
        raise ResourceError(f"the server's {key} listing is not a list")
    kept = [e for e in result.get(key, []) if isinstance(e, dict) and isinstance(e.get(uri_field), str)]
    cursor = result.get("nextCursor")
    return kept, cursor if isinstance(cursor, str) and cursor else None


def parse_contents(result: Any) -> list[dict[str, Any]]:
    """The ``contents`` of a ``resources/read`` answer, each with ``uri`` and ``text`` or ``blob``."""
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list):
        raise ResourceError("the server's answer to resources/read has no contents list")
    out = []
    for item in contents:
        if not isinstance(item, dict) or not isinstance(item.get("uri"), str):
            raise ResourceError("the server sent a resource content without a uri")
        if isinstance(item.get("text"), str) == isinstance(item.get("blob"), str):
            raise ResourceError(f"the content of {item['uri']!r} has neither text nor blob (or both)")
        out.append(item)
    return out


def blob_bytes(item: dict[str, Any]) -> bytes:
    """The bytes of a content's ``blob`` (its ``text`` as UTF-8 for a text content)."""
    if isinstance(item.get("text"), str):
        return str(item["text"]).encode("utf-8")
    try:
        return base64.b64decode(str(item.get("blob", "")), validate=True)
    except (binascii.Error, ValueError):
        raise ResourceError(f"the blob of {item.get('uri')!r} is not base64") from None


def describe(entry: dict[str, Any]) -> str:
    """One line for a person: the title or name, the URI (or template), the type."""
    uri = entry.get("uri") or entry.get("uriTemplate") or ""
    title = entry.get("title") or entry.get("name") or ""
    mime = entry.get("mimeType")
    return " ".join(str(part) for part in (title, uri, f"({mime})" if mime else "") if part)
