"""Questions a server asks the person (elicitation, sampling), and their answers.

A question is shown through the listener (``input_requested``) and awaited until the
person answers (:meth:`QuestionDesk.answer`), or until it is withdrawn: its operation
ended, the server said a URL elicitation is complete, or the host quits. A question that
cannot be shown as MCP defines it is refused before anyone sees it.

A sampling request (``sampling/createMessage``) is a question too, of mode ``sampling``:
the :class:`~hostapp.engine.sampling.SamplingGate` admits it first (size and rate bounds),
answers it with the model for a server set to approve automatically, and the person's
answer (``{"action": "accept", "reply": TEXT}``) becomes the ``CreateMessageResult``; a
refusal is the error -1 the specification names.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from hostapp.engine import api
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

if TYPE_CHECKING:
    from hostapp.engine.sampling import SamplingGate
    from hostapp.store.journal import OperationJournal

#: The server-to-client requests that are questions to the person.
ELICITATION = "elicitation/create"
SAMPLING = "sampling/createMessage"
PERSON_METHODS = frozenset({ELICITATION, SAMPLING})


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

    def __init__(self, journal: Callable[[], OperationJournal], listener: Callable[[], api.EngineListener],
                 sampling: SamplingGate | None = None):
        self._journal = journal
        self._listener = listener
        self.sampling = sampling
        self._open: dict[str, tuple[api.InputRequest, asyncio.Future[dict[str, Any]]]] = {}
        self._by_operation: dict[str, set[str]] = {}  # operation id -> its open question ids
        self._withdrawn: set[str] = set()  # taken back, not yet seen out by their asker

    async def ask(self, params: dict[str, Any], *, operation_id: str | None, server: str,
                  qid: str | None = None, method: str = ELICITATION) -> dict[str, Any]:
        """Show the question and wait for the answer (``{"action": ...}``; for sampling,
        the ``CreateMessageResult``); raise RpcError (INVALID_PARAMS) for one nobody can be
        shown, and for a sampling request refused (by its bounds or by the person). ``qid``:
        the id to show it under, for an asker that may take it back (:meth:`withdraw`); a
        new one by default."""
        journal, listener = self._journal(), self._listener()
        try:
            if method == SAMPLING:
                summary = self._admit_sampling(server, params)
            else:
                check_question(params)  # a question nobody can be shown is refused, clearly
        except RpcError as exc:
            self._event(operation_id, "input_refused", {"reason": exc.message})
            raise
        if method == SAMPLING:
            automatic = await self._sample_automatically(server, params, operation_id)
            if automatic is not None:
                return automatic
        qid = qid or uuid.uuid4().hex[:12]
        mode = "sampling" if method == SAMPLING else params.get("mode") or "form"
        message = summary if method == SAMPLING else str(params.get("message", ""))
        request = api.InputRequest(id=qid, operation_id=operation_id, server=server, mode=mode, message=message,
                                   params=params)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._open[qid] = (request, fut)
        if operation_id is not None:
            self._by_operation.setdefault(operation_id, set()).add(qid)
            journal.append_event(operation_id, "input_requested", {"mode": request.mode, "message": request.message})
        listener.input_requested(request)
        try:
            answer = await fut
        except asyncio.CancelledError:
            if qid in self._open:  # its asker gave up (a task the server cancelled): off the screen
                self._listener().input_withdrawn(qid)
            raise
        finally:
            self._open.pop(qid, None)
            if operation_id is not None:
                self._discard(operation_id, qid)
        # Answered (by whichever client, or the model): every other client showing it lets
        # it go, as for a question taken back. (One withdrawn was told so by withdraw.)
        if answer.get("action") != "cancel" or qid not in self._withdrawn:
            self._listener().input_withdrawn(qid)
        self._withdrawn.discard(qid)
        if operation_id is not None:
            self._journal().append_event(operation_id, "input_answered", {"action": answer.get("action")})
        if method == SAMPLING:
            from hostapp.protocol.sampling import result_of

            return result_of(answer)
        return answer

    def _event(self, operation_id: str | None, kind: str, data: dict[str, Any]) -> None:
        if operation_id is not None:
            self._journal().append_event(operation_id, kind, data)
            self._listener().operation_event(operation_id, kind, data)

    def _admit_sampling(self, server: str, params: dict[str, Any]) -> str:
        if self.sampling is None:
            raise RpcError(INVALID_PARAMS, "this client does not answer sampling requests")
        return self.sampling.admit(server, params).summary

    async def _sample_automatically(self, server: str, params: dict[str, Any],
                                    operation_id: str | None) -> dict[str, Any] | None:
        """The model's answer, for a server whose requests it answers unasked; None to ask
        the person (the policy says so, or the model failed: said in the timeline)."""
        from hostapp.engine.sampling import ModelError
        from hostapp.protocol.sampling import result_of

        assert self.sampling is not None
        if not self.sampling.auto_approved(server):
            return None
        try:
            draft = await self.sampling.draft(params)
        except ModelError as exc:
            self._event(operation_id, "sampling_model_failed", {"reason": str(exc)})
            return None
        self._event(operation_id, "sampling_answered", {"by": "model", "model": draft["model"]})
        return result_of({"action": "accept", "reply": draft["text"], "model": draft["model"],
                          "stopReason": draft["stopReason"]})

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
        if entry[0].mode == "sampling":
            from hostapp.protocol.sampling import check_answer

            try:
                check_answer(answer)
            except ValueError as exc:
                raise api.InvalidRequest(str(exc)) from None
        if not entry[1].done():
            entry[1].set_result(answer)

    async def draft_reply(self, request_id: str) -> dict[str, str]:
        """The configured model's reply to the open sampling request ``request_id``, for
        the person to review; nothing is sent to the server."""
        entry = self._open.get(request_id)
        if entry is None:
            raise KeyError(f"no open question {request_id!r}")
        if entry[0].mode != "sampling" or self.sampling is None:
            raise api.InvalidRequest("that question is not a sampling request")
        return await self.sampling.draft(entry[0].params)

    def withdraw(self, qid: str) -> None:
        """Take the question back: its asker gets ``cancel``, the person no longer sees it."""
        entry = self._open.pop(qid, None)
        if entry is not None:
            if not entry[1].done():
                entry[1].set_result({"action": "cancel"})
                self._withdrawn.add(qid)
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
