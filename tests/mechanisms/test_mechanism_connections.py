"""Mechanisms that keep a request's connection-level conversation resumable:
Streamable HTTP resumption, streams (draft "Streams") and SEP-975 resumable requests."""

from __future__ import annotations

import pytest
from mechanism_driver import CALL, RESULT, of_type, restart, terminals

from hostapp.mechanisms import (
    Cancelled,
    CancelRequest,
    CommitHandle,
    Deliver,
    DirectRequest,
    HttpStreamResumption,
    MarkStatus,
    ResumableRequest,
    ResumeSseStream,
    ScheduleWake,
    SendRequest,
    StreamRequest,
    Unknown,
)
from hostapp.mechanisms.streams import MAX_EMPTY_RESUMES
from hostapp.protocol.timing import DEFAULT_TIMING

T0 = 1_800_000_000.0


# ---------------------------------------------------------------- Streamable HTTP resumption


def sse(retry_ms: int | None = 2000) -> HttpStreamResumption:
    m = HttpStreamResumption()
    m.prepare(dict(CALL), now=T0)
    return m


def test_first_event_id_is_committed_later_ones_only_on_a_break():
    m = sse()
    [commit] = m.on_stream_event("ev-0", 2000, now=T0)
    assert isinstance(commit, CommitHandle) and commit.secret == "ev-0"
    assert m.on_stream_event("ev-1", None, now=T0 + 1) == []
    actions = m.on_disconnect(now=T0 + 2)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "ev-1"


def test_a_long_stream_commits_its_newest_event_id_now_and_then():
    """What a restart replays stays bounded: the newest id is committed every
    COMMIT_EVERY_SECONDS of events, not only at the first event and on a break."""
    m = sse()
    m.on_stream_event("ev-0", 2000, now=T0)
    commits = []
    for i in range(1, 121):  # two minutes, an event every second
        commits += of_type(m.on_stream_event(f"ev-{i}", None, now=T0 + i), CommitHandle)
    assert [c.secret for c in commits] == ["ev-30", "ev-60", "ev-90", "ev-120"]


def test_a_restored_stream_does_not_commit_at_its_first_replayed_event():
    m = restart(sse_with_event())
    assert m.on_stream_event("ev-1", None, now=T0 + 1) == []
    [commit] = of_type(m.on_stream_event("ev-2", None, now=T0 + 31), CommitHandle)
    assert commit.secret == "ev-2"


def sse_with_event() -> HttpStreamResumption:
    m = sse()
    m.on_stream_event("ev-0", 2000, now=T0)
    return m


def test_reconnect_waits_the_servers_retry_then_resumes_from_the_last_event():
    m = sse()
    m.on_stream_event("ev-0", 2000, now=T0)
    m.on_stream_event("ev-1", None, now=T0 + 1)
    actions = m.on_disconnect(now=T0 + 5)
    assert MarkStatus("reconnecting") in actions
    assert of_type(actions, ScheduleWake) == [ScheduleWake(T0 + 7, "reconnect the SSE stream")]
    assert m.wake(now=T0 + 7) == [ResumeSseStream("ev-1")]
    # Replayed events and then the response.
    m.on_stream_event("ev-2", None, now=T0 + 7.1)
    assert m.on_result(RESULT, now=T0 + 7.2) == [Deliver(result=RESULT)]


def test_failed_reconnects_back_off():
    m = sse()
    m.on_stream_event("ev-0", 500, now=T0)
    delays = []
    now = T0
    for _attempt in range(4):
        [wake] = of_type(m.on_disconnect(now=now), ScheduleWake)
        delays.append(wake.at - now)
        m.wake(now=wake.at)
        now = wake.at + 0.1  # that reconnect failed
    assert delays[0] == 0.5 and delays == sorted(delays) and delays[-1] > delays[0]


def test_breaks_reported_while_a_reconnect_waits_are_not_failed_attempts():
    # A network reset: the stream, the poll and the session's other requests each report
    # the break. Only a reconnect that was made and failed is a failure: reports that
    # come while the reconnect waits spend nothing (they gave up 12.7 s into a 24 s reset).
    m = sse_with_event()
    [wake] = of_type(m.on_disconnect(now=T0 + 1), ScheduleWake)
    for i in range(20):
        assert m.on_disconnect(now=T0 + 1 + i * 0.5) == [], "a second report of the same break"
    assert m.wake(now=wake.at) == [ResumeSseStream("ev-0")]
    [again] = of_type(m.on_disconnect(now=wake.at + 0.1), ScheduleWake)
    assert again.at - (wake.at + 0.1) > wake.at - (T0 + 1), "a failed reconnect backs off"


def test_the_resumption_budget_is_a_duration():
    # Reconnects that fail go on for DEFAULT_TIMING.resume_budget after the break, however many
    # they are (the back-off is capped at 30 s), then the operation ends unknown.
    m = sse_with_event()
    broke = T0 + 1
    now, outcome = broke, m.on_disconnect(now=broke)
    while not of_type(outcome, Unknown):
        [wake] = of_type(outcome, ScheduleWake)
        assert m.wake(now=wake.at) == [ResumeSseStream("ev-0")]
        now = wake.at + 0.1
        outcome = m.on_disconnect(now=now)
    assert now - broke >= DEFAULT_TIMING.resume_budget
    assert now - broke < DEFAULT_TIMING.resume_budget + 31
    assert f"{DEFAULT_TIMING.resume_budget:.0f} s" in of_type(outcome, Unknown)[0].reason
    # An event in between starts the budget again: the stream was back.
    m = sse_with_event()
    m.on_disconnect(now=broke)
    m.wake(now=broke + 60)
    m.on_stream_event("ev-1", None, now=broke + 61)
    [wake] = of_type(m.on_disconnect(now=broke + 62), ScheduleWake)
    m.wake(now=wake.at)
    assert not of_type(m.on_disconnect(now=broke + DEFAULT_TIMING.resume_budget + 1), Unknown)


@pytest.mark.parametrize("event_id, session_lost", [(None, False), ("ev-0", True)])
def test_sse_break_that_cannot_be_resumed_is_unknown(event_id, session_lost):
    m = sse()
    if event_id:
        m.on_stream_event(event_id, 1000, now=T0)
    [end] = m.on_disconnect(now=T0 + 1, session_lost=session_lost)
    assert isinstance(end, Unknown)


def test_sse_resume_after_restart_goes_straight_to_get():
    m = sse()
    m.on_stream_event("ev-0", 1000, now=T0)
    m = restart(m)
    actions = m.resume(now=T0 + 60)
    assert actions == [ResumeSseStream("ev-0")] and "ev-0" not in repr(actions)
    assert m.resume(now=T0 + 60) == [], "a second GET for the same stream"



# ---------------------------------------------------------------- streams (draft "Streams")


def stream(min_s: float = 5, max_s: float = 60) -> StreamRequest:
    m = StreamRequest()
    m.prepare(dict(CALL), now=T0)
    actions = m.on_notification("notifications/stream/create",
                                {"stream": {"streamId": "S-1", "resumeInterval": {"min": min_s, "max": max_s}}},
                                now=T0)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "S-1"
    return m


def test_stream_resume_honours_the_minimum_interval():
    m = stream(min_s=5)
    [wake] = of_type(m.on_disconnect(now=T0 + 10), ScheduleWake)
    assert wake.at >= T0 + 15
    # Woken early (another operation's timer, a clock jump): still not before min.
    assert m.wake(now=T0 + 12) == [ScheduleWake(T0 + 15, "resume the stream")]
    assert m.wake(now=T0 + 15) == [SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]
    assert m.on_result(RESULT, now=T0 + 15.2) == [Deliver(result=RESULT)]


def test_stream_resume_that_returns_without_the_response_looks_then_resumes_again_later():
    m = stream(min_s=5)
    m.on_disconnect(now=T0 + 10)
    m.wake(now=T0 + 15)
    actions = m.on_result({}, now=T0 + 16, method="stream/resume")
    assert of_type(actions, SendRequest) == [SendRequest("stream/poll", {"streamId": "S-1"})]
    live = {"streamId": "S-1", "status": "live", "pendingMessages": False}
    [wake] = of_type(m.on_result(live, now=T0 + 16.1, method="stream/poll"), ScheduleWake)
    assert wake.at >= T0 + 21
    assert m.wake(now=wake.at) == [SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]


def test_a_stream_whose_response_went_out_on_a_lost_resume_ends_unknown():
    # The server copied the response onto an earlier resume's connection, which was lost:
    # it counts the response as delivered, and every later resume brings nothing.
    m = stream(min_s=1)
    m.on_disconnect(now=T0 + 10)
    m.wake(now=T0 + 11)
    m.on_result({}, now=T0 + 12, method="stream/resume")
    drained = {"streamId": "S-1", "status": "completed", "pendingMessages": False}
    [unknown] = m.on_result(drained, now=T0 + 12.1, method="stream/poll")
    assert isinstance(unknown, Unknown)


def test_without_stream_poll_empty_resumes_end_unknown_unless_they_bring_progress():
    m = stream(min_s=0)
    [wake] = of_type(m.on_disconnect(now=T0 + 1), ScheduleWake)
    rounds = 0
    while True:
        assert m.wake(now=wake.at) == [SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]
        rounds += 1
        if rounds <= 10:  # the work goes on: each resume brings progress
            m.on_notification("notifications/progress", {"progressToken": "t", "progress": rounds}, now=wake.at)
        actions = m.on_result({}, now=wake.at + 1, method="stream/resume")
        if isinstance(actions[0], Unknown):
            break
        assert of_type(actions, SendRequest) == [SendRequest("stream/poll", {"streamId": "S-1"})]
        # A server without stream/poll: no lost stream, resume again later.
        [wake] = m.on_error({"code": -32601, "message": "Method not found"}, now=wake.at + 1.1,
                            method="stream/poll")
        assert isinstance(wake, ScheduleWake)
    assert rounds == 10 + MAX_EMPTY_RESUMES, rounds


def test_stream_retries_back_off_but_resume_before_the_maximum():
    m = stream(min_s=0, max_s=20)
    now = T0 + 1
    planned = []
    for _ in range(8):
        [wake] = of_type(m.on_disconnect(now=now), ScheduleWake)
        if now < T0 + 19:
            assert wake.at < T0 + 20, "a retry was planned after the server may abandon the stream"
        planned.append(wake.at - now)
        now = wake.at
        m.wake(now=now)
    assert planned[1] > planned[0], "no back-off"
    assert now > T0 + 18, "the retries stopped short of the deadline"


def test_stream_restart_polls_all_streams_first():
    m = restart(stream())
    assert m.resume(now=T0 + 30) == [SendRequest("stream/poll/all", {})]
    listing = {"streams": [{"streamId": "S-0", "status": "live"},
                           {"streamId": "S-1", "status": "live", "pendingMessages": True}]}
    assert m.on_result(listing, now=T0 + 31, method="stream/poll/all") == [
        SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]


def test_stream_drained_after_restart_is_unknown():
    m = restart(stream())
    m.resume(now=T0 + 30)
    listing = {"streams": [{"streamId": "S-1", "status": "completed", "pendingMessages": False}]}
    assert isinstance(m.on_result(listing, now=T0 + 31, method="stream/poll/all")[0], Unknown)


def test_stream_not_listed_after_restart_is_asked_for_by_id_and_unknown_if_refused():
    # poll/all may list only the new connection's streams; the id still names the stream.
    m = restart(stream())
    m.resume(now=T0 + 30)
    listing = {"streams": [{"streamId": "S-0", "status": "live"}]}
    assert m.on_result(listing, now=T0 + 31, method="stream/poll/all") == [
        SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]
    refused = m.on_error({"code": -32602, "message": "unknown or abandoned stream"}, now=T0 + 32,
                         method="stream/resume")
    assert isinstance(refused[0], Unknown)


def test_stream_end_without_the_response_is_unknown_and_with_it_is_ignored():
    m = stream()
    assert isinstance(m.on_notification("notifications/stream/end", {"streamId": "S-1"}, now=T0 + 1)[0], Unknown)
    m = stream()
    m.on_result(RESULT, now=T0 + 1)
    assert m.on_notification("notifications/stream/end", {"streamId": "S-1"}, now=T0 + 2) == []


def test_stream_poll_reports_and_resumes():
    m = stream(min_s=0)
    m.on_disconnect(now=T0 + 1)
    assert m.on_result({"streamId": "S-1", "status": "live", "pendingMessages": True, "hasRequest": True,
                        "hasError": False}, now=T0 + 2, method="stream/poll") == [
        SendRequest("stream/resume", {"streamId": "S-1"}, brings_original=True)]


def test_stream_claims_its_notifications():
    m = stream()
    assert m.claims("notifications/stream/end", {"streamId": "S-1"})
    assert not m.claims("notifications/stream/end", {"streamId": "S-2"})


# ---------------------------------------------------------------- SEP-975 resumable requests


def policy(m: ResumableRequest, token: str = "RR-1") -> list:
    return m.on_notification("notifications/requests/resumePolicy",
                             {"requestId": 7, "resumeToken": token, "maxWait": 30}, now=T0 + 1)


def resumable() -> ResumableRequest:
    m = ResumableRequest()
    m.prepare(dict(CALL), now=T0)
    return m


def test_policy_is_committed_and_a_replay_is_ignored():
    m = resumable()
    actions = policy(m)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "RR-1"
    assert actions[0].state["request_id"] == 7 and actions[0].state["max_wait"] == 30
    assert policy(m) == []
    rotated = policy(m, "RR-2")
    assert [a.secret for a in rotated if isinstance(a, CommitHandle)] == ["RR-2"]


def test_resume_checks_status_then_resumes_under_the_original_id():
    m = resumable()
    policy(m)
    m.on_disconnect(now=T0 + 2)
    assert m.resume(now=T0 + 3) == [SendRequest("requests/getStatus", {"requestId": 7, "resumeToken": "RR-1"})]
    actions = m.on_result({"status": "processing", "hasPendingMessages": True, "hasInputRequest": True},
                          now=T0 + 4, method="requests/getStatus")
    assert MarkStatus("input_required") in actions
    assert SendRequest("requests/resume", {"resumeToken": "RR-1"}, reuse_jsonrpc_id=True) in actions
    assert m.on_result(RESULT, now=T0 + 5, method="requests/resume") == [Deliver(result=RESULT)]


def test_the_original_error_comes_through_resume():
    m = resumable()
    policy(m)
    m.resume(now=T0 + 3)
    error = {"code": -32603, "message": "tool crashed"}
    assert m.on_error(error, now=T0 + 4, method="requests/resume") == [Deliver(error=error)]


def test_resumable_without_policy_cannot_survive_a_break():
    m = resumable()
    assert isinstance(m.on_disconnect(now=T0 + 1)[0], Unknown)


def test_resumable_cancel_names_the_original_request():
    m = resumable()
    policy(m)
    assert m.cancel(now=T0 + 2) == [CancelRequest("cancelled by the user"), Cancelled()]
    assert terminals(m.on_result(RESULT, now=T0 + 3)) == []


ALREADY_DELIVERED = {"code": -32602, "message": "the request's response was already delivered"}


def resumed_after_status(m: ResumableRequest, status: str) -> None:
    [get_status] = m.resume(now=T0 + 3)
    assert get_status.method == "requests/getStatus"
    actions = m.on_result({"status": status, "hasPendingMessages": False, "hasInputRequest": False},
                          now=T0 + 4, method="requests/getStatus")
    assert SendRequest("requests/resume", {"resumeToken": "RR-1"}, reuse_jsonrpc_id=True) in actions


@pytest.mark.parametrize("restarted", [False, True])
def test_a_refused_resume_answered_under_the_original_id_is_unknown_not_the_calls_failure(restarted):
    """The server finished the request and wrote its response into a connection that
    broke before hostapp read it; it counts the response as delivered and refuses
    requests/resume. The refusal comes under the original request's id, so the engine
    hands it over as the original's answer (no method): it is not the call's error."""
    m = resumable()
    policy(m)
    m.on_disconnect(now=T0 + 2)
    if restarted:
        m = restart(m)
    resumed_after_status(m, "completed")
    [outcome] = m.on_error(dict(ALREADY_DELIVERED), now=T0 + 5)
    assert isinstance(outcome, Unknown) and m.done
    assert "completed" in outcome.reason and "never received" in outcome.reason


def test_a_refused_resume_is_unknown_when_a_plain_request_adopted_the_policy():
    m = DirectRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_notification("notifications/requests/resumePolicy", {"requestId": 7, "resumeToken": "RR-1"}, now=T0 + 1)
    m.on_disconnect(now=T0 + 2)
    m = restart(m)
    m.resume(now=T0 + 3)
    m.on_result({"status": "processing"}, now=T0 + 4, method="requests/getStatus")
    [outcome] = m.on_error(dict(ALREADY_DELIVERED), now=T0 + 5)
    assert isinstance(outcome, Unknown) and "already delivered" in outcome.reason


def test_the_calls_own_errors_are_still_delivered_with_or_without_a_resume():
    m = resumable()
    policy(m)
    invalid = {"code": -32602, "message": "unknown tool"}
    assert m.on_error(dict(invalid), now=T0 + 2) == [Deliver(error=invalid)]  # no resume asked for: its own
    m = resumable()
    policy(m)
    resumed_after_status(m, "failed")
    crashed = {"code": -32603, "message": "tool crashed"}
    assert m.on_error(dict(crashed), now=T0 + 5) == [Deliver(error=crashed)]
