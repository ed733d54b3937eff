"""Details of the command line a person notices: `follow` counts the operation's time, not
its own; Ctrl+C leaves no stale progress line behind; `ops` says "paused" for calls no agent
carries; an error of hostapp's own has no "None" code. The real CLI on a pseudo-terminal,
the real agent and the real lab."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

from hostapp.cli.follow import EventPrinter
from tests.support.peers import hostapp
from tests.support.terminal import run_in_terminal

STARTED = re.compile(r"operation ([0-9a-f]{12}) started")
#: The live line's elapsed time, as it draws it: "· 0:07 ·".
ELAPSED = re.compile(r"· (\d+):(\d\d)")


def test_an_error_of_hostapps_own_has_no_code_printed():
    out = io.StringIO()
    printer = EventPrinter(False, stream=out, live=False)
    printer.emit("error", code=None, message="cannot connect to lab: timed out")
    printer.emit("error", code=-32602, message="unknown tool")
    assert out.getvalue().splitlines() == ["error: cannot connect to lab: timed out", "error -32602: unknown tool"]


def _add_lab(home: Path, env: dict[str, str]) -> None:
    added = hostapp("servers", "add", "lab", "--", sys.executable, "-m", "hostapp", "lab", "serve", "--stdio",
                    "--state", str(home / "lab.sqlite3"), home=home, env=env)
    assert added.returncode == 0, added.stderr


def test_follow_counts_the_operations_time_and_ctrl_c_leaves_no_stale_line(isolated_home: Path,
                                                                          keyring_env: dict[str, str]):
    home = isolated_home
    _add_lab(home, keyring_env)
    args = json.dumps({"seconds": 120, "steps": 120})
    # Ctrl+C once the live line shows progress: the command detaches (after its grace period).
    call = run_in_terminal("call", "lab", "long_task_ext", "--args", args, home=home, env=keyring_env,
                           interrupt_on=re.compile(rb"\d+% \xc2\xb7"))
    assert call.returncode == 130, call.text
    op_id = STARTED.search(call.text).group(1)
    screen = call.screen()
    assert any("detached" in line for line in screen), screen
    # The last screen has no progress line left over from before the Ctrl+C.
    assert not any("%" in line or " left" in line for line in screen), screen

    # Followed again: the line counts from the operation's start (at least the 2 s the
    # first command waited after its Ctrl+C), not from this command's.
    follow = run_in_terminal("follow", op_id, home=home, env=keyring_env,
                             interrupt_on=re.compile(rb"\d+% \xc2\xb7 \d+:\d\d"))
    assert follow.returncode == 130, follow.text
    times = [int(m.group(1)) * 60 + int(m.group(2)) for d in follow.drawings() if (m := ELAPSED.search(d))]
    assert times and times[0] >= 2, follow.drawings()
    assert not any("%" in line for line in follow.screen()), follow.screen()

    # The agent stops with the task in flight: nothing carries it, and `ops` says so.
    stopped = hostapp("agent", "stop", "--yes", home=home, env=keyring_env)
    assert stopped.returncode == 0, stopped.stderr
    table = hostapp("ops", home=home, env={**keyring_env, "COLUMNS": "160"})
    assert table.returncode == 0, table.stderr
    [row] = [line for line in table.stdout.splitlines() if line.startswith(op_id)]
    assert " paused " in row and " running " not in row, table.stdout
    assert "no agent carries it now; 'hostapp resume'" in table.stdout
    cancelled = hostapp("cancel", op_id, home=home, env=keyring_env)
    assert cancelled.returncode == 0, cancelled.stderr
