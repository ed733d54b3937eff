"""The window as the agent's client over its whole life: started against an agent it starts
itself, closed to the tray, quit with work running (kept or stopped), brought forward by a
second launch, recovering from the agent's death, and the login entry. Real agent
processes and the real built-in lab on stdio; the lab's own state file is the server-side
evidence of what ran."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QSettings, Qt
from PySide6.QtWidgets import QSystemTrayIcon

from hostapp.agent.lock import HomeLock
from hostapp.app import HostApp, LoginEntry, agent_link, window_folder
from hostapp.engine import api
from hostapp.lab.state import LabState
from hostapp.ui import lifecycle as lifecycle_mod
from hostapp.ui.agent_link import AgentLink
from hostapp.ui.main_window import app_icon
from hostapp.ui.operations_model import PROGRESS, STATUS, EstimateRole
from hostapp.ui.quit_dialog import QuitDialog
from hostapp.ui.single_instance import SingleInstance
from tests.support.agents import Agents
from tests.support.waiting import DEADLINE, run_until


def wait(qloop, predicate: Callable[[], object], timeout: float = DEADLINE, what: str = "the condition") -> None:
    """Run the window's loop until ``predicate`` holds; ``timeout`` is a failure bound,
    at least the suite's deadline (a loaded machine makes the wait longer, never a failure)."""
    run_until(qloop, predicate, max(timeout, DEADLINE), what)


def open_window(qtbot, qloop, home: Path, **kw) -> HostApp:
    host = HostApp(home, agent_link(home), **kw)
    host.stop_loop_on_quit = False
    qtbot.addWidget(host.window)
    host.window.show()
    qloop.run_until_complete(asyncio.wait_for(host.start(), 90))
    assert host.started
    return host


def close_window(qloop, host: HostApp) -> None:
    if not host.stopped.is_set():
        qloop.run_until_complete(host.shutdown(stop_loop=False))


def agent_pid(host: HostApp) -> int:
    link = host.api
    assert isinstance(link, AgentLink) and link.current is not None
    return int(link.current.agent["pid"])  # type: ignore[attr-defined]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (the window's reaper thread not yet run) is gone for our purpose.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def start(qloop, host: HostApp, tool: str, seconds: float, steps: int = 20) -> api.OperationView:
    async def call() -> api.OperationView:
        await host.api.wait_connected("lab")  # its tools known: a task tool is called as a task
        return await host.api.start_call("lab", tool, {"seconds": seconds, "steps": steps})

    return qloop.run_until_complete(call())


def lab_jobs(home: Path) -> dict[str, tuple[str, int]]:
    """The lab's own record of each tool's job: (status, steps done)."""
    state = LabState(home / "lab" / "lab.sqlite3")
    try:
        return {job.tool: (job.status, job.step_done) for job in state.jobs()}
    finally:
        state.close()


def lab_executions(home: Path) -> dict[str, int]:
    state = LabState(home / "lab" / "lab.sqlite3")
    try:
        return state.execution_counts()
    finally:
        state.close()


def op_in(host: HostApp, op_id: str) -> api.OperationView | None:
    row = host.window.ops_model.row_of(op_id)
    return None if row is None else host.window.ops_model.operation(row)


def quit_dialog(qloop, host: HostApp) -> QuitDialog:
    lifecycle = host.lifecycle
    assert lifecycle is not None
    host.window.quit_action.trigger()
    wait(qloop, lambda: lifecycle.quit_dialog is not None and lifecycle.quit_dialog.isVisible(), 20, "the dialog")
    assert lifecycle.quit_dialog is not None
    return lifecycle.quit_dialog


# -- starting, and the agent's death ---------------------------------------------------

def test_the_window_starts_its_agent_and_starts_a_new_one_when_it_dies(qtbot, qloop, agents: Agents):
    assert HomeLock(agents.home).owner() is None  # nobody owns the home yet
    host = open_window(qtbot, qloop, agents.home)
    try:
        first = agent_pid(host)
        assert HomeLock(agents.home).owner().pid == first  # the window started the owner, detached
        op = start(qloop, host, "long_async", 8, 16)  # an asynchronous tool call: it can resume
        wait(qloop, lambda: "long_async" in lab_jobs(agents.home), 30, "the lab's job")
        host.window.set_filter("in_flight")
        wait(qloop, lambda: host.window.ops_model.filter_name == "in_flight")
        host.window.ops_table.selectRow(host.window.ops_model.row_of(op.id))

        os.kill(first, signal.SIGKILL)
        wait(qloop, lambda: host.window.banner.message("agent"), 30, "the banner")
        assert "stopped unexpectedly" in host.window.banner.message("agent")
        wait(qloop, lambda: host.window.banner.message("agent") is None, 60, "the reconnection")
        second = agent_pid(host)
        assert second != first and alive(second) and not alive(first)

        # The window kept its state, and the new agent resumed the task: it finishes, live.
        assert host.window.ops_model.filter_name == "in_flight"
        wait(qloop, lambda: host.window.selected_operation() is not None
             and host.window.selected_operation().id == op.id, 10, "the selection")
        host.window.set_filter("all")
        wait(qloop, lambda: (op_in(host, op.id) or op).status == api.COMPLETED, 90, "the task's end")
        assert lab_executions(agents.home).get("long_async") == 1  # resumed, not run again
    finally:
        close_window(qloop, host)


def test_an_agent_stopped_on_purpose_is_not_restarted_behind_the_persons_back(qtbot, qloop, agents: Agents):
    """`hostapp agent stop` while the window is open: the window says so and offers to start
    the agent again; it starts none by itself (a stop would otherwise undo itself)."""
    host = open_window(qtbot, qloop, agents.home)
    try:
        first = agent_pid(host)
        op = start(qloop, host, "long_async", 15, 15)  # resumable: it goes on with the next agent
        wait(qloop, lambda: op_in(host, op.id) is not None, 30, "the call's row")
        # From a terminal, while the window runs (its loop reads the agent's farewell as it
        # comes, as it would for a person).
        stopped = qloop.run_until_complete(asyncio.to_thread(agents.run, "agent", "stop", "--yes"))
        assert stopped.returncode == 0, stopped.stderr
        wait(qloop, lambda: host.window.banner.message("agent"), 30, "the banner")
        said = host.window.banner.message("agent")
        assert "stopped" in said and "asked to stop" in said
        wait(qloop, lambda: not alive(first), 30, "the agent's end")
        qloop.run_until_complete(asyncio.sleep(3))  # time enough for a restart, if one were made
        assert HomeLock(agents.home).owner() is None or not alive(HomeLock(agents.home).owner().pid)
        start_agent = host.window.banner.action_button("agent")
        assert start_agent is not None and start_agent.isVisible()
        assert start_agent.text() == "Start agent"
        # No server row still claims a connection nobody holds.
        model = host.window.servers_model
        rows = [model.status_text(s) for s in model.servers()]
        assert rows and all(r == "not connected (agent stopped)" for r in rows), rows
        # Nor does an operation claim to run, with time left, while nothing carries it.
        ops = host.window.ops_model
        row = ops.row_of(op.id)
        assert row is not None
        assert ops.index(row, STATUS).data() == "Paused"
        assert "agent stopped" in ops.index(row, STATUS).data(Qt.ItemDataRole.ToolTipRole)
        assert ops.index(row, PROGRESS).data(EstimateRole) is None
        # The selected operation's summary agrees with its row.
        host.window.select_operation(op.id)
        wait(qloop, lambda: host.window.details.summary.text().startswith("Paused ·"), 10, "the paused summary")
        assert " left" not in host.window.details.summary.text()

        host.window.servers_table.selectRow(len(rows) - 1)
        chosen = host.window.selected_server()
        assert chosen is not None

        host.window.banner.action_button("agent").click()
        wait(qloop, lambda: host.window.banner.message("agent") is None, 60, "the new agent")
        second = agent_pid(host)
        assert second != first and alive(second)
        assert host.window.banner.action_button("agent") is None
        wait(qloop, lambda: all(not model.status_text(s).startswith("not connected") for s in model.servers()),
             30, "the servers' states from the new agent")
        after = host.window.selected_server()  # the rows were read again; the choice stays
        assert after is not None and after.name == chosen.name
        wait(qloop, lambda: (op_in(host, op.id) or op).status == api.COMPLETED, 120, "the call, carried on")
        assert not ops.index(ops.row_of(op.id), STATUS).data().startswith("Paused")
    finally:
        close_window(qloop, host)


def test_a_broken_connection_to_a_living_agent_catches_up_without_reading_again(qtbot, qloop, agents: Agents):
    """The window's connection breaks, the agent lives on and changes meanwhile: the window
    connects again from where it was, is sent exactly what it missed, and reads nothing again."""
    from hostapp.agent.client import RemoteEngine, connect_or_spawn
    from hostapp.agent.endpoint import endpoint_path

    async def while_away() -> None:
        # Another client changes the home while the window has no connection.
        other = await RemoteEngine.connect(endpoint_path(agents.home), client="test")
        try:
            await other.add_server(api.ServerConfig(name="added-while-away", transport="http",
                                                    url="http://127.0.0.1:9/mcp"))
        finally:
            await other.close()

    connections: list[object] = []

    async def connect(since):  # the window's production connect, with a change before each new connection
        if connections:
            await while_away()
        connections.append(since)
        return await connect_or_spawn(agents.home, client="window", since=since)

    host = HostApp(agents.home, AgentLink(connect))
    host.stop_loop_on_quit = False
    qtbot.addWidget(host.window)
    host.window.show()
    qloop.run_until_complete(asyncio.wait_for(host.start(), 90))
    try:
        link = host.api
        assert isinstance(link, AgentLink) and host.lifecycle is not None
        states: list[str] = []
        told = link.on_change
        assert told is not None
        link.on_change = lambda state, message: (states.append(state), told(state, message))
        reloads: list[int] = []
        refresh = host.lifecycle.refresh
        host.lifecycle.refresh = lambda: (reloads.append(1), refresh())[1]  # type: ignore[method-assign]
        first = agent_pid(host)
        assert link.current is not None
        current = link.current

        async def break_and_come_back() -> None:
            await current.close()  # the connection breaks; the agent lives
            while "resumed" not in states and "reconnected" not in states:
                await asyncio.sleep(0.05)

        qloop.run_until_complete(asyncio.wait_for(break_and_come_back(), 60))
        assert states[0] == "lost" and "reconnected" not in states
        assert agent_pid(host) == first
        wait(qloop, lambda: host.window.servers_model.row_of("added-while-away") is not None, 30,
             "what changed meanwhile")
        assert host.window.banner.message("agent") is None
        assert reloads == []  # caught up from the agent's events, not read again
    finally:
        close_window(qloop, host)


# -- ✕ -----------------------------------------------------------------------------

# Creating a tray icon where the platform has no tray says so once; that is the simulation's.
@pytest.mark.qt_log_ignore(r"systemTrayWindowChanged")
def test_close_hides_to_the_tray_with_a_note_shown_once(qtbot, qloop, agents: Agents, monkeypatch):
    # The offscreen platform has no tray; a desktop with one is what is simulated here.
    monkeypatch.setattr(lifecycle_mod.QSystemTrayIcon, "isSystemTrayAvailable", staticmethod(lambda: True))
    host = open_window(qtbot, qloop, agents.home)
    try:
        host.window.tray = QSystemTrayIcon(app_icon(), host.window)
        notes: list[str] = []
        assert host.lifecycle is not None
        host.lifecycle.noteShown.connect(notes.append)
        op = start(qloop, host, "sleep_with_progress", 3, 6)

        host.window.close()
        assert not host.window.isVisible() and not host.stopped.is_set()
        assert len(notes) == 1 and "Quit" in notes[0]
        assert QSettings(str(agents.home / "hostapp.ini"), QSettings.Format.IniFormat).value(
            lifecycle_mod.TRAY_NOTE_KEY, False, type=bool)
        # Hidden, the window still follows the work.
        wait(qloop, lambda: (op_in(host, op.id) or op).status == api.COMPLETED, 60, "the call's end")

        host.lifecycle.bring_forward()
        assert host.window.isVisible()
        host.window.close()
        assert not host.window.isVisible() and not host.stopped.is_set()
        assert len(notes) == 1  # once
    finally:
        close_window(qloop, host)


def test_without_a_tray_close_quits_and_leaves_an_idle_agent_to_idle_out(qtbot, qloop, agents: Agents):
    host = open_window(qtbot, qloop, agents.home)
    pid = agent_pid(host)
    host.window.close()  # nothing running: no question
    wait(qloop, host.stopped.is_set, 20, "the window to quit")
    assert host.lifecycle is not None and host.lifecycle.quit_dialog is None
    assert alive(pid)  # the agent stays until it idles out by itself


# -- Quit ------------------------------------------------------------------------

def test_quit_lists_survivors_and_stop_everything_stops_the_work(qtbot, qloop, agents: Agents):
    host = open_window(qtbot, qloop, agents.home)
    try:
        pid = agent_pid(host)
        plain = start(qloop, host, "sleep_with_progress", 30, 60)
        task = start(qloop, host, "long_async", 30, 60)
        wait(qloop, lambda: set(lab_jobs(agents.home)) >= {"sleep_with_progress", "long_async"}, 30, "the lab's jobs")

        dialog = quit_dialog(qloop, host)
        assert [op.id for op in dialog.survivors] == [task.id]
        assert [op.id for op in dialog.lost] == [plain.id]
        assert dialog.survivor_list.item(0).text().startswith("long_async on lab")
        assert dialog.lost_list.item(0).text().startswith("sleep_with_progress on lab")
        assert dialog.lost_list.item(0).text().endswith("a plain request: nothing can resume it")  # the why
        assert dialog.keep_button.isDefault()
        dialog.stop_button.click()
        wait(qloop, host.stopped.is_set, 60, "the window to quit")
        wait(qloop, lambda: not alive(pid), 30, "the agent to stop")
        lock = HomeLock(agents.home)
        assert lock.acquire(5.0)  # it let go of the home
        lock.release()

        # Server side: the work stopped with the agent (its stdio lab closed), none finished.
        before = lab_jobs(agents.home)
        time.sleep(1.5)
        after = lab_jobs(agents.home)
        assert after == before
        assert all(status != "completed" for status, _ in after.values()), after
    finally:
        close_window(qloop, host)


def test_quit_keep_running_then_reopen_shows_the_work_live(qtbot, qloop, agents: Agents):
    host = open_window(qtbot, qloop, agents.home)
    pid = agent_pid(host)
    op = start(qloop, host, "sleep_with_progress", 10, 40)
    wait(qloop, lambda: (op_in(host, op.id) or op).progress, 30, "progress")

    dialog = quit_dialog(qloop, host)
    assert [o.id for o in dialog.lost] == [op.id] and not dialog.survivors
    dialog.reject()  # Cancel first: nothing happens
    wait(qloop, lambda: host.lifecycle.quit_dialog is None, 10)
    assert not host.stopped.is_set() and host.window.isVisible()

    dialog = quit_dialog(qloop, host)
    qtbot.keyClick(dialog, Qt.Key.Key_Return)  # the default: keep running in the background
    wait(qloop, host.stopped.is_set, 30, "the window to quit")
    assert alive(pid)
    status = json.loads(agents.run("agent", "status", "--json").stdout)
    assert status["running"] and status["pid"] == pid and status["operations"] == 1

    # The window reopened (same agent) shows the call still running, then its progress, live.
    again = open_window(qtbot, qloop, agents.home)
    try:
        assert agent_pid(again) == pid
        seen = op_in(again, op.id)
        assert seen is not None and seen.in_flight
        wait(qloop, lambda: (op_in(again, op.id).progress or 0) > (seen.progress or 0), 30, "live progress")
        wait(qloop, lambda: op_in(again, op.id).status == api.COMPLETED, 60, "the call's end")
    finally:
        close_window(qloop, again)
    assert lab_jobs(agents.home)["sleep_with_progress"][0] == "completed"
    assert lab_executions(agents.home)["sleep_with_progress"] == 1


# -- a second launch -------------------------------------------------------------

def test_a_second_launch_brings_the_window_forward_at_the_operation(qtbot, qloop, agents: Agents):
    host = open_window(qtbot, qloop, agents.home)
    instance = SingleInstance(window_folder(agents.home))
    assert instance.claim()
    try:
        assert host.lifecycle is not None
        instance.showRequested.connect(lambda op_id: host.lifecycle.bring_forward(op_id or None))
        op = start(qloop, host, "sleep_with_progress", 0.2, 2)
        wait(qloop, lambda: (op_in(host, op.id) or op).status == api.COMPLETED, 30, "the call's end")
        host.window.set_filter("in_flight")  # hides the finished call
        wait(qloop, lambda: op_in(host, op.id) is None)
        host.window.showMinimized()
        host.window.hide()  # in the tray

        env = {**agents.env, "QT_QPA_PLATFORM": "offscreen"}
        second = subprocess.Popen([sys.executable, "-m", "hostapp", "--show-operation", op.id], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait(qloop, lambda: second.poll() is not None, 60, "the second launch to end")
        finally:
            second.kill()
        assert second.returncode == 0, second.stderr
        wait(qloop, lambda: host.window.selected_operation() is not None
             and host.window.selected_operation().id == op.id, 20, "the operation selected")
        assert host.window.isVisible() and not host.window.isMinimized()
        assert host.window.ops_model.filter_name == "all"
        assert "brought it forward" in (agents.home / "logs" / "hostapp.log").read_text()
    finally:
        instance.release()
        close_window(qloop, host)


def test_a_notifications_action_brings_the_window_to_its_operation(qtbot, qloop, agents: Agents):
    """What the agent runs when a notification's "Open hostapp" is clicked, for real."""
    from hostapp.agent.owner import open_window as notification_action

    host = open_window(qtbot, qloop, agents.home)
    instance = SingleInstance(window_folder(agents.home))
    assert instance.claim()
    try:
        assert host.lifecycle is not None
        instance.showRequested.connect(lambda op_id: host.lifecycle.bring_forward(op_id or None))
        first = start(qloop, host, "sleep_with_progress", 0.1, 1)
        start(qloop, host, "sleep_with_progress", 0.1, 1)
        wait(qloop, lambda: host.window.ops_model.row_count() == 2, 30)
        host.window.ops_table.selectRow(host.window.ops_model.row_of(first.id) ^ 1)  # the other one
        host.window.hide()
        notification_action(first.id)
        wait(qloop, lambda: host.window.isVisible() and host.window.selected_operation().id == first.id, 60,
             "the window at the operation")
    finally:
        instance.release()
        close_window(qloop, host)


def test_a_launch_with_an_operation_opens_the_window_there(qtbot, qloop, agents: Agents):
    host = open_window(qtbot, qloop, agents.home)
    first = start(qloop, host, "sleep_with_progress", 0.1, 1)
    start(qloop, host, "sleep_with_progress", 0.1, 1)
    wait(qloop, lambda: host.window.ops_model.row_count() == 2 and all(
        host.window.ops_model.operation(r).status == api.COMPLETED for r in range(2)), 30)
    close_window(qloop, host)
    again = open_window(qtbot, qloop, agents.home, show_operation=first.id)
    try:
        assert again.window.selected_operation().id == first.id  # not the newest, row 0
    finally:
        close_window(qloop, again)


# -- start at login --------------------------------------------------------------

def test_the_login_checkbox_writes_and_removes_the_xdg_entry(qtbot, qloop, agents: Agents, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    entry = tmp_path / "config" / "autostart" / "io.github.hostapp.hostapp.desktop"
    host = open_window(qtbot, qloop, agents.home, autostart=LoginEntry())
    try:
        action = host.lifecycle.autostart_action
        assert action is not None and action in host.window.file_menu.actions()
        assert not action.isChecked() and not entry.exists()
        action.trigger()
        assert action.isChecked() and entry.is_file()
        assert f"HOSTAPP_HOME={agents.home.resolve()}" in entry.read_text()
        assert "agent --autostart" in entry.read_text()
        action.trigger()
        assert not action.isChecked() and not entry.exists()
        # Changed elsewhere (the command line): the menu shows the real state when opened.
        enabled = subprocess.run([sys.executable, "-m", "hostapp", "autostart", "enable"], capture_output=True,
                                 env={**agents.env, "XDG_CONFIG_HOME": str(tmp_path / "config")}, timeout=60)
        assert enabled.returncode == 0 and entry.is_file()
        host.window.file_menu.aboutToShow.emit()
        assert action.isChecked()
    finally:
        close_window(qloop, host)


def test_a_window_that_died_leaves_nothing_in_the_way(qapp, tmp_path):
    """A killed window's lock and socket are taken over by the next launch."""
    folder = tmp_path / "runtime"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\n"
         "from PySide6.QtCore import QCoreApplication\n"
         "from pathlib import Path\n"
         "from hostapp.ui.single_instance import SingleInstance\n"
         "app = QCoreApplication([])\n"
         f"instance = SingleInstance(Path({str(folder)!r}))\n"
         "assert instance.claim()\n"
         "print('claimed', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "claimed"
        assert not SingleInstance(folder).claim()  # held by a live window
        holder.kill()
        holder.wait(10)
        assert (folder / "window.lock").exists()  # left behind
        instance = SingleInstance(folder)
        assert instance.claim()
        instance.release()
    finally:
        holder.kill()
        holder.wait(10)
