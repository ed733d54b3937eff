"""A sans-I/O decoder for ``text/event-stream`` (Server-Sent Events), built for throughput.

Why not httpx-sse's decoder: it is correct but handles one line per call through a
generator chain, which made SSE decoding the largest cost of a stream of progress
notifications. This one takes whole chunks and splits them with ``str`` methods; the
WHATWG interpretation rules are the same (line ends CRLF/LF/CR, comments, ``data`` lines
joined with LF, an ``id`` containing NUL ignored, ``retry`` only when all ASCII digits,
an event dispatched on an empty line). httpx-sse stays the reference: the tests decode
the same streams with both and compare.
"""

from __future__ import annotations

import codecs
from typing import NamedTuple

from hostapp.protocol.jsonrpc import MAX_MESSAGE_BYTES, ProtocolError


class SseEventTooLarge(ProtocolError):
    """An SSE line or event grew past the decoder's limit before it ended.

    Raised by :meth:`SseDecoder.feed` before the excess is kept: a server that streams one
    endless line or event would otherwise fill the host's memory. The decoder is spent
    after it (the rest of the stream cannot be told apart from the oversized event); the
    caller drops the connection, after handling :attr:`events`: those the same chunk
    completed before the limit was passed.
    """

    def __init__(self, message: str, events: list[SseEvent] | None = None):
        super().__init__(message)
        self.events: list[SseEvent] = events or []


class SseEvent(NamedTuple):
    """One dispatched event: ``id`` and ``retry`` as the stream set them in this event
    (None when it did not), ``data`` its data lines joined with LF ("" for a priming event).
    """

    id: str | None
    retry: int | None
    data: str
    event: str = "message"


class SseDecoder:
    """Feed bytes as they arrive, get the complete events they finish.

    States: between events, or inside an event (fields seen, no empty line yet). A
    partial line and a CR at a chunk's end (maybe half of a CRLF) carry over to the next
    feed. The stream's last-event-id is not repeated on later events: a caller that needs
    it keeps the last ``id`` it saw.
    """

    __slots__ = ("_bom_checked", "_data", "_data_size", "_event", "_id", "_in_event", "_limit", "_retry",
                 "_skip_lf", "_tail", "_tail_size", "_utf8")

    def __init__(self, max_event_chars: int = MAX_MESSAGE_BYTES) -> None:
        """``max_event_chars``: the most an event's data (its lines joined) and any one of
        its lines may hold, counted in characters (a message is as many bytes or more)."""
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._limit = max_event_chars
        self._tail: list[str] = []  # the unfinished last line, in pieces
        self._tail_size = 0
        self._data_size = 0  # characters in _data, with the LFs that will join them
        self._skip_lf = False  # the previous chunk ended with CR: a leading LF completes a CRLF
        self._bom_checked = False
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None
        self._event = ""
        self._in_event = False

    def feed(self, chunk: bytes) -> list[SseEvent]:
        text = self._utf8.decode(chunk)
        if not text:
            return []
        if not self._bom_checked:
            self._bom_checked = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf:
            self._skip_lf = False
            if text[:1] == "\n":
                text = text[1:]
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if "\n" not in text:
            self._grow_tail(text)
            return []
        first: list[str] = []
        if self._tail:
            # Only the unfinished line is joined, not the whole chunk with it: a long line
            # is copied once, however it was cut.
            end = text.index("\n")
            self._grow_tail(text[:end])
            pieces, self._tail, self._tail_size = self._tail, [], 0
            first.append("".join(pieces))
            del pieces
            text = text[end + 1:]
        lines = text.split("\n")
        last = lines.pop()
        if first:
            lines[:0] = first
        events = self._interpret(lines)
        if last:
            try:
                self._grow_tail(last)
            except SseEventTooLarge as exc:
                exc.events = events
                raise
        return events

    def _grow_tail(self, text: str) -> None:
        size = self._tail_size + len(text)
        if size + self._data_size > self._limit:
            raise SseEventTooLarge(self._too_large())
        self._tail.append(text)
        self._tail_size = size

    def _too_large(self) -> str:
        return f"an SSE event grew past the limit of {self._limit} characters without ending"

    def _interpret(self, lines: list[str]) -> list[SseEvent]:
        events: list[SseEvent] = []
        data = self._data
        in_event = self._in_event
        limit = self._limit
        size = self._data_size
        for line in lines:
            if not line:
                if in_event:
                    events.append(SseEvent(self._id, self._retry, "\n".join(data), self._event or "message"))
                    data.clear()
                    size = 0
                    self._id = self._retry = None
                    self._event = ""
                    in_event = False
                continue
            if line.startswith("data:"):  # the common case first
                # Only data is kept: other fields replace their value, comments are dropped.
                size += len(line) - 4
                if size > limit:
                    raise SseEventTooLarge(self._too_large(), events)
                # One slice, not two: a long line is copied once more, not twice.
                data.append(line[6:] if line[5:6] == " " else line[5:])
                in_event = True
                continue
            if line[0] == ":":
                continue  # a comment, e.g. a keep-alive
            field, colon, value = line.partition(":")
            if colon and value[:1] == " ":
                value = value[1:]
            if field == "id":
                if "\0" not in value:
                    self._id = value
                    in_event = True
            elif field == "retry":
                if value.isascii() and value.isdigit():
                    self._retry = int(value)
                    in_event = True
            elif field == "data":
                size += len(value) + 1
                if size > limit:
                    raise SseEventTooLarge(self._too_large(), events)
                data.append(value)
                in_event = True
            elif field == "event":
                self._event = value
                in_event = True
        self._in_event = in_event
        self._data_size = size
        return events
