"""What a server sends the host on its own, routed to the operation it is about.

:class:`ServerTraffic` is the :class:`~hostapp.engine.session.ClientHandlers` of one
connection (or of one adopted earlier session of it): a question (elicitation, sampling) goes to
the person on behalf of the operation whose request it came with, a notification and an
SSE event id to the operation that sent or claims it, a closed connection to every
operation in flight on it, a changed tool list to the server's row; ``roots/list`` is
answered with the server's configured folders.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hostapp.engine.context import EngineContext
from hostapp.engine.questions import ELICITATION, SAMPLING
from hostapp.engine.request_tasks import RequestTasks
from hostapp.engine.runner import OperationRunner
from hostapp.engine.server_logs import below_level
from hostapp.engine.session import ClientHandlers, RequestContext
from hostapp.engine.supervisor import ServerConnection
from hostapp.mechanisms import actions as A
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RequestId, RpcError
from hostapp.protocol.resources import LIST_CHANGED as RESOURCES_CHANGED
from hostapp.protocol.resources import UPDATED as RESOURCE_UPDATED
from hostapp.protocol.roots import roots_result
from hostapp.store.status import OperationStatus
from hostapp.transport.base import SessionExpired, TransportError

log = logging.getLogger(__name__)


class ServerTraffic(ClientHandlers):
    """Server-to-client traffic of one session, routed to operations.

    ``scope`` is the :attr:`ClientSession.scope` of the session served: None for the
    connection's own, the session id of an adopted earlier one.
    """

    def __init__(self, context: EngineContext, conn: ServerConnection, scope: str | None = None):
        self.context = context
        self.conn = conn
        self.scope = scope
        # Questions kept in the journal until their answer is sent: request id -> asker.
        self._kept: dict[RequestId | None, OperationRunner] = {}
        #: Questions and sampling requests the server sent as tasks (2025-11-25 tasks.requests).
        self.request_tasks = RequestTasks(context.spawn)

    def _owner(self, request_id: RequestId | None) -> OperationRunner | None:
        return self.context.routing.owner(self.conn.name, self.scope, request_id)

    async def elicit(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return await self._ask_person(ELICITATION, params, ctx)

    async def create_message(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return await self._ask_person(SAMPLING, params, ctx)

    async def request_as_task(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """Asked as a task: answered with the task at once, the person asked meanwhile. The
        request is not kept in the journal (its id was answered, with the task)."""
        if method == ELICITATION and not isinstance(params.get("message", ""), str):
            raise RpcError(INVALID_PARAMS, "elicitation message must be a string")
        plain = {k: v for k, v in params.items() if k != "task"}
        untied = RequestContext(ctx.session, None, ctx.related_request_id, ctx.related_task_id, method)
        return self.request_tasks.create(method, params["task"], lambda: self._ask_person(method, plain, untied))

    async def client_task(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        return await self.request_tasks.serve(method, params)

    async def _ask_person(self, method: str, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """A question (elicitation) or a sampling request, asked on behalf of the operation
        it came with: kept in the journal when the server would not send it again."""
        routing = self.context.routing
        runner = self._owner(ctx.related_request_id)
        if runner is None and ctx.related_task_id:
            runner = routing.claimant(self.conn.name, method, params)
        if runner is None:
            in_flight = routing.in_flight_of(self.conn.name)
            if len(in_flight) == 1:
                runner = in_flight[0]  # stdio carries no stream id
        if runner is not None:
            same = runner.kept_question.same_question(params)
            if same is not None:  # asked again from the journal already: the person answers once
                return await asyncio.shield(same)
            if await runner.kept_question.keep(ctx, params, method):  # first: the server asks it only once
                self._kept[ctx.request_id] = runner
            await runner.set_status(OperationStatus.INPUT_REQUIRED, "waiting for your answer")
        try:
            return await self.context.questions.ask(params, operation_id=runner.id if runner else None,
                                                    server=self.conn.name, method=method)
        finally:
            if runner is not None and not runner.done:
                await runner.set_status(OperationStatus.RUNNING, "answered")

    def on_answer_sent(self, ctx: RequestContext) -> None:
        runner = self._kept.pop(ctx.request_id, None)
        if runner is not None:
            self.context.spawn(runner.kept_question.answered(ctx.request_id))

    async def list_roots(self, ctx: RequestContext) -> dict[str, Any]:
        """The server's folders as the configuration holds them now (:mod:`hostapp.protocol.roots`)."""
        return await asyncio.to_thread(roots_result, list(self.conn.cfg.roots))

    def on_log(self, params: dict[str, Any]) -> None:
        if below_level(params.get("level"), self.conn.cfg.log_level):
            return  # a server that sends what it was not asked for (some leave it to their application)
        entry = self.context.server_logs.add(self.conn.name, params, self.context.clock())
        self.context.operation_event("", "log", {"server": self.conn.name, **entry})

    def on_list_changed(self, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self.context.spawn(self.refresh_tools())
        elif method == RESOURCES_CHANGED:
            self.context.operation_event("", "resources_changed", {"server": self.conn.name})

    async def refresh_tools(self) -> None:
        """Ask the server for its tools again and show them."""
        conn = self.conn
        if conn.session is None:
            return
        try:
            conn.tools = await conn.session.list_tools()
        except (RpcError, TransportError) as exc:
            log.info("%s: tools/list failed: %s", conn.name, exc)
            return
        conn.view = replace(conn.view, tools=tuple(conn.tools), tools_count=len(conn.tools))
        self.context.listener.server_changed(conn.view)

    def on_notification(self, method: str, params: dict[str, Any], related: RequestId | None) -> None:
        ctx = self.context
        if method == "notifications/elicitation/complete":
            ctx.questions.elicitation_complete(params.get("elicitationId"))
            return
        if method == RESOURCE_UPDATED and isinstance(params.get("uri"), str):
            ctx.operation_event("", "resource_updated", {"server": self.conn.name, "uri": params["uri"]})
            return
        runner = self._owner(related) or ctx.routing.claimant(self.conn.name, method, params)
        if runner is None and method == "notifications/requests/resumePolicy":
            runner = self._owner(params.get("requestId"))
        if runner is not None:
            ctx.heard_from(runner)
            target = runner
            target.feed_soon(lambda: target.mech.on_notification(method, params, now=ctx.clock()))
        else:
            log.debug("%s: notification %s for no known operation", self.conn.name, method)

    def on_stream_event(self, request_id: RequestId | None, event_id: str, retry_ms: int | None) -> None:
        runner = self._owner(request_id)
        if runner is not None:
            runner.stream_event_soon(event_id, retry_ms)

    def on_protocol_error(self, error: Exception) -> None:
        log.info("%s: %s", self.conn.name, error)

    def on_closed(self, error: Exception | None) -> None:
        ctx = self.context
        if ctx.stopping:
            # Quitting closes every session; the operations stay as they are (feeding them
            # would do nothing but cost a task per operation and session: 10,000 x 11 at 10,000).
            return
        forgotten = isinstance(error, SessionExpired)
        for runner in ctx.routing.in_flight_of(self.conn.name):
            if runner.session is not None and runner.session.state == "ready":
                continue  # it works on another session of this server, which is still open
            runner.feed_soon(_disconnected(runner, ctx, forgotten))


def _disconnected(runner: OperationRunner, ctx: EngineContext, forgotten: bool) -> Callable[[], list[A.Action]]:
    """What feeds ``runner``'s mechanism the loss of its connection, read at the time it is
    fed. ``forgotten``: the server no longer knows the session (HTTP 404), and what it
    bound to it. A runner whose call is out and awaited hears how it ended from the
    request itself (a call refused unprocessed with the session is sent again in the
    next one, and has lost nothing); one that waits to send it again likewise, and one whose
    call has not taken a session yet has lost nothing either."""
    return lambda: [] if runner.awaiting_new_session or runner.original_in_flight or runner.waits_to_start \
        else runner.mech.on_disconnect(now=ctx.clock(), session_lost=forgotten)
