"""A server's log message (``notifications/message``) as a person reads it."""

from __future__ import annotations

import json
from typing import Any


def log_line(entry: dict[str, Any]) -> str:
    """A message on one line for a person: level, logger, data (a string as it is, anything
    else as JSON). Server text: the caller shows it as plain text (the CLI through its
    sanitizer). The time is the caller's to add, in the person's clock."""
    data = entry.get("data")
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    logger = f" {entry['logger']}:" if entry.get("logger") else ""
    return f"{entry.get('level', 'info'):<9}{logger} {text}"


def data_text(entry: dict[str, Any], indent: int | None = None) -> str:
    """A message's data whole: a string as it is, anything else as JSON (indented by
    ``indent`` spaces a level, or on one line)."""
    data = entry.get("data")
    return data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, indent=indent)


def one_line(text: str) -> str:
    """``text`` on one line: line breaks, tabs and other control characters as spaces."""
    return "".join(" " if ord(c) < 32 or 0x7F <= ord(c) < 0xA0 or c in "\u2028\u2029" else c
                   for c in text)
