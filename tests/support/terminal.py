"""The real command line under a pseudo-terminal, as a person runs it in a terminal
window, and what that terminal then shows (pyte, a VT100 emulator, draws the bytes)."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

import pyte

from tests.support.peers import REPO_ROOT
from tests.support.waiting import DEADLINE

SGR = re.compile(rb"\x1b\[[0-9;]*m")
#: What the live line's drawing uses besides text and colours.
CURSOR = re.compile(r"\x1b\[[0-9]*[AKJ]")


@dataclass
class TerminalRun:
    returncode: int
    raw: bytes     # every byte the terminal received
    columns: int
    rows: int

    @property
    def text(self) -> str:
        """The bytes without colour codes."""
        return SGR.sub(b"", self.raw).decode(errors="replace")

    def screen(self) -> list[str]:
        """The terminal's lines at the end, trailing blanks dropped (a tall screen, so
        nothing of a short run scrolls away)."""
        screen = pyte.Screen(self.columns, self.rows)
        pyte.ByteStream(screen).feed(self.raw)
        lines = [line.rstrip() for line in screen.display]
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def drawings(self) -> list[str]:
        """Every piece of text written between two cursor moves (carriage returns, new
        lines, erasures, cursor up): the live line's successive drawings among them."""
        return [piece for piece in re.split(r"[\r\n]", CURSOR.sub("\n", self.text)) if piece]


def run_in_terminal(*argv: str, home: Path, columns: int = 100, rows: int = 40,
                    env: dict[str, str] | None = None, timeout: float = 120,
                    interrupt_on: re.Pattern[bytes] | None = None) -> TerminalRun:
    """Run ``hostapp ARGV`` with stdin, stdout and stderr on a new pseudo-terminal of that size.
    With ``interrupt_on``, the person presses Ctrl+C (SIGINT to the command's process group)
    once the terminal has received bytes that match it."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES")}
    full_env.update({"HOSTAPP_HOME": str(home), "TERM": "xterm-256color", "LANG": "C.UTF-8", **(env or {})})
    proc = subprocess.Popen([sys.executable, "-m", "hostapp", *argv], stdin=slave, stdout=slave, stderr=slave,
                            cwd=REPO_ROOT, env=full_env, start_new_session=True)
    os.close(slave)
    out = bytearray()
    interrupted = False
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: no process holds the terminal any more
                    break
                if not data:
                    break
                out += data
                if interrupt_on is not None and not interrupted and interrupt_on.search(SGR.sub(b"", bytes(out))):
                    interrupted = True
                    os.killpg(proc.pid, signal.SIGINT)
            elif proc.poll() is not None:
                break  # ended, and nothing more to read
            if time.monotonic() > deadline:
                proc.kill()
                raise AssertionError(f"hostapp {' '.join(argv)} did not end within {timeout} s; the terminal "
                                     f"showed:\n{SGR.sub(b'', bytes(out)).decode(errors='replace')[-3000:]}")
        return TerminalRun(proc.wait(timeout=DEADLINE), bytes(out), columns, rows)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
