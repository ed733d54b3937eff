"""A start that restores many operations: the event loop keeps turning while it does."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

from hostapp.engine import service
from hostapp.engine.service import RESTORE_BATCH, Engine
from hostapp.store.journal import OperationRecord
from hostapp.store.server_config import ServerConfig
from hostapp.store.status import IN_FLIGHT, OperationStatus
from tests.engine.conftest import Recorder
from tests.support.waiting import until_async


async def _operations_of_a_paused_server(home, count: int) -> None:
    """``count`` operations in flight on a paused server, as a stopped engine left them: a
    start restores them and they wait for Reconnect, nothing is sent."""
    first = Engine(home, Recorder())
    await first.start(resume=False)
    first.journal.add_server(ServerConfig(name="paused", transport="http", url="http://127.0.0.1:9/mcp",
                                          enabled=False))
    for i in range(count):
        first.journal.create_operation_sync(OperationRecord(
            f"op-{i}", "paused", "tools/call", {"name": "slow", "arguments": {}}, tool="slow",
            status=OperationStatus.RUNNING, jsonrpc_id=i + 1, mechanism="direct",
            handle={"mechanism": "direct", "method": "tools/call", "phase": "sent"}))
    await first.stop()


async def test_restoring_many_operations_lets_the_event_loop_turn(isolated_home, real_keyring):
    count = 3 * RESTORE_BATCH + 7
    await _operations_of_a_paused_server(isolated_home, count)

    second = Engine(isolated_home, Recorder())
    seen: list[int] = []  # how many were restored, each time another task got a turn

    async def watch() -> None:
        while True:
            seen.append(len(second.runners))
            await asyncio.sleep(0)

    watcher = asyncio.ensure_future(watch())
    try:
        await second.start()
    finally:
        watcher.cancel()
    try:
        assert len(second.runners) == count
        assert all(not runner.done for runner in second.runners.values())
        # Other tasks ran between batches, not only before the first and after the last.
        partial = sorted({n for n in seen if 0 < n < count})
        assert partial == [RESTORE_BATCH, 2 * RESTORE_BATCH, 3 * RESTORE_BATCH], seen[-20:]
    finally:
        await second.stop()


async def test_a_client_s_journal_read_does_not_wait_for_the_shared_thread_pool(isolated_home, real_keyring):
    """A restart of 10,000 operations fills the event loop's shared thread pool with keyring
    calls; the window's list read waited behind them (3.5 s for a read of 0.3 s). The
    clients' journal reads have a thread of their own: one comes back while every thread of
    the shared pool is held."""
    engine = Engine(isolated_home, Recorder())
    await engine.start(resume=False)
    engine.journal.create_operation_sync(OperationRecord(
        "op-1", "lab", "tools/call", {"name": "slow", "arguments": {}}, tool="slow",
        status=OperationStatus.RUNNING, jsonrpc_id=1, mechanism="direct"))
    loop = asyncio.get_running_loop()
    release = threading.Event()
    held = [loop.run_in_executor(None, release.wait) for _ in range(64)]  # more than the pool's threads
    try:
        views = await asyncio.wait_for(engine.operations(), 60)
        count = await asyncio.wait_for(engine.count_operations(), 60)
    finally:
        release.set()
        await asyncio.gather(*held)
        await engine.stop()
    assert [v.id for v in views] == ["op-1"] and count == 1


async def test_what_is_in_flight_is_listed_from_the_start_s_own_read_while_it_restores(isolated_home, real_keyring):
    """The window asks what is in flight as soon as a restarted agent answers; its own read
    of the same 10,000 rows waited behind the start's on the journal's read thread. While
    the start restores, such a list is answered from the start's read: with the journal's
    read thread held it still comes back, and it is what the journal says (order, statuses,
    top-level only, and not an operation that ended since)."""
    count = 2 * RESTORE_BATCH + 7
    first = Engine(isolated_home, Recorder())
    await first.start(resume=False)
    first.journal.add_server(ServerConfig(name="paused", transport="http", url="http://127.0.0.1:9/mcp",
                                          enabled=False))

    def record(op_id: str, at: float, **kw) -> OperationRecord:
        return OperationRecord(op_id, "paused", "tools/call", {"name": "slow", "arguments": {}}, tool="slow",
                               status=kw.pop("status", OperationStatus.RUNNING), jsonrpc_id=int(at),
                               mechanism="direct", created_at=1000.0 + at,
                               handle={"mechanism": "direct", "method": "tools/call", "phase": "sent"}, **kw)

    # The oldest ends as soon as it is restored: its handle never reached the keyring.
    first.journal.create_operation_sync(dataclasses.replace(
        record("ends", 0), mechanism="tasks_2025", resumable=False,
        handle={"mechanism": "tasks_2025", "method": "tools/call", "phase": "held"}))
    for i in range(1, count):
        first.journal.create_operation_sync(record(
            f"op-{i}", i, status=OperationStatus.INPUT_REQUIRED if i % 50 == 0 else OperationStatus.RUNNING,
            view_of="op-1" if i % 7 == 0 else None))
    first.journal.create_operation_sync(dataclasses.replace(record("done", count), status=OperationStatus.COMPLETED))
    await first.stop()

    second = Engine(isolated_home, Recorder())
    lists: dict[str, list[str]] = {}
    shapes = {"in flight": dict(statuses=set(IN_FLIGHT), limit=10_000, top_level=True),
              "needs input": dict(statuses={OperationStatus.INPUT_REQUIRED}, limit=10_000),
              "first 30": dict(statuses=set(IN_FLIGHT), limit=30)}

    async def asked_while_restoring(_within: float, *, everything: bool = False) -> None:
        if lists or len(second.runners) >= count:
            return
        await until_async(lambda: "ends" not in second.runners, what="the operation that ends at once")
        await second.journal.flush()
        release = threading.Event()
        held = asyncio.get_running_loop().run_in_executor(second._reads, release.wait)
        try:
            for name, shape in shapes.items():
                lists[name] = [v.id for v in await asyncio.wait_for(second.operations(**shape), 30)]
        finally:
            release.set()
            await held
        assert 0 < len(second.runners) < count  # still restoring

    second.clients_caught_up = asked_while_restoring
    await second.start()
    try:
        assert set(lists) == set(shapes)
        for name, shape in shapes.items():
            assert lists[name] == [r.id for r in second.journal.list_operations(**shape)], name
        assert "ends" not in lists["in flight"] and "done" not in lists["in flight"]
        assert len(lists["in flight"]) == count - 1 - (count - 1) // 7
        assert len(lists["needs input"]) == (count - 1) // 50
        # Restored: a list reads the journal again.
        assert [v.id for v in await second.operations(**shapes["first 30"])] == lists["first 30"]
    finally:
        await second.stop()


async def test_the_restoring_gives_its_clients_time_between_batches_within_a_bound(
        isolated_home, real_keyring, monkeypatch):
    """Between batches the restoring waits for its clients to be sent what waits for them
    (the agent's endpoint says when): at most so long at once, and so long in all, so that a
    client that does not read delays the start by no more."""
    monkeypatch.setattr(service, "RESTORE_CLIENT_WAIT", 0.4)
    monkeypatch.setattr(service, "RESTORE_CLIENT_WAIT_AT_ONCE", 0.25)
    count = 4 * RESTORE_BATCH
    await _operations_of_a_paused_server(isolated_home, count)

    second = Engine(isolated_home, Recorder())
    given: list[tuple[float, int]] = []

    async def a_client_that_never_reads(within: float, *, everything: bool = False) -> None:
        given.append((within, len(second.runners)))
        await asyncio.sleep(within)

    second.clients_caught_up = a_client_that_never_reads
    await second.start()
    try:
        assert [n for _, n in given][:2] == [RESTORE_BATCH, 2 * RESTORE_BATCH]  # after a batch each
        assert given[0][0] == 0.25 and all(within <= 0.25 for within, _ in given)
        assert sum(within for within, _ in given) <= 0.4 + 0.01  # then no more
        assert len(second.runners) == count
    finally:
        await second.stop()


async def test_a_list_that_waited_for_the_start_s_read_is_answered_before_the_handles_are_read(
        isolated_home, real_keyring):
    """The window asks what is in flight before the start's read is in; once it is, the
    answer goes first: reading the keyring's handles (a thread that holds the interpreter
    for a while at 10,000) and connecting the servers come after."""
    await _operations_of_a_paused_server(isolated_home, 50)
    second = Engine(isolated_home, Recorder())
    reading = second._handles.load_handles
    answered_first: list[bool] = []
    listing: list[asyncio.Task] = []

    async def load_handles(records):
        answered_first.append(bool(listing) and listing[0].done())
        return await reading(records)

    second._handles.load_handles = load_handles  # type: ignore[method-assign]
    waits: list[tuple[bool, bool]] = []  # (everything, the handles read by then)

    async def clients_caught_up(within: float, *, everything: bool = False) -> None:
        waits.append((everything, bool(answered_first)))

    second.clients_caught_up = clients_caught_up
    started = asyncio.ensure_future(second.start())
    while second._at_start is None:
        await asyncio.sleep(0)
    listing.append(asyncio.ensure_future(second.operations(set(IN_FLIGHT), limit=10_000)))
    await started
    try:
        assert answered_first == [True]
        assert len(listing[0].result()) == 50
        # ... and sent to the clients, all of it, before the handles are read.
        assert waits[:1] == [(True, False)]
    finally:
        await second.stop()
