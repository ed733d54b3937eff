"""Server text as a person is shown it: the characters that would mislead.

Bidirectional embeddings, overrides and isolates, the directional marks and the line and
paragraph separators reorder or break the text after them: ``invoice-\u202efdp.exe``
reads as ``invoice-exe.pdf``. Wherever hostapp shows a name, an address or a message that
came from a server or a view (a dialog, a terminal line), such characters are shown as
their code points instead, so the person sees that they are there.
"""

from __future__ import annotations

import re

#: The characters that reorder or break what follows them.
REORDERING = re.compile("[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _code_point(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


def reveal_reordering(text: str) -> str:
    """``text`` with every reordering character replaced by its visible code point."""
    return REORDERING.sub(_code_point, text)
