"""The benchmarks again, through the background agent and its socket.

The same work as the in-process measurements, with the engine in a ``hostapp agent``
process of its own and the measuring process its client (``RemoteEngine`` over the home's
Unix socket), so what is measured is what a client sees:

intake   ``python -m bench.agent_probe intake TRANSPORT COUNT [--url URL]``: the flood call
         started by a client; from ``start_call`` until the client holds the terminal view.
         The client counts the operation views it received (the agent coalesces progress
         to at most ~30 a second per client) and the last progress among them.
load     ``python -m bench.agent_probe load --home H --operations N --seconds S``: the real
         window (offscreen) as the agent's client, with N operations in flight in the
         agent at 10 updates a second each: the window's event loop lag, its repaints,
         the views it received, and the CPU of both processes.
list     ``python -m bench.agent_probe list --home H``: a prepared home, the real window
         (offscreen) built and shown, then started as the app starts it (its agent link
         starts the agent): from the agent's process start until the window's model has a
         row for every unfinished operation (the agent serves the list from its journal
         while its engine still starts).
resume   ``python -m bench.agent_probe resume --home H --t0 EPOCH``: a prepared home
         (:mod:`bench.resume_probe`) started as the agent, a client connected at once:
         from the agent's process start until the client lists every unfinished
         operation, and until each one shows news from its server at the client (a
         progress beyond the journal's before the start, another message, or its end).

Each prints one JSON line, as :mod:`bench.intake_client` and :mod:`bench.window_probe` do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]


def process_cpu_seconds(pid: int) -> float:
    """The CPU seconds (user and system) process ``pid`` has used, from its /proc entry."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Agent:
    """``hostapp agent`` on ``home`` for one measurement; ``cpu_seconds`` reads its /proc."""

    def __init__(self, home: Path) -> None:
        self.home = home
        # BENCH_AGENT_PROFILE: write the agent's cProfile statistics to that file.
        profile = os.environ.get("BENCH_AGENT_PROFILE")
        env = {**os.environ, "HOSTAPP_HOME": str(home), "PYTHONPATH": str(REPO)}
        profiling = ["-m", "cProfile", "-o", profile] if profile else []
        self.started_at = time.time()
        self.proc = subprocess.Popen([sys.executable, *profiling, "-m", "hostapp", "agent", "--home", str(home),
                                      "--idle-exit", "120"], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    async def connect(self, listener: Any, client: str) -> Any:
        from hostapp.agent.client import AgentUnavailable, RemoteEngine
        from hostapp.agent.endpoint import endpoint_path

        deadline = time.monotonic() + 60
        while True:
            try:
                return await RemoteEngine.connect(endpoint_path(self.home), listener, client=client)
            except AgentUnavailable:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise
                await asyncio.sleep(0.05)

    def cpu_seconds(self) -> float:
        return process_cpu_seconds(self.proc.pid)

    async def stop(self, engine: Any) -> None:
        try:
            await engine.call_raw("agent.stop")
        finally:
            await engine.close()
        try:
            await asyncio.to_thread(self.proc.wait, 60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class _Views:
    """The client's listener: counts the views it receives, wakes on the terminal one."""

    def __init__(self) -> None:
        self.views = 0
        self.in_flight_at: list[float] = []
        self.last: Any = None
        self.finished = asyncio.Event()

    def operation_changed(self, op: Any) -> None:
        self.views += 1
        self.last = op
        if op.in_flight:
            self.in_flight_at.append(time.perf_counter())
        else:
            self.finished.set()

    def busiest_second(self) -> int:
        """The most in-flight views within any one second (the coalescing's promise: ~30)."""
        best, first = 0, 0
        for last, at in enumerate(self.in_flight_at):
            while at - self.in_flight_at[first] >= 1.0:
                first += 1
            best = max(best, last - first + 1)
        return best

    def operation_event(self, op_id: str, kind: str, data: dict) -> None: ...
    def server_changed(self, server: Any) -> None: ...
    def input_requested(self, request: Any) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


async def intake(transport: str, url: str | None, count: int, home: Path) -> dict[str, Any]:
    from bench.intake_client import SERVER_MODULE
    from hostapp.engine import api

    if transport == "http":
        cfg = api.ServerConfig(name="bench", transport="http", url=url)
    else:
        cfg = api.ServerConfig(name="bench", transport="stdio", command=sys.executable, args=list(SERVER_MODULE),
                               env={"PYTHONPATH": str(REPO)})
    agent = Agent(home)
    listener = _Views()
    engine = await agent.connect(listener, "bench")
    try:
        await engine.add_server(cfg)
        await engine.wait_connected("bench", timeout=60)
        started = time.perf_counter()
        await engine.start_call("bench", "flood", {"count": count})
        await listener.finished.wait()
        elapsed = time.perf_counter() - started
    finally:
        await agent.stop(engine)
    final = listener.last
    seen = int(final.progress or 0) if final.status == "completed" else 0
    return {"client": "agent", "transport": transport, "count": count, "received": seen, "seconds": elapsed,
            "per_second": seen / elapsed if elapsed else 0.0, "status": final.status, "views": listener.views,
            "max_views_in_a_second": listener.busiest_second()}


def load(home: Path, operations: int, seconds: float, interval: float = 0.1, bulk: int = 1) -> dict[str, Any]:
    from bench.window_probe import LagMeter, PaintCounter, memory, run_in_qt, start_calls
    from hostapp.app import FIRST_RUN_KEY
    from hostapp.engine import api

    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.app import HostApp

        agent = Agent(home)
        remote = await agent.connect(None, "window")
        # The built-in lab the first run adds is not part of this load.
        host = HostApp(home, remote)
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.resize(1200, 800)
        host.window.show()
        await host.start()
        await remote.add_server(api.ServerConfig(name="flood", transport="stdio", command=sys.executable,
                                                 args=["-m", "bench.progress_server", "--stdio"],
                                                 env={"PYTHONPATH": str(REPO)}))
        await remote.wait_connected("flood", timeout=60)
        shown = 0
        progress: dict[str, float | None] = {}
        forward = host.signals.operation_changed

        def counting(op: Any) -> None:
            nonlocal shown
            shown += 1
            progress[op.id] = op.progress
            forward(op)

        host.signals.operation_changed = counting  # type: ignore[method-assign]
        # In flight through the whole measurement, however long starting them all takes
        # (they end when the probe stops).
        steps = int((4 * seconds + 600) / interval)
        started_at = time.perf_counter()
        ids = await start_calls(lambda: remote.start_call("flood", "flood", {"count": steps, "interval": interval}),
                                operations, bulk)
        start_seconds = time.perf_counter() - started_at
        while any(progress.get(i) is None for i in ids):
            await asyncio.sleep(0.05)
        await asyncio.sleep(2 * interval)
        lag = LagMeter()
        paints = PaintCounter(host.window.ops_table.viewport())
        shown_before, cpu_before, wall_before = shown, time.process_time(), time.perf_counter()
        agent_before = agent.cpu_seconds()
        lag.start()
        await asyncio.sleep(seconds)
        lag.stop()
        wall = time.perf_counter() - wall_before
        result = {
            **lag.summary(),
            "repaints_per_s": paints.count / wall,
            "cpu_percent": 100 * (time.process_time() - cpu_before) / wall,
            "agent_cpu_percent": 100 * (agent.cpu_seconds() - agent_before) / wall,
            "updates_per_s": (shown - shown_before) / wall,
            "start_calls_s": start_seconds, "interval_s": interval,
            "in_flight": sum(1 for i in ids if host.window.ops_model.row_of(i) is not None
                             and host.window.ops_model.row_of(i) < host.window.ops_model.live_count),
            "table_rows": host.window.ops_model.rowCount(),
            **memory(),
        }
        # The window leaves first; stopping the agent ends the calls (one by one, each
        # cancel would move its row in the window: minutes at 10,000).
        await host.shutdown(stop_loop=False)
        stopper = await agent.connect(None, "bench")
        await agent.stop(stopper)
        return result

    return run_in_qt(scenario)


class _FirstNews(_Views):
    """When each expected operation first showed news from its server at the client: a
    progress beyond what the journal held before the start, another status message, or
    its end."""

    def __init__(self, before: dict[str, tuple[float, str | None]]) -> None:
        super().__init__()
        self.before = before
        self.changed: dict[str, float] = {}
        self.all_changed = asyncio.Event()

    def operation_changed(self, op: Any) -> None:
        if op.id not in self.before or op.id in self.changed:
            return
        progress, message = self.before[op.id]
        if not op.in_flight or (op.progress is not None and op.progress > progress) or op.message != message:
            self.changed[op.id] = time.time()
            if len(self.changed) == len(self.before):
                self.all_changed.set()


def _unfinished_progress(home: Path) -> dict[str, tuple[float, str | None]]:
    """Each unfinished operation's progress and message as the journal holds them on disk."""
    import sqlite3

    from hostapp.store.paths import journal_path

    with sqlite3.connect(f"file:{journal_path(home)}?mode=ro", uri=True) as db:
        return {row[0]: (row[1] or 0.0, row[2])
                for row in db.execute("SELECT id, progress, message FROM operations WHERE in_flight = 1")}


def _mechanism_of(home: Path) -> dict[str, str]:
    """Each operation's mechanism, as the journal says."""
    import sqlite3

    from hostapp.store.paths import journal_path

    with sqlite3.connect(f"file:{journal_path(home)}?mode=ro", uri=True) as db:
        return {op_id: mechanism or "?" for op_id, mechanism in db.execute("SELECT id, mechanism FROM operations")}


def _mechanisms(mechanism_of: dict[str, str], ids: set[str]) -> dict[str, int]:
    """How many of ``ids`` each mechanism carries (``mechanism_of``: :func:`_mechanism_of`)."""
    counts: dict[str, int] = {}
    for op_id, mechanism in mechanism_of.items():
        if op_id in ids:
            counts[mechanism] = counts.get(mechanism, 0) + 1
    return counts


async def resume(home: Path, t0: float, timeout: float) -> dict[str, Any]:
    import statistics

    before = _unfinished_progress(home)
    # An asynchronous tool's status polls bring neither progress nor a message to its view
    # (seen on the lab), so no client can tell it re-attached before it ends: left out.
    mechanism_of = _mechanism_of(home)
    unwatched = {i for i, m in mechanism_of.items() if m == "async_tool" and i in before}
    before = {i: v for i, v in before.items() if i not in unwatched}
    expected = set(before)
    agent = Agent(home)
    listener = _FirstNews(before)
    engine = await agent.connect(listener, "bench")
    answered = time.time() - t0
    listed = {op.id for op in await engine.unfinished_operations()}
    shown = time.time() - t0
    try:
        await asyncio.wait_for(listener.all_changed.wait(), timeout)
    except TimeoutError:
        pass
    finally:
        await agent.stop(engine)
    times = sorted(at - t0 for at in listener.changed.values())
    by_mechanism: dict[str, list[float]] = {}
    for op_id, at in listener.changed.items():
        by_mechanism.setdefault(mechanism_of.get(op_id, "?"), []).append(at - t0)
    return {"operations": len(expected) + len(unwatched), "watched": len(expected),
            "listed": len(listed & (expected | unwatched)), "answered_s": answered, "shown_s": shown,
            "attached": len(times), "all_attached_s": times[-1] if len(times) == len(expected) and times else None,
            "median_attached_s": statistics.median(times) if times else None,
            "not_attached": _mechanisms(mechanism_of, expected - set(listener.changed)),
            "left_out": _mechanisms(mechanism_of, unwatched),
            # Per mechanism: (median, last) seconds to news.
            "by_mechanism": {name: (round(statistics.median(values), 2), round(max(values), 2))
                             for name, values in sorted(by_mechanism.items())}}


def listing(home: Path, timeout: float) -> dict[str, Any]:
    """The list after a restart: a prepared home, the real window (offscreen) built and
    shown first, then started as ``main.py`` starts it: its agent link starts the agent
    and connects. From the agent's process start until the window's model holds a row for
    every operation the journal has in flight. (The window is built before the agent
    starts, as in the app; ``window_built_s`` says how long that took.)"""
    in_journal = set(_unfinished_progress(home))

    async def scenario(app: Any) -> dict[str, Any]:
        from bench.window_probe import memory
        from hostapp.app import FIRST_RUN_KEY, HostApp
        from hostapp.ui.agent_link import AgentLink

        agents: list[Agent] = []
        connected: list[float] = []

        async def connect(position: Any) -> Any:
            if not agents:
                agents.append(Agent(home))
            remote = await agents[0].connect(None, "window")
            connected.append(time.time())
            return remote

        link = AgentLink(connect)
        reads: list[tuple[float, float, int]] = []  # the window's list reads: asked, answered, rows
        forward = link.forward

        async def timed_forward(method: str, arguments: Any) -> Any:
            asked = time.time()
            answer = await forward(method, arguments)
            if method == "operations" and agents:
                t0 = agents[0].started_at
                reads.append((round(asked - t0, 3), round(time.time() - t0, 3), len(answer)))
            return answer

        link.forward = timed_forward  # type: ignore[method-assign]
        building = time.time()
        host = HostApp(home, link)
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.show()
        built = time.time() - building
        model = host.window.ops_model
        starting = asyncio.ensure_future(host.start())
        shown = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if agents and model.rowCount() >= len(in_journal) and all(model.row_of(i) is not None
                                                                      for i in in_journal):
                shown = time.time() - agents[0].started_at
                break
            if starting.done() and starting.exception() is not None:
                break
            await asyncio.sleep(0.005)
        listed = sum(1 for i in in_journal if model.row_of(i) is not None)
        await starting
        t0 = agents[0].started_at
        result = {"operations": len(in_journal), "listed": listed,
                  "connected_s": connected[0] - t0 if connected else None, "shown_s": shown,
                  "reads": reads, "window_built_s": built, "window_started_s": time.time() - t0, **memory()}
        await host.shutdown(stop_loop=False)
        stopper = await agents[0].connect(None, "bench")
        await agents[0].stop(stopper)
        return result

    from bench.window_probe import run_in_qt

    return run_in_qt(scenario)


def main() -> None:
    parser = argparse.ArgumentParser(description="a benchmark through the background agent")
    parser.add_argument("mode", choices=["intake", "load", "resume", "list"])
    parser.add_argument("transport", nargs="?", choices=["http", "stdio"])
    parser.add_argument("count", nargs="?", type=int)
    parser.add_argument("--url")
    parser.add_argument("--home", type=Path)
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.1,
                        help="seconds between two progress notifications of one operation (load)")
    parser.add_argument("--bulk", type=int, default=1, help="calls started at once (load)")
    parser.add_argument("--t0", type=float)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as scratch:
        home = args.home or Path(scratch)
        os.environ["HOSTAPP_HOME"] = str(home)
        if args.mode == "intake":
            result = asyncio.run(intake(args.transport, args.url, args.count, home))
        elif args.mode == "resume":
            result = asyncio.run(resume(home, args.t0 or time.time(), args.timeout))
        elif args.mode == "list":
            result = {"mode": "agent-list", **listing(home, args.timeout)}
        else:
            result = {"mode": "agent-load", **load(home, args.operations, args.seconds, args.interval, args.bulk)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
