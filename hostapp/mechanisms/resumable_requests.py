"""Transport-agnostic resumable requests (SEP-975 draft; docs/protocol.md, "7. Resumable requests").

A client that declared ``resumableRequests`` may receive
``notifications/requests/resumePolicy {requestId, resumeToken, maxWait?}`` for a
request; from then on either side may disconnect. ``requests/getStatus {requestId,
resumeToken}`` reports ``processing | completed | failed`` without fetching messages
(and resets the server's timers); ``requests/resume {resumeToken}``, sent under the
SAME JSON-RPC id as the original request, replays what was missed and then the
original response. The resume token is a secret.
"""

from __future__ import annotations

from typing import Any

from hostapp.mechanisms.actions import Action, Deliver, MarkStatus, SendRequest, Unknown
from hostapp.mechanisms.base import HELD, SENT, Mechanism, is_invalid_handle, register

RESUME_POLICY = "notifications/requests/resumePolicy"


@register
class ResumableRequest(Mechanism):
    """A request under a SEP-975 resume policy.

    States: ``sent`` -> ``held`` (policy committed) -> ``done`` on the original
    response (to the request itself or to ``requests/resume``). After a reconnect or a
    restart: ``requests/getStatus``, then ``requests/resume`` with the original id.
    Secret: the resume token.
    """

    name = "resumable_requests"
    durability = 60

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.resume_token: str | None = secret
        self.request_id: int | str | None = state.get("request_id")
        self.max_wait: float | None = state.get("max_wait")
        self.last_contact: float | None = state.get("last_contact")
        # In this process: a requests/resume is out (its answer comes under the original
        # request's id, so the engine hands it over as the original's), and what the last
        # requests/getStatus said.
        self.resuming = False
        self.server_status: str | None = None

    def _extra_state(self) -> dict[str, Any]:
        # A JSON-RPC id is not a secret: it means nothing without the token.
        return {"request_id": self.request_id, "max_wait": self.max_wait, "last_contact": self.last_contact}

    def secret(self) -> str | None:
        return self.resume_token

    def _on_notification(self, method: str, params: dict[str, Any], now: float) -> list[Action]:
        self.last_contact = now
        if method != RESUME_POLICY or not isinstance(params.get("resumeToken"), str):
            return []
        if params["resumeToken"] == self.resume_token:
            return []  # a replayed policy
        first = self.resume_token is None
        self.resume_token = params["resumeToken"]
        self.request_id = params.get("requestId", self.request_id)
        max_wait = params.get("maxWait")
        self.max_wait = float(max_wait) if isinstance(max_wait, (int, float)) and not isinstance(max_wait, bool) \
            else None
        self.phase = HELD
        return [self._commit(), MarkStatus("working")] if first else [self._commit()]

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        self.last_contact = now
        if method in (self.method, "requests/resume"):
            return [Deliver(result=result)]
        if method == "requests/getStatus":
            status = result.get("status")
            self.server_status = status if isinstance(status, str) else None
            actions: list[Action] = []
            if result.get("hasInputRequest"):
                actions.append(MarkStatus("input_required"))
            elif status == "processing":
                actions.append(MarkStatus("working"))
            # Whatever the status, the outcome (or the pending question) comes by resuming.
            return [*actions, self._resume_request()]
        return []

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method == self.method and self.resuming:
            method = "requests/resume"  # the answer to requests/resume, under the original id
        if method == self.method:
            return [Deliver(error=error)]
        if method in ("requests/resume", "requests/getStatus"):
            if is_invalid_handle(error):
                return [Unknown(self._refused(method))]
            if method == "requests/resume":
                return [Deliver(error=error)]  # the original request's own error
            return self._retry_later(now, None, "retry requests/getStatus")
        return []

    def _refused(self, method: str) -> str:
        """Why the outcome cannot be known once the server refuses ``method`` (-32602).
        The server's own message is left out: it may quote the token."""
        if method == "requests/resume" and self.server_status in ("completed", "failed"):
            # A server refuses to resume a request that ended only once its response
            # went out: it was written to a connection that broke before hostapp read it.
            return (f"the server reports that the request {self.server_status} and will not send its response "
                    "again (it counts it as delivered), but hostapp never received it; the outcome cannot be known")
        return (f"the server refused {method}: the resume token has expired, is invalid, or its response "
                "was already delivered without reaching hostapp; whether the request finished cannot be known")

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        self.resuming = False  # a requests/resume in flight is gone with the connection
        return super()._on_disconnect(now, session_lost)

    def _resume_request(self) -> SendRequest:
        self.resuming = True
        return SendRequest("requests/resume", {"resumeToken": self.resume_token}, reuse_jsonrpc_id=True)

    def _status_request(self) -> SendRequest:
        return SendRequest("requests/getStatus", {"requestId": self.request_id, "resumeToken": self.resume_token})

    def _wake(self, now: float) -> list[Action]:
        return [self._status_request()] if self.resume_token else []

    def _resume(self, now: float) -> list[Action]:
        if self.resume_token is None:
            if self.phase == SENT:
                return [Unknown("the request was in flight before the server sent a resume policy; "
                                "it may or may not have run")]
            return []
        return [self._status_request()]
