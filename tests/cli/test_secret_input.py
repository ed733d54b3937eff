"""Secret values for ``servers add`` without the command line: from standard input or a
file, so no other local user reads them in the process list. The stdio server is real
(tests/support/hostile_server.py, whose ``echo_env`` tool answers with an environment
variable's value): the value arrives where it should, and the journal never holds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.store.paths import journal_path
from tests.support.hostile_server import stdio_command

pytestmark = pytest.mark.timeout(180)


def run(home: Path, env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hostapp", *args], input=stdin, capture_output=True, text=True,
                          env={**os.environ, **env, "HOSTAPP_HOME": str(home)}, timeout=120)


def test_secret_env_values_from_stdin_and_a_file_reach_the_server_and_not_the_journal(
        isolated_home: Path, keyring_env: dict[str, str], tmp_path: Path):
    secret_file = tmp_path / "other.txt"
    secret_file.write_text("from-the-file-5ecret\n")
    added = run(isolated_home, keyring_env, "servers", "add", "envy", "--secret-env-stdin", "TOKEN",
                "--secret-env-stdin", "SECOND", "--secret-env-file", f"OTHER={secret_file}", "--",
                *stdio_command(), stdin="from-stdin-5ecret\nsecond-5ecret\n")
    assert added.returncode == 0, added.stderr
    assert "note:" not in added.stderr  # nothing was given on the command line
    stored = b"".join(p.read_bytes() for p in isolated_home.rglob("*") if p.is_file())
    assert journal_path(isolated_home).exists() and b"5ecret" not in stored  # (the results below hold them)

    for name, value in (("TOKEN", "from-stdin-5ecret"), ("SECOND", "second-5ecret"), ("OTHER", "from-the-file-5ecret")):
        called = run(isolated_home, keyring_env, "call", "envy", "echo_env", "--args", json.dumps({"name": name}),
                     "--json")
        assert called.returncode == 0, called.stderr
        result = json.loads(called.stdout.splitlines()[-1])
        assert result["event"] == "result" and result["result"]["content"][0]["text"] == value
    assert run(isolated_home, keyring_env, "agent", "stop", "--yes").returncode == 0


def test_a_secret_on_the_command_line_is_said_to_be_visible_and_a_missing_one_refused(
        isolated_home: Path, keyring_env: dict[str, str]):
    visible = run(isolated_home, keyring_env, "servers", "add", "one", "--secret-env", "TOKEN=v", "--",
                  *stdio_command())
    assert visible.returncode == 0 and "--secret-env-stdin or --secret-env-file" in visible.stderr
    empty = run(isolated_home, keyring_env, "servers", "add", "two", "--url", "https://example.invalid/mcp",
                "--secret-header-stdin", "Authorization", stdin="")
    assert empty.returncode != 0 and "no value on standard input" in empty.stderr
    missing = run(isolated_home, keyring_env, "servers", "add", "three", "--url", "https://example.invalid/mcp",
                  "--secret-header-file", "Authorization=/nonexistent/file")
    assert missing.returncode != 0 and "cannot read /nonexistent/file" in missing.stderr


def test_a_secret_service_that_is_gone_is_said_so_in_words_and_nothing_is_added(isolated_home: Path, tmp_path: Path):
    # The keyring's daemon went away (its D-Bus session ended) while the backend still names
    # the Secret Service: the keyring library raises a bare RuntimeError while it picks the
    # backend, which came out of `servers add` as a Python traceback.
    gone = {"PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
            "DBUS_SESSION_BUS_ADDRESS": f"unix:path={tmp_path / 'no-such-bus'}", "HOME": str(tmp_path)}
    added = run(isolated_home, gone, "servers", "add", "kept", "--url", "https://example.invalid/mcp",
                "--secret-header-stdin", "Authorization", stdin="Bearer 5ecret-value\n")
    assert added.returncode != 0
    assert "Traceback" not in added.stderr, added.stderr
    assert "keyring" in added.stderr.lower() and "Secret Service" in added.stderr, added.stderr
    assert "5ecret" not in added.stderr
    listed = run(isolated_home, gone, "servers", "list")
    assert listed.returncode == 0, listed.stderr
    assert "kept" not in listed.stdout  # nothing half-added
    assert run(isolated_home, gone, "agent", "stop", "--yes").returncode in (0, 1)
