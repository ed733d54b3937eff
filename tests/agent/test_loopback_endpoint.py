"""The loopback endpoint (Windows' kind, selected here by ``HOSTAPP_AGENT_ENDPOINT``): TCP
on 127.0.0.1, a key made at each start in a 0600 endpoint file. Real owners and real
commands, the same as on a Unix socket; a client without the key is refused."""

from __future__ import annotations

import asyncio
import json
import socket
import stat
import sys
from pathlib import Path

import pytest

from hostapp.agent import wire
from hostapp.agent.client import RemoteEngine, connect_or_spawn
from hostapp.agent.endpoint import ENDPOINT_ENV, LOOPBACK, LOOPBACK_FILE, endpoint_path, read_loopback_file
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect
from tests.support.agents import agent_pids, exchange
from tests.support.faults import HostCall, progress_of


@pytest.fixture
def loopback(agents: Agents, monkeypatch: pytest.MonkeyPatch) -> Agents:
    monkeypatch.setenv(ENDPOINT_ENV, LOOPBACK)
    agents.env[ENDPOINT_ENV] = LOOPBACK
    return agents


def _exchange(port: int, *lines: bytes) -> list[dict]:
    return exchange(socket.create_connection(("127.0.0.1", port), timeout=10), *lines)


async def test_a_client_without_the_key_is_refused_and_one_with_it_is_served(loopback: Agents):
    owner = loopback.start("--idle-exit", "600")
    engine = await _connect(loopback.home)
    try:
        path = endpoint_path(loopback.home)
        assert path.name == LOOPBACK_FILE
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert not (path.parent / "agent.sock").exists()
        port, key = read_loopback_file(path)
        assert engine.agent["pid"] == owner.pid

        hello = {"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"version": wire.VERSION}}
        for params in ({}, {"key": "guess"}, {"key": key[:-1]}, {"key": 42}):
            ask = dict(hello, params={**hello["params"], **params})
            answers = _exchange(port, wire.dumps(ask), b'{"jsonrpc":"2.0","id":2,"method":"servers"}\n')
            assert len(answers) == 1 and answers[0]["error"]["code"] == -32600, answers
            assert key not in json.dumps(answers)
        ask = dict(hello, params={**hello["params"], "key": key})
        answers = _exchange(port, wire.dumps(ask), b'{"jsonrpc":"2.0","id":2,"method":"servers"}\n')
        assert answers[0]["result"]["pid"] == owner.pid and answers[1]["result"] == []

        status = json.loads(loopback.run("agent", "status", "--json").stdout)
        assert status["running"] is True and status["pid"] == owner.pid
        assert status["clients"] == 2  # this test and the status command: the refused ones never counted
    finally:
        await engine.close()
    assert loopback.run("agent", "stop").returncode == 0
    assert owner.wait(30) == 0
    assert not endpoint_path(loopback.home).exists()
    log = (loopback.home / "logs" / "agent.log").read_text()
    assert key not in log and "refused a loopback connection" in log


def test_a_call_from_the_command_line_starts_an_owner_and_outlives_the_command(loopback: Agents):
    lab = [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(loopback.home / "lab.sqlite3")]
    assert loopback.run("servers", "add", "stdio-lab", "--", *lab).returncode == 0
    call = HostCall(loopback.home, "call", "stdio-lab", "sleep_with_progress", "--json",
                    "--args", json.dumps({"seconds": 3, "steps": 30}), env=loopback.env)
    first = call.wait_for(lambda events: events[:1])[0]
    assert first["event"] == "started"
    call.wait_for(progress_of)
    assert endpoint_path(loopback.home).name == LOOPBACK_FILE and endpoint_path(loopback.home).exists()
    call.proc.kill()  # the command alone: the owner it started goes on
    call.proc.wait()
    followed = loopback.run("follow", str(first["operation"]), "--json")
    assert followed.returncode == 0, (followed.stdout, followed.stderr)
    last = json.loads(followed.stdout.splitlines()[-1])
    assert last["event"] == "result" and last["result"]["structuredContent"]["steps"] == 30
    assert len(agent_pids(loopback.home)) == 1


async def test_an_endpoint_file_left_by_a_dead_owner_is_replaced(loopback: Agents):
    # A dead owner's file names a port nobody listens on (or a stranger took): the client
    # starts a new owner, which writes a new port and a new key.
    path = endpoint_path(loopback.home)
    path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead_port = unused.getsockname()[1]
    path.write_text(json.dumps({"port": dead_port, "key": "old-key", "pid": 1}))
    engine: RemoteEngine = await asyncio.wait_for(connect_or_spawn(loopback.home, client="test"), 60)
    try:
        port, key = read_loopback_file(path)
        assert (port, key) != (dead_port, "old-key")
        assert engine.agent["pid"] in agent_pids(loopback.home)
    finally:
        await engine.close()
    assert loopback.run("agent", "stop", "--yes").returncode == 0


def test_a_broken_endpoint_file_is_no_agent(tmp_path: Path):
    path = tmp_path / LOOPBACK_FILE
    for text in ("", "[]", '{"port": "x", "key": "k"}', '{"port": 70000, "key": "k"}', '{"port": 5, "key": ""}'):
        path.write_text(text)
        with pytest.raises(ValueError) as caught:
            read_loopback_file(path)
        assert "k\"" not in str(caught.value)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _flood(port: int, size: int) -> BaseException | None:
    """Connect without the key and send ``size`` bytes with no end of line; what stopped it
    (None: everything was taken)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"pad":"' + b"x" * size)
    except OSError as exc:
        return exc
    finally:
        sock.close()
    return None


async def test_a_connection_that_has_not_said_hello_cannot_make_the_agent_hold_much(loopback: Agents):
    """Before its key is checked, a connection gets a small read limit: one that sends
    megabytes without a line is cut off, whatever it sends, and the agent stays small."""
    owner = loopback.start("--idle-exit", "600")
    engine = await _connect(loopback.home)
    try:
        port, _key = read_loopback_file(endpoint_path(loopback.home))
        before = _rss_kib(owner.pid)
        stopped = await asyncio.gather(*(asyncio.to_thread(_flood, port, 32 * 1024 * 1024) for _ in range(3)))
        assert all(isinstance(exc, (BrokenPipeError, ConnectionResetError)) for exc in stopped), stopped
        assert await engine.servers() == []  # the legitimate client is served meanwhile
        grown = _rss_kib(owner.pid) - before
        print(f"agent RSS {before} KiB before, grew {grown} KiB over three 32 MiB floods")
        # Held whole, the three floods are 96 MiB; bounded, they cost little (about 1.4 MiB
        # measured), plus what a loaded machine's allocator keeps: well under a third of that.
        assert grown < 32 * 1024
    finally:
        await engine.close()


async def test_after_hello_lines_of_megabytes_are_read_in_chunks_up_to_the_wire_limit():
    from hostapp.agent.endpoint import HELLO_LIMIT, _Lines

    reader = asyncio.StreamReader(limit=HELLO_LIMIT)
    reader.feed_data(b"a\nb")
    reader.feed_data(b"x" * (5 * 1024 * 1024) + b"\n")
    reader.feed_data(b"tail")
    reader.feed_eof()
    lines = _Lines(reader, wire.MAX_MESSAGE)
    assert await lines.readline() == b"a\n"
    assert len(await lines.readline()) == 5 * 1024 * 1024 + 2
    assert await lines.readline() == b"tail" and await lines.readline() == b""

    reader = asyncio.StreamReader(limit=HELLO_LIMIT)
    reader.feed_data(b"y" * 3000)
    with pytest.raises(ValueError, match="too large"):
        await _Lines(reader, 1000).readline()
