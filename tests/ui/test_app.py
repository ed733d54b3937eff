"""The composition root: error handlers, the embedded default server's command, start-up
and quit of the real ``main.py`` process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.agent.lock import HomeLock
from hostapp.app import HostApp, agent_link, install_error_handlers, lab_command
from tests.support.agents import Agents

ROOT = Path(__file__).resolve().parents[2]


def test_lab_command_runs_this_interpreter():
    command, args = lab_command()
    assert command == sys.executable
    assert args == ["-m", "hostapp", "lab", "serve", "--stdio"]


def test_the_built_in_lab_keeps_its_state_in_its_home(tmp_path):
    """A stdio server inherits no HOSTAPP_HOME, so the state file is named on the lab's
    command line: two homes' labs (or a test's and a person's) never share their work."""
    from hostapp.app import lab_server_config

    cfg = lab_server_config(tmp_path / "home")
    assert cfg.args[-2:] == ["--state", str((tmp_path / "home").resolve() / "lab" / "lab.sqlite3")]
    assert (cfg.command, cfg.args[:-2]) == lab_command()


def test_the_first_run_configures_one_lab_process_behind_two_doors(tmp_path):
    """The stdio lab listens on the port the HTTP entry names; the HTTP entry is pinned to
    the handshake era, where the tools the stateless era lacks (long_task, long_sse,
    long_stream, long_resumable) run."""
    from hostapp.app import lab_server_configs

    stdio, http = lab_server_configs(tmp_path / "home")
    port = stdio.args[stdio.args.index("--http") + 1]
    assert stdio.transport == "stdio" and "--stdio" in stdio.args and stdio.protocol_version is None
    assert http.transport == "http" and http.url == f"http://127.0.0.1:{port}/mcp"
    assert http.protocol_version == "2025-11-25"


def test_uncaught_errors_are_shown_not_fatal(qtbot, qloop, isolated_home, monkeypatch):
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    host = HostApp(isolated_home, agent_link(isolated_home))
    qtbot.addWidget(host.window)
    install_error_handlers(qloop, [host])

    async def broken():
        raise RuntimeError("a task went wrong")

    async def scenario():
        task = asyncio.get_running_loop().create_task(broken())
        await asyncio.sleep(0.05)
        # The loop's handler runs when a failed task is dropped unobserved.
        asyncio.get_running_loop().call_exception_handler({"message": "Task exception was never retrieved",
                                                           "exception": task.exception(), "future": task})

    qloop.run_until_complete(scenario())
    assert "a task went wrong" in host.window.banner.message("error")
    try:
        raise ValueError("a slot went wrong")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    assert "a slot went wrong" in host.window.banner.message("error")
    host.window.banner.dismiss_button.click()
    assert host.window.banner.message("error") is None and host.window.banner.isHidden()
    host.window.close_for_good()


def test_the_app_collects_garbage_as_the_process_that_holds_the_operations_should(qtbot, isolated_home):
    """With the engine in the window's process: a larger young generation (full collections
    of millions of objects froze the window once a second while thousands resumed). As the
    agent's client: young collections of the views it shows kept short (each of 10,000
    took longer than a frame)."""
    import gc

    from hostapp.engine import open_engine
    from hostapp.engine.heap import CLIENT_GC_THRESHOLDS, GC_THRESHOLDS

    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)  # CPython's defaults
    try:
        host = HostApp(isolated_home, open_engine(isolated_home, connect=False))
        qtbot.addWidget(host.window)
        assert gc.get_threshold() == GC_THRESHOLDS
        assert GC_THRESHOLDS[0] > 700 and gc.isenabled()
        host.window.close_for_good()
        gc.set_threshold(700, 10, 10)
        host = HostApp(isolated_home, agent_link(isolated_home))
        qtbot.addWidget(host.window)
        assert gc.get_threshold() == CLIENT_GC_THRESHOLDS
        assert CLIENT_GC_THRESHOLDS[1] * CLIENT_GC_THRESHOLDS[0] > 700 * 10 and gc.isenabled()
        host.window.close_for_good()
    finally:
        gc.set_threshold(*before)


def test_main_starts_and_quits_cleanly(isolated_home, tmp_path):
    """``python main.py`` opens the window on a fresh home, as a client of the agent it starts,
    then quits on request with exit 0 (nothing running: no question), the agent left to idle."""
    pytest.importorskip("hostapp.store.journal")
    script = tmp_path / "drive.py"
    script.write_text(
        "import asyncio, runpy, sys\n"
        "import hostapp.app as app\n"
        "original_start = app.HostApp.start\n"
        "async def start_then_quit(self):\n"
        "    await original_start(self)\n"
        "    await asyncio.sleep(1.0)\n"
        "    print('servers', [s.name for s in await self.api.servers()], flush=True)\n"
        "    self.window.quit_action.trigger()\n"
        "app.HostApp.start = start_then_quit\n"
        "sys.argv = ['main.py']\n"
        f"runpy.run_path({str(ROOT / 'main.py')!r}, run_name='__main__')\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOSTAPP_HOME=str(isolated_home))
    try:
        proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert HomeLock(isolated_home).owner() is not None  # the agent it started goes on
    finally:
        Agents(isolated_home, env).kill_all()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "servers ['lab', 'lab-http']" in proc.stdout
    assert (isolated_home / "hostapp.ini").is_file()
    log = (isolated_home / "logs" / "hostapp.log").read_text()
    assert "Traceback" not in log, log[-2000:]
