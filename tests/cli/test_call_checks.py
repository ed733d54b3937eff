"""`hostapp call` checks the tool's name against the server's live tool list and the
arguments against the tool's ``inputSchema`` before the agent starts anything: a typo is a
usage mistake (exit 2, a clear message), not an operation in the journal and a desktop
notification. Run on a pseudo-terminal, against the real lab and the real agent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.notification_service import NotificationService
from tests.support.peers import hostapp
from tests.support.terminal import run_in_terminal


def test_a_wrong_tool_or_wrong_arguments_start_nothing(isolated_home: Path, keyring_env: dict[str, str]):
    home = isolated_home
    added = hostapp("servers", "add", "lab", "--", sys.executable, "-m", "hostapp", "lab", "serve", "--stdio",
                    "--state", str(home / "lab.sqlite3"), home=home, env=keyring_env)
    assert added.returncode == 0, added.stderr

    def call(*argv: str):
        return run_in_terminal("call", "lab", *argv, home=home, env=keyring_env)

    with NotificationService(keyring_env["DBUS_SESSION_BUS_ADDRESS"]) as service:
        unknown = call("nosuchtool")
        assert unknown.returncode == 2, unknown.text
        assert "lab has no tool named 'nosuchtool'" in unknown.text
        assert "'hostapp tools lab' lists its" in unknown.text

        near = call("sleep_wth_progress", "--args", '{"seconds": 0}')
        assert near.returncode == 2, near.text
        assert "did you mean 'sleep_with_progress'?" in near.text

        wrong_type = call("sleep_with_progress", "--args", '{"seconds": "ten", "steps": 0}')
        assert wrong_type.returncode == 2, wrong_type.text
        screen = "\n".join(wrong_type.screen())
        assert "do not fit the input schema of lab/sleep_with_progress; nothing was started" in screen
        assert "$.seconds: 'ten' is not of type 'number'" in screen
        assert "$.steps: 0 is less than the minimum of 1" in screen

        missing = call("fail", "--args", "{}")
        assert missing.returncode == 2, missing.text
        assert "'mode' is a required property" in missing.text

        for run in (unknown, near, wrong_type, missing):
            assert "operation" not in run.text and "Traceback" not in run.text, run.text

        listed = hostapp("ops", "--json", home=home, env=keyring_env)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == []  # nothing journaled

        # A call that fits runs, and its failure is told to the desktop: the service is
        # listening, so the typos above would have shown there had they started anything.
        fitting = call("fail", "--args", '{"mode": "tool_error"}')
        assert fitting.returncode != 2 and "started on lab/fail" in fitting.text, fitting.text
        shown = service.wait_for(1)
        assert [s.summary for s in shown] == ["Failed: fail"], shown
    rows = json.loads(hostapp("ops", "--json", home=home, env=keyring_env).stdout)
    assert [row["tool"] for row in rows] == ["fail"]
