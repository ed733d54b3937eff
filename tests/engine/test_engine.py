"""The engine in-process against the real lab server: every mechanism end to end, restart
and resume, cancel, questions, and the keyring contract."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from hostapp.engine import api
from hostapp.engine.operation import progress_in_message
from hostapp.engine.service import Engine
from hostapp.lab.state import LabState, execution_count
from hostapp.store.journal import OperationJournal
from tests.engine.conftest import Recorder, lab_server
from tests.support.waiting import DEADLINE, until_async

pytestmark = pytest.mark.timeout(120)

# (tool, pinned revision or None to negotiate the newest, mechanism the engine must journal)
MECHANISMS = [
    ("long_sse", "2025-11-25", "http_resumption"),
    ("long_task", "2025-11-25", "tasks_2025"),
    ("long_task_ext", None, "tasks_extension"),
    ("long_resume_token", "2025-11-25", "resume_token"),
    ("long_stream", "2025-11-25", "streams"),
    ("long_resumable", "2025-11-25", "resumable_requests"),
    ("long_async", None, "async_tool"),
]


async def run_engine(home: Path, recorder: Recorder, **kw) -> Engine:
    engine = Engine(home, recorder, **kw)
    recorder.engine = engine
    await engine.start()
    return engine


async def finished(engine: Engine, op_id: str, timeout: float = 60) -> api.OperationView:
    return await asyncio.wait_for(engine.wait_finished(op_id), timeout)


async def test_plain_call_completes_with_monotonic_progress(isolated_home, lab, recorder, real_keyring):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        op = await engine.start_call("lab", "sleep_with_progress", {"seconds": 1, "steps": 5})
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED
        assert "finished 5 steps" in final.result["content"][0]["text"]
        progress = recorder.progress_of(op.id)
        assert progress == sorted(progress) and progress[-1] == 5
        events = await engine.events(op.id)
        assert [e["data"].get("to") for e in events if e["kind"] == "status"][-1] == api.COMPLETED
    finally:
        await engine.stop()
    record = OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id)
    assert record.status == api.COMPLETED and record.result == final.result


@pytest.mark.parametrize("tool, version, mechanism", MECHANISMS)
async def test_each_mechanism_completes_once(isolated_home, lab, recorder, real_keyring, tool, version, mechanism):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version=version))
        await engine.connected("lab")
        op = await engine.start_call("lab", tool, {"seconds": 1.5, "steps": 3})
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED, final.error
        assert final.result and final.result.get("content")
    finally:
        await engine.stop()
    journal = OperationJournal(isolated_home / "journal.sqlite3")
    assert journal.get_operation(op.id).mechanism == mechanism
    assert execution_count(lab.state_file, tool) == 1


async def test_mrtr_question_is_answered_by_the_person(isolated_home, lab, recorder, real_keyring):
    recorder.answers = [{"action": "accept", "content": {"choice": "yes", "confirm": True}}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_mrtr", {"seconds": 1, "steps": 2})
        final = await finished(engine, op.id)
    finally:
        await engine.stop()
    assert len(recorder.questions) == 1 and recorder.questions[0].operation_id == op.id
    assert final.status in (api.COMPLETED, api.FAILED)
    assert final.result is not None


async def test_form_elicitation_routed_to_its_operation(isolated_home, lab, recorder, real_keyring):
    recorder.answers = [{"action": "accept", "content": {"name": "Grace"}}]
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        op = await engine.start_call("lab", "ask_form", {})
        final = await finished(engine, op.id)
    finally:
        await engine.stop()
    assert [q.operation_id for q in recorder.questions] == [op.id]
    assert recorder.questions[0].mode == "form"
    assert "Grace" in json.dumps(final.result)
    statuses = [s for s, *_ in recorder.changes[op.id]]
    assert api.INPUT_REQUIRED in statuses


async def test_cancel_ends_the_operation_as_cancelled(isolated_home, lab, recorder, real_keyring):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_task", {"seconds": 30, "steps": 30})
        await until_async(lambda: recorder.progress_of(op.id), what="the task's first progress")
        await engine.cancel(op.id)
        final = await finished(engine, op.id)
        assert final.status == api.CANCELLED, (final.error, final.result)
    finally:
        await engine.stop()


@pytest.mark.parametrize("tool, version", [("long_task", "2025-11-25"), ("long_async", None),
                                           ("long_sse", "2025-11-25"), ("long_task_ext", None),
                                           ("long_stream", "2025-11-25"), ("long_resumable", "2025-11-25"),
                                           ("long_resume_token", "2025-11-25")])
async def test_restart_resumes_and_delivers_once(isolated_home, lab, real_keyring, tool, version):
    first = Recorder()
    engine = await run_engine(isolated_home, first)
    await engine.add_server(lab_server(lab, version=version))
    await engine.connected("lab")
    op = await engine.start_call("lab", tool, {"seconds": 4, "steps": 8})
    journal = engine.journal
    # Until the server's handle is committed (extension tasks and async tools send no progress).
    await until_async(lambda: journal.get_operation(op.id).handle_ref
                      and (first.progress_of(op.id) or tool in ("long_task_ext", "long_resume_token", "long_async")),
                      what="the handle committed before the restart, and progress")
    in_flight = journal.get_operation(op.id).status in api.IN_FLIGHT
    # What the restart rebuilds; it may hand over to another mechanism the server offers
    # afterwards (a resumed SSE stream replays a slice that offers a resume token).
    mechanism_at_stop = journal.get_operation(op.id).mechanism
    await engine.stop()  # the host quits with the call in flight

    second = Recorder()
    engine = await run_engine(isolated_home, second)  # resumes without being asked
    try:
        final = await finished(engine, op.id)
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED, final.error
    assert execution_count(lab.state_file, tool) == 1
    state = LabState(lab.state_file)
    try:  # the server's own result, not a slice of it
        [job] = [j for j in state.jobs() if j.progress_token == f"op-{op.id}"]
        assert job.status == "completed" and final.result["structuredContent"] == job.result["structuredContent"]
    finally:
        state.close()
    # The timeline and the listener say that this start took it up again, and how.
    mechanism = OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id).mechanism
    resumed = [d for i, k, d in second.events if i == op.id and k == api.EVENT_RESUMED]
    assert [d["mechanism"] for d in resumed] == ([mechanism_at_stop] if in_flight else [])
    assert final.mechanism == mechanism
    assert not [k for i, k, _d in first.events if k == api.EVENT_RESUMED]
    before, after = first.progress_of(op.id), second.progress_of(op.id)
    seen = before + after
    assert all(b >= a for a, b in itertools.pairwise(seen)), f"progress moved backwards: {before} then {after}"


async def test_an_operation_of_a_removed_server_is_ended_not_resumed(isolated_home, lab, real_keyring):
    first = Recorder()
    engine = await run_engine(isolated_home, first)
    await engine.add_server(lab_server(lab))
    await engine.connected("lab")
    op = await engine.start_call("lab", "long_task_ext", {"seconds": 30, "steps": 30})
    await until_async(lambda: engine.journal.get_operation(op.id).handle_ref, what="the task's handle committed")
    await engine.stop()
    OperationJournal(isolated_home / "journal.sqlite3").remove_server("lab")

    second = Recorder()
    engine = await run_engine(isolated_home, second)
    try:
        final = await finished(engine, op.id)
        events = await engine.events(op.id)
    finally:
        await engine.stop()
    assert final.status == api.UNKNOWN and "removed" in final.error["message"]
    assert not [k for _i, k, _d in second.events if k == api.EVENT_RESUMED]
    assert not [e for e in events if e["kind"] == api.EVENT_RESUMED]


async def test_no_keyring_means_not_resumable_and_says_so(isolated_home, lab):
    from keyring.backends.fail import Keyring as NoKeyring

    from hostapp.store.secrets import SecretStore

    recorder = Recorder()
    engine = await run_engine(isolated_home, recorder, secrets=SecretStore(isolated_home, backend=NoKeyring()))
    try:
        assert engine.keyring_problem and recorder.problems and recorder.problems[0][0] == "keyring"
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_task", {"seconds": 1, "steps": 2})
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED and engine.journal.get_operation(op.id).resumable is False
    finally:
        await engine.stop()


async def test_an_operation_past_its_deadline_ends_expired(isolated_home, lab, recorder, real_keyring):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_task_ext", {"seconds": 30, "steps": 30}, deadline_s=1.5)
        final = await finished(engine, op.id, timeout=DEADLINE)
        assert final.status == api.EXPIRED, final
        assert final.error and final.error["message"]
    finally:
        await engine.stop()


@pytest.mark.parametrize("message, step", [
    ("crunch 5/12", (5, 12)), ("step 3 of 8", (3, 8)), ("40% done", (40, 100)), ("40.5 %", (40.5, 100)),
    ("started", None), ("on 2026/11/23", None), ("13/12", None), ("120%", None), (None, None)])
def test_progress_in_a_status_message(message, step):
    assert progress_in_message(message) == step


async def test_task_status_messages_are_journaled_and_move_the_progress(isolated_home, lab, recorder, real_keyring):
    # The lab's extension task sends no progress notifications: only its statusMessage
    # ("step i/N") tells how far it got, the status staying "working".
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab))
        await engine.connected("lab")
        op = await engine.start_call("lab", "long_task_ext", {"seconds": 2, "steps": 4})
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED, final.error
        events = await engine.events(op.id)
    finally:
        await engine.stop()
    progress = recorder.progress_of(op.id)
    assert progress and progress == sorted(progress) and progress[-1] >= 2, recorder.changes[op.id]
    assert {t for _s, _p, t, _m in recorder.changes[op.id] if t is not None} == {4}
    messages = [e["data"]["message"] for e in events if e["kind"] == "status_message"]
    assert len([m for m in messages if m.startswith("step ")]) >= 2, events
    assert [d["message"] for i, k, d in recorder.events if i == op.id and k == "status_message"] == messages


class Silent(Recorder):
    """A person who sees the questions and answers none."""

    def input_requested(self, request: api.InputRequest) -> None:
        self.questions.append(request)


async def test_a_task_question_left_open_is_asked_again_after_a_restart(isolated_home, lab, real_keyring):
    # The host quits while a 2025-11-25 task waits for the person. The question is kept in
    # the journal (without its _meta, which names the task); the restarted host asks it
    # again (the lab would also ask anew on the next tasks/result: the person sees one
    # question all the same), and the task goes on once it is answered.
    first = Silent()
    engine = await run_engine(isolated_home, first)
    await engine.add_server(lab_server(lab, version="2025-11-25"))
    await engine.connected("lab")
    op = await engine.start_call("lab", "long_task", {"seconds": 2, "steps": 4, "ask": True})
    await until_async(lambda: first.questions, what="the task's question")
    assert (await engine.operation(op.id)).status == api.INPUT_REQUIRED
    await engine.stop()
    left = OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id)
    assert left.status == api.INPUT_REQUIRED
    assert left.open_question["params"] == {k: v for k, v in first.questions[0].params.items() if k != "_meta"}

    second = Recorder()
    second.answers = [{"action": "accept", "content": {"proceed": True}}]
    engine = await run_engine(isolated_home, second)
    try:
        final = await finished(engine, op.id, timeout=DEADLINE)
    finally:
        await engine.stop()
    assert [q.operation_id for q in second.questions] == [op.id]
    assert final.status == api.COMPLETED, (final.error, final.result)
    assert execution_count(lab.state_file, "long_task") == 1
    assert OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id).open_question is None


async def _in_flight_with_mechanism(engine: Engine, op_id: str) -> api.OperationView:
    """The operation's view once it runs and its mechanism is journaled."""
    async def running() -> api.OperationView | None:
        view = await engine.operation(op_id)
        assert view is not None and view.status not in api.TERMINAL, view
        return view if view.status == api.RUNNING and engine.journal.get_operation(op_id).mechanism else None

    return await until_async(running, what=f"{op_id} to run with a mechanism")


@pytest.mark.parametrize("tool, version, survives", [
    ("sleep_with_progress", "2026-07-28", False),  # a plain request: lost if the host stops
    ("long_async", None, True),
])
async def test_an_operation_says_whether_it_survives_a_stop(isolated_home, lab, recorder, real_keyring,
                                                            tool, version, survives):
    engine = await run_engine(isolated_home, recorder)
    try:
        await engine.add_server(lab_server(lab, version=version))
        await engine.connected("lab")
        op = await engine.start_call("lab", tool, {"seconds": 4, "steps": 4})
        view = await _in_flight_with_mechanism(engine, op.id)
        assert view.survives_stop is survives, (view, engine.journal.get_operation(op.id).mechanism)
        # The journal's view says the same as the live one, why included.
        [journaled] = [o for o in await engine.unfinished_operations() if o.id == op.id]
        assert journaled.lost_at_stop == view.lost_at_stop
        assert (view.lost_at_stop is None) is survives
        await engine.cancel(op.id)
    finally:
        await engine.stop()


def test_what_a_stop_would_end_is_decided_from_what_the_journal_and_keyring_hold():
    from hostapp.engine.operation import LOST_HANDLE_NOT_KEPT, LOST_PLAIN_REQUEST, LOST_UNSENT, lost_at_stop

    running = api.OperationStatus.RUNNING
    assert lost_at_stop(api.OperationStatus.PENDING, False, None, True) == LOST_UNSENT  # it would not run
    assert lost_at_stop(running, True, None, True) == LOST_PLAIN_REQUEST  # sent, no handle back yet
    assert lost_at_stop(running, True, "direct", True) == LOST_PLAIN_REQUEST
    assert lost_at_stop(running, True, "tasks_extension", False) == LOST_HANDLE_NOT_KEPT
    assert lost_at_stop(running, True, "tasks_extension", True) is None
    assert lost_at_stop(api.OperationStatus.PENDING, False, "async_tool", True) is None  # its token made first
    assert lost_at_stop(api.OperationStatus.COMPLETED, True, "direct", True) is None  # ended: nothing to lose
