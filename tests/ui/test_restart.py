"""Restart tests: a window with calls in flight goes away, a new window shows the same
operations, resumed and finishing.

The server is the lab over HTTP in its own process, so it outlives every window; the
calls use durable tools (``long_task_ext``: the tasks extension, ``long_async``: an async
tool), whose work runs on in the lab while no host is connected. Handles go to a private
keyring, so the next window can resume them. The lab counts how often each tool's work
was started: once, whatever happened to the windows.

Over HTTP these two tools send the host no progress notifications (the lab reports
progress only on a stream the call itself owns), so "under way" is judged by status: in
flight before the restart, shown in flight again by the new window, then completed.

1. the window is closed cleanly (Quit > Stop everything: its agent stops too), a new window
   on the same home takes over (with a new agent);
2. the window runs in its own process (``main.py``), a client of the background agent it
   starts; the window and the agent are SIGKILLed mid-call (a crash of everything), and a
   new window on the same home takes over.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("hostapp.store.journal", reason="the journal is needed for the window's engine")

from hostapp.agent.lock import HomeLock
from hostapp.app import HostApp, agent_link
from hostapp.engine import api
from hostapp.lab.state import execution_count
from tests.support.faults import REPO_ROOT, LabProcess, run_hostapp
from tests.support.keyring_daemon import missing_programs
from tests.ui.test_window import dispose, op_of, until

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(bool(missing_programs()), reason="needs dbus and gnome-keyring for a private keyring"),
              # A response stream left half-read at quit must be closed, not left to the
              # garbage collector after the event loop is gone.
              pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]

SERVER = "remote-lab"
CALLS = {"long_task_ext": {"seconds": 8, "steps": 4}, "long_async": {"seconds": 8, "steps": 4}}
#: Time after the handles are committed before the window goes: well inside the calls.
UNDER_WAY_SECONDS = 1.5


@pytest.fixture
def lab(tmp_path):
    process = LabProcess(tmp_path / "lab-state.db").start()
    yield process
    process.stop()


def configure(home: Path, lab: LabProcess, env: dict[str, str]) -> None:
    """Add the lab as an HTTP server the way a person does on the command line."""
    added = run_hostapp(home, "servers", "add", SERVER, "--url", lab.url, env=env)
    assert added.returncode == 0, added.stderr


def finish_in_new_window(home: Path, op_ids: list[str]) -> dict[str, api.OperationView]:
    """Open a new window on ``home``; it must show ``op_ids`` still under way, then
    finished. Returns their last views."""
    host = HostApp(home, agent_link(home))
    host.window.show()

    async def scenario():
        await host.start()
        await until(lambda: all(op_of(host.window, op_id) is not None for op_id in op_ids),
                    what="the operations in the new window")
        # Shown as resumed and under way, not as lost or ended.
        assert all(op_of(host.window, op_id).in_flight for op_id in op_ids), \
            [op_of(host.window, op_id) for op_id in op_ids]
        # Each timeline says that this start took the operation up again.
        for op_id in op_ids:
            await resumed_in_journal(host, op_id)
        host.window.select_operation(op_ids[0])
        await until(lambda: any("resumed after hostapp restarted" in text for text in timeline_texts(host.window)),
                    what="the resumed entry in the timeline")
        await until(lambda: all(op_of(host.window, op_id).status in api.TERMINAL for op_id in op_ids),
                    timeout=60, what="the resumed operations to finish")
        outcome = {op_id: op_of(host.window, op_id) for op_id in op_ids}
        await host.shutdown(stop_loop=False)
        return outcome

    loop = asyncio.get_event_loop()
    try:
        return loop.run_until_complete(scenario())
    finally:
        if not host.stopped.is_set():
            loop.run_until_complete(host.shutdown(stop_loop=False))
        dispose(host.window)


async def resumed_in_journal(host: HostApp, op_id: str, timeout: float = 30.0) -> None:
    """Wait until the journal holds the operation's "resumed" event (events are batched)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not any(e["kind"] == api.EVENT_RESUMED for e in await host.api.events(op_id)):
        assert loop.time() < end, f"no resumed event for {op_id}"
        await asyncio.sleep(0.05)


def timeline_texts(window) -> list[str]:
    tree = window.details.timeline
    return [tree.topLevelItem(i).text(2) for i in range(tree.topLevelItemCount())]


def assert_finished_once(outcome: dict[str, api.OperationView], lab: LabProcess) -> None:
    assert sorted(op.tool for op in outcome.values()) == sorted(CALLS)
    for op in outcome.values():
        assert op.status == api.COMPLETED, (op.tool, op.status, op.message, op.error)
        assert f"{op.tool} finished 4 steps" in op.result["content"][0]["text"]
    for tool in CALLS:
        assert execution_count(lab.state_file, tool) == 1, f"{tool} was started again"


def test_closed_window_is_resumed_by_the_next(qtbot, qloop, isolated_home, lab, real_keyring, agents):
    from hostapp.store.journal import OperationJournal
    from hostapp.store.paths import journal_path

    configure(isolated_home, lab, real_keyring.env)
    first = HostApp(isolated_home, agent_link(isolated_home))
    first.window.show()

    async def start_calls():
        await first.start()
        await first.api.wait_connected(SERVER, 60)
        ids = [(await first.api.start_call(SERVER, tool, args)).id for tool, args in CALLS.items()]
        with OperationJournal(journal_path(isolated_home)) as journal:  # the agent's journal, read beside it
            await until(lambda: all(journal.get_operation(op_id).handle_ref for op_id in ids),
                        what="the handles to be committed")
        await asyncio.sleep(UNDER_WAY_SECONDS)
        assert all(op_of(first.window, op_id).in_flight for op_id in ids), "the calls ended before the restart"
        # What Quit > Stop everything does, without ending this test's event loop.
        await first.shutdown(stop_loop=False, stop_everything=True)
        return ids

    ids = qloop.run_until_complete(start_calls())
    dispose(first.window)
    assert_finished_once(finish_in_new_window(isolated_home, ids), lab)


DRIVER = textwrap.dedent("""
    # Opens the window (main.py) on HOSTAPP_HOME, a client of the agent it starts, starts the
    # calls through it and says when they are under way (their handles journaled); then
    # the test kills this process and the agent.
    import asyncio, json, os, runpy, sys
    from pathlib import Path
    import hostapp.app as app
    from hostapp.store.journal import OperationJournal

    CALLS = json.loads(sys.argv[1])
    original_start = app.HostApp.start

    async def start_and_call(self):
        await original_start(self)
        await self.api.wait_connected({server!r}, 60)
        ids = [(await self.api.start_call({server!r}, tool, args)).id for tool, args in CALLS.items()]
        journal = OperationJournal(Path(os.environ["HOSTAPP_HOME"]) / "journal.sqlite3")
        while not all(journal.get_operation(op_id).handle_ref for op_id in ids):
            await asyncio.sleep(0.05)
        await asyncio.sleep({under_way})
        statuses = {{op_id: (await self.api.operation(op_id)).status for op_id in ids}}
        print("under way", json.dumps(statuses), flush=True)

    app.HostApp.start = start_and_call
    sys.argv = ["main.py"]
    runpy.run_path({main!r}, run_name="__main__")
""")


def test_killed_window_process_is_resumed_by_the_next(qtbot, qloop, isolated_home, lab, real_keyring, agents,
                                                     tmp_path):
    configure(isolated_home, lab, real_keyring.env)
    script = tmp_path / "drive_window.py"
    script.write_text(DRIVER.format(server=SERVER, main=str(REPO_ROOT / "main.py"), under_way=UNDER_WAY_SECONDS))
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home), "QT_QPA_PLATFORM": "offscreen",
           "PYTHONUNBUFFERED": "1"}
    with open(tmp_path / "window.stderr", "wb") as stderr:
        proc = subprocess.Popen([sys.executable, str(script), json.dumps(CALLS)], cwd=REPO_ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("under way "), (line, (tmp_path / "window.stderr").read_text()[-3000:])
        statuses = json.loads(line.removeprefix("under way "))
        owner = HomeLock(isolated_home).owner()
        assert owner is not None, "the window runs no agent"
        for pid in (proc.pid, owner.pid):   # no chance to close anything
            os.kill(pid, signal.SIGKILL)
        assert proc.wait(10) == -signal.SIGKILL
        wait_gone(owner.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert all(status in api.IN_FLIGHT for status in statuses.values()), f"ended before the kill: {statuses}"
    assert_finished_once(finish_in_new_window(isolated_home, list(statuses)), lab)


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    """Wait until ``pid`` (not our child: the agent runs detached) is gone."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs after SIGKILL")
