"""What one operation sends its server, and how each request ends.

:class:`OutgoingRequests` sends an operation's requests (its call, the polls and
continuations its mechanism asks for, notifications, a stream resumed) and feeds the
mechanism how each ended: answered, refused with an error, refused unprocessed with a
session the server forgot (sent once more in the next session), refused for now (HTTP 408
or 429: asked again later, or known not to have run), or lost with its stream or its
connection. After a restart or a reconnect it waits for the call's answer under the call's
own id (the answer may still come on a resumed stream).

Write-ahead holds here too: a request's id is journaled (and owned in the engine's routing)
before the request leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from hostapp.engine import api
from hostapp.engine.operation import OPTIONAL_METHODS, SESSION_BOUND_MECHANISMS, server_busy
from hostapp.engine.session import MAX_INPUT_ROUNDS
from hostapp.engine.supervisor import session_refused
from hostapp.mechanisms import actions as A
from hostapp.protocol.jsonrpc import METHOD_NOT_FOUND, URL_ELICITATION_REQUIRED, RequestId, RpcError
from hostapp.store.status import OperationStatus
from hostapp.transport.base import POLL_METHODS, ConnectionLost, NoAnswer, NotSent, SessionExpired, TransportError

if TYPE_CHECKING:
    from hostapp.engine.adoption import OperationSessions
    from hostapp.engine.cancel_exchange import CancelExchange
    from hostapp.engine.operation import RunnerContext
    from hostapp.engine.session import ClientSession
    from hostapp.mechanisms.base import Mechanism
    from hostapp.store.journal import OperationRecord

log = logging.getLogger(__name__)


class RequestsPort(Protocol):
    """What an operation's requests use of the operation (which the engine's routing and
    questions name)."""

    @property
    def id(self) -> str: ...

    @property
    def record(self) -> OperationRecord:
        """Its journal row (the call's JSON-RPC id is kept there as it changes)."""
        ...

    @property
    def mech(self) -> Mechanism: ...

    @property
    def done(self) -> bool: ...

    @property
    def progress_token(self) -> str: ...

    @property
    def restored_at_start(self) -> bool: ...

    @property
    def awaiting_first_contact(self) -> bool: ...

    async def feed(self, produce: Callable[[], list[A.Action]]) -> None:
        """Run one mechanism hook and carry out the actions it returns."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` as one of the operation's tasks (cancelled when it shuts down)."""
        ...

    async def set_status(self, status: OperationStatus, message: str | None) -> None: ...


class OutgoingRequests:
    """One operation's requests.

    Owns: the task waiting for the call's answer under its id after a restart or a
    reconnect, and the session it waits in; how many sends of the call are out now
    (``original_in_flight``: how those end is heard from them, not from the connection);
    whether the call waits for the next session to go out again (``awaiting_new_session``:
    that session must not attach it as a lost request); how many times a server asked
    for URLs to be opened before the call.
    """

    def __init__(self, port: RequestsPort, context: RunnerContext[Any], *, sessions: OperationSessions,
                 cancelling: CancelExchange):
        self._port = port
        self._context = context
        self._sessions = sessions
        self._cancel = cancelling
        self._original_waiter: asyncio.Task[None] | None = None
        self._original_session: ClientSession | None = None
        self._url_rounds = 0
        self.original_in_flight = 0
        self.awaiting_new_session = False

    # -- sending ------------------------------------------------------------------

    @contextlib.contextmanager
    def call_on_its_way(self) -> Iterator[None]:
        """While the call is being prepared and committed to go out in the session it took:
        counted with the sends that are out (``original_in_flight``), so that a loss of
        that session is heard from the call's own request, which says it was never sent."""
        self.original_in_flight += 1
        try:
            yield
        finally:
            self.original_in_flight -= 1

    async def send_call(self, session: ClientSession, method: str, params: dict[str, Any], rid: RequestId) -> None:
        """Send the call itself, its id ``rid`` journaled already."""
        self._context.own_request(self._port, session, rid)
        await self._request(session, method, params, rid, original=True)

    async def send(self, action: A.SendRequest) -> None:
        """A request the mechanism asks for: a repeat poll within its server's budget, and
        after a restart not before the operations restored with it were heard from."""
        port = self._port
        if port.restored_at_start and not port.awaiting_first_contact:
            await self._context.after_first_contacts(port.record.server)
        if action.method == "tasks/get" and port.awaiting_first_contact and port.mech.name == "tasks_2025" \
                and await self._answered_by_listing(action):
            return
        if action.method in POLL_METHODS and not port.awaiting_first_contact:
            # A repeat poll: within the server's budget (see hostapp.engine.budget).
            async with self._context.poll_budget(port.record.server).poll():
                if not port.done:
                    await self._send_now(action)
            return
        await self._send_now(action)

    async def _answered_by_listing(self, action: A.SendRequest) -> bool:
        """A restored task's first ``tasks/get``, answered by its server's ``tasks/list``
        (one for all of them: :mod:`hostapp.engine.task_listing`) when that names it; True
        when nothing is left to send."""
        port, ctx = self._port, self._context
        task_id = action.params.get("taskId")
        if not isinstance(task_id, str):
            return False
        session = await self._sessions.live()
        task = await ctx.listed_task(port.record.server, session, task_id)
        if port.done:
            return True  # it ended meanwhile: nothing to ask
        if task is None:
            return False
        ctx.heard_from(port)
        await port.feed(lambda: port.mech.on_result(task, now=ctx.clock(), method="tasks/get"))
        return True

    async def _send_now(self, action: A.SendRequest) -> None:
        if action.method not in OPTIONAL_METHODS:
            await self._send_one(action)
            return
        conn = self._context.connection(self._port.record.server)
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
        port = self._port
        session = await self._sessions.live()
        if action.reuse_jsonrpc_id and port.record.jsonrpc_id is not None:
            rid = port.record.jsonrpc_id
            self.drop_original_waiter()  # this request takes the id over
        else:
            rid = session.ids.next()
            if action.brings_original:
                self.await_original(session)
        self._context.own_request(port, session, rid)
        original = action.reuse_jsonrpc_id or action.method == port.mech.method
        await self._request(session, action.method, action.params, rid, original=original, which=action.method,
                            on_accepted=on_accepted)

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification; one that cannot go (no connection within 10 s) is logged."""
        try:
            session = await asyncio.wait_for(self._sessions.live(), 10)
            await session.notify(method, params)
        except (TimeoutError, TransportError) as exc:
            log.info("operation %s: could not send %s: %s", self._port.id, method, exc)

    def abandon_original(self, rid: RequestId, reason: str) -> None:
        """Tell the server to stop the original request, the way its era has it: close the
        request's stream where the request lives on it (2026-07-28 over HTTP), else send
        ``notifications/cancelled``."""
        session = self._original_session or self._sessions.current
        if session is not None and session.abandon(rid):
            log.info("operation %s: its request's stream was closed, which cancels it at %s", self._port.id,
                     session.server.protocol_version if session.server else "this revision")
            return
        self._port.spawn(self.notify("notifications/cancelled", {"requestId": rid, "reason": reason}))

    async def resume_stream(self, last_event_id: str) -> None:
        """Ask for the call's stream again from ``last_event_id``, in the session it lives in."""
        port, ctx = self._port, self._context
        session = self._sessions.adopted or await self._sessions.live()
        bound = self._sessions.http_session
        if bound is not None and session.transport.session_id != bound[0] \
                and port.mech.name in SESSION_BOUND_MECHANISMS:
            # The stream lives in another session: it is asked for there, never in this
            # one (whose server would refuse it, and a refusal must not touch this one).
            adopted = await self._sessions.adopt_for_stream(session)
            if adopted is None:
                await port.feed(lambda: port.mech.on_disconnect(now=ctx.clock(), session_lost=True))
                return
            session = adopted
        rid = port.record.jsonrpc_id
        transport = session.transport
        if rid is None or not transport.can_resume_streams:
            await port.feed(lambda: port.mech.on_disconnect(now=ctx.clock(), session_lost=True))
            return
        self.await_original(session)
        try:
            await transport.resume_stream(rid, last_event_id)
        except TransportError as exc:
            lost = session_refused(exc)
            await port.feed(lambda: port.mech.on_disconnect(now=ctx.clock(), session_lost=lost))

    # -- the call's answer, awaited under its id ------------------------------------------

    def await_original(self, session: ClientSession) -> None:
        """After a restart or reconnect, the original request's answer may still come
        (on a resumed SSE stream, after ``stream/resume``): wait for it under its id."""
        rid = self._port.record.jsonrpc_id
        if rid is None or self._port.done:
            return
        if self._original_waiter is not None and not self._original_waiter.done() \
                and self._original_session is session:
            return
        self._original_session = session
        self._original_waiter = self._port.spawn(self._wait_original(session, rid))

    def drop_original_waiter(self) -> None:
        """Nobody waits for the call's answer any more (another request took its id over,
        or the operation ended)."""
        waiter, self._original_waiter = self._original_waiter, None
        # Not when the waiter is the task finishing the operation right now.
        if waiter is not None and waiter is not asyncio.current_task():
            waiter.cancel()

    async def _wait_original(self, session: ClientSession, rid: RequestId) -> None:
        port, ctx = self._port, self._context
        ctx.own_request(port, session, rid)
        try:
            result = await session.await_response(rid, port.mech.method)
        except RpcError as exc:
            error = exc.to_error().to_obj()
            await port.feed(lambda: port.mech.on_error(error, now=ctx.clock()))
        except TransportError as exc:
            if port.done or self._original_waiter is not asyncio.current_task():
                return  # replaced, or the operation ended meanwhile
            if session.state != "ready":
                return  # the connection went: the supervisor reconnects and attaches again
            # Only this request's answer stream was lost (the transport gave up resuming
            # it, or the server refused it): nobody else will notice, so the mechanism
            # must hear of it, and end the operation or go on in a bounded way.
            log.info("operation %s: its answer stream was lost: %s", port.id, exc)
            self._original_waiter = None
            await self._request_lost(session, exc, stream_only=True)
        else:
            await port.feed(lambda: port.mech.on_result(result, now=ctx.clock()))

    # -- one request, and how it ended ----------------------------------------------------

    async def _request(self, session: ClientSession, method: str, params: dict[str, Any], rid: RequestId,
                       *, original: bool, which: str | None = None,
                       on_accepted: Callable[[], None] | None = None, sent_again: bool = False) -> None:
        port, ctx = self._port, self._context
        self._sessions.run_in(session)
        if original:
            self.original_in_flight += 1
        try:
            try:
                result = await session.request(method, params, request_id=rid, on_accepted=on_accepted,
                                               progress_token=port.progress_token if original else None)
            finally:
                if original:
                    self.original_in_flight -= 1
        except RpcError as exc:
            ctx.heard_from(port)
            if not original and self._cancel.is_cancel_request(method):
                await self._cancel.refused(exc)
            if method in OPTIONAL_METHODS:
                ctx.connection(port.record.server).optional_verdict(method, exc.code != METHOD_NOT_FOUND)
            if original and exc.code == URL_ELICITATION_REQUIRED and await self._satisfy_url_elicitations(exc):
                # -32042 means the call did not run: after the person opened the URL(s)
                # the spec has the client send it again, under a new id.
                ctx.disown_request(port, session, rid)
                rid = session.ids.next()
                port.record.jsonrpc_id = rid
                await ctx.journal.update_operation(port.id, jsonrpc_id=rid)
                ctx.own_request(port, session, rid)
                await port.set_status(OperationStatus.RUNNING, "retrying after the URL was opened")
                await self._request(session, method, params, rid, original=True)
                return
            error = exc.to_error().to_obj()
            await port.feed(lambda: port.mech.on_error(error, now=ctx.clock(),
                                                       method=None if original else which or method))
        except TransportError as exc:
            log.info("operation %s: %s", port.id, exc)
            if original and (isinstance(exc, NotSent) or (isinstance(exc, SessionExpired) and exc.unprocessed)) \
                    and session is not self._sessions.adopted:
                # The server no longer knew the session (a restart forgets them) and did
                # not process the call, or the session ended before the call left: it goes
                # out in the new session (once more, if it had gone out).
                await self._send_original_again(session, method, params, rid, exc, sent_again=sent_again)
                return
            if original and server_busy(exc):
                # 408 and 429 refuse a request before it is processed: the call did not
                # run, which is known (not "unknown"); running it again is the person's
                # choice.
                error = {"code": None, "message": f"the server did not take the call ({exc}); it did not run"}
                await port.feed(lambda: port.mech.on_error(error, now=ctx.clock(), method=None))
                return
            if not original and (server_busy(exc) or isinstance(exc, NoAnswer)) and session.state == "ready":
                # A rate limit or timeout on a poll, or its answer lost on the way, says
                # nothing about the connection: this operation asks again after a pause
                # (within the poll budget), the others go on; no reconnect, no re-attaching
                # of every operation.
                port.spawn(self._resume_after(ctx.timing.busy_retry))
                return
            stream_only = isinstance(exc, ConnectionLost) and original and session.state == "ready"
            await self._request_lost(session, exc, stream_only=stream_only)
        else:
            ctx.heard_from(port)
            if not original and self._cancel.is_cancel_request(method):
                self._cancel.answered(None)
            if method in OPTIONAL_METHODS:
                ctx.connection(port.record.server).optional_verdict(method, True)
            await port.feed(lambda: port.mech.on_result(result, now=ctx.clock(),
                                                        method=None if original else which or method))
        finally:
            ctx.disown_request(port, session, rid)

    async def _send_original_again(self, old: ClientSession, method: str, params: dict[str, Any], rid: RequestId,
                                   exc: SessionExpired | NotSent, *, sent_again: bool) -> None:
        """The call was refused with its session, unprocessed (HTTP 404 for the session id),
        or never left because its session had ended: send it in the session the supervisor
        makes next, under a new id journaled first. A second refusal, or a server that now
        speaks another revision than the call was prepared for, ends it failed: it did not
        run. A call that never left has not been sent again by going out now."""
        port, ctx = self._port, self._context
        conn = ctx.connection(port.record.server)
        ctx.disown_request(port, old, rid)
        went_out = isinstance(exc, SessionExpired) and exc.sent
        if sent_again and went_out:
            error = {"code": None, "message": f"the server refused the call's session again ({exc}); "
                                              "it did not run"}
            await port.feed(lambda: port.mech.on_error(error, now=ctx.clock(), method=None))
            return
        self.awaiting_new_session = True  # not attached to the new session as a lost request
        try:
            session = await conn.next_session(old)
        finally:
            self.awaiting_new_session = False
        if port.done:
            return  # cancelled meanwhile
        before = old.server.protocol_version if old.server is not None else None
        now_speaks = session.server.protocol_version if session.server is not None else None
        if before != now_speaks:
            error = {"code": None, "message": f"the server forgot the call's session and now speaks MCP "
                                              f"{now_speaks} (the call was made for {before}); it did not run"}
            await port.feed(lambda: port.mech.on_error(error, now=ctx.clock(), method=None))
            return
        with self.call_on_its_way():
            new_rid = session.ids.next()
            port.record.jsonrpc_id = new_rid
            await ctx.journal.update_operation(port.id, jsonrpc_id=new_rid)
            if isinstance(exc, SessionExpired):
                data = {"message": "the server no longer knew the session (it restarted, or ended it) and had not "
                                   "processed the call; sent again, once, in a new session" if went_out else
                                   "the server no longer knew the session (it restarted, or ended it) before the "
                                   "call went out; sent in a new session"}
                ctx.journal.append_event(port.id, api.EVENT_SESSION_RENEWED, data)
                ctx.operation_event(port.id, api.EVENT_SESSION_RENEWED, data)
            ctx.own_request(port, session, new_rid)
        # (No wait between here and the send counting itself as out.)
        await self._request(session, method, params, new_rid, original=True, sent_again=sent_again or went_out)

    async def _request_lost(self, session: ClientSession, exc: TransportError, *, stream_only: bool) -> None:
        """A request of this operation (or its answer stream) was lost: the mechanism
        hears of it, and whoever can carry the operation on is told.

        ``stream_only``: only this request's stream ended (the stateless era, a stream
        with no event id, a stream the transport gave up resuming): the connection itself
        is fine, so the mechanism may go on at once. Otherwise (the network, the server, a
        poll that found nobody, a session the server refuses) the supervisor reconnects,
        and the mechanism is resumed once it is back."""
        port, ctx = self._port, self._context
        lost = session_refused(exc)
        await port.feed(lambda: port.mech.on_disconnect(now=ctx.clock(), session_lost=lost))
        if port.done and not lost:
            return  # (a refused session is still told to the supervisor, for the others)
        if not port.done and stream_only and not lost:
            await port.feed(lambda: port.mech.resume(now=ctx.clock()))
        elif not port.done and session is self._sessions.adopted and lost:
            # Only the adopted earlier session is gone; the connection is fine.
            await self._sessions.give_up_adopted()
            await port.feed(lambda: port.mech.resume(now=ctx.clock()))
        else:
            ctx.connection(port.record.server).connection_lost(
                session_gone=lost, session=session, forgotten=isinstance(exc, SessionExpired))

    async def _resume_after(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        port = self._port
        await port.feed(lambda: port.mech.resume(now=self._context.clock()))

    async def _satisfy_url_elicitations(self, exc: RpcError) -> bool:
        """Ask the person to open each URL of a -32042 error; True when all were accepted."""
        self._url_rounds += 1
        data = exc.data if isinstance(exc.data, dict) else {}
        elicitations = data.get("elicitations")
        if self._url_rounds > MAX_INPUT_ROUNDS or not isinstance(elicitations, list) or not elicitations:
            return False
        await self._port.set_status(OperationStatus.INPUT_REQUIRED, "the server asks you to open a URL first")
        for params in elicitations:
            if not isinstance(params, dict):
                return False
            try:
                answer = await self._context.ask_person(self._port, dict(params, mode=params.get("mode", "url")))
            except RpcError:
                return False
            if answer.get("action") != "accept":
                return False
        return True
