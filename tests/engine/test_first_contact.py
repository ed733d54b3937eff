"""After a restart, the first word from the server for every restored operation comes
before the repeat polls of any: the ordering the engine keeps per server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from hostapp.engine import service
from hostapp.engine.service import Engine


def restored(engine: Engine, server: str, *ids: str) -> list[SimpleNamespace]:
    runners = [SimpleNamespace(id=i, record=SimpleNamespace(server=server), awaiting_first_contact=True)
               for i in ids]
    engine._awaiting_contact[server] = set(ids)
    engine._contacts_done[server] = asyncio.Event()
    return runners


async def test_repeat_requests_wait_until_every_restored_operation_was_heard_from(tmp_path):
    engine = Engine(tmp_path, connect=False)
    a, b = restored(engine, "lab", "a", "b")
    waiting = asyncio.create_task(engine.after_first_contacts("lab"))
    other_server = asyncio.create_task(engine.after_first_contacts("elsewhere"))
    await asyncio.sleep(0.05)
    assert other_server.done() and not waiting.done()
    engine._first_contact(a)
    engine._first_contact(a)  # twice changes nothing
    await asyncio.sleep(0.05)
    assert not waiting.done()
    engine._first_contact(b)
    await asyncio.wait_for(waiting, 1)
    assert not a.awaiting_first_contact and not b.awaiting_first_contact
    await engine.after_first_contacts("lab")  # nothing left to wait for


async def test_a_silent_operation_holds_the_others_only_for_a_while(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "FIRST_CONTACT_PRIORITY_SECONDS", 0.1)
    engine = Engine(tmp_path, connect=False)
    restored(engine, "lab", "silent")
    await asyncio.wait_for(engine.after_first_contacts("lab"), 1)
    await asyncio.wait_for(engine.after_first_contacts("lab"), 0.05)  # given up: no more waiting
