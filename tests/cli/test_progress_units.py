"""The live progress line's parts with a fixed clock: the line's layout at every width, the
time-left estimate, the board of several lines and what is written above it (drawn by a
terminal emulator), writes to stderr while a line is live, and the throttled plain lines."""

from __future__ import annotations

import asyncio
import fcntl
import io
import os
import re
import select
import struct
import sys
import termios

import pyte
import pytest

from hostapp.cli import progress, text
from hostapp.cli.follow import EventPrinter
from hostapp.cli.progress import LiveBoard, PlainView, Track, render
from tests.support.waiting import until_async


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that a terminal emulator draws."""

    def __init__(self, columns: int = 60, rows: int = 10):
        super().__init__()
        self.columns, self.rows = columns, rows
        self.screen = pyte.Screen(columns, rows)
        self.vt = pyte.Stream(self.screen)

    def write(self, data: str) -> int:
        self.vt.feed(data.replace("\n", "\r\n"))  # as a terminal's output processing does
        return super().write(data)

    def lines(self) -> list[str]:
        out = [line.rstrip() for line in self.screen.display]
        while out and not out[-1]:
            out.pop()
        return out


def track(label: str | None = None, message: str | None = None) -> Track:
    t = Track(label, started=0.0, message=message)
    t.note_progress(10, 100, 2.0)
    t.note_progress(30, 100, 6.0)
    return t


# -- one line ------------------------------------------------------------------------------------

def test_the_line_shows_bar_percent_elapsed_time_left_and_message():
    line = render(track(message="copying files"), 100, now=6.0)
    assert line == "⠋ [██████░░░░░░░░░░░░░░]  30% · 0:06 · ~14 s left · copying files"


def test_time_left_comes_from_the_recent_rate():
    t = track()
    assert t.remaining(6.0) == pytest.approx(14.0)   # 20 per 4 s: 70 left take 14 s
    assert t.remaining(10.0) == pytest.approx(10.0)  # and the clock goes on between updates
    assert t.remaining(18.0) == pytest.approx(2.0)
    # News long overdue: the rate is measured up to now, and the time left grows while none comes.
    assert t.remaining(30.0) == pytest.approx(70 / (20 / 28))
    assert t.remaining(30.0) < t.remaining(60.0)
    assert Track(None, 0.0).remaining(5.0) is None   # no progress yet: no estimate
    indeterminate = Track(None, 0.0)
    indeterminate.note_progress(3, None, 1.0)
    indeterminate.note_progress(4, None, 2.0)
    assert indeterminate.remaining(2.0) is None
    assert render(indeterminate, 80, now=2.0, frame=3) == "⠸ 4 · 0:02"


def test_an_operation_without_progress_shows_a_spinner_elapsed_and_its_message():
    t = Track(None, started=0.0, message="waiting for the server")
    assert [render(t, 80, now=75.0, frame=f)[0] for f in range(3)] == ["⠋", "⠙", "⠹"]
    assert render(t, 80, now=75.0) == "⠋ · 1:15 · waiting for the server"


def test_the_line_never_takes_more_cells_than_given_and_shows_server_text_plainly():
    message = "\x1b[31mred\x1b[0m 日本語のメッセージ\nsecond line\t" * 5
    for cells in range(1, 140):
        line = render(track("3f2a9c1b04de", message), cells, now=6.0)
        assert text.width(line) <= cells, (cells, line)
        assert "\x1b" not in line and "\n" not in line and "\t" not in line
    assert render(track(message=message), 200, now=6.0).endswith("…")


def test_colours_are_escape_codes_around_the_parts_and_only_when_asked():
    plain = render(track(message="m"), 80, now=6.0)
    coloured = render(track(message="m"), 80, now=6.0, colour=True)
    assert "\x1b[" not in plain and "\x1b[32m" in coloured
    assert text.width(re.sub(r"\x1b\[[0-9;]*m", "", coloured)) == text.width(plain)


def test_no_color_and_a_dumb_terminal_turn_colours_off(monkeypatch):
    master, slave = os.openpty()
    try:
        with os.fdopen(slave, "w", closefd=False) as tty:
            monkeypatch.delenv("NO_COLOR", raising=False)
            monkeypatch.setenv("TERM", "xterm")
            assert text.colour_wanted(tty) and text.is_terminal(tty)
            monkeypatch.setenv("NO_COLOR", "1")
            assert not text.colour_wanted(tty)
            monkeypatch.delenv("NO_COLOR")
            monkeypatch.setenv("TERM", "dumb")
            assert not text.colour_wanted(tty) and not text.is_terminal(tty)
        assert not text.colour_wanted(io.StringIO())
    finally:
        os.close(master)
        os.close(slave)


# -- the board: several live lines, and lines above them -----------------------------------------

def board(term: Terminal, clock: FakeClock) -> LiveBoard:
    return LiveBoard(term, colour=False, clock=clock, size=lambda: (term.columns, term.rows))


def test_the_board_keeps_one_line_per_operation_and_prints_above_them():
    term, clock = Terminal(columns=100), FakeClock()
    b = board(term, clock)
    b.update("a", "op-a", status="running")
    b.update("b", "op-b", progress=1, total=4, message="step 1/4")
    clock.now += 1
    b.update("a", "op-a", progress=5, total=10, message="half")
    b.write_above("the server asks (form): Continue? -> decline")
    assert term.lines() == [
        "the server asks (form): Continue? -> decline",
        # half done a second after it began: as the window, the time left from its start
        "⠋ op-a [██████████░░░░░░░░░░]  50% · 0:01 · ~1 s left · half",
        "⠋ op-b [█████░░░░░░░░░░░░░░░]  25% · 0:01 · step 1/4",
    ]
    clock.now += 1
    b.update("b", "op-b", progress=4, total=4, message="step 4/4")
    b.finish("b", "op-b", "completed")
    b.write_above("result of b")
    b.update("a", "op-a", status="input_required", message="waiting for your answer")
    assert term.lines() == [
        "the server asks (form): Continue? -> decline",
        "✓ op-b [████████████████████] 100% · completed · 0:02 · step 4/4",
        "result of b",
        "? op-a [██████████░░░░░░░░░░]  50% · needs your input · 0:02 · waiting for your answer",
    ]
    b.update("a", "op-a", status="running")  # answered: the status's message goes with it,
    assert term.lines()[-1] == "⠋ op-a [██████████░░░░░░░░░░]  50% · 0:02"  # the time asked no measure
    b.finish("a", "op-a", "failed")
    assert term.lines()[-1] == "✗ op-a [██████████░░░░░░░░░░]  50% · failed · 0:02"
    assert not b.tracks


def test_more_operations_than_rows_end_with_a_count():
    term, clock = Terminal(columns=50, rows=4), FakeClock()
    b = board(term, clock)
    for i in range(6):
        b.update(i, f"op{i}", progress=i, total=10)
    assert term.lines() == [
        "⠋ op0 [░░░░░░░░░░░░░░░░░░░░]   0% · 0:00",
        "⠋ op1 [██░░░░░░░░░░░░░░░░░░]  10% · 0:00",
        "… and 4 more",
    ]


def test_the_line_is_redrawn_in_place_and_moves_on_its_own():
    term, clock = Terminal(), FakeClock()
    b = board(term, clock)

    async def run() -> None:
        b.update("a", None, status="running")
        clock.now += 3
        # Drawn again by its own ticks, with nothing new to show.
        await until_async(lambda: term.getvalue().count("\r") >= 3, what="the line drawn three times")

    asyncio.run(run())
    written = term.getvalue()
    assert written.count("\r") >= 3 and "\n" not in written  # drawn again, never a new line
    assert term.lines() == [term.lines()[0]] and term.lines()[0].endswith("· 0:03")
    b.close()


def test_stderr_and_prints_go_above_the_live_line(monkeypatch):
    """A warning on stderr, or a print, while the live line is on a real terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 10, 100, 0, 0))
    out = os.fdopen(os.dup(slave), "w", encoding="utf-8", buffering=1)
    err = os.fdopen(os.dup(slave), "w", encoding="utf-8", buffering=1)
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("NO_COLOR", "1")

    async def run() -> None:
        printer = EventPrinter(False)
        printer.emit("status", status="running")
        printer.emit("progress", progress=1, total=2, message="first half")
        print("hostapp: a warning", file=sys.stderr)
        print("a print", end="")
        print(" in two writes")
        assert isinstance(sys.stderr, progress._Above)  # routed while the line is live
        printer.emit("status", status="completed")
        assert sys.stderr is err and sys.stdout is out  # and given back once no line is live

    try:
        asyncio.run(run())
        out.flush()
        err.flush()
        raw = b""
        while True:
            if not select.select([master], [], [], 0.2)[0]:
                break
            raw += os.read(master, 65536)
    finally:
        out.close()
        err.close()
        os.close(slave)
        os.close(master)
    screen = pyte.Screen(100, 10)
    pyte.ByteStream(screen).feed(raw)
    lines = [line.rstrip() for line in screen.display if line.strip()]
    assert lines[:2] == ["hostapp: a warning", "a print in two writes"], lines
    assert lines[2] == "✓ [██████████░░░░░░░░░░]  50% · completed · 0:00 · first half", lines


# -- without a terminal --------------------------------------------------------------------------

def test_plain_progress_lines_are_throttled_and_the_last_one_comes_before_the_end():
    stream, clock = io.StringIO(), FakeClock()
    view = PlainView(stream, clock)
    for step in range(1, 41):  # 40 steps in 2.5 s
        view.show("progress", {}, lambda s=step: f"progress {s}/40")
        clock.now += 0.0625
    view.show("progress", {}, lambda: "progress 40/40")  # the same again: nothing new
    view.show("status", {}, lambda: "status: completed")
    assert stream.getvalue().splitlines() == ["progress 1/40", "progress 17/40", "progress 33/40",
                                              "progress 40/40", "status: completed"]


def test_a_suspended_board_draws_nothing_until_the_block_ends():
    """A question read from the terminal, say: no live line under the person's typing."""
    term, clock = Terminal(), FakeClock()
    b = board(term, clock)
    b.update("a", None, progress=1, total=2)
    with b.suspended():
        assert term.lines() == []
        b.update("a", None, progress=2, total=2)  # news meanwhile is kept, not drawn
        term.write("Continue? [y/n] y\n")
        assert term.lines() == ["Continue? [y/n] y"]
    assert term.lines() == ["Continue? [y/n] y", "⠋ [████████████████████] 100% · 0:00"]


def test_a_printer_draws_live_lines_only_on_a_terminal_and_when_allowed(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(EventPrinter(False, stream=Tty()).view, progress.LiveView)
    assert isinstance(EventPrinter(False, stream=Tty(), live=False).view, PlainView)  # hostapp cancel, resume
    assert isinstance(EventPrinter(False, stream=io.StringIO(), live=True).view, PlainView)  # resume --wait | cat
