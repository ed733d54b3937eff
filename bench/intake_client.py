"""One client of the progress-intake benchmark, run in a process of its own.

``python -m bench.intake_client CLIENT TRANSPORT COUNT [--url URL]`` calls the progress
server's ``flood`` tool once and prints one JSON line: how many progress notifications
arrived, in how many seconds (from sending the call until its result was in, and for
hostapp until the journal had it too). CLIENT is one of:

floor    the stream read with httpx + httpx-sse (HTTP) or asyncio lines (stdio) and
         ``json.loads`` of each message, nothing else: no client can be faster;
sdk      the official ``mcp`` SDK client, ``Client(..., mode="legacy").call_tool`` with a
         ``progress_callback``;
hostapp  the host's engine: the call journaled as an operation, every notification routed
         to it, its progress state updated and journaled as in use.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SERVER_MODULE = ["-m", "bench.progress_server", "--stdio"]
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def _stdio_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def _call(count: int, rid: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": "flood", "arguments": {"count": count}, "_meta": {"progressToken": "p"}}}


_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "floor", "version": "1"}}}
_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


async def floor_http(url: str, count: int) -> tuple[int, float]:
    import httpx
    from httpx_sse import aconnect_sse

    async with httpx.AsyncClient(timeout=None) as client:
        init = await client.post(url, json=_INIT, headers=HEADERS)
        headers = {**HEADERS, "mcp-session-id": init.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-11-25"}
        await client.post(url, json=_INITIALIZED, headers=headers)
        seen = 0
        started = time.perf_counter()
        async with aconnect_sse(client, "POST", url, json=_call(count), headers=headers) as source:
            async for event in source.aiter_sse():
                message = json.loads(event.data)
                if "id" in message:
                    break
                seen += 1
        return seen, time.perf_counter() - started


async def floor_stdio(count: int) -> tuple[int, float]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *SERVER_MODULE, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env=_stdio_env(), limit=1 << 20)
    assert proc.stdin and proc.stdout
    proc.stdin.write(json.dumps(_INIT).encode() + b"\n" + json.dumps(_INITIALIZED).encode() + b"\n")
    json.loads(await proc.stdout.readline())
    seen = 0
    started = time.perf_counter()
    proc.stdin.write(json.dumps(_call(count)).encode() + b"\n")
    while True:
        message = json.loads(await proc.stdout.readline())
        if "id" in message:
            break
        seen += 1
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    await proc.wait()
    return seen, elapsed


async def sdk(transport: str, url: str | None, count: int) -> tuple[int, float]:
    from mcp import Client, StdioServerParameters

    seen = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal seen
        seen += 1

    target: Any = url if transport == "http" else StdioServerParameters(
        command=sys.executable, args=SERVER_MODULE, env=_stdio_env())
    async with Client(target, mode="legacy") as client:
        started = time.perf_counter()
        await client.call_tool("flood", {"count": count}, progress_callback=on_progress)
        return seen, time.perf_counter() - started


class _FinishListener:
    """Counts what the engine shows and wakes the benchmark when the operation ends."""

    def __init__(self) -> None:
        self.finished = asyncio.Event()
        self.shown = 0

    def operation_changed(self, op: Any) -> None:
        self.shown += 1
        if not op.in_flight:
            self.finished.set()

    def operation_event(self, op_id: str, kind: str, data: dict) -> None: ...
    def server_changed(self, server: Any) -> None: ...
    def input_requested(self, request: Any) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


async def hostapp_client(transport: str, url: str | None, count: int, home: Path) -> tuple[int, float, dict]:
    from hostapp.engine.service import Engine
    from hostapp.store.journal import ServerConfig

    if transport == "http":
        cfg = ServerConfig(name="bench", transport="http", url=url)
    else:
        cfg = ServerConfig(name="bench", transport="stdio", command=sys.executable, args=list(SERVER_MODULE),
                           env={"PYTHONPATH": str(REPO)})
    listener = _FinishListener()
    engine = Engine(home, listener)
    await engine.start()
    await engine.add_server(cfg)
    await engine.connected("bench")
    try:
        started = time.perf_counter()
        view = await engine.start_call("bench", "flood", {"count": count})
        await listener.finished.wait()
        await engine.journal.flush()
        elapsed = time.perf_counter() - started
        record = engine.journal.get_operation(view.id)
        stats = engine.journal.stats
        extra = {"status": record.status, "journaled_progress": record.progress, "shown": listener.shown,
                 "journal": {"batches": stats.batches, "durable_batches": stats.durable_batches,
                             "rows_written": stats.rows_written, "progress_received": stats.progress_received}}
        seen = int(record.progress or 0) if record.status == "completed" else 0
        return seen, elapsed, extra
    finally:
        await engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description="one client of the progress-intake benchmark")
    parser.add_argument("client", choices=["floor", "sdk", "hostapp"])
    parser.add_argument("transport", choices=["http", "stdio"])
    parser.add_argument("count", type=int)
    parser.add_argument("--url")
    parser.add_argument("--home", type=Path, help="hostapp's home (default: a fresh scratch directory)")
    args = parser.parse_args()
    extra: dict = {}
    if args.client == "floor":
        coro = floor_http(args.url, args.count) if args.transport == "http" else floor_stdio(args.count)
        seen, seconds = asyncio.run(coro)
    elif args.client == "sdk":
        seen, seconds = asyncio.run(sdk(args.transport, args.url, args.count))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-home-") as scratch:
            home = args.home or Path(scratch)
            seen, seconds, extra = asyncio.run(hostapp_client(args.transport, args.url, args.count, home))
    print(json.dumps({"client": args.client, "transport": args.transport, "count": args.count,
                      "received": seen, "seconds": seconds, "per_second": seen / seconds if seconds else 0.0,
                      **extra}), flush=True)


if __name__ == "__main__":
    main()
