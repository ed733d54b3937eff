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
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import Recorder
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
             outcomes={"server_restart": GRACEFUL, "server_kill": LOST, "network_cut": LOST, "host_stop": LOST}),
    # The same server pinned to 2025-11-25, without an event store: a plain request.
    PeerCase("py-sdk-2025", "work", {"seconds": 3, "tag": "call"}, ("work", {"seconds": 0.1, "tag": "next"}),
             version="2025-11-25",
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


async def start_engine(home: Path, url: str, version: str | None) -> Engine:
    recorder = Recorder()
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="peer", transport="http", url=url, protocol_version=version))
    await engine.connected("peer")
    return engine


async def until(predicate: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, f"no {what} within {timeout} s"
        await asyncio.sleep(0.05)


def under_way(engine: Engine, served: Served, op_id: str) -> Callable[[], bool]:
    """The call reached the server and has something to go on with: its work started,
    and its handle (if its mechanism has one) is in the journal."""
    def ready() -> bool:
        record = engine.journal.get_operation(op_id)
        return served.starts() >= 1 and record is not None and record.jsonrpc_id is not None \
            and (record.mechanism in (None, "direct") or record.handle_ref is not None)
    return ready


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_peer_fault(case: PeerCase, fault: str, isolated_home: Path, tmp_path: Path,
                          keyring_daemon: KeyringDaemon) -> None:
    served = start_peer(case, tmp_path)
    url = served.proxy.url()
    engine = await start_engine(isolated_home, url, case.version)
    try:
        op = await engine.start_call("peer", case.tool, case.args)
        await until(under_way(engine, served, op.id), "start of the work")
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
