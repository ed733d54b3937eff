"""One operation in this process: its mechanism fed, and the actions it returns carried out.

An :class:`OperationRunner` holds the journal row of one operation and the mechanism (a
pure state machine from :mod:`hostapp.mechanisms`) that carries it, feeds the mechanism
what arrives (answers, notifications, stream event ids, a lost connection, a timer, the
person's answer) one hook at a time, and carries out the actions it returns. It keeps the
operation's lifecycle (its status, its end, its wake-up and deadline timers, its tasks)
and composes the parts that own the rest of its state, each seeing the operation only
through a small port declared beside it:

- :class:`~hostapp.engine.progress_intake.ProgressIntake`: what a person is shown of it,
  and the progress taken into that (the hot path);
- :class:`~hostapp.engine.adoption.OperationSessions`: the session it runs in, the earlier
  one it adopts after a restart, the HTTP session its handle lives in;
- :class:`~hostapp.engine.committed_handle.CommittedHandle`: its handle's keyring entry;
- :class:`~hostapp.engine.outgoing.OutgoingRequests`: what it sends, and how each request
  ended;
- :class:`~hostapp.engine.cancel_exchange.CancelExchange`: a cancel and its answer;
- :class:`~hostapp.engine.kept_question.KeptQuestion`: a server's question kept in the
  journal across a restart.

A runner sees the rest of the engine only through
:class:`~hostapp.engine.operation.RunnerContext`: the journal, the keyring's handles, the
request routing, the first-contact gate and poll budgets, the questions to the person,
the server connections and the listener. That protocol, the constants a runner follows
and how an operation is shown live in :mod:`hostapp.engine.operation`.

Write-ahead, in this order: the operation row is committed (status ``pending``), the
mechanism's pre-send handle is committed (its secret in the keyring), the JSON-RPC id is
committed, and only then does the request leave. Every later server-issued handle is
committed before the next action runs. Terminal outcomes go through
``journal.finish_operation``, which succeeds once: that is what makes delivery
exactly-once across crashes.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.engine.adoption import OperationSessions
from hostapp.engine.cancel_exchange import CancelExchange
from hostapp.engine.committed_handle import CommittedHandle
from hostapp.engine.kept_question import KeptQuestion
from hostapp.engine.operation import (
    PLAIN_REQUEST_MECHANISMS,
    QUESTION_EXPIRED,
    SESSION_BOUND_MECHANISMS,
    RunnerContext,
    lost_at_stop,
    mechanism_for,
    operation_view,
    outcome_message,
    status_of_mark,
)
from hostapp.engine.outgoing import OutgoingRequests
from hostapp.engine.progress_intake import ProgressIntake
from hostapp.engine.questions import PERSON_METHODS, SAMPLING
from hostapp.engine.session import ClientSession
from hostapp.mechanisms import actions as A
from hostapp.mechanisms.base import Mechanism
from hostapp.protocol.jsonrpc import RpcError
from hostapp.store.status import OperationStatus

if TYPE_CHECKING:
    from hostapp.store.journal import OperationRecord

log = logging.getLogger(__name__)


class OperationRunner:
    """One operation in this process: feeds its mechanism and executes its actions.

    States follow the journal's status: pending → running ⇄ input_required → a terminal
    status (``ending`` from the first moment of :meth:`finish`). ``attach`` binds it to a
    live session (after connect or reconnect). It is the port of each of its parts.
    """

    def __init__(self, context: RunnerContext, record: OperationRecord, mechanism: Mechanism, *,
                 http_session: tuple[str, str] | None = None, committed_secret: str | None = None):
        self.context = context
        self.record = record
        self._mech = mechanism
        #: What a person is shown of it, and the progress taken into that.
        self.progress = ProgressIntake(operation_view(record), mechanism=mechanism, clock=context.clock,
                                       progressed=functools.partial(context.progressed, self))
        #: The sessions it runs in, and the earlier one it may adopt after a restart.
        self.sessions = OperationSessions(self, context, progress_token=self.progress_token,
                                          on_progress=self.progress.on_progress, http_session=http_session)
        #: Its handle as committed: the keyring entry its journal row points at.
        self.handle = CommittedHandle(context, ref=record.handle_ref, committed_secret=committed_secret,
                                      lives_in=self.sessions.handle_lives_in)
        self._wake_handle: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        #: A cancel asked for, and the server's answer to it.
        self.cancelling = CancelExchange(self)
        #: What it sends its server, and how each request ended.
        self.requests = OutgoingRequests(self, context, sessions=self.sessions, cancelling=self.cancelling)
        # Restored with a question still open: the host quit before it was answered.
        self._question_left_open = record.status == OperationStatus.INPUT_REQUIRED
        self.kept_question = KeptQuestion(self)  # a question its server will not send again
        # Restored at start-up and not yet heard from: its first request goes before the
        # repeat polls of the others (see FirstContactGate).
        self.awaiting_first_contact = False
        self.restored_at_start = False
        # Restored only to be ended (its handle or its server is gone): not resumed.
        self.restore_refused = False
        #: Set once it has ended and left the engine (its outcome is in the journal).
        self.finished = asyncio.Event()
        self._finishing = False  # finish() has begun
        self._expiring = False
        self._stream_event: tuple[str, int | None] | None = None  # the newest, not yet fed
        self._deadline_handle: asyncio.TimerHandle | None = None
        if record.deadline is not None:
            delay = max(0.0, record.deadline - context.clock())
            self._deadline_handle = asyncio.get_running_loop().call_later(delay, self._deadline_passed)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def view(self) -> api.OperationView:
        """What a person is shown of this operation now."""
        return self.progress.view

    @property
    def mech(self) -> Mechanism:
        """The mechanism carrying the operation."""
        return self._mech

    @mech.setter
    def mech(self, mechanism: Mechanism) -> None:
        self._mech = self.progress.mechanism = mechanism

    @property
    def server(self) -> str:
        return self.record.server

    @property
    def handle_ref(self) -> str | None:
        """The keyring reference of its committed handle (None: no secret kept)."""
        return self.handle.ref

    @property
    def session(self) -> ClientSession | None:
        """The session it runs in now (None while it has none)."""
        return self.sessions.current

    @property
    def http_session(self) -> tuple[str, str] | None:
        """The HTTP session its handle lives in (session id, protocol version), if any."""
        return self.sessions.http_session

    @http_session.setter
    def http_session(self, value: tuple[str, str] | None) -> None:
        self.sessions.http_session = value

    @property
    def bound_to_its_session(self) -> bool:
        """Does its mechanism's handle work only in the HTTP session that issued it?"""
        return self.mech.name in SESSION_BOUND_MECHANISMS

    @property
    def waits_to_start(self) -> bool:
        """Its call has not taken a session yet (it waits for the connection): nothing of
        it went out, so no loss of a session concerns it."""
        return self.record.jsonrpc_id is None and self.view.status == OperationStatus.PENDING

    @property
    def original_in_flight(self) -> int:
        """Its call is out and awaited here: how that request ends (answered, refused
        unprocessed with its session, lost) is heard from it, not from the connection."""
        return self.requests.original_in_flight

    @property
    def awaiting_new_session(self) -> bool:
        """Its call was refused with a session the server forgot, and waits for the next
        session to go out again: that session must not attach it as a lost request."""
        return self.requests.awaiting_new_session

    @property
    def done(self) -> bool:
        return self.progress.done

    @property
    def ending(self) -> bool:
        """Ended, or being ended (its terminal status is on its way to the journal): a
        change of status or question from now on would come after its end."""
        return self._finishing or self.done

    @property
    def progress_token(self) -> str:
        return f"op-{self.record.id}"

    # -- feeding -----------------------------------------------------------------

    async def feed(self, produce: Callable[[], list[A.Action]]) -> None:
        """Run one mechanism hook and carry out what it returns, one hook at a time."""
        async with self._lock:
            if self.done or self.context.stopping:
                return
            actions = produce()
            await self._execute(actions)

    def feed_soon(self, produce: Callable[[], list[A.Action]]) -> None:
        self.spawn(self.feed(produce))

    def stream_event_soon(self, event_id: str, retry_ms: int | None) -> None:
        """An SSE event id arrived. One comes with every event, thousands a second while a
        stream is replayed after a restart, and only the newest matters: one feed is
        queued at a time, and it hands the mechanism whatever id is newest by then."""
        self.context.heard_from(self)
        queued = self._stream_event is not None
        self._stream_event = (event_id, retry_ms)
        if not queued:
            self.feed_soon(self._take_stream_event)

    def _take_stream_event(self) -> list[A.Action]:
        event, self._stream_event = self._stream_event, None
        if event is None:
            return []
        return self.mech.on_stream_event(event[0], event[1], now=self.context.clock())

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as one of this operation's tasks (cancelled at shutdown; a failure
        is logged and shown as a problem)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("operation %s: %s", self.id, exc, exc_info=exc)
            self.context.problem("engine", f"operation {self.id} hit an internal error: {exc}")

    # -- executing ----------------------------------------------------------------

    async def _execute(self, actions: list[A.Action]) -> None:
        ctx = self.context
        for action in actions:
            if isinstance(action, A.CommitHandle):
                await self._commit(action)
            elif isinstance(action, A.ReportProgress):
                self.progress.step(action.progress, action.total, action.message)
            elif isinstance(action, A.MarkStatus):
                status = status_of_mark(action.status)
                if status == OperationStatus.RUNNING:
                    self.kept_question.server_went_on()
                await self.set_status(status, action.message)
            elif isinstance(action, A.ScheduleWake):
                self._schedule_wake(action.at)
            elif isinstance(action, A.SendRequest):
                self.spawn(self.requests.send(action))
            elif isinstance(action, A.SendNotification):
                self.spawn(self.requests.notify(action.method, action.params))
            elif isinstance(action, A.CancelRequest):
                if self.record.jsonrpc_id is not None:
                    self.requests.abandon_original(self.record.jsonrpc_id, action.reason or "cancelled")
            elif isinstance(action, A.ResumeSseStream):
                self.spawn(self.requests.resume_stream(action.last_event_id))
            elif isinstance(action, A.AskInput):
                self.spawn(self._ask(action))
            elif isinstance(action, A.PartialResult):
                ctx.journal.append_event(self.id, "partial_result", {"result": action.result})
                ctx.operation_event(self.id, "partial_result", {"result": action.result})
            elif isinstance(action, A.Deliver):
                failed = action.error is not None or (action.result or {}).get("isError")
                status = OperationStatus.FAILED if failed else OperationStatus.COMPLETED
                await self.finish(status, result=action.result, error=action.error)
            elif isinstance(action, A.Cancelled):
                await self.finish(OperationStatus.CANCELLED, error={"code": None, "message": action.message})
            elif isinstance(action, A.Unknown):
                await self.finish(OperationStatus.EXPIRED if self._expiring else OperationStatus.UNKNOWN,
                                   error={"code": None, "message": action.reason})
            else:  # pragma: no cover - a new action type must be handled here
                raise TypeError(f"unhandled action {type(action).__name__}")

    async def _commit(self, action: A.CommitHandle) -> None:
        """Journal the mechanism's state and its secret (see CommittedHandle.commit for the
        order that survives a crash at any point)."""
        mechanism = action.state.get("mechanism")

        async def point_at(ref: str | None, resumable: bool) -> None:
            sent = self.record.jsonrpc_id is not None
            self.progress.change(lost_at_stop=lost_at_stop(self.view.status, sent, mechanism, resumable),
                                 mechanism=mechanism or self.view.mechanism)
            self.record.mechanism, self.record.resumable = mechanism, resumable
            await self.context.journal.update_operation(self.id, handle=action.state, handle_ref=ref,
                                                        mechanism=mechanism, resumable=resumable)

        # The handle is kept so far if the journal says so; the view adds the mechanism.
        await self.handle.commit(action.secret, bool(self.record.resumable), point_at)

    def position_to_keep(self) -> list[str] | None:
        """Where it has got to beyond its committed handle ([the handle_ref it extends, the
        newer secret]), for the positions kept at a clean quit; None if nothing is newer.

        None too when another mechanism has taken the operation over since that commit
        (a plain call's SSE stream, then a draft stream the server created) and the quit
        came before the takeover was committed: the journal still names the earlier
        mechanism, which must not be handed the new one's secret (a stream id is no
        event id). The committed handle replays the takeover."""
        if self.done or self.handle.ref is None or self.mech.name != self.record.mechanism:
            return None
        return self.handle.newer_position(self.mech.secret())

    async def set_status(self, status: OperationStatus, message: str | None) -> None:
        """Move between running and input_required (journaled, shown). Not while the host
        quits: a question it leaves open was not answered, and stays open in the journal.
        Nor once it is ending: its end is journaled, and nothing comes after it."""
        if self.context.stopping or self.ending:
            return
        if status == OperationStatus.INPUT_REQUIRED:
            self._question_left_open = False  # the server asks (again): it has not given up
        if message is None and status == OperationStatus.INPUT_REQUIRED:
            message = "waiting for your answer"
        if self.view.status == status:
            if message and message != self.view.message:
                self._show_status_message(message)
            return
        old = self.view.status
        # Progress taken before the status goes to the journal's queue first: published by
        # the timer while the status is being committed, it would land after it, and its
        # older message would replace the status's ("waiting for your answer").
        self.context.journal_progress(self)
        await self.context.journal.update_operation(self.id, status=status, message=message)
        self.progress.change(status=status, needs_input=status == OperationStatus.INPUT_REQUIRED,
                             message=message or self.view.message, updated_at=self.context.clock())
        data = {"from": old, "to": status, "message": message}  # the journal records it with the change
        self.context.operation_event(self.id, "status", data)
        self.context.changed(self)
        self.progress.step_in_message(message)

    def _show_status_message(self, message: str) -> None:
        """A new message from the server under an unchanged status (a task telling how far
        it got, as fastmcp does in its statusMessage): journaled and shown like a status."""
        ctx = self.context
        # Batched like progress (a task may say something new at every poll): not a
        # write-ahead record, nothing is decided by it.
        ctx.journal.record_progress(self.id, self.view.progress, self.view.total, message)
        self.progress.change(message=message, updated_at=ctx.clock())
        data = {"message": message}
        ctx.journal.append_event(self.id, "status_message", data)
        ctx.operation_event(self.id, "status_message", data)
        ctx.changed(self)
        self.progress.step_in_message(message)

    async def finish(self, status: OperationStatus, *, result: dict[str, Any] | None = None,
                     error: dict[str, Any] | None = None) -> None:
        """End the operation with a terminal status: journaled once, its handle deleted, its
        questions withdrawn, its requests forgotten."""
        ctx = self.context
        self._finishing = True
        self._cancel_wake()
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
        if status == OperationStatus.FAILED:
            error = self._question_expired(status, result, error)
        ctx.publish_progress(self)  # the last progress is journaled and told before the end
        first = await ctx.journal.finish_operation(self.id, status, result=result, error=error)
        ended = ctx.clock()
        self.progress.change(status=status, result=result, error=error,
                             message=outcome_message(status, result, error) or self.view.message,
                             needs_input=False, ended_at=ended, updated_at=ended)
        await self.handle.delete()
        ctx.withdraw_questions(self.id)
        self.cancelling.answered(None)
        self.requests.drop_original_waiter()
        await self.sessions.end()
        if first:
            data = {"to": status, "error": error}  # the journal records it with the change
            ctx.operation_event(self.id, "status", data)
            ctx.changed(self)
        ctx.forget(self)
        self.finished.set()

    def _question_expired(self, status: OperationStatus, result: dict[str, Any] | None,
                          error: dict[str, Any] | None) -> dict[str, Any] | None:
        """The error to journal: a plain request restored with its question open, and
        answered with an error without being asked again, says that the server's question
        expired (the server's own words follow)."""
        mechanism = self.record.mechanism or self.mech.name
        if not self._question_left_open or mechanism not in PLAIN_REQUEST_MECHANISMS:
            return error
        said = outcome_message(status, result, error)
        message = f"{QUESTION_EXPIRED}: {said}" if said else QUESTION_EXPIRED
        return {**(error or {"code": None}), "message": message}

    # -- timers -----------------------------------------------------------------

    def _schedule_wake(self, at: float) -> None:
        self._cancel_wake()
        loop = asyncio.get_running_loop()
        delay = max(0.0, at - self.context.clock())
        self._wake_handle = loop.call_later(
            delay, lambda: self.feed_soon(lambda: self.mech.wake(now=self.context.clock())))

    def _deadline_passed(self) -> None:
        """The operation's own deadline: give it up as expired (the mechanism says how)."""
        self._expiring = True
        self.feed_soon(lambda: self.mech.expire(now=self.context.clock()))

    def _cancel_wake(self) -> None:
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None

    # -- starting and asking ------------------------------------------------------------

    async def send_original(self) -> None:
        """Prepare, commit, then send the call itself (write-ahead)."""
        ctx = self.context
        session = await self.sessions.live()
        if self.done:
            return  # cancelled while waiting for the connection
        # From here on the call is on its way: a loss of the session meanwhile is heard
        # from its own request (never sent: it goes out in the next session), not taken
        # for a request that was in flight.
        with self.requests.call_on_its_way():
            # Nothing has left yet: choose again now that the server (and the tool) are known.
            self.mech = mechanism_for(ctx.connection(self.record.server), self.record.tool)
            params = {"name": self.record.tool, "arguments": self.record.params.get("arguments", {})}
            to_send, pre = self.mech.prepare(params, now=ctx.clock())
            async with self._lock:
                await self._execute(pre)
            if self.done:
                return
            rid = session.ids.next()
            self.record.jsonrpc_id = rid
            self.record.mechanism = self.record.mechanism or self.mech.name
            await ctx.journal.update_operation(self.id, jsonrpc_id=rid, status=OperationStatus.RUNNING,
                                               mechanism=self.record.mechanism)
            self.progress.change(status=OperationStatus.RUNNING, mechanism=self.record.mechanism,
                                 lost_at_stop=lost_at_stop(OperationStatus.RUNNING, True, self.view.mechanism,
                                                           bool(self.record.resumable)))
            ctx.changed(self)
        # (No wait between here and the send counting itself as out.)
        await self.requests.send_call(session, self.mech.method, to_send, rid)

    async def _ask(self, action: A.AskInput) -> None:
        self.context.heard_from(self)  # it waits for the person now, not for the server
        responses: dict[str, Any] = {}
        for key, req in action.requests.items():
            params = (req or {}).get("params") or {}
            method = (req or {}).get("method")
            if method in PERSON_METHODS:
                try:
                    responses[key] = await self.context.ask_person(self, params, method=method)
                except RpcError:
                    if method == SAMPLING:  # an input response cannot refuse sampling: the call ends
                        await self.feed(lambda: self.mech.cancel(now=self.context.clock()))
                        return
                    responses[key] = {"action": "decline"}  # it could not be shown; said in the timeline
            elif (req or {}).get("method") == "roots/list":
                responses[key] = self.context.roots_of(self.server)
            else:
                responses[key] = {"action": "decline"}
        await self.feed(lambda: self.mech.answer_input(responses, now=self.context.clock()))

    # -- cancelling ----------------------------------------------------------------------

    async def cancel(self) -> None:
        """Cancel the operation, and wait (at most CANCEL_ANSWER_SECONDS) for the server's
        answer to the cancel request, if the mechanism sends one. RpcError when the server
        refused it (the operation goes on, and says so)."""
        await self.cancelling.cancel(lambda: self.mech.cancel(now=self.context.clock()))

    async def show_cancel_refused(self, message: str, data: dict[str, Any]) -> None:
        """The server refused the cancel: journaled and shown, its status unchanged."""
        ctx = self.context
        ctx.journal_progress(self)  # older progress first (see set_status)
        await ctx.journal.update_operation(self.id, message=message)
        self.progress.change(message=message, updated_at=ctx.clock())
        ctx.journal.append_event(self.id, "cancel_refused", data)
        ctx.operation_event(self.id, "cancel_refused", data)
        ctx.changed(self)

    # -- lifecycle hooks ---------------------------------------------------------------

    async def attach(self, session: ClientSession, *, restored: bool) -> None:
        """A (new) session is ready: resume the operation on it."""
        self.sessions.run_in(session)
        stream_session = None
        if restored:
            # Each attach looks again, as the session may be new.
            stream_session = await self.sessions.adopt_earlier(session, look_again=True)
            self.kept_question.attached(stream_session or (session if self.sessions.is_its_own(session) else None))
        self.requests.await_original(stream_session or session)
        await self.feed(lambda: self.mech.resume(now=self.context.clock()))

    def shutdown(self) -> None:
        self._cancel_wake()
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
        for task in list(self._tasks):
            task.cancel()

