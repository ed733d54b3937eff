"""One operation in this process: its mechanism fed, and the actions it returns carried out.

An :class:`OperationRunner` holds the journal row of one operation and the mechanism (a
pure state machine from :mod:`hostapp.mechanisms`) that carries it, feeds the mechanism
what arrives (answers, notifications, stream event ids, a lost connection, a timer, the
person's answer) one hook at a time, and carries out the actions it returns: commit a
handle, send a request, resume a stream, ask the person, end the operation.

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
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.engine.budget import POLL_METHODS
from hostapp.engine.handles import wrap_secret
from hostapp.engine.kept_question import KeptQuestion
from hostapp.engine.operation import (
    CANCEL_ANSWER_SECONDS,
    OPTIONAL_METHODS,
    PLAIN_REQUEST_MECHANISMS,
    QUESTION_EXPIRED,
    SESSION_BOUND_MECHANISMS,
    RunnerContext,
    mechanism_for,
    operation_view,
    outcome_message,
    progress_in_message,
    server_busy,
    status_of_mark,
    survives_a_stop,
)
from hostapp.engine.session import MAX_INPUT_ROUNDS, ClientSession
from hostapp.engine.supervisor import session_refused
from hostapp.mechanisms import actions as A
from hostapp.mechanisms.base import Mechanism
from hostapp.protocol.jsonrpc import (
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    RequestId,
    RpcError,
)
from hostapp.store.status import TERMINAL, OperationStatus
from hostapp.transport.base import ConnectionLost, SessionExpired, TransportError

if TYPE_CHECKING:
    from hostapp.engine import api
    from hostapp.store.journal import OperationRecord

log = logging.getLogger(__name__)


class OperationRunner:
    """One operation in this process: feeds its mechanism and executes its actions.

    States follow the journal's status: pending → running ⇄ input_required → a terminal
    status. ``attach`` binds it to a live session (after connect or reconnect).
    """

    def __init__(self, context: RunnerContext, record: OperationRecord, mechanism: Mechanism, *,
                 http_session: tuple[str, str] | None = None, committed_secret: str | None = None):
        self.context = context
        self.record = record
        self.mech = mechanism
        self.session: ClientSession | None = None
        # The progress fields live here, set in place per notification; the view is made
        # of them when asked (see the view property).
        self._progress: float | None
        self._total: float | None
        self._message: str | None
        self._updated_at: float
        self._view: api.OperationView
        self._progressed = False
        self.view = operation_view(record)
        self.handle_ref: str | None = record.handle_ref
        self._wake_handle: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._url_rounds = 0
        self._original_waiter: asyncio.Task | None = None
        self._original_session: ClientSession | None = None
        self._http_session: tuple[str, str] | None = None   # (session id, protocol version)
        self._stream_session: ClientSession | None = None  # an adopted earlier session
        # Restored with the HTTP session its handle is bound to: whatever goes out first
        # (a poll after attach, or a cancel asked for before it) adopts that session.
        self._adopt_pending = http_session is not None
        self._adopting = asyncio.Lock()
        # A cancel asked for: the method of its request, and who waits for its answer.
        self._cancel_method: str | None = None
        self._cancel_answer: asyncio.Future[None] | None = None
        # Restored with a question still open: the host quit before it was answered.
        self._question_left_open = record.status == OperationStatus.INPUT_REQUIRED
        self.kept_question = KeptQuestion(self)  # a question its server will not send again
        # Restored at start-up and not yet heard from: its first request goes before the
        # repeat polls of the others (see FirstContactGate).
        self.awaiting_first_contact = False
        self.restored_at_start = False
        # Restored only to be ended (its handle or its server is gone): not resumed.
        self.restore_refused = False
        #: Its call is out and awaited here: how that request ends (answered, refused
        #: unprocessed with its session, lost) is heard from it, not from the connection.
        self.original_in_flight = 0
        #: Set once it has ended and left the engine (its outcome is in the journal).
        self.finished = asyncio.Event()
        self._finishing = False  # finish() has begun
        # Its call was refused with a session the server forgot, and waits for the next
        # session to go out again: that session must not attach it as a lost request.
        self.awaiting_new_session = False
        # What the keyring holds under handle_ref (None: unknown, the next commit writes it).
        self._committed_secret = committed_secret
        self._expiring = False
        self._stream_event: tuple[str, int | None] | None = None  # the newest, not yet fed
        self._deadline_handle: asyncio.TimerHandle | None = None
        if record.deadline is not None:
            delay = max(0.0, record.deadline - context.clock())
            self._deadline_handle = asyncio.get_running_loop().call_later(delay, self._deadline_passed)
        self.http_session = http_session

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def view(self) -> api.OperationView:
        """What a person is shown of this operation now: the last snapshot, with the
        progress taken since then (copied into a new snapshot once, when asked)."""
        if self._progressed:
            self._progressed = False
            self._view = replace(self._view, progress=self._progress, total=self._total, message=self._message,
                                 updated_at=self._updated_at)
        return self._view

    @view.setter
    def view(self, view: api.OperationView) -> None:
        self._view = view
        self._progressed = False
        # Progress is set in place (see _take_progress): a copy of the frozen view per
        # notification was a fifth of the intake's time.
        self._progress, self._total, self._message = view.progress, view.total, view.message
        self._updated_at = view.updated_at

    @property
    def server(self) -> str:
        return self.record.server

    @property
    def http_session(self) -> tuple[str, str] | None:
        """The HTTP session its handle lives in (session id, protocol version), if any."""
        return self._http_session

    @http_session.setter
    def http_session(self, value: tuple[str, str] | None) -> None:
        # Indexed by the routing, so that an ending operation finds the others of its
        # session without looking at every operation.
        old, self._http_session = self._http_session, value
        self.context.bind_http_session(self, old, value)

    @property
    def done(self) -> bool:
        return self._view.status in TERMINAL  # the status is never pending in the live fields

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

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run ``coro`` as one of this operation's tasks (cancelled at shutdown; a failure
        is logged and shown as a problem)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

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
                self._show_progress(action)
            elif isinstance(action, A.MarkStatus):
                status = status_of_mark(action.status)
                if status == OperationStatus.RUNNING:
                    self.kept_question.server_went_on()
                await self.set_status(status, action.message)
            elif isinstance(action, A.ScheduleWake):
                self._schedule_wake(action.at)
            elif isinstance(action, A.SendRequest):
                self.spawn(self._send_request(action))
            elif isinstance(action, A.SendNotification):
                self.spawn(self._send_notification(action.method, action.params))
            elif isinstance(action, A.CancelRequest):
                if self.record.jsonrpc_id is not None:
                    self._abandon_original(self.record.jsonrpc_id, action.reason or "cancelled")
            elif isinstance(action, A.ResumeSseStream):
                self.spawn(self._resume_stream(action.last_event_id))
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
        """Journal the mechanism's state and its secret, in an order that survives a crash
        at any point: the new secret is written, then the journal points at it, and only
        then is the old one deleted."""
        ctx = self.context
        old_ref = ref = self.handle_ref
        resumable = bool(self.record.resumable)  # the handle is kept; the view adds the mechanism
        if action.secret is None:
            ref = None
            self._committed_secret = None
        elif not await ctx.keyring_usable():
            resumable, ref = False, None
        else:
            value = self._wrap_secret(action.secret)
            if value != self._committed_secret or ref is None:
                try:
                    ref = await ctx.put_handle(value)
                    self._committed_secret = value
                    resumable = True  # also when it started while the keyring was failing
                except Exception as exc:  # noqa: BLE001 - the keyring failed now: carry on in memory, say it
                    ctx.keyring_failed(exc)
                    resumable, ref = False, None
        self.handle_ref = ref
        mechanism = action.state.get("mechanism")
        self.view = replace(self.view, resumable=survives_a_stop(resumable, mechanism),
                            mechanism=mechanism or self.view.mechanism)
        self.record.mechanism, self.record.resumable = mechanism, resumable
        await ctx.journal.update_operation(self.id, handle=action.state, handle_ref=ref,
                                           mechanism=mechanism, resumable=resumable)
        if old_ref is not None and old_ref != ref:
            await ctx.delete_secret(old_ref)

    def _wrap_secret(self, secret: str) -> str:
        """The keyring value of a handle: the mechanism's secret, and the HTTP session it
        lives in (a stream can only be resumed in its own session): an adopted earlier
        session where the handle was issued, else the live one."""
        session = self._stream_session or self.session
        sid = session.transport.session_id if session is not None else None
        if sid is not None and session is not None and session.server is not None:
            self.http_session = (sid, session.server.protocol_version)
        return wrap_secret(secret, self.http_session)

    def position_to_keep(self) -> list[str] | None:
        """Where it has got to beyond its committed handle ([the handle_ref it extends, the
        newer secret]), for the positions kept at a clean quit; None if nothing is newer.

        None too when another mechanism has taken the operation over since that commit
        (a plain call's SSE stream, then a draft stream the server created) and the quit
        came before the takeover was committed: the journal still names the earlier
        mechanism, which must not be handed the new one's secret (a stream id is no
        event id). The committed handle replays the takeover."""
        ref = self.handle_ref
        if self.done or ref is None or self.mech.name != self.record.mechanism:
            return None
        secret = self.mech.secret()
        if secret is None or self._wrap_secret(secret) == self._committed_secret:
            return None
        return [ref, secret]

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
        await self.context.journal.update_operation(self.id, status=status, message=message)
        self.view = replace(self.view, status=status, needs_input=status == OperationStatus.INPUT_REQUIRED,
                            message=message or self.view.message, updated_at=self.context.clock())
        data = {"from": old, "to": status, "message": message}  # the journal records it with the change
        self.context.operation_event(self.id, "status", data)
        self.context.changed(self)
        self._progress_from_message(message)

    def _show_status_message(self, message: str) -> None:
        """A new message from the server under an unchanged status (a task telling how far
        it got, as fastmcp does in its statusMessage): journaled and shown like a status."""
        ctx = self.context
        # Batched like progress (a task may say something new at every poll): not a
        # write-ahead record, nothing is decided by it.
        ctx.journal.record_progress(self.id, self.view.progress, self.view.total, message)
        self.view = replace(self.view, message=message, updated_at=ctx.clock())
        data = {"message": message}
        ctx.journal.append_event(self.id, "status_message", data)
        ctx.operation_event(self.id, "status_message", data)
        ctx.changed(self)
        self._progress_from_message(message)

    def _progress_from_message(self, message: str | None) -> None:
        """A message stating "N/M" or "NN%" moves the progress bar as progress would."""
        step = progress_in_message(message)
        # Not mixed with progress on another scale (the request's own progress notifications).
        if step is not None and self.view.total in (None, step[1]):
            self._show_progress(A.ReportProgress(step[0], step[1], message))

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
        self.view = replace(self.view, status=status, result=result, error=error,
                            message=outcome_message(status, result, error) or self.view.message,
                            needs_input=False, ended_at=ended, updated_at=ended)
        if self.handle_ref is not None:
            await ctx.delete_secret(self.handle_ref)
        ctx.withdraw_questions(self.id)
        self._cancel_answered(None)
        self._drop_original_waiter()
        if self.session is not None:
            self.session.unroute_progress(self.progress_token)
        if self._stream_session is not None and self.http_session is not None:
            sid = self.http_session[0]
            if not ctx.shares_http_session(self, sid):
                await ctx.connection(self.record.server).release_side_session(sid)
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

    # -- I/O ----------------------------------------------------------------------

    async def _live_session(self) -> ClientSession:
        adopted = self._stream_session
        if adopted is not None and adopted.state == "ready":
            return adopted  # the earlier session its handle is bound to
        conn = self.context.connection(self.record.server)
        live = await conn.wait_ready()
        if self._adopt_pending:
            # Nothing went out yet since the restart (a cancel before the attach): it goes
            # to the session the handle is bound to, as the polls will.
            return await self._adopt_earlier_session(live) or live
        return live

    async def _give_up_adopted_session(self) -> None:
        """The server refused the adopted earlier session: go on (or end) on the live one."""
        adopted, self._stream_session = self._stream_session, None
        if adopted is not None and self.http_session is not None:
            sid, self.http_session = self.http_session[0], None
            await self.context.connection(self.record.server).release_side_session(sid)

    def _route_progress(self, session: ClientSession) -> None:
        self.session = session
        session.route_progress(self.progress_token, self._on_progress)

    def _on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        """A progress notification (the session checked its types). The hot path: fed
        synchronously, without the lock's task hop, checked once (against the step shown,
        which is beyond the mechanism's own), set in place, told and journaled coalesced."""
        if self.done or (self._progress is not None and progress <= self._progress):
            return
        self.mech.take_progress(progress)
        self._take_progress(progress, total, message)

    def _show_progress(self, action: A.ReportProgress) -> None:
        """Show and journal one progress step a mechanism reported. A mechanism's steps
        only rise, but after a host restart it starts afresh while the journal already
        holds a later step (a stream replayed from its first event id reports its steps
        again): a step not beyond the one shown is dropped, so progress never moves
        backwards."""
        if self._progress is not None and action.progress <= self._progress:
            return
        self._take_progress(action.progress, action.total, action.message)

    def _take_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self._progress = progress
        if total is not None:
            self._total = total
        if message:
            self._message = message
        self._updated_at = self.context.clock()
        self._progressed = True
        self.context.progressed(self)

    async def send_original(self) -> None:
        """Prepare, commit, then send the call itself (write-ahead)."""
        ctx = self.context
        session = await self._live_session()
        if self.done:
            return  # cancelled while waiting for the connection
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
        self.view = replace(self.view, status=OperationStatus.RUNNING, mechanism=self.record.mechanism,
                            resumable=survives_a_stop(bool(self.record.resumable), self.record.mechanism))
        ctx.changed(self)
        ctx.own_request(self, session, rid)
        await self._request(session, self.mech.method, to_send, rid, original=True)

    async def _request(self, session: ClientSession, method: str, params: dict, rid: RequestId,
                       *, original: bool, which: str | None = None,
                       on_accepted: Callable[[], None] | None = None, sent_again: bool = False) -> None:
        ctx = self.context
        self._route_progress(session)
        if original:
            self.original_in_flight += 1
        try:
            try:
                result = await session.request(method, params, request_id=rid, on_accepted=on_accepted,
                                               progress_token=self.progress_token if original else None)
            finally:
                if original:
                    self.original_in_flight -= 1
        except RpcError as exc:
            ctx.heard_from(self)
            if not original and method == self._cancel_method:
                await self._cancel_refused(exc)
            if method in OPTIONAL_METHODS:
                ctx.connection(self.record.server).optional_verdict(method, exc.code != METHOD_NOT_FOUND)
            if original and exc.code == URL_ELICITATION_REQUIRED and await self._satisfy_url_elicitations(exc):
                # -32042 means the call did not run: after the person opened the URL(s)
                # the spec has the client send it again, under a new id.
                ctx.disown_request(self, session, rid)
                rid = session.ids.next()
                self.record.jsonrpc_id = rid
                await ctx.journal.update_operation(self.id, jsonrpc_id=rid)
                ctx.own_request(self, session, rid)
                await self.set_status(OperationStatus.RUNNING, "retrying after the URL was opened")
                await self._request(session, method, params, rid, original=True)
                return
            error = exc.to_error().to_obj()
            await self.feed(lambda: self.mech.on_error(error, now=ctx.clock(),
                                                       method=None if original else which or method))
        except TransportError as exc:
            log.info("operation %s: %s", self.id, exc)
            if original and isinstance(exc, SessionExpired) and exc.unprocessed \
                    and session is not self._stream_session:
                # The server no longer knew the session (a restart forgets them) and did
                # not process the call: it goes out once more, in the new session.
                await self._send_original_again(session, method, params, rid, exc, sent_again=sent_again)
                return
            if original and server_busy(exc):
                # 408 and 429 refuse a request before it is processed: the call did not
                # run, which is known (not "unknown"); running it again is the person's
                # choice.
                error = {"code": None, "message": f"the server did not take the call ({exc}); it did not run"}
                await self.feed(lambda: self.mech.on_error(error, now=ctx.clock(), method=None))
                return
            if not original and server_busy(exc) and session.state == "ready":
                # A rate limit or timeout on a poll says nothing about the connection:
                # this operation asks again after a pause (within the poll budget), the
                # others go on; no reconnect, no re-attaching of every operation.
                self.spawn(self._resume_after(ctx.timing.busy_retry))
                return
            stream_only = isinstance(exc, ConnectionLost) and original and session.state == "ready"
            await self._request_lost(session, exc, stream_only=stream_only)
        else:
            ctx.heard_from(self)
            if not original and method == self._cancel_method:
                self._cancel_answered(None)
            if method in OPTIONAL_METHODS:
                ctx.connection(self.record.server).optional_verdict(method, True)
            await self.feed(lambda: self.mech.on_result(result, now=ctx.clock(),
                                                        method=None if original else which or method))
        finally:
            ctx.disown_request(self, session, rid)

    async def _send_original_again(self, old: ClientSession, method: str, params: dict, rid: RequestId,
                                   exc: SessionExpired, *, sent_again: bool) -> None:
        """The call was refused with its session, unprocessed (HTTP 404 for the session id):
        send it once more in the session the supervisor makes next, under a new id
        journaled first. A second refusal, or a server that now speaks another revision
        than the call was prepared for, ends it failed: it did not run."""
        ctx = self.context
        conn = ctx.connection(self.record.server)
        ctx.disown_request(self, old, rid)
        if sent_again:
            error = {"code": None, "message": f"the server refused the call's session again ({exc}); "
                                              "it did not run"}
            await self.feed(lambda: self.mech.on_error(error, now=ctx.clock(), method=None))
            return
        self.awaiting_new_session = True  # not attached to the new session as a lost request
        try:
            session = await conn.next_session(old)
        finally:
            self.awaiting_new_session = False
        if self.done:
            return  # cancelled meanwhile
        before = old.server.protocol_version if old.server is not None else None
        now_speaks = session.server.protocol_version if session.server is not None else None
        if before != now_speaks:
            error = {"code": None, "message": f"the server forgot the call's session and now speaks MCP "
                                              f"{now_speaks} (the call was made for {before}); it did not run"}
            await self.feed(lambda: self.mech.on_error(error, now=ctx.clock(), method=None))
            return
        new_rid = session.ids.next()
        self.record.jsonrpc_id = new_rid
        await ctx.journal.update_operation(self.id, jsonrpc_id=new_rid)
        data = {"message": "the server no longer knew the session (it restarted, or ended it) and had not "
                           "processed the call; sent again, once, in a new session"}
        ctx.journal.append_event(self.id, api.EVENT_SESSION_RENEWED, data)
        ctx.operation_event(self.id, api.EVENT_SESSION_RENEWED, data)
        ctx.own_request(self, session, new_rid)
        await self._request(session, method, params, new_rid, original=True, sent_again=True)

    async def _request_lost(self, session: ClientSession, exc: TransportError, *, stream_only: bool) -> None:
        """A request of this operation (or its answer stream) was lost: the mechanism
        hears of it, and whoever can carry the operation on is told.

        ``stream_only``: only this request's stream ended (the stateless era, a stream
        with no event id, a stream the transport gave up resuming): the connection itself
        is fine, so the mechanism may go on at once. Otherwise (the network, the server, a
        poll that found nobody, a session the server refuses) the supervisor reconnects,
        and the mechanism is resumed once it is back."""
        ctx = self.context
        lost = session_refused(exc)
        await self.feed(lambda: self.mech.on_disconnect(now=ctx.clock(), session_lost=lost))
        if self.done and not lost:
            return  # (a refused session is still told to the supervisor, for the others)
        if not self.done and stream_only and not lost:
            await self.feed(lambda: self.mech.resume(now=ctx.clock()))
        elif not self.done and session is self._stream_session and lost:
            # Only the adopted earlier session is gone; the connection is fine.
            await self._give_up_adopted_session()
            await self.feed(lambda: self.mech.resume(now=ctx.clock()))
        else:
            ctx.connection(self.record.server).connection_lost(
                session_gone=lost, session=session, forgotten=isinstance(exc, SessionExpired))

    async def _resume_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.feed(lambda: self.mech.resume(now=self.context.clock()))

    async def _satisfy_url_elicitations(self, exc: RpcError) -> bool:
        """Ask the person to open each URL of a -32042 error; True when all were accepted."""
        self._url_rounds += 1
        data = exc.data if isinstance(exc.data, dict) else {}
        elicitations = data.get("elicitations")
        if self._url_rounds > MAX_INPUT_ROUNDS or not isinstance(elicitations, list) or not elicitations:
            return False
        await self.set_status(OperationStatus.INPUT_REQUIRED, "the server asks you to open a URL first")
        for params in elicitations:
            if not isinstance(params, dict):
                return False
            try:
                answer = await self.context.ask_person(self, dict(params, mode=params.get("mode", "url")))
            except RpcError:
                return False
            if answer.get("action") != "accept":
                return False
        return True

    async def _send_request(self, action: A.SendRequest) -> None:
        if self.restored_at_start and not self.awaiting_first_contact:
            await self.context.after_first_contacts(self.record.server)
        if action.method in POLL_METHODS and not self.awaiting_first_contact:
            # A repeat poll: within the server's budget (see hostapp.engine.budget).
            async with self.context.poll_budget(self.record.server).poll():
                if not self.done:
                    await self._send_request_now(action)
            return
        await self._send_request_now(action)

    async def _send_request_now(self, action: A.SendRequest) -> None:
        if action.method not in OPTIONAL_METHODS:
            await self._send_one(action)
            return
        conn = self.context.connection(self.record.server)
        turn = await conn.optional_turn(action.method)
        if turn is None:
            return  # the server said it has no such method: an extra, not needed to go on
        if turn == "go":
            await self._send_one(action)
            return
        try:  # the probe: its verdict is given however it ends, so the others never wait for ever
            await self._send_one(action, on_accepted=functools.partial(conn.optional_verdict, action.method, True))
        finally:
            conn.optional_verdict(action.method, None)  # no answer either way: the next one asks

    async def _send_one(self, action: A.SendRequest, on_accepted: Callable[[], None] | None = None) -> None:
        session = await self._live_session()
        if action.reuse_jsonrpc_id and self.record.jsonrpc_id is not None:
            rid = self.record.jsonrpc_id
            self._drop_original_waiter()  # this request takes the id over
        else:
            rid = session.ids.next()
            if action.brings_original:
                self._ensure_original_waiter(session)
        self.context.own_request(self, session, rid)
        original = action.reuse_jsonrpc_id or action.method == self.mech.method
        await self._request(session, action.method, action.params, rid, original=original, which=action.method,
                            on_accepted=on_accepted)

    def _abandon_original(self, rid: RequestId, reason: str) -> None:
        """Tell the server to stop the original request, the way its era has it: close the
        request's stream where the request lives on it (2026-07-28 over HTTP), else send
        ``notifications/cancelled``."""
        session = self._original_session or self.session
        if session is not None and session.abandon(rid):
            log.info("operation %s: its request's stream was closed, which cancels it at %s", self.id,
                     session.server.protocol_version if session.server else "this revision")
            return
        self.spawn(self._send_notification("notifications/cancelled", {"requestId": rid, "reason": reason}))

    async def _send_notification(self, method: str, params: dict) -> None:
        try:
            session = await asyncio.wait_for(self._live_session(), 10)
            await session.notify(method, params)
        except (TimeoutError, TransportError) as exc:
            log.info("operation %s: could not send %s: %s", self.id, method, exc)

    def _ensure_original_waiter(self, session: ClientSession) -> None:
        """After a restart or reconnect, the original request's answer may still come
        (on a resumed SSE stream, after ``stream/resume``): wait for it under its id."""
        rid = self.record.jsonrpc_id
        if rid is None or self.done:
            return
        if self._original_waiter is not None and not self._original_waiter.done() \
                and self._original_session is session:
            return
        self._original_session = session
        self._original_waiter = asyncio.get_running_loop().create_task(self._wait_original(session, rid))
        self._tasks.add(self._original_waiter)
        self._original_waiter.add_done_callback(self._task_done)

    def _drop_original_waiter(self) -> None:
        waiter, self._original_waiter = self._original_waiter, None
        # Not when the waiter is the task finishing the operation right now.
        if waiter is not None and waiter is not asyncio.current_task():
            waiter.cancel()

    async def _wait_original(self, session: ClientSession, rid: RequestId) -> None:
        ctx = self.context
        ctx.own_request(self, session, rid)
        try:
            result = await session.await_response(rid, self.mech.method)
        except RpcError as exc:
            error = exc.to_error().to_obj()
            await self.feed(lambda: self.mech.on_error(error, now=ctx.clock()))
        except TransportError as exc:
            if self.done or self._original_waiter is not asyncio.current_task():
                return  # replaced, or the operation ended meanwhile
            if session.state != "ready":
                return  # the connection went: the supervisor reconnects and attaches again
            # Only this request's answer stream was lost (the transport gave up resuming
            # it, or the server refused it): nobody else will notice, so the mechanism
            # must hear of it, and end the operation or go on in a bounded way.
            log.info("operation %s: its answer stream was lost: %s", self.id, exc)
            self._original_waiter = None
            await self._request_lost(session, exc, stream_only=True)
        else:
            await self.feed(lambda: self.mech.on_result(result, now=ctx.clock()))

    async def _resume_stream(self, last_event_id: str) -> None:
        session = self._stream_session or await self._live_session()
        bound = self.http_session
        if bound is not None and session.transport.session_id != bound[0] \
                and self.mech.name in SESSION_BOUND_MECHANISMS:
            # The stream lives in another session: it is asked for there, never in this
            # one (whose server would refuse it, and a refusal must not touch this one).
            async with self._adopting:
                adopted = await self._adopt_now(session)
            if adopted is None:
                await self.feed(lambda: self.mech.on_disconnect(now=self.context.clock(), session_lost=True))
                return
            session = adopted
        rid = self.record.jsonrpc_id
        transport = session.transport
        if rid is None or not transport.can_resume_streams:
            await self.feed(lambda: self.mech.on_disconnect(now=self.context.clock(), session_lost=True))
            return
        self._ensure_original_waiter(session)
        try:
            await transport.resume_stream(rid, last_event_id)
        except TransportError as exc:
            lost = session_refused(exc)
            await self.feed(lambda: self.mech.on_disconnect(now=self.context.clock(), session_lost=lost))

    async def _ask(self, action: A.AskInput) -> None:
        self.context.heard_from(self)  # it waits for the person now, not for the server
        responses: dict[str, Any] = {}
        for key, req in action.requests.items():
            params = (req or {}).get("params") or {}
            if (req or {}).get("method") == "elicitation/create":
                try:
                    responses[key] = await self.context.ask_person(self, params)
                except RpcError:
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
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[None] = loop.create_future()
        self._cancel_answer = answer

        def produce() -> list[A.Action]:
            actions = self.mech.cancel(now=self.context.clock())
            for action in actions:
                if isinstance(action, A.SendRequest):
                    self._cancel_method = action.method
            return actions

        await self.feed(produce)
        if self._cancel_method is None or self.done:
            self._cancel_answered(None)  # a notification, or ended at once: nothing to wait for
        try:
            await asyncio.wait_for(asyncio.shield(answer), CANCEL_ANSWER_SECONDS)
        except TimeoutError:
            log.info("operation %s: no answer to its cancel yet", self.id)
        finally:
            if self._cancel_answer is answer:
                self._cancel_answer = None  # a later answer is still shown, to nobody waiting

    def _cancel_answered(self, error: RpcError | None) -> None:
        answer, self._cancel_answer = self._cancel_answer, None
        if answer is not None and not answer.done():
            if error is None:
                answer.set_result(None)
            else:
                answer.set_exception(error)

    async def _cancel_refused(self, exc: RpcError) -> None:
        """The server answered the cancel with an error: shown and journaled, not swallowed."""
        ctx = self.context
        message = f"the server did not cancel it: {exc.message}"
        data = {"code": exc.code, "message": exc.message}
        await ctx.journal.update_operation(self.id, message=message)
        self.view = replace(self.view, message=message, updated_at=ctx.clock())
        ctx.journal.append_event(self.id, "cancel_refused", data)
        ctx.operation_event(self.id, "cancel_refused", data)
        ctx.changed(self)
        self._cancel_answered(exc)

    # -- lifecycle hooks ---------------------------------------------------------------

    async def attach(self, session: ClientSession, *, restored: bool) -> None:
        """A (new) session is ready: resume the operation on it."""
        self.session = session
        self._route_progress(session)
        stream_session = None
        if restored:
            self._adopt_pending = True  # each attach looks again, as the session may be new
            stream_session = await self._adopt_earlier_session(session)
            bound = self.http_session
            same = bound is not None and session.transport.session_id == bound[0]
            self.kept_question.attached(stream_session or (session if same else None))
        self._ensure_original_waiter(stream_session or session)
        await self.feed(lambda: self.mech.resume(now=self.context.clock()))

    async def _adopt_earlier_session(self, live: ClientSession) -> ClientSession | None:
        """A stream lives in the HTTP session that carried it: after a restart, take that
        session over (no initialize) to resume the stream."""
        async with self._adopting:  # once, whether the attach or a cancel asks first
            if not self._adopt_pending:
                adopted = self._stream_session
                return adopted if adopted is not None and adopted.state == "ready" else None
            try:  # pending until done: what goes out meanwhile waits for it
                return await self._adopt_now(live)
            finally:
                self._adopt_pending = False

    async def _adopt_now(self, live: ClientSession) -> ClientSession | None:
        if self.http_session is None or self.mech.name not in SESSION_BOUND_MECHANISMS:
            return None
        sid, version = self.http_session
        if live.transport.session_id == sid:
            return None
        conn = self.context.connection(self.record.server)
        try:
            self._stream_session = await conn.side_session(sid, version)
        except TransportError as exc:
            log.info("operation %s: its earlier session cannot be adopted: %s", self.id, exc)
            return None
        self._stream_session.route_progress(self.progress_token, self._on_progress)
        return self._stream_session

    def shutdown(self) -> None:
        self._cancel_wake()
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
        for task in list(self._tasks):
            task.cancel()

