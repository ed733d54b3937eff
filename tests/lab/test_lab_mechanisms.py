"""Each long-operation mechanism of the lab, its happy path and its survival of breaks."""

from __future__ import annotations

import signal
import uuid

import httpx
import pytest

from hostapp.lab.state import execution_count

from .conftest import McpClient, wait_until

TASKS_EXT = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def kill(lab) -> None:
    """End the lab the hard way: no shutdown code runs."""
    lab.proc.send_signal(signal.SIGKILL)
    lab.wait_exit()


# ---------------------------------------------------------------- SSE resumption
def test_long_sse_resumes_by_last_event_id_after_dropped_connections(start_lab):
    lab = start_lab("--drop-after", "2")
    client = McpClient(lab.url)
    client.initialize()
    exchange = client.call("long_sse", {"seconds": 0.6, "steps": 6}, progress=7, request_id=41)
    assert exchange.response is None and len(exchange.progress) == 2  # dropped after 2 events
    seen = [*exchange.progress]
    last_id = exchange.event_ids[-1]
    for _ in range(10):
        more = client.resume(last_id, 41)
        seen += more.progress
        if more.response is not None:
            break
        last_id = more.event_ids[-1]
    assert more.response is not None and more.result["structuredContent"]["steps"] == 6
    assert [p["progress"] for p in seen] == [1, 2, 3, 4, 5, 6]


def test_replay_from_the_event_store_after_a_restart(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    first = client.call("long_sse", {"seconds": 1.2, "steps": 4}, progress="p", request_id=8, max_messages=1)
    assert len(first.progress) == 1
    kill(lab)
    lab2 = start_lab(port=lab.port)
    replay = client.resume(first.event_ids[-1], 8)
    assert [p["progress"] for p in replay.progress] == [2, 3, 4]
    assert replay.result["structuredContent"]["tool"] == "long_sse"
    assert execution_count(state_file, "long_sse") == 1
    # The whole stream is still there, from the start.
    again = client.resume(first.event_ids[0], 8)
    assert [p["progress"] for p in again.progress] == [1, 2, 3, 4]
    lab2.stop()


def test_unknown_last_event_id_is_refused(client):
    r = httpx.get(client.url, headers={**client.headers(), "Last-Event-ID": "nosuchstream:3"})
    assert r.status_code == 404


# ---------------------------------------------------------------- 2025-11-25 tasks
def test_long_task_requires_task_augmentation(client):
    assert client.call("long_task", {"seconds": 0, "steps": 1}).error["code"] == -32601


def test_long_task_happy_path(client, state_file):
    created = client.call("long_task", {"seconds": 0.3, "steps": 3}, extra={"task": {"ttl": 60000}}).result
    task = created["task"]
    assert task["status"] == "working" and task["ttl"] == 60000 and task["pollInterval"] > 0
    got = client.request("tasks/get", {"taskId": task["taskId"]}).result
    assert got["taskId"] == task["taskId"]
    result = client.request("tasks/result", {"taskId": task["taskId"]}).result
    assert result["structuredContent"]["tool"] == "long_task"
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert client.request("tasks/get", {"taskId": task["taskId"]}).result["status"] == "completed"
    assert client.request("tasks/get", {"taskId": "nope"}).error["code"] == -32602
    assert execution_count(state_file, "long_task", task["taskId"]) == 1


def test_long_task_cancel(client):
    task = client.call("long_task", {"seconds": 30, "steps": 3}, extra={"task": {}}).result["task"]
    cancelled = client.request("tasks/cancel", {"taskId": task["taskId"]}).result
    assert cancelled["status"] == "cancelled"
    assert client.request("tasks/cancel", {"taskId": task["taskId"]}).error["code"] == -32602


def test_long_task_continues_after_a_restart(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    task = client.call("long_task", {"seconds": 1.5, "steps": 3}, extra={"task": {}}).result["task"]
    kill(lab)
    start_lab(port=lab.port)
    result = client.request("tasks/result", {"taskId": task["taskId"]}).result
    assert result["structuredContent"]["steps"] == 3
    assert execution_count(state_file, "long_task", task["taskId"]) == 1


# ---------------------------------------------------------------- tasks extension (2026-07-28)
def test_long_task_ext_needs_the_extension(stateless):
    error = stateless.call("long_task_ext", {"seconds": 0, "steps": 1}).error
    assert error["code"] == -32021
    assert "io.modelcontextprotocol/tasks" in error["data"]["requiredCapabilities"]["extensions"]


def test_long_task_ext_happy_path(lab):
    client = McpClient(lab.url, stateless=True, capabilities=TASKS_EXT)
    task = client.call("long_task_ext", {"seconds": 0.3, "steps": 3}).result
    assert task["resultType"] == "task" and task["status"] == "working" and task["ttlMs"] > 0
    done = wait_until(lambda: (r := client.request("tasks/get", {"taskId": task["taskId"]}).result)
                      ["status"] == "completed" and r, what="the task to complete")
    assert done["result"]["structuredContent"]["tool"] == "long_task_ext"
    assert "error" not in done and "inputRequests" not in done


def test_long_task_ext_tells_how_far_it_got_in_its_status_message(lab):
    # The extension has no task progress: a working task's statusMessage is the only report.
    client = McpClient(lab.url, stateless=True, capabilities=TASKS_EXT)
    exchange = client.call("long_task_ext", {"seconds": 1.2, "steps": 3}, progress="p")
    assert exchange.progress == []
    task_id = exchange.result["taskId"]
    messages: list[str] = []

    def completed() -> bool:
        task = client.request("tasks/get", {"taskId": task_id}).result
        if task["status"] == "working" and task.get("statusMessage") not in (None, *messages[-1:]):
            messages.append(task["statusMessage"])
        return task["status"] == "completed"

    wait_until(completed, what="the task to complete")
    steps = [m for m in messages if m != "started"]
    assert steps and set(steps) <= {"step 1/3", "step 2/3", "step 3/3"} and steps == sorted(steps), messages


def test_long_task_ext_cancel(lab):
    client = McpClient(lab.url, stateless=True, capabilities=TASKS_EXT)
    task = client.call("long_task_ext", {"seconds": 30, "steps": 3}).result
    assert client.request("tasks/cancel", {"taskId": task["taskId"]}).result["resultType"] == "complete"
    assert client.request("tasks/get", {"taskId": task["taskId"]}).result["status"] == "cancelled"


# ---------------------------------------------------------------- SEP-1391 async tools
def test_long_async_happy_path_and_token_rules(client, state_file):
    token = uuid.uuid4().hex
    started = client.call("long_async", {"seconds": 0.3, "steps": 3},
                          extra={"operation": {"token": token, "keepAlive": 60}}).result
    assert started["operation"]["status"] == "working" and started["operation"]["keepAlive"] == 60
    reused = client.call("long_async", {"seconds": 0.3, "steps": 3}, extra={"operation": {"token": token}})
    assert reused.error["code"] == -32602
    wait_until(lambda: client.request("tools/async/status", {"token": token}).result["status"] == "completed",
               what="the asynchronous call to complete")
    result = client.request("tools/async/result", {"token": token}).result["result"]
    assert result["structuredContent"]["tool"] == "long_async"
    assert client.request("tools/async/status", {"token": "unknown"}).error["code"] == -32602
    assert client.call("long_async", {"seconds": 0, "steps": 1}).error["code"] == -32600
    assert execution_count(state_file, "long_async", token) == 1


def test_long_async_continues_after_a_restart(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    token = uuid.uuid4().hex
    client.call("long_async", {"seconds": 1.5, "steps": 3}, extra={"operation": {"token": token}})
    kill(lab)
    start_lab(port=lab.port)
    assert client.request("tools/async/status", {"token": token}).result["status"] in ("working", "completed")
    wait_until(lambda: client.request("tools/async/status", {"token": token}).result["status"] == "completed",
               what="the asynchronous call to complete")
    assert client.request("tools/async/result", {"token": token}).result["result"]["structuredContent"]["steps"] == 3
    assert execution_count(state_file, "long_async", token) == 1


# ---------------------------------------------------------------- resume tokens
def test_long_resume_token_slices_until_done(client, state_file):
    args = {"seconds": 1.5, "steps": 3}
    first = client.call("long_resume_token", args, progress="rt")
    result = first.result
    progress = [p["progress"] for p in first.progress]
    token = result["_meta"]["nextResumeToken"]
    slices = 1
    while "nextResumeToken" in (result.get("_meta") or {}):
        assert result["_meta"]["nextResumeToken"] == token  # stable
        more = client.call("long_resume_token", args, progress=f"rt{slices}",
                           extra={"_meta": {"resumeToken": token}})
        progress += [p["progress"] for p in more.progress]
        result = more.result
        slices += 1
    assert slices >= 2
    assert progress and progress == sorted(set(progress)) and progress[-1] == 3
    assert result["structuredContent"]["tool"] == "long_resume_token"
    expired = client.call("long_resume_token", args, extra={"_meta": {"resumeToken": token}})
    assert expired.error["code"] == -32602
    assert execution_count(state_file, "long_resume_token", token) == 1


@pytest.mark.parametrize("end", ["killed", "its stdio client went away"])
def test_a_first_slice_cut_by_a_lab_restart_is_answered_on_its_replayed_stream(start_lab, state_file, end):
    """Before the first token a client can come back only by replaying the request's SSE
    stream; the coroutine that would have answered it died with the lab, so the restarted
    lab answers it with the outcome. Also when the lab stopped cleanly, as a stdio lab does
    when its host is killed (its stdin ends): stopping is no cancellation of the request."""
    lab = start_lab() if end == "killed" else start_lab("--http", "0", stdio=True)
    client = McpClient(lab.url)
    client.initialize()
    # A slice lasts a quarter of the work (2 s here); the first step takes 0.5 s.
    first = client.call("long_resume_token", {"seconds": 8, "steps": 16}, progress="rt", request_id=12,
                        max_messages=1)
    assert len(first.progress) == 1 and first.response is None  # no token handed out yet
    if end == "killed":
        kill(lab)
    else:
        lab.proc.stdin.close()
        assert lab.wait_exit() == 0
    lab2 = start_lab(port=lab.port)
    replay = client.resume(first.event_ids[-1], 12)
    assert replay.result["structuredContent"] == {"tool": "long_resume_token", "seconds": 8.0, "steps": 16}
    assert [p["progress"] for p in replay.progress][-1] == 16
    assert execution_count(state_file, "long_resume_token") == 1
    client.close()
    lab2.stop()


def test_long_resume_token_validates_params(client):
    result = client.call("long_resume_token", {"seconds": 3, "steps": 3}).result
    token = result["_meta"]["nextResumeToken"]
    wrong = client.call("long_resume_token", {"seconds": 4, "steps": 3}, extra={"_meta": {"resumeToken": token}})
    assert wrong.error["code"] == -32602
    assert client.call("long_resume_token", {}, extra={"_meta": {"resumeToken": "forged"}}).error["code"] == -32602


# ---------------------------------------------------------------- MRTR
def test_long_mrtr_answered_after_a_restart(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url, stateless=True)
    args = {"seconds": 0.4, "steps": 4}
    first = client.call("long_mrtr", args, progress="m")
    asked = first.result
    assert asked["resultType"] == "input_required" and asked["requestState"]
    assert [p["progress"] for p in first.progress] == [1, 2]
    kill(lab)
    start_lab(port=lab.port)
    second = client.call("long_mrtr", args, progress="m2", extra={
        "requestState": asked["requestState"],
        "inputResponses": {"continue": {"action": "accept", "content": {"proceed": True}}}})
    assert second.result["resultType"] == "complete"
    assert second.result["structuredContent"]["answer"]["action"] == "accept"
    assert [p["progress"] for p in second.progress] == [3, 4]
    assert execution_count(state_file, "long_mrtr") == 1
    tampered = client.call("long_mrtr", args, extra={"requestState": asked["requestState"] + "x",
                                                     "inputResponses": {}})
    assert tampered.error["code"] == -32602


def test_long_mrtr_handshake_asks_by_elicitation(client):
    exchange = client.call("long_mrtr", {"seconds": 0.2, "steps": 2},
                           on_request=lambda r: {"action": "accept", "content": {"proceed": True}})
    assert exchange.result["structuredContent"]["answer"]["content"] == {"proceed": True}


# ---------------------------------------------------------------- draft streams
def test_long_stream_poll_and_resume(client):
    first = client.call("long_stream", {"seconds": 0.6, "steps": 3}, progress="s", request_id=77, max_messages=1)
    created = first.notifications("notifications/stream/create")[0]["stream"]
    stream_id = created["streamId"]
    assert created["resumeInterval"]["min"] >= 0 and created["resumeInterval"]["max"] > 0
    poll = client.request("stream/poll", {"streamId": stream_id}).result
    assert poll["streamId"] == stream_id and poll["status"] in ("live", "completed")
    assert set(poll) >= {"pendingMessages", "hasRequest", "hasError"}
    listed = client.request("stream/poll/all").result["streams"]
    assert stream_id in [s["streamId"] for s in listed]
    resumed = client.request("stream/resume", {"streamId": stream_id})
    assert [p["progress"] for p in resumed.progress][-1] == 3
    answers = [m for m in resumed.messages if m.get("id") == 77]
    assert answers and answers[0]["result"]["structuredContent"]["tool"] == "long_stream"
    assert resumed.notifications("notifications/stream/end") == [{"streamId": stream_id}]
    done = client.request("stream/poll", {"streamId": stream_id}).result
    assert done["status"] == "completed" and done["pendingMessages"] is False
    assert client.request("stream/poll", {"streamId": "nope"}).error["code"] == -32602


def test_a_response_copied_onto_a_resume_that_died_is_sent_again(client, state_file):
    # The client's stream/resume connection dies before the response reached it: the lab
    # keeps the response until a stream carrying it ended cleanly, and the next resume
    # brings it (it used to count it delivered as soon as it was copied: lost for good).
    first = client.call("long_stream", {"seconds": 1.5, "steps": 3}, progress="p", request_id=88, max_messages=1)
    stream_id = first.notifications("notifications/stream/create")[0]["stream"]["streamId"]
    cut = client.request("stream/resume", {"streamId": stream_id}, max_messages=1)  # hangs up early
    assert cut.response is None and not [m for m in cut.messages if m.get("id") == 88]
    wait_until(lambda: client.request("stream/poll", {"streamId": stream_id}).result["status"] == "completed")
    again = client.request("stream/resume", {"streamId": stream_id})
    answers = [m for m in again.messages if m.get("id") == 88]
    assert answers and answers[0]["result"]["structuredContent"]["tool"] == "long_stream", again.messages
    assert execution_count(state_file, "long_stream") == 1


# ---------------------------------------------------------------- SEP-975 resumable requests
def test_long_resumable_get_status_and_same_id_resume(lab):
    client = McpClient(lab.url, capabilities={"resumableRequests": {}})
    client.initialize()
    first = client.call("long_resumable", {"seconds": 0.6, "steps": 3}, progress="r", request_id=123, max_messages=1)
    policy = first.notifications("notifications/requests/resumePolicy")[0]
    assert policy["requestId"] == 123
    token = policy["resumeToken"]
    status = client.request("requests/getStatus", {"requestId": 123, "resumeToken": token}).result
    assert status["status"] in ("processing", "completed")
    assert client.request("requests/resume", {"resumeToken": token}, request_id=999).error["code"] == -32602
    resumed = client.request("requests/resume", {"resumeToken": token}, request_id=123)
    assert resumed.result["structuredContent"]["tool"] == "long_resumable"
    assert [p["progress"] for p in resumed.progress] == [1, 2, 3]
    final = client.request("requests/getStatus", {"requestId": 123, "resumeToken": token}).result
    assert final == {"status": "completed", "hasPendingMessages": False, "hasInputRequest": False}


def test_long_resumable_without_the_capability_is_a_plain_call(client):
    exchange = client.call("long_resumable", {"seconds": 0.1, "steps": 1})
    assert not exchange.notifications("notifications/requests/resumePolicy")
    assert exchange.result["structuredContent"]["tool"] == "long_resumable"


# ---------------------------------------------------------------- faults
def test_exit_after_n_events(start_lab):
    lab = start_lab("--exit-after", "3")
    client = McpClient(lab.url)
    client.initialize()
    try:
        client.call("sleep_with_progress", {"seconds": 1, "steps": 10}, progress=1)
    except httpx.HTTPError:
        pass
    assert lab.wait_exit() == 3


def test_stateless_closed_stream_cancels(lab, state_file):
    client = McpClient(lab.url, stateless=True)
    first = client.call("sleep_with_progress", {"seconds": 20, "steps": 40}, progress=1, max_messages=1)
    assert len(first.progress) == 1
    from hostapp.lab.state import LabState
    state = LabState(state_file)
    try:
        wait_until(lambda: [j.status for j in state.jobs()] == ["cancelled"], what="the job to be cancelled")
    finally:
        state.close()


def test_task_progress_and_status_reach_the_standalone_stream(client):
    task = client.call("long_task", {"seconds": 0.2, "steps": 2}, progress="tp", extra={"task": {}}).result["task"]
    listed = client.request("tasks/list").result["tasks"]
    assert task["taskId"] in [t["taskId"] for t in listed]
    from .conftest import Exchange, read_sse
    exchange = Exchange()
    with client.http.stream("GET", client.url, headers=client.headers()) as r:
        read_sse(r, exchange, None, max_messages=3)
    assert [p["progress"] for p in exchange.progress] == [1, 2]
    assert exchange.notifications("notifications/tasks/status")[0]["taskId"] == task["taskId"]


def test_long_resumable_continues_after_a_restart(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url, capabilities={"resumableRequests": {}})
    client.initialize()
    first = client.call("long_resumable", {"seconds": 1.2, "steps": 3}, progress="r", request_id=5, max_messages=1)
    token = first.notifications("notifications/requests/resumePolicy")[0]["resumeToken"]
    kill(lab)
    start_lab(port=lab.port)
    resumed = client.request("requests/resume", {"resumeToken": token}, request_id=5)
    assert resumed.result["structuredContent"]["steps"] == 3
    assert execution_count(state_file, "long_resumable") == 1


def test_long_stream_continues_after_a_restart(start_lab):
    lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    first = client.call("long_stream", {"seconds": 1.2, "steps": 3}, request_id=6, max_messages=1)
    stream_id = first.notifications("notifications/stream/create")[0]["stream"]["streamId"]
    kill(lab)
    start_lab(port=lab.port)
    assert [s["streamId"] for s in client.request("stream/poll/all").result["streams"]] == [stream_id]
    resumed = client.request("stream/resume", {"streamId": stream_id})
    assert resumed.notifications("notifications/stream/end") == [{"streamId": stream_id}]


def test_handles_are_not_stored_in_plain_text(client, state_file):
    task_id = client.call("long_task", {"seconds": 0, "steps": 1}, extra={"task": {}}).result["task"]["taskId"]
    client.request("tasks/result", {"taskId": task_id})
    stored = b"".join(p.read_bytes() for p in state_file.parent.glob(state_file.name + "*")
                      if not p.name.endswith(".key"))
    assert task_id.encode() not in stored
    assert client.session_id.encode() not in stored


def test_fault_argument_crashes_once_mid_job_and_the_restart_finishes_it(start_lab, state_file):
    lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    token = uuid.uuid4().hex
    client.call("long_async", {"seconds": 0.6, "steps": 3, "fault": {"exit_after_step": 1}},
                extra={"operation": {"token": token}})
    assert lab.wait_exit() == 3
    start_lab(port=lab.port)
    wait_until(lambda: client.request("tools/async/status", {"token": token}).result["status"] == "completed",
               what="the asynchronous call to complete")
    assert execution_count(state_file, "long_async", token) == 1


def test_long_task_asks_through_tasks_result(client):
    task = client.call("long_task", {"seconds": 0.4, "steps": 4, "ask": True}, extra={"task": {}}).result["task"]
    wait_until(lambda: client.request("tasks/get", {"taskId": task["taskId"]}).result["status"] == "input_required",
               what="the task to ask")
    asked = []

    def answer(request):
        asked.append(request)
        return {"action": "accept", "content": {"proceed": True}}

    result = client.request("tasks/result", {"taskId": task["taskId"]}, on_request=answer).result
    assert asked[0]["method"] == "elicitation/create"
    assert asked[0]["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
    assert result["structuredContent"]["answer"]["content"] == {"proceed": True}


def test_long_task_ext_input_required_answered_after_a_restart(start_lab):
    lab = start_lab()
    client = McpClient(lab.url, stateless=True, capabilities=TASKS_EXT)
    task = client.call("long_task_ext", {"seconds": 0.4, "steps": 4, "ask": True}).result
    waiting = wait_until(lambda: (r := client.request("tasks/get", {"taskId": task["taskId"]}).result)
                         ["status"] == "input_required" and r, what="the task to ask")
    (key, request), = waiting["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    kill(lab)
    start_lab(port=lab.port)
    assert client.request("tasks/get", {"taskId": task["taskId"]}).result["status"] == "input_required"
    answer = {"action": "accept", "content": {"proceed": True}}
    update = client.request("tasks/update", {"taskId": task["taskId"], "inputResponses": {key: answer}})
    assert update.result["resultType"] == "complete"
    done = wait_until(lambda: (r := client.request("tasks/get", {"taskId": task["taskId"]}).result)
                      ["status"] == "completed" and r, what="the answered task to complete")
    assert done["result"]["structuredContent"]["answer"]["action"] == "accept"


def test_notifications_cancelled_stops_the_work(client, state_file):
    first = client.call("sleep_with_progress", {"seconds": 20, "steps": 40}, progress=1, request_id=61, max_messages=1)
    assert len(first.progress) == 1
    token = uuid.uuid4().hex
    client.call("long_async", {"seconds": 20, "steps": 4}, extra={"operation": {"token": token}}, request_id=62)
    for request_id in (61, 62):
        assert client.post({"jsonrpc": "2.0", "method": "notifications/cancelled",
                            "params": {"requestId": request_id, "reason": "test"}}).status_code == 202
    assert client.request("tools/async/status", {"token": token}).result["status"] == "canceled"
    from hostapp.lab.state import LabState
    state = LabState(state_file)
    try:
        wait_until(lambda: sorted(j.status for j in state.jobs()) == ["cancelled", "cancelled"],
                   what="both jobs to be cancelled")
    finally:
        state.close()


def test_finished_task_expires_after_its_ttl(client):
    task = client.call("long_task", {"seconds": 0, "steps": 1}, extra={"task": {"ttl": 300}}).result["task"]
    assert client.request("tasks/result", {"taskId": task["taskId"]}).result["structuredContent"]["steps"] == 1
    wait_until(lambda: "error" in client.request("tasks/get", {"taskId": task["taskId"]}).response,
               what="the task to expire")
    assert client.request("tasks/get", {"taskId": task["taskId"]}).error["code"] == -32602
