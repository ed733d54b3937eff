"""The window's benchmarks, each probe in a fresh process on the offscreen Qt platform.

``python -m bench.window_probe MODE --t0 EPOCH [...]`` prints one JSON line. MODE is:

bare   the baseline: a plain QWidget in a QApplication, shown; time to its first paint
       and its memory;
cold   the real window (``hostapp.app.HostApp``) on a fresh home, as on a first launch
       (the built-in lab server configured and connected): time to the first paint and
       until the window is filled;
load   the real window over a journal with ``--history`` finished operations, with
       ``--operations`` operations in flight on a real stdio server that sends each one
       progress every 0.1 s (10 updates a second each): the event loop's lag (a 10 ms
       timer's lateness), the operations table's repaint rate, CPU use, and memory.

rows   the operations model alone (no window, no engine) told what the agent tells it when
       ``--operations`` calls start ``--bulk`` at a time while those started report
       progress (each batch as the window's adapter hands it on: a call started, a call
       moved, in turn), then every one reports progress once more: each batch's time (what
       it holds the event loop for);

repaint the real window over a journal with ``--history`` finished operations (in process),
       1200 x 800: the time of one repaint of the operations table (60 of them, median and
       least), what every scroll and every batch of changes costs the window.

``--t0`` is the wall clock just before the parent started this process, so start-up
times include the interpreter's own start.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

REPO = Path(__file__).resolve().parents[1]
LAG_INTERVAL_MS = 10
PROGRESS_INTERVAL = 0.1


def memory() -> dict[str, float]:
    """Resident memory now and at its peak, in MB (Linux /proc)."""
    values: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return {"rss_mb": values.get("VmRSS", 0.0), "peak_rss_mb": values.get("VmHWM", 0.0)}


def seed_history(home: Path, count: int) -> None:
    """``count`` finished operations in the journal, written as one copied row (fast)."""
    from hostapp.engine import api
    from hostapp.store.journal import OperationJournal, OperationRecord
    from hostapp.store.paths import journal_path

    journal = OperationJournal(journal_path(home))
    now = time.time()
    journal.create_operation_sync(OperationRecord(
        id="template", server="flood", method="tools/call", params={"name": "flood", "arguments": {"count": 3}},
        tool="flood", status=api.PENDING, created_at=now - 10, updated_at=now - 10))
    journal.update_operation_sync("template", status=api.RUNNING)
    journal.finish_operation_sync("template", api.COMPLETED, result={"content": [{"type": "text", "text": "ok"}]})
    journal.close()
    db = sqlite3.connect(journal_path(home))
    columns = [row[1] for row in db.execute("PRAGMA table_info(operations)")]
    chosen = ", ".join("printf('h%07d', n)" if c == "id" else "created_at - n" if c == "created_at" else c
                       for c in columns)
    db.execute(f"WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < {count - 1}) "
               f"INSERT INTO operations ({', '.join(columns)}) SELECT {chosen} FROM operations, seq "
               f"WHERE id = 'template'")
    db.commit()
    db.close()


class FirstPaint:
    """Notes when any widget of the application is first painted."""

    def __init__(self, app: Any) -> None:
        from PySide6.QtCore import QEvent, QObject

        probe = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                if event.type() == QEvent.Type.Paint and probe.at is None:
                    probe.at = time.time()
                return False

        self.at: float | None = None
        self.filter = Filter()
        app.installEventFilter(self.filter)

    async def wait(self) -> float:
        while self.at is None:
            await asyncio.sleep(0.001)
        return self.at


class LagMeter:
    """A single-shot timer re-armed every time it fires; its lateness is the loop's lag."""

    def __init__(self, interval_ms: int = LAG_INTERVAL_MS) -> None:
        from PySide6.QtCore import Qt, QTimer

        self.interval = interval_ms / 1000
        self.lags: list[float] = []
        self.timer = QTimer()
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.setSingleShot(True)
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._fired)
        self.armed = 0.0

    def start(self) -> None:
        self.lags.clear()
        self.armed = time.perf_counter()
        self.timer.start()

    def stop(self) -> None:
        self.timer.stop()

    def _fired(self) -> None:
        now = time.perf_counter()
        self.lags.append(max(0.0, now - self.armed - self.interval))
        self.armed = now
        self.timer.start()

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.lags) or [0.0]

        def pct(p: float) -> float:
            return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000

        return {"lag_p50_ms": pct(0.50), "lag_p99_ms": pct(0.99), "lag_max_ms": ordered[-1] * 1000,
                "lag_samples": len(self.lags)}


class PaintCounter:
    def __init__(self, widget: Any) -> None:
        from PySide6.QtCore import QEvent, QObject

        counter = self

        class Filter(QObject):
            def eventFilter(self, obj: Any, event: Any) -> bool:
                if event.type() == QEvent.Type.Paint:
                    counter.count += 1
                return False

        self.count = 0
        self.filter = Filter()
        widget.installEventFilter(self.filter)


def run_in_qt(scenario: Callable[[Any], Any]) -> dict[str, Any]:
    """Start a QApplication and a qasync loop as the app does, run ``scenario(app)``."""
    from PySide6.QtWidgets import QApplication

    from hostapp.app import blocking_call_executor
    from hostapp.ui.event_loop import HostEventLoop

    app = QApplication.instance() or QApplication([sys.argv[0]])
    app.setQuitOnLastWindowClosed(False)
    loop = HostEventLoop(app)
    loop.set_default_executor(blocking_call_executor())
    asyncio.set_event_loop(loop)
    with loop:
        return loop.run_until_complete(scenario(app))


def bare(t0: float) -> dict[str, Any]:
    async def scenario(app: Any) -> dict[str, Any]:
        from PySide6.QtWidgets import QWidget

        painted = FirstPaint(app)
        widget = QWidget()
        widget.resize(1000, 700)
        widget.show()
        shown = await painted.wait()
        return {"shown_s": shown - t0, **memory()}

    return run_in_qt(scenario)


def cold(t0: float, home: Path) -> dict[str, Any]:
    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.app import HostApp
        from hostapp.engine.facade import LocalEngine
        from hostapp.engine.service import Engine

        painted = FirstPaint(app)
        engine = Engine(home)  # in this process, as the window's own start is measured
        host = HostApp(home, LocalEngine(engine))
        host.window.show()
        await host.start()
        filled = time.time()
        shown = await painted.wait()
        connected = None
        try:
            await engine.connected("lab", timeout=30)
            connected = time.time() - t0
        finally:
            await host.shutdown(stop_loop=False)
        return {"shown_s": shown - t0, "filled_s": filled - t0, "lab_connected_s": connected, **memory()}

    return run_in_qt(scenario)


async def start_calls(start: Callable[[], Any], operations: int, bulk: int) -> list[str]:
    """Start ``operations`` calls, ``bulk`` at a time (1: one after another), as a person's
    script or a batch of calls would; returns their ids in order."""
    ids: list[str] = []
    while len(ids) < operations:
        views = await asyncio.gather(*(start() for _ in range(min(bulk, operations - len(ids)))))
        ids += [view.id for view in views]
    return ids


def load(home: Path, operations: int, history: int, seconds: float, interval: float = PROGRESS_INTERVAL,
         bulk: int = 1) -> dict[str, Any]:
    from hostapp.app import FIRST_RUN_KEY
    from hostapp.store.journal import OperationJournal, ServerConfig
    from hostapp.store.paths import journal_path

    if history:
        seed_history(home, history)
    with OperationJournal(journal_path(home)) as journal:
        journal.add_server(ServerConfig(name="flood", transport="stdio", command=sys.executable,
                                        args=["-m", "bench.progress_server", "--stdio"],
                                        env={"PYTHONPATH": str(REPO)}))

    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.app import HostApp
        from hostapp.engine.facade import LocalEngine
        from hostapp.engine.service import Engine

        engine = Engine(home)  # in this process: the probe counts what it tells the window
        host = HostApp(home, LocalEngine(engine))
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.resize(1200, 800)
        host.window.show()
        await host.start()
        await engine.connected("flood", timeout=30)
        shown = 0
        forward = host.signals.operation_changed

        def counting(op: Any) -> None:
            nonlocal shown
            shown += 1
            forward(op)

        engine.listener = counting_listener = host.signals
        counting_listener.operation_changed = counting  # type: ignore[method-assign]
        # Long enough to stay in flight through the whole measurement.
        # In flight through the whole measurement, however long starting them all takes
        # (they end when the probe stops).
        steps = int((4 * seconds + 600) / interval)
        started_at = time.perf_counter()
        ids = await start_calls(lambda: engine.start_call("flood", "flood", {"count": steps, "interval": interval}),
                                operations, bulk)
        start_seconds = time.perf_counter() - started_at
        while any(engine.runners[i].view.progress is None for i in ids if i in engine.runners):
            await asyncio.sleep(0.05)
        await asyncio.sleep(2 * interval)
        lag = LagMeter()
        paints = PaintCounter(host.window.ops_table.viewport())
        shown_before, cpu_before, wall_before = shown, time.process_time(), time.perf_counter()
        lag.start()
        await asyncio.sleep(seconds)
        lag.stop()
        wall = time.perf_counter() - wall_before
        result = {
            **lag.summary(),
            "repaints_per_s": paints.count / wall,
            "cpu_percent": 100 * (time.process_time() - cpu_before) / wall,
            "updates_per_s": (shown - shown_before) / wall,
            "in_flight": sum(1 for i in ids if i in engine.runners and not engine.runners[i].done),
            "history": history, "start_calls_s": start_seconds, "interval_s": interval,
            "table_rows": host.window.ops_model.rowCount(), "table_total": host.window.ops_model.total,
            **memory(),
        }
        await host.shutdown(stop_loop=False)
        return result

    return run_in_qt(scenario)


def repaint(home: Path, finished: int, times: int = 60) -> dict[str, Any]:
    """Repaints of the operations table (see the module's ``repaint``)."""
    import statistics

    if not any(home.iterdir()):
        seed_history(home, finished)

    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.app import FIRST_RUN_KEY, HostApp
        from hostapp.engine.facade import LocalEngine
        from hostapp.engine.service import Engine

        host = HostApp(home, LocalEngine(Engine(home)))
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.resize(1200, 800)
        host.window.show()
        await host.start()
        for _ in range(10):  # shown, filled, painted
            await asyncio.sleep(0.02)
        viewport = host.window.ops_table.viewport()
        took = []
        for _ in range(times):
            started = time.perf_counter()
            viewport.repaint()
            took.append((time.perf_counter() - started) * 1000)
        shown = host.window.ops_table.rowAt(viewport.height() - 1) - host.window.ops_table.rowAt(0) + 1
        await host.shutdown(stop_loop=False)
        return {"repaint_p50_ms": statistics.median(took), "repaint_min_ms": min(took), "rows_shown": shown}

    return run_in_qt(scenario)


def rows(operations: int, bulk: int) -> dict[str, Any]:
    """The model's own cost as calls start in bulk, and as each of them then moves."""
    from hostapp.engine import api

    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.ui.operations_model import OperationTableModel

        class Empty:
            async def operations(self, *_args: Any, **_kwargs: Any) -> list[Any]:
                return []

            async def count_operations(self, *_args: Any, **_kwargs: Any) -> int:
                return 0

        model = OperationTableModel(Empty())  # type: ignore[arg-type]
        await model.reload()
        now = time.time()

        def view(i: int, **fields: Any) -> api.OperationView:
            return api.OperationView(id=f"op{i:06d}", server="flood", tool="flood", method="tools/call",
                                     arguments={}, status=api.RUNNING, created_at=now + i * 1e-3,
                                     updated_at=now, **fields)

        start_ms: list[float] = []
        rng = random.Random(26)
        for first in range(0, operations, bulk):
            batch = []
            for i in range(first, min(first + bulk, operations)):
                batch.append(view(i))
                if first:
                    batch.append(view(rng.randrange(first), progress=1.0))
            started = time.perf_counter()
            model.apply_changes(batch)
            start_ms.append((time.perf_counter() - started) * 1000)
        step_ms: list[float] = []
        for first in range(0, operations, bulk):
            batch = [view(i, progress=1.0) for i in range(first, min(first + bulk, operations))]
            started = time.perf_counter()
            model.apply_changes(batch)
            step_ms.append((time.perf_counter() - started) * 1000)

        def summary(name: str, ms: list[float]) -> dict[str, float]:
            ordered = sorted(ms)
            return {f"{name}_batch_p50_ms": ordered[len(ordered) // 2],
                    f"{name}_batch_max_ms": ordered[-1], f"{name}_total_s": sum(ms) / 1000}

        return {"operations": operations, "bulk": bulk, "rows": model.rowCount(), **summary("start", start_ms),
                **summary("progress", step_ms)}

    return run_in_qt(scenario)


def history(home: Path, rows: int, pages: int, through_agent: bool) -> dict[str, Any]:
    """The window over a journal of ``rows`` finished operations, scrolled down ``pages``
    pages as a person dragging the scroll bar to its end, then back up to the top: each
    page's time (from the scroll to its rows in the table), the event loop's lag meanwhile,
    and memory. ``through_agent``: the window as the agent's client (the product's path)."""
    from hostapp.app import FIRST_RUN_KEY
    from hostapp.store.paths import journal_path

    seeding = time.perf_counter()
    seed_history(home, rows)
    seed_seconds = time.perf_counter() - seeding

    async def scenario(app: Any) -> dict[str, Any]:
        from hostapp.app import HostApp

        agent = remote = None
        if through_agent:
            from bench.agent_probe import Agent

            agent = Agent(home)
            remote = await agent.connect(None, "window")
        if remote is None:
            from hostapp.engine.facade import LocalEngine
            from hostapp.engine.service import Engine

            host = HostApp(home, LocalEngine(Engine(home)))
        else:
            host = HostApp(home, remote)
        host.settings.setValue(FIRST_RUN_KEY, True)
        host.window.resize(1200, 800)
        host.window.show()
        await host.start()
        model, bar = host.window.ops_model, host.window.ops_table.verticalScrollBar()
        arrived = asyncio.Event()
        model.rowsInserted.connect(lambda *_a: arrived.set())
        lag = LagMeter()
        lag.start()
        page_ms: list[float] = []
        peak_rows = 0

        async def one_page(to_end: Callable[[], int], more: Callable[[], bool], off: int) -> bool:
            nonlocal peak_rows
            while model._loading:
                await asyncio.sleep(0.001)
            arrived.clear()
            started = time.perf_counter()
            bar.setValue(to_end())  # at the end, the view asks for the next page itself
            if not model._loading and not arrived.is_set():
                if not more():
                    return False
                bar.setValue(to_end() + off)  # already at the end: scroll off it and back
                bar.setValue(to_end())
            deadline = time.perf_counter() + 30
            while not arrived.is_set() and (model._loading or more()):  # (the last read may bring none)
                if time.perf_counter() > deadline:
                    raise TimeoutError("no page came")
                await asyncio.sleep(0.0005)
            if not arrived.is_set():
                return False
            page_ms.append((time.perf_counter() - started) * 1000)
            peak_rows = max(peak_rows, model.rowCount())
            return True

        for _ in range(pages):
            if not await one_page(bar.maximum, model.canFetchMore, -1):
                break
        down = len(page_ms)
        older_reads = model.fetch_next_page
        reads_down_while_up = 0

        async def counted() -> int:
            nonlocal reads_down_while_up
            reads_down_while_up += 1
            return await older_reads()

        model.fetch_next_page = counted  # type: ignore[method-assign]
        while len(page_ms) < 3 * down + 10 and await one_page(bar.minimum, lambda: model.history_cut_above, 1):
            pass
        lag.stop()
        ordered = sorted(page_ms[:down]) or [0.0]  # the pages down (going up, see the notes)
        result = {
            "rows": rows, "pages_down": down, "pages_up": len(page_ms) - down,
            "page_p50_ms": ordered[len(ordered) // 2], "page_p99_ms": ordered[min(len(ordered) - 1,
                                                                                  int(0.99 * len(ordered)))],
            "page_max_ms": ordered[-1], **lag.summary(), "peak_table_rows": peak_rows,
            "older_pages_read_while_going_up": reads_down_while_up,
            "top_is_newest": model.operation(0) is not None and model.operation(0).id == "template",
            **memory(),
        }
        await host.shutdown(stop_loop=False)
        if agent is not None:
            stopper = await agent.connect(None, "bench")
            await agent.stop(stopper)
        return result

    result = run_in_qt(scenario)
    # One page by key and one by offset, deep in the history, from the journal file alone.
    db = sqlite3.connect(journal_path(home))
    deep = rows - 10_000
    key = db.execute("SELECT created_at, id FROM operations ORDER BY created_at DESC, id DESC LIMIT 1 OFFSET ?",
                     (deep,)).fetchone()
    timings = {}
    for name, sql, args in (
            ("by_key", "SELECT * FROM operations WHERE status IN ('completed', 'failed', 'cancelled', 'expired', "
                       "'unknown') AND (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT 200", key),
            ("by_offset", "SELECT * FROM operations WHERE status IN ('completed', 'failed', 'cancelled', "
                          "'expired', 'unknown') ORDER BY created_at DESC, id DESC LIMIT 200 OFFSET ?", (deep,))):
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            db.execute(sql, args).fetchall()
            runs.append((time.perf_counter() - started) * 1000)
        timings[f"deep_page_{name}_ms"] = min(runs)
    db.close()
    return {**result, **timings, "deep_row": deep, "seeded_s": seed_seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description="one probe of the window benchmarks")
    parser.add_argument("mode", choices=["bare", "cold", "load", "history", "rows", "repaint"])
    parser.add_argument("--t0", type=float, default=None)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--operations", type=int, default=1000)
    parser.add_argument("--history", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=PROGRESS_INTERVAL,
                        help="seconds between two progress notifications of one operation")
    parser.add_argument("--bulk", type=int, default=1, help="calls started at once")
    parser.add_argument("--pages", type=int, default=500, help="history: pages scrolled down, then back up")
    parser.add_argument("--agent", action="store_true", help="history: the window as the agent's client")
    args = parser.parse_args()
    t0 = args.t0 or time.time()
    if args.mode == "bare":
        result = bare(t0)
    elif args.mode == "rows":
        result = rows(args.operations, args.bulk)
    else:
        home = args.home
        assert home is not None, "--home is required"
        os.environ["HOSTAPP_HOME"] = str(home)
        if args.mode == "history":
            result = history(home, args.history, args.pages, args.agent)
        elif args.mode == "repaint":
            result = repaint(home, args.history)
        else:
            result = cold(t0, home) if args.mode == "cold" else load(home, args.operations, args.history,
                                                                     args.seconds, args.interval, args.bulk)
    print(json.dumps({"mode": args.mode, **result}), flush=True)


if __name__ == "__main__":
    main()


# -- called by bench/__main__.py ------------------------------------------------------------

def _probe(python: Callable[..., str], *args: str) -> dict[str, Any]:
    out = python("-m", "bench.window_probe", *args, "--t0", repr(time.time()))
    return json.loads(out.strip().splitlines()[-1])


def run_all(sizes: Any, raw: dict[str, Any], python: Callable[..., str]) -> list[Any]:
    """Section 2 (the window under load) and the memory half of section 4."""
    import tempfile

    from bench.__main__ import Row

    with tempfile.TemporaryDirectory(prefix="bench-window-") as home:
        pace = ["--interval", str(sizes.window_interval), "--bulk", str(sizes.window_bulk)]
        loaded = _probe(python, "load", "--home", home, "--operations", str(sizes.window_operations),
                        "--history", str(sizes.history), "--seconds", str(sizes.window_seconds), *pace)
    bare_qt = _probe(python, "bare")
    with tempfile.TemporaryDirectory(prefix="bench-window-agent-") as home:
        # The same load with the engine in the agent and the window its client (bench/agent_probe.py).
        out = python("-m", "bench.agent_probe", "load", "--home", home, "--operations", str(sizes.window_operations),
                     "--seconds", str(sizes.window_seconds), *pace)
        agent = json.loads(out.strip().splitlines()[-1])
    raw["window"] = {"load": loaded, "bare": bare_qt, "agent_load": agent}
    ops = f"{sizes.window_operations:,} in flight at {1 / sizes.window_interval:g} updates/s each"
    return [
        Row("window", f"event loop lag p50 ({ops})", loaded["lag_p50_ms"], "ms"),
        Row("window", "event loop lag p99", loaded["lag_p99_ms"], "ms", None, None, "< 16 ms",
            loaded["lag_p99_ms"] < 16),
        Row("window", "event loop lag max", loaded["lag_max_ms"], "ms"),
        Row("window", "progress updates shown to the window", loaded["updates_per_s"], "updates/s"),
        Row("window", "operations table repaints", loaded["repaints_per_s"], "repaints/s", None, None,
            "<= 30/s (coalesced)", loaded["repaints_per_s"] <= 31),
        Row("window", "CPU use (the host process, all threads)", loaded["cpu_percent"], "% of a core"),
        Row("window", f"memory with {ops} and {sizes.history:,} finished", loaded["rss_mb"], "MB RSS",
            "bare Qt window", loaded["rss_mb"] / bare_qt["rss_mb"], "< 250 MB", loaded["rss_mb"] < 250),
        Row("window", "agent's client: event loop lag p50 (the same load in the agent)", agent["lag_p50_ms"], "ms",
            "in process", _ratio(agent["lag_p50_ms"], loaded["lag_p50_ms"])),
        Row("window", "agent's client: event loop lag p99", agent["lag_p99_ms"], "ms", "in process",
            _ratio(agent["lag_p99_ms"], loaded["lag_p99_ms"]), "< 16 ms", agent["lag_p99_ms"] < 16),
        Row("window", "agent's client: event loop lag max", agent["lag_max_ms"], "ms", "in process",
            _ratio(agent["lag_max_ms"], loaded["lag_max_ms"])),
        Row("window", "agent's client: operation views received", agent["updates_per_s"], "views/s", "in process",
            _ratio(agent["updates_per_s"], loaded["updates_per_s"])),
        Row("window", "agent's client: operations table repaints", agent["repaints_per_s"], "repaints/s",
            "in process", _ratio(agent["repaints_per_s"], loaded["repaints_per_s"]), "<= 30/s (coalesced)",
            agent["repaints_per_s"] <= 31),
        Row("window", "agent's client: CPU use of the window process", agent["cpu_percent"], "% of a core",
            "in process", _ratio(agent["cpu_percent"], loaded["cpu_percent"])),
        Row("window", "agent's client: CPU use of the agent", agent["agent_cpu_percent"], "% of a core"),
    ]


def _ratio(value: float, baseline: float) -> float | None:
    return value / baseline if baseline else None


def run_startup(sizes: Any, raw: dict[str, Any], python: Callable[..., str]) -> list[Any]:
    """Section 4: cold start to the window shown, against a bare Qt window's."""
    import statistics
    import tempfile

    from bench.__main__ import Row

    runs = 1 if sizes.window_operations < 1000 else 5
    colds, bares = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="bench-cold-") as home:
            colds.append(_probe(python, "cold", "--home", home))
        bares.append(_probe(python, "bare"))
    raw["startup"] = {"cold": colds, "bare": bares}
    shown = statistics.median(c["shown_s"] for c in colds)
    filled = statistics.median(c["filled_s"] for c in colds)
    bare_shown = statistics.median(b["shown_s"] for b in bares)
    connected = [c["lab_connected_s"] for c in colds if c["lab_connected_s"] is not None]
    rows = [
        Row("startup", f"bare Qt window: process start to first paint (median of {runs})", bare_shown * 1000, "ms"),
        Row("startup", "hostapp: process start to the window shown", shown * 1000, "ms", "bare Qt window",
            shown / bare_shown, "< 1 s", shown < 1.0),
        Row("startup", "hostapp: until the window is filled from the journal", filled * 1000, "ms", "bare Qt window",
            filled / bare_shown),
    ]
    if connected:
        rows.append(Row("startup", "hostapp: until the built-in lab server is connected",
                        statistics.median(connected) * 1000, "ms", "bare Qt window",
                        statistics.median(connected) / bare_shown))
    return rows
