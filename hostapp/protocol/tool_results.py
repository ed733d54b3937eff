"""Reading a tool's result as the server sent it, whatever it sent.

A ``CallToolResult`` is server-supplied JSON: ``content`` should be a list of objects, each
with a string ``type``, but a broken or hostile server may send anything. The CLI and the
window read it through these functions, which never raise on a malformed result.
"""

from __future__ import annotations

from typing import Any


def content_blocks(result: Any) -> list[dict[str, Any]]:
    """The content blocks of ``result`` that are objects (anything else is left out)."""
    if not isinstance(result, dict):
        return []
    content = result.get("content")
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def text_of(value: Any) -> str:
    """A server-supplied value shown as text (a string as it is, anything else as str())."""
    return value if isinstance(value, str) else str(value)
