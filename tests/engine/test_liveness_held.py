"""The stall watch while the host itself holds operations (hostapp.engine.liveness): their
silence is not counted, and a server's held operations wait under one timer, not one each.

What the watch is given is made here (a runner, its mechanism's hint, the server's
connection and poll budget) so that the host's hold can be set and lifted at will; the
checks and stalls of a real server's operations: tests/engine/test_liveness.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from hostapp.engine import api
from hostapp.engine.liveness import LivenessWatches
from hostapp.protocol.timing import Timing
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(60)

ALLOWANCE = 0.1  # the mechanism's hint: so long without a sign of life, then a check


class _Mechanism:
    def __init__(self) -> None:
        self.looked_at = 0  # how often the watch asked for its hint: once per look

    def life_expected_within(self) -> float:
        self.looked_at += 1
        return ALLOWANCE

    def check_alive(self, now: float) -> list[Any]:
        return []


class _Progress:
    def __init__(self, runner: _Runner) -> None:
        self._runner = runner

    def change(self, **fields: Any) -> api.OperationView:
        self._runner.view = replace(self._runner.view, **fields)
        return self._runner.view


class _Runner:
    def __init__(self, op_id: str, server: str = "s") -> None:
        self.id, self.server = op_id, server
        self.mech = _Mechanism()
        self.view = api.OperationView(id=op_id, server=server, tool="t", method="tools/call", arguments={},
                                      status=api.RUNNING)
        self.progress = _Progress(self)
        self.ending = False
        self.awaiting_first_contact = False
        self.checks = 0

    def feed_soon(self, produce: Any) -> None:
        self.checks += 1
        produce()


@dataclass
class _Connection:
    is_ready: bool = True


@dataclass
class _Budget:
    waiting: int = 0


class _Written(asyncio.Future):  # what journal.update_operation returns
    def __init__(self) -> None:
        super().__init__()
        self.set_result(None)


@dataclass
class _Context:
    connections: dict[str, _Connection] = field(default_factory=dict)
    budgets: dict[str, _Budget] = field(default_factory=dict)
    held_for_first_contacts: set[str] = field(default_factory=set)  # servers whose repeat polls wait
    events: list[tuple[str, str]] = field(default_factory=list)
    clock: Any = time.monotonic
    timing: Timing = field(default_factory=Timing)
    stopping: bool = False

    @property
    def questions(self) -> _Context:
        return self

    def asks(self, op_id: str) -> bool:
        return False

    @property
    def listener(self) -> _Context:
        return self

    def operation_changed(self, op: api.OperationView) -> None:
        pass

    @property
    def journal(self) -> _Context:
        return self

    def update_operation(self, op_id: str, **changes: Any) -> asyncio.Future:
        return _Written()

    def append_event(self, op_id: str, kind: str, data: Any) -> None:
        pass

    def connection(self, server: str) -> _Connection:
        return self.connections.setdefault(server, _Connection())

    def poll_budget(self, server: str) -> _Budget:
        return self.budgets.setdefault(server, _Budget())

    def holding_repeat_requests(self, server: str) -> bool:
        return server in self.held_for_first_contacts

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.append((op_id, kind))


def watched(context: _Context, count: int, server: str = "s") -> tuple[LivenessWatches, list[_Runner]]:
    watches = LivenessWatches(context)  # type: ignore[arg-type]
    runners = [_Runner(f"{server}-{i}", server) for i in range(count)]
    for runner in runners:
        watches.sent(runner)  # type: ignore[arg-type]
    return watches, runners


def stalled(runners: list[_Runner]) -> bool:
    return all(r.view.stalled is not None for r in runners)


@pytest.mark.parametrize("hold", ["poll_budget", "first_contacts", "offline"])
async def test_operations_the_host_holds_are_not_counted_silent_and_share_one_timer(hold: str) -> None:
    context = _Context()
    if hold == "poll_budget":
        context.poll_budget("s").waiting = 1  # their polls wait their turn
    elif hold == "first_contacts":
        # After a start, every repeat poll of the server waits until the operations restored
        # with them were heard from (hostapp.engine.first_contact).
        context.held_for_first_contacts.add("s")
    else:
        context.connection("s").is_ready = False  # the supervisor reconnects
    watches, runners = watched(context, 500)
    await asyncio.sleep(20 * ALLOWANCE)
    # Twenty allowances of silence, none counted: nothing checked, nothing stalled...
    assert sum(r.checks for r in runners) == 0 and not any(r.view.stalled for r in runners)
    # ... and each operation looked at once, when its first allowance ran out, not at each
    # (500 timers re-armed every allowance: 10,000 looks here).
    assert max(r.mech.looked_at for r in runners) <= 3, [r.mech.looked_at for r in runners[:5]]
    released = time.monotonic()
    context.poll_budget("s").waiting = 0
    context.held_for_first_contacts.clear()
    context.connection("s").is_ready = True
    # Let go, each is counted silent from then: checked, then stalled, as any other.
    await until_async(lambda: stalled(runners), what="every operation marked stalled")
    assert all(r.checks == 1 for r in runners)
    assert all(r.view.stalled is not None and "no sign of life" in r.view.stalled for r in runners)
    assert time.monotonic() - released >= 2 * ALLOWANCE  # a check's allowance, then the stall's
    watches.close()


async def test_a_sign_of_life_while_held_does_not_give_the_operation_a_timer_of_its_own() -> None:
    context = _Context()
    context.poll_budget("s").waiting = 3
    watches, runners = watched(context, 50)
    await asyncio.sleep(3 * ALLOWANCE)
    looked = sum(r.mech.looked_at for r in runners)
    for _ in range(5):  # progress from a stream, say, while the budget still holds the polls
        for runner in runners:
            watches.alive(runner)  # type: ignore[arg-type]
        await asyncio.sleep(ALLOWANCE)
    assert sum(r.mech.looked_at for r in runners) == looked
    context.poll_budget("s").waiting = 0
    await until_async(lambda: stalled(runners), what="every operation marked stalled")
    watches.close()


async def test_an_operation_awaiting_its_first_contact_stays_held_while_its_neighbours_are_let_go() -> None:
    context = _Context()
    context.connection("s").is_ready = False
    watches, runners = watched(context, 20)
    waiting, free = runners[:10], runners[10:]
    for runner in waiting:
        runner.awaiting_first_contact = True
    await asyncio.sleep(3 * ALLOWANCE)
    context.connection("s").is_ready = True
    await until_async(lambda: stalled(free), what="the operations let go marked stalled")
    assert not any(r.view.stalled for r in waiting) and sum(r.checks for r in waiting) == 0
    for runner in waiting:
        runner.awaiting_first_contact = False
    await until_async(lambda: stalled(waiting), what="the others, once contacted, marked stalled")
    watches.close()


async def test_a_forgotten_operation_leaves_its_servers_timer_and_the_last_one_ends_it() -> None:
    context = _Context()
    context.poll_budget("s").waiting = 1
    context.poll_budget("t").waiting = 1
    watches, on_s = watched(context, 3, "s")
    on_t = [_Runner("t-0", "t")]
    watches.sent(on_t[0])  # type: ignore[arg-type]
    await asyncio.sleep(3 * ALLOWANCE)
    for runner in on_s:
        watches.forget(runner)  # type: ignore[arg-type]
    context.poll_budget("s").waiting = 0
    context.poll_budget("t").waiting = 0
    await until_async(lambda: stalled(on_t), what="the other server's operation marked stalled")
    await asyncio.sleep(3 * ALLOWANCE)
    assert not any(r.view.stalled or r.checks for r in on_s)  # forgotten: never looked at again
    watches.close()
