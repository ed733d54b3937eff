"""Tasks of 2025-11-25 and the 2026-07-28 tasks extension."""

from __future__ import annotations

import pytest
from mechanism_driver import CALL, RESULT, of_type, restart, terminals

from hostapp.mechanisms import (
    AskInput,
    Cancelled,
    CancelRequest,
    CommitHandle,
    Deliver,
    MarkStatus,
    ScheduleWake,
    SendRequest,
    Tasks2025,
    TasksExtension,
    Unknown,
)

T0 = 1_800_000_000.0


def task(status: str, **extra) -> dict:
    return {"taskId": "T-1", "status": status, "createdAt": "2026-11-22T03:00:00Z",
            "lastUpdatedAt": "2026-11-22T03:00:00Z", **extra}


def created_2025(m: Tasks2025, **extra) -> list:
    return m.on_result({"task": task("working", pollInterval=500, ttl=60000, **extra)}, now=T0 + 1)


# ---------------------------------------------------------------- 2025-11-25


def test_prepare_adds_the_task_param():
    params, _ = Tasks2025(ttl_ms=30000).prepare(dict(CALL), now=T0)
    assert params == {**CALL, "task": {"ttl": 30000}}
    assert Tasks2025().prepare(dict(CALL), now=T0)[0]["task"] == {}


def test_creation_commits_before_it_polls_at_the_server_interval():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    actions = created_2025(m)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "T-1"
    assert ScheduleWake(T0 + 1.5, "poll tasks/get") in actions
    assert m.wake(now=T0 + 1.5) == [SendRequest("tasks/get", {"taskId": "T-1"})]


@pytest.mark.parametrize("events, outcome", [
    # status (from tasks/get or a notification) -> what the mechanism does
    ([("tasks/get", task("completed")), ("tasks/result", RESULT)], Deliver(result=RESULT)),
    ([("tasks/get", task("failed")), ("tasks/result", {**RESULT, "isError": True})],
     Deliver(result={**RESULT, "isError": True})),
    ([("notify", task("completed")), ("tasks/result", RESULT)], Deliver(result=RESULT)),
    ([("tasks/get", task("cancelled", statusMessage="shutting down"))],
     Deliver(error={"code": -32800, "message": "shutting down"})),
])
def test_terminal_statuses(events, outcome):
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    actions = []
    for source, payload in events:
        if source == "notify":
            actions += m.on_notification("notifications/tasks/status", payload, now=T0 + 2)
        else:
            actions += m.on_result(payload, now=T0 + 2, method=source)
    assert terminals(actions) == [outcome]


def test_result_meta_naming_the_task_is_not_delivered():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    m.on_result(task("completed"), now=T0 + 2, method="tasks/get")
    tagged = {**RESULT, "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "T-1"}}}
    assert m.on_result(tagged, now=T0 + 3, method="tasks/result") == [Deliver(result=RESULT)]


def test_input_required_fetches_the_result_stream_once_and_keeps_polling():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    first = m.on_result(task("input_required"), now=T0 + 2, method="tasks/get")
    assert MarkStatus("input_required", None) in first
    assert of_type(first, SendRequest) == [SendRequest("tasks/result", {"taskId": "T-1"})]
    again = m.on_notification("notifications/tasks/status", task("input_required"), now=T0 + 3)
    assert of_type(again, SendRequest) == [] and of_type(again, ScheduleWake)


def test_a_failed_task_delivers_the_error_tasks_result_returns():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    m.on_result(task("failed"), now=T0 + 2, method="tasks/get")
    error = {"code": -32602, "message": "bad topic"}
    assert m.on_error(error, now=T0 + 3, method="tasks/result") == [Deliver(error=error)]


def test_a_server_that_runs_the_call_without_a_task_delivers_directly():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    assert m.on_result(RESULT, now=T0 + 1) == [Deliver(result=RESULT)]


def test_a_duplicate_creation_result_is_ignored():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    assert created_2025(m) == []


def test_cancel_with_a_task_asks_the_server_and_ends_on_its_confirmation():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    actions = m.cancel(now=T0 + 2)
    assert SendRequest("tasks/cancel", {"taskId": "T-1"}) in actions
    assert m.cancel(now=T0 + 2) == []
    assert m.on_result(task("cancelled"), now=T0 + 3, method="tasks/cancel") == [Cancelled("cancelled")]


def test_cancel_that_comes_too_late_still_delivers_the_result():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    m.cancel(now=T0 + 2)
    assert m.on_error({"code": -32602, "message": "task is terminal"}, now=T0 + 3, method="tasks/cancel") == [
        SendRequest("tasks/get", {"taskId": "T-1"})]
    m.on_result(task("completed"), now=T0 + 4, method="tasks/get")
    assert m.on_result(RESULT, now=T0 + 5, method="tasks/result") == [Deliver(result=RESULT)]


def test_cancel_before_the_task_id_cancels_the_task_when_it_arrives():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    actions = m.cancel(now=T0 + 0.5)
    assert CancelRequest("cancelled by the user") in actions
    late = created_2025(m)
    assert isinstance(late[0], CommitHandle) and late[1] == SendRequest("tasks/cancel", {"taskId": "T-1"})
    assert m.on_result(task("cancelled"), now=T0 + 2, method="tasks/cancel") == [Cancelled("cancelled")]


def test_cancel_before_the_task_id_gives_up_waiting_after_a_grace_period():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    wake = of_type(m.cancel(now=T0), ScheduleWake)[0]
    assert wake.at > T0
    assert terminals(m.wake(now=wake.at)) == [Cancelled("cancelled before the server created the task")]


def test_ttl_is_measured_on_the_client_clock_and_a_purged_task_is_unknown():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)  # ttl 60 s; the server's createdAt is far from the client's clock
    assert m.state()["expires_at"] == T0 + 61
    # Past the ttl the server may still hold the task: one more poll tells.
    assert m.wake(now=T0 + 62) == [SendRequest("tasks/get", {"taskId": "T-1"})]
    assert isinstance(m.on_error({"code": -32602, "message": "Task not found"}, now=T0 + 63,
                                 method="tasks/get")[0], Unknown)
    assert isinstance(Tasks2025.restore(m.state(), None), Tasks2025)


def test_poll_errors_back_off_and_recover():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    waits = [of_type(m.on_error({"code": -32603, "message": "busy"}, now=T0 + 2, method="tasks/get"),
                     ScheduleWake)[0].at - (T0 + 2) for _ in range(3)]
    assert waits == sorted(waits) and waits[0] < waits[-1]
    assert not m.done


def test_restart_without_a_task_id_reports_candidates_from_the_task_list():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    m = restart(m)
    assert m.resume(now=T0 + 50) == [SendRequest("tasks/list", {})]
    page = {"tasks": [task("working", createdAt="2027-01-15T08:00:00Z")], "nextCursor": "c2"}
    assert m.on_result(page, now=T0 + 51, method="tasks/list") == [SendRequest("tasks/list", {"cursor": "c2"})]
    old = {"tasks": [task("working", createdAt="2020-01-01T00:00:00Z")]}
    [end] = m.on_result(old, now=T0 + 52, method="tasks/list")
    assert isinstance(end, Unknown) and "1 task(s)" in end.reason


def test_claims_notifications_by_task_id_or_related_task_meta():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    created_2025(m)
    assert m.claims("notifications/tasks/status", {"taskId": "T-1"})
    assert m.claims("notifications/message",
                    {"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "T-1"}}})
    assert not m.claims("notifications/tasks/status", {"taskId": "T-9"})


# ---------------------------------------------------------------- 2026-07-28 extension


def created_ext(m: TasksExtension) -> list:
    return m.on_result({"resultType": "task", **task("working", ttlMs=60000, pollIntervalMs=250)}, now=T0 + 1)


QUESTION = {"ask": {"method": "elicitation/create", "params": {"message": "Depth?", "requestedSchema": {}}}}
ASKED = {"q1": QUESTION["ask"]}


def test_extension_creation_commits_subscribes_and_polls():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    actions = created_ext(m)
    assert isinstance(actions[0], CommitHandle) and actions[0].secret == "T-1"
    assert SendRequest("subscriptions/listen", {"notifications": {"taskIds": ["T-1"]}}) in actions
    assert ScheduleWake(T0 + 1.25, "poll tasks/get") in actions


@pytest.mark.parametrize("detailed, outcome", [
    (task("completed", result=RESULT), Deliver(result=RESULT)),
    (task("failed", error={"code": -32603, "message": "boom"}), Deliver(error={"code": -32603, "message": "boom"})),
])
def test_extension_detailed_results(detailed, outcome):
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    assert m.on_result(detailed, now=T0 + 2, method="tasks/get") == [outcome]


def test_extension_shows_each_new_status_message_of_a_working_task():
    # The extension has no task progress: a working task's statusMessage says how far it got.
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    polled = m.on_result(task("working", statusMessage="step 1/4"), now=T0 + 2, method="tasks/get")
    assert MarkStatus("working", "step 1/4") in polled
    assert of_type(m.on_result(task("working", statusMessage="step 1/4"), now=T0 + 3, method="tasks/get"),
                   MarkStatus) == []
    assert MarkStatus("working", "step 2/4") in m.on_result(task("working", statusMessage="step 2/4"),
                                                            now=T0 + 4, method="tasks/get")
    assert MarkStatus("working", "step 3/4") in m.on_notification(
        "notifications/tasks", task("working", statusMessage="step 3/4"), now=T0 + 5)
    # After a restart the first poll shows the task's message at once.
    m = restart(m)
    m.resume(now=T0 + 6)
    assert MarkStatus("working", "step 3/4") in m.on_result(task("working", statusMessage="step 3/4"),
                                                            now=T0 + 7, method="tasks/get")
    # While a cancellation is pending the operation is not shown as working again.
    m.cancel(now=T0 + 8)
    assert of_type(m.on_result(task("working", statusMessage="step 4/4"), now=T0 + 9, method="tasks/get"),
                   MarkStatus) == []


def test_2025_task_shows_each_new_status_message_of_a_working_task():
    # fastmcp's tasks tell how far they got in the statusMessage, the status staying "working".
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    assert MarkStatus("working", "crunch 1/12") in created_2025(m, statusMessage="crunch 1/12")
    assert of_type(m.on_result(task("working", statusMessage="crunch 1/12"), now=T0 + 2, method="tasks/get"),
                   MarkStatus) == []
    assert MarkStatus("working", "crunch 5/12") in m.on_result(task("working", statusMessage="crunch 5/12"),
                                                               now=T0 + 3, method="tasks/get")
    assert MarkStatus("working", "crunch 6/12") in m.on_notification(
        "notifications/tasks/status", task("working", statusMessage="crunch 6/12"), now=T0 + 4)
    m.cancel(now=T0 + 5)
    assert of_type(m.on_result(task("working", statusMessage="crunch 7/12"), now=T0 + 6, method="tasks/get"),
                   MarkStatus) == []


def test_extension_notification_without_payload_fetches_the_task():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    assert m.on_notification("notifications/tasks", task("completed"), now=T0 + 2) == [
        SendRequest("tasks/get", {"taskId": "T-1"})]


def test_extension_input_required_asks_once_and_answers_with_tasks_update():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    asked = m.on_result(task("input_required", inputRequests=QUESTION), now=T0 + 2, method="tasks/get")
    assert AskInput(ASKED, "task") in asked
    # Polled again before the person answered: not asked twice.
    assert of_type(m.on_result(task("input_required", inputRequests=QUESTION), now=T0 + 3,
                               method="tasks/get"), AskInput) == []
    answer = {"action": "accept", "content": {"depth": 3}}
    sent = m.answer_input({"q1": answer}, now=T0 + 4)
    assert SendRequest("tasks/update", {"taskId": "T-1", "inputResponses": {"ask": answer}}) in sent
    # The server has not taken the update in yet: the answered question is not asked again.
    assert of_type(m.on_result(task("input_required", inputRequests=QUESTION), now=T0 + 5,
                               method="tasks/get"), AskInput) == []
    assert m.on_result({}, now=T0 + 6, method="tasks/update") == [SendRequest("tasks/get", {"taskId": "T-1"})]
    assert m.on_result(task("completed", result=RESULT), now=T0 + 7, method="tasks/get") == [Deliver(result=RESULT)]


def test_extension_question_survives_a_restart():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    m.on_result(task("input_required", inputRequests=QUESTION), now=T0 + 2, method="tasks/get")
    m = restart(m)
    actions = m.resume(now=T0 + 500)
    assert AskInput(ASKED, "task") in actions and SendRequest("tasks/get", {"taskId": "T-1"}) in actions
    sent = m.answer_input({"q1": {"action": "decline"}}, now=T0 + 501)
    assert of_type(sent, SendRequest)[0].params["inputResponses"] == {"ask": {"action": "decline"}}


def test_extension_question_keyed_by_the_task_id_keeps_the_id_out_of_journal_and_ui():
    # Some servers (fastmcp's tasks extension) build input-request keys from the task id.
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    keyed = {"T-1:7f3a": QUESTION["ask"]}
    actions = m.on_result(task("input_required", inputRequests=keyed), now=T0 + 2, method="tasks/get")
    assert "T-1" not in repr(of_type(actions, AskInput)) and "T-1" not in str(m.state())
    assert all("T-1" not in str(c.state) for c in of_type(actions, CommitHandle))
    m = restart(m)
    assert AskInput(ASKED, "task") in m.resume(now=T0 + 3)
    sent = m.answer_input({"q1": {"action": "accept", "content": {}}}, now=T0 + 4)
    assert of_type(sent, SendRequest)[0].params == {"taskId": "T-1",
                                                    "inputResponses": {"T-1:7f3a": {"action": "accept", "content": {}}}}


def test_extension_cancel_is_cooperative():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    assert SendRequest("tasks/cancel", {"taskId": "T-1"}) in m.cancel(now=T0 + 2)
    assert m.on_result({}, now=T0 + 3, method="tasks/cancel") == [SendRequest("tasks/get", {"taskId": "T-1"})]
    # Still working: keep polling until the server agrees.
    assert not terminals(m.on_result(task("working"), now=T0 + 4, method="tasks/get"))
    assert m.on_result(task("cancelled"), now=T0 + 5, method="tasks/get") == [Cancelled("cancelled")]


def test_extension_missing_capability_is_a_clear_error():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    error = {"code": -32021, "message": "Missing required client capability",
             "data": {"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}
    assert m.on_error(error, now=T0 + 1) == [Deliver(error=error)]


def test_extension_subscription_failure_does_not_stop_polling():
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created_ext(m)
    assert m.on_error({"code": -32601, "message": "no"}, now=T0 + 2, method="subscriptions/listen") == []
    assert m.wake(now=T0 + 3) == [SendRequest("tasks/get", {"taskId": "T-1"})]
