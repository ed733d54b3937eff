"""JSON-RPC ids are unique per server across hosts on one home and across lifetimes."""

from __future__ import annotations

import asyncio

from hostapp.engine import api
from tests.engine.conftest import Recorder, lab_server
from tests.engine.test_engine import finished, run_engine


async def test_two_hosts_on_one_home_never_send_two_calls_under_one_id(isolated_home, lab, real_keyring):
    """Each host process numbers the requests of its sessions; before ids were reserved in
    the journal every host sent its first call under the same id, and a later resume of
    both matched responses and streams to the wrong operation."""
    first = await run_engine(isolated_home, Recorder())
    await first.add_server(lab_server(lab, version="2025-11-25"))
    second = await run_engine(isolated_home, Recorder())  # a second host finds the server configured
    try:
        ops = []
        for engine in (first, second, first, second):
            await engine.connected("lab")
            ops.append((engine, await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.2, "steps": 2})))
        for engine, op in ops:
            assert (await finished(engine, op.id)).status == api.COMPLETED
        ids = [first.journal.get_operation(op.id).jsonrpc_id for _, op in ops]
        assert all(isinstance(i, int) for i in ids)
        assert len(set(ids)) == len(ids), ids
    finally:
        await asyncio.gather(first.stop(), second.stop())


async def test_a_later_lifetime_starts_above_every_id_sent_before(isolated_home, lab, real_keyring):
    sent = []
    for _ in range(3):
        engine = await run_engine(isolated_home, Recorder())
        try:
            if "lab" not in engine.connections:
                await engine.add_server(lab_server(lab, version="2025-11-25"))
            await engine.connected("lab")
            op = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.1, "steps": 1})
            await finished(engine, op.id)
            sent.append(engine.journal.get_operation(op.id).jsonrpc_id)
        finally:
            await engine.stop()
    assert sent == sorted(sent) and len(set(sent)) == 3, sent
