"""Mechanisms that continue by sending a request again: MRTR and resume tokens."""

from __future__ import annotations

from mechanism_driver import CALL, RESULT, of_type, restart

from hostapp.mechanisms import (
    AskInput,
    Cancelled,
    CommitHandle,
    Deliver,
    Mrtr,
    PartialResult,
    ResumeTokenRequest,
    SendRequest,
    Unknown,
)

T0 = 1_800_000_000.0
QUESTION = {"city": {"method": "elicitation/create",
                     "params": {"message": "Which city?", "requestedSchema": {"type": "object", "properties": {}}}}}
#: What the engine is asked: the same questions under secret-free aliases.
ASKED = {"q1": QUESTION["city"]}


def asked(m: Mrtr) -> list:
    return m.on_result({"resultType": "input_required", "inputRequests": QUESTION, "requestState": "RS-1"},
                       now=T0 + 1)


# ---------------------------------------------------------------- MRTR


def test_mrtr_retry_repeats_the_request_with_answers_and_state():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    actions = asked(m)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "RS-1"
    assert AskInput(ASKED, "mrtr") in actions
    answer = {"action": "accept", "content": {"name": "Brest"}}
    sent = m.answer_input({"q1": answer, "q9": {"action": "accept"}}, now=T0 + 2)
    # Answers go back under the server's own keys; an answer to nothing asked is dropped.
    assert of_type(sent, SendRequest) == [
        SendRequest("tools/call", {**CALL, "inputResponses": {"city": answer}, "requestState": "RS-1"})]
    # The consumed state leaves the keyring with the commit that precedes the retry.
    assert isinstance(sent[0], CommitHandle) and sent[0].secret is None
    assert m.on_result(RESULT, now=T0 + 3) == [Deliver(result=RESULT)]


def test_mrtr_several_rounds():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    asked(m)
    m.answer_input({"q1": {"action": "accept", "content": {}}}, now=T0 + 2)
    second = m.on_result({"resultType": "input_required", "inputRequests": QUESTION, "requestState": "RS-2"},
                         now=T0 + 3)
    assert AskInput(ASKED, "mrtr") in second and m.secret() == "RS-2"


def test_mrtr_state_only_round_trip_is_sent_back_at_once():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    actions = m.on_result({"resultType": "input_required", "requestState": "RS-9"}, now=T0 + 1)
    assert of_type(actions, SendRequest) == [SendRequest("tools/call", {**CALL, "requestState": "RS-9"})]


def test_mrtr_result_without_result_type_is_complete():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    assert m.on_result(RESULT, now=T0 + 1) == [Deliver(result=RESULT)]


def test_mrtr_question_answerable_after_restart():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    asked(m)
    m = restart(m)
    assert AskInput(ASKED, "mrtr") in m.resume(now=T0 + 9000)
    sent = m.answer_input({"q1": {"action": "decline"}}, now=T0 + 9001)
    assert of_type(sent, SendRequest)[0].params["requestState"] == "RS-1"
    assert of_type(sent, SendRequest)[0].params["inputResponses"] == {"city": {"action": "decline"}}


def test_mrtr_retry_in_flight_at_a_crash_is_unknown():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    asked(m)
    m.answer_input({"city": {"action": "accept", "content": {}}}, now=T0 + 2)
    m = restart(m)
    assert isinstance(m.resume(now=T0 + 10)[0], Unknown)


def test_mrtr_answer_without_question_is_ignored_and_cancel_while_asking_is_local():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    assert m.answer_input({"x": {}}, now=T0 + 1) == []
    asked(m)
    assert m.cancel(now=T0 + 2) == [Cancelled("cancelled while the server waited for an answer")]


def test_mrtr_duplicate_input_required_is_not_asked_twice():
    m = Mrtr()
    m.prepare(dict(CALL), now=T0)
    asked(m)
    assert asked(m) == []


# ---------------------------------------------------------------- resume tokens


def chunk(token: str | None, text: str) -> dict:
    result = {"content": [{"type": "text", "text": text}]}
    if token:
        result["_meta"] = {"nextResumeToken": token}
    return result


def test_resume_token_continuation_changes_only_the_token():
    m = ResumeTokenRequest()
    params = {**CALL, "_meta": {"progressToken": 5}}
    m.prepare(params, now=T0)
    actions = m.on_result(chunk("RT-1", "part 1"), now=T0 + 1)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "RT-1"
    assert PartialResult({"content": [{"type": "text", "text": "part 1"}]}) in actions
    assert of_type(actions, SendRequest) == [
        SendRequest("tools/call", {**CALL, "_meta": {"progressToken": 5, "resumeToken": "RT-1"}})]
    second = m.on_result(chunk("RT-2", "part 2"), now=T0 + 2)
    assert of_type(second, SendRequest)[0].params["_meta"]["resumeToken"] == "RT-2"
    assert m.on_result(chunk(None, "end"), now=T0 + 3) == [Deliver(result=chunk(None, "end"))]


def test_resume_token_duplicate_chunk_does_not_send_twice():
    m = ResumeTokenRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_result(chunk("RT-1", "part 1"), now=T0 + 1)
    m.on_result(chunk("RT-2", "part 2"), now=T0 + 2)
    assert m.on_result(chunk("RT-2", "part 2"), now=T0 + 2.1) == []


def test_resume_token_survives_restart_and_disconnect():
    m = ResumeTokenRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_result(chunk("RT-1", "part 1"), now=T0 + 1)
    assert of_type(m.on_disconnect(now=T0 + 2), Unknown) == []
    m = restart(m)
    [again] = m.resume(now=T0 + 60)
    assert again.params["_meta"]["resumeToken"] == "RT-1"


def test_resume_token_error_of_the_operation_is_delivered():
    m = ResumeTokenRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_result(chunk("RT-1", "part 1"), now=T0 + 1)
    error = {"code": -32603, "message": "upstream failed"}
    assert m.on_error(error, now=T0 + 2) == [Deliver(error=error)]


def test_resume_token_refused_is_unknown_not_the_operations_failure():
    """A server that sent the final result for a token refuses it afterwards; if that
    result was lost with its connection, the continuation hostapp sends is refused."""
    m = ResumeTokenRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_result(chunk("RT-1", "part 1"), now=T0 + 1)
    m.on_disconnect(now=T0 + 2)
    m = restart(m)
    m.resume(now=T0 + 3)
    [outcome] = m.on_error({"code": -32602, "message": "invalid or expired resume token"}, now=T0 + 4)
    assert isinstance(outcome, Unknown) and "never reached hostapp" in outcome.reason
