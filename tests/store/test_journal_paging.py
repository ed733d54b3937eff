"""The history read a page at a time by key, on a real journal file of many rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bench.window_probe import seed_history
from hostapp.engine import api
from hostapp.store.journal import OperationJournal
from hostapp.store.paths import journal_path

ROWS = 15_000


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal of ROWS finished operations, one in seven failed, one in flight."""
    home = tmp_path_factory.mktemp("paging")
    seed_history(home, ROWS)
    with sqlite3.connect(journal_path(home)) as db:
        db.execute("UPDATE operations SET status = 'failed' WHERE rowid % 7 = 0")
        db.execute("UPDATE operations SET status = 'running', in_flight = 1, finished_at = NULL "
                   "WHERE id = 'h0000005'")
    return journal_path(home)


FILTERS = [frozenset(api.TERMINAL), frozenset({api.COMPLETED, api.CANCELLED}),
           frozenset({api.FAILED, api.EXPIRED, api.UNKNOWN})]


@pytest.mark.parametrize("statuses", FILTERS, ids=["finished", "completed", "failed"])
def test_pages_by_key_walk_the_whole_history_down_and_up_in_order(history: Path, statuses: frozenset[str]):
    with OperationJournal(history) as journal:
        everything = [r.id for r in journal.list_operations(statuses, limit=ROWS + 10)]
        assert len(everything) == journal.count_operations(statuses) > 1000
        down: list[str] = []
        page = journal.list_operations(statuses, limit=250)
        while page:
            down += [r.id for r in page]
            page = journal.list_operations(statuses, limit=250, before=(page[-1].created_at, page[-1].id))
        assert down == everything
        # And back up from the oldest, a page at a time, each page newest first.
        oldest = journal.get_operation(down[-1])
        assert oldest is not None
        up: list[str] = [oldest.id]
        key = (oldest.created_at, oldest.id)
        while page := journal.list_operations(statuses, limit=250, after=key):
            up = [r.id for r in page] + up
            key = (page[0].created_at, page[0].id)
        assert up == everything
        # A page deep in the history is the one OFFSET finds there.
        deep = journal.list_operations(statuses, limit=200, offset=len(everything) - 300)
        edge = journal.get_operation(everything[len(everything) - 301])
        assert edge is not None
        assert journal.list_operations(statuses, limit=200, before=(edge.created_at, edge.id)) == deep


@pytest.mark.parametrize("statuses", FILTERS, ids=["finished", "completed", "failed"])
def test_a_page_by_key_is_read_from_an_index_not_a_scan_of_the_history(history: Path, statuses: frozenset[str]):
    marks = ", ".join("?" * len(statuses))
    with sqlite3.connect(history) as db:
        plan = " / ".join(row[3] for row in db.execute(
            f"EXPLAIN QUERY PLAN SELECT * FROM operations WHERE status IN ({marks}) AND (created_at, id) < (?, ?) "
            "ORDER BY created_at DESC, id DESC LIMIT 200", (*sorted(statuses), 1e12, "z")))
    assert "USING INDEX operations_by_status (status=? AND (created_at,id)<(?,?))" in plan, plan
    assert "SCAN operations" not in plan, plan


def test_a_page_by_key_needs_one_section_and_one_key(history: Path):
    with OperationJournal(history) as journal:
        with pytest.raises(ValueError):
            journal.list_operations(None, before=(1.0, "x"))
        with pytest.raises(ValueError):
            journal.list_operations({api.RUNNING, api.COMPLETED}, before=(1.0, "x"))
        with pytest.raises(ValueError):
            journal.list_operations({api.COMPLETED}, before=(1.0, "x"), after=(0.0, "a"))
        live = journal.list_operations(set(api.IN_FLIGHT), before=(1e12, "z"))
        assert [r.id for r in live] == ["h0000005"]


def _plans_of_reads(journal: OperationJournal, read) -> list[str]:
    """The query plan of each statement the journal ran for ``read()`` (its own SQL, as
    run, with the values bound), asked of SQLite on another connection."""
    statements: list[str] = []
    journal._read_conn.set_trace_callback(statements.append)
    try:
        read()
    finally:
        journal._read_conn.set_trace_callback(None)
    with sqlite3.connect(journal.path) as db:
        return [" / ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {sql}")) for sql in statements]


@pytest.mark.parametrize("statuses", [*FILTERS, frozenset(api.IN_FLIGHT)],
                         ids=["finished", "completed", "failed", "in-flight"])
@pytest.mark.parametrize("top_level", [False, True], ids=["all", "top-level"])
def test_the_journal_s_own_page_reads_come_from_a_status_index(history: Path, statuses: frozenset[str],
                                                              top_level: bool):
    """The window reads top-level operations only; SQLite's planner alone took the view
    index for them (every top-level row walked, then sorted: seconds at a million rows)."""
    index = "operations_top_level_by_status" if top_level else "operations_by_status"
    with OperationJournal(history) as journal:
        plans = _plans_of_reads(journal, lambda: (
            journal.list_operations(statuses, limit=200, top_level=top_level),
            journal.list_operations(statuses, limit=200, before=(1e12, "z"), top_level=top_level),
            journal.list_operations(statuses, limit=200, after=(0.0, ""), top_level=top_level)))
    assert len(plans) == 3
    for plan in plans:
        assert f"USING INDEX {index} (status=?" in plan, plan
        assert "SCAN operations" not in plan, plan
