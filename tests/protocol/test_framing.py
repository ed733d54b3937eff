"""Newline-delimited framing: lines across chunks, oversized lines dropped as they stream by."""

from __future__ import annotations

from hostapp.protocol.framing import LineFramer, OversizedLine


def frame(*chunks: bytes, limit: int = 10) -> list:
    framer = LineFramer(limit)
    return [line for chunk in chunks for line in framer.feed(chunk)] + framer.end()


def test_lines_across_chunks_and_a_last_line_without_lf():
    assert frame(b"ab", b"c\nde\n", b"f") == [b"abc", b"de", b"f"]


def test_an_oversized_line_is_dropped_and_the_next_one_kept():
    assert frame(b"0123456789", b"0123\nok\n") == [OversizedLine(14), b"ok"]
    assert frame(b"0123456789abc\nok\n") == [OversizedLine(13), b"ok"]
    assert frame(b"0123456789ab") == [OversizedLine(12)]


def test_nothing_past_the_limit_is_kept():
    framer = LineFramer(10)
    for _ in range(1000):
        assert framer.feed(b"x" * 7) == []
        assert sum(map(len, framer._parts)) <= 10
    assert framer.feed(b"\nok\n") == [OversizedLine(7000), b"ok"]


def test_a_line_of_exactly_the_limit_is_kept():
    assert frame(b"01234", b"56789\n") == [b"0123456789"]
