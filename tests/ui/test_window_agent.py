"""The window as a client of the background agent: it shows what the agent carries, live,
calls started elsewhere included, and quitting it leaves the work running."""

from __future__ import annotations

import json
import subprocess
import sys

from hostapp.app import HostApp
from hostapp.engine import api
from tests.support.agents import Agents
from tests.support.waiting import run_until


def _wait(qloop, predicate, timeout: float = 60) -> None:
    run_until(qloop, predicate, timeout)


def test_the_window_shows_the_agents_work_live_and_leaves_it_running(qtbot, qloop, agents: Agents):
    owner = agents.start("--idle-exit", "600")

    remote = qloop.run_until_complete(agents.connect())
    host = HostApp(agents.home, remote)
    qtbot.addWidget(host.window)
    qloop.run_until_complete(host.start())
    # The first run configured the built-in lab, in the agent.
    assert [s.name for s in qloop.run_until_complete(remote.servers())] == ["lab", "lab-http"]

    call = subprocess.Popen(
        [sys.executable, "-m", "hostapp", "call", "lab", "sleep_with_progress", "--json",
         "--args", json.dumps({"seconds": 3, "steps": 30})],
        env=agents.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        model = host.window.ops_model
        _wait(qloop, lambda: model.row_count() == 1)  # the CLI's call appears, no refresh needed
        op = model.operation(0)
        assert op is not None and op.tool == "sleep_with_progress"
        _wait(qloop, lambda: (model.operation(model.row_of(op.id)).progress or 0) > 0)  # live progress
        qloop.run_until_complete(host.shutdown(stop_loop=False))  # the window quits mid-call
        out, err = call.communicate(timeout=60)
        assert call.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["event"] == "result"  # the call went on
    finally:
        call.kill()
    assert owner.poll() is None  # the agent is still there
    assert agents.run("agent", "stop").returncode == 0
    from hostapp.store.journal import OperationJournal
    from hostapp.store.paths import journal_path

    with OperationJournal(journal_path(agents.home)) as journal:
        assert journal.get_operation(op.id).status == api.OperationStatus.COMPLETED


def test_servers_removed_or_changed_from_the_command_line_change_in_an_open_window(qtbot, qloop, agents: Agents):
    agents.start("--idle-exit", "600")

    remote = qloop.run_until_complete(agents.connect())
    host = HostApp(agents.home, remote)
    qtbot.addWidget(host.window)
    qloop.run_until_complete(host.start())
    servers = host.window.servers_model

    def names() -> list[str]:
        return [s.name for s in servers.servers()]

    _wait(qloop, lambda: names() == ["lab", "lab-http"])
    removed = agents.run("servers", "remove", "lab-http")
    assert removed.returncode == 0, removed.stderr
    _wait(qloop, lambda: names() == ["lab"])  # gone from the open window, no ghost left behind
    assert "lab-http" not in (host.window.banner.message("servers") or "")

    # The same name added again with another command: the row shows the new one.
    added = agents.run("servers", "add", "lab-http", "--", sys.executable, "-m", "hostapp", "lab", "serve",
                       "--stdio", "--state", str(agents.home / "again.sqlite3"))
    assert added.returncode == 0, added.stderr

    def target() -> str | None:
        row = servers.row_of("lab-http")
        return None if row is None else servers.server(row).target

    _wait(qloop, lambda: "again.sqlite3" in (target() or ""))
    _wait(qloop, lambda: servers.server(servers.row_of("lab-http")).state == api.CONNECTED)
    assert names() == ["lab", "lab-http"]
    qloop.run_until_complete(host.shutdown(stop_loop=False))
    assert agents.run("agent", "stop").returncode == 0
