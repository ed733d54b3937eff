"""Quoting a server's bytes: short, escaped, and never a secret."""

from __future__ import annotations

from hostapp.protocol.excerpt import EXCERPT_CHARS, excerpt, redacted


def test_short_text_is_quoted_whole():
    assert excerpt(b"hello") == "hello"


def test_control_characters_and_invalid_utf8_are_escaped():
    assert excerpt(b"\x1b[31mred\x1b[0m\nnext \xff") == "\\x1b[31mred\\x1b[0m\\nnext \\xff"


def test_a_long_message_is_cut_with_an_ellipsis_and_read_no_further():
    quoted = excerpt(b"x" * 10_000_000)
    assert quoted == "x" * EXCERPT_CHARS + "…"


def test_secrets_and_handles_are_redacted_everything_else_kept():
    value = {"id": 7, "result": {"accessToken": "abc", "nested": {"password": "p", "taskId": "t-1"},
                                 "content": [{"type": "text", "text": "hi"}], "_meta": {"nextResumeToken": "r"}}}
    shown = redacted(value)
    assert shown == {"id": 7, "result": {"accessToken": "<redacted>",
                                         "nested": {"password": "<redacted>", "taskId": "<redacted>"},
                                         "content": [{"type": "text", "text": "hi"}],
                                         "_meta": {"nextResumeToken": "<redacted>"}}}


def test_redacting_a_huge_value_looks_at_a_bounded_part():
    shown = redacted({"list": list(range(1_000_000)), "text": "y" * 1_000_000})
    assert len(shown["list"]) == 17 and shown["list"][-1] == "…"
    assert len(shown["text"]) < 200
