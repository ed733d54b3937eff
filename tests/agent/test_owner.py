"""The owner of a home, for real: ``hostapp agent`` processes, its socket, and clients
that talk to it through the engine facade."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import sys
from pathlib import Path

import pytest

from hostapp.agent import wire
from hostapp.agent.client import AgentGone, AgentUnavailable, RemoteEngine, connect_or_spawn
from hostapp.agent.endpoint import endpoint_path
from hostapp.engine import api
from hostapp.engine.heap import GC_THRESHOLDS
from hostapp.store.paths import log_dir
from tests.agent.conftest import Agents
from tests.support.agents import exchange as agents_exchange
from tests.support.waiting import DEADLINE, until_async


async def _connect(home: Path, listener: api.EngineListener | None = None, timeout: float = DEADLINE) -> RemoteEngine:
    """A client of the home's owner, once the owner answers."""
    async def connected() -> RemoteEngine | None:
        try:
            return await RemoteEngine.connect(endpoint_path(home), listener, client="test")
        except AgentUnavailable:
            return None

    return await until_async(connected, timeout, what=f"the owner of {home} to answer", interval=0.1)


def _lab_config() -> api.ServerConfig:
    """The lab on stdio, its state in this test's home (a stdio server does not inherit
    HOSTAPP_HOME: without --state it would share the platform's data folder)."""
    import os

    state = Path(os.environ["HOSTAPP_HOME"]) / "lab" / "lab.sqlite3"
    return api.ServerConfig(name="lab", transport="stdio", command=sys.executable,
                            args=["-m", "hostapp", "lab", "serve", "--stdio", "--state", str(state)])


class Seen:
    """A listener that keeps what the owner tells."""

    def __init__(self) -> None:
        self.changes: list[api.OperationView] = []
        self.events: list[tuple[str, str]] = []
        self.servers: list[api.ServerView] = []

    def operation_changed(self, op: api.OperationView) -> None:
        self.changes.append(op)

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None:
        self.events.append((op_id, kind))

    def server_changed(self, server: api.ServerView) -> None:
        self.servers.append(server)

    def input_requested(self, request: api.InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def server_removed(self, name: str) -> None: ...

    def problem(self, kind: str, message: str) -> None: ...


async def test_status_never_starts_an_owner(agents: Agents):
    result = agents.run("agent", "status", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"running": False}
    assert not endpoint_path(agents.home).exists()


async def test_one_owner_serves_the_facade_to_clients_and_stops_cleanly(agents: Agents):
    owner = agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        assert engine.agent["pid"] == owner.pid and engine.agent["version"] == wire.VERSION
        # Only this user can reach it.
        path = endpoint_path(agents.home)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        # It collects its garbage as a process carrying thousands of operations should
        # (CPython's defaults ran a full collection about once a second at 10,000).
        assert f"garbage collector thresholds {GC_THRESHOLDS}" in (log_dir(agents.home) / "agent.log").read_text()

        # A second owner on the same home refuses, and says who owns it.
        second = agents.run("agent", "--idle-exit", "600")
        assert second.returncode == 1
        assert f"pid {owner.pid}" in second.stderr

        status = json.loads(agents.run("agent", "status", "--json").stdout)
        assert status["running"] is True and status["pid"] == owner.pid
        assert status["clients"] == 2  # this test and the status command itself
        assert status["operations"] == 0

        await engine.add_server(_lab_config())
        assert [s.name for s in await engine.servers()] == ["lab"]
        with pytest.raises(api.NoSuchOperation):
            await engine.cancel("no-such-op")
    finally:
        await engine.close()

    stopped = agents.run("agent", "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout
    assert owner.wait(30) == 0
    assert not endpoint_path(agents.home).exists()
    assert json.loads(agents.run("agent", "status", "--json").stdout) == {"running": False}


async def test_a_call_started_by_one_client_is_seen_live_by_another(agents: Agents):
    agents.start("--idle-exit", "600")
    watcher_seen, starter_seen = Seen(), Seen()
    watcher = await _connect(agents.home, watcher_seen)
    starter = await _connect(agents.home, starter_seen)
    try:
        await starter.add_server(_lab_config())
        await starter.wait_connected("lab", timeout=60)
        op = await starter.start_call("lab", "sleep_with_progress", {"seconds": 1.5, "steps": 15, "message": "tick"})
        final = await asyncio.wait_for(starter.wait_finished(op.id), 60)
        assert final.status == api.OperationStatus.COMPLETED
        await until_async(lambda: any(c.id == op.id and c.status == api.OperationStatus.COMPLETED
                                      for c in watcher_seen.changes), what="the other client to see the call end")
        # A round trip on the watcher's connection: whatever the owner sent it before is in.
        assert (await watcher.operation(op.id)).status == api.OperationStatus.COMPLETED
        mine = [c for c in watcher_seen.changes if c.id == op.id]
        assert mine, "the other client saw nothing of the call"
        assert mine[-1].status == api.OperationStatus.COMPLETED  # the terminal change arrives, and last
        progress = [c.progress for c in mine if c.progress is not None]
        assert progress == sorted(progress) and progress  # live progress, never backwards
        # Coalesced: at most ~30 updates a second reach a client.
        assert len(mine) <= 30 * 1.5 + 10
    finally:
        await watcher.close()
        await starter.close()
    assert agents.run("agent", "stop").returncode == 0


async def test_a_killed_owner_is_replaced_and_its_clients_are_told(agents: Agents):
    first = agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    await asyncio.wait_for(engine.wait_closed(), 10)
    with pytest.raises(AgentGone):
        await engine.servers()
    await engine.close()
    # The socket file the dead owner left behind answers nobody; a new owner takes over.
    assert endpoint_path(agents.home).exists()
    second = agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        assert engine.agent["pid"] == second.pid
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0


async def test_an_owner_started_on_demand_exits_when_idle(agents: Agents, monkeypatch):
    monkeypatch.setenv("HOSTAPP_HOME", str(agents.home))
    for key, value in agents.env.items():
        monkeypatch.setenv(key, value)
    # An owner a client starts takes its idle exit from the environment (the default is
    # minutes): with one second, it ends by itself once its last client left.
    monkeypatch.setenv("HOSTAPP_AGENT_IDLE_EXIT", "1")
    engine = await connect_or_spawn(agents.home, client="test")
    pid = engine.agent["pid"]
    await asyncio.sleep(2.5)
    os.kill(pid, 0)  # still there while a client is connected
    await engine.close()

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    await until_async(gone, what="the spawned agent to exit when idle", interval=0.1)

    idle = agents.start("--idle-exit", "1")
    client = await _connect(agents.home)
    await asyncio.sleep(2.5)
    assert idle.poll() is None, "it exited while a client was connected"
    await client.close()
    assert idle.wait(30) == 0


async def test_the_wire_refuses_what_it_does_not_speak(agents: Agents):
    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    await engine.close()
    path = str(endpoint_path(agents.home))

    def exchange(*lines: bytes) -> list[dict]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(path)
        return agents_exchange(sock, *lines)

    old = exchange(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"version":99}}\n')
    assert old[0]["error"]["code"] == wire.VERSION_MISMATCH
    assert "Restart the agent (hostapp agent stop" in old[0]["error"]["message"]
    assert old[0]["error"]["data"] == {"version": wire.VERSION, "min_version": wire.MIN_VERSION}
    assert exchange(b'{"jsonrpc":"2.0","id":1,"method":"servers"}\n')[0]["error"]["code"] == -32600
    hello = b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"version":%d}}\n' % wire.VERSION
    answers = exchange(hello, b"not json\n", b'{"jsonrpc":"2.0","id":2,"method":"__init__"}\n',
                       b'{"jsonrpc":"2.0","id":3,"method":"operations","params":{"limit":"x"}}\n')
    by_id = {a.get("id"): a for a in answers}
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[2]["error"]["code"] == -32601
    assert "error" in by_id[3] or "result" in by_id[3]  # a bad value is answered, never fatal
    # ... and the owner is still there for everyone else.
    engine = await _connect(agents.home)
    assert await engine.servers() == []
    await engine.close()
    assert agents.run("agent", "stop").returncode == 0


@pytest.mark.skipif(sys.platform != "linux" or __import__("shutil").which("gio") is None,
                    reason="needs Linux and GLib's launcher (Debian libglib2.0-bin)")
async def test_the_autostart_entry_starts_an_owner_with_no_display(agents: Agents, tmp_path: Path):
    """As a session manager does at login: the entry's Exec line, run by GLib's launcher
    with no display, starts an owner of this home that stays when idle."""
    import subprocess

    env = {**agents.env, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    enabled = subprocess.run([sys.executable, "-m", "hostapp", "autostart", "enable", "--json"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert enabled.returncode == 0, enabled.stderr
    status = json.loads(enabled.stdout)
    assert status["enabled"] and status["current"]
    entry = Path(status["location"])
    assert entry == tmp_path / "config" / "autostart" / "io.github.hostapp.hostapp.desktop"

    subprocess.run(["gio", "launch", str(entry)], env=env, check=True, timeout=DEADLINE)
    engine = await _connect(agents.home)
    try:
        info = json.loads(agents.run("agent", "status", "--json").stdout)
        assert info["running"] and info["autostart"] is True
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0

    disabled = subprocess.run([sys.executable, "-m", "hostapp", "autostart", "disable"], env=env,
                              capture_output=True, text=True, timeout=60)
    assert disabled.returncode == 0 and not entry.exists()


async def test_the_owner_ends_what_a_crash_left_unsent(agents: Agents):
    """A call journaled but never sent (the host died between the two) did not run: the
    owner ends it at start-up, saying so, instead of sending it hours later."""
    from hostapp.store.journal import OperationJournal, OperationRecord
    from hostapp.store.paths import journal_path

    with OperationJournal(journal_path(agents.home)) as journal:
        journal.add_server(_lab_config())
        journal.create_operation_sync(OperationRecord(
            id="unsent", server="lab", method="tools/call", tool="sleep_with_progress",
            params={"name": "sleep_with_progress", "arguments": {"seconds": 1}}))
    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        op = await engine.operation("unsent")
        assert op is not None and op.status == api.OperationStatus.FAILED
        assert op.error is not None and "did not run" in op.error["message"]
        assert await engine.count_operations(set(api.IN_FLIGHT)) == 0
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0


async def test_the_command_line_is_a_client_of_a_running_owner(agents: Agents):
    """With an owner running, CLI commands go through it: a call started by 'hostapp call'
    is the owner's, and goes on after the command is interrupted."""
    import subprocess

    agents.start("--idle-exit", "600")
    engine = await _connect(agents.home)
    try:
        added = agents.run("servers", "add", "lab", "--", sys.executable, "-m", "hostapp", "lab", "serve",
                           "--stdio", "--state", str(agents.home / "lab" / "lab.sqlite3"))
        assert added.returncode == 0, added.stderr
        assert [s.name for s in await engine.servers()] == ["lab"]  # the owner configured it

        call = subprocess.Popen(
            [sys.executable, "-m", "hostapp", "call", "lab", "sleep_with_progress", "--json",
             "--args", json.dumps({"seconds": 4, "steps": 40})],
            env=agents.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert call.stdout is not None
        first = json.loads(call.stdout.readline())
        assert first["event"] == "started", first  # the operation's id comes first
        assert json.loads(call.stdout.readline())["event"] in ("status", "progress")
        call.send_signal(signal.SIGINT)
        call.wait(30)
        (op,) = await engine.operations()
        assert op.id == first["operation"]
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.OperationStatus.COMPLETED  # the owner carried it on

        listed = agents.run("ops", "--json")
        assert listed.returncode == 0, listed.stderr
        assert op.id in listed.stdout
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0
