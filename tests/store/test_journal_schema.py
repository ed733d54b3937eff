"""Opening a journal: WAL, schema versions, migrations, and indexes for a long history."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
import sqlite_utils

from hostapp.store.journal import (
    MIGRATIONS,
    SCHEMA_VERSION,
    JournalTooNew,
    Migration,
    OperationJournal,
    OperationRecord,
    decode_user_version,
    encode_user_version,
    migrate,
)


def user_version(path: Path) -> tuple[int, int]:
    with sqlite3.connect(path) as conn:
        return decode_user_version(conn.execute("PRAGMA user_version").fetchone()[0])


def test_a_new_journal_is_wal_at_the_current_schema(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    with OperationJournal(path) as journal:
        assert journal.schema_version == SCHEMA_VERSION
    assert user_version(path) == SCHEMA_VERSION
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"servers", "operations", "events"} <= tables


def test_user_version_packs_major_and_minor():
    assert encode_user_version((1, 0)) == 65536
    assert decode_user_version(encode_user_version((3, 7))) == (3, 7)
    with pytest.raises(ValueError):
        encode_user_version((1, 70000))


def test_reopening_keeps_data_and_runs_no_step_twice(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    with OperationJournal(path) as journal:
        journal.create_operation_sync(OperationRecord("op1", "srv", "tools/call", {"name": "t"}))
    with OperationJournal(path) as journal:
        assert journal.get_operation("op1").params == {"name": "t"}


def test_migrations_run_in_order_from_any_older_version(tmp_path: Path):
    applied: list[str] = []

    major, minor = SCHEMA_VERSION

    def add_notes(db: sqlite_utils.Database) -> None:
        applied.append("x.1")
        db["operations"].add_column("note", str)

    def add_tags(db: sqlite_utils.Database) -> None:
        applied.append("x.2")
        db["tags"].create({"op_id": str, "tag": str})

    steps = (*MIGRATIONS, Migration((major, minor + 1), "notes", add_notes),
             Migration((major, minor + 2), "tags", add_tags))
    path = tmp_path / "journal.sqlite3"
    OperationJournal(path).close()  # a journal at the current version, as an older hostapp left it
    with OperationJournal(path, migrations=steps) as journal:
        assert journal.schema_version == (major, minor + 2)
    assert applied == ["x.1", "x.2"]
    assert user_version(path) == (major, minor + 2)
    db = sqlite_utils.Database(path)
    assert "note" in db["operations"].columns_dict and db["tags"].exists()
    db.close()
    with OperationJournal(path, migrations=steps):
        pass
    assert applied == ["x.1", "x.2"]  # nothing runs again


def test_a_2_0_journal_gains_the_servers_sign_in_settings(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    before_auth = tuple(m for m in MIGRATIONS if m.version <= (2, 0))
    OperationJournal(path, migrations=before_auth).close()
    with sqlite3.connect(path) as conn:  # a server as a 2.0 hostapp wrote it
        conn.execute("INSERT INTO servers (name, transport, url, enabled) "
                     "VALUES ('remote', 'http', 'https://example.test/mcp', 1)")
    assert user_version(path) == (2, 0)
    with OperationJournal(path) as journal:
        assert journal.get_server("remote").auth is None
        settings = {"grant": "client_credentials", "client_id": "ci", "dpop": True}
        journal.update_server("remote", auth=settings)
        assert journal.get_server("remote").auth == settings
    assert user_version(path) >= (2, 2)


def test_a_failing_migration_leaves_the_previous_version(tmp_path: Path):
    def broken(db: sqlite_utils.Database) -> None:
        db["operations"].add_column("half_done", str)
        raise RuntimeError("disk on fire")

    path = tmp_path / "journal.sqlite3"
    OperationJournal(path).close()
    with pytest.raises(RuntimeError, match="disk on fire"):
        next_minor = (SCHEMA_VERSION[0], SCHEMA_VERSION[1] + 1)
        OperationJournal(path, migrations=(*MIGRATIONS, Migration(next_minor, "broken", broken)))
    assert user_version(path) == SCHEMA_VERSION
    db = sqlite_utils.Database(path)
    assert "half_done" not in db["operations"].columns_dict
    db.close()


def test_a_newer_minor_version_opens(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    OperationJournal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {encode_user_version((SCHEMA_VERSION[0], 99))}")
    with OperationJournal(path) as journal:
        journal.create_operation_sync(OperationRecord("op1", "srv", "tools/call", {}))
        assert journal.schema_version == (SCHEMA_VERSION[0], 99)
    assert user_version(path) == (SCHEMA_VERSION[0], 99)  # never downgraded


def test_a_newer_major_version_is_refused_with_a_clear_message(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    OperationJournal(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {encode_user_version((SCHEMA_VERSION[0] + 1, 3))}")
    with pytest.raises(JournalTooNew) as caught:
        OperationJournal(path)
    message = str(caught.value)
    assert f"newer hostapp (schema {SCHEMA_VERSION[0] + 1}.3)" in message
    assert str(path) in message and "HOSTAPP_HOME" in message
    assert user_version(path) == (SCHEMA_VERSION[0] + 1, 3)  # untouched


def test_migrate_reports_the_version_it_reached(tmp_path: Path):
    db = sqlite_utils.Database(tmp_path / "x.sqlite3")
    assert migrate(db) == SCHEMA_VERSION
    assert migrate(db) == SCHEMA_VERSION
    db.close()


def _plan(path: Path, sql: str) -> str:
    with sqlite3.connect(path) as conn:
        return " | ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))


def _statements(journal: OperationJournal, read) -> list[str]:
    """The SQL (values inlined) that one read of the journal runs."""
    seen: list[str] = []
    journal._read_conn.set_trace_callback(seen.append)
    try:
        read()
    finally:
        journal._read_conn.set_trace_callback(None)
    return seen


def test_a_history_of_100000_operations_pages_from_indexes(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    OperationJournal(path).close()
    base = time.time() - 1_000_000
    db = sqlite_utils.Database(path)
    db["operations"].insert_all(
        (
            {
                "id": f"op{i:06d}",
                "server": "srv",
                "method": "tools/call",
                "params": "{}",
                "status": "completed",
                "created_at": base + i,
                "updated_at": base + i,
                "resumable": 1,
                "in_flight": 0,
            }
            for i in range(100_000)
        ),
        batch_size=5000,
    )
    db.close()
    with OperationJournal(path) as journal:
        running = OperationRecord("live", "srv", "tools/call", {}, status="running", created_at=base - 10)
        journal.create_operation_sync(running)
        first = journal.list_operations(limit=3)
        assert [op.id for op in first] == ["live", "op099999", "op099998"]
        deep = journal.list_operations(statuses=["completed"], limit=2, offset=99_998)
        assert [op.id for op in deep] == ["op000001", "op000000"]
        assert journal.count_operations() == 100_001
        assert journal.count_operations(["completed"]) == 100_000
        assert [op.id for op in journal.unfinished_operations()] == ["live"]

        reads = {
            "page": lambda: journal.list_operations(limit=200, offset=400),
            "page of one status": lambda: journal.list_operations(statuses=["completed"], limit=200),
            "count of one status": lambda: journal.count_operations(["failed"]),
            "unfinished": journal.unfinished_operations,
            "timeline": lambda: journal.events("live"),
        }
        plans = {name: [_plan(path, sql) for sql in _statements(journal, read)] for name, read in reads.items()}
    for name, statement_plans in plans.items():
        assert statement_plans, name
        for plan in statement_plans:
            assert "USING INDEX" in plan or "USING COVERING INDEX" in plan, (name, plan)
            assert "TEMP B-TREE" not in plan, (name, plan)


def _journal_1_0(path: Path) -> None:
    """A journal file exactly as hostapp wrote it at schema 1.0 (a server, five operations
    in every state, with a handle, a question and a delivered outcome, and their events)."""
    conn = sqlite3.connect(path)
    try:
        conn.executescript((Path(__file__).parent / "data" / "journal_1_0.sql").read_text())
    finally:
        conn.close()


def test_a_journal_of_schema_1_0_opens_upgraded_and_keeps_working(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    _journal_1_0(path)
    assert user_version(path) == (1, 0)
    with OperationJournal(path) as journal:
        assert journal.schema_version == SCHEMA_VERSION == (2, 7)
        assert [(s.name, s.auth, s.roots, s.log_level) for s in journal.list_servers()] == [("lab", None, [], None)]
        assert journal.update_server("lab", log_level="debug").log_level == "debug"
        with pytest.raises(ValueError, match="log_level"):
            journal.update_server("lab", log_level="verbose")
        assert journal.update_server("lab", roots=[str(tmp_path)]).roots == [str(tmp_path)]
        assert journal.get_server("lab").roots == [str(tmp_path)]
        with pytest.raises(ValueError, match="absolute"):
            journal.update_server("lab", roots=["relative/folder"])
        ops = {op.id: op for op in journal.list_operations()}
        assert {op_id: op.status for op_id, op in ops.items()} == {
            "op-1": "pending", "op-2": "running", "op-3": "input_required",
            "op-4": "completed", "op-5": "unknown",
        }
        running = ops["op-2"]
        assert running.handle_ref == "task_id:" + "ab" * 16 and running.handle == {"poll_ms": 500}
        assert (running.progress, running.total, running.message) == (3.0, 10.0, "step 3/10")
        assert ops["op-4"].result == {"content": [{"type": "text", "text": "done"}]}
        assert not ops["op-5"].resumable and ops["op-5"].error == {"message": "the server restarted"}
        assert [op.id for op in journal.unfinished_operations()] == ["op-1", "op-2", "op-3"]
        assert all(op.open_question is None for op in ops.values())  # 1.0 kept no question
        assert [e.kind for e in journal.events("op-2")] == ["status", "status", "progress"]
        question = {"id": 7, "params": {"message": "Which one?", "requestedSchema": {"type": "object"}}}
        assert journal.update_operation_sync("op-3", open_question=question).open_question == question
        # and it goes on: the old rows change and end, new ones are written
        assert journal.update_operation_sync("op-3", status="running").status == "running"
        assert journal.finish_operation_sync("op-3", "completed", result={"ok": True})
        journal.create_operation_sync(OperationRecord("op-6", "lab", "tools/call", {}))
        assert journal.count_operations(["pending"]) == 2
    with sqlite3.connect(path) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(operations)")}
        indexes = {row[1] for row in conn.execute("PRAGMA index_list(operations)")}
    assert "delivered" not in columns and "pending_input" not in columns and "open_question" in columns
    assert {"operations_by_list_order", "operations_by_status", "operations_by_server"} <= indexes
    assert user_version(path) == (2, 7)
    with OperationJournal(path) as journal:  # opening it again changes nothing
        assert journal.schema_version == (2, 7) and journal.count_operations() == 6
        assert journal.get_operation("op-3").open_question is None  # its end struck the question out
        # The ids the 1.0 journal's operations were sent under are never handed out again.
        used = [op.jsonrpc_id for op in journal.list_operations() if isinstance(op.jsonrpc_id, int)]
        assert journal.reserve_request_ids("lab", 10) > max(used, default=0)


def test_a_journal_of_schema_2_5_gains_view_of_and_folds_a_views_calls(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    at_2_5 = [step for step in MIGRATIONS if step.version <= (2, 5)]
    with OperationJournal(path, migrations=at_2_5):
        pass
    assert user_version(path) == (2, 5)
    with sqlite3.connect(path) as conn:  # a row as a 2.5 hostapp writes it
        assert "view_of" not in {row[1] for row in conn.execute("PRAGMA table_info(operations)")}
        conn.execute("INSERT INTO operations (id, server, method, params, status, created_at, updated_at, in_flight) "
                     "VALUES ('old', 'lab', 'tools/call', '{\"name\":\"t\"}', 'pending', 1.0, 1.0, 1)")

    with OperationJournal(path) as journal:
        assert journal.schema_version == SCHEMA_VERSION == (2, 7)
        assert journal.get_operation("old").view_of is None  # a call of its own
        journal.create_operation_sync(OperationRecord("parent", "lab", "tools/call", {}, created_at=2.0))
        for n in range(3):
            journal.create_operation_sync(OperationRecord(f"poll{n}", "lab", "tools/call", {}, created_at=3.0 + n,
                                                          view_of="parent"))
        journal.finish_operation_sync("poll0", "completed", result={})
        with pytest.raises(TypeError, match="view_of"):
            journal.update_operation_sync("poll1", view_of=None)  # set once, at creation

        assert [op.id for op in journal.list_operations()] == ["poll2", "poll1", "parent", "old", "poll0"]
        assert [op.id for op in journal.list_operations(top_level=True)] == ["parent", "old"]
        assert [op.id for op in journal.list_operations(view_of="parent")] == ["poll2", "poll1", "poll0"]
        assert journal.get_operation("poll2").view_of == "parent"
        assert journal.count_operations(top_level=True) == 2
        assert journal.count_operations(view_of="parent") == 3
        assert journal.count_operations(["running", "pending"], view_of="parent") == 2
        # paging by key keeps the filter
        assert [op.id for op in journal.list_operations(["pending"], before=(5.0, "poll2"), view_of="parent")] \
            == ["poll1"]
        assert [op.id for op in journal.list_operations(["pending"], top_level=True, before=(9.0, "z"))] \
            == ["parent", "old"]
        with pytest.raises(ValueError, match="exclude"):
            journal.list_operations(top_level=True, view_of="parent")
        plans = [
            ("operations_by_view", lambda: journal.list_operations(view_of="parent")),
            ("operations_by_view", lambda: journal.list_operations(top_level=True)),
            ("operations_top_level_by_status", lambda: journal.list_operations(
                ["completed"], top_level=True, before=(9.0, "z"))),
        ]
        seen = [(index, [_plan(path, sql) for sql in _statements(journal, read)]) for index, read in plans]
    for index, statement_plans in seen:
        assert statement_plans and all(f"INDEX {index} " in plan for plan in statement_plans), (index, statement_plans)
        assert not any("TEMP B-TREE" in plan for plan in statement_plans), (index, statement_plans)
    assert user_version(path) == (2, 7)


def test_a_journal_of_schema_2_6_gains_the_stalled_mark_and_its_views_call_counts(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    with OperationJournal(path, migrations=[step for step in MIGRATIONS if step.version <= (2, 6)]):
        pass
    with sqlite3.connect(path) as conn:  # a row as a 2.6 hostapp writes it
        assert "stalled" not in {row[1] for row in conn.execute("PRAGMA table_info(operations)")}
        conn.execute("INSERT INTO operations (id, server, method, params, status, created_at, updated_at, in_flight) "
                     "VALUES ('old', 'lab', 'tools/call', '{\"name\":\"t\"}', 'running', 1.0, 1.0, 1)")
        for n in range(3):  # calls its view made, journaled by 2.6
            conn.execute("INSERT INTO operations (id, server, method, params, status, created_at, updated_at, "
                         "in_flight, view_of) VALUES (?, 'lab', 'tools/call', '{}', 'completed', 2.0, 2.0, 0, 'old')",
                         [f"poll{n}"])
    with OperationJournal(path) as journal:
        assert journal.schema_version == SCHEMA_VERSION == (2, 7)
        assert journal.get_operation("old").stalled is None
        # The calls made before are counted once by the step, those made after as they come.
        assert journal.get_operation("old").view_calls == 3 and journal.get_operation("poll0").view_calls == 0
        journal.create_operation_sync(OperationRecord("poll3", "lab", "tools/call", {}, view_of="old"))
        assert journal.get_operation("old").view_calls == 4
        with pytest.raises(TypeError, match="view_calls"):
            journal.update_operation_sync("old", view_calls=0)
        marked = journal.update_operation_sync("old", stalled="no sign of life for 30 s")
        # The host's own finding is not news of the operation: its last news stays.
        assert marked.stalled == "no sign of life for 30 s" and marked.updated_at == 1.0
        assert journal.get_operation("old").stalled == "no sign of life for 30 s"
        assert journal.update_operation_sync("old", stalled=None).stalled is None
        journal.update_operation_sync("old", stalled="again")
        journal.finish_operation_sync("old", "completed", result={})
        assert journal.update_operation_sync("old", stalled=None).stalled is None  # cleared after the end too
