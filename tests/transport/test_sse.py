"""The SSE decoder: the WHATWG rules case by case, and the same events as httpx-sse on random streams."""

from __future__ import annotations

import itertools
import random

import pytest
from httpx_sse._decoders import SSEDecoder, SSELineDecoder

from hostapp.transport.sse import SseDecoder, SseEvent, SseEventTooLarge


def decode(*chunks: bytes) -> list[SseEvent]:
    decoder = SseDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def test_priming_event_then_messages():
    assert decode(b"id: s:0\nretry: 500\ndata:\n\n", b"id: s:1\ndata: {\"a\":1}\n\n") == [
        SseEvent("s:0", 500, ""), SseEvent("s:1", None, '{"a":1}')]


@pytest.mark.parametrize("chunks", [
    [b"data: a\r\n\r\n"],
    [b"data: a\r", b"\n\r\n"],  # a CRLF split across chunks is one line end
    [b"data: a\r\r"],
    [b"data: a\n", b"\n"],
    [b"da", b"ta", b": ", b"a\n\n"],
])
def test_every_line_end_and_chunking(chunks):
    assert decode(*chunks) == [SseEvent(None, None, "a")]


def test_multiline_data_comments_and_field_rules():
    stream = (b": keep-alive\n"
              b"data: first\ndata:second\ndata\n"   # 'data' with no colon is an empty line of data
              b"id: bad\x00id\nretry: soon\nevent: custom\nunknown: x\n\n")
    assert decode(stream) == [SseEvent(None, None, "first\nsecond\n", "custom")]


def test_utf8_split_inside_a_character_and_bom():
    raw = "\ufeffdata: Grüße 世界\n\n".encode()
    assert decode(*(raw[i:i + 1] for i in range(len(raw)))) == [SseEvent(None, None, "Grüße 世界")]


def test_unterminated_event_is_not_dispatched():
    decoder = SseDecoder()
    assert decoder.feed(b"data: half") == []
    assert decoder.feed(b" of it\n") == []
    assert decoder.feed(b"\n") == [SseEvent(None, None, "half of it")]


LINE_PIECES = ["data: x", "data:y", "data", "data: {\"k\": [1, 2]}", "id: 7", "id: a:1", "id:",
               "retry: 500", "retry: x1", ": comment", "event: message", "", "", "", "data: é 世"]
LINE_ENDS = ["\n", "\r\n", "\r"]


def reference_events(text_chunks: list[str]) -> list[tuple]:
    """httpx-sse's reading of the stream, with its repeated last id folded away."""
    lines, decoder, out = SSELineDecoder(), SSEDecoder(), []
    for chunk in text_chunks:
        for line in lines.decode(chunk):
            event = decoder.decode(line.rstrip("\n"))
            if event is not None and (event.data or event.retry is not None):
                out.append((event.id, event.retry, event.data))
    return out


def our_events(byte_chunks: list[bytes]) -> list[tuple]:
    decoder, last_id, out = SseDecoder(), "", []
    for chunk in byte_chunks:
        for event in decoder.feed(chunk):
            last_id = event.id if event.id is not None else last_id
            if event.data or event.retry is not None:
                out.append((last_id, event.retry, event.data))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_same_events_as_httpx_sse_on_random_streams(seed):
    rng = random.Random(seed)
    text = "".join(rng.choice(LINE_PIECES) + rng.choice(LINE_ENDS) for _ in range(rng.randint(5, 80)))
    text += "\n\n"
    cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(0, 20))))
    text_chunks = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]
    raw = text.encode()
    byte_cuts = sorted(rng.sample(range(1, len(raw)), k=min(len(raw) - 1, rng.randint(0, 20))))
    byte_chunks = [raw[a:b] for a, b in itertools.pairwise([0, *byte_cuts, len(raw)])]
    assert our_events(byte_chunks) == reference_events(text_chunks)


def test_an_endless_line_is_refused_before_it_passes_the_limit():
    decoder = SseDecoder(max_event_chars=1000)
    assert decoder.feed(b"data: ") == []
    with pytest.raises(SseEventTooLarge) as caught:
        for _ in range(100):
            decoder.feed(b"x" * 100)
    assert "limit of 1000 characters" in str(caught.value)
    assert sum(map(len, decoder._tail)) <= 1000  # nothing past the limit was kept


def test_an_endless_event_is_refused_whatever_its_lines():
    decoder = SseDecoder(max_event_chars=1000)
    with pytest.raises(SseEventTooLarge):
        for _ in range(100):
            decoder.feed(b"data: " + b"x" * 40 + b"\n")
    assert sum(map(len, decoder._data)) <= 1000


def test_events_that_end_before_the_limit_is_passed_are_kept():
    decoder = SseDecoder(max_event_chars=100)
    assert decoder.feed(b"data: " + b"a" * 90 + b"\n\n") == [SseEvent(None, None, "a" * 90)]
    with pytest.raises(SseEventTooLarge) as caught:
        decoder.feed(b"data: ok\n\ndata: " + b"b" * 200)
    assert caught.value.events == [SseEvent(None, None, "ok")]


def test_comments_and_replaced_fields_never_reach_the_limit():
    decoder = SseDecoder(max_event_chars=100)
    for _ in range(1000):
        assert decoder.feed(b": keep-alive\nid: 1\nevent: x\n: more\n") == []
    assert decoder.feed(b"data: a\n\n") == [SseEvent("1", None, "a", "x")]
