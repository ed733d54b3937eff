"""The cancel exchange of one operation (hostapp.engine.cancel_exchange), with real
mechanisms: a cancel request is waited for and its refusal shown and raised; a cancel that
only notifies, or that ends the operation at once, is not waited for. The whole path
against real servers is in tests/engine/test_memory_server.py and test_engine.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from hostapp.engine.cancel_exchange import CancelExchange
from hostapp.mechanisms import actions as A
from hostapp.mechanisms.base import Mechanism
from hostapp.mechanisms.direct import DirectRequest
from hostapp.mechanisms.tasks_2025 import Tasks2025
from hostapp.protocol.jsonrpc import RpcError

pytestmark = pytest.mark.timeout(30)

T0 = 1_800_000_000.0
CALL = {"name": "slow", "arguments": {}}


class _Operation:
    """What the exchange uses of an operation: its mechanism fed, what it shows."""

    id = "op-1"

    def __init__(self, mech: Mechanism):
        self.mech = mech
        self.actions: list[A.Action] = []
        self.shown: list[tuple[str, dict[str, Any]]] = []

    @property
    def done(self) -> bool:
        return any(isinstance(a, (A.Cancelled, A.Deliver, A.Unknown)) for a in self.actions)

    async def feed(self, produce: Callable[[], list[A.Action]]) -> None:
        self.actions.extend(produce())

    async def show_cancel_refused(self, message: str, data: dict[str, Any]) -> None:
        self.shown.append((message, data))


def _task() -> Tasks2025:
    mech = Tasks2025()
    mech.prepare(dict(CALL), now=T0)
    mech.on_result({"task": {"taskId": "T-1", "status": "working", "createdAt": "2026-11-22T03:00:00Z",
                             "lastUpdatedAt": "2026-11-22T03:00:00Z", "pollInterval": 500}}, now=T0 + 1)
    return mech


async def _cancel_started(exchange: CancelExchange, op: _Operation) -> asyncio.Task[None]:
    cancel = asyncio.get_running_loop().create_task(exchange.cancel(lambda: op.mech.cancel(now=T0 + 2)))
    while not op.actions:
        await asyncio.sleep(0)
    return cancel


async def test_a_cancel_request_is_waited_for_until_the_server_answers():
    op = _Operation(_task())
    exchange = CancelExchange(op)
    cancel = await _cancel_started(exchange, op)
    assert A.SendRequest("tasks/cancel", {"taskId": "T-1"}) in op.actions
    assert exchange.is_cancel_request("tasks/cancel") and not exchange.is_cancel_request("tasks/get")
    await asyncio.sleep(0.05)
    assert not cancel.done()  # the server has not answered
    exchange.answered(None)
    await asyncio.wait_for(cancel, 5)
    assert op.shown == []


async def test_a_refused_cancel_is_shown_and_raised_to_whoever_asked():
    op = _Operation(_task())
    exchange = CancelExchange(op)
    cancel = await _cancel_started(exchange, op)
    await exchange.refused(RpcError(-32602, "task is terminal"))
    with pytest.raises(RpcError, match="task is terminal"):
        await asyncio.wait_for(cancel, 5)
    assert op.shown == [("the server did not cancel it: task is terminal",
                         {"code": -32602, "message": "task is terminal"})]
    exchange.answered(None)  # a late answer finds nobody waiting, and is harmless


async def test_a_cancel_that_only_notifies_is_not_waited_for():
    mech = DirectRequest()
    mech.prepare(dict(CALL), now=T0)
    op = _Operation(mech)
    exchange = CancelExchange(op)
    await asyncio.wait_for(exchange.cancel(lambda: op.mech.cancel(now=T0 + 2)), 5)
    assert not any(isinstance(a, A.SendRequest) for a in op.actions)
    assert not exchange.is_cancel_request("tools/call")
