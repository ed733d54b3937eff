"""The agent's wire as a contract between versions: what ``hello`` negotiates, the numbered
errors, the numbered events a reconnecting client catches up with, and what one client may
cost the agent. An endpoint in this process over a real engine (journal in the test's home)
and real sockets; clients are the real client or raw sockets."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from hostapp.agent import wire
from hostapp.agent.client import (
    AgentIncompatible,
    EventPosition,
    MethodUnavailable,
    RemoteEngine,
)
from hostapp.agent.endpoint import AgentEndpoint, Limits, endpoint_path
from hostapp.engine import api
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect

N = wire.VERSION


@contextlib.asynccontextmanager
async def serving(home: Path, *, versions: tuple[int, int] = (wire.MIN_VERSION, wire.VERSION),
                  limits: Limits | None = None, endpoint_class: type[AgentEndpoint] = AgentEndpoint,
                  ) -> AsyncIterator[AgentEndpoint]:
    """An endpoint serving a real engine on ``home`` (not started: no server is configured,
    and the journal is all the tests here need)."""
    # A short folder: a Unix socket's path must fit in about 100 bytes.
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"hw-{os.getpid()}-{id(home) % 100000}"
    endpoint = endpoint_class(None, folder / "agent" / "agent.sock", versions=versions, limits=limits or Limits(),
                              info={"pid": os.getpid()})
    engine = Engine(home, endpoint, connect=False)
    endpoint.engine = LocalEngine(engine)
    await endpoint.start()
    endpoint.ready.set()
    try:
        yield endpoint
    finally:
        await endpoint.close()
        await engine.stop()
        with contextlib.suppress(OSError):
            (folder / "agent").rmdir()
            folder.rmdir()


async def until(condition: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Wait for ``condition`` to hold (generous deadline; it is a condition, not a timing)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (value := condition()):
        assert loop.time() < deadline, "the condition did not come about"
        await asyncio.sleep(0.01)
    return value


# -- versions ------------------------------------------------------------------------------


def test_negotiation_takes_the_newest_version_both_ranges_hold():
    assert wire.negotiate((N, N), (N - 1, N + 1)) == N
    assert wire.negotiate((N - 1, N + 1), (N, N)) == N
    assert wire.negotiate((N, N + 2), (N - 1, N + 1)) == N + 1
    assert wire.negotiate((N, N), (N + 1, N + 2)) is None
    assert wire.negotiate((N, N), (N - 2, N - 1)) is None
    assert "older than the running agent" in wire.mismatch_advice((N, N), (N + 1, N + 2))
    assert "Restart the agent" in wire.mismatch_advice((N, N), (N - 2, N - 1))


async def test_a_client_works_with_an_agent_whose_range_holds_its_version(isolated_home: Path):
    async with serving(isolated_home, versions=(N - 1, N + 1)) as endpoint:
        engine = await RemoteEngine.connect(endpoint.path, client="test", versions=(N, N))
        try:
            assert engine.agent["speaks"] == N
            assert (engine.agent["min_version"], engine.agent["version"]) == (N - 1, N + 1)
            assert set(engine.methods) == set(wire.FACADE)
            assert await engine.servers() == []
            assert await engine.operation("no-such-operation") is None
        finally:
            await engine.close()


@pytest.mark.parametrize(("agent", "advice"), [
    ((N + 1, N + 2), "this hostapp is older than the running agent"),
    ((N - 2, N - 1), "the agent is older than this hostapp. Restart the agent (hostapp agent stop"),
])
async def test_an_agent_outside_the_clients_range_is_refused_with_what_to_do(
        isolated_home: Path, agent: tuple[int, int], advice: str):
    async with serving(isolated_home, versions=agent) as endpoint:
        with pytest.raises(AgentIncompatible) as refused:
            await RemoteEngine.connect(endpoint.path, client="test", versions=(N, N))
        assert advice in str(refused.value)
        assert endpoint.client_count == 0


async def test_a_method_the_agent_does_not_serve_is_not_sent_and_says_to_restart_it(isolated_home: Path):
    class OlderAgent(AgentEndpoint):
        """An agent from before ``read_app_view`` existed."""

        @property
        def methods(self) -> list[str]:
            return [m for m in super().methods if m != "read_app_view"]

    async with serving(isolated_home, endpoint_class=OlderAgent) as endpoint:
        engine = await RemoteEngine.connect(endpoint.path, client="test")
        try:
            with pytest.raises(MethodUnavailable) as refused:
                await engine.read_app_view("lab", "ui://x")
            assert "Restart the agent" in str(refused.value)
            assert isinstance(refused.value, api.EngineError)
            assert await engine.servers() == []  # the rest is served as before
        finally:
            await engine.close()


async def test_a_version_1_client_is_still_served(isolated_home: Path):
    """Exactly what a client of version 1 sends and reads: no minimum, errors by data.type."""
    async with serving(isolated_home) as endpoint:
        reader, writer = await asyncio.open_unix_connection(str(endpoint.path))
        writer.write(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"version":1}}\n')
        writer.write(b'{"jsonrpc":"2.0","id":2,"method":"cancel","params":{"op_id":"nope"}}\n')
        hello, answer = json.loads(await reader.readline()), json.loads(await reader.readline())
        writer.close()
        assert hello["result"]["speaks"] == 1
        assert answer["error"]["data"]["type"] == "NoSuchOperation"


# -- errors --------------------------------------------------------------------------------


def test_error_codes_are_stable_numbers():
    """Numbers given once keep their meaning: this table changes only by additions."""
    assert {code.name: int(code) for code in wire.Code} == {
        "PARSE_ERROR": -32700, "INVALID_REQUEST": -32600, "METHOD_NOT_FOUND": -32601, "INVALID_PARAMS": -32602,
        "ENGINE_ERROR": -32000, "VERSION_MISMATCH": -32001, "NO_SUCH_SERVER": -32010, "NO_SUCH_OPERATION": -32011,
        "INVALID_ARGUMENT": -32012, "SERVER_UNAVAILABLE": -32013, "SERVER_ERROR": -32014,
        "SIGN_IN_REQUIRED": -32015, "SIGN_IN_FAILED": -32016, "KEYRING_UNAVAILABLE": -32017,
        "SKILL_REFUSED": -32018, "ENGINE_TIMEOUT": -32019, "APP_VIEW_REFUSED": -32020,
    }


def test_a_client_knows_an_error_by_its_code_not_its_class_name():
    encoded = wire.encode_error(api.NoSuchOperation("no operation 'x'"))
    assert encoded["code"] == wire.Code.NO_SUCH_OPERATION
    renamed = {**encoded, "data": {"type": "OperationMissing"}}  # the class renamed on the agent's side
    assert type(wire.decode_error(renamed)) is api.NoSuchOperation
    newer = {"code": -32099, "message": "something new", "data": {"type": "NoSuchServer"}}
    assert type(wire.decode_error(newer)) is api.EngineError  # an unknown code is a plain failure


async def test_a_failure_crosses_with_its_code(isolated_home: Path):
    async with serving(isolated_home) as endpoint:
        reader, writer = await asyncio.open_unix_connection(str(endpoint.path))
        writer.write(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"version": N}}))
        writer.write(b'{"jsonrpc":"2.0","id":2,"method":"cancel","params":{"op_id":"nope"}}\n')
        writer.write(b'{"jsonrpc":"2.0","id":3,"method":"operations","params":{"statuses":7}}\n')
        answers = [json.loads(await reader.readline()) for _ in range(3)]
        writer.close()
        by_id = {a["id"]: a for a in answers}
        assert by_id[2]["error"]["code"] == wire.Code.NO_SUCH_OPERATION
        assert by_id[3]["error"]["code"] == wire.Code.INVALID_PARAMS


# -- numbered events -----------------------------------------------------------------------


class Heard:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.changes: list[api.OperationView] = []

    def operation_changed(self, op: api.OperationView) -> None:
        self.changes.append(op)

    def operation_event(self, op_id: str, kind: str, data: api.JsonObject) -> None: ...

    def server_changed(self, server: api.ServerView) -> None: ...

    def input_requested(self, request: api.InputRequest) -> None: ...

    def input_withdrawn(self, request_id: str) -> None: ...

    def problem(self, kind: str, message: str) -> None:
        self.problems.append(message)


def raw_client(path: Path, name: str | None = None) -> socket.socket:
    """A client on a bare socket that has said hello (as ``name``) and reads only when the
    test does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    params: dict[str, Any] = {"version": N, **({"client": name} if name else {})}
    sock.sendall(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": params}))
    return sock


def _op(op_id: str, status: str = api.OperationStatus.RUNNING, progress: float = 0.0) -> api.OperationView:
    return api.OperationView(id=op_id, server="s", tool="t", method="tools/call", arguments={}, status=status,
                             progress=progress)


async def test_a_reconnecting_client_catches_up_exactly_then_is_told_of_a_gap(isolated_home: Path):
    limits = Limits(replay_events=20)
    async with serving(isolated_home, limits=limits) as endpoint:
        heard = Heard()
        first = await RemoteEngine.connect(endpoint.path, heard, client="test")
        endpoint.problem("p", "one")
        endpoint.operation_changed(_op("a", progress=1))
        endpoint.operation_changed(_op("a", api.OperationStatus.COMPLETED, progress=2))  # urgent: at once
        await until(lambda: heard.problems == ["one"] and heard.changes)
        position = first.position
        assert position is not None and position.seq == 3  # the first change of 'a' coalesced into the second
        await first.close()

        # While it is away: a problem and an operation's changes (only its latest is kept).
        endpoint.problem("p", "two")
        for step in range(5):
            endpoint.operation_changed(_op("b", progress=step))
        missed = Heard()
        again = await RemoteEngine.connect(endpoint.path, missed, client="test", since=position)
        try:
            assert again.caught_up is True
            await until(lambda: missed.problems and missed.changes)
            assert missed.problems == ["two"]
            assert [(op.id, op.progress) for op in missed.changes] == [("b", 4)]
            await until(lambda: again.position is not None and again.position.seq == endpoint.last_event)
        finally:
            await again.close()

        # Away longer than the log keeps: told so, nothing replayed.
        assert again.position is not None
        for n in range(limits.replay_events + 1):
            endpoint.problem("p", f"lost {n}")
        late = Heard()
        gap = await RemoteEngine.connect(endpoint.path, late, client="test", since=again.position)
        other_run = await RemoteEngine.connect(endpoint.path, client="test", since=EventPosition("another run", 1))
        try:
            assert gap.caught_up is False and other_run.caught_up is False
            endpoint.problem("p", "live")
            await until(lambda: late.problems)
            assert late.problems == ["live"]
        finally:
            await gap.close()
            await other_run.close()


# -- what one client may cost --------------------------------------------------------------


async def test_a_client_whose_socket_is_gone_is_written_to_no_more_and_said_once(
        isolated_home: Path, caplog: pytest.LogCaptureFixture):
    async with serving(isolated_home) as endpoint:
        sock = raw_client(endpoint.path)
        await until(lambda: endpoint.client_count == 1)
        sock.close()
        caplog.set_level(logging.INFO)
        for n in range(50):  # before the agent has read the end of the connection
            endpoint.problem("p", f"event {n}")
        await until(lambda: endpoint.client_count == 0)
        messages = [r.getMessage() for r in caplog.records]
        assert not [m for m in messages if "socket.send() raised exception" in m]
        assert len([m for m in messages if "went away" in m]) == 1


async def test_a_stuck_client_is_dropped_with_a_farewell_and_the_others_are_served(isolated_home: Path):
    limits = Limits(high_water=64 * 1024, held=256 * 1024, farewell_seconds=60)
    async with serving(isolated_home, limits=limits) as endpoint:
        stuck = raw_client(endpoint.path, "stuck")
        heard = Heard()
        other = await RemoteEngine.connect(endpoint.path, heard, client="test")
        try:
            await until(lambda: endpoint.client_count == 2)
            big = "x" * 8192
            sent = 0
            while endpoint.client_count == 2:  # the stuck one never reads
                endpoint.problem("p", big)
                sent += 1
                assert sent < 10_000, "the stuck client was never dropped"
                await asyncio.sleep(0)  # the other client reads
            # Never more than the high water in its socket plus what may wait, plus one event.
            assert sent * len(big) > limits.high_water + limits.held
            assert await other.servers() == []
            await until(lambda: len(heard.problems) == sent)
            # What the stuck client finds when it reads at last: what fitted, then the farewell.
            lines = await asyncio.to_thread(read_to_the_end, stuck)
            events = [json.loads(line) for line in lines.splitlines()]
            assert events[-1]["params"]["kind"] == "dropped"
            assert "it fell behind" in events[-1]["params"]["reason"]
            assert len(lines) < limits.high_water + 2 * len(big) + 4096 + socket_buffers(stuck)
        finally:
            stuck.close()
            await other.close()


async def test_a_backlogged_client_keeps_coalescing_changes_while_other_events_come(isolated_home: Path):
    """Changes of an operation coalesce for a client that does not read, even when other
    events (an operation's timeline) come between them: those wait in line in their turn,
    and only they count towards the bytes that drop a client."""
    limits = Limits(high_water=64 * 1024, held=256 * 1024, farewell_seconds=60)
    async with serving(isolated_home, limits=limits) as endpoint:
        slow = raw_client(endpoint.path, "slow")
        try:
            await until(lambda: endpoint.client_count == 1)
            big = "x" * 8192
            ops = ["a", "b", "c", "d"]
            rounds = 200  # 800 changes of 8 KiB: 25 times what may wait for a client
            for step in range(rounds):
                for op_id in ops:
                    endpoint.operation_changed(dataclasses.replace(_op(op_id, progress=step), message=big))
                endpoint.operation_event(ops[step % len(ops)], "log", {"n": step})
                await asyncio.sleep(0)
            assert rounds * len(ops) * len(big) > 10 * limits.held
            endpoint.problem("p", "last")
            assert endpoint.client_count == 1, "the client was dropped though its changes could coalesce"

            lines = await asyncio.to_thread(read_until, slow, b'"last"')
            events = [json.loads(line)["params"] for line in lines.splitlines()[1:]]  # after hello's answer
            assert [e["kind"] for e in events if e["kind"] == "dropped"] == []
            seqs = [e["seq"] for e in events]
            assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # in order, none twice
            assert [e["data"]["n"] for e in events if e["kind"] == "operation_event"] == list(range(rounds))
            latest = {e["op"]["id"]: e["op"]["progress"] for e in events if e["kind"] == "operation_changed"}
            assert latest == {op_id: rounds - 1 for op_id in ops}
            changes = [e for e in events if e["kind"] == "operation_changed"]
            assert len(changes) < rounds * len(ops) / 4  # coalesced, not one per change
        finally:
            slow.close()


def read_until(sock: socket.socket, marker: bytes) -> bytes:
    """What ``sock`` receives until a complete line holding ``marker`` has come."""
    sock.settimeout(60)
    data = b""
    while not (marker in data and data.endswith(b"\n")):
        chunk = sock.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    return data


def read_to_the_end(sock: socket.socket) -> bytes:
    sock.settimeout(60)
    data = b""
    while chunk := sock.recv(1 << 20):
        data += chunk
    return data


def socket_buffers(sock: socket.socket) -> int:
    """What the kernel holds between the two ends of a Unix socket at most."""
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) + sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)


def _rss(pid: int) -> int:
    """The resident memory of process ``pid``, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the agent's memory in /proc")
async def test_a_flood_for_a_client_that_never_reads_leaves_the_agent_bounded_and_the_others_served(
        agents: Agents):
    owner = agents.start("--idle-exit", "600")
    other = await _connect(agents.home)
    try:
        # A server whose definition is big: every answer about it, and every event, is as big.
        big = api.ServerConfig(name="big", transport="stdio", command="/nonexistent/hostapp-flood",
                               args=["x" * (256 * 1024)])
        await other.add_server(big)
        before = _rss(owner.pid)
        stuck = raw_client(endpoint_path(agents.home), "stuck")
        # 400 answers of 256 KiB asked for, none ever read (100 MiB if the agent kept them).
        stuck.sendall(b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"server_configs"}\n' % (i + 2)
                               for i in range(400)))
        # Meanwhile the others are served, and every change of the big server is an event
        # for the stuck client too, until the agent stops serving it.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 120
        while (await other.control.status())["clients"] < 2:
            assert loop.time() < deadline, "the second client was never counted"
        while (await other.control.status())["clients"] > 1:
            assert loop.time() < deadline, "the client that never reads was never dropped"
            await other.reconnect("big")
            assert [s.name for s in await other.servers()] == ["big"]
        grown = _rss(owner.pid) - before
        assert grown < 64 * 1024 * 1024, f"the agent grew by {grown / 1e6:.0f} MB"
        stuck.close()
        assert (await other.control.status())["running"]
    finally:
        await other.close()
    log = (agents.home / "logs" / "agent.log").read_text()
    assert "dropped client stuck" in log and "socket.send() raised exception" not in log
    assert agents.run("agent", "stop", "--yes").returncode == 0



async def test_a_client_has_at_most_its_share_of_requests_running(isolated_home: Path):
    """Past ``in_flight`` running requests, the next one is read only when one has ended."""
    async with serving(isolated_home, limits=Limits(in_flight=2)) as endpoint:
        other = await RemoteEngine.connect(endpoint.path, client="test")
        try:
            await other.add_server(api.ServerConfig(name="never", transport="stdio",
                                                    command="/nonexistent/hostapp-never"))
            op = await other.start_call("never", "t")  # this engine connects nothing: it waits
            reader, writer = await asyncio.open_unix_connection(str(endpoint.path))
            writer.write(wire.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"version": N}}))
            for rid in (2, 3):
                writer.write(wire.dumps({"jsonrpc": "2.0", "id": rid, "method": "wait_finished",
                                         "params": {"op_id": op.id}}))
            writer.write(wire.dumps({"jsonrpc": "2.0", "id": 4, "method": "servers"}))
            await until(lambda: endpoint.client_count == 2)
            for _ in range(3):
                assert [s.name for s in await other.servers()] == ["never"]  # the other client is served
            await other.cancel(op.id)  # ends the operation: both waits end, then 4 is read
            answers: list[dict[str, Any]] = []
            while len(answers) < 4:
                message = json.loads(await reader.readline())
                if message.get("method") != "event":
                    answers.append(message)
            writer.close()
        finally:
            await other.close()
        order = [a["id"] for a in answers]
        assert order[0] == 1 and order[-1] == 4, order
        assert all(a["result"]["id"] == op.id for a in answers if a["id"] in (2, 3))


async def test_an_agent_of_version_1_is_still_reached_to_be_stopped_and_refused_for_the_rest(tmp_path: Path):
    """An agent of version 1 wants its exact version at hello (as it was written): the
    commands that stop or ask it connect in version 1; the facade's clients are told to
    restart it."""
    asked: list[str] = []

    async def old_agent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = json.loads(await reader.readline())
        if hello["params"].get("version") != 1:
            writer.write(wire.dumps({"jsonrpc": "2.0", "id": hello["id"], "error": {
                "code": -32001, "message": "the agent speaks version 1 of its wire: restart the agent",
                "data": {"version": 1}}}))
            writer.close()
            return
        writer.write(wire.dumps({"jsonrpc": "2.0", "id": hello["id"], "result": {"version": 1, "pid": 42}}))
        while line := await reader.readline():
            request = json.loads(line)
            asked.append(request["method"])
            writer.write(wire.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"stopping": True}}))
        writer.close()

    # A short path in a folder of this user alone (a client trusts no other).
    path = Path(tempfile.mkdtemp(prefix="hw-old-")) / "agent.sock"
    server = await asyncio.start_unix_server(old_agent, path=str(path))
    try:
        with pytest.raises(AgentIncompatible) as refused:
            await RemoteEngine.connect(path, client="test")
        assert "the agent is older than this hostapp. Restart the agent" in str(refused.value)
        control = await RemoteEngine.connect(path, client="cli", versions=(1, wire.VERSION))
        try:
            assert control.agent["version"] == 1
            assert await control.control.stop() == {"stopping": True}
            with pytest.raises(MethodUnavailable):
                await control.servers()  # a version-1 agent lists no methods: nothing is sent
        finally:
            await control.close()
        assert asked == ["agent.stop"]
    finally:
        server.close()
        await server.wait_closed()
        path.unlink(missing_ok=True)
        path.parent.rmdir()


async def test_a_client_that_needs_an_agent_says_at_once_when_the_running_one_is_too_old(isolated_home: Path):
    """No waiting for an agent to start, and none started beside it: the person is told."""
    from hostapp.agent.client import connect_or_spawn
    from hostapp.agent.lock import HomeLock
    from tests.support.agents import agent_pids

    lock = HomeLock(isolated_home)
    assert lock.acquire()  # as the running agent holds it
    endpoint = AgentEndpoint(None, endpoint_path(isolated_home), versions=(N - 2, N - 1))
    await endpoint.start()
    try:
        with pytest.raises(AgentIncompatible) as refused:
            await asyncio.wait_for(connect_or_spawn(isolated_home, client="test", timeout=300), 60)
        assert "Restart the agent" in str(refused.value)
        assert agent_pids(isolated_home) == []
    finally:
        await endpoint.close()
        lock.release()


async def test_a_window_that_fell_behind_is_told_so_and_catches_up_with_every_event_once(isolated_home: Path):
    from hostapp.ui.agent_link import AgentLink

    limits = Limits(high_water=16 * 1024, held=64 * 1024)
    async with serving(isolated_home, limits=limits) as endpoint:
        link = AgentLink(lambda since: RemoteEngine.connect(endpoint.path, client="window", since=since))
        said: list[tuple[str, str]] = []
        link.on_change = lambda state, message: said.append((state, message))
        heard = Heard()
        link.listener = heard
        await link.start()
        try:
            big = "x" * 4096
            for n in range(64):  # at once: the window cannot read meanwhile, and falls behind
                endpoint.problem("p", f"{n} {big}")
            await until(lambda: said[-1][0] in ("resumed", "reconnected"))
            states = [state for state, _ in said]
            assert states == ["connected", "lost", "resumed"], said
            assert "stopped serving this window (it fell behind" in said[1][1]
            await until(lambda: len(heard.problems) >= 64)
            assert heard.problems == [f"{n} {big}" for n in range(64)]  # every one, none twice
        finally:
            await link.stop()


async def test_the_owner_can_wait_until_its_clients_have_been_sent_what_waits_for_them(isolated_home: Path):
    """The owner's restoring at start-up waits between batches for what its clients wait
    for (the window's list after a restart, megabytes) to leave: while a client does not
    read, for no longer than it said; once it reads, until all is sent."""
    limits = Limits(high_water=16 * 1024, held=16 * 1024 * 1024)
    async with serving(isolated_home, limits=limits) as endpoint:
        sock = await asyncio.to_thread(raw_client, endpoint.path, "window")
        try:
            await until(lambda: endpoint.has_client("window"))
            big = "x" * 4096
            for n in range(512):  # 2 MB of events it does not read yet
                endpoint.problem("p", f"{n} {big}")
            client = next(iter(endpoint._clients))
            assert client.backlogged
            began = time.monotonic()
            await endpoint.clients_caught_up(0.3)
            assert time.monotonic() - began >= 0.3 and client.backlogged  # bounded: it waited no longer

            got = bytearray()

            def read_all() -> None:
                sock.settimeout(30)
                while got.count(b"\n") < 1 + 512:  # hello's answer, then every event
                    got.extend(sock.recv(1 << 20))

            reading = asyncio.get_running_loop().run_in_executor(None, read_all)
            await asyncio.wait_for(endpoint.clients_caught_up(60), 60)
            assert not client.backlogged
            await asyncio.wait_for(reading, 60)
        finally:
            sock.close()


async def test_the_owner_can_wait_until_its_clients_have_been_sent_all_of_it(isolated_home: Path):
    """Before it restores, the owner waits until its clients were sent everything, not only
    until what waits is below their high water: the tail of the window's list would wait
    for the turns of a loop busy connecting and reading the keyring."""
    limits = Limits(high_water=64 * 1024 * 1024, held=16 * 1024 * 1024)  # never backlogged here
    async with serving(isolated_home, limits=limits) as endpoint:
        sock = await asyncio.to_thread(raw_client, endpoint.path, "window")
        try:
            await until(lambda: endpoint.has_client("window"))
            big = "x" * 4096
            for n in range(512):  # 2 MB it does not read yet: more than its socket takes
                endpoint.problem("p", f"{n} {big}")
            client = next(iter(endpoint._clients))
            assert not client.backlogged and client.unsent
            began = time.monotonic()
            await endpoint.clients_caught_up(0.3)  # below the high water: caught up
            assert time.monotonic() - began < 0.2
            await endpoint.clients_caught_up(0.3, everything=True)
            assert time.monotonic() - began >= 0.3 and client.unsent  # bounded: no longer

            got = bytearray()

            def read_all() -> None:
                sock.settimeout(30)
                while got.count(b"\n") < 1 + 512:
                    got.extend(sock.recv(1 << 20))

            reading = asyncio.get_running_loop().run_in_executor(None, read_all)
            await asyncio.wait_for(endpoint.clients_caught_up(60, everything=True), 60)
            assert not client.unsent
            await asyncio.wait_for(reading, 60)
        finally:
            sock.close()
