"""Capability declarations, the choice of mechanism, and adopting what the server offers."""

from __future__ import annotations

import pytest
from mechanism_driver import CALL, RESULT, restart

from hostapp.mechanisms import (
    AskInput,
    AsyncTool,
    CommitHandle,
    Deliver,
    DirectRequest,
    HttpStreamResumption,
    Mrtr,
    PartialResult,
    ResumableRequest,
    ResumeTokenRequest,
    SendRequest,
    StreamRequest,
    Tasks2025,
    TasksExtension,
    Unknown,
    candidate_mechanisms,
    choose_mechanism,
    client_capabilities,
    restore_mechanism,
)

T0 = 1_800_000_000.0
TASK_SERVER = {"tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}
EXT_SERVER = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def test_handshake_era_declares_everything_it_supports():
    assert client_capabilities("2025-11-25") == {
        "elicitation": {"form": {}, "url": {}},
        "tasks": {"list": {}, "cancel": {}},
        "resumableRequests": {},
    }
    assert client_capabilities("handshake", task_augmented_elicitation=True)["tasks"]["requests"] == {
        "elicitation": {"create": {}}}


def test_stateless_era_opts_in_to_the_tasks_extension():
    assert client_capabilities("2026-07-28") == {
        "elicitation": {"form": {}, "url": {}},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }


def test_declared_capabilities_validate_against_the_official_wire_models():
    from mcp_types._v2025_11_25 import ClientCapabilities as Caps2025
    from mcp_types._v2026_07_28 import ClientCapabilities as Caps2026

    caps = Caps2025.model_validate(client_capabilities("handshake"))
    assert caps.tasks is not None and caps.elicitation is not None
    assert Caps2026.model_validate(client_capabilities("stateless")).extensions


@pytest.mark.parametrize("era, server, tool, expected", [
    ("handshake", {}, {"name": "t"}, DirectRequest),
    ("handshake", TASK_SERVER, {"execution": {"taskSupport": "optional"}}, Tasks2025),
    ("handshake", {}, {"execution": {"taskSupport": "optional"}}, DirectRequest),
    ("handshake", {}, {"execution": {"taskSupport": "required"}}, Tasks2025),
    ("handshake", TASK_SERVER, {"execution": {"taskSupport": "forbidden"}}, DirectRequest),
    ("handshake", TASK_SERVER, {"invocationMode": "async", "execution": {"taskSupport": "optional"}}, AsyncTool),
    ("handshake", {}, {"invocationMode": "sync"}, DirectRequest),
    ("2026-07-28", EXT_SERVER, {"name": "t"}, TasksExtension),
    ("2026-07-28", {}, {"name": "t"}, DirectRequest),
    ("2026-07-28", EXT_SERVER, {"invocationMode": "async"}, AsyncTool),
])
def test_choose_mechanism(era, server, tool, expected):
    assert choose_mechanism(era, server, tool, "http") is expected


def test_candidates_are_ranked_most_durable_first():
    ranked = candidate_mechanisms("handshake", TASK_SERVER,
                                  {"invocationMode": "async", "execution": {"taskSupport": "optional"}}, "stdio")
    assert ranked == [AsyncTool, Tasks2025, DirectRequest]
    order = [AsyncTool, TasksExtension, ResumableRequest, StreamRequest, ResumeTokenRequest, Mrtr,
             HttpStreamResumption, DirectRequest]
    assert [cls.durability for cls in order] == sorted((cls.durability for cls in order), reverse=True)
    assert [cls for cls in order if cls.client_token] == [AsyncTool]


# ---------------------------------------------------------------- adoption of server offers


def direct() -> DirectRequest:
    m = DirectRequest()
    m.prepare(dict(CALL), now=T0)
    return m


POLICY = ("notifications/requests/resumePolicy", {"requestId": 3, "resumeToken": "RR-1"})


def test_plain_request_without_offers_delivers_or_is_unknown_after_a_break():
    assert direct().on_result(RESULT, now=T0) == [Deliver(result=RESULT)]
    assert isinstance(direct().on_disconnect(now=T0)[0], Unknown)
    assert isinstance(restart(direct()).resume(now=T0)[0], Unknown)


def test_a_more_durable_offer_takes_over():
    m = direct()
    [commit] = m.on_stream_event("ev-1", 1000, now=T0)
    assert commit.state["mechanism"] == "http_resumption"
    actions = m.on_notification(*POLICY, now=T0 + 1)
    assert isinstance(actions[0], CommitHandle) and actions[0].state["mechanism"] == "resumable_requests"
    # A less durable offer after that changes nothing.
    assert m.on_stream_event("ev-2", None, now=T0 + 2) == []
    assert m.state()["mechanism"] == "resumable_requests" and m.secret() == "RR-1"
    restored = restart(m)
    assert isinstance(restored, ResumableRequest)
    assert restored.resume(now=T0 + 3)[0].method == "requests/getStatus"


def test_a_stream_offer_is_adopted_and_resumed():
    m = direct()
    m.on_notification("notifications/stream/create",
                      {"stream": {"streamId": "S-1", "resumeInterval": {"min": 1, "max": 60}}}, now=T0)
    assert isinstance(m.carrier, StreamRequest)
    assert m.claims("notifications/stream/end", {"streamId": "S-1"})
    assert m.on_result(RESULT, now=T0 + 1) == [Deliver(result=RESULT)] and m.done


def test_an_input_required_result_turns_the_request_into_mrtr():
    m = direct()
    question = {"q": {"method": "elicitation/create", "params": {"message": "?", "requestedSchema": {}}}}
    actions = m.on_result({"resultType": "input_required", "inputRequests": question, "requestState": "RS"},
                          now=T0)
    assert AskInput({"q1": question["q"]}, "mrtr") in actions and m.state()["mechanism"] == "mrtr"
    retry = [a for a in m.answer_input({"q1": {"action": "cancel"}}, now=T0 + 1) if isinstance(a, SendRequest)]
    assert retry[0].params["requestState"] == "RS"
    assert retry[0].params["inputResponses"] == {"q": {"action": "cancel"}}
    assert m.on_result(RESULT, now=T0 + 2) == [Deliver(result=RESULT)]


def test_a_resume_token_in_a_result_replaces_a_stream_carrier():
    m = direct()
    m.on_notification("notifications/stream/create", {"stream": {"streamId": "S-1"}}, now=T0)
    actions = m.on_result({"content": [], "_meta": {"nextResumeToken": "RT"}}, now=T0 + 1)
    assert any(isinstance(a, PartialResult) for a in actions)
    assert isinstance(m.carrier, ResumeTokenRequest)
    assert m.on_result(RESULT, now=T0 + 2) == [Deliver(result=RESULT)]


def test_a_task_result_in_the_stateless_era_is_adopted():
    m = direct()
    actions = m.on_result({"resultType": "task", "taskId": "T", "status": "working", "ttlMs": None,
                           "createdAt": "x", "lastUpdatedAt": "x"}, now=T0)
    assert actions[0].secret == "T" and isinstance(m.carrier, TasksExtension)
    assert isinstance(restore_mechanism(m.state(), m.secret()), TasksExtension)


def test_start_mechanism_sets_up_a_plain_request_for_its_era():
    from hostapp.mechanisms import start_mechanism

    stateless = start_mechanism("2026-07-28", {}, {"name": "t"}, "http")
    stateless.prepare(dict(CALL), now=T0)
    # No SSE resumption in the stateless era: an event id offers nothing.
    assert stateless.on_stream_event("ev-1", 1000, now=T0) == []
    assert isinstance(stateless.on_disconnect(now=T0 + 1)[0], Unknown)
    handshake = start_mechanism("2025-11-25", {}, {"name": "t"}, "http")
    handshake.prepare(dict(CALL), now=T0)
    assert handshake.on_stream_event("ev-1", 1000, now=T0)[0].secret == "ev-1"
    assert isinstance(start_mechanism("2025-11-25", TASK_SERVER, {"execution": {"taskSupport": "optional"}}),
                      Tasks2025)
