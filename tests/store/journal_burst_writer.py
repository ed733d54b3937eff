"""A process that writes to a journal as fast as it can, for the crash test.

Usage: python journal_burst_writer.py JOURNAL_PATH

For each operation: commit it (write-ahead), print its id (so the parent knows it was
committed), then queue progress values and an event, and finish every third one. Runs
until killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from hostapp.store.journal import OperationJournal, OperationRecord


def main() -> None:
    journal = OperationJournal(Path(sys.argv[1]), batch_interval=0.005)
    n = 0
    while True:
        op_id = f"burst-{n:07d}"
        journal.create_operation_sync(OperationRecord(op_id, "srv", "tools/call", {"name": "t", "n": n}))
        print(op_id, flush=True)
        for step in range(50):
            journal.record_progress(op_id, float(step), 50.0, f"step {step}")
        journal.append_event(op_id, "note", {"n": n})
        if n % 3 == 0:
            journal.finish_operation_sync(op_id, "completed", result={"n": n})
        n += 1


if __name__ == "__main__":
    main()
