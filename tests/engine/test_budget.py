"""The per-server poll budget: a rate, a cap on polls in flight, first come first served;
and the engine polls a server within it however many operations poll."""

from __future__ import annotations

import asyncio

import pytest

from hostapp.engine import api, budget
from hostapp.engine.budget import PollBudget
from hostapp.store.journal import ServerConfig
from tests.engine.test_engine import run_engine
from tests.support.faults import LoopbackProxy

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
    gaps = [b - a for a, b in zip(starts[5:], starts[6:])]
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
    await asyncio.sleep(0.05)
    assert order == [0, 1, 2] and gate.waiting == 7
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
        await asyncio.sleep(2)
        before = proxy.rpc_methods().count("tasks/get")
        await asyncio.sleep(3)
        polls = proxy.rpc_methods().count("tasks/get") - before
        # Within the budget (20 a second, plus what was in flight), not the 180 asked for.
        assert 20 <= polls <= 3 * 20 + budget.POLLS_IN_FLIGHT, polls
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
