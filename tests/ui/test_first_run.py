"""The first run, as a newcomer meets it: the window configures the built-in lab, every long
demo tool it offers is started, the host is killed mid-call, and after a restart every call
completes, each having run once on the lab.

The host is the process that owns the home's engine (the background agent; the window is
its client). It is killed with SIGKILL, which takes the stdio lab it started down with it
(its stdin ends); the next owner starts the lab again, and the lab continues its jobs from
its own state. What each tool relies on:

* ``long_task_ext``, ``long_task``: a task id, polled again;
* ``long_async``: the operation token hostapp made before sending;
* ``long_resume_token``: the newest token, sent again;
* ``long_stream``, ``long_resumable``: a stream id, a resume token under the request's id;
* ``long_sse``: the HTTP session, adopted again, and the stream's last event id;
* ``long_mrtr``: only an open question survives a multi round-trip request, so its first
  half is short: the kill lands while the question waits, and it is answered after.

Besides, the lab's URL question points at a page the lab really serves, and opening that
page in a browser completes the question.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hostapp.agent.client import RemoteEngine
from hostapp.app import LAB_HTTP_SERVER_NAME, LAB_SERVER_NAME, HostApp, agent_link
from hostapp.engine import api
from hostapp.lab.state import LabState
from tests.support.agents import Agents
from tests.support.keyring_daemon import missing_programs
from tests.support.waiting import until_async

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(bool(missing_programs()), reason="needs dbus and gnome-keyring for a private keyring")]

#: Long enough that every call is still under way when the host is killed.
SECONDS = 20
#: long_mrtr does its first half inline (a plain request until it asks): kept short.
MRTR_ARGS = {"seconds": 1, "steps": 2}


def first_run(qtbot, qloop, agents: Agents) -> list[str]:
    """Open the window once on the fresh home, as ``hostapp`` does; return the servers it
    configured. The window then quits, which leaves the owner running."""
    agents.start("--idle-exit", "600")
    qloop.run_until_complete(qloop.run_until_complete(agents.connect()).close())
    host = HostApp(agents.home, agent_link(agents.home))  # a client of the owner just started
    host.stop_loop_on_quit = False
    qtbot.addWidget(host.window)
    qloop.run_until_complete(host.start())
    names = [s.name for s in qloop.run_until_complete(host.api.servers())]
    qloop.run_until_complete(host.shutdown(stop_loop=False))
    return names


async def connected(engine: api.EngineApi, name: str) -> None:
    """Wait for ``name`` to connect (the HTTP door of the lab opens once the stdio lab runs)."""
    async def attempt() -> bool:
        try:
            await engine.wait_connected(name, timeout=5)
            return True
        except api.ServerUnavailable:
            return False
    await until_async(attempt, what=f"{name} to connect")


def kill_owner(engine: RemoteEngine, agents: Agents) -> None:
    """SIGKILL the process that owns the engine (whoever started it), and wait until it is gone."""
    pid = engine.agent["pid"]
    os.kill(pid, signal.SIGKILL)
    for proc in agents.procs:
        if proc.pid == pid:
            proc.wait(20)
            return
    deadline = time.monotonic() + 20
    while Path(f"/proc/{pid}").exists():
        assert time.monotonic() < deadline, "the owner did not die"
        time.sleep(0.05)


def lab_processes(state_file: Path) -> list[int]:
    """Lab processes serving ``state_file``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"lab" in argv and str(state_file).encode() in argv:
                found.append(int(entry.name))
    return found


def test_every_long_demo_tool_of_the_first_run_survives_a_host_kill(qtbot, qloop, agents: Agents):
    names = first_run(qtbot, qloop, agents)
    assert names == [LAB_SERVER_NAME, LAB_HTTP_SERVER_NAME]
    state_file = agents.home / "lab" / "lab.sqlite3"

    async def start_every_long_tool() -> tuple[RemoteEngine, dict[str, tuple[str, str]]]:
        engine = await agents.connect()
        started: dict[str, tuple[str, str]] = {}
        for name in names:
            await connected(engine, name)
            for tool in await engine.list_tools(name):
                if tool["name"].startswith("long_"):
                    args = MRTR_ARGS if tool["name"] == "long_mrtr" else {"seconds": SECONDS, "steps": SECONDS}
                    op = await engine.start_call(name, tool["name"], args)
                    started[op.id] = (name, tool["name"])
        return engine, started

    engine, started = qloop.run_until_complete(start_every_long_tool())
    tools = sorted(tool for _server, tool in started.values())
    # Every mechanism the lab demonstrates, each on the door where it works.
    assert set(tools) == {"long_sse", "long_task", "long_task_ext", "long_mrtr", "long_resume_token",
                          "long_stream", "long_resumable", "long_async"}

    async def every_call_holds_a_handle() -> dict[str, dict[str, Any]]:
        """The journal (what a restart reads) says each call is carried by its mechanism,
        not a plain request; long_mrtr waits for its answer."""
        rows = {row["id"]: row for row in await engine.operation_rows() if row["id"] in started}
        ready = all(row["mechanism"] not in (None, "direct") for row in rows.values()) and all(
            row["status"] == api.INPUT_REQUIRED for row in rows.values() if row["tool"] == "long_mrtr")
        return rows if ready and len(rows) == len(started) else {}

    rows = qloop.run_until_complete(until_async(every_call_holds_a_handle, what="every call to hold a handle"))
    assert all(row["status"] not in api.TERMINAL for row in rows.values()), rows  # mid-call
    kill_owner(engine, agents)
    qloop.run_until_complete(engine.close())

    async def restart_and_finish() -> dict[str, api.OperationView]:
        agents.start("--idle-exit", "600")
        engine = await agents.connect()

        latest: list[Any] = []

        async def answered_mrtr() -> bool:
            for question in await engine.open_questions():
                await engine.answer_input(question.id, {"action": "accept", "content": {"proceed": True}})
            views = [await engine.operation(op_id) for op_id in started]
            latest[:] = [(started[v.id], v.status, v.message) for v in views if v is not None]
            return all(view is not None and view.status in api.TERMINAL for view in views)

        try:
            await until_async(answered_mrtr, timeout=120, what="every call to finish after the restart")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {latest}") from None
        views = {op_id: await engine.operation(op_id) for op_id in started}
        await engine.close()
        return views  # type: ignore[return-value]

    views = qloop.run_until_complete(restart_and_finish())
    for op_id, view in views.items():
        server, tool = started[op_id]
        assert view.status == api.COMPLETED, (server, tool, view.status, view.error)
        assert (view.result or {}).get("structuredContent", {}).get("tool") == tool, (server, tool, view.result)
    # Each call's work started once on the lab, whatever happened to the host.
    lab = LabState(state_file)
    try:
        assert lab.execution_counts() == {tool: tools.count(tool) for tool in set(tools)}
        assert list(lab.duplicate_executions()) == []
    finally:
        lab.close()
    assert agents.run("agent", "stop").returncode == 0
    assert lab_processes(state_file) == []  # the lab went with its host, old and new


@pytest.mark.parametrize("server", [LAB_SERVER_NAME, LAB_HTTP_SERVER_NAME])
@pytest.mark.parametrize("order", ["answer, then open the page", "open the page first"])
def test_the_url_question_of_the_first_run_lab_is_completed_in_the_browser(qtbot, qloop, agents: Agents,
                                                                             server: str, order: str):
    names = first_run(qtbot, qloop, agents)

    async def scenario() -> api.OperationView:
        engine = await agents.connect()
        for name in names:
            await connected(engine, name)
        lab_http = await engine.server_config(LAB_HTTP_SERVER_NAME)
        assert lab_http is not None and lab_http.url
        op = await engine.start_call(server, "ask_url", {"wait_seconds": 30})

        async def question() -> api.InputRequest | None:
            return next((q for q in await engine.open_questions() if q.operation_id == op.id), None)

        asked = await until_async(question, what="the URL question")
        url = asked.params["url"]
        # The link names the lab's real HTTP port, where the page is served.
        assert asked.mode == "url" and url.startswith(lab_http.url.removesuffix("/mcp") + "/lab/consent/")
        async with httpx.AsyncClient() as browser:
            if order == "answer, then open the page":
                await engine.answer_input(asked.id, {"action": "accept"})  # the window's Open
                await asyncio.sleep(0.5)
                page = await browser.get(url)
            else:
                page = await browser.get(url)
        assert page.status_code == 200 and "Thank you" in page.text
        if order == "open the page first" and server == LAB_HTTP_SERVER_NAME:
            # The lab says the question was completed: the host takes it back by itself.
            await until_async(lambda: _none(question()), what="the question to be withdrawn")
        elif order == "open the page first":
            # Over stdio in 2026-07-28 nothing reaches the host between the rounds: the
            # person still confirms in the window, and the lab knows the page was opened.
            await engine.answer_input(asked.id, {"action": "accept"})
        view = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        await engine.close()
        assert agents.run("agent", "stop").returncode == 0
        return view

    view = qloop.run_until_complete(scenario())
    assert view.status == api.COMPLETED, view.error
    assert (view.result or {})["structuredContent"]["visited"] is True


async def _none(awaitable) -> bool:
    return await awaitable is None
