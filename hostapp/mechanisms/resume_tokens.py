"""Resume tokens (draft "Resuming"; docs/protocol.md, "5. Resume tokens"), as a resume mechanism.

A result may carry ``_meta.nextResumeToken``: the operation goes on, and the client
continues it by sending the same method with the same params, adding only
``_meta.resumeToken``. A result without ``nextResumeToken`` is the last one. Tokens are
opaque, and a token of a completed request is expired; an invalid one draws -32602.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Self

from hostapp.mechanisms.actions import (
    Action,
    Deliver,
    MarkStatus,
    PartialResult,
    SendRequest,
    Unknown,
)
from hostapp.mechanisms.base import HELD, SENT, Mechanism, is_invalid_handle, register


def next_resume_token(result: dict[str, Any]) -> str | None:
    meta = result.get("_meta")
    token = meta.get("nextResumeToken") if isinstance(meta, dict) else None
    return token if isinstance(token, str) else None


@register
class ResumeTokenRequest(Mechanism):
    """A request continued with server-issued resume tokens.

    States: ``sent`` (first request in flight, no token) -> ``held`` (a token is
    committed; the continuation is in flight or will be sent on ``resume``) -> ``done``
    on a result without ``nextResumeToken``. Every intermediate result is a
    PartialResult. Secret: the latest token.
    """

    name = "resume_token"
    durability = 50

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.token: str | None = secret
        self.chunks: int = state.get("chunks", 0)
        # Whether a request is in flight dies with the process: a restored one has none.
        self.in_flight = False
        self.last_chunk: str | None = None  # in memory only: it contains the token

    def _extra_state(self) -> dict[str, Any]:
        return {"chunks": self.chunks}

    def secret(self) -> str | None:
        return self.token

    @classmethod
    def adopt(cls, other: Mechanism) -> Self:
        adopted = super().adopt(other)
        adopted.in_flight = True  # the result that offered the token answers a request in flight
        return adopted

    def _prepare(self, params: dict[str, Any], now: float) -> tuple[dict[str, Any], list[Action]]:
        self.in_flight = True
        return params, [MarkStatus("submitted")]

    def _continuation(self) -> SendRequest:
        params = copy.deepcopy(self.params)
        meta = dict(params.get("_meta") or {})
        meta["resumeToken"] = self.token  # the only change a continuation may make
        params["_meta"] = meta
        self.in_flight = True
        return SendRequest(self.method, params)

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method or not self.in_flight:
            return []  # a duplicate: its continuation was already sent
        fingerprint = json.dumps(result, sort_keys=True, default=str)
        if fingerprint == self.last_chunk:
            # A replay of the chunk already acted on, arriving while its continuation
            # is in flight (tokens may be stable, so the token alone cannot tell).
            return []
        self.last_chunk = fingerprint
        self.in_flight = False
        token = next_resume_token(result)
        if token is None:
            return [Deliver(result=result)]
        first = self.token is None
        self.token = token
        self.chunks += 1
        self.phase = HELD
        actions: list[Action] = [self._commit(), PartialResult(result)]
        if first:
            actions.append(MarkStatus("working"))
        return [*actions, self._continuation()]

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method:
            return []
        self.in_flight = False
        if self.token is not None and is_invalid_handle(error):
            # Also what a server says once it sent the final result for this token: that
            # answer went into a connection that broke before hostapp read it.
            return [Unknown("the server rejected the resume token (expired, invalid, or already spent on a "
                            "final result that never reached hostapp); whether the operation finished "
                            "cannot be known")]
        return [Deliver(error=error)]

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        self.in_flight = False
        return super()._on_disconnect(now, session_lost)

    def _resume(self, now: float) -> list[Action]:
        if self.token is None:
            if self.phase == SENT:
                return [Unknown("the request was in flight before any resume token arrived; "
                                "it may or may not have run")]
            return []
        return [self._continuation()]
