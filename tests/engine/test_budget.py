"""The per-server poll budget: a rate, a cap on polls in flight, first come first served;
and the engine polls a server within it however many operations poll."""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hostapp.engine import api, budget
from hostapp.engine.budget import PollBudget
from hostapp.engine.session import ClientHandlers
from hostapp.engine.supervisor import ServerConnection
from hostapp.store.journal import ServerConfig
from tests.engine.test_engine import run_engine
from tests.engine.test_network_break import handle_committed
from tests.support.faults import LoopbackProxy
from tests.support.peers import Peer, free_port
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)


class FakeTime:
    """A clock that moves only when the budget sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


async def test_polls_start_at_the_budgets_rate_after_a_burst():
    t = FakeTime()
    gate = PollBudget(rate=10, in_flight=100, burst=5, clock=t.clock, sleep=t.sleep)
    starts: list[float] = []

    async def poll() -> None:
        async with gate.poll():
            starts.append(t.now)

    await asyncio.gather(*(poll() for _ in range(25)))
    assert starts[:5] == [100.0] * 5  # the burst
    # Then one every tenth of a second: 20 more take two seconds.
    assert starts[-1] == pytest.approx(102.0)
    gaps = [b - a for a, b in itertools.pairwise(starts[5:])]
    assert all(g == pytest.approx(0.1) for g in gaps)


async def test_polls_in_flight_are_capped_and_served_in_order():
    gate = PollBudget(rate=1e9, in_flight=3)
    running, most, order = 0, 0, []
    release = asyncio.Event()

    async def poll(i: int) -> None:
        nonlocal running, most
        async with gate.poll():
            order.append(i)
            running += 1
            most = max(most, running)
            await release.wait()
            running -= 1

    tasks = [asyncio.create_task(poll(i)) for i in range(10)]
    await until_async(lambda: gate.waiting == 7, what="seven polls waiting")
    assert order == [0, 1, 2]
    tasks[5].cancel()  # a waiter that goes away takes nothing
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert most == 3
    assert order == [0, 1, 2, 3, 4, 6, 7, 8, 9]
    assert gate.waiting == 0


def test_a_budget_needs_a_rate_and_a_slot():
    with pytest.raises(ValueError):
        PollBudget(rate=0)
    with pytest.raises(ValueError):
        PollBudget(in_flight=0)


async def test_the_engine_polls_a_server_within_its_budget(isolated_home, lab, recorder, real_keyring, monkeypatch):
    monkeypatch.setattr(budget, "POLLS_PER_SECOND", 20.0)
    proxy = LoopbackProxy(lab.port).start()
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url(),
                                             protocol_version="2025-11-25"))
        await engine.connected("lab")
        # 60 tasks, each polled every second at the lab's request: 60 polls a second asked for.
        ops = await asyncio.gather(*(engine.start_call("lab", "long_task", {"seconds": 30, "steps": 30})
                                     for _ in range(60)))
        for op in ops:  # every task made (its id committed)
            await handle_committed(engine, op.id)
        await asyncio.sleep(2)  # the polls settle to the budget's rate (the burst spent)
        loop = asyncio.get_running_loop()
        before, began = proxy.rpc_methods().count("tasks/get"), loop.time()
        await asyncio.sleep(3)
        polls, took = proxy.rpc_methods().count("tasks/get") - before, loop.time() - began
        # Within the budget, not the 60 a second asked for. The bound is counted on the
        # time that really passed (a busy machine wakes the test late), plus the polls that
        # were on their way when counting began and the bucket's burst, which fills again
        # whenever the host's loop falls behind the rate.
        allowed = 20 * took + budget.POLLS_IN_FLIGHT + 20
        assert 20 <= polls <= allowed < 60 * took, (polls, took)
        assert all(engine.runners[op.id].view.status == api.RUNNING for op in ops)
    finally:
        await engine.stop()
        proxy.stop()



async def test_an_optional_method_the_server_lacks_is_not_asked_again(isolated_home, lab, recorder, real_keyring):
    # The lab has no subscriptions/listen (pushed task notifications): after its first
    # "method not found", later extension tasks only poll.
    proxy = LoopbackProxy(lab.port).start()
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url()))
        await engine.connected("lab")
        first = await engine.start_call("lab", "long_task_ext", {"seconds": 1, "steps": 2})
        assert (await asyncio.wait_for(engine.wait_finished(first.id), 60)).status == api.COMPLETED
        assert proxy.rpc_methods().count("subscriptions/listen") == 1
        more = [await engine.start_call("lab", "long_task_ext", {"seconds": 1, "steps": 2}) for _ in range(3)]
        for op in more:
            assert (await asyncio.wait_for(engine.wait_finished(op.id), 60)).status == api.COMPLETED
        assert proxy.rpc_methods().count("subscriptions/listen") == 1
        assert proxy.rpc_methods().count("tasks/get") >= 4
    finally:
        await engine.stop()
        proxy.stop()


async def test_operations_resumed_together_ask_once_for_a_method_the_server_lacks(isolated_home, lab, recorder,
                                                                                    real_keyring):
    # After a restart every extension task asks for its status and its pushed
    # notifications at once; the new session does not know yet that the lab has no
    # subscriptions/listen. One asks; the others wait for that answer and then only poll.
    proxy = LoopbackProxy(lab.port).start()
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(ServerConfig(name="lab", transport="http", url=proxy.url()))
        await engine.connected("lab")
        ops = await asyncio.gather(*(engine.start_call("lab", "long_task_ext", {"seconds": 60, "steps": 6})
                                     for _ in range(12)))
        for op in ops:
            await handle_committed(engine, op.id)
        await engine.stop()
        listens_before = proxy.rpc_methods().count("subscriptions/listen")
        polls_before = proxy.rpc_methods().count("tasks/get")
        engine = await run_engine(isolated_home, recorder)
        await until_async(lambda: proxy.rpc_methods().count("tasks/get") - polls_before >= len(ops),
                          what="a poll of every restored task")
        await asyncio.sleep(0.5)  # no second listen comes meanwhile
        assert proxy.rpc_methods().count("subscriptions/listen") - listens_before == 1
        assert all(engine.runners[op.id].view.status == api.RUNNING for op in ops)
    finally:
        await engine.stop()
        proxy.stop()


async def test_tasks_created_together_on_fastmcp_ask_once_for_its_missing_listen(isolated_home, recorder, real_keyring):
    # fastmcp's tasks extension has no subscriptions/listen either (HTTP 404 with -32601):
    # four tasks created together send one, and all complete by polling.
    port = free_port()
    server = Path(__file__).parents[1] / "faults" / "fastmcp_tasks_server.py"
    peer = Peer([sys.executable, str(server), str(port), str(isolated_home / "executions.txt")], port)
    proxy = LoopbackProxy(port).start()
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(ServerConfig(name="fastmcp", transport="http", url=proxy.url()))
        await engine.connected("fastmcp")
        ops = await asyncio.gather(*(engine.start_call("fastmcp", "slow_count", {"seconds": 2, "steps": 2})
                                     for _ in range(4)))
        for op in ops:
            assert (await asyncio.wait_for(engine.wait_finished(op.id), 60)).status == api.COMPLETED
        assert proxy.rpc_methods().count("subscriptions/listen") == 1
        assert "subscriptions/listen" in engine.connections["fastmcp"].unsupported_methods
    finally:
        await engine.stop()
        proxy.stop()
        peer.stop()


class _Transport:
    def __init__(self, acknowledges: bool) -> None:
        self.acknowledges_requests = acknowledges


def _connection(acknowledges: bool = True) -> ServerConnection:
    cfg = ServerConfig(name="s", transport="http", url="http://127.0.0.1:9/mcp")
    conn = ServerConnection(cfg, secret_store=None, handlers_factory=lambda c, scope=None: ClientHandlers(),
                            capabilities={}, on_change=lambda view: None, on_ready=None)  # type: ignore[arg-type]
    conn.session = SimpleNamespace(transport=_Transport(acknowledges))  # type: ignore[assignment]
    return conn


async def test_an_optional_method_is_probed_by_one_request_while_the_others_wait():
    conn = _connection()
    assert await conn.optional_turn("subscriptions/listen") == "probe"
    waiters = [asyncio.create_task(conn.optional_turn("subscriptions/listen")) for _ in range(3)]
    await asyncio.sleep(0.05)
    assert not any(w.done() for w in waiters)
    conn.optional_verdict("subscriptions/listen", None)  # the probe failed: one of them asks
    await asyncio.sleep(0)
    turns = [w.result() for w in waiters if w.done()]
    assert turns == ["probe"]
    conn.optional_verdict("subscriptions/listen", True)  # the server took it: all go
    assert sorted(await asyncio.gather(*waiters)) == ["go", "go", "probe"]
    assert await conn.optional_turn("subscriptions/listen") == "go"
    conn.optional_verdict("subscriptions/listen", False)  # a later "method not found" wins
    assert await conn.optional_turn("subscriptions/listen") is None


async def test_without_acknowledgements_waiters_go_after_a_while(monkeypatch):
    from hostapp.engine import supervisor  # the module, for its constant

    monkeypatch.setattr(supervisor, "OPTIONAL_PROBE_SECONDS", 0.1)
    conn = _connection(acknowledges=False)  # stdio: a written request says nothing
    assert await conn.optional_turn("subscriptions/listen") == "probe"
    assert await asyncio.wait_for(conn.optional_turn("subscriptions/listen"), 5) == "go"


async def test_the_sessions_of_one_server_share_what_is_learned_about_its_streams():
    # After a restart, each earlier session is adopted with a transport of its own; a
    # server seen sending live events on one resumed stream is known so for all of them.
    conn = _connection()
    first = await conn.side_session("earlier-1", "2025-11-25")
    second = await conn.side_session("earlier-2", "2025-11-25")
    try:
        assert first.transport is not second.transport
        first.transport.habits.live_after_resume = True
        assert second.transport.habits.live_after_resume
    finally:
        await first.close(end_session=False)
        await second.close(end_session=False)
