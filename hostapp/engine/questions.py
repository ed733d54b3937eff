"""Questions a server asks the person (elicitation), and their answers.

A question is shown through the listener (``input_requested``) and awaited until the
person answers (:meth:`QuestionDesk.answer`), or until it is withdrawn: its operation
ended, the server said a URL elicitation is complete, or the host quits. A question that
cannot be shown as MCP defines it is refused before anyone sees it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from hostapp.store.journal import OperationJournal


def check_question(params: dict[str, Any]) -> None:
    """Refuse an elicitation that cannot be shown to a person as MCP defines it: a form
    schema outside the allowed subset, or a URL that is not a plain http(s) address."""
    # Imported here: it brings jsonschema, which every start would pay for otherwise.
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


class QuestionDesk:
    """The open questions to the person, each with the future its asker awaits.

    States of a question: open (shown, awaited) → answered, or withdrawn (answered
    ``cancel`` for its asker and taken off the screen), or cancelled at quit.
    ``journal`` and ``listener`` are read at each use: the listener may be replaced after
    the engine is built (the window's adapter).
    """

    def __init__(self, journal: Callable[[], OperationJournal], listener: Callable[[], api.EngineListener]):
        self._journal = journal
        self._listener = listener
        self._open: dict[str, tuple[api.InputRequest, asyncio.Future[dict[str, Any]]]] = {}
        self._by_operation: dict[str, set[str]] = {}  # operation id -> its open question ids

    async def ask(self, params: dict[str, Any], *, operation_id: str | None, server: str,
                  qid: str | None = None) -> dict[str, Any]:
        """Show the question and wait for the answer (``{"action": ...}``); raise RpcError
        (INVALID_PARAMS) for one nobody can be shown. ``qid``: the id to show it under,
        for an asker that may take it back (:meth:`withdraw`); a new one by default."""
        journal, listener = self._journal(), self._listener()
        try:
            check_question(params)  # a question nobody can be shown is refused, clearly
        except RpcError as exc:
            if operation_id is not None:
                journal.append_event(operation_id, "input_refused", {"reason": exc.message})
                listener.operation_event(operation_id, "input_refused", {"reason": exc.message})
            raise
        qid = qid or uuid.uuid4().hex[:12]
        request = api.InputRequest(
            id=qid, operation_id=operation_id, server=server,
            mode=params.get("mode") or "form", message=str(params.get("message", "")), params=params)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._open[qid] = (request, fut)
        if operation_id is not None:
            self._by_operation.setdefault(operation_id, set()).add(qid)
            journal.append_event(operation_id, "input_requested", {"mode": request.mode, "message": request.message})
        listener.input_requested(request)
        try:
            answer = await fut
        finally:
            self._open.pop(qid, None)
            if operation_id is not None:
                self._discard(operation_id, qid)
        if operation_id is not None:
            self._journal().append_event(operation_id, "input_answered", {"action": answer.get("action")})
        return answer

    def _discard(self, operation_id: str, qid: str) -> None:
        asked = self._by_operation.get(operation_id)
        if asked is not None:
            asked.discard(qid)
            if not asked:
                del self._by_operation[operation_id]

    def asks(self, operation_id: str) -> bool:
        """Whether a question of ``operation_id`` waits for the person now."""
        return operation_id in self._by_operation

    def open_questions(self) -> list[api.InputRequest]:
        """The questions still waiting for the person, oldest first."""
        return [request for request, _ in self._open.values()]

    def answer(self, request_id: str, answer: dict[str, Any]) -> None:
        entry = self._open.get(request_id)
        if entry is None:
            raise KeyError(f"no open question {request_id!r}")
        if not entry[1].done():
            entry[1].set_result(answer)

    def withdraw(self, qid: str) -> None:
        """Take the question back: its asker gets ``cancel``, the person no longer sees it."""
        entry = self._open.pop(qid, None)
        if entry is not None:
            if not entry[1].done():
                entry[1].set_result({"action": "cancel"})
            self._listener().input_withdrawn(qid)

    def withdraw_all_of(self, operation_id: str) -> None:
        """The operation ended: its questions are moot."""
        for qid in list(self._by_operation.get(operation_id, ())):
            self.withdraw(qid)

    def elicitation_complete(self, elicitation_id: Any) -> None:
        """The server says the URL elicitation ``elicitation_id`` was completed."""
        for qid, (req, _fut) in list(self._open.items()):
            if req.mode == "url" and req.params.get("elicitationId") == elicitation_id:
                self.withdraw(qid)

    def cancel_all(self) -> None:
        """Quitting: nobody is waiting for the answers any more."""
        for _, fut in self._open.values():
            if not fut.done():
                fut.cancel()
