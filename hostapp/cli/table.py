"""Aligned text tables for a terminal: a header row, columns as wide as their widest cell,
and a line never longer than the terminal (the widest columns, the last one first, are
cut with an ellipsis; a table never wraps)."""

from __future__ import annotations

from collections.abc import Sequence

from hostapp.cli import text

GAP = "  "
#: A column is never cut below this many cells (nor below its header).
NARROWEST = 6
#: The free text column (``shrink_first``) is cut first, but not below this: the other
#: columns are cut next, and it is left out entirely before it is narrower.
FREE_TEXT = 16


def _fitted(natural: list[int], floor: list[int], cells: int, shrink_first: int | None) -> list[int] | None:
    """``natural`` narrowed to ``cells`` (``shrink_first``, then the widest), or None when
    even every column at its floor is too wide."""
    widths = list(natural)
    over = sum(widths) + len(GAP) * (len(widths) - 1) - cells
    if over > sum(w - f for w, f in zip(widths, floor, strict=True)):
        return None
    if over > 0 and shrink_first is not None:
        cut = min(over, widths[shrink_first] - floor[shrink_first])
        widths[shrink_first] -= cut
        over -= cut
    while over > 0:
        widest = max((i for i, w in enumerate(widths) if w > floor[i]), key=lambda i: (widths[i], i))
        widths[widest] -= 1
        over -= 1
    return widths


def layout(headers: Sequence[str], rows: Sequence[Sequence[str]], cells: int | None, *,
           shrink_first: int | None = None, keep: frozenset[int] = frozenset(),
           drop: Sequence[int] = ()) -> list[tuple[int, int]]:
    """The columns shown and their widths: each as wide as its widest cell; when the line
    is longer than ``cells``, the column ``shrink_first`` (the free text, say, to
    :data:`FREE_TEXT`) and then the widest others are cut (never those in ``keep``, none
    below :data:`NARROWEST`), and if
    that is not enough, the columns in ``drop`` are left out, in that order."""
    natural = [max([text.width(h), *(text.width(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    shown = list(range(len(headers)))
    if cells is None:
        return [(i, natural[i]) for i in shown]
    to_drop = list(drop)
    while True:
        floor = [natural[i] if i in keep else min(natural[i], max(FREE_TEXT if i == shrink_first else NARROWEST,
                                                                  text.width(headers[i]))) for i in shown]
        first = shown.index(shrink_first) if shrink_first in shown else None
        widths = _fitted([natural[i] for i in shown], floor, cells, first)
        if widths is not None:
            return list(zip(shown, widths, strict=True))
        if not to_drop:
            return list(zip(shown, floor, strict=True))  # the line is cut at the end
        shown.remove(to_drop.pop(0))


def render_table(headers: Sequence[str], rows: Sequence[Sequence[str]], cells: int | None = None, *,
                 right: frozenset[int] = frozenset(), shrink_first: int | None = None,
                 keep: frozenset[int] = frozenset(), drop: Sequence[int] = ()) -> list[str]:
    """The table's lines, the header first, none longer than ``cells``; columns in
    ``right`` are aligned right (see :func:`layout` for the rest). Cells are plain text
    already (see :func:`hostapp.cli.text.plain`)."""
    columns = layout(headers, rows, cells, shrink_first=shrink_first, keep=keep, drop=drop)
    lines = []
    for row in [list(headers), *rows]:
        parts = [text.pad(text.fit(row[i], w), w, right=i in right) for i, w in columns]
        line = GAP.join(parts).rstrip()
        lines.append(text.fit(line, cells) if cells is not None else line)
    return lines
