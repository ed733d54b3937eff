"""Multi round-trip requests (SEP-2322, 2026-07-28), as a resume mechanism.

Instead of asking the client mid-request, a server answers
``{"resultType": "input_required", "inputRequests": {...}, "requestState": "..."}``; the
client asks the person and sends the same request again (new JSON-RPC id) with
``inputResponses`` and the ``requestState`` unchanged. Nothing runs on the server while
the question is open, and ``requestState`` is self-contained, so the pending question
survives any restart and can be answered later. A retry in flight, however, is a plain
request: if it is lost, its outcome is unknown.
"""

from __future__ import annotations

import copy
from typing import Any

from hostapp.mechanisms.actions import (
    Action,
    AskInput,
    Cancelled,
    Deliver,
    MarkStatus,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.base import AWAITING_INPUT, SENT, Mechanism, register

INPUT_REQUIRED = "input_required"


@register
class Mrtr(Mechanism):
    """A request the server may answer with questions (``input_required``).

    States: ``sent`` (a request in flight) -> ``awaiting_input`` (question and
    ``requestState`` committed; AskInput emitted, asked again after a restart) ->
    ``sent`` (retry with the answers) ... -> ``done``. A result without ``resultType``
    (an older server) is complete. Secret: the ``requestState``.
    """

    name = "mrtr"
    durability = 40

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.request_state: str | None = secret
        self.input_requests: dict[str, Any] = state.get("input_requests") or {}
        self.rounds: int = state.get("rounds", 0)

    def _extra_state(self) -> dict[str, Any]:
        return {"input_requests": copy.deepcopy(self.input_requests), "rounds": self.rounds}

    def secret(self) -> str | None:
        return self.request_state

    def _ask(self, kind: str, message: str | None = None) -> list[Action]:
        """Ask the open questions under aliases ``q1``, ``q2``...: a server may build its
        keys from the task id, and what the engine shows or journals must not hold it.
        The aliases follow the order of ``input_requests``, so they are the same after
        a restart."""
        aliases = self._aliases()
        requests = {alias: copy.deepcopy(self.input_requests[key]) for alias, key in aliases.items()}
        return [MarkStatus("input_required", message), AskInput(requests, kind)]

    def _aliases(self) -> dict[str, str]:
        return {f"q{index}": key for index, key in enumerate(self.input_requests, start=1)}

    def _unalias(self, responses: dict[str, Any]) -> dict[str, Any]:
        aliases = self._aliases()
        return {aliases[alias]: answer for alias, answer in responses.items() if alias in aliases}

    def _retry(self, responses: dict[str, Any] | None) -> SendRequest:
        params = copy.deepcopy(self.params)
        if responses is not None:
            params["inputResponses"] = responses
        if self.request_state is not None:
            params["requestState"] = self.request_state
        return SendRequest(self.method, params)

    def _on_input_required(self, result: dict[str, Any]) -> list[Action]:
        self.rounds += 1
        state = result.get("requestState")
        self.request_state = state if isinstance(state, str) else None
        requests = result.get("inputRequests")
        if not isinstance(requests, dict) or not requests:
            # Only state, no question: the server wants the round trip itself.
            self.input_requests = {}
            return [self._commit(), self._retry(None)]
        self.input_requests = requests
        self.phase = AWAITING_INPUT
        return [self._commit(), *self._ask("mrtr")]

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method or self.phase != SENT:
            return []  # a duplicate while the question is open, or not ours
        if result.get("resultType") == INPUT_REQUIRED:
            return self._on_input_required(result)
        return [Deliver(result=result)]

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method or self.phase != SENT:
            return []
        # An expired or invalid requestState (-32602) ends here too: the server
        # finished nothing, and saying so is the clear outcome.
        return [Deliver(error=error)]

    def _answer_input(self, responses: dict[str, Any], now: float) -> list[Action]:
        retry = self._retry(self._unalias(responses))
        # The state is consumed by this retry; once it is in flight a crash makes the
        # outcome unknown, so the journal must no longer offer the question.
        self.request_state = None
        self.input_requests = {}
        self.phase = SENT
        return [self._commit(), MarkStatus("working"), retry]

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        if self.phase == AWAITING_INPUT:
            return []  # nothing is in flight
        return [Unknown("the connection dropped while the request was in flight; it may or may not have run")]

    def _resume(self, now: float) -> list[Action]:
        if self.phase == AWAITING_INPUT:
            return self._ask("mrtr")
        return [Unknown("the host stopped while the request was in flight; it may or may not have run")]

    def _cancel(self, now: float) -> list[Action]:
        if self.phase == AWAITING_INPUT:
            return [Cancelled("cancelled while the server waited for an answer")]
        return super()._cancel(now)

    def _expire(self, now: float) -> list[Action]:
        if self.phase == AWAITING_INPUT:
            return [Cancelled("the question was not answered in time")]
        return super()._expire(now)
