"""Text as a person (or a log) is shown it: the characters that would mislead, the
secrets that URLs carry.

Bidirectional embeddings, overrides and isolates, the directional marks and the line and
paragraph separators reorder or break the text after them: ``invoice-\u202efdp.exe``
reads as ``invoice-exe.pdf``. Wherever hostapp shows a name, an address or a message that
came from a server or a view (a dialog, a terminal line), such characters are shown as
their code points instead, so the person sees that they are there.
"""

from __future__ import annotations

import logging
import re

#: The characters that reorder or break what follows them.
REORDERING = re.compile("[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


# C0 and C1 controls and DEL but the new line and the tab.
_CONTROLS_BUT_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _code_point(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def reveal_reordering(text: str) -> str:
    """``text`` with every reordering character replaced by its visible code point."""
    return REORDERING.sub(_code_point, text)


def terminal_safe(text: str) -> str:
    """Server text for a terminal over several lines: every control character but the new
    line and the tab becomes U+FFFD, so no escape sequence or carriage return from a
    server reaches the terminal (it could colour, move or hide what hostapp prints, write
    the clipboard with OSC 52 or disguise a link with OSC 8); a reordering character
    becomes its visible code point."""
    return reveal_reordering(_CONTROLS_BUT_LINES.sub("\ufffd", text))


# A URL in free text: its scheme, then everything up to a space or a quote.
_URL = re.compile(r"""\b([a-zA-Z][a-zA-Z0-9+.-]*://)([^\s"'<>]+)""")
_USERINFO = re.compile(r"^[^/?#@]*@")
_QUERY_VALUE = re.compile(r"([?&][^=&#]*=)[^&#]*")


def _redact_one(match: re.Match[str]) -> str:
    rest = _USERINFO.sub("***@", match.group(2))
    return match.group(1) + _QUERY_VALUE.sub(r"\1***", rest)


def redact_url_secrets(text: str) -> str:
    """``text`` with the user info and query values of every URL in it replaced by
    ``***``: servers take keys there (``?api_key=``), and a log is no place for them."""
    return _URL.sub(_redact_one, text) if "://" in text else text


class RedactUrlSecrets(logging.Filter):
    """A log handler's filter: every record's message through :func:`redact_url_secrets`
    (httpx logs each request's whole URL at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_url_secrets(message)
        if redacted != message:
            record.msg, record.args = redacted, None
        return True
