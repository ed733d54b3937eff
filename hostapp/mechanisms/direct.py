"""A plain request, and the upgrade to whatever resumption the server offers mid-call.

On its own a plain request cannot survive anything: if the connection or the host goes
away while it is in flight, its outcome is unknown. But several mechanisms are offered
by the *server* in the middle of a call (an SSE event id, a SEP-975 resume policy, a
stream, a resume token, an MRTR question, a task created by the tasks extension).
``DirectRequest`` watches for those offers and hands the operation over to the
offered mechanism (its *carrier*), so the engine keeps one object per operation.
"""

from __future__ import annotations

from typing import Any, Self

from hostapp.mechanisms.actions import Action, CommitHandle, Deliver, Unknown
from hostapp.mechanisms.base import ADOPTER_KEY, MECHANISMS, SENT, Mechanism, register, restore_mechanism
from hostapp.protocol.timing import Timing

RESUME_POLICY = "notifications/requests/resumePolicy"
STREAM_CREATE = "notifications/stream/create"


def offer_in_notification(method: str, params: dict[str, Any]) -> str | None:
    """The name of the mechanism a server notification offers, if any."""
    if method == RESUME_POLICY and isinstance((params or {}).get("resumeToken"), str):
        return "resumable_requests"
    if method == STREAM_CREATE and isinstance(((params or {}).get("stream") or {}).get("streamId"), str):
        return "streams"
    return None


def offer_in_result(result: dict[str, Any]) -> str | None:
    """The name of the mechanism a result continues with, if it is not final."""
    result_type = result.get("resultType")
    if result_type == "task":
        return "tasks_extension"
    if result_type == "input_required":
        return "mrtr"
    task = result.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str):
        return "tasks_2025"
    meta = result.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get("nextResumeToken"), str):
        return "resume_token"
    return None


class _CarrierName:
    """``DirectRequest.name``: ``"direct"`` on the class (its journal key), and on an
    instance the name of the carrier that holds the operation, if one does: the
    mechanism that really carries it, as the journal records it."""

    def __get__(self, obj: DirectRequest | None, owner: type | None = None) -> str:
        carrier = obj.carrier if obj is not None else None
        return carrier.name if carrier is not None else "direct"


@register
class DirectRequest(Mechanism):
    """A request with no durable mechanism, upgraded to one the server offers.

    States: those of :class:`Mechanism`; once a carrier is adopted, its states.
    Without a carrier: a response delivers; a dropped connection or a host restart
    while in flight ends as Unknown (the tool may or may not have run).

    Offers in a *result* always take over (a result ends the request that a stream or
    resume policy was keeping alive). Offers in notifications or SSE events take over
    only if more durable than the current carrier.

    Once a carrier holds the operation, the journal records the carrier's state, marked
    as adopted (``ADOPTER_KEY``): a restart rebuilds this request around the carrier, so
    that the offers it watches for are still taken up (a resumed SSE stream may replay a
    result that offers a resume token or a task).
    """

    name = _CarrierName()
    durability = 0

    def __init__(self, method: str = "tools/call", *, sse_resumable: bool = True) -> None:
        super().__init__(method)
        self.carrier: Mechanism | None = None
        # The stateless era has no SSE resumption: closing the stream cancels.
        self.sse_resumable = sse_resumable

    def _load_state(self, state: dict[str, Any], secret: str | None) -> None:
        self.carrier = None
        self.sse_resumable = True

    # -- adoption

    def _adopt(self, offered: str | None, *, from_result: bool) -> None:
        cls = MECHANISMS.get(offered) if offered else None
        if cls is None:
            return
        current = self.carrier
        if current is not None and type(current) is cls:
            return
        if not from_result and cls.durability <= (current.durability if current else self.durability):
            return
        self.carrier = cls.adopt(current or self)

    def _via_carrier(self, actions: list[Action]) -> list[Action]:
        assert self.carrier is not None
        self._mirror(self.carrier)
        # The carrier commits its own state; the journal must also know that this
        # request adopted it.
        return [CommitHandle(self.state(), a.secret) if isinstance(a, CommitHandle) else a for a in actions]

    def _mirror(self, carrier: Mechanism) -> None:
        self.phase = carrier.phase
        self.status = carrier.status
        self.progress_high = carrier.progress_high
        self.expires_at = carrier.expires_at

    # -- public hooks: offers first, then the carrier or the plain behaviour

    def on_result(self, result: dict[str, Any], *, now: float, method: str | None = None) -> list[Action]:
        if self.done:
            return []
        if method in (None, self.method):
            self._adopt(offer_in_result(result), from_result=True)
        if self.carrier:
            return self._via_carrier(self.carrier.on_result(result, now=now, method=method))
        return super().on_result(result, now=now, method=method)

    def on_error(self, error: dict[str, Any], *, now: float, method: str | None = None) -> list[Action]:
        if self.carrier and not self.done:
            return self._via_carrier(self.carrier.on_error(error, now=now, method=method))
        return super().on_error(error, now=now, method=method)

    def on_notification(self, method: str, params: dict[str, Any], *, now: float) -> list[Action]:
        if self.done:
            return []
        self._adopt(offer_in_notification(method, params), from_result=False)
        if self.carrier:
            return self._via_carrier(self.carrier.on_notification(method, params, now=now))
        return super().on_notification(method, params, now=now)

    def take_progress(self, progress: float) -> None:
        if self.carrier is not None and not self.done:
            self.carrier.take_progress(progress)
            self.progress_high = self.carrier.progress_high  # as _mirror does
        else:
            super().take_progress(progress)

    def on_stream_event(self, event_id: str | None, retry_ms: int | None, *, now: float) -> list[Action]:
        if self.done:
            return []
        if event_id and self.sse_resumable:
            self._adopt("http_resumption", from_result=False)
        if self.carrier:
            return self._via_carrier(self.carrier.on_stream_event(event_id, retry_ms, now=now))
        return super().on_stream_event(event_id, retry_ms, now=now)

    def _delegate(self, hook: str, **kwargs: Any) -> list[Action]:
        if self.carrier and not self.done:
            return self._via_carrier(getattr(self.carrier, hook)(**kwargs))
        actions: list[Action] = getattr(super(), hook)(**kwargs)
        return actions

    def on_disconnect(self, *, now: float, session_lost: bool = False) -> list[Action]:
        return self._delegate("on_disconnect", now=now, session_lost=session_lost)

    def resume(self, *, now: float) -> list[Action]:
        return self._delegate("resume", now=now)

    def wake(self, *, now: float) -> list[Action]:
        return self._delegate("wake", now=now)

    def answer_input(self, responses: dict[str, Any], *, now: float) -> list[Action]:
        return self._delegate("answer_input", responses=responses, now=now)

    def cancel(self, *, now: float) -> list[Action]:
        return self._delegate("cancel", now=now)

    def expire(self, *, now: float) -> list[Action]:
        return self._delegate("expire", now=now)

    def claims(self, method: str, params: dict[str, Any]) -> bool:
        return self.carrier.claims(method, params) if self.carrier else False

    def life_expected_within(self) -> float | None:
        return self.carrier.life_expected_within() if self.carrier is not None and not self.done else None

    def check_alive(self, *, now: float) -> list[Action]:
        return self._delegate("check_alive", now=now)

    def state(self) -> dict[str, Any]:
        # Once a carrier holds the operation, the journal records the carrier (its name
        # is the operation's mechanism), marked as adopted by this request.
        if self.carrier is None:
            return super().state()
        return {**self.carrier.state(), ADOPTER_KEY: {"mechanism": "direct", "sse_resumable": self.sse_resumable}}

    @classmethod
    def restore(cls, state: dict[str, Any], secret: str | None) -> Mechanism:
        adopter = state.get(ADOPTER_KEY)
        if not isinstance(adopter, dict):
            return super().restore(state, secret)
        carrier = restore_mechanism({k: v for k, v in state.items() if k != ADOPTER_KEY}, secret)
        self = cls(carrier.method, sse_resumable=adopter.get("sse_resumable") is not False)
        self.params = carrier.params
        self.sent_at = carrier.sent_at
        self.carrier = carrier
        self._mirror(carrier)
        return self

    def use_timing(self, timing: Timing) -> Self:
        if self.carrier is not None:
            self.carrier.use_timing(timing)
        return super().use_timing(timing)

    def secret(self) -> str | None:
        return self.carrier.secret() if self.carrier else None

    # -- plain behaviour

    def _on_result(self, result: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method:
            return []
        return [Deliver(result=result)]

    def _on_error(self, error: dict[str, Any], now: float, method: str) -> list[Action]:
        if method != self.method:
            return []
        return self._deliver_call_error(error)

    def _on_disconnect(self, now: float, session_lost: bool) -> list[Action]:
        return [Unknown("the connection dropped while the request was in flight and the server "
                        "offered no way to resume it; it may or may not have run")]

    def _resume(self, now: float) -> list[Action]:
        if self.phase == SENT:
            return [Unknown("the host stopped while the request was in flight; it may or may not have run")]
        return []
