"""The lab server's persisted state: one SQLite file that lets a restarted lab continue.

What lives here:

* ``sessions`` – handshake-era sessions, so a session id stays valid across a restart;
* ``streams`` / ``messages`` – every message the lab sends for a request, in order, so a
  client can replay a stream by ``Last-Event-ID`` (or ``stream/resume``,
  ``requests/resume``) even after the lab process was restarted;
* ``jobs`` – one row per unit of time-based work (start, duration, steps done, status,
  outcome), so unfinished work continues from where it was;
* ``executions`` – how many times the real work of a tool was started, per tool and per
  operation key, so fault tests can prove that nothing ran twice;
Secrets stay out of the database. Handles that a client presents back to the lab
(session ids, task ids, stream ids, resume tokens, operation tokens) are stored only as
SHA-256 digests (:func:`handle_key`); the lab finds a row by hashing what the client
presents. Stored messages must be replayed verbatim and some carry handles (a
CreateTaskResult, a resume policy), so their payloads are sealed with Fernet under a key
kept in a separate file beside the database (``<state>.key``, mode 0600), which also
derives the key that signs MRTR ``requestState`` blobs. A copy of the SQLite file alone
hands out access to nobody's operations.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from cryptography.fernet import Fernet

from hostapp.oslock import try_lock, unlock

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    key TEXT PRIMARY KEY,
    protocol_version TEXT NOT NULL,
    client_capabilities TEXT NOT NULL,
    log_level TEXT,
    session_stream TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS streams (
    id TEXT PRIMARY KEY,
    session_key TEXT,
    handle_key TEXT UNIQUE,
    kind TEXT NOT NULL,
    closed INTEGER NOT NULL DEFAULT 0,
    delivered_seq INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    touched_at REAL NOT NULL,
    max_idle REAL
);
CREATE TABLE IF NOT EXISTS messages (
    stream_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    payload TEXT NOT NULL,
    is_request INTEGER NOT NULL DEFAULT 0,
    is_error INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (stream_id, seq)
);
CREATE TABLE IF NOT EXISTS jobs (
    key TEXT PRIMARY KEY,
    tool TEXT NOT NULL,
    mechanism TEXT NOT NULL,
    args TEXT NOT NULL,
    started_at REAL NOT NULL,
    seconds REAL NOT NULL,
    steps INTEGER NOT NULL,
    step_done INTEGER NOT NULL DEFAULT 0,
    status TEXT NOT NULL,
    status_message TEXT,
    result TEXT,
    error TEXT,
    out_stream TEXT,
    notify_stream TEXT,
    progress_token TEXT,
    request_id TEXT,
    ttl_ms INTEGER,
    poll_ms INTEGER,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS executions (
    tool TEXT NOT NULL,
    operation_key TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tool, operation_key)
);
"""

#: Job statuses that mean "still to run"; everything else is terminal.
ACTIVE_STATUSES = ("working", "input_required", "submitted")


def handle_key(handle: str) -> str:
    """The one place a client-visible handle becomes a storage key (a SHA-256 digest)."""
    return hashlib.sha256(handle.encode()).hexdigest()


def new_handle() -> str:
    """A fresh unguessable handle (task id, stream id, resume token, session id)."""
    return secrets.token_urlsafe(24)


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"))


def _load(text: str | None) -> Any:
    return None if text is None else json.loads(text)


@dataclass(slots=True)
class SessionRow:
    key: str
    protocol_version: str
    client_capabilities: dict[str, Any]
    log_level: str | None
    session_stream: str


@dataclass(slots=True)
class JobRow:
    """One unit of time-based work. ``step_done`` of ``steps`` is how far it got."""

    key: str
    tool: str
    mechanism: str
    args: dict[str, Any]
    started_at: float
    seconds: float
    steps: int
    step_done: int
    status: str
    status_message: str | None
    result: Any
    error: Any
    out_stream: str | None
    notify_stream: str | None
    progress_token: Any
    request_id: Any
    ttl_ms: int | None
    poll_ms: int | None
    created_at: float
    updated_at: float
    extra: dict[str, Any]


class StateInUse(RuntimeError):
    """Another lab process serves this state file (its pid, when it wrote one)."""

    def __init__(self, path: Path, pid: int | None):
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(f"another lab process ({holder}) serves {path}; one process at a time may: "
                         "a second copy would take over its jobs and streams")
        self.pid = pid


class LabState:
    """The lab's SQLite file. Single writer (the lab's event loop thread), and a single
    serving process: one that serves the state (``serving``) holds an OS lock on
    ``<state>.lock`` while it is open, so a second copy of the lab (a server started
    again beside the running one) is refused instead of marking the first one's jobs
    abandoned and closing its streams. A reader (the tests' counts) takes no lock.
    ``lock_wait``: how long a serving one waits for the lock (a lab being replaced may
    still be on its way out)."""

    def __init__(self, path: str | os.PathLike[str], *, serving: bool = False, lock_wait: float = 0.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _take_lock(self.path.with_name(self.path.name + ".lock"), lock_wait) if serving else None
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        # NORMAL keeps a committed row across a process crash (what the fault tests do);
        # only a power loss could drop the last transactions.
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self._master_key = _load_or_create_key(self.path.with_name(self.path.name + ".key"))
        self._fernet = Fernet(self._master_key)

    def close(self) -> None:
        self.db.close()
        lock, self._lock = self._lock, None
        if lock is not None:
            unlock(lock)
            lock.close()

    # -- keys ----------------------------------------------------------------------
    def signing_key(self) -> bytes:
        """The key that signs MRTR request state; stable across restarts."""
        return hmac.new(self._master_key, b"hostapp-lab request state", hashlib.sha256).digest()

    def _seal(self, payload: dict[str, Any]) -> str:
        return self._fernet.encrypt(json.dumps(payload, separators=(",", ":")).encode()).decode()

    def _unseal(self, token: str) -> dict[str, Any]:
        return json.loads(self._fernet.decrypt(token.encode()))

    # -- sessions ------------------------------------------------------------------
    def add_session(self, session_id: str, protocol_version: str, capabilities: dict[str, Any],
                    session_stream: str) -> None:
        self.db.execute(
            "INSERT INTO sessions (key, protocol_version, client_capabilities, session_stream, created_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (handle_key(session_id), protocol_version, _dump(capabilities), session_stream, time.time()))

    def session(self, session_id: str) -> SessionRow | None:
        row = self.db.execute("SELECT * FROM sessions WHERE key = ?", (handle_key(session_id),)).fetchone()
        if row is None:
            return None
        return SessionRow(row["key"], row["protocol_version"], _load(row["client_capabilities"]),
                          row["log_level"], row["session_stream"])

    def session_stream_of(self, session_key: str) -> str | None:
        row = self.db.execute("SELECT session_stream FROM sessions WHERE key = ?", (session_key,)).fetchone()
        return None if row is None else row["session_stream"]

    def set_log_level(self, session_key: str, level: str) -> None:
        self.db.execute("UPDATE sessions SET log_level = ? WHERE key = ?", (level, session_key))

    def delete_session(self, session_id: str) -> bool:
        cur = self.db.execute("DELETE FROM sessions WHERE key = ?", (handle_key(session_id),))
        return cur.rowcount > 0

    def forget_sessions(self) -> int:
        """Drop every handshake-era session, as a server that keeps them in memory loses
        them when it restarts: an SSE stream can no longer be resumed in one (GET with
        Last-Event-ID needs its session). What the drafts make transport-agnostic (a
        resumable request, a draft stream) and what is bound to no session (tasks, jobs)
        stays, as a server that keeps them in its store does. How many went."""
        return self.db.execute("DELETE FROM sessions").rowcount

    # -- streams and their messages -----------------------------------------------
    def add_stream(self, stream_id: str, kind: str, session_key: str | None,
                   handle: str | None = None, max_idle: float | None = None) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO streams (id, session_key, handle_key, kind, created_at, touched_at, max_idle)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (stream_id, session_key, handle_key(handle) if handle else None, kind, now, now, max_idle))

    def stream(self, stream_id: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM streams WHERE id = ?", (stream_id,)).fetchone()

    def stream_by_handle(self, handle: str) -> sqlite3.Row | None:
        return self.db.execute("SELECT * FROM streams WHERE handle_key = ?", (handle_key(handle),)).fetchone()

    def streams_with_handles(self, session_key: str | None) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT * FROM streams WHERE handle_key IS NOT NULL AND (session_key IS ? OR ? IS NULL)",
            (session_key, session_key)).fetchall()

    def append(self, stream_id: str, payload: dict[str, Any], close: bool = False) -> int:
        is_request = int("method" in payload and "id" in payload)
        is_error = int("error" in payload or bool(payload.get("result", {}).get("isError")))
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            (last,) = self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE stream_id = ?",
                                      (stream_id,)).fetchone()
            seq = last + 1
            self.db.execute("INSERT INTO messages (stream_id, seq, payload, is_request, is_error)"
                            " VALUES (?, ?, ?, ?, ?)", (stream_id, seq, self._seal(payload), is_request, is_error))
            if close:
                self.db.execute("UPDATE streams SET closed = 1 WHERE id = ?", (stream_id,))
        return seq

    def close_stream(self, stream_id: str) -> None:
        self.db.execute("UPDATE streams SET closed = 1 WHERE id = ?", (stream_id,))

    def open_streams(self, kind: str) -> list[str]:
        return [r["id"] for r in self.db.execute("SELECT id FROM streams WHERE kind = ? AND NOT closed", (kind,))]

    def messages_after(self, stream_id: str, after_seq: int) -> list[tuple[int, dict[str, Any]]]:
        rows = self.db.execute("SELECT seq, payload FROM messages WHERE stream_id = ? AND seq > ? ORDER BY seq",
                               (stream_id, after_seq)).fetchall()
        return [(r["seq"], self._unseal(r["payload"])) for r in rows]

    def mark_delivered(self, stream_id: str, seq: int) -> None:
        self.db.execute("UPDATE streams SET delivered_seq = MAX(delivered_seq, ?), touched_at = ? WHERE id = ?",
                        (seq, time.time(), stream_id))

    def adopt_stream(self, stream_id: str | None, kind: str, handle: str, max_idle: float | None) -> None:
        """Give a request's stream a handle the client can come back with (a draft stream,
        a resumable request), and how long it may go untouched."""
        self.db.execute("UPDATE streams SET kind = ?, handle_key = ?, max_idle = ? WHERE id = ?",
                        (kind, handle_key(handle), max_idle, stream_id))

    def touch_stream(self, stream_id: str) -> None:
        self.db.execute("UPDATE streams SET touched_at = ? WHERE id = ?", (time.time(), stream_id))

    def pending_summary(self, stream_id: str, after_seq: int) -> dict[str, bool]:
        row = self.db.execute(
            "SELECT COUNT(*) AS n, COALESCE(MAX(is_request), 0) AS req, COALESCE(MAX(is_error), 0) AS err"
            " FROM messages WHERE stream_id = ? AND seq > ?", (stream_id, after_seq)).fetchone()
        return {"pendingMessages": row["n"] > 0, "hasRequest": bool(row["req"]), "hasError": bool(row["err"])}

    def prune(self, older_than: float) -> None:
        """Forget closed streams (and their messages) last touched before ``older_than``."""
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("DELETE FROM messages WHERE stream_id IN (SELECT id FROM streams"
                            " WHERE closed = 1 AND touched_at < ?)", (older_than,))
            self.db.execute("DELETE FROM streams WHERE closed = 1 AND touched_at < ?", (older_than,))

    # -- jobs ----------------------------------------------------------------------
    def add_job(self, job: JobRow) -> None:
        self.db.execute(
            "INSERT INTO jobs (key, tool, mechanism, args, started_at, seconds, steps, step_done, status,"
            " status_message, result, error, out_stream, notify_stream, progress_token, request_id, ttl_ms,"
            " poll_ms, created_at, updated_at, extra) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (job.key, job.tool, job.mechanism, _dump(job.args), job.started_at, job.seconds, job.steps,
             job.step_done, job.status, job.status_message, _dump(job.result), _dump(job.error), job.out_stream,
             job.notify_stream, _dump(job.progress_token), _dump(job.request_id), job.ttl_ms, job.poll_ms,
             job.created_at, job.updated_at, _dump(job.extra)))

    def has_job(self, key: str) -> bool:
        return self.db.execute("SELECT 1 FROM jobs WHERE key = ?", (key,)).fetchone() is not None

    def job(self, key: str) -> JobRow | None:
        row = self.db.execute("SELECT * FROM jobs WHERE key = ?", (key,)).fetchone()
        return None if row is None else self._job(row)

    def jobs(self, mechanism: str | None = None, active_only: bool = False) -> list[JobRow]:
        sql = "SELECT * FROM jobs WHERE 1=1"
        args: list[Any] = []
        if mechanism:
            sql += " AND mechanism = ?"
            args.append(mechanism)
        if active_only:
            sql += f" AND status IN ({','.join('?' * len(ACTIVE_STATUSES))})"
            args.extend(ACTIVE_STATUSES)
        return [self._job(r) for r in self.db.execute(sql + " ORDER BY created_at, key", args)]

    def update_job(self, key: str, **fields: Any) -> None:
        json_fields = {"result", "error", "progress_token", "request_id", "extra", "args"}
        cols = []
        values: list[Any] = []
        for name, value in fields.items():
            cols.append(f"{name} = ?")
            values.append(_dump(value) if name in json_fields else value)
        cols.append("updated_at = ?")
        values.append(time.time())
        self.db.execute(f"UPDATE jobs SET {', '.join(cols)} WHERE key = ?", (*values, key))

    @staticmethod
    def _job(row: sqlite3.Row) -> JobRow:
        return JobRow(row["key"], row["tool"], row["mechanism"], _load(row["args"]), row["started_at"],
                      row["seconds"], row["steps"], row["step_done"], row["status"], row["status_message"],
                      _load(row["result"]), _load(row["error"]), row["out_stream"], row["notify_stream"],
                      _load(row["progress_token"]), _load(row["request_id"]), row["ttl_ms"], row["poll_ms"],
                      row["created_at"], row["updated_at"], _load(row["extra"]))

    # -- execution accounting ----------------------------------------------------------
    def count_execution(self, tool: str, operation_key: str) -> None:
        self.db.execute(
            "INSERT INTO executions (tool, operation_key, count) VALUES (?, ?, 1)"
            " ON CONFLICT (tool, operation_key) DO UPDATE SET count = count + 1", (tool, operation_key))

    def execution_counts(self) -> dict[str, int]:
        rows = self.db.execute("SELECT tool, SUM(count) AS n FROM executions GROUP BY tool ORDER BY tool")
        return {r["tool"]: r["n"] for r in rows}

    def execution_count(self, tool: str, operation_key: str | None = None) -> int:
        if operation_key is None:
            row = self.db.execute("SELECT COALESCE(SUM(count), 0) FROM executions WHERE tool = ?", (tool,))
        else:
            row = self.db.execute("SELECT COALESCE(SUM(count), 0) FROM executions WHERE tool = ? AND operation_key = ?",
                                  (tool, operation_key))
        return row.fetchone()[0]

    def duplicate_executions(self) -> Iterator[tuple[str, str, int]]:
        for r in self.db.execute("SELECT tool, operation_key, count FROM executions WHERE count > 1"):
            yield r["tool"], r["operation_key"], r["count"]


def _load_or_create_key(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    key = Fernet.generate_key()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:
        f.write(key)
    return key


def execution_counts(state_file: str | os.PathLike[str]) -> dict[str, int]:
    """How many times each tool's work was really started, read from a lab's state file."""
    state = LabState(state_file)
    try:
        return state.execution_counts()
    finally:
        state.close()


def execution_count(state_file: str | os.PathLike[str], tool: str, operation: str | None = None) -> int:
    """Starts of ``tool``'s work, optionally for one operation handle (task id, operation token…)."""
    state = LabState(state_file)
    try:
        return state.execution_count(tool, None if operation is None else handle_key(operation))
    finally:
        state.close()


def _take_lock(path: Path, wait: float) -> IO[str]:
    """The state's OS lock, waiting up to ``wait`` seconds (a lab being replaced may still
    be on its way out); StateInUse when another process keeps it."""
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held while the state is open
    deadline = time.monotonic() + wait
    while not try_lock(handle):
        if time.monotonic() >= deadline:
            handle.seek(0)
            text = handle.read().strip()
            handle.close()
            raise StateInUse(path.with_name(path.name.removesuffix(".lock")), int(text) if text.isdigit() else None)
        time.sleep(0.1)
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle
