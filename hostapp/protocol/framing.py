"""Sans-I/O framing of newline-delimited JSON-RPC (the stdio transport's byte stream).

Bytes go in as they are read; complete lines come out, each at most ``max_line_bytes``.
A longer line is dropped as it streams by, never held whole: it comes out as an
:class:`OversizedLine` with its size, once its end is seen (or the stream's).
"""

from __future__ import annotations

from typing import NamedTuple

from hostapp.protocol.jsonrpc import MAX_MESSAGE_BYTES


class OversizedLine(NamedTuple):
    """A line that was longer than the limit: dropped, only its size is known."""

    size: int


class LineFramer:
    """Split a byte stream at LF into lines of bounded length.

    States: between lines; inside a line (its parts kept); inside an oversized line (its
    bytes counted and dropped). Hot path: progress notifications can come by the hundred
    thousand, so a chunk is split once (``bytes.split``), and only an unfinished line is
    kept across chunks, as parts (joining at every chunk would copy a long line over and
    over). The size of a line is checked before a part of it is kept.
    """

    __slots__ = ("_limit", "_parts", "_size", "_skipped")

    def __init__(self, max_line_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self._limit = max_line_bytes
        self._parts: list[bytes] = []  # the unfinished last line
        self._size = 0  # bytes in _parts
        self._skipped = 0  # bytes of an oversized line being dropped (0: not dropping)

    def feed(self, chunk: bytes) -> list[bytes | OversizedLine]:
        """The lines ``chunk`` completes, in order (without their LF; CR is left as it is)."""
        out: list[bytes | OversizedLine] = []
        limit = self._limit
        if self._skipped:
            end = chunk.find(b"\n")
            if end < 0:
                self._skipped += len(chunk)
                return out
            out.append(OversizedLine(self._skipped + end))
            self._skipped = 0
            chunk = chunk[end + 1:]
        end = chunk.find(b"\n")
        if end < 0:
            self._keep(chunk)
            return out
        if self._parts:
            # Only the unfinished line is joined, not the chunk that ends it: a long line
            # is copied once.
            size = self._size + end
            if size > limit:
                out.append(OversizedLine(size))
            else:
                self._parts.append(chunk[:end])
                out.append(b"".join(self._parts))
            self._parts = []
            self._size = 0
            chunk = chunk[end + 1:]
        lines = chunk.split(b"\n")
        last = lines.pop()
        for line in lines:
            out.append(line if len(line) <= limit else OversizedLine(len(line)))
        if last:
            self._keep(last)
        return out

    def end(self) -> list[bytes | OversizedLine]:
        """The stream ended: its last line, if it had no LF (an oversized one as such)."""
        if self._skipped:
            out: list[bytes | OversizedLine] = [OversizedLine(self._skipped)]
        elif self._parts:
            out = [b"".join(self._parts)]
        else:
            out = []
        self._parts, self._size, self._skipped = [], 0, 0
        return out

    def _keep(self, part: bytes) -> None:
        if not part:
            return
        size = self._size + len(part)
        if size > self._limit:  # counted before it is kept
            self._parts, self._size, self._skipped = [], 0, size
        else:
            self._parts.append(part)
            self._size = size
