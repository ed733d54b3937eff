"""How ``hostapp call`` and ``hostapp resume --wait`` show progress to a person.

On a terminal (:class:`LiveView`): one live line per followed operation, redrawn in place
by a :class:`LiveBoard` — a bar and the percentage when the server gave a total, a spinner
otherwise, the server's latest message, the elapsed time and, from the rate so far, the
time left, in the window's words (:mod:`hostapp.presentation`). Every other line (a
question, a log line, a result, something on stderr) is written above the live lines: they
are cleared, the line printed, and they are drawn again. A finished operation's last line stays in the scrollback.

Anywhere else (:class:`PlainView`): the short lines of before, one per event, except that
progress is throttled to one line per meaningful change a second (the last one before
any other line is always printed). ``--json`` output never comes here.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

from hostapp.cli import text
from hostapp.engine.api import TERMINAL, OperationView
from hostapp.presentation import Pace, clock, status_word, time_left

Clock = Callable[[], float]

#: How often the live lines move without news (the spinner, the elapsed time), in seconds.
TICK = 0.125
#: Progress news is drawn at once unless the last drawing is more recent than this.
MIN_REDRAW = 0.05
#: Without a terminal, at most one progress line a second per operation.
PLAIN_INTERVAL = 1.0
BAR_CELLS = (20, 10, 6)
#: A shorter bar, or none, before a message cut to fewer cells than this.
MESSAGE_CELLS = 12

_SGR = {"bar": "32", "percent": "1", "dim": "2", "ask": "33", "bad": "31", "good": "32"}
_STATUS_STYLE = {"input_required": "ask", "completed": "good", "failed": "bad", "expired": "bad", "unknown": "bad"}


@dataclass(frozen=True)
class Glyphs:
    spinner: str
    full: str
    empty: str
    ends: dict[str, str]
    ellipsis: str


UNICODE = Glyphs("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏", "█", "░", {"completed": "✓", "failed": "✗", "expired": "✗",
                                          "cancelled": "■", "unknown": "?", "input_required": "?"}, "…")
ASCII = Glyphs("|/-\\", "#", "-", {"completed": "+", "failed": "x", "expired": "x", "cancelled": "-",
                                  "unknown": "?", "input_required": "?"}, "...")


@dataclass
class Track:
    """What one live line shows of an operation."""

    label: str | None
    started: float
    status: str = "running"
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    ended: float | None = None
    status_message: bool = False  # the message came with the status, and goes with it
    pace: Pace = field(init=False)

    def __post_init__(self) -> None:
        self.pace = Pace(since=self.started)  # measured from the start until a second piece of news

    def note_progress(self, progress: float, total: float | None, now: float) -> None:
        self.progress, self.total = progress, total
        self.pace.note(progress, now)

    @property
    def fraction(self) -> float | None:
        if self.total and self.total > 0 and self.progress is not None:
            return max(0.0, min(1.0, self.progress / self.total))
        return None

    def elapsed(self, now: float) -> float:
        return (self.ended if self.ended is not None else now) - self.started

    def remaining(self, now: float) -> float | None:
        """Seconds left at the rate of the recent progress (:class:`~hostapp.presentation.Pace`,
        the window's estimate); None without a total or a rate."""
        estimate = self.pace.estimate(self.progress, self.total, now)
        return None if estimate is None else estimate.seconds_left


def render(track: Track, cells: int, now: float, frame: int = 0, colour: bool = False,
           glyphs: Glyphs = UNICODE) -> str:
    """One line for ``track`` that takes at most ``cells`` terminal cells."""
    ended = track.status in TERMINAL
    if ended or track.status == "input_required":
        mark = (glyphs.ends.get(track.status, "?"), _STATUS_STYLE.get(track.status, ""))
    else:
        mark = (glyphs.spinner[frame % len(glyphs.spinner)], "bar")
    fraction = track.fraction
    word = status_word(track.status) if track.status != "running" else None
    remaining = None if ended else track.remaining(now)
    message = text.plain(track.message) if track.message else ""

    def parts(bar: int, with_left: bool, with_label: bool) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = [mark]
        if with_label and track.label:
            out += [(" ", ""), (track.label, "dim")]
        if fraction is not None:
            if bar:
                done = round(fraction * bar)
                out += [(" [", ""), (glyphs.full * done, "bar"), (glyphs.empty * (bar - done), "dim"), ("]", "")]
            out += [(" ", ""), (f"{int(fraction * 100):3d}%", "percent")]
        elif track.progress is not None:
            out += [(" ", ""), (f"{track.progress:g}", "percent")]
        if word:
            out += [(" · ", "dim"), (word, _STATUS_STYLE.get(track.status, ""))]
        out += [(" · ", "dim"), (clock(track.elapsed(now)), "")]
        if with_left and remaining is not None:
            out += [(" · ", "dim"), (time_left(remaining), "")]
        return out

    # Narrower: the bar shortens, then the message goes, then the bar, the time left, the label.
    wanted = min(MESSAGE_CELLS, text.width(message)) if message else 0
    tries = [(wanted, b, True, True) for b in BAR_CELLS] + [(0, b, True, True) for b in (*BAR_CELLS, 0)]
    tries += [(0, 0, False, True), (0, 0, False, False)]
    chosen: list[tuple[str, str]] = []
    for need, bar, with_left, with_label in tries:
        chosen = parts(bar, with_left, with_label)
        room = cells - sum(text.width(t) for t, _ in chosen) - 3  # " · " before the message
        if room >= need:
            if message and room >= min(8, text.width(message)):
                chosen += [(" · ", "dim"), (text.fit(message, room, glyphs.ellipsis), "")]
            break
    else:  # a very narrow terminal: what fits, without colour (a cut escape sequence would spill)
        return text.fit("".join(t for t, _ in chosen), cells, glyphs.ellipsis)
    if not colour:
        return "".join(t for t, _ in chosen)
    return "".join(f"\x1b[{_SGR[s]}m{t}\x1b[0m" if s and t.strip() else t for t, s in chosen)


def terminal_size(stream: TextIO) -> tuple[int, int]:
    """The terminal's (columns, rows): the real size of ``stream``'s terminal, read at
    every drawing (a resized window), else what the environment says."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        size = shutil.get_terminal_size()
    if size.columns <= 0 or size.lines <= 0:  # a terminal that never said its size
        size = shutil.get_terminal_size()
    return max(size.columns, 1), max(size.lines, 1)


class LiveBoard:
    """The live lines at the bottom of one terminal, one per operation, and everything
    else written above them. One board per terminal stream (:func:`board_for`)."""

    def __init__(self, stream: TextIO, *, colour: bool, glyphs: Glyphs = UNICODE, clock: Clock = time.monotonic,
                 size: Callable[[], tuple[int, int]] | None = None):
        self.stream = stream
        self.colour = colour
        self.glyphs = glyphs
        self.clock = clock
        self.size = size or (lambda: terminal_size(stream))
        self.tracks: dict[object, Track] = {}
        self.frame = 0
        self._drawn = 0         # how many live lines are on the screen (the cursor ends the last)
        self._drawn_at = -1e9
        self._paused = 0        # suspended, or a line on stderr not yet ended
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._routed: list[tuple[str, Any, Any]] = []

    # -- what the followers say --------------------------------------------------------------
    def track(self, key: object, label: str | None) -> Track:
        track = self.tracks.get(key)
        if track is None:
            track = self.tracks[key] = Track(label, self.clock())
            if len(self.tracks) == 1:
                self._route()
        return track

    def update(self, key: object, label: str | None, *, status: str | None = None,
               progress: float | None = None, total: float | None = None, message: str | None = None) -> None:
        track = self.track(key, label)
        if status is not None and status != track.status:
            track.status = status
            if status == "input_required":
                track.pace = Pace()  # the time spent on the question is no measure of the rate
            if track.status_message:  # "waiting for your answer" is over once answered
                track.message, track.status_message = None, False
        if progress is not None:
            track.note_progress(progress, total, self.clock())
        if message and message != track.message:  # (the engine repeats a status's message with progress)
            track.message, track.status_message = message, progress is None
        if not self._schedule() or self.clock() - self._drawn_at >= MIN_REDRAW:
            self.redraw()  # else the next tick draws it, with whatever news came by then

    def seed(self, key: object, label: str | None, *, age: float, status: str, progress: float | None,
             total: float | None, message: str | None) -> None:
        """A line for an operation that began ``age`` seconds ago, as the journal left it."""
        track = self.track(key, label)
        track.started = self.clock() - max(0.0, age)
        track.pace = Pace()  # its life so far may hold a pause: the rate waits for news seen here
        track.status, track.message = status, message
        track.status_message = status == "input_required"
        if progress is not None:
            track.note_progress(progress, total, self.clock())
        self.update(key, label)

    def finish(self, key: object, label: str | None, status: str) -> None:
        """The operation ended: its last line goes to the scrollback, the others go on."""
        track = self.track(key, label)
        track.status, track.ended = status, self.clock()
        line = render(track, self._cells(), self.clock(), self.frame, self.colour, self.glyphs)
        del self.tracks[key]
        self.write_above(line)

    def drop(self, key: object) -> None:
        """Forget an operation's line without leaving it in the scrollback."""
        if self.tracks.pop(key, None) is not None:
            self.redraw()

    def write_above(self, lines: str) -> None:
        """Print ``lines`` (a new line is added) above the live lines."""
        self._clear()
        self.stream.write(lines + "\n")
        self.redraw()

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """No live line while the block runs (a question read from the terminal, say)."""
        self._clear()
        self._paused += 1
        try:
            yield
        finally:
            self._paused -= 1
            self.redraw()

    def close(self) -> None:
        """The command ends: the live lines stay as they are, the cursor goes below them."""
        if self._drawn:
            self.stream.write("\n")
            self._drawn = 0
        self.tracks.clear()
        self._settle()

    # -- drawing -------------------------------------------------------------------------------
    def _cells(self) -> int:
        return max(1, self.size()[0] - 1)  # never the last column: some terminals wrap there

    def _up(self) -> str:
        return f"\x1b[{self._drawn - 1}A" if self._drawn > 1 else ""

    def _clear(self) -> None:
        if self._drawn:
            self.stream.write("\r" + self._up() + "\x1b[J")
            self._drawn = 0

    def redraw(self) -> None:
        """Draw the live lines again, in place."""
        if self._held():
            self._clear()
            self.stream.flush()
            return
        if not self.tracks:
            self._clear()
            self.stream.flush()
            self._settle()
            return
        columns, rows = self.size()
        cells, now = max(1, columns - 1), self.clock()
        tracks = list(self.tracks.values())
        room = max(1, rows - 1)
        shown = tracks if len(tracks) <= room else tracks[:room - 1]
        lines = [render(t, cells, now, self.frame, self.colour, self.glyphs) for t in shown]
        if len(shown) < len(tracks):
            lines.append(text.fit(f"{self.glyphs.ellipsis} and {len(tracks) - len(shown)} more", cells))
        erase_below = "\x1b[J" if len(lines) < self._drawn else ""
        self.stream.write("\r" + self._up() + "\n".join(line + "\x1b[K" for line in lines) + erase_below)
        self.stream.flush()
        self._drawn, self._drawn_at = len(lines), now

    def _tick(self) -> None:
        self._timer = None
        if self.tracks:
            self.frame += 1
            self.redraw()
            self._schedule()

    def _schedule(self) -> bool:
        """Tick while lines are live; False without an event loop (drawn at each change only)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        if self._timer is None or self._timer_loop is not loop:
            self._timer, self._timer_loop = loop.call_later(TICK, self._tick), loop
        return True

    # -- stdout and stderr written by others, while live lines are drawn ---------------------------
    def _route(self) -> None:
        """While live lines are drawn, what others write to this terminal (a warning on
        stderr, a log record, a print) clears them first and draws them again after."""
        if self._routed:
            return
        for name in ("stdout", "stderr"):
            real = getattr(sys, name)
            if isinstance(real, _Above) or not text.is_terminal(real):
                continue
            above = _Above(self, real)
            setattr(sys, name, above)
            self._routed.append((name, real, above))
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is real:
                    handler.setStream(above)

    def _settle(self) -> None:
        """No live line left: the streams are given back."""
        for name, real, above in self._routed:
            if getattr(sys, name) is above:
                setattr(sys, name, real)
            for handler in logging.getLogger().handlers:
                if isinstance(handler, logging.StreamHandler) and handler.stream is above:
                    handler.setStream(real)
        self._routed.clear()

    def _held(self) -> bool:
        return bool(self._paused) or any(above.partial for _n, _r, above in self._routed)

    def _foreign(self, above: _Above, data: str) -> int:
        real = above.real
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            # The command's event loop is over (an interruption, the last words of main): the
            # live lines are left as they are, and what comes now goes below them.
            self.close()
            return real.write(data)
        if not above.partial:
            self._clear()
            self.stream.flush()
        written = real.write(data)
        real.flush()
        if data:
            above.partial = not data.endswith("\n")  # print() writes its end of line apart
        if not self._held():
            self.redraw()
        return written


class _Above:
    """A stream that writes above a board's live lines (see :meth:`LiveBoard._route`)."""

    def __init__(self, board: LiveBoard, real: TextIO):
        self.board, self.real = board, real
        self.partial = False  # a line begun and not yet ended: the live lines wait for its end

    def write(self, data: str) -> int:
        return self.board._foreign(self, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


_boards: dict[int, LiveBoard] = {}


def board_for(stream: TextIO) -> LiveBoard:
    """The one board of a terminal stream."""
    real: TextIO = stream.real if isinstance(stream, _Above) else stream
    board = _boards.get(id(real))
    if board is None:
        board = _boards[id(real)] = LiveBoard(real, colour=text.colour_wanted(real),
                                              glyphs=UNICODE if text.speaks_unicode(real) else ASCII)
        atexit.register(board.close)
    return board


# -- the views an EventPrinter shows its events through ---------------------------------------

class LiveView:
    """One operation's live line on a terminal's board."""

    def __init__(self, board: LiveBoard, label: str | None):
        self.board, self.label = board, label

    def known(self, op: OperationView) -> None:
        """The line of an operation followed again (``resume --wait``): its time since it
        began, and where the journal left it."""
        if op.status not in TERMINAL:
            self.board.seed(self, self.label, age=time.time() - op.created_at if op.created_at else 0.0,
                            status=op.status, progress=op.progress, total=op.total, message=op.message)

    def let_go(self) -> None:
        """The command stopped following (Ctrl+C): its line, stale from now on, goes."""
        self.board.drop(self)

    def show(self, event: str, fields: dict[str, Any], line: Callable[[], str]) -> None:
        board = self.board
        if event == "progress":
            board.update(self, self.label, progress=fields.get("progress"), total=fields.get("total"),
                         message=fields.get("message"))
        elif event == "status" and fields.get("status") in TERMINAL:
            board.finish(self, self.label, str(fields["status"]))
        elif event == "status":
            board.update(self, self.label, status=str(fields.get("status")), message=fields.get("message"))
        else:
            if event in ("result", "error"):
                board.drop(self)  # an error before the end (a call given up): no last line of its own
            board.write_above(line())


class PlainView:
    """Plain lines as they come, progress throttled to one line per meaningful change a second."""

    def __init__(self, stream: TextIO, clock: Clock = time.monotonic):
        self.stream, self.clock = stream, clock
        self._printed_at: float | None = None
        self._printed: str | None = None  # the last progress line printed
        self._held: str | None = None     # a newer one, not printed yet
        self._timer: asyncio.TimerHandle | None = None

    def known(self, op: OperationView) -> None:
        pass  # only news is printed

    def let_go(self) -> None:
        """The command stopped following: a progress line held back is not printed later."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._held = None

    def show(self, event: str, fields: dict[str, Any], line: Callable[[], str]) -> None:
        if event == "progress":
            self._progress(line())
            return
        self._flush()  # the last progress comes before any other line
        self._write(line())

    def _progress(self, line: str) -> None:
        if line == self._printed:
            self._held = None
            return  # nothing a person would see changed
        now = self.clock()
        if self._printed_at is not None and now - self._printed_at < PLAIN_INTERVAL:
            self._held = line
            self._later(PLAIN_INTERVAL - (now - self._printed_at))
            return
        self._write(line)
        self._printed, self._printed_at = line, now

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._held is not None:
            held, self._held = self._held, None
            self._write(held)
            self._printed, self._printed_at = held, self.clock()

    def _later(self, delay: float) -> None:
        """The held line is printed when its second is over, if no news came by then."""
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._timer = loop.call_later(max(0.0, delay), self._due)

    def _due(self) -> None:
        self._timer = None
        self._flush()
        self.stream.flush()

    def _write(self, line: str) -> None:
        self.stream.write(line + "\n")
