"""The journal file itself: its schema, the steps that bring an older file up to date, WAL.

The schema version lives in ``PRAGMA user_version`` as ``major << 16 | minor``. A newer
minor version only adds things an older hostapp may ignore; a newer major version is
refused with :class:`JournalTooNew`. Every step of the schema is a :class:`Migration` in
:data:`MIGRATIONS`, oldest first, and runs in its own transaction together with its
``user_version`` bump, so a journal of any earlier version opens and is brought up to date.

The queries live in :mod:`hostapp.store.journal`, the writer thread in
:mod:`hostapp.store.journal_writer`; both open transactions with :func:`write_transaction`.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

log = logging.getLogger("hostapp.store.journal")

#: How long opening a journal waits for another process switching it to WAL at the same time.
WAL_SWITCH_WAIT_SECONDS = 10.0


class JournalTooNew(Exception):
    """The journal file was written by a newer hostapp with an incompatible schema."""


def _create_schema_1_0(db: sqlite_utils.Database) -> None:
    db.table("servers").create(
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
    db.table("operations").create(
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
    operations = db.table("operations")
    operations.create_index(["in_flight", "created_at", "id"], index_name="operations_by_list_order")
    operations.create_index(["status", "created_at", "id"], index_name="operations_by_status")
    operations.create_index(["server", "created_at"], index_name="operations_by_server")
    db.table("events").create(
        {"seq": int, "op_id": str, "at": float, "kind": str, "data": str},
        pk="seq",
        not_null={"op_id", "at", "kind"},
    )
    db.table("events").create_index(["op_id", "seq"], index_name="events_by_operation")
    db.execute(
        "CREATE TRIGGER events_append_only BEFORE UPDATE ON events "
        "BEGIN SELECT RAISE(ABORT, 'the event timeline is append-only'); END"
    )


def _drop_unused_operation_columns_2_0(db: sqlite_utils.Database) -> None:
    # No hostapp ever set them: an outcome is delivered once through the terminal
    # transition itself (finish_operation), and no question was kept in the journal. A
    # major step, because a 1.x hostapp writes both columns with every new operation.
    # (ALTER TABLE ... DROP COLUMN needs SQLite 3.35; neither column is in an index.)
    db.execute("ALTER TABLE operations DROP COLUMN delivered")
    db.execute("ALTER TABLE operations DROP COLUMN pending_input")


def _request_id_blocks_2_1(db: sqlite_utils.Database) -> None:
    # Every process that connects to a server reserves a block of JSON-RPC ids here, so no
    # two operations of one server are ever sent under the same id, whichever process
    # (or lifetime of the host) sent them. ``next`` is the first id not yet reserved.
    db.execute("CREATE TABLE request_ids (server TEXT PRIMARY KEY, next INTEGER NOT NULL)")


def _add_server_auth_2_2(db: sqlite_utils.Database) -> None:
    # How a server signs in (hostapp.auth.settings.AuthSettings.to_dict(), JSON; never a
    # secret). A minor step: an older 2.x hostapp ignores the column and signs in by default.
    db.table("servers").add_column("auth", str)


def _add_open_question_2_3(db: sqlite_utils.Database) -> None:
    # A server's question (elicitation) still waiting for the person's answer, with its
    # JSON-RPC id: a host that stops before answering asks the person again after its
    # restart and sends the answer under that id (see hostapp.engine.traffic). Not a
    # secret: MCP forbids asking for sensitive data in a form or putting it in a URL, and
    # the question's _meta (which names the task) is left out.
    # A minor step: an older 2.x hostapp ignores the column, and loses the question as it did.
    db.table("operations").add_column("open_question", str)


def _add_server_roots_2_4(db: sqlite_utils.Database) -> None:
    # The folders a server is given as MCP roots (a JSON list of absolute paths). A minor
    # step: an older 2.x hostapp ignores the column and declares no roots.
    db.table("servers").add_column("roots", str)


def _add_server_log_level_2_5(db: sqlite_utils.Database) -> None:
    # The level of the log messages a server is asked to send (logging/setLevel). A minor
    # step: an older 2.x hostapp ignores the column and leaves the server's default.
    db.table("servers").add_column("log_level", str)


def _add_view_of_2_6(db: sqlite_utils.Database) -> None:
    # The operation whose MCP App view made this call (None: a call of its own). The
    # history lists top-level operations and folds a view's calls under their operation.
    # Indexes, so that a monitor's thousands of polls are never walked past to read a page:
    # by view (one view's calls, or with view_of NULL the top-level operations, each in the
    # list's order: in flight first, then the newest), and the top-level operations by
    # status (a filter's page by key; partial). A minor step: an older 2.x hostapp ignores
    # the column and lists a view's calls at top level.
    db.table("operations").add_column("view_of", str)
    db.execute("CREATE INDEX operations_by_view ON operations (view_of, in_flight, created_at, id)")
    db.execute("CREATE INDEX operations_top_level_by_status ON operations (status, created_at, id) "
               "WHERE view_of IS NULL")


def _add_stalled_and_view_calls_2_7(db: sqlite_utils.Database) -> None:
    # Why the host found an operation in flight stalled (None: it is not), so that a
    # restarted agent shows it stalled until the operation's next sign of life; and how
    # many calls the operation's app view made, kept as they are created (the list shows
    # it on the view's own row without counting each row's calls), counted here once for
    # the calls made before. A minor step: an older 2.x hostapp ignores both columns (and
    # does not count the calls its views make meanwhile).
    db.table("operations").add_column("stalled", str)
    db.execute("ALTER TABLE operations ADD COLUMN view_calls INTEGER NOT NULL DEFAULT 0")
    db.execute("UPDATE operations SET view_calls = (SELECT COUNT(*) FROM operations AS call "
               "WHERE call.view_of = operations.id) WHERE id IN (SELECT view_of FROM operations "
               "WHERE view_of IS NOT NULL)")


@dataclass(frozen=True)
class Migration:
    """One step of the schema: brings a journal to ``version`` by calling ``apply``."""

    version: tuple[int, int]
    description: str
    apply: Callable[[sqlite_utils.Database], None]


#: Every schema step, oldest first. Append new ones; never edit a released one. A step
#: that only adds (columns, tables, indexes) bumps the minor version; anything an older
#: hostapp could misread bumps the major version.
MIGRATIONS: tuple[Migration, ...] = (
    Migration((1, 0), "servers, operations, events", _create_schema_1_0),
    Migration((2, 0), "operations without delivered and pending_input", _drop_unused_operation_columns_2_0),
    Migration((2, 1), "blocks of request ids reserved per server", _request_id_blocks_2_1),
    Migration((2, 2), "servers' sign-in settings", _add_server_auth_2_2),
    Migration((2, 3), "a server's question left open", _add_open_question_2_3),
    Migration((2, 4), "servers' roots", _add_server_roots_2_4),
    Migration((2, 5), "servers' log level", _add_server_log_level_2_5),
    Migration((2, 6), "the operation whose view made a call", _add_view_of_2_6),
    Migration((2, 7), "why an operation stalled; how many calls its view made", _add_stalled_and_view_calls_2_7),
)

#: The schema this code writes: (major, minor).
SCHEMA_VERSION: tuple[int, int] = MIGRATIONS[-1].version


def encode_user_version(version: tuple[int, int]) -> int:
    """``(major, minor)`` as the integer kept in ``PRAGMA user_version``."""
    major, minor = version
    if not (0 <= major < 0x7FFF and 0 <= minor <= 0xFFFF):
        raise ValueError(f"schema version out of range: {version}")
    return major << 16 | minor


def decode_user_version(value: int) -> tuple[int, int]:
    """The ``(major, minor)`` kept in a ``PRAGMA user_version`` value."""
    return value >> 16, value & 0xFFFF


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
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
        with write_transaction(db.conn):
            current = _schema_version(db, target, path)  # another process may have been first
            if step.version <= current:
                continue
            step.apply(db)
            db.execute(f"PRAGMA user_version = {encode_user_version(step.version)}")
            current = step.version
        log.info("journal schema migrated to %d.%d (%s)", *step.version, step.description)
    return current


def enter_wal_mode(conn: sqlite3.Connection) -> str:
    """Switch to WAL and return the journal mode now in force.

    Two processes opening a brand-new journal at once (the window and a command) both ask
    for the switch; SQLite answers the loser "database is locked" at once, without waiting
    for its busy timeout, so the loser retries until the winner is done.
    """
    deadline = time.monotonic() + WAL_SWITCH_WAIT_SECONDS
    delay = 0.005
    while True:
        try:
            mode: str = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            return mode.lower()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
