"""Fuzz: the SSE decoder takes any bytes cut anywhere, reads the same events whatever the
cuts, keeps no more than its limit, and raises nothing but SseEventTooLarge."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostapp.protocol.jsonrpc import ProtocolError, parse
from hostapp.transport.sse import SseDecoder, SseEventTooLarge
from tests.fuzz.budget import MUTANTS, count, fuzz, time_limit
from tests.fuzz.strategies import chunked, generators, message_bytes, mutants

pytestmark = pytest.mark.timeout(time_limit())

line_ends = st.sampled_from([b"\n", b"\r\n", b"\r"])
fields = st.one_of(
    message_bytes().map(lambda m: b"data: " + m.replace(b"\n", b" ").replace(b"\r", b" ")),
    st.sampled_from([b"data", b"data:", b"id: 1", b"id: a\x00b", b"id:", b"retry: 10", b"retry: x", b": ping",
                     b"event: message", b"event:", b"", b"", b"\xef\xbb\xbfdata: bom", b"\xff\xfe", b"unknown: 1"]),
    st.binary(max_size=30),
)


@st.composite
def sse_streams(draw) -> bytes:
    parts = draw(st.lists(st.tuples(fields, line_ends), max_size=12))
    return b"".join(field + end for field, end in parts)


def decode(chunks: list[bytes], limit: int) -> tuple[list, Exception | None]:
    decoder = SseDecoder(limit)
    events: list = []
    for chunk in chunks:
        try:
            events += decoder.feed(chunk)
        except SseEventTooLarge as exc:
            return events + exc.events, exc
        assert decoder._tail_size + decoder._data_size <= limit + len(chunk)
    return events, None


@fuzz
@given(sse_streams(), st.lists(st.integers(min_value=0), max_size=10), generators)
def test_the_same_events_whatever_the_cuts(seed, cuts, rnd):
    for stream in [seed, *mutants(seed, rnd, MUTANTS)]:
        count("sse.SseDecoder (cuts)")
        whole, error = decode([stream], 1 << 20)
        assert error is None
        pieces, error = decode(chunked(stream, [rnd.randrange(1 << 20) for _ in cuts]), 1 << 20)
        assert error is None and pieces == whole
        for event in whole:
            try:
                parse(event.data)
            except ProtocolError:
                pass


@fuzz
@given(sse_streams(), st.lists(st.integers(min_value=0), max_size=10), st.integers(min_value=1, max_value=120),
       generators)
def test_a_small_limit_is_kept_or_refused_never_passed(seed, cuts, limit, rnd):
    for stream in [seed, *mutants(seed, rnd, MUTANTS)]:
        count("sse.SseDecoder (limit)")
        events, error = decode(chunked(stream, [rnd.randrange(1 << 20) for _ in cuts]), limit)
        for event in events:
            assert len(event.data) <= limit
        if error is None:
            unlimited, _ = decode([stream], 1 << 20)
            assert events == unlimited
