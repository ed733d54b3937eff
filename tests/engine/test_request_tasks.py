"""The client's tasks of task-augmented requests: what the server sees of each through
tasks/get, tasks/result, tasks/list and tasks/cancel, whatever the person did. (The whole
path against server-everything: tests/interop/test_cli_sampling.py.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp_types._v2025_11_25 import CreateTaskResult, GetTaskResult

from hostapp.engine.request_tasks import MAX_TTL_MS, RequestTasks
from hostapp.protocol.jsonrpc import INVALID_PARAMS, RpcError

pytestmark = pytest.mark.timeout(30)
RELATED = "io.modelcontextprotocol/related-task"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def tasks_of(clock: Clock) -> tuple[RequestTasks, list[asyncio.Task[Any]]]:
    spawned: list[asyncio.Task[Any]] = []

    def spawn(coro: Any) -> asyncio.Task[Any]:
        spawned.append(asyncio.get_running_loop().create_task(coro))
        return spawned[-1]

    return RequestTasks(spawn, clock), spawned


async def test_a_task_waits_for_the_person_then_gives_the_answer_once_tagged_with_it():
    clock = Clock()
    tasks, _ = tasks_of(clock)
    person: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    created = tasks.create("elicitation/create", {"ttl": 5000}, lambda: person)
    CreateTaskResult.model_validate(created)
    task_id = created["task"]["taskId"]
    assert created["task"]["status"] == "input_required" and created["task"]["ttl"] == 5000
    result = asyncio.ensure_future(tasks.serve("tasks/result", {"taskId": task_id}))
    await asyncio.sleep(0)
    assert not result.done()  # it waits for the answer
    clock.now += 3
    person.set_result({"action": "accept", "content": {"name": "Ada"}})
    assert await result == {"action": "accept", "content": {"name": "Ada"}, "_meta": {RELATED: {"taskId": task_id}}}
    got = await tasks.serve("tasks/get", {"taskId": task_id})
    GetTaskResult.model_validate(got)
    assert got["status"] == "completed" and got["lastUpdatedAt"] != got["createdAt"]
    assert [t["taskId"] for t in (await tasks.serve("tasks/list", {}))["tasks"]] == [task_id]
    clock.now += 6  # its ttl after it ended
    with pytest.raises(RpcError) as caught:
        await tasks.serve("tasks/get", {"taskId": task_id})
    assert caught.value.code == INVALID_PARAMS


async def test_a_refused_sampling_request_fails_the_task_with_the_error():
    tasks, _ = tasks_of(Clock())

    async def refuse() -> dict[str, Any]:
        raise RpcError(-1, "the person declined the sampling request")

    task_id = tasks.create("sampling/createMessage", {}, refuse)["task"]["taskId"]
    with pytest.raises(RpcError) as caught:
        await tasks.serve("tasks/result", {"taskId": task_id})
    assert caught.value.code == -1 and caught.value.data == {"_meta": {RELATED: {"taskId": task_id}}}
    got = await tasks.serve("tasks/get", {"taskId": task_id})
    assert got["status"] == "failed" and "declined" in got["statusMessage"] and got["ttl"] == MAX_TTL_MS


async def test_a_cancelled_task_stops_asking_and_says_so():
    tasks, spawned = tasks_of(Clock())
    asked = asyncio.Event()

    async def ask() -> dict[str, Any]:
        asked.set()
        await asyncio.Event().wait()  # the person never answers
        return {}

    task_id = tasks.create("elicitation/create", {"ttl": 1000}, ask)["task"]["taskId"]
    await asked.wait()
    waiting = asyncio.ensure_future(tasks.serve("tasks/result", {"taskId": task_id}))
    cancelled = await tasks.serve("tasks/cancel", {"taskId": task_id})
    assert cancelled["status"] == "cancelled"
    with pytest.raises(RpcError, match="cancelled"):
        await waiting
    await asyncio.gather(*spawned, return_exceptions=True)
    assert spawned[0].cancelled()  # the asking ended with it
    with pytest.raises(RpcError, match="already cancelled"):
        await tasks.serve("tasks/cancel", {"taskId": task_id})
    with pytest.raises(RpcError, match="unknown"):
        await tasks.serve("tasks/get", {"taskId": "not-one-of-ours"})
