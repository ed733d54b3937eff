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
        "sampling": {},
        "roots": {"listChanged": True},
        "tasks": {"list": {}, "cancel": {},
                  "requests": {"elicitation": {"create": {}}, "sampling": {"createMessage": {}}}},
        "resumableRequests": {},
    }
    assert "requests" not in client_capabilities("handshake", task_augmented_requests=False)["tasks"]


def test_stateless_era_opts_in_to_the_tasks_extension():
    assert client_capabilities("2026-07-28") == {
        "elicitation": {"form": {}, "url": {}},
        "sampling": {},
        "roots": {"listChanged": True},
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }


def test_declared_capabilities_validate_against_the_official_wire_models():
    from mcp_types._v2025_11_25 import ClientCapabilities as Caps2025
    from mcp_types._v2026_07_28 import ClientCapabilities as Caps2026

    caps = Caps2025.model_validate(client_capabilities("handshake"))
    assert caps.tasks is not None and caps.elicitation is not None and caps.sampling is not None
    assert caps.sampling.context is None and caps.sampling.tools is None  # neither is implemented
    assert caps.roots is not None and caps.roots.list_changed is True
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
    assert isinstance(restored, DirectRequest) and isinstance(restored.carrier, ResumableRequest)
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
    restored = restore_mechanism(m.state(), m.secret())
    assert isinstance(restored, DirectRequest) and isinstance(restored.carrier, TasksExtension)


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


# ---------------------------------------------------------------- adopted carriers across a restart

#: A slice of a long resume-token call: a partial result that says the work goes on.
PARTIAL = {"content": [{"type": "text", "text": "5/22 steps done"}], "structuredContent": {"progress": 5, "total": 22},
           "_meta": {"nextResumeToken": "RT-2"}}


def test_a_resume_token_offered_after_a_restart_is_taken_up_not_delivered():
    """A call whose SSE stream had an event id when the host was killed: the next host
    resumes the stream by Last-Event-ID and the replay brings a partial result offering a
    resume token. Live, the plain request hands it to the resume-token mechanism; a
    restored one must too, instead of delivering the slice as the call's outcome while
    the server goes on with the work."""
    m = direct()
    m.on_stream_event("ev-1", 500, now=T0)
    assert m.state()["mechanism"] == "http_resumption"
    live = m.on_result(dict(PARTIAL), now=T0 + 1)
    assert not any(isinstance(a, Deliver) for a in live)  # live, the offer is taken up

    m = direct()
    m.on_stream_event("ev-1", 500, now=T0)
    restored = restart(m)  # the host was killed here
    assert [type(a) for a in restored.resume(now=T0 + 4)] == [type(a) for a in m.resume(now=T0 + 4)]
    after = restored.on_result(dict(PARTIAL), now=T0 + 5)
    assert not any(isinstance(a, Deliver) for a in after), after
    assert [type(a) for a in after] == [type(a) for a in live]
    [commit] = [a for a in after if isinstance(a, CommitHandle)]
    assert commit.secret == "RT-2" and commit.state["mechanism"] == "resume_token"
    continuation = [a for a in after if isinstance(a, SendRequest)]
    assert continuation and continuation[0].params["_meta"]["resumeToken"] == "RT-2"
    assert restored.on_result(RESULT, now=T0 + 6) == [Deliver(result=RESULT)]


OFFERS = {
    "http_resumption": ("stream", "ev-1", 1000),
    "resumable_requests": ("notification", *POLICY),
    "streams": ("notification", "notifications/stream/create", {"stream": {"streamId": "S-1"}}),
    "resume_token": ("result", {"content": [], "_meta": {"nextResumeToken": "RT"}}, None),
    "tasks_2025": ("result", {"task": {"taskId": "T-1", "status": "working"}}, None),
}


@pytest.mark.parametrize("carrier", sorted(OFFERS))
def test_an_adopted_carrier_comes_back_inside_the_plain_request(carrier):
    from mechanism_driver import feed

    m = direct()
    commits = [a for a in feed(m, OFFERS[carrier], T0) if isinstance(a, CommitHandle)]
    # What is journaled says which mechanism carries the call, and that it was adopted.
    assert commits and commits[-1].state == m.state() and m.state()["mechanism"] == carrier
    restored = restart(m)
    assert isinstance(restored, DirectRequest) and restored.name == carrier == m.name
    assert type(restored.carrier) is type(m.carrier)
    assert restored.state() == m.state() and restored.secret() == m.secret()
    assert (restored.phase, restored.status) == (m.phase, m.status)
    # Still watching: a result offering a task is taken up, after the restart as before it.
    task = {"resultType": "task", "taskId": "T-9", "status": "working", "ttlMs": None,
            "createdAt": "x", "lastUpdatedAt": "x"}
    assert not any(isinstance(a, Deliver) for a in restored.on_result(task, now=T0 + 1))
    assert isinstance(restored.carrier, TasksExtension) and restored.secret() == "T-9"


def test_a_plain_request_without_sse_resumption_keeps_it_off_across_a_restart():
    m = DirectRequest(sse_resumable=False)
    m.prepare(dict(CALL), now=T0)
    m.on_notification(*POLICY, now=T0)
    restored = restart(m)
    assert isinstance(restored, DirectRequest) and restored.sse_resumable is False
    assert restored.name == "resumable_requests"


def test_a_state_journaled_before_carriers_were_marked_still_restores():
    m = direct()
    m.on_notification(*POLICY, now=T0)
    state = {k: v for k, v in m.state().items() if k != "adopted_by"}
    restored = restore_mechanism(state, m.secret())
    assert isinstance(restored, ResumableRequest)
    with pytest.raises(ValueError, match="no known mechanism"):
        restore_mechanism({**m.state(), "adopted_by": {"mechanism": "nonesuch"}}, m.secret())
