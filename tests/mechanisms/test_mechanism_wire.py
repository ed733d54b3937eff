"""The messages the mechanisms build, and the answers they read, against the official
wire models (mcp-types) and the tasks-extension models of the fastmcp peer."""

from __future__ import annotations

import pytest
from mcp_types import _v2025_11_25 as v2025
from mcp_types import _v2026_07_28 as v2026
from mechanism_driver import CALL, RESULT, of_type

from hostapp.mechanisms import (
    Deliver,
    Mrtr,
    SendRequest,
    Tasks2025,
    TasksExtension,
    client_capabilities,
)
from hostapp.protocol.eras import stateless_meta

T0 = 1_800_000_000.0


def round_trips(model, message: dict) -> bool:
    """Validates, and loses no key (the models ignore unknown keys, so a misspelt
    field would vanish from the dump)."""
    dumped = model.model_validate(message).model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped == message


def request(action: SendRequest) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": action.method, "params": action.params}


def test_2025_task_messages_match_the_schema():
    m = Tasks2025(ttl_ms=60000)
    params, _ = m.prepare(dict(CALL), now=T0)
    assert round_trips(v2025.CallToolRequest, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})

    created = v2025.CreateTaskResult(task=v2025.Task(
        taskId="T-1", status="working", createdAt="2026-11-22T03:00:00Z", lastUpdatedAt="2026-11-22T03:00:00Z",
        ttl=60000, pollInterval=2000)).model_dump(by_alias=True, exclude_none=True, mode="json")
    m.on_result(created, now=T0 + 1)
    assert m.secret() == "T-1" and m.state()["poll_seconds"] == 2.0

    [get] = m.wake(now=T0 + 3)
    assert round_trips(v2025.GetTaskRequest, request(get))
    done = v2025.GetTaskResult(taskId="T-1", status="completed", createdAt="x", lastUpdatedAt="x",
                               ttl=60000).model_dump(by_alias=True, exclude_none=True, mode="json")
    [fetch] = m.on_result(done, now=T0 + 4, method="tasks/get")
    assert round_trips(v2025.GetTaskPayloadRequest, request(fetch))
    assert m.on_result(RESULT, now=T0 + 5, method="tasks/result") == [Deliver(result=RESULT)]


def test_2025_cancel_and_list_match_the_schema():
    m = Tasks2025()
    m.prepare(dict(CALL), now=T0)
    m.on_result({"task": {"taskId": "T-1", "status": "working", "createdAt": "x", "lastUpdatedAt": "x",
                          "ttl": None}}, now=T0 + 1)
    [cancel] = of_type(m.cancel(now=T0 + 2), SendRequest)
    assert round_trips(v2025.CancelTaskRequest, request(cancel))
    restored = Tasks2025.restore({**Tasks2025().state(), "phase": "sent"}, None)
    [listing] = restored.resume(now=T0 + 3)
    assert round_trips(v2025.ListTasksRequest, request(listing))


def test_mrtr_retry_matches_the_2026_schema():
    # The session puts the stateless era's _meta on every request; the retry keeps it.
    meta = stateless_meta({"name": "hostapp", "version": "0"}, client_capabilities("stateless"))
    m = Mrtr()
    m.prepare({**CALL, "_meta": meta}, now=T0)
    question = v2026.InputRequiredResult(
        resultType="input_required", requestState="RS-1",
        inputRequests={"q": {"method": "elicitation/create",
                             "params": {"mode": "form", "message": "Which city?",
                                        "requestedSchema": {"type": "object",
                                                            "properties": {"name": {"type": "string"}}}}}},
    ).model_dump(by_alias=True, exclude_none=True, mode="json")
    m.on_result(question, now=T0 + 1)
    answer = {"q1": {"action": "accept", "content": {"name": "Brest"}}}
    [retry] = of_type(m.answer_input(answer, now=T0 + 2), SendRequest)
    message = request(retry)
    parsed = v2026.CallToolRequest.model_validate(message)
    assert parsed.params.request_state == "RS-1" and parsed.params.input_responses
    assert parsed.params.name == CALL["name"]
    assert message["params"]["_meta"] == meta
    caps = parsed.params.meta.io_modelcontextprotocol_client_capabilities
    assert "io.modelcontextprotocol/tasks" in (caps.extensions or {})


def test_tasks_extension_against_the_fastmcp_models():
    models = pytest.importorskip("fastmcp_tasks.models")
    m = TasksExtension()
    m.prepare(dict(CALL), now=T0)
    created = models.CreateTaskResult(task_id="T-1", status="working", created_at="x", last_updated_at="x",
                                      ttl_ms=60000, poll_interval_ms=500).model_dump(by_alias=True,
                                                                                     exclude_none=True)
    actions = m.on_result(created, now=T0 + 1)
    assert m.secret() == "T-1" and m.state()["poll_seconds"] == 0.5
    [get] = m.wake(now=T0 + 2)
    models.GetTaskRequest.model_validate({"method": get.method, "params": get.params})
    waiting = models.GetTaskResult(
        task_id="T-1", status="input_required", created_at="x", last_updated_at="x", ttl_ms=60000,
        input_requests={"k": {"method": "elicitation/create", "params": {"message": "ok?", "requestedSchema": {}}}},
    ).model_dump(by_alias=True, exclude_none=True)
    m.on_result(waiting, now=T0 + 3, method="tasks/get")
    [update] = of_type(m.answer_input({"q1": {"action": "accept", "content": {}}}, now=T0 + 4), SendRequest)
    params = models.UpdateTaskRequest.model_validate({"method": update.method, "params": update.params}).params
    assert params.task_id == "T-1" and params.input_responses == {"k": {"action": "accept", "content": {}}}
    done = models.GetTaskResult(task_id="T-1", status="completed", created_at="x", last_updated_at="x",
                                ttl_ms=60000, result=RESULT).model_dump(by_alias=True, exclude_none=True)
    assert m.on_result(done, now=T0 + 5, method="tasks/get") == [Deliver(result=RESULT)]
    assert any(isinstance(a, SendRequest) and a.method == "subscriptions/listen" for a in actions)
