"""`hostapp call` on a terminal: one live progress line, redrawn in place, and everything
else written above it. The real command line on a real pseudo-terminal, against the
built-in lab server, with what the terminal shows drawn by a terminal emulator."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.peers import REPO_ROOT, events, hostapp
from tests.support.terminal import run_in_terminal
from tests.support.waiting import DEADLINE

pytestmark = pytest.mark.timeout(300)

COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture
def lab(isolated_home: Path) -> Path:
    """A home with the lab (stdio) configured as ``lab``."""
    added = hostapp("servers", "add", "lab", "--", sys.executable, "-m", "hostapp", "lab", "serve", "--stdio",
                    "--state", str(isolated_home / "lab.sqlite3"), home=isolated_home)
    assert added.returncode == 0, added.stderr
    return isolated_home


def call(home: Path, tool: str, args: dict, **kw):
    return run_in_terminal("call", "lab", tool, "--args", json.dumps(args), home=home, **kw)


def test_call_on_a_terminal_redraws_one_live_line_with_bar_percent_elapsed_and_time_left(lab):
    run = call(lab, "sleep_with_progress", {"seconds": 3, "steps": 6})
    assert run.returncode == 0, run.text
    drawings = run.drawings()
    # Redrawn in place: a carriage return, then the line again (no new line per update).
    assert run.raw.count(b"\r\x1b[") > 6, run.raw
    bars = [d for d in drawings if re.search(r"\[█+░*\] +\d+% · \d:\d\d", d)]
    assert len(bars) >= 6, drawings
    assert any(" 50% · " in d and "sleep_with_progress: step 3/6" in d for d in bars), bars
    # The elapsed time, and the time left at the rate seen so far, in the window's words.
    assert any(re.search(r"\d+% · 0:0\d · ~\d s left · sleep_with_progress: step [2-5]/6", d) for d in bars), bars
    assert "\x1b[32m" in run.raw.decode(), "a terminal without NO_COLOR gets colours"
    screen = run.screen()
    # What stays: the last state of the line, then the result; the steps were not printed one by one.
    assert re.fullmatch(r"✓ \[█{20}\] 100% · completed · 0:0\d · sleep_with_progress: step 6/6", screen[-2]), screen
    assert screen[-1] == "sleep_with_progress finished 6 steps in 3 s"
    assert not any("step 1/6" in line for line in screen), screen


def test_no_color_keeps_the_live_line_without_colours(lab):
    run = call(lab, "sleep_with_progress", {"seconds": 1, "steps": 4}, env={"NO_COLOR": "1"})
    assert run.returncode == 0, run.text
    raw = run.raw.decode()
    assert not COLOUR.search(raw), raw
    assert "\r" in raw and "█" in raw and "100% · completed" in raw


def test_the_live_line_fits_a_narrow_terminal_and_never_wraps(lab):
    message = "a server message far longer than this narrow terminal is wide, " * 3
    run = call(lab, "sleep_with_progress", {"seconds": 1.5, "steps": 3, "message": message}, columns=56)
    assert run.returncode == 0, run.text
    live = [d for d in run.drawings() if "%" in d]
    assert live and all(len(d) <= 55 for d in live), [(len(d), d) for d in live]
    assert any(d.endswith("…") for d in live), live
    [last] = [line for line in run.screen() if "completed" in line]
    assert last.startswith("✓ [") and last.endswith("…")  # one screen line: nothing wrapped onto the next


def test_a_question_is_printed_above_the_live_line(lab):
    # long_mrtr asks half-way; with no scripted answer the call declines and goes on.
    run = call(lab, "long_mrtr", {"seconds": 2, "steps": 4})
    assert run.returncode == 0, run.text
    screen = run.screen()
    [asked] = [i for i, line in enumerate(screen) if "the server asks (form)" in line]
    assert screen[asked].startswith("the server asks (form): ") and screen[asked].endswith("-> decline"), screen
    assert "█" not in screen[asked] and "%" not in screen[asked]
    # Declined half-way: the line ends where the work stopped, and "waiting for your answer" went with the answer.
    assert re.fullmatch(r"✓ \[█{10}░{10}\]  50% · completed · 0:0\d", screen[asked + 1]), screen
    # While waiting for the answer the live line said so.
    assert any("needs your input" in d for d in run.drawings())


def test_without_a_terminal_progress_lines_are_throttled_and_json_is_not(lab):
    args = ["call", "lab", "sleep_with_progress", "--args", '{"seconds": 2, "steps": 200}']
    started = time.monotonic()
    human = hostapp(*args, home=lab)
    took = time.monotonic() - started
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    progress = [line for line in lines if line.startswith("progress ")]
    # One line a second at most (plus the first and the last), never one per step.
    assert 2 <= len(progress) <= took + 2, lines
    # (The first step seen may be a later one: the agent coalesces a client's updates.)
    assert re.search(r"step \d+/200$", progress[0]), progress
    assert progress[-1] == "progress 100.0% sleep_with_progress: step 200/200"
    assert lines[-2:] == ["status: completed", "sleep_with_progress finished 200 steps in 2 s"]
    assert "\x1b" not in human.stdout and "\r" not in human.stdout
    as_json = hostapp(*args, "--json", home=lab)
    assert len([e for e in events(as_json) if e["event"] == "progress"]) > took + 2
    # On a terminal too, --json is JSON lines only, every event of them.
    on_terminal = run_in_terminal(*args, "--json", home=lab)
    lines = [json.loads(line) for line in on_terminal.raw.decode().split("\r\n")
             if line and not line.startswith("hostapp: ")]  # (stderr's warnings share the terminal)
    assert [e["event"] for e in lines][-2:] == ["status", "result"]
    assert len([e for e in lines if e["event"] == "progress"]) > took + 2


def leave_a_question_open(home: Path, env: dict[str, str]) -> None:
    """A long_mrtr call stopped while its question waits (``--unanswered wait``): the
    operation stays in the journal, to be resumed."""
    proc = subprocess.Popen([sys.executable, "-m", "hostapp", "call", "lab", "long_mrtr", "--json", "--args",
                             '{"seconds": 2, "steps": 4}', "--unanswered", "wait"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "HOSTAPP_HOME": str(home), **env})
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            event = json.loads(line)
            if event["event"] == "elicitation":
                assert event["pending"] is True
                return
        raise AssertionError(f"hostapp ended (exit {proc.wait()}) before asking")
    finally:
        proc.kill()
        proc.communicate(timeout=DEADLINE)


def test_resume_wait_shows_a_live_line_per_operation(lab, keyring_env):
    for _ in range(2):
        leave_a_question_open(lab, keyring_env)
    ops = json.loads(hostapp("ops", "--json", home=lab, env=keyring_env).stdout)
    assert [o["status"] for o in ops] == ["input_required"] * 2
    answers = lab / "answers.json"
    answers.write_text(json.dumps([{"action": "accept", "content": {"proceed": True}}] * 2))
    run = run_in_terminal("resume", "--wait", "--answers", str(answers), home=lab, env=keyring_env)
    assert run.returncode == 0, run.text
    screen = run.screen()
    for o in ops:  # each operation's line, labelled with its id, ends in the scrollback
        assert any(re.fullmatch(rf"✓ {o['id']} \[█{{20}}\] 100% · completed · \d:\d\d · long_mrtr: step 4/4", line)
                   for line in screen), screen
    assert "\x1b[1A" in run.raw.decode(), "two live lines at once: the cursor goes up to redraw both"
    for o in ops:  # each line starts where the journal left its operation, its time counted from its start
        assert any(re.fullmatch(rf". {o['id']} \[█{{10}}░{{10}}\]  50% · needs your input · \d:\d\d · "
                                r"waiting for your answer", d) for d in run.drawings()), run.drawings()
    assert sum("long_mrtr finished 4 steps" in line for line in screen) == 2
