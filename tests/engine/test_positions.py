"""A clean quit keeps each SSE stream's newest event id (in one keyring entry), so the
next start resumes from there instead of replaying what was already seen."""

from __future__ import annotations

import asyncio

import pytest

from hostapp.engine import api
from hostapp.engine.service import Engine
from hostapp.lab.state import execution_count
from hostapp.protocol.jsonrpc import IdAllocator
from tests.engine.conftest import Recorder, lab_server
from tests.engine.test_engine import finished, run_engine
from tests.engine.test_network_break import handle_committed
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(120)


def stream_of(engine, op_id: str):
    """The operation's SSE resumption (a plain call carries it once the stream has ids)."""
    mech = engine.runners[op_id].mech
    return getattr(mech, "carrier", None) or mech


def seq(event_id: str) -> int:
    return int(event_id.rsplit(":", 1)[1])  # the lab's ids: "<stream>:<seq>"


async def stream_past(engine, op_id: str, event: int):
    """The operation's SSE resumption once it has seen the stream's event ``event``."""
    def past():
        mech = stream_of(engine, op_id)
        far = mech.name == "http_resumption" and mech.last_event_id and seq(mech.last_event_id) >= event
        return mech if far else None

    return await until_async(past, what=f"event {event} of the stream of {op_id}")


async def test_a_clean_quit_keeps_stream_positions(isolated_home, lab, real_keyring, engine_timing):
    engine_timing(commit_every=3600.0)  # only the first id is committed
    engine = await run_engine(isolated_home, Recorder())
    await engine.add_server(lab_server(lab, version="2025-11-25"))
    await engine.connected("lab")
    op = await engine.start_call("lab", "long_sse", {"seconds": 6, "steps": 24})
    seen = (await stream_past(engine, op.id, 6)).last_event_id
    committed = unwrap(engine.secrets.get(engine.journal.get_operation(op.id).handle_ref))
    assert seq(committed) < seq(seen), "the test needs events beyond the committed one"
    await engine.stop()

    engine = await run_engine(isolated_home, Recorder())
    try:
        restored = stream_of(engine, op.id).last_event_id
        assert seq(restored) >= seq(seen), (committed, seen, restored)
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_sse") == 1


async def test_a_position_for_an_older_handle_is_not_used(isolated_home, lab, real_keyring, engine_timing):
    """A position names the handle it extends; once the operation committed another, the
    position no longer applies (it may belong to a stream that is gone)."""
    import json

    engine_timing(commit_every=3600.0)
    engine = await run_engine(isolated_home, Recorder())
    await engine.add_server(lab_server(lab, version="2025-11-25"))
    await engine.connected("lab")
    op = await engine.start_call("lab", "long_sse", {"seconds": 4, "steps": 8})
    await until_async(lambda: engine.journal.get_operation(op.id).handle_ref, what="the operation's handle committed")
    await engine.stop()
    store = engine.secrets
    store.put_at(store.fixed_ref("positions"), json.dumps({op.id: ["handle:" + "0" * 32, "bogus:999"]}))

    engine = await run_engine(isolated_home, Recorder())
    try:
        assert stream_of(engine, op.id).last_event_id != "bogus:999"
        assert (await finished(engine, op.id)).status == api.COMPLETED
    finally:
        await engine.stop()


def unwrap(value: str) -> str:
    from hostapp.engine.handles import unwrap_secret

    return unwrap_secret(value)[0]


async def test_positions_kept_by_another_engine_stay(isolated_home, lab, real_keyring, engine_timing):
    """An engine that holds only its own operations (a one-off command's) keeps the
    positions an earlier quit wrote for the others that are still unfinished."""
    import json

    from hostapp.engine.service import Engine

    engine_timing(commit_every=3600.0)

    async def one_call(engine: Engine) -> str:
        op = await engine.start_call("lab", "long_sse", {"seconds": 8, "steps": 32})
        await stream_past(engine, op.id, 3)
        return op.id

    first = await run_engine(isolated_home, Recorder())
    await first.add_server(lab_server(lab, version="2025-11-25"))
    await first.connected("lab")
    one = await one_call(first)
    await first.stop()

    second = Engine(isolated_home, Recorder())
    await second.start(resume=False)
    await second.connected("lab")
    two = await one_call(second)
    await second.stop()

    positions = json.loads(second.secrets.get(second.secrets.fixed_ref("positions")))
    assert set(positions) == {one, two}
    third = await run_engine(isolated_home, Recorder())
    try:
        for op_id in (one, two):
            assert (await finished(third, op_id)).status == api.COMPLETED
    finally:
        await third.stop()


async def test_streams_of_two_earlier_sessions_with_the_same_request_id_stay_apart(isolated_home, lab,
                                                                                    real_keyring, monkeypatch):
    """Two host lifetimes each left a stream in a session of their own, and each numbered
    its requests from 1: both calls went out under the same JSON-RPC id. After a restart
    each is resumed in its own adopted session, and one's events must not be taken for
    the other's (its position would then name the other session's stream, and the next
    start would ask the server for a stream the session does not have)."""
    ops, rids = [], []
    # Numbered as hostapp did before it reserved ids in the journal (a journal of that time
    # may still hold such operations): each lifetime from just above what it drives.
    monkeypatch.setattr(Engine, "_request_ids", lambda self, server: IdAllocator(self._first_request_id(server)))
    for _ in range(2):  # two lifetimes, each resuming nothing of the one before
        engine = Engine(isolated_home, Recorder())
        await engine.start(resume=False)
        if not ops:
            await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_sse", {"seconds": 8, "steps": 32})
        await handle_committed(engine, op.id)
        ops.append(op.id)
        rids.append(engine.journal.get_operation(op.id).jsonrpc_id)
        await engine.stop()
    assert rids[0] == rids[1], "the test needs the same request id twice"
    monkeypatch.undo()

    engine = await run_engine(isolated_home, Recorder())
    try:
        def both_streaming() -> bool:
            ended = [i for i in ops if i not in engine.runners]
            assert not ended, [(engine.journal.get_operation(i).status, engine.journal.get_operation(i).error)
                               for i in ended]
            return all(seq(stream_of(engine, i).last_event_id or ":0") >= 12 for i in ops)

        await until_async(both_streaming, what="event 12 of both streams after the restart")
        streams = {i: stream_of(engine, i).last_event_id.rsplit(":", 1)[0] for i in ops}
        assert len(set(streams.values())) == 2, streams
    finally:
        await engine.stop()  # a clean quit: each one's position is kept
    engine = await run_engine(isolated_home, Recorder())
    try:
        for i in ops:
            assert (await finished(engine, i)).status == api.COMPLETED
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_sse") == 2


async def test_a_quit_before_a_new_mechanism_is_committed_keeps_no_position(isolated_home, lab, real_keyring,
                                                                           monkeypatch, engine_timing):
    """A plain call first carried by its SSE stream's event ids is taken over by a draft
    stream the server creates. If the host quits before that takeover is committed, the
    journal still names the SSE resumption: no position is kept for it (the newest
    secret is a stream id, not an event id), and the next start resumes the stream from
    the committed event id, which replays the takeover."""
    from hostapp.engine.runner import OperationRunner

    engine_timing(commit_every=3600.0)
    real_commit = OperationRunner._commit
    held = asyncio.Event()

    async def commit_but_not_streams(self, action):
        if action.state.get("mechanism") == "streams":
            held.set()
            await asyncio.Event().wait()  # the quit comes first
        await real_commit(self, action)

    monkeypatch.setattr(OperationRunner, "_commit", commit_but_not_streams)
    engine = await run_engine(isolated_home, Recorder())
    await engine.add_server(lab_server(lab, version="2025-11-25"))
    await engine.connected("lab")
    op = await engine.start_call("lab", "long_stream", {"seconds": 3, "steps": 6})
    await asyncio.wait_for(held.wait(), 30)
    assert engine.journal.get_operation(op.id).mechanism == "http_resumption"
    assert engine.runners[op.id].position_to_keep() is None
    await engine.stop()
    monkeypatch.setattr(OperationRunner, "_commit", real_commit)

    engine = await run_engine(isolated_home, Recorder())
    try:
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED, final.error
    finally:
        await engine.stop()
    assert execution_count(lab.state_file, "long_stream") == 1
