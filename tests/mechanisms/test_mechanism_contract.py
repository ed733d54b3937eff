"""What every mechanism promises, checked over one table of scenarios."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from mechanism_driver import CALL, RESULT, feed_all, restart, terminals

from hostapp.mechanisms import (
    AskInput,
    AsyncTool,
    Cancelled,
    CommitHandle,
    Deliver,
    DirectRequest,
    HttpStreamResumption,
    Mechanism,
    Mrtr,
    ReportProgress,
    ResumableRequest,
    ResumeSseStream,
    ResumeTokenRequest,
    SendRequest,
    StreamRequest,
    Tasks2025,
    TasksExtension,
    Unknown,
)

INVALID = {"code": -32602, "message": "Invalid params: unknown handle"}


@dataclass
class Scenario:
    make: Callable[[], Mechanism]
    handle: list[tuple]             # events until a handle is held
    finish: list[tuple]             # events from there to the result
    after_restart: type             # first action expected from resume() after a restart
    invalid: list[tuple] = field(default_factory=list)  # events that meet an invalid handle
    invalid_outcome: type = Unknown
    secret: str | None = None


SCENARIOS = {
    "direct": Scenario(DirectRequest, [], [("result", RESULT, None)], Unknown),
    "http_resumption": Scenario(
        HttpStreamResumption, [("stream", "ev-1", 500)], [("result", RESULT, None)], ResumeSseStream,
        invalid=[("error", INVALID, None)], invalid_outcome=Deliver, secret="ev-1"),
    "tasks_2025": Scenario(
        Tasks2025,
        [("result", {"task": {"taskId": "T-1", "status": "working", "pollInterval": 500,
                              "ttl": 60000, "createdAt": "2026-11-22T03:00:00Z"}}, None)],
        [("result", {"taskId": "T-1", "status": "completed"}, "tasks/get"),
         ("result", RESULT, "tasks/result")],
        SendRequest, invalid=[("error", INVALID, "tasks/get")], secret="T-1"),
    "tasks_extension": Scenario(
        TasksExtension,
        [("result", {"resultType": "task", "taskId": "T-2", "status": "working", "ttlMs": 60000,
                     "pollIntervalMs": 1000, "createdAt": "x", "lastUpdatedAt": "x"}, None)],
        [("result", {"taskId": "T-2", "status": "completed", "result": RESULT}, "tasks/get")],
        SendRequest, invalid=[("error", INVALID, "tasks/get")], secret="T-2"),
    "mrtr": Scenario(
        Mrtr,
        [("result", {"resultType": "input_required", "requestState": "RS-1",
                     "inputRequests": {"q": {"method": "elicitation/create",
                                             "params": {"message": "Which?", "requestedSchema": {}}}}}, None)],
        [("answer", {"q1": {"action": "accept", "content": {}}}), ("result", RESULT, None)],
        AskInput, invalid=[("answer", {"q1": {"action": "accept"}}), ("error", INVALID, None)],
        invalid_outcome=Deliver, secret="RS-1"),
    "resume_token": Scenario(
        ResumeTokenRequest, [("result", {"content": [], "_meta": {"nextResumeToken": "RT-1"}}, None)],
        [("result", RESULT, None)], SendRequest, invalid=[("error", INVALID, None)], secret="RT-1"),
    "streams": Scenario(
        StreamRequest,
        [("notification", "notifications/stream/create",
          {"stream": {"streamId": "S-1", "resumeInterval": {"min": 0, "max": 600}}})],
        [("result", RESULT, None)], SendRequest,
        invalid=[("disconnect",), ("wake",), ("error", INVALID, "stream/resume")], secret="S-1"),
    "resumable_requests": Scenario(
        ResumableRequest,
        [("notification", "notifications/requests/resumePolicy",
          {"requestId": 7, "resumeToken": "RR-1", "maxWait": 30})],
        [("result", RESULT, None)], SendRequest,
        invalid=[("resume",), ("error", INVALID, "requests/getStatus")], secret="RR-1"),
    "async_tool": Scenario(
        lambda: AsyncTool(token_factory=lambda: "OP-1"),
        [("result", {"content": [], "operation": {"keepAlive": 60, "pollFrequency": 1, "status": "working"}},
          None)],
        [("result", {"status": "completed"}, "tools/async/status"),
         ("result", {"result": RESULT}, "tools/async/result")],
        SendRequest, invalid=[("error", INVALID, "tools/async/status")], secret="OP-1"),
}

NAMES = sorted(SCENARIOS)
T0 = 1_800_000_000.0


def started(name: str) -> Mechanism:
    m = SCENARIOS[name].make()
    m.prepare(dict(CALL), now=T0)
    return m


def held(name: str) -> Mechanism:
    m = started(name)
    feed_all(m, SCENARIOS[name].handle, T0 + 1)
    return m


@pytest.mark.parametrize("name", NAMES)
def test_happy_path_delivers_the_result_once(name):
    m = held(name)
    actions = feed_all(m, SCENARIOS[name].finish, T0 + 2)
    assert terminals(actions) == [Deliver(result=RESULT)]
    assert m.done
    # The same final message again (a replay): nothing more happens.
    assert feed_all(m, SCENARIOS[name].finish[-1:], T0 + 3) == []
    assert m.cancel(now=T0 + 3) == [] and m.resume(now=T0 + 3) == [] and m.wake(now=T0 + 3) == []


@pytest.mark.parametrize("name", NAMES)
def test_handle_is_committed_and_secret_stays_out_of_state_and_logs(name):
    m = started(name)
    actions = feed_all(m, SCENARIOS[name].handle, T0 + 1)
    secret = SCENARIOS[name].secret
    assert m.secret() == secret
    if secret:
        commits = [a for a in actions if isinstance(a, CommitHandle)]
        if not isinstance(m, AsyncTool):  # the async tool committed its token in prepare()
            assert commits and commits[0].secret == secret
        assert secret not in json.dumps(m.state())
        assert secret not in repr(actions)


@pytest.mark.parametrize("name", NAMES)
def test_resume_after_restart_from_state_and_secret(name):
    scenario = SCENARIOS[name]
    m = restart(held(name))
    first = m.resume(now=T0 + 100)
    assert first and isinstance(first[-1] if scenario.after_restart is AskInput else first[0],
                                scenario.after_restart), first
    if scenario.after_restart is Unknown:
        return
    if isinstance(m, Mrtr) and not isinstance(m, TasksExtension):
        pass  # the question is asked again; the scripted answer follows
    elif isinstance(m, StreamRequest):
        feed_all(m, [("result", {"streams": [{"streamId": "S-1", "status": "live",
                                               "pendingMessages": True}]}, "stream/poll/all")], T0 + 101)
    elif isinstance(m, ResumableRequest):
        assert first[0].method == "requests/getStatus"
    actions = feed_all(m, scenario.finish, T0 + 102)
    assert terminals(actions) == [Deliver(result=RESULT)]


@pytest.mark.parametrize("name", NAMES)
def test_crash_before_any_handle(name):
    m = restart(started(name))
    actions = m.resume(now=T0 + 100)
    if type(m).client_token:
        assert actions == [SendRequest("tools/async/status", {"token": "OP-1"})]
    elif isinstance(m, Tasks2025):
        # Reconciles with tasks/list for the person's information, then unknown.
        assert actions[0].method == "tasks/list"
        assert isinstance(terminals(m.on_result({"tasks": []}, now=T0 + 101, method="tasks/list"))[0], Unknown)
    else:
        assert len(terminals(actions)) == 1 and isinstance(actions[-1], Unknown), actions


@pytest.mark.parametrize("name", NAMES)
def test_invalid_or_expired_handle_ends_clearly(name):
    scenario = SCENARIOS[name]
    if not scenario.invalid:
        pytest.skip("no handle to invalidate")
    m = held(name)
    actions = feed_all(m, scenario.invalid, T0 + 5)
    ends = terminals(actions)
    assert len(ends) == 1 and isinstance(ends[0], scenario.invalid_outcome), actions
    if isinstance(ends[0], Deliver):
        assert ends[0].error == INVALID


@pytest.mark.parametrize("name", NAMES)
def test_expire_ends_with_unknown_once(name):
    m = held(name)
    actions = m.expire(now=T0 + 10)
    assert len(terminals(actions)) == 1
    assert m.expire(now=T0 + 11) == []


@pytest.mark.parametrize("name", NAMES)
def test_progress_never_moves_backwards(name):
    m = held(name)
    reported = []
    for value in (1, 3, 2, 3, 4.5):
        for action in m.on_notification("notifications/progress",
                                        {"progressToken": "p", "progress": value, "total": 10}, now=T0 + 2):
            assert isinstance(action, ReportProgress)
            reported.append(action.progress)
    assert reported == [1, 3, 4.5]
    # The high-water mark survives a restart: a replay after it is dropped too.
    m = restart(m)
    assert m.on_notification("notifications/progress", {"progressToken": "p", "progress": 4}, now=T0 + 3) == []


def test_a_mechanism_journaled_before_prepare_never_sends():
    m = restart(Tasks2025())
    assert m.resume(now=T0) == [Cancelled("the host stopped before the request was sent; it never ran")]


def test_restore_refuses_a_foreign_state():
    with pytest.raises(ValueError):
        Tasks2025.restore(Mrtr().state(), None)


@pytest.mark.parametrize("name", NAMES)
def test_a_break_before_the_send_leaves_the_call_to_be_sent(name):
    # A call waiting for its first connection has nothing in flight: a session closing
    # meanwhile must not end it (as "unknown") before it was ever sent.
    m = SCENARIOS[name].make()
    assert m.on_disconnect(now=T0) == [] and m.on_disconnect(now=T0, session_lost=True) == []
    m.prepare(dict(CALL), now=T0)
    assert not m.done
