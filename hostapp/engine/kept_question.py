"""A server's question kept across a restart of the host.

Under a 2025-11-25 task the server sends its question (elicitation, or a sampling
request, kept the same way with its ``method``) once, on the
``tasks/result`` stream, and waits for the answer. A host that stopped before the person
answered lost the question, and the server waited for an answer that never came (the
TypeScript SDK gives up after 60 s and goes on without it). So, for the mechanisms in
:data:`~hostapp.engine.operation.QUESTION_KEEPING_MECHANISMS`, the question is kept in the
journal (``open_question``: its JSON-RPC id and its params without ``_meta``, which names
the task) from when it comes until its answer is sent. A host restarted with it asks the
person again and sends the answer under the question's id, in the HTTP session it came in
(the session adopted with the task's handle). If the server stops waiting meanwhile (it
reports the task working again), the question is taken back from the person.

A question whose answer went out just before a kill, but was not yet struck from the
journal, is asked again: the server then gets a second answer to an id it is done with,
which MCP peers ignore. Asking twice is the price of never leaving a server waiting.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from hostapp.engine.operation import QUESTION_KEEPING_MECHANISMS
from hostapp.engine.questions import ELICITATION
from hostapp.protocol.jsonrpc import RequestId, RpcError
from hostapp.store.status import OperationStatus

if TYPE_CHECKING:
    from hostapp.engine.session import ClientSession, RequestContext
    from hostapp.mechanisms.base import Mechanism
    from hostapp.store.journal import OperationJournal, OperationRecord

log = logging.getLogger(__name__)


class QuestionContext(Protocol):
    """What a kept question uses of the engine around its operation (the runner's
    :class:`~hostapp.engine.operation.RunnerContext` offers it)."""

    #: True while the host quits: a question left open then stays in the journal.
    stopping: bool

    @property
    def journal(self) -> OperationJournal: ...

    async def ask_person(self, runner: Any, params: dict[str, Any], *,
                         qid: str | None = None, method: str = ...) -> dict[str, Any]: ...

    def withdraw_question(self, qid: str) -> None: ...


class QuestionOwner(Protocol):
    """What a kept question uses of its operation (an
    :class:`~hostapp.engine.runner.OperationRunner`, which owns it)."""

    @property
    def id(self) -> str: ...

    @property
    def record(self) -> OperationRecord: ...

    @property
    def mech(self) -> Mechanism: ...

    @property
    def context(self) -> QuestionContext: ...

    @property
    def http_session(self) -> tuple[str, str] | None: ...

    @property
    def session(self) -> ClientSession | None:
        """The session the operation runs in now (None while it has none)."""
        ...

    @property
    def done(self) -> bool: ...

    @property
    def ending(self) -> bool:
        """True from the first moment of the operation's finish: it takes no change after."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, None]) -> object:
        """Run ``coro`` as one of the operation's tasks (cancelled when it shuts down)."""
        ...

    async def set_status(self, status: OperationStatus, message: str | None) -> None: ...


class KeptQuestion:
    """The question of one operation kept in the journal (at most one at a time: a task
    asks its questions one after the other)."""

    def __init__(self, runner: QuestionOwner):
        self.runner = runner
        # Restored with a question the host had not answered: asked again after the attach.
        self._from_journal = runner.record.open_question is not None
        # While it is asked again: its params (without _meta) and the person's answer to
        # come, which the same question sent anew by the server gets too. None once the
        # server went on or asked something else (the question asked again is then moot).
        self._again: tuple[Any, asyncio.Future[dict[str, Any]]] | None = None
        self._asked_again: str | None = None  # the id it is shown under, while shown

    async def keep(self, ctx: RequestContext, params: dict[str, Any], method: str = ELICITATION) -> bool:
        """A question came for the operation. Keep it if it would be lost with the host
        otherwise and can be answered after a restart: it came in the session the handle
        is bound to, and the handle is kept (in the keyring). True if kept.

        A different question from the server after the restart supersedes the one asked
        again from the journal: that one is taken back, so the person answers the server's
        newest. (The same question sent anew is answered by :meth:`same_question`.)"""
        self._from_journal = False
        self._went_on()
        runner = self.runner
        bound = runner.http_session
        asked_in = ctx.session.transport.session_id
        # A server may ask before the handle is committed (the TypeScript SDK asks on the
        # standalone stream as soon as the task exists, before its id reached the host):
        # the handle will be bound to the session the operation runs in, which is this one.
        expected = bound[0] if bound is not None else asked_in if ctx.session is runner.session else None
        if (runner.mech.name not in QUESTION_KEEPING_MECHANISMS or ctx.request_id is None or expected is None
                or asked_in != expected or not runner.record.resumable or runner.context.stopping):
            return False
        question: dict[str, Any] = {"id": ctx.request_id, "params": _without_meta(params)}
        if method != ELICITATION:
            question["method"] = method  # (a question journaled before sampling has none)
        await self._write(question)
        return True

    def same_question(self, params: dict[str, Any]) -> asyncio.Future[dict[str, Any]] | None:
        """The person's answer (to come, or given) to the question asked again, if
        ``params`` is that question sent anew by the server (the lab sends it on each
        ``tasks/result`` while it waits): the person is asked once, both ids are answered."""
        if self._again is None or _without_meta(params) != self._again[0]:
            return None
        return self._again[1]

    async def answered(self, request_id: RequestId | None) -> None:
        """The answer to ``request_id`` went out: the server is not owed it any more."""
        kept = self.runner.record.open_question
        if kept is not None and kept.get("id") == request_id:
            await self._write(None)

    async def _write(self, question: dict[str, Any] | None) -> None:
        runner = self.runner
        if runner.ending or runner.context.stopping:
            # An ended operation's question is moot (its end strikes it from the journal,
            # also when the end is on its way there now); a quitting host keeps it.
            return
        runner.record.open_question = question
        await runner.context.journal.update_operation(runner.id, open_question=question)

    def attached(self, session: ClientSession | None) -> None:
        """The operation restored with a kept question is attached: ask it again, to be
        answered in ``session``, the session it came in (None: that session is gone)."""
        if self._from_journal:
            self._from_journal = False
            question = self.runner.record.open_question or {}
            self._again = again = (question.get("params"), asyncio.get_running_loop().create_future())
            method = question.get("method") or ELICITATION
            self.runner.spawn(self._ask_again(session, question.get("id"), again, method))

    async def _ask_again(self, session: ClientSession | None, rid: Any,
                         again: tuple[Any, asyncio.Future[dict[str, Any]]], method: str) -> None:
        runner = self.runner
        params, shared = again
        if session is None or not isinstance(rid, (int, str)) or not isinstance(params, dict):
            log.info("operation %s: the session its open question came in is gone, and the question with it",
                     runner.id)
            self._again = None
            await self._write(None)
            return
        await runner.set_status(OperationStatus.INPUT_REQUIRED, "waiting for your answer")
        if self._again is not again or runner.done:  # the server asked anew meanwhile (or went on, or ended)
            await self.answered(rid)
            return
        self._asked_again = uuid.uuid4().hex[:12]
        refused: RpcError | None = None
        try:
            answer = await runner.context.ask_person(runner, params, qid=self._asked_again, method=method)
        except RpcError as exc:
            # It cannot be shown (now), or (sampling) it was refused: said in the timeline.
            # A question is declined; a sampling request is answered with the error.
            answer, refused = {"action": "decline"}, exc if method != ELICITATION else None
        except asyncio.CancelledError:  # the host quits: nobody answers, here or there
            shared.cancel()
            raise
        finally:
            self._asked_again = None
        if refused is not None:
            shared.set_exception(refused)
            shared.exception()  # (retrieved: the server's copy of the request may never come)
        else:
            shared.set_result(answer)
        if runner.done:
            return
        if self._again is not again:
            await self.answered(rid)  # (unless a newer question took its place meanwhile)
            return
        if await session.answer_earlier_request(rid, answer, method, error=refused):
            await self.answered(rid)
        await runner.set_status(OperationStatus.RUNNING, "answered")

    def server_went_on(self) -> None:
        """The server reports the operation working: it no longer waits for the answer to
        a question asked again (it gave up on it, as the TypeScript SDK does after 60 s,
        or has the answer), and a question it sends later is a new one, for the person."""
        if self._asked_again is not None:
            log.info("operation %s: the server went on without the answer to its question", self.runner.id)
        self._went_on()

    def _went_on(self) -> None:
        self._again = None
        if self._asked_again is not None:
            self.runner.context.withdraw_question(self._asked_again)


def _without_meta(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != "_meta"}
