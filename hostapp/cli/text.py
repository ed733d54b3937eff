"""Text for a terminal: server text made plain, widths in terminal cells, truncation with
an ellipsis. Shared by the live progress lines (:mod:`hostapp.cli.progress`) and the tables
(:mod:`hostapp.cli.table`); times and status words are the window's too
(:mod:`hostapp.presentation`)."""

from __future__ import annotations

import json
import os
import re
import sys
import unicodedata
from typing import TextIO

from hostapp.protocol.shown_text import reveal_reordering, terminal_safe

ELLIPSIS = "…"

# C0 and C1 controls, DEL: a server's text never moves the cursor or colours the terminal.
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def plain(text: object) -> str:
    """Server text on one line: control characters (escape sequences, new lines, tabs)
    become single spaces, reordering characters their visible code point; surrounding
    space is dropped."""
    return reveal_reordering(_CONTROLS.sub(" ", "" if text is None else str(text))).strip()


def echo(text: object, *, file: TextIO | None = None, end: str = "\n", flush: bool = False) -> None:
    """Print a line that carries server text (a tool's name, an error a server worded, an
    address its metadata named): the one way the command line does, through
    :func:`terminal_safe`."""
    print(terminal_safe(str(text)), file=file or sys.stdout, end=end, flush=flush)


# What JSON leaves raw with ensure_ascii=False besides the C0 controls it escapes itself:
# DEL and the C1 controls (0x9b is a CSI on 8-bit terminals), the reordering characters,
# and lone surrogates (no UTF-8 for them). Each can only stand inside a JSON string, where
# its \u escape means the same.
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def json_text(value: object, **options: object) -> str:
    """``value`` as JSON for a terminal or a pipe (``--json``): readable Unicode, but every
    control and reordering character escaped, so what a server sent cannot drive a
    terminal that shows it."""
    text = json.dumps(value, ensure_ascii=False, **options)  # type: ignore[arg-type]
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def width(text: str) -> int:
    """How many terminal cells ``text`` (without escape sequences) takes."""
    return sum(char_width(ch) for ch in text)


def fit(text: str, cells: int, ellipsis: str = ELLIPSIS) -> str:
    """``text`` cut to at most ``cells`` cells, ending with the ellipsis when cut."""
    if width(text) <= cells:
        return text
    if cells <= 0:
        return ""
    room = cells - width(ellipsis)
    out, used = [], 0
    for ch in text:
        w = char_width(ch)
        if used + w > room:
            break
        out.append(ch)
        used += w
    return "".join(out) + ellipsis if room >= 0 else ellipsis[:cells]


def pad(text: str, cells: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``cells`` cells (on the left when ``right``)."""
    fill = " " * max(0, cells - width(text))
    return fill + text if right else text + fill


def colour_wanted(stream: TextIO) -> bool:
    """Colour only on a terminal, and never with ``NO_COLOR`` set (https://no-color.org)
    or on a terminal that says it is dumb."""
    if os.environ.get("NO_COLOR"):
        return False
    return is_terminal(stream)


def is_terminal(stream: TextIO) -> bool:
    """``stream`` is a terminal that understands the cursor moves of a live line."""
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False
    return tty and os.environ.get("TERM", "") != "dumb" and _cursor_moves(stream)


def _cursor_moves(stream: TextIO) -> bool:
    """A Windows console understands cursor moves and colours once asked to (Windows 10
    and later); elsewhere a terminal does."""
    if sys.platform != "win32":
        return True
    import ctypes
    import msvcrt
    from ctypes import wintypes

    enable_virtual_terminal_processing = 0x0004
    try:
        handle = msvcrt.get_osfhandle(stream.fileno())
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
        mode = wintypes.DWORD()
        if not kernel32.GetConsoleMode(handle, ctypes.byref(mode)):
            return False
        return bool(mode.value & enable_virtual_terminal_processing
                    or kernel32.SetConsoleMode(handle, mode.value | enable_virtual_terminal_processing))
    except (AttributeError, OSError, ValueError):
        return False


def speaks_unicode(stream: TextIO) -> bool:
    """The bar and spinner characters can be written to ``stream``."""
    encoding = getattr(stream, "encoding", None) or "ascii"
    try:
        "█░⠋✓…".encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True
