"""Servers the project does not write, crossed with the faults a person meets.

Peers: the TypeScript SDK's example server (sessions, event store and tasks in memory),
the Python `mcp` SDK's server in its 2026-07-28 era and pinned to 2025-11-25, fastmcp
with its tasks extension (memory backend), and server-everything. Faults: a server
restart, a server killed and back after a pause, a cut of the network, a cancel, a probe
(``hostapp tools``) while the call runs, and a clean stop of the host and a new start.

Each cell asserts the outcome the mechanism can honestly give, that the tool's work
started once (the server's own record, or the calls on the wire for peers that keep
none), and that the next call works. The engine runs in this process, with a real
keyring; each peer runs behind a loopback proxy.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hostapp.engine.service import Engine
from tests.engine.conftest import Recorder
from tests.engine.test_session_loss import start_engine
from tests.support.faults import LoopbackProxy
from tests.support.keyring_daemon import KeyringDaemon, private_keyring
from tests.support.peers import (
    EVERYTHING,
    NODE,
    REPO_ROOT,
    Peer,
    free_port,
    require_everything,
    start_sdk_work_server,
    start_ts_example_server,
)
from tests.support.sdk_work_server import records

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

FASTMCP_SERVER = REPO_ROOT / "tests" / "faults" / "fastmcp_tasks_server.py"
COMPLETED, UNKNOWN, FAILED, CANCELLED = "completed", "unknown", "failed", "cancelled"
FAULTS = ("server_restart", "server_kill", "network_cut", "cancel", "probe", "host_stop")


@dataclass
class Served:
    """A running peer behind a proxy, and how many times the tool's work started."""

    peer: Peer
    proxy: LoopbackProxy
    starts: Callable[[], int]


@dataclass(frozen=True)
class PeerCase:
    name: str
    tool: str
    args: dict[str, Any]
    #: A short call that must work after the fault.
    quick: tuple[str, dict[str, Any]]
    version: str | None = None
    #: Whether the server hands out something that finds the call again (an SSE event
    #: id, a task id): the fault waits until the host has committed it.
    handle: bool = True
    #: fault -> the outcomes the mechanism can honestly give (default: completed).
    outcomes: dict[str, frozenset[str]] = field(default_factory=dict)

    def expected(self, fault: str) -> frozenset[str]:
        if fault == "cancel":
            return frozenset({CANCELLED})
        return self.outcomes.get(fault, frozenset({COMPLETED}))


LOST = frozenset({UNKNOWN})
#: A peer that keeps tasks in memory forgets them when it restarts: unknown, or its error.
FORGOTTEN = frozenset({UNKNOWN, FAILED})
SERVER_GONE = {"server_restart": LOST, "server_kill": LOST}
#: A server that finishes the requests in flight before a graceful stop.
GRACEFUL = frozenset({COMPLETED, UNKNOWN})

CASES = [
    # SSE with an event store, in memory: a break of the network is resumed, a restart
    # forgets the session and the stream with it.
    PeerCase("ts-sdk", "start-notification-stream", {"interval": 300, "count": 10}, ("greet", {"name": "next"}),
             outcomes={**SERVER_GONE}),
    # 2026-07-28: a plain request lives on its stream; nothing survives a break. Stopped
    # gracefully (SIGTERM), uvicorn lets a request in flight finish first: completed is
    # then the truth too.
    PeerCase("py-sdk", "work", {"seconds": 3, "tag": "call"}, ("work", {"seconds": 0.1, "tag": "next"}),
             handle=False,
             outcomes={"server_restart": GRACEFUL, "server_kill": LOST, "network_cut": LOST, "host_stop": LOST}),
    # The same server pinned to 2025-11-25, without an event store: a plain request.
    PeerCase("py-sdk-2025", "work", {"seconds": 3, "tag": "call"}, ("work", {"seconds": 0.1, "tag": "next"}),
             version="2025-11-25", handle=False,
             outcomes={"server_restart": GRACEFUL, "server_kill": LOST, "network_cut": LOST, "host_stop": LOST}),
    # Tasks extension on the memory backend: polled across a break, forgotten by a restart.
    PeerCase("fastmcp", "slow_count", {"seconds": 3, "steps": 6}, ("crunch", {"steps": 1}),
             outcomes={"server_restart": FORGOTTEN, "server_kill": FORGOTTEN}),
    PeerCase("everything", "trigger-long-running-operation", {"duration": 3, "steps": 6},
             ("echo", {"message": "next"}), outcomes={**SERVER_GONE}),
]


def start_peer(case: PeerCase, tmp: Path) -> Served:
    if case.name == "ts-sdk":
        peer = start_ts_example_server()
        proxy = LoopbackProxy(peer.port).start()
        return Served(peer, proxy, lambda: len(proxy.fresh_tool_calls(case.tool)))
    if case.name.startswith("py-sdk"):
        record = tmp / "record.txt"
        peer = start_sdk_work_server(record)
        tag = case.args["tag"]
        return Served(peer, LoopbackProxy(peer.port).start(), lambda: records(record).count(f"start {tag}"))
    if case.name == "fastmcp":
        count_file = tmp / "fastmcp-starts.txt"
        port = free_port()
        peer = Peer([sys.executable, str(FASTMCP_SERVER), str(port), str(count_file)], port)
        # Each start of slow_count's work is one line (the quick call adds its own).
        return Served(peer, LoopbackProxy(port).start(),
                      lambda: count_file.read_text().count("started") if count_file.exists() else 0)
    if case.name == "everything":
        require_everything()
        port = free_port()
        peer = Peer([str(NODE), str(EVERYTHING), "streamableHttp"], port, env={"PORT": str(port)})
        proxy = LoopbackProxy(port).start()
        return Served(peer, proxy, lambda: len(proxy.fresh_tool_calls(case.tool)))
    raise ValueError(case.name)


@pytest.fixture(scope="module")
def keyring_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    with private_keyring(tmp_path_factory.mktemp("matrix-keyring")) as daemon:
        yield daemon


async def until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.05)


def is_under_way(case: PeerCase, served: Served, record: Any) -> bool:
    """The call reached the server and has something to go on with: its work started,
    and the handle the server gave (if it gives one) is in the journal."""
    return served.starts() >= 1 and record is not None and record.jsonrpc_id is not None \
        and (record.handle_ref is not None or not case.handle)


def under_way(case: PeerCase, engine: Engine, served: Served, op_id: str) -> Callable[[], bool]:
    return lambda: is_under_way(case, served, engine.journal.get_operation(op_id))


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_peer_fault(case: PeerCase, fault: str, isolated_home: Path, tmp_path: Path,
                          keyring_daemon: KeyringDaemon) -> None:
    served = start_peer(case, tmp_path)
    url = served.proxy.url()
    engine = await start_engine(isolated_home, Recorder(), url, case.version)
    try:
        op = await engine.start_call("peer", case.tool, case.args)
        await until(under_way(case, engine, served, op.id), "start of the work")
        await asyncio.sleep(0.5)  # well into the work
        if fault == "server_restart":
            await asyncio.to_thread(served.peer.restart)
        elif fault == "server_kill":
            await asyncio.to_thread(served.peer.restart, kill=True, down=2.0)
        elif fault == "network_cut":
            await asyncio.to_thread(served.proxy.outage, 3.0)
        elif fault == "cancel":
            await engine.cancel(op.id)
        elif fault == "probe":
            tools = await engine.probe_tools("peer", timeout=20)
            assert case.tool in [t["name"] for t in tools]
        elif fault == "host_stop":
            await engine.stop()
            engine = Engine(isolated_home, Recorder())
            await engine.start()
        final = await asyncio.wait_for(engine.wait_finished(op.id), 120)
        detail = f"{case.name} × {fault}: {final.status} {final.error}"
        assert final.status in case.expected(fault), detail
        if case.name.startswith("py-sdk") and fault == "cancel":
            # The server's own record: its handler stopped, it did not run to its end.
            await until(lambda: f"stopped {case.args['tag']}" in records(tmp_path / "record.txt"),
                        "stop of the handler", 20)
        quick_tool, quick_args = case.quick  # (it waits for the connection to be back)
        again = await engine.start_call("peer", quick_tool, quick_args)
        after = await asyncio.wait_for(engine.wait_finished(again.id), 60)
        assert after.status == COMPLETED, f"{detail}; the next call: {after.status} {after.error}"
    finally:
        await engine.stop()
        served.proxy.stop()
        served.peer.stop()
    assert served.starts() == 1, f"{case.name} × {fault}: the work started {served.starts()} times"
    print(f"MATRIX {case.name} {fault} {final.status}")


AGENT_FAULTS = ("agent_kill", "agent_stop")


def agent_expected(case: PeerCase, fault: str) -> frozenset[str]:
    """What a stop of the agent leaves: what survives a stop of the host (host_stop)
    survives both; a plain request ends unknown either way (at a clean stop, at once)."""
    return case.expected("host_stop")


def under_way_in_journal(case: PeerCase, home: Path, served: Served, op_id: str) -> bool:
    from hostapp.store.journal import OperationJournal
    from hostapp.store.paths import journal_path

    if served.starts() < 1:
        return False
    with OperationJournal(journal_path(home)) as journal:
        return is_under_way(case, served, journal.get_operation(op_id))


@pytest.mark.parametrize("fault", AGENT_FAULTS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_peer_agent_fault(case: PeerCase, fault: str, tmp_path: Path, keyring_env: dict[str, str]) -> None:
    # The command line and its agent, as a person runs them: the agent SIGKILLed, or
    # stopped cleanly, while the call runs; `hostapp resume --wait` carries it on.
    import json
    import time

    from tests.support.agents import kill_owner
    from tests.support.faults import HostCall, run_hostapp

    home = tmp_path / "home"
    home.mkdir()
    served = start_peer(case, tmp_path)
    try:
        argv = ["servers", "add", "peer", "--url", served.proxy.url()]
        if case.version:
            argv += ["--protocol-version", case.version]
        assert run_hostapp(home, *argv, env=keyring_env).returncode == 0
        call = HostCall(home, "call", "peer", case.tool, "--json", "--args", json.dumps(case.args), env=keyring_env)
        op_id = call.wait_for(lambda events: events[:1])[0]["operation"]
        deadline = time.monotonic() + 60
        while not under_way_in_journal(case, home, served, op_id):
            assert time.monotonic() < deadline, f"the call did not get under way: {call.events}\n{call.stderr}"
            time.sleep(0.05)
        if fault == "agent_kill":
            assert kill_owner(home) is not None
        else:
            stopped = run_hostapp(home, "agent", "stop", "--yes", env=keyring_env)
            assert stopped.returncode == 0, stopped.stderr
        call.wait(60)
        resume = HostCall(home, "resume", "--wait", "--json", env=keyring_env)
        resume.wait(120)
        ops = {o["id"]: o for o in json.loads(run_hostapp(home, "ops", "--json", env=keyring_env).stdout)}
        detail = f"{case.name} × {fault}: {ops[op_id]}\n{call.events}\n{resume.events}"
        assert ops[op_id]["status"] in agent_expected(case, fault), detail
        quick_tool, quick_args = case.quick
        again = run_hostapp(home, "call", "peer", quick_tool, "--json", "--args", json.dumps(quick_args),
                            env=keyring_env)
        assert again.returncode == 0, f"{detail}\nthe next call: {again.stdout}{again.stderr}"
    finally:
        kill_owner(home)
        served.proxy.stop()
        served.peer.stop()
    assert served.starts() == 1, f"{case.name} × {fault}: the work started {served.starts()} times"
    print(f"MATRIX {case.name} {fault} {ops[op_id]['status']}")
