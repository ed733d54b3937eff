"""Resume at start-up: a journal of unfinished operations on the lab, re-attached by a new process.

``python -m bench.resume_probe prepare --home H --url U --count N`` starts ``N`` long calls
on the lab server at ``U``, spread over the mechanisms (two server entries for the same
lab: one pinned to 2025-11-25 for tasks and SSE resumption, one at the newest revision
for the stateless-era mechanisms), waits until the server holds each one (its handle is
committed and the mechanism says so) and quits with all of them in flight, as a person
closing the window would. The calls are started through the engine, a batch at a time,
and a new engine (a new lifetime of the host) for every thousand of them.

``python -m bench.resume_probe measure --home H --t0 EPOCH`` is the next start of the
host: the real window (offscreen) over that home. It prints the time from process start
until the window lists every unfinished operation, and until every one of them has been
re-attached: something from the server (a status, a progress step, a stream event, an
answer) reached its mechanism after the restart.

Both need the same keyring (the handles' secrets live there): the caller passes its
environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

#: (server entry, tool): one tool per resumable mechanism the engine chooses on the lab
#: without a person's answer: 2025-11-25 tasks, SSE resumption (pinned entry), asynchronous
#: tools and extension tasks (newest revision). The lab's resume-token, stream and
#: resumable-request tools are carried by extension tasks there, so they add nothing.
SPREAD = [("lab25", "long_task"), ("lab25", "long_sse"), ("lab", "long_async"), ("lab", "long_task_ext")]
#: Long enough never to finish during the benchmark; a progress step every half second, so
#: a re-attached stream shows itself soon.
ARGUMENTS = {"seconds": 3600, "steps": 7200}
#: Above this many operations the steps are spread out, so that the lab does the same
#: work per second whatever the count (its tools' progress steps are its own load, not
#: the resumption measured here).
STEPS_FULL_RATE_UP_TO = 1000
#: Calls started together by the preparation.
START_BATCH = 100
#: Calls prepared by one engine (one process lifetime of the host).
PER_ENGINE = 1000


def arguments_for(count: int) -> dict[str, int]:
    """The tool arguments for a journal of ``count`` operations."""
    steps = ARGUMENTS["steps"] * min(1, STEPS_FULL_RATE_UP_TO / max(1, count))
    return {"seconds": ARGUMENTS["seconds"], "steps": max(1, int(steps))}
SERVER_EVENTS = ("on_result", "on_error", "on_notification", "on_stream_event")


class _Quiet:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def operation_changed(self, op: Any) -> None: ...
    def operation_event(self, op_id: str, kind: str, data: dict) -> None: ...
    def server_changed(self, server: Any) -> None: ...
    def input_requested(self, request: Any) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def problem(self, kind: str, message: str) -> None:
        self.problems.append(f"{kind}: {message}")


async def prepare(home: Path, url: str, count: int) -> dict[str, Any]:
    """Start ``count`` calls, a process lifetime (one engine) per PER_ENGINE of them."""
    arguments = arguments_for(count)
    result: dict[str, Any] = {"prepared": 0, "without_handle": 0, "arguments": arguments, "mechanisms": {},
                              "details": [] if os.environ.get("BENCH_DEBUG") else None}
    for first in range(0, count, PER_ENGINE):
        await _prepare_some(home, url, first, min(count, first + PER_ENGINE), arguments, result)
    return result


async def _prepare_some(home: Path, url: str, first: int, end: int, arguments: dict[str, int],
                        result: dict[str, Any]) -> None:
    """Calls ``first`` to ``end`` in one engine. It resumes nothing: the calls of the
    engines before it stay as they were left (the 1-second polls of ten thousand
    operations are more than this machine can send while it starts more)."""
    from hostapp.engine.service import Engine
    from hostapp.store.journal import ServerConfig

    listener = _Quiet()
    engine = Engine(home, listener)
    await engine.start(resume=False)
    if engine.keyring_problem:
        raise SystemExit(f"no keyring: {engine.keyring_problem}")
    if first == 0:
        await engine.add_server(ServerConfig(name="lab25", transport="http", url=url, protocol_version="2025-11-25"))
        await engine.add_server(ServerConfig(name="lab", transport="http", url=url))
    await engine.connected("lab25")
    await engine.connected("lab")
    ids: list[str] = []
    for start in range(first, end, START_BATCH):
        batch = [SPREAD[i % len(SPREAD)] for i in range(start, min(end, start + START_BATCH))]
        views = await asyncio.gather(*(engine.start_call(server, tool, dict(arguments)) for server, tool in batch))
        ids += [view.id for view in views]
    deadline = time.monotonic() + 60 + len(ids) / 20
    journal = engine.journal
    waiting = ids
    while time.monotonic() < deadline:
        await journal.flush()
        waiting = [i for i in waiting if not _held(journal.get_operation(i))]
        if not waiting:
            break
        await asyncio.sleep(0.5)
    mechanisms = result["mechanisms"]
    for i in ids:
        record = journal.get_operation(i)
        mechanisms[record.mechanism or "?"] = mechanisms.get(record.mechanism or "?", 0) + 1
        if result["details"] is not None:
            result["details"].append((record.tool, record.mechanism, record.status, bool(record.handle_ref),
                                      sorted(record.handle)))
    result["prepared"] += len(ids)
    result["without_handle"] += len(waiting)
    await engine.stop()
    if listener.problems:
        result.setdefault("problems", []).extend(sorted(set(listener.problems)))


def _unfinished_ids(home: Path) -> set[str]:
    """The ids of the journal's unfinished operations, read as they are on disk."""
    import sqlite3

    from hostapp.store.paths import journal_path

    with sqlite3.connect(f"file:{journal_path(home)}?mode=ro", uri=True) as db:
        return {row[0] for row in db.execute("SELECT id FROM operations WHERE in_flight = 1")}


def _held(record: Any) -> bool:
    """Does the server hold this operation (a handle committed, the mechanism past sending)?"""
    return bool(record.handle_ref) and (record.handle or {}).get("phase") == "held"


def _watch_mechanisms(runners: dict[str, Any], attached: dict[str, float]) -> None:
    """Note, per operation, when the first thing from its server reaches its mechanism."""
    owner = {id(r.mech): r.id for r in runners.values()}
    for cls in {type(r.mech) for r in runners.values()}:
        for name in SERVER_EVENTS:
            original = getattr(cls, name, None)
            if original is None or getattr(original, "_bench_watched", False):
                continue

            def watched(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
                op_id = owner.get(id(self))
                if op_id is not None and op_id not in attached:
                    attached[op_id] = time.time()
                return __original(self, *args, **kwargs)

            watched._bench_watched = True  # type: ignore[attr-defined]
            setattr(cls, name, watched)


def _last_by_mechanism(engine: Any, attached: dict[str, float], t0: float) -> dict[str, float]:
    last: dict[str, float] = {}
    for op_id, at in attached.items():
        runner = engine.runners.get(op_id)
        name = runner.mech.name if runner is not None else "ended"
        last[name] = round(max(last.get(name, 0.0), at - t0), 3)
    return last


def _ended_statuses(engine: Any, expected: set[str]) -> dict[str, int]:
    ended: dict[str, int] = {}
    for op_id in expected - set(engine.runners):
        status = engine.journal.get_operation(op_id).status
        ended[status] = ended.get(status, 0) + 1
    return ended


def measure(home: Path, t0: float, timeout: float) -> dict[str, Any]:
    from PySide6.QtWidgets import QApplication

    from hostapp.app import blocking_call_executor
    from hostapp.ui.event_loop import HostEventLoop

    os.environ["HOSTAPP_HOME"] = str(home)
    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setQuitOnLastWindowClosed(False)
    loop = HostEventLoop(app)  # as hostapp.app.main sets it up
    loop.set_default_executor(blocking_call_executor())
    asyncio.set_event_loop(loop)

    async def scenario() -> dict[str, Any]:
        from hostapp.app import FIRST_RUN_KEY, HostApp
        from hostapp.engine.facade import LocalEngine
        from hostapp.engine.service import Engine

        engine = Engine(home)  # in this process: the probe watches its runners
        host = HostApp(home, LocalEngine(engine))
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.show()
        attached: dict[str, float] = {}
        original_start = engine.start

        async def start(**kwargs: Any) -> None:
            await original_start(**kwargs)
            _watch_mechanisms(engine.runners, attached)

        engine.start = start  # type: ignore[method-assign]
        in_journal = _unfinished_ids(home)
        model = host.window.ops_model
        shown_at = None
        # The window may list the operations before the engine has started: watch it
        # from the beginning.
        starting = asyncio.ensure_future(host.start())
        while not starting.done():
            if shown_at is None and all(model.row_of(i) is not None for i in in_journal):
                shown_at = time.time()
            await asyncio.sleep(0.005)
        await starting
        started_at = time.time()
        expected = set(engine.runners)
        deadline = time.monotonic() + timeout
        ended_uncontacted: set[str] = set()
        while time.monotonic() < deadline:
            if shown_at is None and all(model.row_of(i) is not None for i in expected):
                shown_at = time.time()
            # One that ended without a word from its server (e.g. "unknown": no handle was
            # committed before the quit) has nothing to re-attach.
            ended_uncontacted = {i for i in expected - set(attached) if i not in engine.runners}
            if shown_at is not None and expected - ended_uncontacted <= set(attached):
                break
            await asyncio.sleep(0.005)
        live = expected - ended_uncontacted
        result = {
            "operations": len(expected),
            "shown_s": (shown_at - t0) if shown_at else None,
            "ended_without_contact": len(ended_uncontacted),
            "attached": len(live & set(attached)),
            "all_attached_s": (max(attached[i] for i in live) - t0) if live and live <= set(attached) else None,
            "engine_started_s": started_at - t0,
            "first_attached_s": (min(attached.values()) - t0) if attached else None,
            "median_attached_s": (sorted(attached.values())[len(attached) // 2] - t0) if attached else None,
            # per mechanism: when its last operation was re-attached
            "all_attached_s_by_mechanism": _last_by_mechanism(engine, attached, t0),
            "statuses": {},
            "not_attached": {},
            # how the operations that ended during this run ended (e.g. "unknown": lost)
            "ended": _ended_statuses(engine, expected),
        }
        for i in live - set(attached):
            mech = engine.runners[i].mech.name if i in engine.runners else "?"
            result["not_attached"][mech] = result["not_attached"].get(mech, 0) + 1
            if os.environ.get("BENCH_DEBUG") and i in engine.runners:
                r = engine.runners[i]
                print("DEBUG", i, r.view.status, r.view.message, r.mech.phase, r.session, r._tasks,
                      getattr(r.mech, "accepted", None), file=sys.stderr)
        for runner in engine.runners.values():
            result["statuses"][runner.view.status] = result["statuses"].get(runner.view.status, 0) + 1
        await host.shutdown(stop_loop=False)
        return result

    with loop:
        return loop.run_until_complete(scenario())


def main() -> None:
    parser = argparse.ArgumentParser(description="the resume-at-start-up benchmark's two halves")
    parser.add_argument("mode", choices=["prepare", "measure"])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--url")
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--t0", type=float)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    os.environ["HOSTAPP_HOME"] = str(args.home)
    if args.mode == "prepare":
        result = asyncio.run(prepare(args.home, args.url, args.count))
    else:
        result = measure(args.home, args.t0 or time.time(), args.timeout)
    print(json.dumps({"mode": args.mode, **result}), flush=True)


if __name__ == "__main__":
    main()
