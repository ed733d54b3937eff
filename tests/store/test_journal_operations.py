"""Operations and servers in the journal: lifecycle, write-ahead commits, batching, reads."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from hostapp.store.journal import (
    OperationJournal,
    OperationRecord,
    ServerConfig,
    new_operation_id,
)
from hostapp.store.status import StatusTransitionError
from tests.support.waiting import until_async

REF = "task_id:" + "ab" * 16


def record(op_id: str | None = None, **fields) -> OperationRecord:
    return OperationRecord(op_id or new_operation_id(), "srv", "tools/call", {"name": "slow", "arguments": {}},
                           **fields)


def committed_row(path: Path, op_id: str) -> dict | None:
    """What another process would read from the file right now."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        row = conn.execute("SELECT * FROM operations WHERE id = ?", (op_id,)).fetchone()
        return dict(row) if row else None
    finally:
        conn.close()


# -- lifecycle ------------------------------------------------------------------------


async def test_create_commits_before_returning(journal: OperationJournal):
    op = record(tool="slow", jsonrpc_id="abc", deadline=123.5, handle={"poll_ms": 500})
    await journal.create_operation(op)
    row = committed_row(journal.path, op.id)
    assert row is not None and row["status"] == "pending"
    back = journal.get_operation(op.id)
    assert back == op
    assert back.jsonrpc_id == "abc"
    other = record(jsonrpc_id=7)
    journal.create_operation_sync(other)
    assert journal.get_operation(other.id).jsonrpc_id == 7  # the JSON type survives


async def test_create_twice_is_refused(journal: OperationJournal):
    op = record("dup")
    await journal.create_operation(op)
    with pytest.raises(ValueError, match="already exists"):
        await journal.create_operation(op)


async def test_update_checks_the_transition_and_keeps_a_timeline(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    updated = await journal.update_operation(op.id, status="running", jsonrpc_id=3, mechanism="tasks_2025")
    assert updated.status == "running" and updated.mechanism == "tasks_2025"
    assert committed_row(journal.path, op.id)["jsonrpc_id"] == "3"
    await journal.update_operation(op.id, status="input_required")
    with pytest.raises(StatusTransitionError, match="input_required to pending"):
        await journal.update_operation(op.id, status="pending")
    assert journal.get_operation(op.id).status == "input_required"
    statuses = [(e.kind, e.data) for e in journal.events(op.id)]
    assert statuses == [
        ("status", {"to": "pending"}),
        ("status", {"from": "pending", "to": "running"}),
        ("status", {"from": "running", "to": "input_required"}),
    ]


async def test_handle_is_committed_before_the_caller_acts(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    await journal.update_operation(op.id, handle_ref=REF, handle={"poll_interval_ms": 1000})
    row = committed_row(journal.path, op.id)
    assert row["handle_ref"] == REF and '"poll_interval_ms":1000' in row["handle"]


async def test_a_plaintext_handle_is_refused_without_echoing_it(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    with pytest.raises(ValueError) as caught:
        await journal.update_operation(op.id, handle_ref="s3cr3t-token-value")
    assert "s3cr3t" not in str(caught.value)


async def test_update_refuses_unknown_fields_and_operations(journal: OperationJournal):
    with pytest.raises(TypeError):
        await journal.update_operation("x", colour="red")
    with pytest.raises(TypeError):
        await journal.update_operation("x", id="y")
    with pytest.raises(KeyError):
        await journal.update_operation("missing", status="running")


async def test_finish_happens_once(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    await journal.update_operation(op.id, status="running")
    assert await journal.finish_operation(op.id, "completed", result={"content": []}) is True
    assert await journal.finish_operation(op.id, "failed", error={"code": 1}) is False
    assert journal.finish_operation_sync(op.id, "completed", result={"other": 1}) is False
    done = journal.get_operation(op.id)
    assert done.status == "completed" and done.result == {"content": []} and done.error is None
    assert done.finished_at is not None and done.terminal
    assert [e.data.get("to") for e in journal.events(op.id)] == ["pending", "running", "completed"]


async def test_concurrent_finishes_deliver_once(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    outcomes = await asyncio.gather(*(journal.finish_operation(op.id, "completed", result={"n": n}) for n in range(20)))
    assert outcomes.count(True) == 1
    winner = outcomes.index(True)
    assert journal.get_operation(op.id).result == {"n": winner}


async def test_finish_needs_a_terminal_status_and_an_operation(journal: OperationJournal):
    with pytest.raises(ValueError):
        await journal.finish_operation("x", "running")
    with pytest.raises(KeyError):
        await journal.finish_operation("missing", "completed")


async def test_a_terminal_outcome_never_changes(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    await journal.finish_operation(op.id, "unknown", error={"message": "the server restarted"})
    for change in ({"status": "running"}, {"result": {"x": 1}}, {"progress": 5.0}, {"status": "completed"}):
        with pytest.raises(StatusTransitionError):
            await journal.update_operation(op.id, **change)
    # bookkeeping may still change: resumability, and dropping the handle's secret
    marked = await journal.update_operation(op.id, resumable=False, handle_ref=None, status="unknown")
    assert not marked.resumable and marked.status == "unknown"
    assert journal.get_operation(op.id).error == {"message": "the server restarted"}


async def test_an_ended_operation_keeps_no_open_question(journal: OperationJournal):
    # The end strikes the question: nobody is owed an answer any more. A strike that
    # races the end finds nothing to change; a question set after the end is refused.
    op = record()
    await journal.create_operation(op)
    question = {"id": 3, "params": {"message": "Which one?"}}
    await journal.update_operation(op.id, status="input_required", open_question=question)
    await journal.finish_operation(op.id, "completed", result={"content": []})
    assert journal.get_operation(op.id).open_question is None
    assert (await journal.update_operation(op.id, open_question=None)).status == "completed"
    with pytest.raises(StatusTransitionError):
        await journal.update_operation(op.id, open_question=question)


async def test_unfinished(journal: OperationJournal):
    a, b, c = record("a", created_at=1.0), record("b", created_at=2.0), record("c", created_at=3.0)
    for op in (a, b, c):
        await journal.create_operation(op)
    await journal.finish_operation("b", "completed")
    assert [op.id for op in journal.unfinished_operations()] == ["a", "c"]
    assert sorted(journal.unfinished_ids()) == ["a", "c"]


async def test_list_puts_in_flight_first_then_newest(journal: OperationJournal):
    for i, status in enumerate(["completed", "running", "failed", "pending", "cancelled"]):
        await journal.create_operation(record(f"op{i}", created_at=100.0 + i, status=status))
    assert [op.id for op in journal.list_operations()] == ["op3", "op1", "op4", "op2", "op0"]
    assert [op.id for op in journal.list_operations(limit=2, offset=1)] == ["op1", "op4"]
    assert [op.id for op in journal.list_operations(statuses=["failed", "completed"])] == ["op2", "op0"]
    assert [op.id for op in journal.list_operations(statuses=["running", "failed"])] == ["op1", "op2"]
    assert journal.list_operations(statuses=[]) == []
    assert journal.count_operations() == 5
    assert journal.count_operations(["running", "pending"]) == 2
    with pytest.raises(ValueError):
        journal.count_operations(["paused"])


# -- hot path -------------------------------------------------------------------------


async def test_progress_is_coalesced_into_one_transaction(tmp_path: Path):
    # A long batch window, so every write below lands in the same batch; the flush
    # request ends the batch at once.
    with OperationJournal(tmp_path / "j.sqlite3", batch_interval=30, batch_max_items=10_000) as journal:
        ops = [record(f"op{i}") for i in range(3)]
        for op in ops:
            await journal.create_operation(op)
        before = (journal.stats.batches, journal.stats.rows_written)
        for step in range(1, 1001):
            for op in ops:
                journal.record_progress(op.id, float(step), 1000.0, f"step {step}" if step % 2 else None)
        journal.append_event(ops[0].id, "note", {"text": "halfway"})
        await journal.flush()
        assert journal.stats.batches - before[0] == 1
        # one row per operation, plus the event, however many values arrived
        assert journal.stats.rows_written - before[1] == 4
        assert journal.stats.progress_received == 3000
        for op in ops:
            got = journal.get_operation(op.id)
            assert (got.progress, got.total) == (1000.0, 1000.0)
            assert got.message == "step 999"  # a notification without message keeps the last one


async def test_a_batch_has_at_most_max_items(tmp_path: Path):
    with OperationJournal(tmp_path / "j.sqlite3", batch_interval=30, batch_max_items=100) as journal:
        op = record()
        await journal.create_operation(op)
        before = journal.stats.batches
        for step in range(250):
            journal.record_progress(op.id, float(step))
        await journal.flush()
        assert journal.stats.batches - before == 3


async def test_progress_is_committed_without_a_flush(tmp_path: Path):
    with OperationJournal(tmp_path / "j.sqlite3", batch_interval=0.02) as journal:
        op = record()
        await journal.create_operation(op)
        journal.record_progress(op.id, 0.5)
        await until_async(lambda: committed_row(journal.path, op.id)["progress"] == 0.5,
                          what="the progress to be committed")


async def test_writes_keep_their_order_around_a_finish(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    journal.record_progress(op.id, 10.0, 10.0)
    journal.append_event(op.id, "partial_result", {"n": 1})
    finished = journal.finish_operation(op.id, "completed", result={})  # queued now, awaited below
    journal.record_progress(op.id, 11.0, 10.0)  # arrives late: the operation has ended
    assert await finished is True
    await journal.flush()
    done = journal.get_operation(op.id)
    assert done.progress == 10.0 and done.status == "completed"
    assert [e.kind for e in journal.events(op.id)] == ["status", "partial_result", "status"]


async def test_events_are_append_only_and_limited_to_the_newest(journal: OperationJournal):
    op = record()
    await journal.create_operation(op)
    for n in range(10):
        journal.append_event(op.id, "tick", {"n": n})
    await journal.flush()
    newest = journal.events(op.id, limit=3)
    assert [e.data["n"] for e in newest] == [7, 8, 9]
    assert newest[0].seq < newest[1].seq < newest[2].seq
    conn = sqlite3.connect(journal.path)
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'x'")
    conn.close()


def test_writes_are_made_by_one_thread(journal: OperationJournal):
    names: set[str] = set()

    def create(n: int) -> None:
        journal.create_operation_sync(record(f"t{n}"))
        names.add(journal._writer.name)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert journal.count_operations() == 8
    assert names == {"hostapp-journal-writer"}
    assert journal.stats.durable_batches >= 1


async def test_close_commits_queued_writes_and_refuses_later_ones(tmp_path: Path):
    path = tmp_path / "j.sqlite3"
    journal = OperationJournal(path, batch_interval=30)
    op = record()
    await journal.create_operation(op)
    journal.record_progress(op.id, 42.0)
    journal.close()
    journal.close()  # idempotent
    assert committed_row(path, op.id)["progress"] == 42.0
    with pytest.raises(RuntimeError, match="closed"):
        await journal.create_operation(record())
    journal.record_progress(op.id, 43.0)
    assert journal.stats.dropped == 1
    await journal.flush()  # nothing to wait for
    with pytest.raises(RuntimeError, match="closed"):
        journal.get_operation(op.id)


# -- servers --------------------------------------------------------------------------


def test_servers_round_trip(journal: OperationJournal):
    http = ServerConfig(
        "remote", "http", url="https://example.test/mcp", headers={"X-Team": "a"},
        secret_headers={"Authorization": "header:" + "01" * 16},
        auth={"grant": "client_credentials", "client_id": "ci"},
    )
    stdio = ServerConfig("local", "stdio", command="python", args=["-m", "srv"], env={"A": "1"},
                         secret_env={"TOKEN": "env:" + "02" * 16}, enabled=False)
    journal.add_server(http)
    journal.add_server(stdio)
    assert journal.get_server("remote") == http
    assert journal.list_servers() == [stdio, http]
    with pytest.raises(ValueError, match="already exists"):
        journal.add_server(http)
    changed = journal.update_server("remote", protocol_version="2025-11-25",
                                    session_ref="session_id:" + "03" * 16, last_seen=12.5)
    assert journal.get_server("remote") == changed
    assert changed.protocol_version == "2025-11-25" and changed.headers == {"X-Team": "a"}
    journal.remove_server("local")
    assert journal.get_server("local") is None
    with pytest.raises(KeyError):
        journal.remove_server("local")
    with pytest.raises(KeyError):
        journal.update_server("local", enabled=True)


def test_server_validation(journal: OperationJournal):
    with pytest.raises(ValueError, match="needs a url"):
        journal.add_server(ServerConfig("a", "http"))
    with pytest.raises(ValueError, match="needs a command"):
        journal.add_server(ServerConfig("a", "stdio"))
    with pytest.raises(ValueError, match="keyring reference") as caught:
        journal.add_server(ServerConfig("a", "http", url="http://x", secret_headers={"Authorization": "Bearer xyz"}))
    assert "xyz" not in str(caught.value)
    journal.add_server(ServerConfig("a", "http", url="http://x"))
    with pytest.raises(ValueError, match="keyring reference"):
        journal.update_server("a", session_ref="raw-session-id")
    with pytest.raises(TypeError):
        journal.update_server("a", name="b")
    assert journal.get_server("a").session_ref is None


def test_request_id_blocks_never_overlap_across_processes(tmp_path):
    """Two hosts on one journal reserve id blocks for one server: never the same id twice,
    and the first block starts above every id the server's operations were sent under."""
    import subprocess
    import sys
    import textwrap

    path = tmp_path / "journal.sqlite3"
    with OperationJournal(path) as journal:
        journal.create_operation_sync(OperationRecord(id="old", server="s", method="tools/call", params={},
                                                    jsonrpc_id=41))
        journal.create_operation_sync(OperationRecord(id="str", server="s", method="tools/call", params={},
                                                    jsonrpc_id="x-99"))
        first = journal.reserve_request_ids("s", 10)
        assert first == 42
        assert journal.reserve_request_ids("other", 5) == 1
    script = textwrap.dedent(
        f"""
        from hostapp.store.journal import OperationJournal
        with OperationJournal({str(path)!r}) as journal:
            print(*(journal.reserve_request_ids("s", 7) for _ in range(200)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) for _ in range(3)]
    starts = [int(x) for proc in procs for x in proc.communicate(timeout=120)[0].split()]
    assert all(proc.returncode == 0 for proc in procs)
    assert len(starts) == 600
    taken = set()
    for start in starts:
        block = set(range(start, start + 7))
        assert not block & taken
        taken |= block
    assert min(starts) == 52  # right after the first block of 10


def test_the_schema_has_request_id_blocks(tmp_path):
    with OperationJournal(tmp_path / "j.sqlite3") as journal:
        assert journal.schema_version >= (2, 1)
        with pytest.raises(ValueError):
            journal.reserve_request_ids("s", 0)


def test_a_list_reads_each_record_as_a_read_of_that_one_operation_does(tmp_path: Path):
    """A list converts its rows with each column's place worked out once; every field comes
    back as the read of that operation alone gives it, whatever its JSON holds."""
    ids: list = [7, 0, 123456789012, -3, "a-string", "42", None, 1.5]
    handles: list = [{}, {"mechanism": "tasks_2025", "phase": "held", "n": [1, {"x": None}]}, {}]
    with OperationJournal(tmp_path / "j.sqlite3") as journal:
        for i, rid in enumerate(ids):
            journal.create_operation_sync(record(
                f"op-{i}", jsonrpc_id=rid, handle=handles[i % len(handles)], created_at=1000.0 + i,
                status="running", open_question={"id": i, "params": {"message": "ünïcode ✓"}} if i % 2 else None))
        journal.create_operation_sync(record("done", created_at=2000.0, status="running"))
        journal.finish_operation_sync("done", "completed", result={"content": [{"type": "text", "text": "{}"}]})
        listed = journal.list_operations(limit=100)
        assert [r.id for r in listed] == [f"op-{i}" for i in reversed(range(len(ids)))] + ["done"]
        for got in listed + journal.unfinished_operations():
            assert got == journal.get_operation(got.id)
        by_id = {r.id: r for r in listed}
        assert [by_id[f"op-{i}"].jsonrpc_id for i in range(len(ids))] == ids
        assert type(by_id["op-5"].jsonrpc_id) is str and type(by_id["op-0"].jsonrpc_id) is int
        assert by_id["done"].result == {"content": [{"type": "text", "text": "{}"}]}


def test_json_the_fast_reader_refuses_is_read_as_json_wrote_it(tmp_path: Path):
    """The journal's JSON columns are read by orjson; what json wrote and orjson refuses (an
    integer beyond 64 bits in a server's result, NaN) reads back as it was written."""
    with OperationJournal(tmp_path / "j.sqlite3") as journal:
        journal.create_operation_sync(record("big", created_at=1.0, status="running"))
        journal.finish_operation_sync("big", "completed", result={"n": 2**70, "neg": -(2**66), "ok": [1.5, None]})
        journal.create_operation_sync(record("nan", created_at=2.0, status="running"))
        journal.finish_operation_sync("nan", "completed", result={"x": float("inf")})
        listed = {r.id: r for r in journal.list_operations(limit=10)}
        assert listed["big"].result == {"n": 2**70, "neg": -(2**66), "ok": [1.5, None]}
        assert listed["nan"].result == {"x": float("inf")}
        assert journal.get_operation("big") == listed["big"]
