"""After a restart, the first word from the server for every restored operation comes
before the repeat polls of any: the ordering the engine keeps per server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from hostapp.engine import first_contact
from hostapp.engine.first_contact import FirstContactGate
from tests.support.waiting import until_async


def restored(gate: FirstContactGate, server: str, *ids: str) -> list[SimpleNamespace]:
    runners = [SimpleNamespace(id=i, server=server, awaiting_first_contact=False) for i in ids]
    for runner in runners:
        gate.expect(runner)
    return runners


async def test_repeat_requests_wait_until_every_restored_operation_was_heard_from():
    gate = FirstContactGate()
    a, b = restored(gate, "lab", "a", "b")
    assert a.awaiting_first_contact and b.awaiting_first_contact
    waiting = asyncio.create_task(gate.after_first_contacts("lab"))
    other_server = asyncio.create_task(gate.after_first_contacts("elsewhere"))
    await until_async(other_server.done, what="the wait for a server with nothing restored to end")
    await asyncio.sleep(0.05)  # and the one for 'lab' goes on waiting
    assert not waiting.done()
    gate.heard_from(a)
    gate.heard_from(a)  # twice changes nothing
    await asyncio.sleep(0.05)
    assert not waiting.done()
    gate.heard_from(b)
    await asyncio.wait_for(waiting, 1)
    assert not a.awaiting_first_contact and not b.awaiting_first_contact
    await gate.after_first_contacts("lab")  # nothing left to wait for


async def test_a_silent_operation_holds_the_others_only_for_a_while(monkeypatch):
    monkeypatch.setattr(first_contact, "FIRST_CONTACT_PRIORITY_SECONDS", 0.1)
    gate = FirstContactGate()
    restored(gate, "lab", "silent")
    await asyncio.wait_for(gate.after_first_contacts("lab"), 1)
    await asyncio.wait_for(gate.after_first_contacts("lab"), 0.05)  # given up: no more waiting


def test_each_server_has_one_poll_budget():
    gate = FirstContactGate()
    assert gate.poll_budget("lab") is gate.poll_budget("lab")
    assert gate.poll_budget("lab") is not gate.poll_budget("elsewhere")
