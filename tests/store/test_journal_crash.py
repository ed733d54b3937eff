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
