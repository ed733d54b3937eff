"""Server text printed for a person cannot drive the terminal: escape sequences and
carriage returns in a result, a message or a log line are neutralised; the lines of a
result stay lines."""

from __future__ import annotations

import io

from hostapp.cli.follow import EventPrinter
from hostapp.cli.text import terminal_safe

HOSTILE = "ok\x1b[2J\x1b]0;owned\x07\rfake prompt$ \x9b31m"


def printed(event: str, **fields) -> str:
    out = io.StringIO()  # not a terminal: the plain lines
    EventPrinter(False, stream=out).emit(event, **fields)
    return out.getvalue()


def test_a_result_cannot_send_escape_sequences_to_the_terminal():
    text = printed("result", result={"content": [{"type": "text", "text": HOSTILE + "\nsecond line"}]})
    assert "\x1b" not in text and "\r" not in text and "\x07" not in text and "\x9b" not in text
    assert text.splitlines() == ["ok\ufffd[2J\ufffd]0;owned\ufffd\ufffdfake prompt$ \ufffd31m", "second line"]


def test_messages_errors_and_logs_are_neutralised_too():
    for event, fields in [("progress", {"progress": 1, "total": 2, "message": HOSTILE}),
                          ("status", {"status": "running", "message": HOSTILE}),
                          ("log", {"level": "info", "data": HOSTILE}),
                          ("error", {"code": -1, "message": HOSTILE})]:
        text = printed(event, **fields)
        assert "\x1b" not in text and "\r" not in text, (event, text)


def test_an_open_question_says_it_is_left_open():
    text = printed("elicitation", mode="form", message="Your name?", answer=None, pending=True)
    assert text.strip().endswith("-> left open")


def test_terminal_safe_keeps_lines_and_tabs():
    assert terminal_safe("a\tb\nc") == "a\tb\nc"
