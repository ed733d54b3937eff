"""The calls an MCP App view made (a monitor polls every few seconds) are not rows of the
operations list nor in its counts; the details of the view's operation list and count
them. The list reads a real journal file through the engine's own queries."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hostapp.engine import api
from hostapp.engine.api import OperationView
from hostapp.engine.operation import operation_view
from hostapp.store.journal import OperationJournal, OperationRecord
from hostapp.ui.details import OperationDetails
from hostapp.ui.operations_model import TOOL, OperationTableModel
from hostapp.ui.window_parts import Summary


class JournalSource:
    """The operations of a journal file, read as the engine reads them."""

    def __init__(self, journal: OperationJournal):
        self.journal = journal

    async def operations(self, statuses=None, limit=200, offset=0, before=None, after=None, top_level=False,
                         view_of=None) -> list[OperationView]:
        return [operation_view(r) for r in self.journal.list_operations(
            statuses, limit, offset, before, after, top_level=top_level, view_of=view_of)]

    async def count_operations(self, statuses=None, top_level=False, view_of=None) -> int:
        return self.journal.count_operations(statuses, top_level=top_level, view_of=view_of)


class OlderAgent(JournalSource):
    """An agent of before view_of: it refuses the filters (the window lists every operation)."""

    async def operations(self, statuses=None, limit=200, offset=0, before=None, after=None, **filters):
        if filters.get("top_level") or filters.get("view_of"):
            raise api.EngineError("operations: unexpected argument 'top_level'")
        return await super().operations(statuses, limit, offset, before, after)


def a_monitor_that_polled(path: Path) -> OperationJournal:
    journal = OperationJournal(path)
    journal.create_operation_sync(OperationRecord("other", "lab", "tools/call", {"name": "t"}, tool="t",
                                                  created_at=10.0))
    journal.create_operation_sync(OperationRecord("monitor", "mon", "tools/call", {"name": "get-system-info"},
                                                  tool="get-system-info", created_at=20.0))
    journal.finish_operation_sync("monitor", "completed", result={"content": []})
    for n in range(5):
        poll = f"poll{n}"
        journal.create_operation_sync(OperationRecord(poll, "mon", "tools/call", {"name": "poll-system-stats"},
                                                      tool="poll-system-stats", created_at=30.0 + n,
                                                      view_of="monitor"))
        if n < 4:
            journal.finish_operation_sync(poll, "completed", result={"content": []})
    return journal


def test_a_views_calls_are_neither_rows_nor_counted(qloop, qtmodeltester, tmp_path):
    with a_monitor_that_polled(tmp_path / "journal.sqlite3") as journal:
        model = OperationTableModel(JournalSource(journal))
        qloop.run_until_complete(model.reload())
        qtmodeltester.check(model)
        assert [model.operation(r).id for r in range(model.rowCount())] == ["other", "monitor"]
        assert model.total == 2
        # Counted on the view's own row instead.
        assert [model.index(r, TOOL).data() for r in range(model.rowCount())] == ["t", "get-system-info · 5 calls"]
        for name in ("in_flight", "finished", "all"):
            qloop.run_until_complete(model.reload(name))
            assert not any(model.operation(r).view_of for r in range(model.rowCount())), name
        assert model.total == 2
        # A new poll and the end of the one in flight change no row and no count.
        poll = operation_view(journal.get_operation("poll4"))
        model.apply_changes([_fields(poll, id="poll5")])
        model.apply_changes([_fields(poll, status=api.COMPLETED, ended_at=40.0)])
        assert [model.operation(r).id for r in range(model.rowCount())] == ["other", "monitor"]
        assert model.total == 2
        summary = Summary()
        summary.update([operation_view(journal.get_operation("other")), poll, _fields(poll, id="poll5")])
        assert summary.counts() == (1, 0, 0)  # the one call of its own in flight; no poll

        # An agent too old to filter: every operation is a row, as before.
        older = OperationTableModel(OlderAgent(journal))
        qloop.run_until_complete(older.reload())
        assert older.rowCount() == 7 and older.total == 7


def test_the_details_of_a_views_operation_list_and_count_its_calls(qapp, qloop, tmp_path):
    with a_monitor_that_polled(tmp_path / "journal.sqlite3") as journal:
        source = JournalSource(journal)
        details = OperationDetails(tmp_path)
        parent = operation_view(journal.get_operation("monitor"))
        details.show_operation(parent)
        calls = qloop.run_until_complete(source.operations(view_of="monitor", limit=3))
        count = qloop.run_until_complete(source.count_operations(view_of="monitor"))
        details.show_view_calls("monitor", calls, count)
        assert details.view_call_count == 5 and not details.view_calls_box.isHidden()
        assert details.view_calls_box.title() == "Its view made 5 calls (the newest 3 listed)"
        listed = [details.view_calls.topLevelItem(i) for i in range(details.view_calls.topLevelItemCount())]
        assert [(i.text(1), i.text(2)) for i in listed] == [("poll-system-stats", "Starting"),
                                                            ("poll-system-stats", "Completed"),
                                                            ("poll-system-stats", "Completed")]
        assert "its view made 5 calls" in details.summary.text()
        # Live: the running poll ends (its line changes), a new one comes (on top, counted).
        poll4 = operation_view(journal.get_operation("poll4"))
        details.update_view_call(_fields(poll4, status=api.COMPLETED, ended_at=40.0))
        details.update_view_call(_fields(poll4, id="poll5", created_at=41.0))
        assert details.view_call_count == 6 and details.view_calls.topLevelItemCount() == 4
        assert [details.view_calls.topLevelItem(i).text(2) for i in range(2)] == ["Starting", "Completed"]
        details.update_view_call(_fields(poll4, id="elsewhere", view_of="other"))  # another view's
        assert details.view_call_count == 6
        # An operation whose view made none shows no such list.
        details.show_operation(operation_view(journal.get_operation("other")))
        details.show_view_calls("other", [], 0)
        assert details.view_calls_box.isHidden() and "its view made" not in details.summary.text()


def _fields(op: OperationView, **changes) -> OperationView:
    return dataclasses.replace(op, **changes)
