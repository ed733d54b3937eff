"""The decisions about a server's question kept across a restart, on a real journal file:
which questions are kept, when the one asked again is taken back, where its answer goes.
A runner stands in for the engine around it; the whole path with real servers and a
killed host is in tests/faults/test_faults.py (test_task_question_left_open_...)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from hostapp.engine.kept_question import KeptQuestion
from hostapp.engine.session import RequestContext
from hostapp.protocol.jsonrpc import RpcError
from hostapp.store.journal import OperationJournal, OperationRecord
from hostapp.store.status import OperationStatus
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(30)

QUESTION = {"message": "Which one?", "requestedSchema": {"type": "object", "properties": {}},
            "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "a-secret-task-id"}}}


class Session:
    def __init__(self, session_id: str | None, delivered: bool = True):
        self.transport = SimpleNamespace(session_id=session_id)
        self.sent: list[tuple[Any, dict[str, Any]]] = []
        self.delivered = delivered

    async def answer_earlier_request(self, request_id: Any, result: dict[str, Any], method: str, *,
                                     error: RpcError | None = None) -> bool:
        assert method == "elicitation/create" and error is None
        self.sent.append((request_id, result))
        return self.delivered


class Person:
    """The questions shown, and the answers given (a future per question)."""

    def __init__(self) -> None:
        self.shown: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.withdrawn: list[str] = []

    async def ask_person(self, runner: Any, params: dict[str, Any], *, qid: str | None = None,
                         method: str = "elicitation/create") -> dict[str, Any]:
        assert qid is not None and "_meta" not in params and method == "elicitation/create"
        self.shown[qid] = asyncio.get_running_loop().create_future()
        return await self.shown[qid]

    def withdraw_question(self, qid: str) -> None:
        self.withdrawn.append(qid)
        self.shown[qid].set_result({"action": "cancel"})

    async def wait_shown(self, count: int = 1) -> asyncio.Future[dict[str, Any]]:
        await until_async(lambda: len(self.shown) >= count, what=f"question {count} to be shown")
        return list(self.shown.values())[count - 1]


class Runner:
    """What KeptQuestion uses of an OperationRunner, with its contract: a status change
    and the end go to the journal, and nothing changes once the end has begun."""

    def __init__(self, journal: OperationJournal, record: OperationRecord, person: Person,
                 mechanism: str = "tasks_2025", bound: str | None = "sid-1"):
        self.record, self.id = record, record.id
        self.mech = SimpleNamespace(name=mechanism)
        self.http_session = (bound, "2025-11-25") if bound else None
        self.session: Any = None  # the session it runs in (not one of these tests' sessions)
        self.done = self.finishing = False
        self.statuses: list[OperationStatus] = []
        self.tasks: list[asyncio.Task] = []
        self.context = SimpleNamespace(journal=journal, stopping=False, ask_person=person.ask_person,
                                       withdraw_question=person.withdraw_question)

    @property
    def ending(self) -> bool:
        return self.finishing or self.done

    def spawn(self, coro: Any) -> None:
        self.tasks.append(asyncio.get_running_loop().create_task(coro))

    async def set_status(self, status: OperationStatus, message: str | None) -> None:
        if self.ending:
            return
        self.statuses.append(status)
        if status != self.context.journal.get_operation(self.id).status:
            await self.context.journal.update_operation(self.id, status=status)

    async def finish(self, status: OperationStatus) -> None:
        self.finishing = True
        await self.context.journal.finish_operation(self.id, status, result={"content": []})
        self.done = True

    async def settle(self) -> None:
        await asyncio.gather(*self.tasks)


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[OperationJournal]:
    with OperationJournal(tmp_path / "journal.sqlite3") as j:
        yield j


def _record(journal: OperationJournal, open_question: dict[str, Any] | None = None) -> OperationRecord:
    record = OperationRecord("op-1", "srv", "tools/call", {}, status=OperationStatus.INPUT_REQUIRED,
                             mechanism="tasks_2025", open_question=open_question)
    journal.create_operation_sync(record)
    return record


def _ctx(session: Session, request_id: Any = 7) -> RequestContext:
    return RequestContext(session, request_id, None, "a-secret-task-id", "elicitation/create")  # type: ignore[arg-type]


def _kept(journal: OperationJournal) -> dict[str, Any] | None:
    return journal.get_operation("op-1").open_question


KEPT = {"id": 3, "params": {"message": "Which one?"}}


async def _restored_and_asked(journal: OperationJournal, session: Session | None = None
                              ) -> tuple[Runner, KeptQuestion, Person, Session]:
    """An operation restored with a kept question, attached to its session, which shows
    the question to the person again."""
    person, session = Person(), session or Session("sid-1")
    runner = Runner(journal, _record(journal, dict(KEPT)), person)
    kept = KeptQuestion(runner)  # type: ignore[arg-type]
    kept.attached(session)  # type: ignore[arg-type]
    await person.wait_shown()
    return runner, kept, person, session


async def test_a_task_question_is_kept_without_its_meta_until_its_answer_went_out(journal):
    runner = Runner(journal, _record(journal), Person())
    kept = KeptQuestion(runner)  # type: ignore[arg-type]
    assert await kept.keep(_ctx(Session("sid-1")), QUESTION)
    assert _kept(journal) == {"id": 7, "params": {k: v for k, v in QUESTION.items() if k != "_meta"}}
    assert "a-secret-task-id" not in (journal.path.read_bytes() + Path(f"{journal.path}-wal").read_bytes()).decode(
        errors="replace")
    await kept.answered(8)  # another id: not this question
    assert _kept(journal) is not None
    await kept.answered(7)
    assert _kept(journal) is None


@pytest.mark.parametrize("mechanism,bound,session_id,request_id", [
    pytest.param("http_resumption", "sid-1", "sid-1", 7, id="its stream is resumed: the server asks again"),
    pytest.param("tasks_2025", "sid-1", "sid-2", 7, id="another session"),
    pytest.param("tasks_2025", None, "sid-1", 7, id="no session"),
    pytest.param("tasks_2025", "sid-1", "sid-1", None, id="no id to answer under"),
])
async def test_a_question_that_cannot_be_answered_after_a_restart_is_not_kept(journal, mechanism, bound,
                                                                             session_id, request_id):
    runner = Runner(journal, _record(journal), Person(), mechanism=mechanism, bound=bound)
    assert not await KeptQuestion(runner).keep(_ctx(Session(session_id), request_id), QUESTION)  # type: ignore[arg-type]
    assert _kept(journal) is None


async def test_restored_the_question_is_asked_again_and_answered_under_its_id(journal):
    person = Person()
    runner = Runner(journal, _record(journal, {"id": "q-7", "params": {"message": "Which one?"}}), person)
    kept = KeptQuestion(runner)  # type: ignore[arg-type]
    session = Session("sid-1")
    kept.attached(session)
    kept.attached(session)  # a later reconnect: not asked a second time
    (await person.wait_shown()).set_result({"action": "accept", "content": {"x": 1}})
    await runner.settle()
    assert len(person.shown) == 1
    assert session.sent == [("q-7", {"action": "accept", "content": {"x": 1}})]
    assert runner.statuses == [OperationStatus.INPUT_REQUIRED, OperationStatus.RUNNING]
    assert _kept(journal) is None


async def test_an_answer_that_could_not_be_sent_stays_kept_for_the_next_start(journal):
    runner, _kept_question, person, _session = await _restored_and_asked(journal, Session("sid-1", delivered=False))
    (await person.wait_shown()).set_result({"action": "decline"})
    await runner.settle()
    assert _kept(journal) == KEPT


async def test_the_question_asked_again_is_taken_back_when_the_server_went_on(journal):
    runner, kept, person, session = await _restored_and_asked(journal)
    kept.server_went_on()  # the task is working again: the server gave up on the answer
    await runner.settle()
    assert person.withdrawn == list(person.shown) and session.sent == []
    assert _kept(journal) is None


async def test_a_new_question_from_the_server_supersedes_the_one_asked_again(journal):
    runner, kept, person, session = await _restored_and_asked(journal)
    assert await kept.keep(_ctx(session, request_id=4), QUESTION)  # the server asks anew
    await runner.settle()
    assert person.withdrawn == list(person.shown) and session.sent == []
    assert _kept(journal)["id"] == 4  # the new one is kept, not struck by the old one's end


async def test_a_question_whose_session_is_gone_is_dropped_not_asked(journal):
    person = Person()
    runner = Runner(journal, _record(journal, dict(KEPT)), person)
    KeptQuestion(runner).attached(None)  # type: ignore[arg-type]
    await runner.settle()
    assert person.shown == {} and _kept(journal) is None


async def test_a_question_nobody_can_show_is_declined(journal):
    runner = Runner(journal, _record(journal, dict(KEPT)), Person())

    async def cannot_show(*_args: Any, **_kw: Any) -> dict[str, Any]:
        raise RpcError(-32602, "hostapp cannot show this question")

    runner.context.ask_person = cannot_show
    session = Session("sid-1")
    KeptQuestion(runner).attached(session)  # type: ignore[arg-type]
    await runner.settle()
    assert session.sent == [(3, {"action": "decline"})]


async def test_the_same_question_sent_anew_gets_the_persons_one_answer(journal):
    runner, kept, person, session = await _restored_and_asked(journal)
    anew = {**KEPT["params"], "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}
    assert kept.same_question({"message": "Something else?"}) is None
    waiting = kept.same_question(anew)  # the lab sends it again on its next tasks/result
    assert waiting is not None and not waiting.done()
    (await person.wait_shown()).set_result({"action": "accept", "content": {"x": 1}})
    assert await waiting == {"action": "accept", "content": {"x": 1}}
    await runner.settle()
    assert len(person.shown) == 1 and session.sent == [(3, {"action": "accept", "content": {"x": 1}})]
    assert await kept.same_question(anew) == {"action": "accept", "content": {"x": 1}}  # sent once more
    kept.server_went_on()  # the task works again: a later question is a new one, for the person
    assert kept.same_question(anew) is None


class CompletingSession(Session):
    """A server that completes the task as soon as the answer arrives, and a poll that
    delivers the outcome before the answer's own bookkeeping is done: the operation ends
    while the question is being struck and its status set back to running."""

    def __init__(self, runner: Runner | None = None):
        super().__init__("sid-1")
        self.runner = runner
        self.ending: asyncio.Task | None = None

    async def answer_earlier_request(self, request_id: Any, result: dict[str, Any], method: str, *,
                                     error: RpcError | None = None) -> bool:
        await super().answer_earlier_request(request_id, result, method, error=error)
        assert self.runner is not None
        self.ending = asyncio.get_running_loop().create_task(self.runner.finish(OperationStatus.COMPLETED))
        await asyncio.sleep(0)  # the end is on its way to the journal
        return True


async def test_a_question_asked_before_the_handle_was_committed_is_kept_in_the_operations_session(journal):
    # The TypeScript SDK asks on the standalone stream as soon as the task exists, before
    # its id reached the host: the handle will be bound to the session the operation runs
    # in, so a question from that session is kept; one from another session is not.
    runner = Runner(journal, _record(journal), Person(), bound=None)
    own, other = Session("sid-1"), Session("sid-2")
    runner.session = own
    assert not await KeptQuestion(runner).keep(_ctx(other), QUESTION)  # type: ignore[arg-type]
    assert _kept(journal) is None
    assert await KeptQuestion(runner).keep(_ctx(own, 0), QUESTION)  # type: ignore[arg-type]
    assert _kept(journal) == {"id": 0, "params": {k: v for k, v in QUESTION.items() if k != "_meta"}}


async def test_an_operation_that_ends_as_its_question_is_answered_ends_cleanly(journal):
    # Seen in 3 of 8 resumes: "operation ... is completed; its outcome can no longer
    # change" from the strike of the answered question, or a completed operation left
    # with its open question in the journal.
    session = CompletingSession()
    runner, _kept_question, person, _ = await _restored_and_asked(journal, session)
    session.runner = runner
    (await person.wait_shown()).set_result({"action": "accept", "content": {}})
    await runner.settle()  # raises what the task raised
    assert session.ending is not None
    await session.ending
    record = journal.get_operation("op-1")
    assert record.status == OperationStatus.COMPLETED
    assert record.open_question is None
    assert session.sent == [(3, {"action": "accept", "content": {}})]
