"""The operation journal: every long request as a durable row in SQLite, and its queries.

An operation row is committed before its request leaves the process, and a server-issued
handle (its secret in the keyring, only a reference here) is committed before the host
acts on it. After a crash the journal alone says what to do: resume, poll, or show the
outcome as unknown.

Writes go through one writer thread that owns the only writing connection
(:mod:`hostapp.store.journal_writer`):

* write-ahead writes (:meth:`OperationJournal.create_operation`, ``update_operation``,
  ``finish_operation``, server changes) are committed with ``synchronous=FULL`` before
  the awaiting caller continues;
* hot-path writes (:meth:`OperationJournal.record_progress`, ``append_event``) are
  fire-and-forget from the event loop; the writer gathers them for about 50 ms, keeps
  only the latest progress per operation, and commits them in one transaction with
  ``synchronous=NORMAL`` (a process crash loses nothing committed; a power cut may lose
  the last progress values, never an operation).

Reads use a second connection; WAL lets them run while the writer commits.

The schema, its versions and migrations are in :mod:`hostapp.store.journal_schema`; the
operation statuses and their lifecycle in :mod:`hostapp.store.status`. The names other
layers use from those modules are importable from here too.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Self, TypeVar

import orjson
import sqlite_utils

from hostapp.store.journal_schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    WAL_SWITCH_WAIT_SECONDS,
    JournalTooNew,
    Migration,
    decode_user_version,
    encode_user_version,
    enter_wal_mode,
    migrate,
)
from hostapp.store.journal_writer import JournalStats, JournalWriter
from hostapp.store.paths import private_file
from hostapp.store.secrets import is_secret_ref
from hostapp.store.server_config import LOG_LEVELS, ServerConfig
from hostapp.store.status import (
    IN_FLIGHT,
    TERMINAL,
    OperationStatus,
    StatusTransitionError,
    check_transition,
)

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "WAL_SWITCH_WAIT_SECONDS",
    "JournalStats",
    "JournalTooNew",
    "Migration",
    "OperationEvent",
    "OperationJournal",
    "OperationRecord",
    "ServerConfig",
    "decode_user_version",
    "encode_user_version",
    "migrate",
    "new_operation_id",
]

_T = TypeVar("_T")

# -- records --------------------------------------------------------------------------

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
    status: str = OperationStatus.PENDING  # an OperationStatus; read back as one
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
    resumable: bool = True
    finished_at: float | None = None
    #: A server's question not yet answered, to ask again after a restart: ``{"id": its
    #: JSON-RPC id, "params": its params without _meta}``. It came in the HTTP session the
    #: handle is bound to, whose id is a secret kept with the handle (not here).
    open_question: dict[str, Any] | None = None
    #: The operation whose MCP App view made this call (None: a call of its own). Set when
    #: the call is created, never changed.
    view_of: str | None = None
    #: Why the host found it stalled (None: it is not): set and cleared by the engine's
    #: liveness watch, read back by a restarted agent until a sign of life clears it.
    stalled: str | None = None
    #: How many calls its MCP App view made (their ``view_of`` names it): counted as each
    #: is created, never set otherwise.
    view_calls: int = 0

    def __post_init__(self) -> None:
        if not self.updated_at:
            self.updated_at = self.created_at

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


@dataclass(frozen=True)
class OperationEvent:
    """One entry of an operation's append-only timeline."""

    seq: int
    op_id: str
    at: float
    kind: str
    data: dict[str, Any]




def new_operation_id() -> str:
    """A fresh local operation id (not a secret: it never leaves the host)."""
    return uuid.uuid4().hex


_JSON_OPERATION_FIELDS = ("params", "jsonrpc_id", "result", "error", "handle", "open_question")
_BOOL_OPERATION_FIELDS = ("resumable",)
_JSON_SERVER_FIELDS = ("headers", "secret_headers", "args", "env", "secret_env", "roots")
# JSON server columns that hold a list (the others hold an object).
_LIST_SERVER_FIELDS = ("args", "roots")
# JSON server columns whose absence stays None.
_OPTIONAL_JSON_SERVER_FIELDS = ("auth",)
_OPERATION_FIELDS = tuple(f.name for f in fields(OperationRecord))
_SERVER_FIELDS = tuple(f.name for f in fields(ServerConfig))
# Membership tests take any string; a StrEnum's values are its members' equals.
_STATUS_VALUES = frozenset(OperationStatus)
_STATUS_OF = {status.value: status for status in OperationStatus}
_OPERATION_FIELD_SET = frozenset(_OPERATION_FIELDS)
# Set when an operation is created (or ended), never by an update.
_FIXED_OPERATION_FIELDS = frozenset({"id", "created_at", "finished_at", "view_of", "view_calls"})
# What may still change on a terminal operation: bookkeeping, never the outcome.
_TERMINAL_MUTABLE = frozenset({"resumable", "handle_ref", "handle", "mechanism", "stalled"})
# Changes that are the host's own finding, not news of the operation: ``updated_at`` stays.
_NOT_NEWS = frozenset({"stalled"})

# -- row conversion -------------------------------------------------------------------


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    return None if text is None else _json_of(text)


def _json_of(text: str) -> Any:
    """A JSON column's value. orjson (a list of 10,000 operations after a restart, which
    holds the window's first rows: 160 -> 106 ms converted); json for what orjson refuses
    and json wrote (NaN, an integer beyond 64 bits), so every value reads as it did."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _operation_to_row(record: OperationRecord) -> dict[str, Any]:
    row = asdict(record)
    for name in _JSON_OPERATION_FIELDS:
        row[name] = _dumps(row[name])
    for name in _BOOL_OPERATION_FIELDS:
        row[name] = int(bool(row[name]))
    row["in_flight"] = int(record.status not in TERMINAL)
    return row


def _row_to_operation(row: sqlite3.Row | Mapping[str, Any]) -> OperationRecord:
    return _record_of({name: row[name] for name in _OPERATION_FIELDS})


def _rows_to_operations(rows: list[sqlite3.Row]) -> list[OperationRecord]:
    """Many rows of one query: each column found by its place, worked out once (a
    ``sqlite3.Row`` finds a column by name by comparing it with every column's, case
    folded: 23 fields of 24 columns, a third of a 10,000-row read's conversion)."""
    if not rows:
        return []
    places = [(name, place) for place, name in enumerate(rows[0].keys()) if name in _OPERATION_FIELD_SET]
    if len(places) != len(_OPERATION_FIELDS):
        return [_row_to_operation(row) for row in rows]  # a column missing: the error says which
    return [_record_of({name: row[place] for name, place in places}) for row in rows]


def _record_of(values: dict[str, Any]) -> OperationRecord:
    for name in _JSON_OPERATION_FIELDS:
        text = values[name]
        if text is None:
            continue
        if text == "{}":  # most handles of finished operations
            values[name] = {}
        elif name == "jsonrpc_id" and text.isascii() and text.isdigit():  # ids are numbers mostly
            values[name] = int(text)
        else:
            values[name] = _json_of(text)
    for name in _BOOL_OPERATION_FIELDS:
        values[name] = bool(values[name])
    status = values["status"]
    values["status"] = _STATUS_OF.get(status) or OperationStatus(status)
    if values["handle"] is None:
        values["handle"] = {}
    return OperationRecord(**values)


def _server_to_row(config: ServerConfig) -> dict[str, Any]:
    row = asdict(config)
    for name in (*_JSON_SERVER_FIELDS, *_OPTIONAL_JSON_SERVER_FIELDS):
        row[name] = _dumps(row[name])
    row["enabled"] = int(bool(row["enabled"]))
    return row


def _row_to_server(row: sqlite3.Row | Mapping[str, Any]) -> ServerConfig:
    values = {name: row[name] for name in _SERVER_FIELDS}
    for name in _JSON_SERVER_FIELDS:
        values[name] = _loads(values[name]) or ([] if name in _LIST_SERVER_FIELDS else {})
    for name in _OPTIONAL_JSON_SERVER_FIELDS:
        values[name] = _loads(values[name])
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
    if not isinstance(config.roots, list) or not all(
            isinstance(root, str) and os.path.isabs(root) and "\x00" not in root for root in config.roots):
        raise ValueError(f"server {config.name!r}: roots must be a list of absolute folder paths")
    if config.log_level is not None and config.log_level not in LOG_LEVELS:
        raise ValueError(f"server {config.name!r}: log_level must be one of {', '.join(LOG_LEVELS)}")
    if config.auth is not None and not isinstance(config.auth, dict):
        raise ValueError(f"server {config.name!r}: auth must be a JSON object of sign-in settings")
    if config.session_ref is not None and not is_secret_ref(config.session_ref):
        raise ValueError(f"server {config.name!r}: session_ref must be a keyring reference")


def _validate_operation_fields(values: dict[str, Any]) -> None:
    ref = values.get("handle_ref")
    if ref is not None and not is_secret_ref(ref):
        raise ValueError("handle_ref must be a keyring reference")
    status = values.get("status")
    if status is not None and status not in _STATUS_VALUES:
        raise StatusTransitionError(f"unknown operation status {status!r}")


class OperationJournal:
    """The SQLite journal of servers, operations and their event timelines.

    Operation states: pending -> running <-> input_required -> completed, failed,
    cancelled, expired or unknown (terminal; see :func:`hostapp.store.status.check_transition`).

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
        # SQLite makes its -wal and -shm files with the database's own mode.
        for part in (self.path, self.path.with_name(self.path.name + "-wal"),
                     self.path.with_name(self.path.name + "-shm")):
            if part == self.path or part.exists():
                private_file(part)
        self.stats = JournalStats()
        self._closed = False
        self._close_lock = threading.Lock()

        writer_conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        try:
            self._write_db = sqlite_utils.Database(writer_conn)
            if enter_wal_mode(writer_conn) != "wal":
                raise sqlite3.OperationalError(f"cannot switch {self.path} to WAL mode")
            self.schema_version = migrate(self._write_db, migrations, self.path)
        except BaseException:
            writer_conn.close()
            raise

        self._read_conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=10)
        self._read_conn.row_factory = sqlite3.Row
        self._read_lock = threading.Lock()

        self._writer = JournalWriter(self._write_db, self.stats, batch_interval, batch_max_items)
        self._writer.start()

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Commit what is queued, stop the writer thread and close the database."""
        with self._close_lock:
            if self._closed:
                return
            stopped = self._writer.barrier(stop=True)
            self._closed = True
        stopped.result()
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

    def _submit(self, apply: Callable[[sqlite_utils.Database], _T]) -> concurrent.futures.Future[_T]:
        if self._closed:
            raise RuntimeError("the operation journal is closed")
        return self._writer.write_ahead(apply)

    def flush(self) -> asyncio.Future[None]:
        """Await to wait until everything queued before this call is committed."""
        return asyncio.wrap_future(self._barrier())

    def _barrier(self) -> concurrent.futures.Future[None]:
        if self._closed:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            done.set_result(None)
            return done
        return self._writer.barrier()

    # -- servers (blocking: configuration changes are rare) -------------------------------

    def reserve_request_ids(self, server: str, count: int) -> int:
        """Reserve ``count`` JSON-RPC ids for requests to ``server``; the first of them.

        Blocks until committed. Reservations are serialized by SQLite across processes, so
        the blocks two processes get never overlap, and they only rise: an id is never
        handed out twice for one server. The first reservation of a server starts above
        every integer id its operations in the journal were sent under.
        """
        if count < 1:
            raise ValueError("reserve at least one id")

        def apply(db: sqlite_utils.Database) -> int:
            row = db.execute("SELECT next FROM request_ids WHERE server = ?", (server,)).fetchone()
            if row is None:
                # jsonrpc_id holds JSON: an integer id is its digits, a string id is quoted.
                used = db.execute(
                    "SELECT MAX(CAST(jsonrpc_id AS INTEGER)) FROM operations "
                    "WHERE server = ? AND jsonrpc_id GLOB '[0-9]*'", (server,)).fetchone()[0]
                start = int(used or 0) + 1
                db.execute("INSERT INTO request_ids (server, next) VALUES (?, ?)", (server, start + count))
            else:
                start = int(row[0])
                db.execute("UPDATE request_ids SET next = ? WHERE server = ?", (start + count, server))
            return start

        return self._submit(apply).result()

    def add_server(self, config: ServerConfig) -> None:
        """Add a server; ValueError if one with that name exists."""
        _validate_server(config)
        row = _server_to_row(config)

        def apply(db: sqlite_utils.Database) -> None:
            try:
                db.table("servers").insert(row)
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
            current = dict(zip(columns, found, strict=True))
            for column in _JSON_SERVER_FIELDS:
                current[column] = _loads(current[column]) or ([] if column in _LIST_SERVER_FIELDS else {})
            for column in _OPTIONAL_JSON_SERVER_FIELDS:
                current[column] = _loads(current[column])
            current["enabled"] = bool(current["enabled"])
            config = ServerConfig(**{**current, **changes})
            _validate_server(config)
            updates = {key: value for key, value in _server_to_row(config).items() if key in changes}
            db.table("servers").update(name, updates)
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
        """Move an operation to a terminal status with its outcome, once; a question it
        kept open (``open_question``) goes with it: nobody is owed an answer any more.

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

    def _submit_create(self, record: OperationRecord) -> concurrent.futures.Future[None]:
        _validate_operation_fields({"handle_ref": record.handle_ref, "status": record.status})
        row = _operation_to_row(record)
        if record.status in TERMINAL and row["finished_at"] is None:
            row["finished_at"] = row["updated_at"]

        def apply(db: sqlite_utils.Database) -> None:
            try:
                db.table("operations").insert(row)
            except sqlite3.IntegrityError:
                raise ValueError(f"operation {record.id} already exists") from None
            _insert_event(db, record.id, row["created_at"], "status", {"to": record.status})
            if record.view_of is not None:  # one more call of that view, in the same commit
                db.execute("UPDATE operations SET view_calls = view_calls + 1 WHERE id = ?", [record.view_of])

        return self._submit(apply)

    def _submit_update(self, op_id: str, changes: dict[str, Any]) -> concurrent.futures.Future[OperationRecord]:
        unknown = set(changes) - set(_OPERATION_FIELDS) | (_FIXED_OPERATION_FIELDS & set(changes))
        if unknown:
            raise TypeError(f"cannot update operation field(s): {', '.join(sorted(unknown))}")
        _validate_operation_fields(changes)

        def apply(db: sqlite_utils.Database) -> OperationRecord:
            current = _read_operation(db, op_id)
            new_status = changes.get("status", current.status)
            if current.terminal:
                # Striking a question is always allowed: an ended operation has none (its
                # end struck it already; a strike racing the end finds nothing to change).
                mutable = _TERMINAL_MUTABLE | ({"open_question"} if changes.get("open_question", 0) is None
                                               else frozenset())
                if new_status != current.status or set(changes) - {"status"} - mutable:
                    raise StatusTransitionError(
                        f"operation {op_id} is {current.status}; its outcome can no longer change"
                    )
            else:
                check_transition(current.status, new_status)
            now = time.time()
            news = bool(set(changes) - _NOT_NEWS)
            merged = OperationRecord(**{**asdict(current), **changes,
                                        "updated_at": now if news else current.updated_at})
            if new_status in TERMINAL and not current.terminal:
                merged.finished_at = now
            row = _operation_to_row(merged)
            updates = {key: row[key] for key in (*changes, "updated_at", "in_flight", "finished_at")}
            db.table("operations").update(op_id, updates)
            if new_status != current.status:
                data = {"from": current.status, "to": new_status}
                if changes.get("message"):
                    data["message"] = changes["message"]
                _insert_event(db, op_id, now, "status", data)
            return merged

        return self._submit(apply)

    def _submit_finish(
        self, op_id: str, status: str, result: dict[str, Any] | None, error: dict[str, Any] | None
    ) -> concurrent.futures.Future[bool]:
        if status not in TERMINAL:
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
                "UPDATE operations SET status = ?, result = ?, error = ?, open_question = NULL, "
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
        self, op_id: str, progress: float | None, total: float | None = None, message: str | None = None
    ) -> None:
        """Queue a progress value (None: none yet, only a message); the writer keeps only the
        newest per operation and batch.

        Ignored once the operation is terminal. Never blocks.
        """
        if self._closed:
            self.stats.dropped += 1
            return
        self.stats.progress_received += 1
        self._writer.progress(op_id, progress, total, message, time.time())

    def append_event(self, op_id: str, kind: str, data: dict[str, Any] | None = None) -> None:
        """Queue one entry for the operation's timeline (``data`` must be JSON). Never blocks."""
        if self._closed:
            self.stats.dropped += 1
            return
        self.stats.events_received += 1
        self._writer.event(op_id, kind, _dumps(data if data is not None else {}), time.time())

    # -- reads ------------------------------------------------------------------------------

    def _read_all(self, sql: str, params: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._read_lock:
            return self._reader().execute(sql, tuple(params)).fetchall()

    def _read_one(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Row | None:
        with self._read_lock:
            row: sqlite3.Row | None = self._reader().execute(sql, tuple(params)).fetchone()
            return row

    def _reader(self) -> sqlite3.Connection:
        if self._closed:
            raise RuntimeError("the operation journal is closed")
        return self._read_conn

    def get_operation(self, op_id: str) -> OperationRecord | None:
        row = self._read_one("SELECT * FROM operations WHERE id = ?", (op_id,))
        return None if row is None else _row_to_operation(row)

    def list_operations(
        self, statuses: Iterable[str] | None = None, limit: int = 200, offset: int = 0,
        before: Sequence[Any] | None = None, after: Sequence[Any] | None = None,
        *, top_level: bool = False, view_of: str | None = None,
    ) -> list[OperationRecord]:
        """A page of operations: those in flight first, then the newest first.

        ``top_level``: only operations no app view made; ``view_of``: only the calls the
        view of that operation made (see :func:`_operation_filter`).

        ``before`` / ``after``: a page by key, the ``limit`` operations just older / newer
        than the one whose ``(created_at, id)`` is given (newest first either way), for
        ``statuses`` all terminal or all in flight. The status index
        ``(status, created_at, id)`` answers it at any depth of a million rows in well under
        a millisecond; an ``offset`` there walks every row above it (1.7 s at 990,000)."""
        statuses = None if statuses is None else tuple(statuses)
        where, params = _operation_filter(statuses, top_level, view_of)
        table = _operations_read_by(statuses, top_level)
        wanted = set(statuses or ())
        one_section = bool(wanted) and (wanted <= TERMINAL or wanted <= IN_FLIGHT)
        order = "in_flight DESC, created_at DESC, id DESC"
        if one_section:
            # in_flight is the same for every row here; leaving it out lets a one-status
            # page come straight from the status index instead of sorting the history.
            order = "created_at DESC, id DESC"
        key = before if before is not None else after
        if key is None:
            rows = self._read_all(
                f"SELECT * FROM {table} {where} ORDER BY {order} LIMIT ? OFFSET ?",
                (*params, int(limit), int(offset)),
            )
            return _rows_to_operations(rows)
        if not one_section or (before is not None and after is not None) or offset:
            raise ValueError("a page by key needs statuses all finished or all in flight, one key and no offset")
        created_at, op_id = float(key[0]), str(key[1])
        older = before is not None
        rows = self._read_all(
            f"SELECT * FROM {table} {where or 'WHERE 1'} AND (created_at, id) {'<' if older else '>'} (?, ?) "
            f"ORDER BY created_at {'DESC' if older else 'ASC'}, id {'DESC' if older else 'ASC'} LIMIT ?",
            (*params, created_at, op_id, int(limit)),
        )
        records = _rows_to_operations(rows)
        return records if older else records[::-1]

    def count_operations(self, statuses: Iterable[str] | None = None, *, top_level: bool = False,
                         view_of: str | None = None) -> int:
        statuses = None if statuses is None else tuple(statuses)
        where, params = _operation_filter(statuses, top_level, view_of)
        row = self._read_one(f"SELECT COUNT(*) FROM {_operations_read_by(statuses, top_level)} {where}", params)
        assert row is not None  # COUNT(*) always has a row
        count: int = row[0]
        return count

    def unfinished_operations(self) -> list[OperationRecord]:
        """Operations not yet terminal, oldest first: what to resume, poll or flag on start-up."""
        rows = self._read_all("SELECT * FROM operations WHERE in_flight = 1 ORDER BY created_at, id")
        return _rows_to_operations(rows)

    def unfinished_ids(self) -> list[str]:
        """The ids of the operations not yet terminal (no record decoded)."""
        return [row["id"] for row in self._read_all("SELECT id FROM operations WHERE in_flight = 1")]

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
        if status not in _STATUS_VALUES:
            raise ValueError(f"unknown operation status {status!r}")
    if not wanted:
        return "WHERE 0", ()
    return f"WHERE status IN ({', '.join('?' * len(wanted))})", wanted


def _operations_read_by(statuses: tuple[str, ...] | None, top_level: bool) -> str:
    """The operations table, named with the index that answers the read: the top-level
    operations of some statuses come from the partial status index. SQLite's planner,
    without statistics, takes ``view_of IS NULL`` for a selective equality and walks the
    view index instead (every top-level row, then a sort: 6.6 s for the first page of a
    million-row history, 0.35 s for a count, against 1 ms and 45 ms)."""
    if top_level and statuses:
        return "operations INDEXED BY operations_top_level_by_status"
    return "operations"


def _operation_filter(statuses: Iterable[str] | None, top_level: bool,
                      view_of: str | None) -> tuple[str, tuple[str, ...]]:
    """The WHERE clause (with its parameters) for ``statuses``, only top-level operations
    (``top_level``: those no app view made) and only the calls of one operation's view
    (``view_of``); the two last exclude each other."""
    if top_level and view_of is not None:
        raise ValueError("top_level and view_of exclude each other")
    where, params = _status_filter(statuses)
    clauses = [where.removeprefix("WHERE ")] if where else []
    if top_level:
        clauses.append("view_of IS NULL")
    if view_of is not None:
        clauses.append("view_of = ?")
        params = (*params, view_of)
    return ("WHERE " + " AND ".join(clauses) if clauses else ""), params


def _read_operation(db: sqlite_utils.Database, op_id: str) -> OperationRecord:
    cursor = db.execute("SELECT * FROM operations WHERE id = ?", (op_id,))
    found = cursor.fetchone()
    if found is None:
        raise KeyError(f"no operation {op_id}")
    columns = [d[0] for d in cursor.description]
    return _row_to_operation(dict(zip(columns, found, strict=True)))


def _insert_event(db: sqlite_utils.Database, op_id: str, at: float, kind: str, data: dict[str, Any]) -> None:
    db.execute("INSERT INTO events (op_id, at, kind, data) VALUES (?, ?, ?, ?)", (op_id, at, kind, _dumps(data)))
