"""What the parts of the engine share: one object, built by the engine, handed to each part.

:class:`EngineContext` composes the journal, the keyring's handles, the request routing,
the first-contact gate, the questions to the person and the server connections, and is
what an :class:`~hostapp.engine.runner.OperationRunner` sees of the engine (it implements
:class:`~hostapp.engine.operation.RunnerContext`) and what the server-traffic handlers use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.engine.budget import PollBudget
from hostapp.engine.first_contact import FirstContactGate
from hostapp.engine.handles import HandleKeeper
from hostapp.engine.liveness import LivenessWatches
from hostapp.engine.questions import QuestionDesk
from hostapp.engine.routing import RequestRouting
from hostapp.engine.server_logs import ServerLogs
from hostapp.engine.session import ClientSession
from hostapp.engine.supervisor import ServerConnection
from hostapp.engine.task_listing import TaskListings
from hostapp.protocol.jsonrpc import RequestId
from hostapp.protocol.roots import roots_result
from hostapp.protocol.timing import Timing

if TYPE_CHECKING:
    from hostapp.engine.runner import OperationRunner
    from hostapp.store.journal import OperationJournal


#: How often the progress of an operation at most reaches the listener and the journal's
#: queue (the window and the agent's clients refresh at this rate at most anyway).
PROGRESS_PUBLISH_HZ = 30


class ProgressPublisher:
    """Progress taken but not yet told: the operations whose progress moved since their
    last publication, published together by one timer.

    Progress can arrive by the thousand a second per operation; each runner sets it in
    place, and only here, at most :data:`PROGRESS_PUBLISH_HZ` times a second, does it
    become a view snapshot for the listener and one value in the journal's queue (the
    journal keeps only the newest per operation and batch anyway). Anything else an
    operation tells (a status, its end) goes at once, its pending progress first.
    """

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._pending: dict[str, OperationRunner] = {}
        self._timer: asyncio.TimerHandle | None = None

    def later(self, runner: OperationRunner) -> None:
        if runner.id in self._pending:
            return
        self._pending[runner.id] = runner
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(1 / PROGRESS_PUBLISH_HZ, self.publish)

    def journal_now(self, runner: OperationRunner) -> None:
        """Queue the runner's pending progress for the journal now, without telling (the
        view about to be told shows it)."""
        if self._pending.pop(runner.id, None) is not None:
            self._journal(runner)

    def now(self, runner: OperationRunner) -> None:
        """Journal and tell the runner's pending progress now: before it ends, so that the
        journal has it (a terminal operation takes no progress) and its last in-flight
        view, which a follower prints progress from, comes before the terminal one."""
        if self._pending.pop(runner.id, None) is not None:
            self._journal(runner)
            self._context.listener.operation_changed(runner.view)

    def publish(self) -> None:
        """Journal and tell every pending operation's progress (the timer; also at a stop)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        pending, self._pending = self._pending, {}
        listener = self._context.listener
        for runner in pending.values():
            if runner.done:
                continue  # ended meanwhile: its end was journaled and told, its progress first
            self._journal(runner)
            listener.operation_changed(runner.view)

    def _journal(self, runner: OperationRunner) -> None:
        view = runner.view
        self._context.journal.record_progress(runner.id, view.progress, view.total, view.message)


class EngineContext:
    """The engine's parts and the state they share.

    ``listener`` may be replaced after the engine is built (the window's adapter takes the
    place of the engine's default); every part reads it through here, at each use.
    ``stopping`` is True while the host quits.
    """

    def __init__(self, *, journal: Callable[[], OperationJournal], listener: api.EngineListener,
                 clock: Callable[[], float], timing: Timing, handles: HandleKeeper, routing: RequestRouting,
                 contacts: FirstContactGate, questions: QuestionDesk,
                 connection: Callable[[str], ServerConnection]):
        self._journal = journal
        self.listener = listener
        self.clock = clock
        self.timing = timing
        self.handles = handles
        self.routing = routing
        self.contacts = contacts
        self.listings = TaskListings()
        self.questions = questions
        self._connection = connection
        self.stopping = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.progress = ProgressPublisher(self)
        self.liveness = LivenessWatches(self)
        #: What each server logged to the host lately (in memory: see the module).
        self.server_logs = ServerLogs()

    @property
    def journal(self) -> OperationJournal:
        return self._journal()

    def connection(self, server: str) -> ServerConnection:
        """The supervised connection of ``server`` (supervised from now on if it was not)."""
        return self._connection(server)

    def roots_of(self, server: str) -> dict[str, Any]:
        """The answer to ``roots/list`` for ``server``: its folders as configured now."""
        return roots_result(self._connection(server).cfg.roots)

    # -- background work ------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """An engine-wide task, cancelled when the engine stops."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_tasks(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    # -- telling the listener ----------------------------------------------------------

    def changed(self, runner: OperationRunner) -> None:
        """Tell the listener now (a status, an end, a message): the view it gets holds the
        progress taken since the last publication, which is journaled first."""
        self.progress.journal_now(runner)
        self.liveness.changed(runner)
        self.listener.operation_changed(runner.view)

    def publish_progress(self, runner: OperationRunner) -> None:
        self.progress.now(runner)

    def journal_progress(self, runner: OperationRunner) -> None:
        self.progress.journal_now(runner)

    def progressed(self, runner: OperationRunner) -> None:
        """Progress moved: journaled and told at most :data:`PROGRESS_PUBLISH_HZ` times a second."""
        self.progress.later(runner)
        self.liveness.alive(runner)

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None:
        self.listener.operation_event(op_id, kind, data)

    def problem(self, kind: str, message: str) -> None:
        self.listener.problem(kind, message)

    # -- handles in the keyring ----------------------------------------------------------

    async def keyring_usable(self) -> bool:
        return await self.handles.keyring_usable()

    async def put_handle(self, value: str) -> str:
        return await self.handles.put_handle(value)

    def keyring_failed(self, exc: Exception) -> None:
        self.handles.keyring_failed(exc)

    async def delete_secret(self, ref: str) -> None:
        await self.handles.delete_secret(ref)

    # -- request routing -----------------------------------------------------------------

    def own_request(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        self.routing.own(runner, session, rid)
        self.liveness.sent(runner)

    def disown_request(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        self.routing.disown(runner, session, rid)

    def bind_http_session(self, runner: OperationRunner, old: tuple[str, str] | None,
                          new: tuple[str, str] | None) -> None:
        self.routing.bind_http_session(runner, old, new)

    def shares_http_session(self, runner: OperationRunner, session_id: str) -> bool:
        return self.routing.shares_http_session(runner, session_id)

    def forget(self, runner: OperationRunner) -> None:
        self.contacts.heard_from(runner)  # ended: nothing more to wait for
        self.liveness.forget(runner)
        self.routing.forget(runner)
        runner.http_session = None

    # -- first contact and poll budgets ------------------------------------------------------

    def heard_from(self, runner: OperationRunner) -> None:
        self.contacts.heard_from(runner)
        self.liveness.alive(runner)

    async def after_first_contacts(self, server: str) -> None:
        await self.contacts.after_first_contacts(server)

    def poll_budget(self, server: str) -> PollBudget:
        return self.contacts.poll_budget(server)

    def holding_repeat_requests(self, server: str) -> bool:
        return self.contacts.holding(server)

    async def listed_task(self, server: str, session: ClientSession, task_id: str) -> dict[str, Any] | None:
        return await self.listings.task(server, self.connection(server).info, session, task_id)

    # -- the person ----------------------------------------------------------------------

    async def ask_person(self, runner: OperationRunner, params: dict[str, Any], *,
                         qid: str | None = None, method: str = "elicitation/create") -> dict[str, Any]:
        self.liveness.asked(runner)
        return await self.questions.ask(params, operation_id=runner.id, server=runner.server, qid=qid,
                                        method=method)

    def withdraw_question(self, qid: str) -> None:
        self.questions.withdraw(qid)

    def withdraw_questions(self, op_id: str) -> None:
        self.questions.withdraw_all_of(op_id)
