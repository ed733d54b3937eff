"""The engine against an in-process fake server (no process, no socket): what it does with
what a server says, where each message goes, and what it makes of a server that leaves."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from hostapp.engine import api, supervisor
from hostapp.engine.facade import LocalEngine
from hostapp.engine.routing import RequestRouting
from hostapp.engine.service import Engine
from hostapp.protocol.jsonrpc import ErrorObject, ErrorResponse, Response
from hostapp.store.journal import OperationJournal, ServerConfig
from hostapp.store.secrets import InMemoryKeyring, SecretStore
from tests.engine.conftest import Recorder
from tests.support.memory_transport import FakeServer, ToolCall, text_result
from tests.support.waiting import DEADLINE, until_async

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    server = FakeServer()
    monkeypatch.setattr(supervisor, "make_transport", server.transport_factory)
    return server


@pytest.fixture
async def engine(isolated_home: Path, recorder: Recorder, fake: FakeServer):
    engine = Engine(isolated_home, recorder, secrets=SecretStore(isolated_home, backend=InMemoryKeyring()))
    recorder.engine = engine
    await engine.start()
    await engine.add_server(ServerConfig(name="fake", transport="stdio", command="in-memory"))
    await engine.connected("fake", timeout=DEADLINE)
    yield engine
    await engine.stop()


async def finished(engine: Engine, op_id: str) -> api.OperationView:
    return await asyncio.wait_for(engine.wait_finished(op_id, poll=0.01), 10)


def steps_shown(recorder: Recorder, op_id: str) -> list[float]:
    """The progress steps shown, each once (a status change shows the latest step again)."""
    shown: list[float] = []
    for step in recorder.progress_of(op_id):
        if not shown or shown[-1] != step:
            shown.append(step)
    return shown


def shown_rising_to(recorder: Recorder, op_id: str, sent: list[float]) -> bool:
    """The steps shown are some of those sent, in their order, the last one among them:
    progress reaches the listener coalesced (the latest at most every few dozen
    milliseconds), never backwards, never another operation's, and never short of the end."""
    shown = steps_shown(recorder, op_id)
    rest = iter(sent)
    return bool(shown) and shown[-1] == sent[-1] and all(step in rest for step in shown)


async def test_a_call_completes_with_its_progress(engine, fake, recorder, isolated_home):
    @fake.tool("count")
    async def count(call: ToolCall) -> dict:
        for step in range(1, 4):
            await call.progress(step, 3, f"step {step}")
        return text_result(f"counted to {call.arguments['to']}\nand more")

    op = await engine.start_call("fake", "count", {"to": 3})
    final = await finished(engine, op.id)
    assert final.status == api.COMPLETED
    assert final.message == "counted to 3"  # the result's first line
    assert shown_rising_to(recorder, op.id, [1, 2, 3])
    assert final.total == 3
    # The call carried the operation's own progress token, and went out once.
    (sent,) = fake.calls_of("tools/call")
    assert sent["params"]["_meta"]["progressToken"] == f"op-{op.id}"
    await engine.journal.flush()
    record = OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id)
    assert record.status == api.COMPLETED and record.progress == 3
    assert op.id not in engine.runners  # ended: the engine let go of it


async def test_a_tool_error_fails_the_operation(engine, fake):
    @fake.tool("broken")
    async def broken(call: ToolCall) -> dict:
        return text_result("the disk is full", is_error=True)

    final = await finished(engine, (await engine.start_call("fake", "broken", {})).id)
    assert final.status == api.FAILED and final.message == "the disk is full"


async def test_progress_goes_to_the_operation_whose_call_it_is(engine, fake, recorder):
    go = asyncio.Event()

    @fake.tool("steps")
    async def steps(call: ToolCall) -> dict:
        await go.wait()
        for step in call.arguments["steps"]:
            await call.progress(step)
        return text_result(str(call.arguments["steps"]))

    small = await engine.start_call("fake", "steps", {"steps": [1, 2]})
    large = await engine.start_call("fake", "steps", {"steps": [10, 20, 30]})
    await until_async(lambda: len(fake.calls_of("tools/call")) >= 2, what="both calls at the server")
    go.set()
    assert (await finished(engine, small.id)).status == api.COMPLETED
    assert (await finished(engine, large.id)).status == api.COMPLETED
    assert shown_rising_to(recorder, small.id, [1, 2])
    assert shown_rising_to(recorder, large.id, [10, 20, 30])


async def test_a_server_that_leaves_mid_call_leaves_the_outcome_unknown(engine, fake, recorder):
    started = asyncio.Event()

    @fake.tool("fragile")
    async def fragile(call: ToolCall) -> dict:
        await call.progress(1, 2)
        started.set()
        call.close_connection()
        await asyncio.Event().wait()  # never answers
        return text_result("unreachable")

    op = await engine.start_call("fake", "fragile", {})
    await asyncio.wait_for(started.wait(), 5)
    final = await finished(engine, op.id)
    # A direct call cannot be asked about after a break: it may or may not have run, and
    # it is not sent again.
    assert final.status == api.UNKNOWN
    assert len(fake.calls_of("tools/call")) == 1
    assert steps_shown(recorder, op.id) == [1]
    # The engine reconnected on its own; a new call works on the new connection.
    @fake.tool("fine")
    async def fine(call: ToolCall) -> dict:
        return text_result("ok")

    assert (await finished(engine, (await engine.start_call("fake", "fine", {})).id)).status == api.COMPLETED
    assert len(fake.links) >= 2


async def test_a_question_from_the_server_goes_to_the_person_for_that_operation(engine, fake, recorder):
    @fake.tool("ask")
    async def ask(call: ToolCall) -> dict:
        answer = await call.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return text_result(f"hello {answer.get('content', {}).get('name')} ({answer['action']})")

    recorder.answers.append({"action": "accept", "content": {"name": "Ada"}})
    op = await engine.start_call("fake", "ask", {})
    final = await finished(engine, op.id)
    assert final.status == api.COMPLETED and final.message == "hello Ada (accept)"
    (question,) = recorder.questions
    assert question.operation_id == op.id and question.server == "fake" and question.message == "Your name?"
    statuses = [s for s, *_ in recorder.changes[op.id]]
    assert api.INPUT_REQUIRED in statuses  # it showed as waiting for the answer meanwhile


async def test_a_question_nobody_can_be_shown_is_refused(engine, fake, recorder):
    @fake.tool("odd")
    async def odd(call: ToolCall) -> dict:
        try:
            await call.elicit("Pick", {"type": "object", "properties": {"x": {"type": "array"}}})
        except Exception as exc:  # noqa: BLE001 - the client's error answer is the point
            return text_result(f"refused: {exc}")
        return text_result("asked")

    final = await finished(engine, (await engine.start_call("fake", "odd", {})).id)
    assert final.message.startswith("refused: hostapp cannot show this question")
    assert recorder.questions == []


class FakeRunner:
    def __init__(self, op_id: str, server: str):
        self.id, self.server, self.done = op_id, server, False


def test_routing_knows_which_operation_owns_a_request():
    routing = RequestRouting()
    session = SimpleNamespace(scope=None)
    adopted = SimpleNamespace(scope="sid-1")
    a, b = FakeRunner("a", "lab"), FakeRunner("b", "lab")
    routing.add(a)
    routing.add(b)
    routing.own(a, session, 7)
    routing.own(b, adopted, 7)  # the same id in an adopted earlier session: another request
    assert routing.owner("lab", None, 7) is a
    assert routing.owner("lab", "sid-1", 7) is b
    assert routing.owner("other", None, 7) is None and routing.owner("lab", None, None) is None
    routing.disown(a, session, 7)
    assert routing.owner("lab", None, 7) is None
    routing.own(a, session, 8)
    routing.forget(a)
    assert routing.owner("lab", None, 8) is None and "a" not in routing.runners
    assert routing.in_flight_of("lab") == [b]
    routing.bind_http_session(b, None, ("sid-1", "2025-11-25"))
    routing.bind_http_session(a, None, ("sid-1", "2025-11-25"))
    assert routing.shares_http_session(b, "sid-1")
    routing.bind_http_session(a, ("sid-1", "2025-11-25"), None)
    assert not routing.shares_http_session(b, "sid-1")


class RefusingTaskServer(FakeServer):
    """A 2025-11-25 task server whose tool runs as task T-1 and that answers every
    ``tasks/cancel`` "Task not found", as the TypeScript SDK's example server did for a
    task of another session; the task completes once ``finish`` is set."""

    def __init__(self) -> None:
        super().__init__("tasks")
        self.finish = False

    def handle(self, link, obj) -> None:
        method, rid = obj.get("method"), obj.get("id")
        task = {"taskId": "T-1", "status": "completed" if self.finish else "working", "pollInterval": 50,
                "ttl": 60000, "createdAt": "2026-11-23T12:00:00Z", "lastUpdatedAt": "2026-11-23T12:00:00Z"}
        if method == "initialize":
            self.received.append(obj)
            link.to_client(Response(rid, {
                "protocolVersion": "2025-11-25", "serverInfo": {"name": self.name, "version": "0"},
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}, "cancel": {}}}}))
        elif method == "tools/list":
            self.received.append(obj)
            link.to_client(Response(rid, {"tools": [{"name": "crunch", "inputSchema": {"type": "object"},
                                                     "execution": {"taskSupport": "required"}}]}))
        elif method == "tools/call":
            self.received.append(obj)
            link.to_client(Response(rid, {"task": task}))
        elif method == "tasks/get":
            self.received.append(obj)
            link.to_client(Response(rid, task))
        elif method == "tasks/result":
            self.received.append(obj)
            link.to_client(Response(rid, text_result("crunched")))
        elif method == "tasks/cancel":
            self.received.append(obj)
            link.to_client(ErrorResponse(rid, ErrorObject(-32602, "Task not found")))
        else:
            super().handle(link, obj)


async def test_a_cancel_the_server_refuses_is_shown_not_swallowed(isolated_home, recorder, monkeypatch):
    server = RefusingTaskServer()
    monkeypatch.setattr(supervisor, "make_transport", server.transport_factory)
    engine = Engine(isolated_home, recorder, secrets=SecretStore(isolated_home, backend=InMemoryKeyring()))
    recorder.engine = engine
    facade = LocalEngine(engine)
    await engine.start()
    try:
        await engine.add_server(ServerConfig(name="tasks", transport="stdio", command="in-memory"))
        await engine.connected("tasks", timeout=DEADLINE)
        op = await engine.start_call("tasks", "crunch", {})
        await until_async(lambda: engine.journal.get_operation(op.id).handle_ref, what="the task's handle committed")
        with pytest.raises(api.ServerError, match="Task not found") as refused:
            await facade.cancel(op.id)
        assert refused.value.code == -32602
        view = await facade.operation(op.id)
        assert "Task not found" in (view.message or "") and view.status not in api.TERMINAL
        assert [d["message"] for i, k, d in recorder.events if i == op.id and k == "cancel_refused"] == [
            "Task not found"]
        server.finish = True  # the task goes on, and its outcome is delivered
        final = await finished(engine, op.id)
        events = await engine.events(op.id)
    finally:
        await engine.stop()
    assert final.status == api.COMPLETED
    assert any(e["kind"] == "cancel_refused" and e["data"]["message"] == "Task not found" for e in events)
    assert OperationJournal(isolated_home / "journal.sqlite3").get_operation(op.id).mechanism == "tasks_2025"


async def test_a_status_message_is_not_overwritten_by_progress_published_while_it_was_being_journaled(
        engine, fake, recorder, monkeypatch):
    # A step arrives, then at once a question: the operation waits for the person. The
    # journal is slow to take the status (another process holds its write lock), and the
    # progress timer fires meanwhile: the step it journals is older than the status, and
    # must not come after it (a restarted client showed "step 2/4" instead of "waiting
    # for your answer" for an operation waiting for an answer).
    go, asked = asyncio.Event(), asyncio.Event()
    monkeypatch.setattr(recorder, "input_requested", lambda request: asked.set())  # left open

    @fake.tool("ask_after_a_step")
    async def ask_after_a_step(call: ToolCall) -> dict:
        await call.progress(1, 4, "step 1/4")
        await go.wait()
        await call.progress(2, 4, "step 2/4")
        await call.elicit("Go on?", {"type": "object", "properties": {}})
        return text_result("done")

    op = await engine.start_call("fake", "ask_after_a_step", {})
    await until_async(lambda: 1 in recorder.progress_of(op.id))
    busy = sqlite3.connect(engine.journal.path, isolation_level=None)
    busy.execute("BEGIN IMMEDIATE")
    go.set()
    await asyncio.sleep(0.3)  # the status waits for the journal; the progress timer fires meanwhile
    assert not asked.is_set()
    busy.execute("COMMIT")
    busy.close()
    await asyncio.wait_for(asked.wait(), DEADLINE)
    await engine.journal.flush()
    record = engine.journal.get_operation(op.id)
    assert (record.status, record.progress, record.message) == (api.INPUT_REQUIRED, 2, "waiting for your answer")
