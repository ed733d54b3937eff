"""``python -m bench.resume_floor --home H``: the least a restart's resume can take on this
server and this machine, whatever the host does.

A prepared home (``bench.resume_probe prepare``) holds unfinished operations on the lab;
after a restart the host must ask the server about each of them once, by whatever its
mechanism offers, before it can show anything new: a ``GET`` with ``Last-Event-ID`` per
resumable SSE stream (2025-11-25), one ``tasks/list`` per session for the 2025-11-25 tasks
(``tasks/get`` for any it does not name), a ``tasks/get`` per extension task and a
``tools/async/status`` per asynchronous tool (2026-07-28; neither protocol has a listing).
This script sends exactly those requests, with nothing else of the host: no journal, no
engine, no agent, no clients; the operations' handles are read from the keyring first, and
the clock starts at the first request. It waits for each one's first word (a stream's first
event, an answer), then closes the streams (not a cancellation in the 2025-11-25 protocol:
the calls run on, and the host resumes them from the same positions afterwards).

What it measures is the server's side: the same requests cannot be answered sooner by any
client on this machine. ``--lab-pid`` adds the server's CPU seconds meanwhile. Printed as
JSON: the time until every operation had its first word (``all_answered_s``), the same for
the operations ``bench.agent_probe resume`` watches (``watched_answered_s``: all but the
asynchronous tools', which are asked all the same), the median, and each mechanism's
(median, last).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import EventSource, aconnect_sse

from bench.agent_probe import process_cpu_seconds
from hostapp.protocol.eras import STATELESS_VERSION, stateless_meta

#: POSTs waiting for their answers at once: the host's own bound per server
#: (``hostapp.transport.http.MAX_REQUESTS_IN_FLIGHT``).
POSTS_IN_FLIGHT = 128
#: What a stateless request declares: the tasks extension (a server that needs it answers
#: -32021 without it).
CAPABILITIES: dict[str, Any] = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
CLIENT_INFO = {"name": "bench-resume-floor", "version": "1"}


def _code(answer: dict[str, Any]) -> Any:
    """The JSON-RPC error code of an answer (its message may quote what was asked)."""
    error = answer.get("error")
    return error.get("code") if isinstance(error, dict) else None


def _cpu_seconds(pid: int | None) -> float | None:
    return None if pid is None else process_cpu_seconds(pid)


async def _handles(home: Path) -> tuple[list[Any], dict[str, tuple[str | None, tuple[str, str] | None]],
                                        dict[str, Any]]:
    """The unfinished operations, each one's (secret, HTTP session) from the keyring, and
    the servers by name."""
    from hostapp.engine.handles import HandleKeeper, unwrap_secret
    from hostapp.store.journal import OperationJournal
    from hostapp.store.paths import journal_path

    journal = OperationJournal(journal_path(home))
    try:
        records = journal.unfinished_operations()
        servers = {cfg.name: cfg for cfg in journal.list_servers()}
    finally:
        journal.close()
    stored = await HandleKeeper(home, None, lambda kind, message: None).load_handles(records)
    return records, {r.id: unwrap_secret(stored.get(r.id)) for r in records}, servers


class Floor:
    """The requests of one resume, sent at once; when each operation got its first word."""

    def __init__(self, posts: httpx.AsyncClient, streams: httpx.AsyncClient) -> None:
        self.posts = posts
        self.streams = streams
        self.slots = asyncio.Semaphore(POSTS_IN_FLIGHT)
        self.t0 = 0.0
        self.answered: dict[str, float] = {}
        self.failed: dict[str, str] = {}
        self._ids = 0

    def _note(self, op_id: str) -> None:
        self.answered.setdefault(op_id, time.perf_counter() - self.t0)

    async def post(self, url: str, method: str, params: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        self._ids += 1
        body = {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}
        async with self.slots:
            response = await self.posts.post(url, json=body, headers={
                "Accept": "application/json, text/event-stream", **headers})
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            async for event in EventSource(response).aiter_sse():
                message = json.loads(event.data) if event.data else {}
                if message.get("id") == body["id"]:
                    return message
            raise RuntimeError(f"{method}: no answer in the stream")
        return response.json()

    async def stateless(self, op_id: str, url: str, method: str, params: dict[str, Any],
                        name_header: str | None = None) -> None:
        meta = stateless_meta(CLIENT_INFO, CAPABILITIES)
        headers = {"Mcp-Protocol-Version": STATELESS_VERSION, "Mcp-Method": method}
        if name_header:
            headers["Mcp-Name"] = name_header
        answer = await self.post(url, method, {**params, "_meta": meta}, headers)
        if "result" not in answer:
            raise RuntimeError(f"{method}: error {_code(answer)}")
        self._note(op_id)

    async def listing(self, url: str, session: tuple[str, str], tasks: dict[str, str]) -> None:
        """One session's 2025-11-25 tasks (``tasks``: task id -> operation id): listed,
        then asked one by one for any the listing did not name."""
        headers = {"Mcp-Session-Id": session[0], "Mcp-Protocol-Version": session[1]}
        cursor = None
        while True:
            answer = await self.post(url, "tasks/list", {"cursor": cursor} if cursor else {}, headers)
            result = answer.get("result") or {}
            for task in result.get("tasks", []):
                op_id = tasks.get(task.get("taskId"))
                if op_id is not None:
                    self._note(op_id)
            cursor = result.get("nextCursor")
            if not cursor:
                break
        unnamed = [(t, o) for t, o in tasks.items() if o not in self.answered]
        await asyncio.gather(*(self._task_get(url, headers, t, o) for t, o in unnamed))

    async def _task_get(self, url: str, headers: dict[str, str], task_id: str, op_id: str) -> None:
        answer = await self.post(url, "tasks/get", {"taskId": task_id}, headers)
        if "result" not in answer:
            raise RuntimeError(f"tasks/get: error {_code(answer)}")
        self._note(op_id)

    async def resume_stream(self, op_id: str, url: str, session: tuple[str, str], last_event_id: str) -> None:
        headers = {"Mcp-Session-Id": session[0], "Mcp-Protocol-Version": session[1], "Last-Event-ID": last_event_id}
        async with aconnect_sse(self.streams, "GET", url, headers=headers) as source:
            if source.response.status_code != 200:
                raise RuntimeError(f"GET with Last-Event-ID: HTTP {source.response.status_code}")
            async for event in source.aiter_sse():
                if event.data:  # (not the priming event)
                    self._note(op_id)
                    return

    async def run(self, jobs: list[tuple[str, Callable[[], Awaitable[None]]]]) -> None:
        async def one(op_ids: str, job: Callable[[], Awaitable[None]]) -> None:
            try:
                await job()
            except Exception as exc:  # noqa: BLE001 - counted and shown, the others go on
                # Only what says how it failed: a server's or httpx's own text may quote a
                # handle (a session or task id), which is a secret.
                self.failed[op_ids] = str(exc) if isinstance(exc, RuntimeError) else type(exc).__name__

        self.t0 = time.perf_counter()
        await asyncio.gather(*(one(key, job) for key, job in jobs))


async def measure(home: Path, lab_pid: int | None) -> dict[str, Any]:
    from hostapp.transport.pool import client_with_pool

    records, handles, servers = await _handles(home)
    mechanism_of = {r.id: r.mechanism or "?" for r in records}
    timeout = httpx.Timeout(120.0, read=None)
    posts, streams = client_with_pool(timeout=timeout), client_with_pool(timeout=timeout)
    floor = Floor(posts, streams)
    jobs: list[tuple[str, Callable[[], Awaitable[None]]]] = []
    sessions: dict[tuple[str, tuple[str, str]], dict[str, str]] = {}
    others: list[tuple[str, Callable[[], Awaitable[None]]]] = []
    skipped: dict[str, int] = {}
    expected: set[str] = set()
    for record in records:
        secret, session = handles[record.id]
        url = servers[record.server].url
        mechanism = mechanism_of[record.id]
        if secret is None:
            skipped[mechanism] = skipped.get(mechanism, 0) + 1
            continue
        if mechanism == "tasks_2025" and session is not None:
            sessions.setdefault((url, session), {})[secret] = record.id
        elif mechanism == "http_resumption" and session is not None:
            others.append((record.id, partial(floor.resume_stream, record.id, url, session, secret)))
        elif mechanism == "tasks_extension":
            others.append((record.id, partial(floor.stateless, record.id, url, "tasks/get", {"taskId": secret},
                                              name_header=secret)))
        elif mechanism == "async_tool":
            others.append((record.id, partial(floor.stateless, record.id, url, "tools/async/status",
                                              {"token": secret})))
        else:
            skipped[mechanism] = skipped.get(mechanism, 0) + 1
            continue
        expected.add(record.id)
    # The listings first (one request each answers hundreds), then the rest as it comes.
    for (url, session), tasks in sessions.items():
        jobs.append((f"tasks/list {len(jobs)}", partial(floor.listing, url, session, tasks)))
    jobs += others
    cpu_before = _cpu_seconds(lab_pid)
    try:
        await floor.run(jobs)
    finally:
        await posts.aclose()
        await streams.aclose()
    wall = time.perf_counter() - floor.t0
    cpu_after = _cpu_seconds(lab_pid)
    times = sorted(floor.answered.values())
    by_mechanism: dict[str, list[float]] = {}
    for op_id, at in floor.answered.items():
        by_mechanism.setdefault(mechanism_of[op_id], []).append(at)
    # The operations bench.agent_probe resume watches: all but the asynchronous tools
    # (their status brings nothing a client can see), which are asked all the same.
    watched = {i for i in expected if mechanism_of[i] != "async_tool"}
    watched_times = [at for i, at in floor.answered.items() if i in watched]
    return {"mode": "resume-floor", "operations": len(records), "requests_for": len(expected),
            "answered": len(times),
            "all_answered_s": times[-1] if times and len(times) == len(expected) else None,
            "watched": len(watched),
            "watched_answered_s": max(watched_times) if watched and len(watched_times) == len(watched) else None,
            "median_answered_s": statistics.median(times) if times else None,
            "wall_s": wall, "listings": len(sessions), "skipped": skipped,
            "failed": len(floor.failed), "failures": sorted(set(floor.failed.values()))[:5],
            "server_cpu_s": None if cpu_before is None or cpu_after is None else cpu_after - cpu_before,
            "by_mechanism": {name: (round(statistics.median(v), 2), round(max(v), 2))
                             for name, v in sorted(by_mechanism.items())}}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.resume_floor", description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True, help="a home prepared by bench.resume_probe prepare")
    parser.add_argument("--lab-pid", type=int, help="the server's process, for its CPU seconds")
    args = parser.parse_args()
    os.environ["HOSTAPP_HOME"] = str(args.home)
    print(json.dumps(asyncio.run(measure(args.home, args.lab_pid))), flush=True)


if __name__ == "__main__":
    main()
