"""Quoting what a server sent, for an error message or a log line.

A broken or hostile server's bytes end up in front of a person (the window, the CLI, a
log file): they are cut short, their control characters escaped (no terminal escape
sequence is replayed, no line is forged in a log), and values that look like secrets
(tokens, passwords, keys) replaced before anything is shown. Sans-I/O; bounded work
whatever the size of the input.
"""

from __future__ import annotations

import re
from typing import Any

#: How many characters of a server's message an error quotes.
EXCERPT_CHARS = 80

#: Names of members whose values are never quoted: secrets, and the handles a server
#: issues for an operation (kept in the keyring, as anyone holding one may act on it).
_SECRET_NAME = re.compile(
    r"token|secret|passw|authori[sz]ation|cookie|session|credential|api[-_]?key|private|signature"
    r"|task_?id|stream_?id|resume|handle", re.I)
_REDACTED = "<redacted>"
# How much of a value is looked at: enough for an excerpt, never the whole of a large one.
_MAX_ITEMS = 16
_MAX_DEPTH = 8
_MAX_STRING = EXCERPT_CHARS * 2


def excerpt(data: bytes | bytearray | str, limit: int = EXCERPT_CHARS) -> str:
    """The first ``limit`` characters of ``data``, printable: bytes that are not UTF-8
    and characters that are not printable are shown escaped (``\\x1b``, ``\\n``), and a
    cut is marked with an ellipsis."""
    window = data[: limit * 4 + 4]
    if isinstance(window, (bytes, bytearray)):
        text = bytes(window).decode("utf-8", errors="backslashreplace")
    else:
        text = window
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(shown) > limit or len(window) < len(data):
        return shown[:limit] + "…"
    return shown


def redacted(value: Any, _depth: int = 0) -> Any:
    """A copy of a JSON value fit to be quoted: the values of members whose names look
    like secrets replaced, long strings cut, and no more than a few items of each level
    (enough for an excerpt; the work stays bounded however large the value)."""
    if _depth >= _MAX_DEPTH:
        return "…"
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for index, (key, item) in enumerate(value.items()):
            if index >= _MAX_ITEMS:
                out["…"] = "…"
                break
            secret = isinstance(key, str) and _SECRET_NAME.search(key) is not None
            out[key] = _REDACTED if secret and item is not None else redacted(item, _depth + 1)
        return out
    if isinstance(value, list):
        items = [redacted(item, _depth + 1) for item in value[:_MAX_ITEMS]]
        if len(value) > _MAX_ITEMS:
            items.append("…")
        return items
    if isinstance(value, str) and len(value) > _MAX_STRING:
        return value[:_MAX_STRING] + "…"
    return value
