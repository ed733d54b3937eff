"""Fuzz: JSON-RPC parsing and stdio framing take any bytes, and raise only ProtocolError.

Each Hypothesis example is a seed (a message, nearly one, or garbage) and a random
generator; the target runs the seed and MUTANTS cheap byte-level mutants of it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostapp.protocol.framing import LineFramer, OversizedLine
from hostapp.protocol.jsonrpc import ProtocolError, encode, parse
from tests.fuzz.budget import MUTANTS, count, fuzz, time_limit
from tests.fuzz.strategies import chunked, generators, message_bytes, mutants

pytestmark = pytest.mark.timeout(time_limit())


def parse_checked(data: bytes | str) -> None:
    try:
        message = parse(data)
    except ProtocolError:
        return
    # What was read is what is written back.
    assert parse(encode(message)) == message


@fuzz
@given(message_bytes(), generators)
def test_parse_raises_only_protocol_error_and_round_trips(seed, rnd):
    for data in [seed, *mutants(seed, rnd, MUTANTS)]:
        count("jsonrpc.parse")
        parse_checked(data)
        count("jsonrpc.parse")
        parse_checked(data.decode("utf-8", errors="surrogateescape"))


@fuzz
@given(st.lists(message_bytes(), max_size=6), st.lists(st.integers(min_value=0), max_size=8),
       st.integers(min_value=1, max_value=300), generators)
def test_line_framing_does_not_depend_on_how_the_stream_was_cut(messages, cuts, limit, rnd):
    seed = b"\n".join(messages)
    for stream in [seed, *mutants(seed, rnd, MUTANTS)]:
        count("framing.LineFramer")
        check_framing(stream, chunked(stream, [rnd.randrange(1 << 20) for _ in cuts]), limit)


def check_framing(stream: bytes, chunks: list[bytes], limit: int) -> None:
    framer = LineFramer(limit)
    got: list = []
    for chunk in chunks:
        got += framer.feed(chunk)
        assert framer._size <= limit  # nothing past the limit is kept
    got += framer.end()
    reference = [line if len(line) <= limit else OversizedLine(len(line)) for line in stream.split(b"\n")]
    if reference and reference[-1] == b"":
        reference.pop()
    assert got == reference
    for line in got:
        if type(line) is bytes:
            parse_checked(line)
