"""Renders docs/cli-progress.txt: what a terminal shows of `hostapp call` while it runs and
once it ended, drawn from the bytes of a real run by a terminal emulator (pyte).

    PYTHONPATH=. .venv/bin/python tests/cli/render_progress_capture.py docs/cli-progress.txt

A fresh temporary HOSTAPP_HOME with the lab (stdio) is used, and a private keyring when
dbus-daemon and gnome-keyring are installed.
"""

from __future__ import annotations

import json
import shlex
import sys
import tempfile
from pathlib import Path

import pyte

from tests.support.keyring_daemon import missing_programs, start_keyring_daemon
from tests.support.peers import hostapp
from tests.support.terminal import TerminalRun, run_in_terminal

COLUMNS = 100


def screen_until(run: TerminalRun, needle: bytes) -> list[str]:
    """The screen as it was just after the first drawing that contains ``needle``."""
    at = run.raw.index(needle)
    end = run.raw.index(b"\x1b[K", at) + 3
    screen = pyte.Screen(run.columns, run.rows)
    pyte.ByteStream(screen).feed(run.raw[:end])
    lines = [line.rstrip() for line in screen.display]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def main(target: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="hostapp-capture-") as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        daemon = None if missing_programs() else start_keyring_daemon(Path(tmp) / "keyring")
        env = dict(daemon.env) if daemon else {}
        try:
            hostapp("servers", "add", "lab", "--", sys.executable, "-m", "hostapp", "lab", "serve", "--stdio",
                    "--state", str(home / "lab.sqlite3"), home=home, env=env)
            args = json.dumps({"seconds": 12, "steps": 40})
            argv = ["call", "lab", "sleep_with_progress", "--args", args]
            run = run_in_terminal(*argv, home=home, columns=COLUMNS, rows=12, env=env)
        finally:
            if daemon:
                daemon.stop()
    prompt = "$ hostapp " + shlex.join(argv)
    during = screen_until(run, b"60%")
    after = run.screen()
    text = "\n".join([prompt, *during, "", "… and once it ended:", "", prompt, *after]) + "\n"
    target.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
