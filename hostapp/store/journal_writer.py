"""The journal's writer thread: the only writing connection, one transaction per batch.

Two kinds of write reach it through one queue, so they land in the order they were made:

* write-ahead writes (:meth:`JournalWriter.write_ahead`): a function run against the
  database inside the batch's transaction, in a savepoint of its own; the batch is
  committed with ``synchronous=FULL`` and only then is the caller's future resolved;
* hot-path writes (:meth:`JournalWriter.progress`, :meth:`JournalWriter.event`):
  fire-and-forget; gathered for about ``interval`` seconds, only the newest progress per
  operation kept, committed with ``synchronous=NORMAL`` (a process crash loses nothing
  committed; a power cut may lose the last progress values, never an operation).

A barrier (:meth:`JournalWriter.barrier`) resolves once everything queued before it is
committed; the one made with ``stop=True`` ends the thread.

The queries that decide what to write are in :mod:`hostapp.store.journal`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import sqlite_utils

from hostapp.store.journal_schema import write_transaction

log = logging.getLogger("hostapp.store.journal")

#: A write-ahead write: run against the writing database, its return value is the
#: future's result.
WriteFunction: TypeAlias = Callable[[sqlite_utils.Database], Any]

_PROGRESS = "progress"
_EVENT = "event"
# Hot-path items stay plain tuples: thousands a second go through the queue.
#: ("progress", op_id, progress, total, message, at)
_ProgressItem: TypeAlias = tuple[str, str, float | None, float | None, str | None, float]
#: ("event", op_id, kind, data as JSON text, at)
_EventItem: TypeAlias = tuple[str, str, str, str | None, float]


@dataclass
class JournalStats:
    """Counters of the writer thread, for tests and the benchmark."""

    batches: int = 0  # committed transactions
    durable_batches: int = 0  # of which committed with synchronous=FULL
    rows_written: int = 0  # rows inserted, updated or deleted
    progress_received: int = 0  # record_progress calls accepted
    events_received: int = 0  # append_event calls accepted
    dropped: int = 0  # hot-path writes after close, or lost to a failed batch


@dataclass
class _WriteAhead:
    apply: WriteFunction
    future: concurrent.futures.Future[Any]


@dataclass
class _Barrier:
    """Resolved once everything queued before it is committed; ``stop`` ends the thread."""

    future: concurrent.futures.Future[None]
    stop: bool = False


_Item: TypeAlias = _ProgressItem | _EventItem | _WriteAhead | _Barrier


class JournalWriter(threading.Thread):
    """The only thread that writes; one transaction per batch of queued writes.

    Responsibilities: gather a batch (:meth:`_gather`: block for one item, then take more
    for up to ``interval`` seconds unless a write-ahead write or a barrier wants to be
    committed now), coalesce progress, commit the batch with the durability it needs, and
    resolve the callers' futures only after the commit. After the stop barrier, anything
    still queued is refused rather than left hanging.
    """

    def __init__(self, db: sqlite_utils.Database, stats: JournalStats, interval: float, max_items: int) -> None:
        super().__init__(name="hostapp-journal-writer", daemon=True)
        self.db = db
        self.stats = stats
        self.interval = interval
        self.max_items = max_items
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._synchronous: str | None = None

    # -- what the journal queues (any thread) -------------------------------------------

    def write_ahead(self, apply: WriteFunction) -> concurrent.futures.Future[Any]:
        """Queue ``apply``; the future resolves to its result once the batch is committed."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put(_WriteAhead(apply, future))
        return future

    def barrier(self, *, stop: bool = False) -> concurrent.futures.Future[None]:
        """A future resolved once everything queued before it is committed."""
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.put(_Barrier(future, stop))
        return future

    def progress(self, op_id: str, progress: float | None, total: float | None, message: str | None,
                 at: float) -> None:
        """Queue a progress value (only the newest per operation and batch is written)."""
        self._queue.put((_PROGRESS, op_id, progress, total, message, at))

    def event(self, op_id: str, kind: str, data_json: str | None, at: float) -> None:
        """Queue one timeline entry, its data already JSON text."""
        self._queue.put((_EVENT, op_id, kind, data_json, at))

    # -- the thread ------------------------------------------------------------------------

    def run(self) -> None:
        stopping = False
        while not stopping:
            batch = self._gather()
            stopping = any(isinstance(item, _Barrier) and item.stop for item in batch)
            self._commit(batch)
        # Anything that slipped in behind the stop request is refused, not left hanging.
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, tuple):
                self.stats.dropped += 1
            elif item.future.set_running_or_notify_cancel():
                item.future.set_exception(RuntimeError("the operation journal is closed"))

    def _gather(self) -> list[_Item]:
        """Block for one item, then collect more until ~interval passed or one must commit now."""
        first = self._queue.get()
        batch = [first]
        urgent = not isinstance(first, tuple)
        deadline = time.monotonic() + self.interval
        while len(batch) < self.max_items:
            try:
                timeout = 0.0 if urgent else deadline - time.monotonic()
                item = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            batch.append(item)
            urgent = urgent or not isinstance(item, tuple)
        return batch

    def _set_synchronous(self, mode: str) -> None:
        if self._synchronous != mode:
            self.db.execute(f"PRAGMA synchronous = {mode}")
            self._synchronous = mode

    def _commit(self, batch: list[_Item]) -> None:
        conn: sqlite3.Connection = self.db.conn
        durable = any(isinstance(item, _WriteAhead) for item in batch)
        outcomes: list[tuple[concurrent.futures.Future[Any], Any, BaseException | None]] = []
        progress: dict[str, _ProgressItem] = {}
        events: list[_EventItem] = []
        changes_before = conn.total_changes

        def write_hot_path() -> None:
            if progress:
                conn.executemany(
                    "UPDATE operations SET progress = ?, total = ?, message = COALESCE(?, message), "
                    "updated_at = ? WHERE id = ? AND in_flight = 1",
                    [(p, t, m, at, op_id) for (_, op_id, p, t, m, at) in progress.values()],
                )
                progress.clear()
            if events:
                conn.executemany(
                    "INSERT INTO events (op_id, at, kind, data) VALUES (?, ?, ?, ?)",
                    [(op_id, at, kind, data) for (_, op_id, kind, data, at) in events],
                )
                events.clear()

        try:
            self._set_synchronous("FULL" if durable else "NORMAL")
            with write_transaction(conn):
                for item in batch:
                    if isinstance(item, tuple):
                        if item[0] == _PROGRESS:
                            value: _ProgressItem = item  # type: ignore[assignment]
                            # Coalesce: only the newest value per operation is written,
                            # with the newest message seen (a value may come without one).
                            earlier = progress.get(value[1])
                            if value[4] is None and earlier is not None and earlier[4] is not None:
                                value = (*value[:4], earlier[4], value[5])
                            progress[value[1]] = value
                        else:
                            events.append(item)  # type: ignore[arg-type]
                    elif isinstance(item, _WriteAhead):
                        if not item.future.set_running_or_notify_cancel():
                            continue  # the caller gave up before the write began
                        # Keep order: earlier progress and events land before this write.
                        write_hot_path()
                        try:
                            with self.db.atomic():  # a savepoint: a failed write undoes only itself
                                outcomes.append((item.future, item.apply(self.db), None))
                        except Exception as exc:  # noqa: BLE001 - handed to the caller
                            outcomes.append((item.future, None, exc))
                    else:
                        write_hot_path()
                        item.future.set_running_or_notify_cancel()
                        outcomes.append((item.future, None, None))
                write_hot_path()
        except Exception as exc:
            log.exception("journal batch of %d writes failed and was rolled back", len(batch))
            self.stats.dropped += sum(1 for item in batch if isinstance(item, tuple))
            for item in batch:
                if isinstance(item, tuple) or item.future.done():
                    continue
                if item.future.running() or item.future.set_running_or_notify_cancel():
                    item.future.set_exception(exc)
            return
        self.stats.batches += 1
        self.stats.durable_batches += int(durable)
        self.stats.rows_written += conn.total_changes - changes_before
        # Only now, after the commit, may callers act on what they wrote.
        for future, result, error in outcomes:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)
