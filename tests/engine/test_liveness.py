"""An operation that stalls is noticed: input required with no question asked, or no
sign of life for longer than its server's own hints (its poll interval) allow. The host
first checks on it by the mechanism's own means (a poll), then marks it stalled, with the
reason, and waits on: nothing is sent again, and a later sign of life clears the mark.

The server is a real process (tests/support/stalling_server.py, 2025-11-25 tasks polled
every 50 ms) keeping its own record of what it was asked.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.api import EVENT_STALL_ENDED, EVENT_STALLED
from hostapp.engine.service import Engine
from hostapp.store.journal import ServerConfig
from tests.engine.conftest import Recorder
from tests.support.waiting import until_async

SERVER = Path(__file__).resolve().parents[1] / "support" / "stalling_server.py"

pytestmark = pytest.mark.timeout(120)


async def started(home: Path, record: Path) -> tuple[Engine, Recorder]:
    recorder = Recorder()
    engine = Engine(home, recorder)
    recorder.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="stalling", transport="stdio", command=sys.executable,
                                         args=[str(SERVER), str(record)]))
    await engine.connected("stalling")
    return engine, recorder


def lines(record: Path) -> list[str]:
    return record.read_text(encoding="utf-8").splitlines() if record.exists() else []


def events_of(recorder: Recorder, op_id: str, kind: str) -> list[dict]:
    return [data for oid, k, data in recorder.events if oid == op_id and k == kind]


async def test_input_required_with_no_question_is_checked_then_marked_stalled(isolated_home, real_keyring, tmp_path):
    record = tmp_path / "record.txt"
    engine, recorder = await started(isolated_home, record)
    try:
        op = await engine.start_call("stalling", "needs_input", {})
        stalled = await until_async(lambda: events_of(recorder, op.id, EVENT_STALLED), what="a stalled event")
        assert "needs input" in stalled[0]["message"] and "asked no question" in stalled[0]["message"]
        view = await engine.operation(op.id)
        assert view is not None and view.status == api.OperationStatus.INPUT_REQUIRED
        assert view.stalled == stalled[0]["message"]
        # It goes on: still polled, never sent again.
        polls = lines(record).count("get task-needs_input-1")
        await until_async(lambda: lines(record).count("get task-needs_input-1") > polls, what="more polls")
        assert lines(record).count("call needs_input") == 1
        await until_async(lambda: [e for e in engine.journal.events(op.id) if e.kind == EVENT_STALLED],
                          what="the stall in the journal")
    finally:
        await engine.stop()


async def stalled_call(engine, recorder):
    """A call of the stalling server's ``wakes_up`` (a task whose polls go unanswered until
    it is woken), once the host has marked it stalled: the operation and its stalled events."""
    op = await engine.start_call("stalling", "wakes_up", {})
    stalled = await until_async(lambda: events_of(recorder, op.id, EVENT_STALLED), what="a stalled event")
    return op, stalled


async def test_a_task_whose_polls_go_unanswered_is_marked_stalled_and_recovers(isolated_home, real_keyring,
                                                                             tmp_path):
    record = tmp_path / "record.txt"
    engine, recorder = await started(isolated_home, record)
    try:
        op, stalled = await stalled_call(engine, recorder)
        assert "no sign of life" in stalled[0]["message"]
        # Checked first: a poll beyond the first two (the answered one, the one never answered).
        assert lines(record).count("get task-wakes_up-1") >= 3
        assert (await engine.operation(op.id)).stalled is not None
        Path(f"{record}.wake").touch()
        # The server answers what it held: the answer clears the mark and the task ends.
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.COMPLETED and final.result["content"][0]["text"] == "awake"
        assert events_of(recorder, op.id, EVENT_STALL_ENDED)
        assert lines(record).count("call wakes_up") == 1
    finally:
        await engine.stop()


async def test_the_stalled_mark_outlives_a_restart_of_the_host_until_a_sign_of_life(isolated_home, real_keyring,
                                                                                  tmp_path):
    record = tmp_path / "record.txt"
    engine, recorder = await started(isolated_home, record)
    try:
        op, stalled = await stalled_call(engine, recorder)
        await until_async(lambda: engine.journal.get_operation(op.id).stalled == stalled[0]["message"],
                          what="the mark in the journal")
    finally:
        await engine.stop()  # a quit: the task is resumed by the next start
    recorder = Recorder()
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        # Shown stalled at once, from the journal (the restored poll is held again).
        restored = await engine.operation(op.id)
        assert restored is not None and restored.stalled == stalled[0]["message"]
        await engine.connected("stalling")
        await until_async(lambda: lines(record).count("get task-wakes_up-1") >= 4, what="the restored poll")
        assert (await engine.operation(op.id)).stalled == stalled[0]["message"]
        Path(f"{record}.wake").touch()
        final = await asyncio.wait_for(engine.wait_finished(op.id), 60)
        assert final.status == api.COMPLETED
        assert events_of(recorder, op.id, EVENT_STALL_ENDED)  # the sign of life cleared it
        await until_async(lambda: engine.journal.get_operation(op.id).stalled is None, what="the mark struck")
        assert lines(record).count("call wakes_up") == 1
    finally:
        await engine.stop()


async def test_a_restored_operation_is_not_counted_silent_while_its_polls_wait_for_the_others_first_contact(
        isolated_home, real_keyring, tmp_path, monkeypatch):
    """After a start, every repeat poll of a server waits until the operations restored
    with it were heard from (hostapp.engine.first_contact): an operation heard from already
    is then silent because the host holds its polls, and is neither checked nor marked
    stalled for it (at ten thousand operations after a restart, thousands were)."""
    from hostapp.engine import first_contact

    record = tmp_path / "record.txt"
    engine, recorder = await started(isolated_home, record)
    try:
        silent = await engine.start_call("stalling", "falls_silent", {})
        working = await engine.start_call("stalling", "keeps_working", {})
        await until_async(lambda: lines(record).count("get task-keeps_working-2") >= 3, what="polls answered")
    finally:
        await engine.stop()  # a quit: both are resumed by the next start
    hold = 3.0  # the falls_silent task's restored poll is never answered: the others wait so long
    monkeypatch.setattr(first_contact, "FIRST_CONTACT_PRIORITY_SECONDS", hold)
    recorder = Recorder()
    engine = Engine(isolated_home, recorder)
    recorder.engine = engine
    await engine.start()
    try:
        await engine.connected("stalling")
        gets = lines(record).count("get task-keeps_working-2")
        await until_async(lambda: lines(record).count("get task-keeps_working-2") > gets,
                          what="the working task's first contact after the start")
        # Its polls are held (up to 3 s, 20 of its intervals); the host's doing, not the
        # server's silence: it was checked and marked stalled within 0.3 s before.
        await asyncio.sleep(hold - 1.0)
        assert not events_of(recorder, working.id, EVENT_STALLED)
        assert (await engine.operation(working.id)).stalled is None
        # Once the wait is given up it is polled again, and stays unstalled.
        polled = lines(record).count("get task-keeps_working-2")
        await until_async(lambda: lines(record).count("get task-keeps_working-2") >= polled + 3,
                          what="its polls going on after the hold")
        assert not events_of(recorder, working.id, EVENT_STALLED)
        assert (await engine.operation(silent.id)).in_flight  # still waited for, never sent again
    finally:
        await engine.stop()
