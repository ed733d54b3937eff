"""`hostapp call`, `follow` and `resume --wait` never wait for ever: an operation the agent
finds stalled (here a task that says it needs input and asks nothing) is let go of with
its own exit status (3) and the reason, and goes on in the background; the call is sent
once. The real agent, the real CLI, and a real server process keeping its own record
(tests/support/stalling_server.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hostapp.cli.exits import EXIT_STALLED
from tests.support.peers import events, hostapp

SERVER = Path(__file__).resolve().parents[1] / "support" / "stalling_server.py"


def test_call_follow_and_resume_wait_let_go_of_a_stalled_operation(isolated_home: Path, keyring_env: dict[str, str],
                                                                     tmp_path: Path):
    home, record = isolated_home, tmp_path / "record.txt"
    added = hostapp("servers", "add", "stalling", "--", sys.executable, str(SERVER), str(record),
                    home=home, env=keyring_env)
    assert added.returncode == 0, added.stderr

    call = hostapp("call", "stalling", "needs_input", "--json", home=home, env=keyring_env, timeout=90)
    assert call.returncode == EXIT_STALLED, (call.stdout, call.stderr)
    lines = events(call)
    op_id = lines[0]["operation"]
    last = lines[-1]
    assert last["event"] == "status" and last["status"] == "stalled", lines
    assert "needs input" in last["message"] and "asked no question" in last["message"]
    assert f"hostapp follow {op_id}" in call.stderr

    # Still in flight, marked stalled; following it again lets go at once, as resume --wait does.
    follow = hostapp("follow", op_id, "--json", home=home, env=keyring_env, timeout=60)
    assert follow.returncode == EXIT_STALLED, (follow.stdout, follow.stderr)
    assert events(follow)[-1]["status"] == "stalled"
    resumed = hostapp("resume", "--wait", "--json", home=home, env=keyring_env, timeout=60)
    assert resumed.returncode == EXIT_STALLED, (resumed.stdout, resumed.stderr)
    listed = json.loads(hostapp("ops", "--json", home=home, env=keyring_env).stdout)
    [row] = [op for op in listed if op["id"] == op_id]
    assert row["status"] == "input_required"
    assert record.read_text().splitlines().count("call needs_input") == 1
