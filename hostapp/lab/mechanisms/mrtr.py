"""Multi round-trip requests (MRTR, 2026-07-28): a request that asks and is sent again.

In the stateless era a handler that needs an answer raises
:class:`~hostapp.lab.call.InputRequired`; the core answers ``resultType:
"input_required"`` with the questions and, when the handler has state to carry, a signed
``requestState`` (:meth:`Mrtr.sign_state`). The client sends the same request again with
``inputResponses`` and that ``requestState``; the handler opens it (:meth:`Mrtr.open_state`)
and goes on where it stopped. The lab keeps nothing between the rounds: the state travels
with the client, signed with a key derived from the lab's state key, so it survives a
restart. In the handshake era the same tool asks with ``elicitation/create`` instead.

``long_mrtr`` does the first half of its work, asks whether to go on, then does the rest.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import uuid
from typing import Any

from hostapp.lab import tools as catalogue
from hostapp.lab.call import Call
from hostapp.lab.mechanisms.base import LabHost, LabMechanism, ToolHandler
from hostapp.protocol.eras import STATELESS_VERSION
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError


class Mrtr(LabMechanism):
    """``long_mrtr``, and the signing of every ``requestState`` the lab hands out."""

    def __init__(self, core: LabHost) -> None:
        super().__init__(core)
        self._signing_key = core.state.signing_key()

    def tools(self) -> dict[str, ToolHandler]:
        return {"long_mrtr": self._tool_long_mrtr}

    # -- request state --------------------------------------------------------------------

    def sign_state(self, state: dict[str, Any]) -> str:
        """``state`` as an opaque ``requestState``: base64url JSON and its HMAC."""
        body = base64.urlsafe_b64encode(json.dumps(state, separators=(",", ":")).encode()).decode().rstrip("=")
        mac = hmac.new(self._signing_key, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}.{mac}"

    def open_state(self, token: Any) -> dict[str, Any]:
        """The state signed into ``token``; RpcError unless this lab signed it."""
        if not isinstance(token, str) or "." not in token:
            raise RpcError(INVALID_PARAMS, "invalid requestState")
        body, mac = token.rsplit(".", 1)
        expected = hmac.new(self._signing_key, body.encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, expected):
            raise RpcError(INVALID_PARAMS, "invalid requestState")
        state: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        return state

    # -- long_mrtr ------------------------------------------------------------------------

    async def _inline_steps(self, call: Call, tool: str, seconds: float, steps: int, first: int, last: int) -> None:
        for i in range(first, last + 1):
            await asyncio.sleep(seconds / steps)
            self.core.send_progress(call.stream, call.progress_token, i, steps, f"{tool}: step {i}/{steps}")

    async def _tool_long_mrtr(self, call: Call, args: dict[str, Any]) -> Any:
        seconds, steps = self.core.job_duration(args)
        half = steps // 2
        raw_state = call.params.get("requestState")
        if raw_state is not None:
            state = self.open_state(raw_state)
            if state.get("tool") != "long_mrtr" or state.get("args") != args:
                raise RpcError(INVALID_PARAMS, "requestState does not belong to this call")
        else:
            state = {"tool": "long_mrtr", "args": args, "operation": uuid.uuid4().hex}
            self.core.state.count_execution("long_mrtr", state["operation"])
            await self._inline_steps(call, "long_mrtr", seconds, steps, 1, half)
            state["half_done"] = half
        question: dict[str, Any] = {
            "message": "The first half is done. Continue with the second half?",
            "requestedSchema": {"type": "object", "properties": {
                "proceed": {"type": "boolean", "title": "Continue", "default": True},
                "note": {"type": "string", "title": "Note"}}, "required": ["proceed"]}}
        if call.protocol_version in ("2025-11-25", STATELESS_VERSION):
            question["mode"] = "form"
        answer = await self.core.elicit(call, "continue", question, state)
        if answer.get("action") != "accept" or not (answer.get("content") or {}).get("proceed", True):
            return catalogue.text_result("long_mrtr stopped after the first half", {"answer": answer})
        await self._inline_steps(call, "long_mrtr", seconds, steps, half + 1, steps)
        return catalogue.work_result("long_mrtr", args, {"answer": answer})
