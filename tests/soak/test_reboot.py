"""The reboot: unfinished operations of every resumable mechanism, then every hostapp
process and both servers SIGKILLed (the machine went down), the servers started again,
and the login entry's ``Exec`` line run with no display by GLib's launcher, as a session
manager does at login. Every operation completes with nobody opening the window (the
journal and the servers' own records say so), a desktop notification arrives for each,
and the window opened afterwards shows them completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostapp.agent.client import RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from hostapp.engine import api
from hostapp.lab.state import LabState
from hostapp.store.paths import journal_path
from tests.soak.world import HANDSHAKE_TOOLS, STATELESS_TOOLS
from tests.support.agents import Agents
from tests.support.faults import LabProcess
from tests.support.notification_service import NotificationService
from tests.support.waiting import run_until, until

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.skipif(sys.platform != "linux", reason="the XDG autostart entry is Linux's"),
]

#: One operation per resumable mechanism that needs no answer (a question asked after the
#: reboot would wait for the person): the handshake-era ones on one lab, the tasks
#: extension (the stateless era's) on the other.
CALLS = [("hs", tool) for tool in HANDSHAKE_TOOLS] + [("sl", "long_task_ext")]
EXPECTED = {tool: (HANDSHAKE_TOOLS if server == "hs" else STATELESS_TOOLS)[tool] for server, tool in CALLS}
ARGS = {"seconds": 30, "steps": 30}


def _rows(home: Path) -> dict[str, dict]:
    """The journal's operations by tool, read as a bystander (read-only, no client)."""
    import sqlite3

    path = journal_path(home)
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    try:
        return {r["tool"]: dict(r) for r in db.execute("SELECT * FROM operations")}
    finally:
        db.close()


def _launch_login_entry(env: dict[str, str], config_home: Path) -> None:
    """``hostapp autostart enable``, then its entry started as a session manager would."""
    env = {**env, "XDG_CONFIG_HOME": str(config_home)}
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(name, None)
    enabled = subprocess.run([sys.executable, "-m", "hostapp", "autostart", "enable", "--json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert enabled.returncode == 0, enabled.stderr
    entry = Path(json.loads(enabled.stdout)["location"])
    assert entry.parent == config_home / "autostart"
    # GLib's launcher reads the Exec line as GNOME's session manager does; without GLib,
    # the entry's own parser stands in.
    if __import__("shutil").which("gio"):
        subprocess.run(["gio", "launch", str(entry)], env=env, check=True, timeout=30)
    else:
        from hostapp.agent.autostart import _read_desktop_entry, parse_exec_line

        argv = parse_exec_line(_read_desktop_entry(entry)["Exec"])
        subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)


def test_after_a_reboot_the_login_entry_finishes_everything_without_the_window(
        qtbot, qloop, agents: Agents, real_keyring, tmp_path: Path):
    labs = {"hs": LabProcess(tmp_path / "hs.sqlite3").start(), "sl": LabProcess(tmp_path / "sl.sqlite3").start()}
    calls: list[subprocess.Popen[str]] = []
    try:
        agents.start("--idle-exit", "600")
        until(lambda: agents.run("agent", "status", "--json").stdout.find('"running": true') >= 0, what="the agent")
        for name, version in (("hs", "2025-11-25"), ("sl", "2026-07-28")):
            added = agents.run("servers", "add", name, "--url", labs[name].url, "--protocol-version", version)
            assert added.returncode == 0, added.stderr
        for server, tool in CALLS:  # each from its own command line, a client of the agent
            calls.append(subprocess.Popen(
                [sys.executable, "-m", "hostapp", "call", server, tool, "--json", "--args", json.dumps(ARGS)],
                env=agents.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                text=True))

        # Every operation under way with its mechanism's handle, none finished yet.
        def under_way() -> dict[str, dict] | None:
            rows = _rows(agents.home)
            ready = len(rows) == len(CALLS) and all(
                r["mechanism"] == EXPECTED[t] and (r["progress"] or 0) >= 2 for t, r in rows.items())
            return rows if ready else None

        before = until(under_way, 120, "every operation under way", interval=0.2)
        assert all(r["status"] in ("running", "input_required") for r in before.values()), before

        # The machine goes down: every hostapp process and both servers, with SIGKILL.
        for call in calls:
            call.kill()
        for proc in agents.procs:
            os.killpg(proc.pid, 9)
            proc.wait(10)
        for lab in labs.values():
            lab.kill()
        assert json.loads(agents.run("agent", "status", "--json").stdout) == {"running": False}

        # It comes back up: the servers (their state files carry their work), then the login.
        for lab in labs.values():
            lab.restart()
        with NotificationService(real_keyring.bus_address) as notifications:
            _launch_login_entry(agents.env, tmp_path / "config")

            def all_ended() -> dict[str, dict] | None:
                rows = _rows(agents.home)
                return rows if rows and all(r["status"] not in api.IN_FLIGHT for r in rows.values()) else None

            after = until(all_ended, 180, "every operation to end after the reboot", interval=0.2)
            shown = notifications.wait_for(len(CALLS), timeout=30)
            time.sleep(1)  # one notification each: nothing more comes
            shown = list(notifications.shown)

        status = json.loads(agents.run("agent", "status", "--json").stdout)
        assert status["running"] and status["autostart"] is True  # the login entry's agent did it
        assert {t: r["status"] for t, r in after.items()} == {t: "completed" for _, t in CALLS}, after
        for server, tool in CALLS:
            state = LabState(labs[server].state_file)
            try:
                row = after[tool]
                (job,) = [j for j in state.jobs() if j.progress_token == f"op-{row['id']}"]
                assert job.status == "completed"
                assert json.loads(row["result"])["structuredContent"] == job.result["structuredContent"]
                assert state.execution_count(tool) == 1, f"{tool} ran more than once"
            finally:
                state.close()
        assert sorted(s.summary for s in shown) == sorted(f"Completed: {tool}" for _, tool in CALLS), shown

        # Now the person opens the window: it shows them completed.
        from hostapp.app import HostApp

        remote = qloop.run_until_complete(RemoteEngine.connect(endpoint_path(agents.home), client="window"))
        host = HostApp(agents.home, remote)
        qtbot.addWidget(host.window)
        qloop.run_until_complete(host.start())
        try:
            model = host.window.ops_model

            def shown_completed() -> bool:
                rows = [model.row_of(r["id"]) for r in after.values()]
                return all(row is not None and model.operation(row).status == "completed" for row in rows)

            run_until(qloop, shown_completed, what="the completed operations in the window")
        finally:
            qloop.run_until_complete(host.shutdown(stop_loop=False))
        assert agents.run("agent", "stop", "--yes").returncode == 0
    finally:
        for call in calls:
            call.kill()
            call.wait(10)
        for lab in labs.values():
            lab.stop()
