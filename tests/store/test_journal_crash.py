"""kill -9 in the middle of a burst of journal writes loses nothing that was committed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from hostapp.store.journal import OperationJournal

WRITER = Path(__file__).with_name("journal_burst_writer.py")


def test_sigkill_during_a_burst_leaves_a_sound_journal(tmp_path: Path):
    path = tmp_path / "journal.sqlite3"
    writer = subprocess.Popen(
        [sys.executable, str(WRITER), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    committed: list[str] = []
    try:
        for line in writer.stdout:
            committed.append(line.strip())
            if len(committed) >= 300:
                break
    finally:
        writer.kill()  # SIGKILL: no clean-up, no final checkpoint
        writer.wait(30)
        stderr = writer.stderr.read()
        writer.stdout.close()
        writer.stderr.close()
    assert len(committed) >= 300, stderr
    assert writer.returncode == -9

    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        present = {row[0] for row in conn.execute("SELECT id FROM operations")}
    finally:
        conn.close()
    assert set(committed) <= present

    with OperationJournal(path) as journal:
        # Each finish was committed before the next id was printed, so all but the
        # last printed operation show what the writer did with them.
        for op_id in committed[:-1]:
            op = journal.get_operation(op_id)
            n = int(op_id.split("-")[1])
            if n % 3 == 0:
                assert (op.status, op.result) == ("completed", {"n": n})
            else:
                assert op.status == "pending"
        assert journal.count_operations() >= len(committed)


SHARED_WRITER = """
import sys
from pathlib import Path
from hostapp.store.journal import OperationJournal, OperationRecord

name, path = sys.argv[1], Path(sys.argv[2])
with OperationJournal(path, batch_interval=0.001) as journal:
    for n in range(150):
        op_id = f"{name}-{n}"
        journal.create_operation_sync(OperationRecord(op_id, "srv", "tools/call", {}))
        for step in range(20):
            journal.record_progress(op_id, float(step))
        journal.update_operation_sync(op_id, status="running")
        journal.finish_operation_sync(op_id, "completed", result={"by": name})
"""


def test_two_processes_share_one_journal(tmp_path: Path):
    """The GUI and a CLI command may open the same home at once, even a brand-new one."""
    path = tmp_path / "journal.sqlite3"
    writers = [
        subprocess.Popen([sys.executable, "-c", SHARED_WRITER, name, str(path)], stderr=subprocess.PIPE, text=True)
        for name in ("gui", "cli")
    ]
    for writer in writers:
        _, stderr = writer.communicate(timeout=120)
        assert writer.returncode == 0, stderr
    with OperationJournal(path) as journal:
        assert journal.count_operations(["completed"]) == 300
        assert {op.result["by"] for op in journal.list_operations(limit=300)} == {"gui", "cli"}
