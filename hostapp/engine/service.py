"""The engine: servers kept connected, operations started, carried and resumed.

:class:`Engine` is the facade the window and the CLI use. It owns the journal, the
secret store and one :class:`~hostapp.engine.supervisor.ServerConnection` per enabled
server. Each operation is an :class:`OperationRunner`: the journal row, the mechanism
(a pure state machine from :mod:`hostapp.mechanisms`) that carries it, and the loop that
feeds the mechanism what arrives and carries out the actions it returns.

Write-ahead, in this order: the operation row is committed (status ``pending``), the
mechanism's pre-send handle is committed (its secret in the keyring), the JSON-RPC id is
committed, and only then does the request leave. Every later server-issued handle is
committed before the next action runs. At start-up every unfinished row is restored and
resumed without being asked; one whose outcome cannot be known ends as ``unknown``.
Terminal outcomes go through ``journal.finish_operation``, which succeeds once: that is
what makes delivery exactly-once across crashes.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from hostapp.engine import api
from hostapp.engine.budget import POLL_METHODS, PollBudget
from hostapp.engine.session import MAX_INPUT_ROUNDS, ClientHandlers, ClientSession, RequestContext
from hostapp.engine.supervisor import BUSY_STATUSES, ServerConnection, session_refused
from hostapp.mechanisms import actions as A
from hostapp.protocol.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    URL_ELICITATION_REQUIRED,
    RequestId,
    RpcError,
)
from hostapp.transport.base import ConnectionLost, HttpStatusError, TransportError

log = logging.getLogger(__name__)

#: An operation with no deadline of its own is given up (as expired) after this long
#: without any sign of life from the server: a week covers every realistic tool.
DEFAULT_DEADLINE_SECONDS = 7 * 24 * 3600


#: Mechanisms whose handle only works in the HTTP session that issued it: a stream, and
#: a 2025-11-25 task (receivers bind tasks to the session that made them, as
#: server-everything does). After a restart they go on in that session, adopted.
SESSION_BOUND_MECHANISMS = frozenset({"http_resumption", "tasks_2025"})

HANDLE_PREFIX = "hostapp-handle:"

#: Requests a mechanism sends for something extra (pushed task notifications) and goes on
#: without: once a server answers "method not found", they are not sent to it again.
OPTIONAL_METHODS = frozenset({"subscriptions/listen"})

#: Pause before an operation asks again after its request was answered 408 or 429.
BUSY_RETRY_SECONDS = 2.0

#: Longest a repeat request waits for restored operations' first contact (seconds).
FIRST_CONTACT_PRIORITY_SECONDS = 10.0

#: The kind of the keyring entry holding the operations' positions at the last quit.
POSITIONS_KIND = "positions"

#: After a keyring failure, how long before the keyring is asked again whether it takes
#: secrets (seconds); and the pause before a failed handle write is tried once more.
KEYRING_RECHECK_SECONDS = 30.0
KEYRING_RETRY_SECONDS = 0.5

#: The kind of the operations' handles in the keyring.
HANDLE_KIND = "handle"

#: Why an operation whose handle could not be kept ends unknown after a restart.
HANDLE_NOT_KEPT = ("the keyring was unavailable, so what could resume this operation was not kept "
                   "across the restart; it may or may not have run")


def unwrap_secret(value: str | None) -> tuple[str | None, tuple[str, str] | None]:
    """Split a keyring handle value into the mechanism's secret and its HTTP session."""
    if value is None or not value.startswith(HANDLE_PREFIX):
        return value, None
    try:
        data = json.loads(value[len(HANDLE_PREFIX):])
        session = (data["s"], data["v"]) if data.get("s") and data.get("v") else None
        return data["h"], session
    except (ValueError, KeyError, TypeError):
        return None, None


def _busy(exc: Exception) -> bool:
    return isinstance(exc, HttpStatusError) and exc.status in BUSY_STATUSES


def outcome_message(status: str, result: dict | None, error: dict | None) -> str | None:
    """The line a person reads for an ended operation: the error, or the result's first line."""
    if error and error.get("message"):
        return str(error["message"])
    if result:
        for block in result.get("content") or []:
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                return str(block["text"]).splitlines()[0][:300]
    return None


def check_question(params: dict[str, Any]) -> None:
    """Refuse an elicitation that cannot be shown to a person as MCP defines it: a form
    schema outside the allowed subset, or a URL that is not a plain http(s) address."""
    from hostapp.protocol.elicitation import (
        ElicitationSchemaError,
        UrlElicitationError,
        describe_url_request,
        parse_requested_schema,
    )

    try:
        if (params.get("mode") or "form") == "url":
            describe_url_request(params)
        else:
            parse_requested_schema(params.get("requestedSchema"))
    except (ElicitationSchemaError, UrlElicitationError) as exc:
        raise RpcError(INVALID_PARAMS, f"hostapp cannot show this question: {exc}") from None


def _mechanism_api():
    """The mechanism package's entry points (imported late: it is optional at import time)."""
    from hostapp import mechanisms

    return mechanisms


def _status_of(mark: str) -> str:
    return api.INPUT_REQUIRED if mark == "input_required" else api.RUNNING


class _NullListener:
    def operation_changed(self, op: api.OperationView) -> None: ...
    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None: ...
    def server_changed(self, server: api.ServerView) -> None: ...
    def input_requested(self, request: api.InputRequest) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


class OperationRunner:
    """One operation in this process: feeds its mechanism and executes its actions.

    States follow the journal's status: pending → running ⇄ input_required → a terminal
    status. ``attach`` binds it to a live session (after connect or reconnect).
    """

    def __init__(self, engine: "Engine", record: Any, mechanism: Any):
        self.engine = engine
        self.record = record
        self.mech = mechanism
        self.session: ClientSession | None = None
        self.view = engine._view_of(record)
        self.handle_ref: str | None = record.handle_ref
        self._wake_handle: asyncio.TimerHandle | None = None
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._questions: set[str] = set()
        self._url_rounds = 0
        self._original_waiter: asyncio.Task | None = None
        self._original_session: ClientSession | None = None
        self._http_session: tuple[str, str] | None = None   # (session id, protocol version)
        self._stream_session: ClientSession | None = None  # an adopted earlier session
        self._owned: set[tuple[str, str | None, RequestId]] = set()  # its keys in Engine._request_owner
        # Restored at start-up and not yet heard from: its first request goes before the
        # repeat polls of the others (see Engine.after_first_contacts).
        self.awaiting_first_contact = False
        self.restored_at_start = False
        self._committed_secret: str | None = None
        self._expiring = False
        self._stream_event: tuple[str, int | None] | None = None  # the newest, not yet fed
        self._deadline_handle: asyncio.TimerHandle | None = None
        if record.deadline is not None:
            delay = max(0.0, record.deadline - engine.clock())
            self._deadline_handle = asyncio.get_running_loop().call_later(delay, self._deadline_passed)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def http_session(self) -> tuple[str, str] | None:
        """The HTTP session its handle lives in (session id, protocol version), if any."""
        return self._http_session

    @http_session.setter
    def http_session(self, value: tuple[str, str] | None) -> None:
        # Indexed by the engine, so that an ending operation finds the others of its
        # session without looking at every operation.
        users = self.engine._session_users
        if self._http_session is not None:
            key = (self.record.server, self._http_session[0])
            peers = users.get(key)
            if peers is not None:
                peers.discard(self)
                if not peers:
                    del users[key]
        self._http_session = value
        if value is not None:
            users.setdefault((self.record.server, value[0]), set()).add(self)

    @property
    def done(self) -> bool:
        return self.view.status in api.TERMINAL

    @property
    def progress_token(self) -> str:
        return f"op-{self.record.id}"

    # -- feeding -----------------------------------------------------------------

    async def feed(self, produce: Callable[[], list[A.Action]]) -> None:
        """Run one mechanism hook and carry out what it returns, one hook at a time."""
        async with self._lock:
            if self.done or self.engine.stopping:
                return
            actions = produce()
            await self._execute(actions)

    def feed_soon(self, produce: Callable[[], list[A.Action]]) -> None:
        self._spawn(self.feed(produce))

    def stream_event_soon(self, event_id: str, retry_ms: int | None) -> None:
        """An SSE event id arrived. One comes with every event, thousands a second while a
        stream is replayed after a restart, and only the newest matters: one feed is
        queued at a time, and it hands the mechanism whatever id is newest by then."""
        self.engine._first_contact(self)
        queued = self._stream_event is not None
        self._stream_event = (event_id, retry_ms)
        if not queued:
            self.feed_soon(self._take_stream_event)

    def _take_stream_event(self) -> list[A.Action]:
        event, self._stream_event = self._stream_event, None
        if event is None:
            return []
        return self.mech.on_stream_event(event[0], event[1], now=self.engine.clock())

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("operation %s: %s", self.id, exc, exc_info=exc)
            self.engine.listener.problem("engine", f"operation {self.id} hit an internal error: {exc}")

    # -- executing ----------------------------------------------------------------

    async def _execute(self, actions: list[A.Action]) -> None:
        eng = self.engine
        for action in actions:
            if isinstance(action, A.CommitHandle):
                await self._commit(action)
            elif isinstance(action, A.ReportProgress):
                self._show_progress(action)
            elif isinstance(action, A.MarkStatus):
                await self._set_status(_status_of(action.status), action.message)
            elif isinstance(action, A.ScheduleWake):
                self._schedule_wake(action.at)
            elif isinstance(action, A.SendRequest):
                self._spawn(self._send_request(action))
            elif isinstance(action, A.SendNotification):
                self._spawn(self._send_notification(action.method, action.params))
            elif isinstance(action, A.CancelRequest):
                if self.record.jsonrpc_id is not None:
                    self._spawn(self._send_notification("notifications/cancelled", {
                        "requestId": self.record.jsonrpc_id, "reason": action.reason or "cancelled"}))
            elif isinstance(action, A.ResumeSseStream):
                self._spawn(self._resume_stream(action.last_event_id))
            elif isinstance(action, A.AskInput):
                self._spawn(self._ask(action))
            elif isinstance(action, A.PartialResult):
                eng.journal.append_event(self.id, "partial_result", {"result": action.result})
                eng.listener.operation_event(self.id, "partial_result", {"result": action.result})
            elif isinstance(action, A.Deliver):
                status = api.COMPLETED
                if action.error is not None:
                    status = api.FAILED
                elif (action.result or {}).get("isError"):
                    status = api.FAILED
                await self._finish(status, result=action.result, error=action.error)
            elif isinstance(action, A.Cancelled):
                await self._finish(api.CANCELLED, error={"code": None, "message": action.message})
            elif isinstance(action, A.Unknown):
                await self._finish(api.EXPIRED if self._expiring else api.UNKNOWN,
                                   error={"code": None, "message": action.reason})
            else:  # pragma: no cover - a new action type must be handled here
                raise TypeError(f"unhandled action {type(action).__name__}")

    async def _commit(self, action: A.CommitHandle) -> None:
        """Journal the mechanism's state and its secret, in an order that survives a crash
        at any point: the new secret is written, then the journal points at it, and only
        then is the old one deleted."""
        eng = self.engine
        old_ref = ref = self.handle_ref
        resumable = self.view.resumable
        if action.secret is None:
            ref = None
            self._committed_secret = None
        elif not await eng._keyring_usable():
            resumable, ref = False, None
        else:
            value = self._wrap_secret(action.secret)
            if value != self._committed_secret or ref is None:
                try:
                    ref = await eng._put_handle(value)
                    self._committed_secret = value
                    resumable = True  # also when it started while the keyring was failing
                except Exception as exc:  # the keyring failed now: carry on in memory, say it
                    eng._keyring_failed(exc)
                    resumable, ref = False, None
        self.handle_ref = ref
        self.view.resumable = resumable
        mechanism = action.state.get("mechanism")
        self.record.mechanism = mechanism
        await eng.journal.update_operation(self.id, handle=action.state, handle_ref=ref,
                                           mechanism=mechanism, resumable=resumable)
        if old_ref is not None and old_ref != ref:
            await eng._delete_secret(old_ref)

    def _wrap_secret(self, secret: str) -> str:
        """The keyring value of a handle: the mechanism's secret, and the HTTP session it
        lives in (a stream can only be resumed in its own session): an adopted earlier
        session where the handle was issued, else the live one."""
        session = self._stream_session or self.session
        sid = session.transport.session_id if session is not None else None
        if sid is None and self.http_session is None:
            return secret
        if sid is not None and session.server is not None:
            self.http_session = (sid, session.server.protocol_version)
        sid, version = self.http_session
        return HANDLE_PREFIX + json.dumps({"h": secret, "s": sid, "v": version})

    async def _set_status(self, status: str, message: str | None) -> None:
        if message is None and status == api.INPUT_REQUIRED:
            message = "waiting for your answer"
        if self.view.status == status:
            if message and message != self.view.message:
                self.view.message = message
                self.engine._changed(self)
            return
        old = self.view.status
        await self.engine.journal.update_operation(self.id, status=status, message=message)
        self.view.status = status
        self.view.needs_input = status == api.INPUT_REQUIRED
        self.view.message = message or self.view.message
        self.view.updated_at = self.engine.clock()
        data = {"from": old, "to": status, "message": message}  # the journal records it with the change
        self.engine.listener.operation_event(self.id, "status", data)
        self.engine._changed(self)

    async def _finish(self, status: str, *, result: dict | None = None, error: dict | None = None) -> None:
        eng = self.engine
        self._cancel_wake()
        if self._deadline_handle is not None:
            self._deadline_handle.cancel()
        first = await eng.journal.finish_operation(self.id, status, result=result, error=error)
        self.view.status = status
        self.view.result, self.view.error = result, error
        self.view.message = outcome_message(status, result, error) or self.view.message
        self.view.needs_input = False
        self.view.ended_at = self.view.updated_at = eng.clock()
        if self.handle_ref is not None:
            await eng._delete_secret(self.handle_ref)
        for qid in list(self._questions):
            eng._withdraw(qid)
        self._drop_original_waiter()
        if self.session is not None:
            self.session.unroute_progress(self.progress_token)
        if self._stream_session is not None and self.http_session is not None:
            sid = self.http_session[0]
            if not any(r is not self for r in eng._session_users.get((self.record.server, sid), ())):
                await eng._connection(self.record.server).release_side_session(sid)
        if first:
            data = {"to": status, "error": error}  # the journal records it with the change
            eng.listener.operation_event(self.id, "status", data)
            eng._changed(self, urgent=True)
        eng._forget(self)

    # -- timers -----------------------------------------------------------------

    def _schedule_wake(self, at: float) -> None:
        self._cancel_wake()
        loop = asyncio.get_running_loop()
        delay = max(0.0, at - self.engine.clock())
        self._wake_handle = loop.call_later(delay, lambda: self.feed_soon(lambda: self.mech.wake(now=self.engine.clock())))

    def _deadline_passed(self) -> None:
        """The operation's own deadline: give it up as expired (the mechanism says how)."""
        self._expiring = True
        self.feed_soon(lambda: self.mech.expire(now=self.engine.clock()))

    def _cancel_wake(self) -> None:
        if self._wake_handle is not None:
            self._wake_handle.cancel()
            self._wake_handle = None

    # -- I/O ----------------------------------------------------------------------

    async def _live_session(self) -> ClientSession:
        adopted = self._stream_session
        if adopted is not None and adopted.state == "ready":
            return adopted  # the earlier session its handle is bound to
        conn = self.engine._connection(self.record.server)
        return await conn.wait_ready()

    async def _give_up_adopted_session(self) -> None:
        """The server refused the adopted earlier session: go on (or end) on the live one."""
        adopted, self._stream_session = self._stream_session, None
        if adopted is not None and self.http_session is not None:
            sid, self.http_session = self.http_session[0], None
            await self.engine._connection(self.record.server).release_side_session(sid)

    def _route_progress(self, session: ClientSession) -> None:
        self.session = session
        session.route_progress(self.progress_token, self._on_progress)

    def _on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        params = {"progress": progress, "total": total, "message": message}
        # Progress is frequent: fed synchronously, without the lock's task hop.
        if not self.done:
            actions = self.mech.on_notification("notifications/progress", params, now=self.engine.clock())
            for a in actions:
                if isinstance(a, A.ReportProgress):
                    self._show_progress(a)

    def _show_progress(self, action: A.ReportProgress) -> None:
        """Show and journal one progress step. A mechanism's steps only rise, but after a
        host restart it starts afresh while the journal already holds a later step (a
        stream replayed from its first event id reports its steps again): a step not
        beyond the one shown is dropped, so progress never moves backwards."""
        if self.view.progress is not None and action.progress <= self.view.progress:
            return
        self.view.progress = action.progress
        if action.total is not None:
            self.view.total = action.total
        if action.message:
            self.view.message = action.message
        self.view.updated_at = self.engine.clock()
        self.engine.journal.record_progress(self.id, action.progress, action.total, action.message)
        self.engine._changed(self)

    async def send_original(self) -> None:
        """Prepare, commit, then send the call itself (write-ahead)."""
        eng = self.engine
        session = await self._live_session()
        if self.done:
            return  # cancelled while waiting for the connection
        # Nothing has left yet: choose again now that the server (and the tool) are known.
        self.mech = eng._choose(eng._connection(self.record.server), self.record.tool)
        params = {"name": self.record.tool, "arguments": self.record.params.get("arguments", {})}
        to_send, pre = self.mech.prepare(params, now=eng.clock())
        async with self._lock:
            await self._execute(pre)
        if self.done:
            return
        rid = session.ids.next()
        self.record.jsonrpc_id = rid
        await eng.journal.update_operation(self.id, jsonrpc_id=rid, status=api.RUNNING,
                                           mechanism=self.record.mechanism or self.mech.name)
        self.view.status = api.RUNNING
        eng._changed(self)
        eng._own_request(self, session, rid)
        await self._request(session, self.mech.method, to_send, rid, original=True)

    async def _request(self, session: ClientSession, method: str, params: dict, rid: RequestId,
                       *, original: bool, which: str | None = None,
                       on_accepted: Callable[[], None] | None = None) -> None:
        eng = self.engine
        self._route_progress(session)
        try:
            result = await session.request(method, params, request_id=rid, on_accepted=on_accepted,
                                           progress_token=self.progress_token if original else None)
        except RpcError as exc:
            eng._first_contact(self)
            if method in OPTIONAL_METHODS:
                eng._connection(self.record.server).optional_verdict(method, exc.code != METHOD_NOT_FOUND)
            if original and exc.code == URL_ELICITATION_REQUIRED and await self._satisfy_url_elicitations(exc):
                # -32042 means the call did not run: after the person opened the URL(s)
                # the spec has the client send it again, under a new id.
                eng._disown_request(self, session, rid)
                rid = session.ids.next()
                self.record.jsonrpc_id = rid
                await eng.journal.update_operation(self.id, jsonrpc_id=rid)
                eng._own_request(self, session, rid)
                await self._set_status(api.RUNNING, "retrying after the URL was opened")
                await self._request(session, method, params, rid, original=True)
                return
            error = exc.to_error().to_obj()
            await self.feed(lambda: self.mech.on_error(error, now=eng.clock(),
                                                       method=None if original else which or method))
        except TransportError as exc:
            log.info("operation %s: %s", self.id, exc)
            if original and _busy(exc):
                # 408 and 429 refuse a request before it is processed: the call did not
                # run, which is known (not "unknown"); running it again is the person's
                # choice.
                error = {"code": None, "message": f"the server did not take the call ({exc}); it did not run"}
                await self.feed(lambda: self.mech.on_error(error, now=eng.clock(), method=None))
                return
            if not original and _busy(exc) and session.state == "ready":
                # A rate limit or timeout on a poll says nothing about the connection:
                # this operation asks again after a pause (within the poll budget), the
                # others go on; no reconnect, no re-attaching of every operation.
                self._spawn(self._resume_after(BUSY_RETRY_SECONDS))
                return
            lost = session_refused(exc)
            await self.feed(lambda: self.mech.on_disconnect(now=eng.clock(), session_lost=lost))
            # Only this request's stream ended (the stateless era, a stream with no event
            # id): the connection itself is fine, so the mechanism may go on at once.
            # Otherwise (the network, the server, a poll that found nobody, a session the
            # server refuses) the supervisor reconnects, and the mechanism is resumed once
            # it is back.
            stream_only = isinstance(exc, ConnectionLost) and original and session.state == "ready"
            if stream_only:
                await self.feed(lambda: self.mech.resume(now=eng.clock()))
            elif session is self._stream_session and lost:
                # Only the adopted earlier session is gone; the connection is fine.
                await self._give_up_adopted_session()
                await self.feed(lambda: self.mech.resume(now=eng.clock()))
            else:
                eng._connection(self.record.server).connection_lost(session_gone=lost)
        else:
            eng._first_contact(self)
            if method in OPTIONAL_METHODS:
                eng._connection(self.record.server).optional_verdict(method, True)
            await self.feed(lambda: self.mech.on_result(result, now=eng.clock(),
                                                        method=None if original else which or method))
        finally:
            eng._disown_request(self, session, rid)

    async def _resume_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        await self.feed(lambda: self.mech.resume(now=self.engine.clock()))

    async def _satisfy_url_elicitations(self, exc: RpcError) -> bool:
        """Ask the person to open each URL of a -32042 error; True when all were accepted."""
        self._url_rounds += 1
        data = exc.data if isinstance(exc.data, dict) else {}
        elicitations = data.get("elicitations")
        if self._url_rounds > MAX_INPUT_ROUNDS or not isinstance(elicitations, list) or not elicitations:
            return False
        await self._set_status(api.INPUT_REQUIRED, "the server asks you to open a URL first")
        for params in elicitations:
            if not isinstance(params, dict):
                return False
            try:
                answer = await self.engine._ask_person(self, dict(params, mode=params.get("mode", "url")))
            except RpcError:
                return False
            if answer.get("action") != "accept":
                return False
        return True

    async def _send_request(self, action: A.SendRequest) -> None:
        if self.restored_at_start and not self.awaiting_first_contact:
            await self.engine.after_first_contacts(self.record.server)
        if action.method in POLL_METHODS and not self.awaiting_first_contact:
            # A repeat poll: within the server's budget (see hostapp.engine.budget).
            async with self.engine._poll_budget(self.record.server).poll():
                if not self.done:
                    await self._send_request_now(action)
            return
        await self._send_request_now(action)

    async def _send_request_now(self, action: A.SendRequest) -> None:
        if action.method not in OPTIONAL_METHODS:
            await self._send_one(action)
            return
        conn = self.engine._connection(self.record.server)
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
        try:
            session = await self._live_session()
        except asyncio.CancelledError:
            raise
        if action.reuse_jsonrpc_id and self.record.jsonrpc_id is not None:
            rid = self.record.jsonrpc_id
            self._drop_original_waiter()  # this request takes the id over
        else:
            rid = session.ids.next()
        self.engine._own_request(self, session, rid)
        original = action.reuse_jsonrpc_id or action.method == self.mech.method
        await self._request(session, action.method, action.params, rid, original=original, which=action.method,
                            on_accepted=on_accepted)

    async def _send_notification(self, method: str, params: dict) -> None:
        try:
            session = await asyncio.wait_for(self._live_session(), 10)
            await session.notify(method, params)
        except (TransportError, asyncio.TimeoutError) as exc:
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
        eng = self.engine
        eng._own_request(self, session, rid)
        try:
            result = await session.await_response(rid, self.mech.method)
        except RpcError as exc:
            error = exc.to_error().to_obj()
            await self.feed(lambda: self.mech.on_error(error, now=eng.clock()))
        except TransportError:
            return  # the connection went; its loss is handled where it is noticed
        else:
            await self.feed(lambda: self.mech.on_result(result, now=eng.clock()))

    async def _resume_stream(self, last_event_id: str) -> None:
        session = self._stream_session or await self._live_session()
        rid = self.record.jsonrpc_id
        transport = session.transport
        if rid is None or not transport.can_resume_streams:
            await self.feed(lambda: self.mech.on_disconnect(now=self.engine.clock(), session_lost=True))
            return
        self._ensure_original_waiter(session)
        try:
            await transport.resume_stream(rid, last_event_id)
        except TransportError as exc:
            lost = session_refused(exc)
            await self.feed(lambda: self.mech.on_disconnect(now=self.engine.clock(), session_lost=lost))

    async def _ask(self, action: A.AskInput) -> None:
        self.engine._first_contact(self)  # it waits for the person now, not for the server
        responses: dict[str, Any] = {}
        for key, req in action.requests.items():
            params = (req or {}).get("params") or {}
            if (req or {}).get("method") == "elicitation/create":
                try:
                    responses[key] = await self.engine._ask_person(self, params)
                except RpcError:
                    responses[key] = {"action": "decline"}  # it could not be shown; said in the timeline
            elif (req or {}).get("method") == "roots/list":
                responses[key] = {"roots": []}
            else:
                responses[key] = {"action": "decline"}
        await self.feed(lambda: self.mech.answer_input(responses, now=self.engine.clock()))

    # -- lifecycle hooks ---------------------------------------------------------------

    async def attach(self, session: ClientSession, *, restored: bool) -> None:
        """A (new) session is ready: resume the operation on it."""
        self.session = session
        self._route_progress(session)
        stream_session = await self._adopt_earlier_session(session) if restored else None
        self._ensure_original_waiter(stream_session or session)
        await self.feed(lambda: self.mech.resume(now=self.engine.clock()))

    async def _adopt_earlier_session(self, live: ClientSession) -> ClientSession | None:
        """A stream lives in the HTTP session that carried it: after a restart, take that
        session over (no initialize) to resume the stream."""
        if self.http_session is None or self.mech.name not in SESSION_BOUND_MECHANISMS:
            return None
        sid, version = self.http_session
        if live.transport.session_id == sid:
            return None
        conn = self.engine._connection(self.record.server)
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


class _EngineHandlers(ClientHandlers):
    """Server-to-client traffic of one connection, routed to operations."""

    def __init__(self, engine: "Engine", conn: ServerConnection, scope: str | None = None):
        self.engine = engine
        self.conn = conn
        self.scope = scope  # the ClientSession.scope of the session these handlers serve

    def _owner(self, ctx_request: RequestId | None) -> OperationRunner | None:
        if ctx_request is None:
            return None
        return self.engine._request_owner.get((self.conn.name, self.scope, ctx_request))

    async def elicit(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        runner = self._owner(ctx.related_request_id)
        if runner is None and ctx.related_task_id:
            runner = self.engine._claimant(self.conn.name, "elicitation/create", params)
        if runner is None and len(self.engine._in_flight_of(self.conn.name)) == 1:
            runner = self.engine._in_flight_of(self.conn.name)[0]  # stdio carries no stream id
        if runner is not None:
            await runner._set_status(api.INPUT_REQUIRED, "waiting for your answer")
        try:
            return await self.engine._ask_person(runner, params, server=self.conn.name)
        finally:
            if runner is not None and not runner.done:
                await runner._set_status(api.RUNNING, "answered")

    async def create_message(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        raise RpcError(INTERNAL_ERROR, "hostapp does not offer sampling: no language model is configured")

    def on_log(self, params: dict[str, Any]) -> None:
        self.engine.listener.operation_event("", "log", {"server": self.conn.name, **params})

    def on_list_changed(self, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self.engine._spawn(self.engine._refresh_tools(self.conn))

    def on_notification(self, method: str, params: dict[str, Any], related: RequestId | None) -> None:
        eng = self.engine
        if method == "notifications/elicitation/complete":
            eng._elicitation_complete(params.get("elicitationId"))
            return
        runner = self._owner(related) or eng._claimant(self.conn.name, method, params)
        if runner is None and method == "notifications/requests/resumePolicy":
            runner = self._owner(params.get("requestId"))
        if runner is not None:
            eng._first_contact(runner)
            runner.feed_soon(lambda: runner.mech.on_notification(method, params, now=eng.clock()))
        else:
            log.debug("%s: notification %s for no known operation", self.conn.name, method)

    def on_stream_event(self, request_id: RequestId | None, event_id: str, retry_ms: int | None) -> None:
        runner = self._owner(request_id)
        if runner is not None:
            runner.stream_event_soon(event_id, retry_ms)

    def on_protocol_error(self, error: Exception) -> None:
        log.info("%s: %s", self.conn.name, error)

    def on_closed(self, error: Exception | None) -> None:
        eng = self.engine
        if eng.stopping:
            # Quitting closes every session; the operations stay as they are (feeding them
            # would do nothing but cost a task per operation and session: 10,000 x 11 at 10,000).
            return
        for runner in eng._in_flight_of(self.conn.name):
            if runner.session is not None and runner.session.state == "ready":
                continue  # it works on another session of this server, which is still open
            runner.feed_soon(lambda r=runner: r.mech.on_disconnect(now=eng.clock()))


class _HandleWrites:
    """Handle writes and deletes, gathered: those asked for while the keyring is busy with
    earlier ones go to it together in one :meth:`SecretStore.write_batch` (a group commit),
    which the Secret Service store turns into one rewrite per shard touched. Each caller
    still waits for its own write, so the order of a commit (new handle, then the journal,
    then the old handle's deletion) holds; only the number of keyring writes falls, from
    one per handle to one per batch, however many operations commit at once.
    """

    #: Longest a quit waits for writes already under way (seconds).
    SETTLE_SECONDS = 10.0

    def __init__(self, engine: Engine):
        self._engine = engine
        self._puts: list[tuple[str, asyncio.Future]] = []
        self._deletes: list[tuple[str, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def put(self, value: str) -> str:
        """Store ``value`` as a new handle; its reference."""
        return await self._queue(self._puts, value)

    async def delete(self, ref: str) -> None:
        await self._queue(self._deletes, ref)

    def _queue(self, queue: list[tuple[str, asyncio.Future]], item: str) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        queue.append((item, future))
        if self._task is None:
            self._task = loop.create_task(self._drain())
        return future

    async def _drain(self) -> None:
        try:
            while self._puts or self._deletes:
                puts, self._puts = self._puts, []
                deletes, self._deletes = self._deletes, []
                eng = self._engine
                try:
                    refs = await eng._secret_call(eng.secrets.write_batch, HANDLE_KIND,
                                                  [value for value, _ in puts], [ref for ref, _ in deletes])
                except Exception as exc:  # noqa: BLE001 - each waiter decides what it means
                    for _, future in (*puts, *deletes):
                        if not future.done():
                            future.set_exception(exc)
                else:
                    for (_, future), ref in zip(puts, refs):
                        if not future.done():
                            future.set_result(ref)
                    for _, future in deletes:
                        if not future.done():
                            future.set_result(None)
        finally:
            self._task = None

    async def settle(self) -> None:
        """Wait (a bounded time) for the writes under way: the quit closes the keyring next."""
        task = self._task
        if task is not None:
            await asyncio.wait({task}, timeout=self.SETTLE_SECONDS)


class Engine:
    """The facade over journal, keyring, connections and operations (see module doc)."""

    def __init__(self, home: Path, listener: Any = None, *, journal: Any = None, secrets: Any = None,
                 clock: Callable[[], float] = time.time, connect: bool = True):
        self.home = Path(home)
        self.listener = listener or _NullListener()
        self.clock = clock
        self._journal = journal
        self._secrets = secrets
        self._connect = connect
        self.keyring_problem: str | None = None
        self._keyring_failed_at = 0.0  # monotonic time keyring_problem was set
        # the records Engine.start is restoring (their request ids are taken)
        self._restoring: list[Any] = []
        # ids of the operations restored from a position kept at the last quit
        self._positioned: set[str] = set()
        self.connections: dict[str, ServerConnection] = {}
        self.runners: dict[str, OperationRunner] = {}
        # (server, ClientSession.scope, request id) -> the operation that sent it
        self._request_owner: dict[tuple[str, str | None, RequestId], OperationRunner] = {}
        # (server, HTTP session id) -> the operations whose handles live in that session
        self._session_users: dict[tuple[str, str], set[OperationRunner]] = {}
        self._questions: dict[str, tuple[api.InputRequest, asyncio.Future]] = {}
        # Per server: operations restored at start-up not yet heard from, and an event set
        # once there are none (see after_first_contacts).
        self._awaiting_contact: dict[str, set[str]] = {}
        self._contacts_done: dict[str, asyncio.Event] = {}
        self._poll_budgets: dict[str, PollBudget] = {}
        self._tasks: set[asyncio.Task] = set()
        self._handle_writes = _HandleWrites(self)
        self._started = False
        self.stopping = False

    # -- composition -------------------------------------------------------------

    @property
    def journal(self):
        if self._journal is None:
            from hostapp.store.journal import OperationJournal
            from hostapp.store.paths import journal_path

            self._journal = OperationJournal(journal_path(self.home))
        return self._journal

    @property
    def secrets(self):
        if self._secrets is None:
            from hostapp.store.secrets import SecretStore

            self._secrets = SecretStore(self.home)
        return self._secrets

    def capabilities(self) -> Callable[[str], dict[str, Any]]:
        """Everything the client supports, per era (the mechanisms package decides)."""
        return _mechanism_api().client_capabilities

    async def start(self, *, resume: bool = True, only: set[str] | None = None) -> None:
        """Open the journal, check the keyring, connect servers, resume operations.

        ``only`` limits the servers connected at start (the CLI's one-off commands).
        """
        if self._started:
            return
        self._started = True
        self.stopping = False
        await self._check_keyring()
        journal = self.journal
        records: list[Any] = []
        if resume:
            records = [r for r in await self._read(journal.unfinished_operations)
                       if only is None or r.server in only]
        # The servers are connected while the keyring reads the handles (a few hundred
        # milliseconds for a thousand operations); a new session's request ids start above
        # those the operations about to be restored were sent under.
        self._restoring = records
        for cfg in journal.list_servers():
            if getattr(cfg, "enabled", True) and self._connect and (only is None or cfg.name in only):
                self._supervise(cfg)
        handles = await self._secret_call(self._load_handles, records) if records else {}
        # No await from here on: a server that became ready meanwhile gets each operation
        # attached by _restore, one that is not ready yet attaches them in _on_ready.
        self._restoring = []
        for record in records:
            runner = self._restore(record, handles.get(record.id))
            runner.awaiting_first_contact = runner.restored_at_start = True
            self._awaiting_contact.setdefault(record.server, set()).add(record.id)
        for server in self._awaiting_contact:
            self._contacts_done[server] = asyncio.Event()

    async def stop(self) -> None:
        """Quit: operations in flight stay as they are in the journal, to be resumed by
        the next start; nothing they would do during the shutdown is acted on."""
        self.stopping = True
        await self._save_positions()
        for runner in list(self.runners.values()):
            runner.shutdown()
        for conn in list(self.connections.values()):
            await conn.stop(keep_session=bool(self._in_flight_of(conn.name)))
        for task in list(self._tasks):
            task.cancel()
        for _, fut in self._questions.values():
            if not fut.done():
                fut.cancel()
        if self._journal is not None:
            await self._journal.flush()
            self._journal.close()
        await self._handle_writes.settle()
        close_secrets = getattr(self._secrets, "close", None)
        if close_secrets is not None:  # the keyring connection kept for writes
            try:
                await self._secret_call(close_secrets)
            except Exception as exc:  # noqa: BLE001 - quitting goes on regardless
                log.info("closing the keyring connection failed: %s", type(exc).__name__)
        self._started = False

    async def _save_positions(self) -> None:
        """At a clean quit, keep where each operation had got to beyond its last committed
        handle (an SSE stream's newest event id: commits are spaced out, see
        http_resumption.COMMIT_EVERY_SECONDS), in one keyring entry for all of them, so the
        next start resumes from there instead of replaying what this run already saw. One
        write whatever the number of operations: a write per operation at quit would take
        seconds with a large keyring. Each position names the handle it extends and is
        used only while that handle is the operation's current one."""
        positions: dict[str, list[str]] = {}
        for runner in self.runners.values():
            secret = None if runner.done or runner.handle_ref is None else runner.mech.secret()
            if secret is not None and runner._wrap_secret(secret) != runner._committed_secret:
                positions[runner.id] = [runner.handle_ref, secret]
        if not positions or self.keyring_problem is not None:
            return
        # Positions another process kept (a one-off command's engine holds only its own
        # operations) stay, for the operations still unfinished in the journal.
        others = {i for i in await self._read(self.journal.unfinished_ids) if i not in self.runners}
        try:
            await self._secret_call(self._write_positions, positions, others)
        except Exception as exc:  # noqa: BLE001 - the next start replays a little more
            log.info("could not keep the operations' positions: %s", type(exc).__name__)

    def _write_positions(self, positions: dict[str, list[str]], others: set[str]) -> None:
        """Blocking (keyring): merge with the kept positions of ``others`` and write."""
        from hostapp.store.secrets import SecretMissing

        ref = self.secrets.fixed_ref(POSITIONS_KIND)
        kept: Any = {}
        if others:
            try:
                kept = json.loads(self.secrets.get(ref))
            except (SecretMissing, ValueError):
                kept = {}
        merged = {i: p for i, p in kept.items() if i in others} if isinstance(kept, dict) else {}
        merged.update(positions)
        self.secrets.put_at(ref, json.dumps(merged))

    def _apply_positions(self, records: list[Any], handles: dict[str, str], saved: str | None) -> None:
        """Use the positions kept at the last quit for the handles they extend."""
        try:
            positions = json.loads(saved) if saved else {}
        except ValueError:
            positions = {}
        for record in records:
            position = positions.get(record.id) if isinstance(positions, dict) else None
            if (not isinstance(position, list) or len(position) != 2 or record.id not in handles
                    or position[0] != record.handle_ref or not isinstance(position[1], str)):
                continue
            self._positioned.add(record.id)
            _, http_session = unwrap_secret(handles[record.id])
            handles[record.id] = position[1] if http_session is None else HANDLE_PREFIX + json.dumps(
                {"h": position[1], "s": http_session[0], "v": http_session[1]})

    async def _check_keyring(self) -> None:
        """Ask whether the keyring takes secrets now (never prompts). A problem reported
        before is withdrawn when it does."""
        try:
            await self._secret_call(self.secrets.check)
        except Exception as exc:
            self._keyring_failed(exc)
            return
        if self.keyring_problem is not None:
            log.info("the keyring is usable again")
            self.listener.problem("keyring", "")
        self.keyring_problem = None

    async def _keyring_usable(self) -> bool:
        """Whether handles go to the keyring. After a failure it is asked again every
        KEYRING_RECHECK_SECONDS (a keyring unlocked or a daemon restarted meanwhile makes
        later operations resumable again); until then nothing is written to it."""
        if self.keyring_problem is None:
            return True
        if time.monotonic() - self._keyring_failed_at >= KEYRING_RECHECK_SECONDS:
            self._keyring_failed_at = time.monotonic()
            await self._check_keyring()
        return self.keyring_problem is None

    async def _put_handle(self, value: str) -> str:
        """Write a handle to the keyring; one failure is tried again once, after a pause,
        if the keyring says it is usable (a busy Secret Service daemon may drop a call,
        and the operation would otherwise not survive a restart)."""
        try:
            return await self._handle_writes.put(value)
        except Exception as exc:
            log.info("a keyring write failed (%s); trying again", type(exc).__name__)
            await asyncio.sleep(KEYRING_RETRY_SECONDS)
            await self._secret_call(self.secrets.check)  # raises when it is locked or gone
            return await self._handle_writes.put(value)

    async def _delete_secret(self, ref: str) -> None:
        try:
            if ref.startswith(HANDLE_KIND + ":"):
                await self._handle_writes.delete(ref)
            else:
                await self._secret_call(self.secrets.delete, ref)
        except Exception as exc:  # a stale secret is harmless: nothing refers to it any more
            log.info("could not delete a secret from the keyring: %s", type(exc).__name__)

    def _keyring_failed(self, exc: Exception) -> None:
        from hostapp.store.secrets import KeyringUnavailable

        message = str(exc) if isinstance(exc, KeyringUnavailable) else (
            f"the OS keyring failed ({type(exc).__name__}); operations cannot be resumed after a restart")
        self.keyring_problem = message
        self._keyring_failed_at = time.monotonic()
        self.listener.problem("keyring", message)

    async def _secret_call(self, fn: Callable, *args: Any) -> Any:
        # Secret Service calls go over D-Bus and may block: never on the event loop thread.
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- servers -------------------------------------------------------------------

    def _supervise(self, cfg: Any) -> ServerConnection:
        conn = ServerConnection(
            cfg, secret_store=self._secrets_or_none(cfg),
            handlers_factory=lambda c, scope=None: _EngineHandlers(self, c, scope),
            capabilities=self.capabilities(),
            on_change=self.listener.server_changed,
            on_ready=self._on_ready,
            first_request_id=lambda: self._first_request_id(cfg.name),
        )
        self.connections[cfg.name] = conn
        conn.start()
        return conn

    def _first_request_id(self, server: str) -> int:
        """Above every integer id an unfinished operation of this server was sent under."""
        ids = [r.record.jsonrpc_id for r in self._in_flight_of(server)]
        ids += [r.jsonrpc_id for r in self._restoring if r.server == server]
        return 1 + max([i for i in ids if isinstance(i, int) and not isinstance(i, bool)], default=0)

    def _secrets_or_none(self, cfg: Any):
        return self.secrets if (cfg.secret_headers or cfg.secret_env) else None

    def _connection(self, name: str) -> ServerConnection:
        conn = self.connections.get(name)
        if conn is None:
            cfg = self.journal.get_server(name)
            if cfg is None:
                raise KeyError(f"no server named {name!r}")
            conn = self._supervise(cfg)
        return conn

    def servers(self) -> list[api.ServerView]:
        views = []
        for cfg in self.journal.list_servers():
            conn = self.connections.get(cfg.name)
            views.append(conn.view if conn else api.ServerView(cfg.name, cfg.transport, cfg.url or cfg.command or "",
                                                               state=api.DISABLED))
        return views

    async def _store_server_secrets(self, cfg: Any, secrets: dict[str, dict[str, str]]) -> None:
        """Put new secret header and environment values in the keyring; the config keeps references."""
        if secrets.get("headers") or secrets.get("env"):
            await self._secret_call(self.secrets.check)
            for name, value in (secrets.get("headers") or {}).items():
                cfg.secret_headers[name] = await self._secret_call(self.secrets.put, "header", value)
            for name, value in (secrets.get("env") or {}).items():
                cfg.secret_env[name] = await self._secret_call(self.secrets.put, "env", value)

    async def add_server(self, cfg: Any, secrets: dict[str, dict[str, str]] | None = None) -> None:
        """Add a server; ``secrets`` = {"headers": {...}, "env": {...}} of values for the keyring."""
        await self._store_server_secrets(cfg, secrets or {})
        self.journal.add_server(cfg)
        if self._connect and getattr(cfg, "enabled", True):
            self._supervise(cfg)

    async def update_server(self, cfg: Any, secrets: dict[str, dict[str, str]] | None = None) -> None:
        """Change a server's configuration in place; its history stays attached.

        ``cfg.secret_headers``/``secret_env`` hold the references kept unchanged; ``secrets``
        the new values for the keyring. References no longer used are deleted afterwards.
        """
        old = self.journal.get_server(cfg.name)
        if old is None:
            raise KeyError(f"no server named {cfg.name!r}")
        await self._store_server_secrets(cfg, secrets or {})
        self.journal.update_server(
            cfg.name, transport=cfg.transport, url=cfg.url, headers=cfg.headers, secret_headers=cfg.secret_headers,
            command=cfg.command, args=cfg.args, env=cfg.env, secret_env=cfg.secret_env, enabled=cfg.enabled,
            protocol_version=cfg.protocol_version)
        in_use = {*cfg.secret_headers.values(), *cfg.secret_env.values()}
        for ref in [*old.secret_headers.values(), *old.secret_env.values()]:
            if ref not in in_use:
                await self._delete_secret(ref)
        conn = self.connections.pop(cfg.name, None)
        if conn is not None:
            await conn.stop(keep_session=bool(self._in_flight_of(cfg.name)))
        if self._connect and cfg.enabled:
            self._supervise(self.journal.get_server(cfg.name))

    async def remove_server(self, name: str) -> None:
        conn = self.connections.pop(name, None)
        if conn is not None:
            await conn.stop()
        cfg = self.journal.get_server(name)
        if cfg is None:
            return
        self.journal.remove_server(name)
        for ref in [*(cfg.secret_headers or {}).values(), *(cfg.secret_env or {}).values()]:
            try:
                await self._secret_call(self.secrets.delete, ref)
            except Exception as exc:
                log.info("could not delete a secret of %s: %s", name, type(exc).__name__)

    async def connected(self, name: str, timeout: float = 60.0) -> ServerConnection:
        """The connection of a server once its first attempt succeeded; raise its failure otherwise."""
        conn = self._connection(name)
        await asyncio.wait_for(conn.attempted.wait(), timeout)
        if conn.view.state != api.CONNECTED:
            raise TransportError(f"cannot connect to {name}: {conn.view.error}")
        return conn

    async def reconnect(self, name: str) -> None:
        self._connection(name).reconnect_now()

    async def list_tools(self, server: str, timeout: float = 30.0) -> list[dict[str, Any]]:
        conn = self._connection(server)
        await conn.wait_ready(timeout)
        return list(conn.tools)

    async def _refresh_tools(self, conn: ServerConnection) -> None:
        if conn.session is None:
            return
        try:
            conn.tools = await conn.session.list_tools()
        except (RpcError, TransportError) as exc:
            log.info("%s: tools/list failed: %s", conn.name, exc)
            return
        conn.view.tools, conn.view.tools_count = conn.tools, len(conn.tools)
        self.listener.server_changed(conn.view)

    async def _on_ready(self, conn: ServerConnection, session: ClientSession) -> None:
        # A session kept across a break of the network may still carry requests that never
        # broke (a stream resumed by the transport itself): their operations go on as they are.
        still_waiting = {owner for (server, _scope, rid), owner in self._request_owner.items()
                         if server == conn.name and owner.session is session and session.is_pending(rid)}
        for runner in self._in_flight_of(conn.name):
            if runner.record.jsonrpc_id is None and runner.view.status == api.PENDING:
                continue  # its start is waiting for this very connection
            if runner in still_waiting:
                continue
            runner._spawn(runner.attach(session, restored=True))

    # -- operations ----------------------------------------------------------------

    def _view_of(self, record: Any) -> api.OperationView:
        message = record.message
        if record.status in api.TERMINAL:
            message = outcome_message(record.status, record.result, record.error) or message
        return api.OperationView(
            id=record.id, server=record.server, tool=record.tool, method=record.method,
            arguments=(record.params or {}).get("arguments", {}), status=record.status,
            progress=record.progress, total=record.total, message=message,
            created_at=record.created_at, updated_at=record.updated_at,
            ended_at=record.updated_at if record.status in api.TERMINAL else None,
            needs_input=record.status == api.INPUT_REQUIRED, result=record.result, error=record.error,
            resumable=bool(getattr(record, "resumable", True)))

    def _in_flight_of(self, server: str) -> list[OperationRunner]:
        return [r for r in self.runners.values() if r.record.server == server and not r.done]

    def _own_request(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        key = (runner.record.server, session.scope, rid)
        self._request_owner[key] = runner
        runner._owned.add(key)

    def _disown_request(self, runner: OperationRunner, session: ClientSession, rid: RequestId) -> None:
        key = (runner.record.server, session.scope, rid)
        runner._owned.discard(key)
        if self._request_owner.get(key) is runner:
            del self._request_owner[key]

    def _claimant(self, server: str, method: str, params: dict[str, Any]) -> OperationRunner | None:
        for runner in self._in_flight_of(server):
            if runner.mech.claims(method, params):
                return runner
        return None

    # -- first contact after a restart -------------------------------------------------

    def _first_contact(self, runner: OperationRunner) -> None:
        """The server said something about this operation (or it ended): it is re-attached."""
        if not runner.awaiting_first_contact:
            return
        runner.awaiting_first_contact = False
        waiting = self._awaiting_contact.get(runner.record.server)
        if waiting is not None:
            waiting.discard(runner.id)
            if not waiting:
                self._contacts_done.pop(runner.record.server).set()
                del self._awaiting_contact[runner.record.server]

    def _poll_budget(self, server: str) -> PollBudget:
        budget = self._poll_budgets.get(server)
        if budget is None:
            budget = self._poll_budgets[server] = PollBudget()
        return budget

    async def after_first_contacts(self, server: str) -> None:
        """Hold a repeat request while operations restored at start-up still wait for their
        first word from the same server.

        A thousand resumed operations polling every second ask more than the host can send
        at once: without this, the first polls of the last ones queue behind the second and
        third polls of the first ones, and re-attaching them all takes several times longer.
        Bounded: after FIRST_CONTACT_PRIORITY_SECONDS the ordering is given up.
        """
        done = self._contacts_done.get(server)
        if done is None:
            return
        try:
            await asyncio.wait_for(done.wait(), FIRST_CONTACT_PRIORITY_SECONDS)
        except asyncio.TimeoutError:
            if self._contacts_done.get(server) is done:  # a server that stays silent for some
                log.info("%s: %d restored operations not heard from yet; polling the others again",
                         server, len(self._awaiting_contact.get(server, ())))
                self._awaiting_contact.pop(server, None)
                self._contacts_done.pop(server).set()

    def _forget(self, runner: OperationRunner) -> None:
        self._first_contact(runner)  # ended: nothing more to wait for
        self.runners.pop(runner.id, None)
        # Its own keys only: looking through every operation's made ending n of them cost n².
        for key in runner._owned:
            if self._request_owner.get(key) is runner:
                del self._request_owner[key]
        runner._owned.clear()
        runner.http_session = None

    def _changed(self, runner: OperationRunner, urgent: bool = False) -> None:
        self.listener.operation_changed(runner.view)

    async def start_call(self, server: str, tool: str, arguments: dict[str, Any] | None = None, *,
                         deadline_s: float = DEFAULT_DEADLINE_SECONDS) -> api.OperationView:
        """Journal a new tools/call operation and start it in the background; it is given
        up as expired if no outcome came within ``deadline_s`` seconds."""
        from hostapp.store.journal import OperationRecord

        conn = self._connection(server)
        now = self.clock()
        record = OperationRecord(
            id=uuid.uuid4().hex[:12], server=server, method="tools/call",
            params={"name": tool, "arguments": arguments or {}}, tool=tool, jsonrpc_id=None,
            mechanism=None, status=api.PENDING, progress=None, total=None, message="starting",
            created_at=now, updated_at=now, deadline=now + deadline_s, result=None, error=None,
            handle_ref=None, handle={}, pending_input=None, resumable=self.keyring_problem is None, delivered=False)
        await self.journal.create_operation(record)
        # Chosen from what is known now, chosen again once connected (send_original): the
        # operation is shown, and can be cancelled, before the server ever answered.
        runner = OperationRunner(self, record, self._choose(conn, tool))
        self.runners[record.id] = runner
        self._changed(runner)
        self.listener.operation_event(record.id, "status", {"to": api.PENDING, "message": f"calling {tool} on {server}"})
        runner._spawn(runner.send_original())
        return runner.view

    def _choose(self, conn: ServerConnection, tool: str):
        """The mechanism for a call of ``tool``, from what the server said it offers."""
        m = _mechanism_api()
        tool_def: dict[str, Any] = next((t for t in conn.tools if t.get("name") == tool), {})
        info = conn.info
        era = info.era if info else "handshake"
        caps = info.capabilities if info else {}
        return m.start_mechanism(era, caps, tool_def, conn.cfg.transport)

    def _load_handles(self, records: list[Any]) -> dict[str, str]:
        """The keyring values of the records' handles (blocking: run off the event loop)."""
        refs = [r.handle_ref for r in records if r.handle_ref]
        if not refs or self.keyring_problem is not None:
            return {}
        positions_ref = self.secrets.fixed_ref(POSITIONS_KIND)
        try:
            values = self.secrets.get_many([*refs, positions_ref])
        except Exception as exc:  # the keyring failed: those operations cannot be resumed
            log.info("operation handles unavailable: %s", exc)
            return {}
        handles = {r.id: values[r.handle_ref] for r in records if r.handle_ref in values}
        self._apply_positions(records, handles, values.get(positions_ref))
        return handles

    def _restore(self, record: Any, secret: str | None) -> OperationRunner:
        """A runner for an unfinished journaled operation, resumed once its server is ready."""
        m = _mechanism_api()
        stored = secret
        secret, http_session = unwrap_secret(secret)
        state = dict(record.handle or {})
        if not state.get("mechanism"):
            # Journaled before any mechanism state was committed: nothing can resume it.
            state = {"mechanism": "direct", "method": record.method, "params": record.params,
                     "phase": "new" if record.jsonrpc_id is None else "sent"}
        try:
            mech = m.restore_mechanism(state, secret)
        except (ValueError, KeyError) as exc:
            log.warning("operation %s cannot be restored: %s", record.id, exc)
            mech = m.restore_mechanism({"mechanism": "direct", "method": record.method, "phase": "sent"}, None)
        runner = OperationRunner(self, record, mech)
        runner.http_session = http_session
        # What the keyring holds under its handle_ref (unknown when a position replaced it:
        # the next quit or commit writes it anew).
        runner._committed_secret = None if record.id in self._positioned else stored
        self.runners[record.id] = runner
        self._changed(runner)
        if secret is None and not record.resumable and state.get("mechanism") != "direct" \
                and state.get("phase") not in ("new", "done"):
            # Its handle never reached the keyring: asking the server with nothing would
            # draw a misleading "unknown handle" answer.
            runner._spawn(runner._finish(api.UNKNOWN, error={"code": None, "message": HANDLE_NOT_KEPT}))
            return runner
        if record.server not in self.connections:
            cfg = self.journal.get_server(record.server)
            if cfg is None:
                runner._spawn(runner._finish(api.UNKNOWN, error={
                    "code": None, "message": f"its server {record.server!r} was removed"}))
                return runner
            if self._connect:
                self._supervise(cfg)
        conn = self.connections.get(record.server)
        if conn is not None and conn.session is not None and conn._ready.is_set():
            runner._spawn(runner.attach(conn.session, restored=True))
        return runner

    async def cancel(self, op_id: str) -> None:
        runner = self.runners.get(op_id)
        if runner is None:
            record = self.journal.get_operation(op_id)
            if record is None:
                raise KeyError(f"no operation {op_id!r}")
            if record.status in api.TERMINAL:
                return
            handles = await self._secret_call(self._load_handles, [record])
            runner = self._restore(record, handles.get(record.id))
        await runner.feed(lambda: runner.mech.cancel(now=self.clock()))

    async def rerun(self, op_id: str) -> api.OperationView:
        record = await self._read(self.journal.get_operation, op_id)
        if record is None:
            raise KeyError(f"no operation {op_id!r}")
        return await self.start_call(record.server, record.tool, (record.params or {}).get("arguments", {}))

    async def _read(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        # Journal reads may take a while on a large history: never on the GUI/event loop thread.
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(*args, **kwargs))

    async def operations(self, statuses: set[str] | None = None, limit: int = 200, offset: int = 0) -> list[api.OperationView]:
        records = await self._read(self.journal.list_operations, statuses=statuses, limit=limit, offset=offset)
        views = []
        for r in records:
            live = self.runners.get(r.id)
            views.append(live.view if live else self._view_of(r))
        return views

    async def count_operations(self, statuses: set[str] | None = None) -> int:
        return await self._read(self.journal.count_operations, statuses=statuses)

    async def events(self, op_id: str) -> list[dict[str, Any]]:
        await self.journal.flush()
        events = await self._read(self.journal.events, op_id)
        return [{"at": e.at, "kind": e.kind, "data": e.data} for e in events]

    async def wait_finished(self, op_id: str, poll: float = 0.05) -> api.OperationView:
        """Until the operation has a terminal status (used by the CLI's --wait)."""
        while True:
            runner = self.runners.get(op_id)
            if runner is None:
                record = self.journal.get_operation(op_id)
                if record is not None and record.status in api.TERMINAL:
                    return self._view_of(record)
            await asyncio.sleep(poll)

    # -- questions to the person -------------------------------------------------------

    async def _ask_person(self, runner: OperationRunner | None, params: dict[str, Any], *,
                          server: str | None = None) -> dict[str, Any]:
        try:
            check_question(params)  # a question nobody can be shown is refused, clearly
        except RpcError as exc:
            if runner is not None:
                self.journal.append_event(runner.id, "input_refused", {"reason": exc.message})
                self.listener.operation_event(runner.id, "input_refused", {"reason": exc.message})
            raise
        qid = uuid.uuid4().hex[:12]
        request = api.InputRequest(
            id=qid, operation_id=runner.id if runner else None,
            server=server or (runner.record.server if runner else ""),
            mode=params.get("mode") or "form", message=str(params.get("message", "")), params=params)
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._questions[qid] = (request, fut)
        if runner is not None:
            runner._questions.add(qid)
            self.journal.append_event(runner.id, "input_requested", {"mode": request.mode, "message": request.message})
        self.listener.input_requested(request)
        try:
            answer = await fut
        finally:
            self._questions.pop(qid, None)
            if runner is not None:
                runner._questions.discard(qid)
        if runner is not None:
            self.journal.append_event(runner.id, "input_answered", {"action": answer.get("action")})
        return answer

    def answer_input(self, request_id: str, answer: dict[str, Any]) -> None:
        entry = self._questions.get(request_id)
        if entry is None:
            raise KeyError(f"no open question {request_id!r}")
        if not entry[1].done():
            entry[1].set_result(answer)

    def _withdraw(self, qid: str) -> None:
        entry = self._questions.pop(qid, None)
        if entry is not None:
            if not entry[1].done():
                entry[1].set_result({"action": "cancel"})
            self.listener.input_withdrawn(qid)

    def _elicitation_complete(self, elicitation_id: Any) -> None:
        for qid, (req, _fut) in list(self._questions.items()):
            if req.mode == "url" and req.params.get("elicitationId") == elicitation_id:
                self._withdraw(qid)

    def open_questions(self) -> list[api.InputRequest]:
        return [req for req, _ in self._questions.values()]
