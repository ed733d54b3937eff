"""Server logs end to end: the level set with --log-level reaches server-everything on the
live connection (it filters what it sends by it), and what it sends is kept by the agent
and printed by `hostapp servers log` (alias `hostapp logs`), then followed as it comes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from tests.support.peers import REPO_ROOT, hostapp
from tests.support.waiting import interrupted, until

DOCS = "demo://resource/static/document/"


class Running:
    """A `hostapp` command that runs until interrupted, its stdout lines collected."""

    def __init__(self, home, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "hostapp", *args], cwd=REPO_ROOT, text=True,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env={**os.environ, "HOSTAPP_HOME": str(home)})
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def interrupt(self) -> int:
        err = interrupted(self.proc)
        assert self.proc.returncode == 130, err
        return self.proc.returncode


def watch_once(home, name: str) -> None:
    """Subscribe to a resource and let go: server-everything logs both at level info."""
    watch = Running(home, "resources", "ev", "watch", DOCS + name, "--json")
    until(lambda: watch.lines, what="the watch to start")
    watch.interrupt()


def logged(home) -> list[dict]:
    proc = hostapp("servers", "log", "ev", "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_the_level_is_set_on_the_live_connection_and_the_messages_are_kept_and_followed(
        everything_http, isolated_home, agents):
    added = hostapp("servers", "add", "ev", "--url", everything_http.url, "--log-level", "error", home=isolated_home)
    assert added.returncode == 0, added.stderr
    assert json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)[0]["log_level"] == "error"
    agents.start("--idle-exit", "600")
    watch_once(isolated_home, "architecture.md")  # logged at info: below error, not sent

    updated = hostapp("servers", "log", "ev", "--level", "info", home=isolated_home)  # set, then printed
    assert updated.returncode == 0 and "ev: log level info" in updated.stderr, updated.stderr
    assert json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)[0]["log_level"] == "info"
    watch_once(isolated_home, "features.md")
    until(lambda: any("features.md" in str(e["data"]) for e in logged(isolated_home)),
          what="the info message of the second subscription")
    entries = logged(isolated_home)
    assert not any("architecture.md" in str(e["data"]) for e in entries)  # the server filtered it
    subscribed = next(e for e in entries if "Subscribe Resource request for URI: " + DOCS + "features.md" in e["data"])
    assert subscribed["level"] == "info" and isinstance(subscribed["at"], float)
    text = hostapp("servers", "log", "ev", home=isolated_home).stdout
    assert text == hostapp("logs", "ev", home=isolated_home).stdout  # the alias prints the same
    assert "info      Received Subscribe Resource request for URI: " + DOCS + "features.md" in text

    follow = Running(isolated_home, "servers", "log", "ev", "--follow")
    until(lambda: len(follow.lines) >= len(entries), what="the kept messages to be printed")
    watch_once(isolated_home, "structure.md")
    until(lambda: any("structure.md" in line for line in follow.lines), what="a new message to be followed")
    follow.interrupt()
    assert sum("Subscribe Resource request for URI: " + DOCS + "features.md" in line for line in follow.lines) == 1

    # a follow ends, saying so, when the agent stops
    follow = Running(isolated_home, "logs", "ev", "--follow")
    until(lambda: len(follow.lines) >= len(entries), what="the kept messages to be printed")
    stopped = hostapp("agent", "stop", "--yes", home=isolated_home)
    assert stopped.returncode == 0, stopped.stderr
    _out, err = follow.proc.communicate(timeout=60)
    assert follow.proc.returncode == 1 and "the agent stopped; following the log ended" in err


def test_logs_without_an_agent_say_where_they_are_kept(isolated_home):
    proc = hostapp("servers", "log", "ev", home=isolated_home)
    assert proc.returncode == 0 and proc.stdout == "" and "kept by the agent while it runs" in proc.stderr
    assert "hostapp servers log SERVER --follow" in proc.stderr
    loud = hostapp("servers", "log", "ev", "--level", "loud", home=isolated_home)
    assert loud.returncode == 2 and "invalid choice" in loud.stderr
    bad = hostapp("servers", "add", "x", "--url", "http://127.0.0.1:9/mcp", "--log-level", "loud", home=isolated_home)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


@pytest.mark.parametrize("pin", [["--protocol-version", "2025-11-25"], []], ids=["handshake", "stateless"])
def test_the_sdk_server_sends_the_levels_asked_for_in_either_era(isolated_home, agents, pin):
    """2026-07-28: the SDK sends only what each request's _meta asks for; 2025-11-25: it
    leaves filtering to its application and sends every level, and the host keeps only
    those asked for."""
    from tests.support.peers import start_sdk_client_features_server

    peer = start_sdk_client_features_server()
    try:
        added = hostapp("servers", "add", "sdk", "--url", peer.url, "--log-level", "error", *pin, home=isolated_home)
        assert added.returncode == 0, added.stderr
        agents.start("--idle-exit", "600")
        called = hostapp("call", "sdk", "log_each_level", home=isolated_home)
        assert called.returncode == 0, called.stderr

        def levels() -> list[str]:
            proc = hostapp("servers", "log", "sdk", "--json", home=isolated_home)
            return [json.loads(line)["level"] for line in proc.stdout.splitlines()]

        until(lambda: len(levels()) >= 4, what="the messages at error and above")
        assert levels() == ["error", "critical", "alert", "emergency"]
        text = hostapp("servers", "log", "sdk", home=isolated_home).stdout
        assert "error     levels: a error message" in text
    finally:
        peer.stop()
