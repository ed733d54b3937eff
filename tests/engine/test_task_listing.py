"""After a restart, the restored 2025-11-25 tasks of a server that lists its tasks are first
heard from by one ``tasks/list``, not a ``tasks/get`` each (hostapp.engine.task_listing);
a task the listing does not name asks by itself, as before.

The server is the lab (a real process, behind a loopback proxy that keeps the methods it
was asked): it declares ``tasks.list`` and lists the tasks its process made, across
sessions; restarted, it still knows every task by its id but lists none of them.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import Recorder
from tests.engine.test_keyring_recovery import handle_committed
from tests.support.faults import LoopbackProxy
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)

COUNT = 12


async def _tasks_left_running(home, proxy: LoopbackProxy) -> list[str]:
    """COUNT long tasks on the lab, their ids committed, and the host quit with them running
    (each call of this, a host process and a session of its own)."""
    recorder = Recorder()
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        if engine.journal.get_server("lab") is None:
            await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url(),
                                                 protocol_version="2025-11-25"))
        await engine.connected("lab")
        ops = await asyncio.gather(*(engine.start_call("lab", "long_task", {"seconds": 120, "steps": 120})
                                     for _ in range(COUNT)))
        for op in ops:
            await handle_committed(engine, op.id)
        assert {engine.runners[op.id].mech.name for op in ops} == {"tasks_2025"}
        return [op.id for op in ops]
    finally:
        await engine.stop()  # a quit: the tasks go on at the lab


async def _restarted(home) -> tuple[Engine, Recorder]:
    recorder = Recorder()
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    return engine, recorder


async def _all_heard_from(engine: Engine, ids: list[str]) -> None:
    await until_async(lambda: all(i in engine.runners and not engine.runners[i].awaiting_first_contact for i in ids),
                      what="every restored task heard from")


@contextlib.asynccontextmanager
async def _restarted_with_tasks(home, lab, *, lab_restarted: bool = False):
    """COUNT long tasks left running by a quit, the host started again (the lab restarted
    before, if asked) and every restored task heard from: the new engine, the tasks' ids,
    and what the lab was asked since the restart (a function, read when called)."""
    proxy = LoopbackProxy(lab.port).start()
    try:
        ids = await _tasks_left_running(home, proxy)
        if lab_restarted:
            lab.restart()  # it knows each task by its id, but lists none it did not make itself
        asked_before = len(proxy.rpc_methods())
        engine, _recorder = await _restarted(home)
        try:
            await _all_heard_from(engine, ids)
            yield engine, ids, lambda: proxy.rpc_methods()[asked_before:]
        finally:
            await engine.stop()
    finally:
        proxy.stop()


async def test_the_restored_tasks_are_first_heard_from_by_one_listing(isolated_home, lab, real_keyring):
    async with _restarted_with_tasks(isolated_home, lab) as (engine, ids, asked_since):
        asked = asked_since()
        assert asked.count("tasks/list") == 1, asked
        # Not one tasks/get before it (the repeat polls come after every first contact).
        assert "tasks/get" not in asked[:asked.index("tasks/list")], asked
        for op_id in ids:  # each took the listing's word: working, its message shown
            view = engine.runners[op_id].view
            assert view.status == api.RUNNING and view.message, view
        # Then each is polled by itself, as ever.
        await until_async(lambda: asked_since().count("tasks/get") >= COUNT, what="the repeat polls")
        assert asked_since().count("tasks/list") == 1
        assert all(not engine.runners[i].done for i in ids)


async def test_a_task_the_listing_does_not_name_is_asked_for_by_itself(isolated_home, lab, real_keyring):
    async with _restarted_with_tasks(isolated_home, lab, lab_restarted=True) as (engine, ids, asked_since):
        asked = asked_since()
        assert asked.count("tasks/list") == 1, asked
        assert asked.count("tasks/get") >= COUNT, asked
        assert all(engine.runners[i].view.status == api.RUNNING for i in ids)


async def test_one_listing_answers_for_every_session_of_a_server_that_lists_all_its_tasks(isolated_home, lab,
                                                                                         real_keyring):
    """The lab lists every task its process made, whichever session asks: the tasks left
    running by two host processes, in two sessions, are all first heard from by one
    listing (one a session before)."""
    proxy = LoopbackProxy(lab.port).start()
    try:
        ids = [*await _tasks_left_running(isolated_home, proxy), *await _tasks_left_running(isolated_home, proxy)]
        asked_before = len(proxy.rpc_methods())
        engine, _recorder = await _restarted(isolated_home)
        try:
            await _all_heard_from(engine, ids)
            # Each task lives in the session of the process that made it, adopted again now.
            assert len({engine.runners[i].http_session for i in ids}) == 2
            asked = proxy.rpc_methods()[asked_before:]
            assert asked.count("tasks/list") == 1, asked
            assert all(engine.runners[i].view.status == api.RUNNING for i in ids)
        finally:
            await engine.stop()
    finally:
        proxy.stop()


class _Session:
    """What a listing needs of a session: the server's word on itself, and requests (each
    tasks/list answered with the tasks it was given, counted)."""

    def __init__(self, tasks: list[str], *, refuse: bool = False) -> None:
        from hostapp.protocol.eras import HANDSHAKE, ServerInfo

        self.server = ServerInfo("2025-11-25", HANDSHAKE, capabilities={"tasks": {"list": {}}})
        self.tasks, self.refuse, self.asked = tasks, refuse, 0

    async def request(self, method: str, params: dict) -> dict:
        from hostapp.protocol.jsonrpc import METHOD_NOT_FOUND, RpcError

        assert method == "tasks/list"
        self.asked += 1
        await asyncio.sleep(0.01)
        if self.refuse:
            raise RpcError(METHOD_NOT_FOUND, "no tasks/list here")
        return {"tasks": [{"taskId": t, "status": "working"} for t in self.tasks]}


async def test_each_session_is_listed_once_however_its_operations_interleave_and_a_refusal_is_final():
    from hostapp.engine import task_listing
    from hostapp.engine.task_listing import TaskListings

    now = [0.0]
    listings = TaskListings(clock=lambda: now[0])
    first, second = _Session(["a1", "a2"]), _Session(["b1", "b2"])
    asked = [(first, "a1"), (second, "b1"), (first, "a2"), (second, "b2"), (second, "gone")]
    found = await asyncio.gather(*(listings.task("lab", None, s, t) for s, t in asked))
    assert [f["taskId"] if f else None for f in found] == ["a1", "b1", "a2", "b2", None]
    assert (first.asked, second.asked) == (1, 1)
    now[0] += task_listing.FRESH_SECONDS + 1  # stale: read again, the old listings let go
    assert (await listings.task("lab", None, first, "a1"))["taskId"] == "a1"
    assert first.asked == 2 and len(listings._listings) == 1
    # A server that lists all its tasks in any session: one listing answers both.
    everything = ["d1", "e1"]
    third, fourth = _Session(everything), _Session(everything)
    found = await asyncio.gather(*(listings.task("all", None, s, t) for s, t in [(third, "d1"), (fourth, "e1")]))
    assert [f["taskId"] for f in found] == ["d1", "e1"] and (third.asked, fourth.asked) == (1, 0)
    refusing = _Session(["c1"], refuse=True)
    assert await listings.task("other", None, refusing, "c1") is None
    assert await listings.task("other", None, _Session(["c1"]), "c1") is None  # not asked again
    assert refusing.asked == 1
