"""The operation journal: every long request as a durable row in SQLite.

An operation row is committed before its request leaves the process, and a server-issued
handle (its secret in the keyring, only a reference here) is committed before the host
acts on it. After a crash the journal alone says what to do: resume, poll, or show the
outcome as unknown.

Writes go through one writer thread that owns the only writing connection:

* write-ahead writes (:meth:`OperationJournal.create_operation`, ``update_operation``,
  ``finish_operation``, server changes) are committed with ``synchronous=FULL`` before
  the awaiting caller continues;
* hot-path writes (:meth:`OperationJournal.record_progress`, ``append_event``) are
  fire-and-forget from the event loop; the writer gathers them for about 50 ms, keeps
  only the latest progress per operation, and commits them in one transaction with
  ``synchronous=NORMAL`` (a process crash loses nothing committed; a power cut may lose
  the last progress values, never an operation).

Reads use a second connection; WAL lets them run while the writer commits.

The schema version lives in ``PRAGMA user_version`` as ``major << 16 | minor``. A
newer minor version only adds things an older hostapp may ignore; a newer major version
is refused with :class:`JournalTooNew`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import queue
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, Self

import sqlite_utils

from hostapp.store.secrets import is_secret_ref

log = logging.getLogger(__name__)

# -- statuses -------------------------------------------------------------------------

PENDING = "pending"  # row written, request not yet sent
RUNNING = "running"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
EXPIRED = "expired"
UNKNOWN = "unknown"  # the call may have run and its outcome cannot be learnt: never re-run silently

STATUSES = (PENDING, RUNNING, INPUT_REQUIRED, COMPLETED, FAILED, CANCELLED, EXPIRED, UNKNOWN)
# ``unknown`` is an outcome too: running the call again is the person's choice and
# makes a new operation, so the old one ends there.
TERMINAL_STATUSES = frozenset({COMPLETED, FAILED, CANCELLED, EXPIRED, UNKNOWN})
IN_FLIGHT_STATUSES = frozenset(STATUSES) - TERMINAL_STATUSES

# Allowed changes between different statuses. Nothing leaves a terminal status, and
# nothing goes back to ``pending``, whose meaning is "never sent".
_TRANSITIONS: dict[str, frozenset[str]] = {
    PENDING: frozenset({RUNNING, INPUT_REQUIRED}) | TERMINAL_STATUSES,
    RUNNING: frozenset({INPUT_REQUIRED}) | TERMINAL_STATUSES,
    INPUT_REQUIRED: frozenset({RUNNING}) | TERMINAL_STATUSES,
}


class StatusTransitionError(Exception):
    """An operation was asked to change status in a way the lifecycle forbids."""


class JournalTooNew(Exception):
    """The journal file was written by a newer hostapp with an incompatible schema."""


def check_transition(old: str, new: str) -> None:
    """Raise :class:`StatusTransitionError` unless an operation may go from ``old`` to ``new``.

    The one place where the operation lifecycle is decided. Staying in the same
    non-terminal status is allowed (nothing changes); a terminal status never changes
    again, which is what makes delivery of an outcome happen exactly once.
    """
    if new not in STATUSES:
        raise StatusTransitionError(f"unknown operation status {new!r}")
    if old in TERMINAL_STATUSES:
        raise StatusTransitionError(f"operation is already {old}; it cannot become {new}")
    if old == new:
        return
    if new not in _TRANSITIONS.get(old, frozenset()):
        raise StatusTransitionError(f"an operation cannot go from {old} to {new}")


def is_terminal(status: str) -> bool:
    return status in TERMINAL_STATUSES


# -- records --------------------------------------------------------------------------


@dataclass
class ServerConfig:
    """One configured MCP server; secret header and env values are keyring references.

    The last three fields are runtime state the engine records (negotiated protocol
    version, the keyring reference of the ``Mcp-Session-Id``, when it last answered).
    """

    name: str
    transport: Literal["stdio", "http"]
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secret_headers: dict[str, str] = field(default_factory=dict)  # header name -> secret ref
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    secret_env: dict[str, str] = field(default_factory=dict)  # variable name -> secret ref
    enabled: bool = True
    protocol_version: str | None = None
    session_ref: str | None = None
    last_seen: float | None = None


@dataclass
class OperationRecord:
    """One long request, as the journal keeps it.

    ``params`` are the exact request params as sent, minus anything secret (a token a
    mechanism adds lives in the keyring under ``handle_ref``). ``handle`` holds the
    mechanism's non-secret state (poll interval, resume interval, references to further
    secrets). ``jsonrpc_id`` keeps its JSON type (int or str).
    """

    id: str
    server: str
    method: str
    params: dict[str, Any]
    tool: str | None = None
    jsonrpc_id: int | str | None = None
    mechanism: str | None = None
    status: str = PENDING
    progress: float | None = None
    total: float | None = None
    message: str | None = None
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    deadline: float | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    handle_ref: str | None = None
    handle: dict[str, Any] = field(default_factory=dict)
    pending_input: dict[str, Any] | None = None
    resumable: bool = True
    delivered: bool = False
    finished_at: float | None = None

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


@dataclass(frozen=True)
class OperationEvent:
    """One entry of an operation's append-only timeline."""

    seq: int
    op_id: str
    at: float
    kind: str
    data: dict[str, Any]


@dataclass
class JournalStats:
    """Counters of the writer thread, for tests and the benchmark."""

    batches: int = 0  # committed transactions
    durable_batches: int = 0  # of which committed with synchronous=FULL
    rows_written: int = 0  # rows inserted, updated or deleted
    progress_received: int = 0  # record_progress calls accepted
    events_received: int = 0  # append_event calls accepted
    dropped: int = 0  # hot-path writes after close, or lost to a failed batch


def new_operation_id() -> str:
    """A fresh local operation id (not a secret: it never leaves the host)."""
    return uuid.uuid4().hex


# -- schema ---------------------------------------------------------------------------

#: The schema this code writes: (major, minor).
SCHEMA_VERSION = (1, 0)

_JSON_OPERATION_FIELDS = ("params", "jsonrpc_id", "result", "error", "handle", "pending_input")
_BOOL_OPERATION_FIELDS = ("resumable", "delivered")
_JSON_SERVER_FIELDS = ("headers", "secret_headers", "args", "env", "secret_env")
_OPERATION_FIELDS = tuple(f.name for f in fields(OperationRecord))
_SERVER_FIELDS = tuple(f.name for f in fields(ServerConfig))
# What may still change on a terminal operation: bookkeeping, never the outcome.
_TERMINAL_MUTABLE = frozenset({"delivered", "resumable", "handle_ref", "handle", "mechanism", "pending_input"})


def _create_schema_1_0(db: sqlite_utils.Database) -> None:
    db["servers"].create(
        {
            "name": str,
            "transport": str,
            "url": str,
            "headers": str,
            "secret_headers": str,
            "command": str,
            "args": str,
            "env": str,
            "secret_env": str,
            "enabled": int,
            "protocol_version": str,
            "session_ref": str,
            "last_seen": float,
        },
        pk="name",
        not_null={"transport", "enabled"},
    )
    db["operations"].create(
        {
            "id": str,
            "server": str,
            "method": str,
            "params": str,
            "tool": str,
            "jsonrpc_id": str,
            "mechanism": str,
            "status": str,
            "progress": float,
            "total": float,
            "message": str,
            "created_at": float,
            "updated_at": float,
            "deadline": float,
            "result": str,
            "error": str,
            "handle_ref": str,
            "handle": str,
            "pending_input": str,
            "resumable": int,
            "delivered": int,
            "finished_at": float,
            # 1 while not terminal: lets the history list "in flight first, then newest"
            # straight from an index.
            "in_flight": int,
        },
        pk="id",
        not_null={"server", "method", "params", "status", "created_at", "updated_at", "in_flight"},
    )
    operations = db["operations"]
    operations.create_index(["in_flight", "created_at", "id"], index_name="operations_by_list_order")
    operations.create_index(["status", "created_at", "id"], index_name="operations_by_status")
    operations.create_index(["server", "created_at"], index_name="operations_by_server")
    db["events"].create(
        {"seq": int, "op_id": str, "at": float, "kind": str, "data": str},
        pk="seq",
        not_null={"op_id", "at", "kind"},
    )
    db["events"].create_index(["op_id", "seq"], index_name="events_by_operation")
    db.execute(
        "CREATE TRIGGER events_append_only BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'the event timeline is append-only'); END"
    )


@dataclass(frozen=True)
class Migration:
    """One step of the schema: brings a journal to ``version`` by calling ``apply``."""

    version: tuple[int, int]
    description: str
    apply: Callable[[sqlite_utils.Database], None]


#: Every schema step, oldest first. Append new ones; never edit a released one. A step
#: that only adds (columns, tables, indexes) bumps the minor version; anything an older
#: hostapp could misread bumps the major version.
MIGRATIONS: tuple[Migration, ...] = (Migration((1, 0), "servers, operations, events", _create_schema_1_0),)


def encode_user_version(version: tuple[int, int]) -> int:
    major, minor = version
    if not (0 <= major < 0x7FFF and 0 <= minor <= 0xFFFF):
        raise ValueError(f"schema version out of range: {version}")
    return major << 16 | minor


def decode_user_version(value: int) -> tuple[int, int]:
    return value >> 16, value & 0xFFFF


@contextmanager
def _write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """One transaction that holds the write lock from its start.

    ``BEGIN IMMEDIATE`` waits (busy timeout) for another process's writer instead of
    failing half-way, when a read inside the transaction turns into a write.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    try:
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _schema_version(db: sqlite_utils.Database, target: tuple[int, int], path: Path | str | None) -> tuple[int, int]:
    current = decode_user_version(db.execute("PRAGMA user_version").fetchone()[0])
    if current[0] > target[0]:
        where = f" at {path}" if path is not None else ""
        raise JournalTooNew(
            f"this journal{where} was written by a newer hostapp (schema {current[0]}.{current[1]}); "
            f"this hostapp understands schema {target[0]}.x only. Update hostapp, or set "
            "HOSTAPP_HOME to another directory to start a separate journal."
        )
    return current


def migrate(
    db: sqlite_utils.Database,
    migrations: Sequence[Migration] = MIGRATIONS,
    path: Path | str | None = None,
) -> tuple[int, int]:
    """Bring the database up to the newest step of ``migrations``; return its version.

    Each step runs in its own transaction together with its ``user_version`` bump, so an
    interrupted upgrade restarts cleanly at the step that did not finish, and a second
    process opening the same journal at the same moment waits and then skips the step.
    """
    target = migrations[-1].version if migrations else (0, 0)
    current = _schema_version(db, target, path)
    for step in migrations:
        if step.version <= current:
            continue
        with _write_transaction(db.conn):
            current = _schema_version(db, target, path)  # another process may have been first
            if step.version <= current:
                continue
            step.apply(db)
            db.execute(f"PRAGMA user_version = {encode_user_version(step.version)}")
            current = step.version
        log.info("journal schema migrated to %d.%d (%s)", *step.version, step.description)
    return current


# -- row conversion -------------------------------------------------------------------


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _operation_to_row(record: OperationRecord) -> dict[str, Any]:
    row = asdict(record)
    for name in _JSON_OPERATION_FIELDS:
        row[name] = _dumps(row[name])
    for name in _BOOL_OPERATION_FIELDS:
        row[name] = int(bool(row[name]))
    row["in_flight"] = int(record.status not in TERMINAL_STATUSES)
    return row


def _row_to_operation(row: sqlite3.Row) -> OperationRecord:
    values = {name: row[name] for name in _OPERATION_FIELDS}
    for name in _JSON_OPERATION_FIELDS:
        values[name] = _loads(values[name])
    for name in _BOOL_OPERATION_FIELDS:
        values[name] = bool(values[name])
    if values["handle"] is None:
        values["handle"] = {}
    return OperationRecord(**values)


def _server_to_row(config: ServerConfig) -> dict[str, Any]:
    row = asdict(config)
    for name in _JSON_SERVER_FIELDS:
        row[name] = _dumps(row[name])
    row["enabled"] = int(bool(row["enabled"]))
    return row


def _row_to_server(row: sqlite3.Row) -> ServerConfig:
    values = {name: row[name] for name in _SERVER_FIELDS}
    for name in _JSON_SERVER_FIELDS:
        values[name] = _loads(values[name]) or ({} if name != "args" else [])
    values["enabled"] = bool(values["enabled"])
    return ServerConfig(**values)


def _validate_server(config: ServerConfig) -> None:
    if config.transport not in ("stdio", "http"):
        raise ValueError(f"server {config.name!r}: transport must be 'stdio' or 'http'")
    if config.transport == "http" and not config.url:
        raise ValueError(f"server {config.name!r}: an http server needs a url")
    if config.transport == "stdio" and not config.command:
        raise ValueError(f"server {config.name!r}: a stdio server needs a command")
    for what, refs in (("secret_headers", config.secret_headers), ("secret_env", config.secret_env)):
        for key, ref in refs.items():
            if not is_secret_ref(ref):
                # Catches a plaintext value handed over by mistake, without echoing it.
                raise ValueError(f"server {config.name!r}: {what}[{key!r}] must be a keyring reference")
    if config.session_ref is not None and not is_secret_ref(config.session_ref):
        raise ValueError(f"server {config.name!r}: session_ref must be a keyring reference")


def _validate_operation_fields(values: dict[str, Any]) -> None:
    ref = values.get("handle_ref")
    if ref is not None and not is_secret_ref(ref):
        raise ValueError("handle_ref must be a keyring reference")
    status = values.get("status")
    if status is not None and status not in STATUSES:
        raise StatusTransitionError(f"unknown operation status {status!r}")


# -- the writer thread ----------------------------------------------------------------


@dataclass
class _WriteAhead:
    apply: Callable[[sqlite_utils.Database], Any]
    future: concurrent.futures.Future


@dataclass
class _Barrier:
    """Resolved once everything queued before it is committed; ``stop`` ends the thread."""

    future: concurrent.futures.Future
    stop: bool = False


_PROGRESS = "progress"
_EVENT = "event"


class _JournalWriter(threading.Thread):
    """The only thread that writes; one transaction per batch of queued writes."""

    def __init__(self, db: sqlite_utils.Database, stats: JournalStats, interval: float, max_items: int):
        super().__init__(name="hostapp-journal-writer", daemon=True)
        self.db = db
        self.stats = stats
        self.interval = interval
        self.max_items = max_items
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self._synchronous: str | None = None

    def run(self) -> None:
        stopping = False
        while not stopping:
            batch = self._gather()
            stopping = any(isinstance(item, _Barrier) and item.stop for item in batch)
            self._commit(batch)
        # Anything that slipped in behind the stop request is refused, not left hanging.
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                break
            future = getattr(item, "future", None)
            if future is not None and future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError("the operation journal is closed"))
            elif future is None:
                self.stats.dropped += 1

    def _gather(self) -> list:
        """Block for one item, then collect more until ~interval passed or one must commit now."""
        first = self.queue.get()
        batch = [first]
        urgent = not isinstance(first, tuple)
        deadline = time.monotonic() + self.interval
        while len(batch) < self.max_items:
            try:
                timeout = 0.0 if urgent else deadline - time.monotonic()
                item = self.queue.get(timeout=timeout) if timeout > 0 else self.queue.get_nowait()
            except queue.Empty:
                break
            batch.append(item)
            urgent = urgent or not isinstance(item, tuple)
        return batch

    def _set_synchronous(self, mode: str) -> None:
        if self._synchronous != mode:
            self.db.execute(f"PRAGMA synchronous = {mode}")
            self._synchronous = mode

    def _commit(self, batch: list) -> None:
        conn = self.db.conn
        durable = any(isinstance(item, _WriteAhead) for item in batch)
        outcomes: list[tuple[concurrent.futures.Future, Any, BaseException | None]] = []
        progress: dict[str, tuple] = {}
        events: list[tuple] = []
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
            with _write_transaction(conn):
                for item in batch:
                    if isinstance(item, tuple):
                        if item[0] == _PROGRESS:
                            # Coalesce: only the newest value per operation is written,
                            # with the newest message seen (a value may come without one).
                            earlier = progress.get(item[1])
                            if item[4] is None and earlier is not None and earlier[4] is not None:
                                item = (*item[:4], earlier[4], item[5])
                            progress[item[1]] = item
                        else:
                            events.append(item)
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
                future = getattr(item, "future", None)
                if future is None or future.done():
                    continue
                if future.running() or future.set_running_or_notify_cancel():
                    future.set_exception(exc)
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


# -- the journal ----------------------------------------------------------------------


#: How long opening a journal waits for another process switching it to WAL at the same time.
WAL_SWITCH_WAIT_SECONDS = 10.0


def _enter_wal_mode(conn: sqlite3.Connection) -> str:
    """Switch to WAL and return the journal mode now in force.

    Two processes opening a brand-new journal at once (the window and a command) both ask
    for the switch; SQLite answers the loser "database is locked" at once, without waiting
    for its busy timeout, so the loser retries until the winner is done.
    """
    deadline = time.monotonic() + WAL_SWITCH_WAIT_SECONDS
    delay = 0.005
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)


class OperationJournal:
    """The SQLite journal of servers, operations and their event timelines.

    Operation states: pending -> running <-> input_required -> completed, failed,
    cancelled, expired or unknown (terminal; see :func:`check_transition`).

    Thread use: the async write-ahead methods are awaited on the event loop; the
    ``*_sync`` twins and the server methods block the calling thread until committed;
    ``record_progress`` and ``append_event`` never block; reads may come from any thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        batch_interval: float = 0.05,
        batch_max_items: int = 1000,
        migrations: Sequence[Migration] = MIGRATIONS,
    ):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.stats = JournalStats()
        self._closed = False
        self._close_lock = threading.Lock()

        writer_conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        try:
            self._write_db = sqlite_utils.Database(writer_conn)
            if _enter_wal_mode(writer_conn) != "wal":
                raise sqlite3.OperationalError(f"cannot switch {self.path} to WAL mode")
            self.schema_version = migrate(self._write_db, migrations, self.path)
        except BaseException:
            writer_conn.close()
            raise

        self._read_conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        self._read_conn.row_factory = sqlite3.Row
        self._read_lock = threading.Lock()

        self._writer = _JournalWriter(self._write_db, self.stats, batch_interval, batch_max_items)
        self._writer.start()

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Commit what is queued, stop the writer thread and close the database."""
        with self._close_lock:
            if self._closed:
                return
            barrier = _Barrier(concurrent.futures.Future(), stop=True)
            self._writer.queue.put(barrier)
            self._closed = True
        barrier.future.result()
        self._writer.join()
        with self._read_lock:
            self._read_conn.close()
        self._write_db.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _submit(self, apply: Callable[[sqlite_utils.Database], Any]) -> concurrent.futures.Future:
        if self._closed:
            raise RuntimeError("the operation journal is closed")
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._writer.queue.put(_WriteAhead(apply, future))
        return future

    def flush(self) -> asyncio.Future[None]:
        """Await to wait until everything queued before this call is committed."""
        return asyncio.wrap_future(self._barrier())

    def flush_sync(self) -> None:
        self._barrier().result()

    def _barrier(self) -> concurrent.futures.Future:
        if self._closed:
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(None)
            return done
        barrier = _Barrier(concurrent.futures.Future())
        self._writer.queue.put(barrier)
        return barrier.future

    # -- servers (blocking: configuration changes are rare) -------------------------------

    def add_server(self, config: ServerConfig) -> None:
        """Add a server; ValueError if one with that name exists."""
        _validate_server(config)
        row = _server_to_row(config)

        def apply(db: sqlite_utils.Database) -> None:
            try:
                db["servers"].insert(row)
            except sqlite3.IntegrityError:
                raise ValueError(f"a server named {config.name!r} already exists") from None

        self._submit(apply).result()

    def get_server(self, name: str) -> ServerConfig | None:
        row = self._read_one("SELECT * FROM servers WHERE name = ?", (name,))
        return None if row is None else _row_to_server(row)

    def list_servers(self) -> list[ServerConfig]:
        return [_row_to_server(row) for row in self._read_all("SELECT * FROM servers ORDER BY name")]

    def update_server(self, name: str, **changes: Any) -> ServerConfig:
        """Change some fields of a server; KeyError if there is none. Returns the new config."""
        unknown = set(changes) - set(_SERVER_FIELDS) | ({"name"} & set(changes))
        if unknown:
            raise TypeError(f"cannot update server field(s): {', '.join(sorted(unknown))}")

        def apply(db: sqlite_utils.Database) -> ServerConfig:
            row = db.execute("SELECT * FROM servers WHERE name = ?", (name,))
            columns = [d[0] for d in row.description]
            found = row.fetchone()
            if found is None:
                raise KeyError(f"no server named {name!r}")
            current = dict(zip(columns, found))
            for column in _JSON_SERVER_FIELDS:
                current[column] = _loads(current[column]) or ({} if column != "args" else [])
            current["enabled"] = bool(current["enabled"])
            config = ServerConfig(**{**current, **changes})
            _validate_server(config)
            updates = {key: value for key, value in _server_to_row(config).items() if key in changes}
            db["servers"].update(name, updates)
            return config

        return self._submit(apply).result()

    def remove_server(self, name: str) -> None:
        """Forget a server (its operations stay in the history); KeyError if there is none."""

        def apply(db: sqlite_utils.Database) -> None:
            if db.execute("DELETE FROM servers WHERE name = ?", (name,)).rowcount == 0:
                raise KeyError(f"no server named {name!r}")

        self._submit(apply).result()

    # -- operations: write-ahead ----------------------------------------------------------

    def create_operation(self, record: OperationRecord) -> asyncio.Future[None]:
        """Commit a new operation (normally ``pending``) before its request is sent.

        Like every async write here, the write is queued when this is called (so writes
        keep the order of the calls) and the returned future is done once committed.
        """
        return asyncio.wrap_future(self._submit_create(record))

    def create_operation_sync(self, record: OperationRecord) -> None:
        self._submit_create(record).result()

    def update_operation(self, op_id: str, **changes: Any) -> asyncio.Future[OperationRecord]:
        """Commit changed fields; a status change must pass :func:`check_transition`.

        This is also how a server-issued handle is made durable before the host acts on
        it: ``await journal.update_operation(op_id, handle_ref=ref, handle={...})``.
        Returns the record as committed.
        """
        return asyncio.wrap_future(self._submit_update(op_id, changes))

    def update_operation_sync(self, op_id: str, **changes: Any) -> OperationRecord:
        return self._submit_update(op_id, changes).result()

    def finish_operation(
        self,
        op_id: str,
        status: str,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> asyncio.Future[bool]:
        """Move an operation to a terminal status with its outcome, once.

        Returns False (and changes nothing) when the operation already was terminal, so
        the caller knows the outcome was delivered before and must not deliver it again.
        """
        return asyncio.wrap_future(self._submit_finish(op_id, status, result, error))

    def finish_operation_sync(
        self,
        op_id: str,
        status: str,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> bool:
        return self._submit_finish(op_id, status, result, error).result()

    def _submit_create(self, record: OperationRecord) -> concurrent.futures.Future:
        _validate_operation_fields({"handle_ref": record.handle_ref, "status": record.status})
        row = _operation_to_row(record)
        if record.status in TERMINAL_STATUSES and row["finished_at"] is None:
            row["finished_at"] = row["updated_at"]

        def apply(db: sqlite_utils.Database) -> None:
            try:
                db["operations"].insert(row)
            except sqlite3.IntegrityError:
                raise ValueError(f"operation {record.id} already exists") from None
            _insert_event(db, record.id, row["created_at"], "status", {"to": record.status})

        return self._submit(apply)

    def _submit_update(self, op_id: str, changes: dict[str, Any]) -> concurrent.futures.Future:
        unknown = set(changes) - set(_OPERATION_FIELDS) | ({"id", "created_at", "finished_at"} & set(changes))
        if unknown:
            raise TypeError(f"cannot update operation field(s): {', '.join(sorted(unknown))}")
        _validate_operation_fields(changes)

        def apply(db: sqlite_utils.Database) -> OperationRecord:
            current = _read_operation(db, op_id)
            new_status = changes.get("status", current.status)
            if current.terminal:
                if new_status != current.status or set(changes) - {"status"} - _TERMINAL_MUTABLE:
                    raise StatusTransitionError(
                        f"operation {op_id} is {current.status}; its outcome can no longer change"
                    )
            else:
                check_transition(current.status, new_status)
            now = time.time()
            merged = OperationRecord(**{**asdict(current), **changes, "updated_at": now})
            if new_status in TERMINAL_STATUSES and not current.terminal:
                merged.finished_at = now
            row = _operation_to_row(merged)
            updates = {key: row[key] for key in (*changes, "updated_at", "in_flight", "finished_at")}
            db["operations"].update(op_id, updates)
            if new_status != current.status:
                data = {"from": current.status, "to": new_status}
                if changes.get("message"):
                    data["message"] = changes["message"]
                _insert_event(db, op_id, now, "status", data)
            return merged

        return self._submit(apply)

    def _submit_finish(
        self, op_id: str, status: str, result: dict | None, error: dict | None
    ) -> concurrent.futures.Future:
        if status not in TERMINAL_STATUSES:
            raise ValueError(f"finish_operation needs a terminal status, not {status!r}")
        result_json, error_json = _dumps(result), _dumps(error)

        def apply(db: sqlite_utils.Database) -> bool:
            current = _read_operation(db, op_id)
            if current.terminal:
                return False
            check_transition(current.status, status)
            now = time.time()
            # The in_flight guard makes the terminal transition happen once even if two
            # writers raced; the writer thread serialises them anyway.
            changed = db.execute(
                "UPDATE operations SET status = ?, result = ?, error = ?, pending_input = NULL, "
                "in_flight = 0, updated_at = ?, finished_at = ? WHERE id = ? AND in_flight = 1",
                (status, result_json, error_json, now, now, op_id),
            ).rowcount
            if changed:
                data = {"from": current.status, "to": status}
                if isinstance(error, dict) and error.get("message"):
                    data["message"] = error["message"]
                _insert_event(db, op_id, now, "status", data)
            return bool(changed)

        return self._submit(apply)

    # -- operations: hot path --------------------------------------------------------------

    def record_progress(
        self, op_id: str, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Queue a progress value; the writer keeps only the newest per operation and batch.

        Ignored once the operation is terminal. Never blocks.
        """
        if self._closed:
            self.stats.dropped += 1
            return
        self.stats.progress_received += 1
        self._writer.queue.put((_PROGRESS, op_id, progress, total, message, time.time()))

    def append_event(self, op_id: str, kind: str, data: dict[str, Any] | None = None) -> None:
        """Queue one entry for the operation's timeline (``data`` must be JSON). Never blocks."""
        if self._closed:
            self.stats.dropped += 1
            return
        self.stats.events_received += 1
        self._writer.queue.put((_EVENT, op_id, kind, _dumps(data if data is not None else {}), time.time()))

    # -- reads ------------------------------------------------------------------------------

    def _read_all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._read_lock:
            return self._reader().execute(sql, tuple(params)).fetchall()

    def _read_one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        with self._read_lock:
            return self._reader().execute(sql, tuple(params)).fetchone()

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the operation journal is closed")
        return self._read_conn

    def get_operation(self, op_id: str) -> OperationRecord | None:
        row = self._read_one("SELECT * FROM operations WHERE id = ?", (op_id,))
        return None if row is None else _row_to_operation(row)

    def list_operations(
        self, statuses: Iterable[str] | None = None, limit: int = 200, offset: int = 0
    ) -> list[OperationRecord]:
        """A page of operations: those in flight first, then the newest first."""
        where, params = _status_filter(statuses)
        order = "in_flight DESC, created_at DESC, id DESC"
        if params and (set(params) <= TERMINAL_STATUSES or set(params) <= IN_FLIGHT_STATUSES):
            # in_flight is the same for every row here; leaving it out lets a one-status
            # page come straight from the status index instead of sorting the history.
            order = "created_at DESC, id DESC"
        rows = self._read_all(
            f"SELECT * FROM operations {where} ORDER BY {order} LIMIT ? OFFSET ?",
            (*params, int(limit), int(offset)),
        )
        return [_row_to_operation(row) for row in rows]

    def count_operations(self, statuses: Iterable[str] | None = None) -> int:
        where, params = _status_filter(statuses)
        return self._read_one(f"SELECT COUNT(*) FROM operations {where}", params)[0]

    def unfinished_operations(self) -> list[OperationRecord]:
        """Operations not yet terminal, oldest first: what to resume, poll or flag on start-up."""
        rows = self._read_all("SELECT * FROM operations WHERE in_flight = 1 ORDER BY created_at, id")
        return [_row_to_operation(row) for row in rows]

    def unfinished_ids(self) -> list[str]:
        """The ids of the operations not yet terminal (no record decoded)."""
        return [row["id"] for row in self._read_all("SELECT id FROM operations WHERE in_flight = 1")]

    def undelivered_operations(self) -> list[OperationRecord]:
        """Terminal operations whose outcome was never marked delivered, oldest first."""
        rows = self._read_all(
            "SELECT * FROM operations WHERE in_flight = 0 AND delivered = 0 ORDER BY created_at, id"
        )
        return [_row_to_operation(row) for row in rows]

    def events(self, op_id: str, limit: int | None = None) -> list[OperationEvent]:
        """The operation's timeline, oldest first; with ``limit``, only the newest ``limit``."""
        if limit is None:
            rows = self._read_all("SELECT * FROM events WHERE op_id = ? ORDER BY seq", (op_id,))
        else:
            rows = self._read_all(
                "SELECT * FROM (SELECT * FROM events WHERE op_id = ? ORDER BY seq DESC LIMIT ?) ORDER BY seq",
                (op_id, int(limit)),
            )
        return [OperationEvent(row["seq"], row["op_id"], row["at"], row["kind"], _loads(row["data"])) for row in rows]


def _status_filter(statuses: Iterable[str] | None) -> tuple[str, tuple[str, ...]]:
    if statuses is None:
        return "", ()
    wanted = tuple(dict.fromkeys(statuses))
    for status in wanted:
        if status not in STATUSES:
            raise ValueError(f"unknown operation status {status!r}")
    if not wanted:
        return "WHERE 0", ()
    return f"WHERE status IN ({', '.join('?' * len(wanted))})", wanted


def _read_operation(db: sqlite_utils.Database, op_id: str) -> OperationRecord:
    cursor = db.execute("SELECT * FROM operations WHERE id = ?", (op_id,))
    found = cursor.fetchone()
    if found is None:
        raise KeyError(f"no operation {op_id}")
    columns = [d[0] for d in cursor.description]
    return _row_to_operation(dict(zip(columns, found)))


def _insert_event(db: sqlite_utils.Database, op_id: str, at: float, kind: str, data: dict) -> None:
    db.execute("INSERT INTO events (op_id, at, kind, data) VALUES (?, ?, ?, ?)", (op_id, at, kind, _dumps(data)))
