"""Asynchronous tool execution (SEP-1391): the client-token mechanism."""

from __future__ import annotations

import pytest
from mechanism_driver import CALL, RESULT, of_type, restart, terminals

from hostapp.mechanisms import (
    AsyncTool,
    Cancelled,
    CancelRequest,
    CommitHandle,
    Deliver,
    MarkStatus,
    PartialResult,
    ScheduleWake,
    SendRequest,
    Unknown,
)

T0 = 1_800_000_000.0
INVALID = {"code": -32602, "message": "Failed to retrieve operation: Operation not found"}
STATUS = SendRequest("tools/async/status", {"token": "OP-1"})


def make(**options) -> AsyncTool:
    m = AsyncTool(token_factory=lambda: "OP-1", **options)
    return m


def accepted(m: AsyncTool, status: str = "working", **extra) -> list:
    return m.on_result({"content": [{"type": "text", "text": "started"}],
                        "operation": {"keepAlive": 3600, "pollFrequency": 5, "status": status, **extra}},
                       now=T0 + 1)


def test_token_is_committed_before_the_call_is_sent():
    m = make(keep_alive=600)
    params, actions = m.prepare(dict(CALL), now=T0)
    assert params == {**CALL, "operation": {"token": "OP-1", "keepAlive": 600}}
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "OP-1"
    assert "OP-1" not in str(actions[0].state)


def test_generated_tokens_are_unique():
    tokens = {AsyncTool().prepare(dict(CALL), now=T0)[1][0].secret for _ in range(50)}
    assert len(tokens) == 50 and all(len(t) >= 32 for t in tokens)


def test_immediate_content_is_partial_and_polling_follows_poll_frequency():
    m = make()
    m.prepare(dict(CALL), now=T0)
    actions = accepted(m)
    assert PartialResult({"content": [{"type": "text", "text": "started"}]}) in actions
    assert ScheduleWake(T0 + 6, "poll tools/async/status") in actions
    assert m.wake(now=T0 + 6) == [STATUS]


@pytest.mark.parametrize("status_result, outcome", [
    ({"status": "failed", "error": "disk full"},
     Deliver(result={"content": [{"type": "text", "text": "disk full"}], "isError": True})),
    ({"status": "canceled"}, Deliver(error={"code": -32800, "message": "the server cancelled the operation"})),
    ({"status": "unknown"}, Unknown("the server reports the operation's status as unknown")),
])
def test_terminal_statuses(status_result, outcome):
    m = make()
    m.prepare(dict(CALL), now=T0)
    accepted(m)
    assert m.on_result(status_result, now=T0 + 6, method="tools/async/status") == [outcome]


def test_input_required_is_shown_and_polling_goes_on():
    m = make()
    m.prepare(dict(CALL), now=T0)
    accepted(m)
    actions = m.on_result({"status": "input_required"}, now=T0 + 6, method="tools/async/status")
    assert MarkStatus("input_required") in actions and of_type(actions, ScheduleWake)
    assert m.claims("elicitation/create", {"_operation": {"token": "OP-1"}})


def test_a_sync_answer_delivers_at_once():
    m = make()
    m.prepare(dict(CALL), now=T0)
    assert m.on_result(RESULT, now=T0 + 1) == [Deliver(result=RESULT)]


def test_crash_before_the_answer_then_the_server_knows_the_token():
    m = make()
    m.prepare(dict(CALL), now=T0)
    m = restart(m)
    assert m.resume(now=T0 + 20) == [STATUS]
    actions = m.on_result({"status": "working"}, now=T0 + 21, method="tools/async/status")
    assert isinstance(actions[0], CommitHandle) and actions[0].state["accepted"] is True
    m.on_result({"status": "completed"}, now=T0 + 30, method="tools/async/status")
    assert m.on_result({"result": RESULT}, now=T0 + 31, method="tools/async/result") == [Deliver(result=RESULT)]


def test_crash_before_the_call_arrived_resends_with_the_same_token():
    m = make()
    m.prepare(dict(CALL), now=T0)
    m = restart(m)
    m.resume(now=T0 + 20)
    actions = m.on_error(INVALID, now=T0 + 21, method="tools/async/status")
    assert SendRequest("tools/call", {**CALL, "operation": {"token": "OP-1"}}) in actions
    assert isinstance(actions[0], CommitHandle) and actions[0].state["resent"] is True
    accepted(m)
    assert not m.done


def test_a_resent_call_refused_as_reused_is_unknown():
    m = make()
    m.prepare(dict(CALL), now=T0)
    m.on_disconnect(now=T0 + 1)
    m.resume(now=T0 + 2)
    m.on_error(INVALID, now=T0 + 3, method="tools/async/status")
    [end] = m.on_error(INVALID, now=T0 + 4)
    assert isinstance(end, Unknown)


def test_no_resend_once_the_window_has_passed():
    m = make(keep_alive=60)
    m.prepare(dict(CALL), now=T0)
    m = restart(m)
    m.resume(now=T0 + 3600)
    assert isinstance(m.on_error(INVALID, now=T0 + 3601, method="tools/async/status")[0], Unknown)


def test_a_disconnect_before_the_answer_is_not_fatal():
    m = make()
    m.prepare(dict(CALL), now=T0)
    assert m.on_disconnect(now=T0 + 1) == [MarkStatus("reconnecting")]
    assert m.resume(now=T0 + 2) == [STATUS]


def test_unknown_token_after_acceptance_means_expired():
    m = make()
    m.prepare(dict(CALL), now=T0)
    accepted(m)
    assert isinstance(m.on_error(INVALID, now=T0 + 9, method="tools/async/status")[0], Unknown)


def test_cancel_sends_cancelled_and_waits_for_the_status():
    m = make()
    m.prepare(dict(CALL), now=T0)
    accepted(m)
    actions = m.cancel(now=T0 + 2)
    assert CancelRequest("cancelled by the user") in actions and of_type(actions, ScheduleWake)
    assert m.wake(now=T0 + 8) == [STATUS]
    assert m.on_result({"status": "canceled"}, now=T0 + 9, method="tools/async/status") == [Cancelled()]


def test_cancel_before_the_call_arrived_never_resends():
    m = make()
    m.prepare(dict(CALL), now=T0)
    m.cancel(now=T0 + 1)
    assert m.wake(now=T0 + 3) == [STATUS]
    assert terminals(m.on_error(INVALID, now=T0 + 4, method="tools/async/status")) == [
        Cancelled("cancelled; the call never reached the server")]
