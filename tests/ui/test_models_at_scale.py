"""The window's bookkeeping with thousands of operations in flight: counts kept as the
changes come, time passing repainting only the rows on screen, and changes that arrive
while the journal is read kept over what the read brings."""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QSettings, Qt

from hostapp.engine import api
from hostapp.engine.api import OperationView
from hostapp.ui.operations_model import (
    ELAPSED,
    HISTORY_KEPT,
    PAGE_SIZE,
    PROGRESS,
    SURVIVES,
    OperationRole,
    OperationTableModel,
)
from hostapp.ui.operations_pane import OperationsPane
from hostapp.ui.window_parts import Summary
from tests.support.waiting import until_async
from tests.ui.test_models import ListSource, op

STATUSES = (api.PENDING, api.RUNNING, api.INPUT_REQUIRED, api.COMPLETED, api.FAILED, api.CANCELLED, api.UNKNOWN)


def test_summary_counts_kept_as_changes_come_match_a_count_of_every_status():
    summary = Summary()
    latest: dict[str, tuple[str, bool]] = {}
    rng = random.Random(26)
    for _ in range(300):
        batch = [op(rng.randrange(40), rng.choice(STATUSES), stalled=rng.choice([None, "no sign of life"]))
                 for _ in range(rng.randrange(1, 12))]
        summary.update(batch)
        for view in batch:
            latest[view.id] = (view.status, bool(view.stalled))
        in_flight = [(s, stalled) for s, stalled in latest.values() if s in api.IN_FLIGHT]
        stalled = sum(1 for _, st in in_flight if st)
        needs = sum(1 for s, st in in_flight if s == api.INPUT_REQUIRED and not st)
        assert summary.counts() == (len(in_flight) - needs - stalled, needs, stalled)
    summary.update([op(i, api.COMPLETED) for i in range(40)])
    assert summary.counts() == (0, 0, 0) and summary.text() == ""


def test_a_stalled_operation_waiting_for_input_is_counted_stalled_not_as_needing_you():
    summary = Summary()
    waiting = op(1, api.INPUT_REQUIRED, stalled="it waits for input, but asked no question")
    summary.update([op(0, api.RUNNING), waiting, op(2, api.INPUT_REQUIRED)])
    assert summary.text() == "1 running, 1 needs you, 1 stalled"
    summary.update([dataclasses.replace(waiting, stalled=None)])  # a sign of life: a question came
    assert summary.text() == "1 running, 2 need you"


def _pane(tmp_path: Path, qtbot, model: OperationTableModel) -> OperationsPane:
    pane = OperationsPane(model, QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(pane)
    pane.resize(900, 400)
    pane.show()
    qtbot.waitExposed(pane)
    return pane


def _told(model: OperationTableModel) -> list[tuple[int, int, int, int]]:
    told: list[tuple[int, int, int, int]] = []
    model.dataChanged.connect(lambda a, b, _roles=(): told.append((a.row(), b.row(), a.column(), b.column())))
    return told


def test_time_passing_repaints_only_the_rows_on_screen(qloop, qtbot, tmp_path):
    live = [op(i, api.RUNNING, progress=float(i % 100), total=100.0) for i in range(5_000)]
    model = OperationTableModel(ListSource(live + [op(10_000 + i) for i in range(50)]))
    qloop.run_until_complete(model.reload())
    pane = _pane(tmp_path, qtbot, model)
    told = _told(model)
    with qtbot.waitSignal(model.liveCellsAged, timeout=5_000):
        pass  # the model's clock: the pane tells the rows it shows, and only them
    shown = pane.shown_rows()
    assert 3 <= len(shown) < 100
    rows = {row for first, last, _, _ in told for row in range(first, last + 1)}
    assert rows == {pane.proxy.mapToSource(pane.proxy.index(r, 0)).row() for r in shown}
    assert all((left, right) == (PROGRESS, SURVIVES) for *_, left, right in told)
    assert len(told) == 1  # adjacent rows: one signal

    # Sorted by elapsed time and scrolled down: the rows on screen are far apart in the
    # model; only they are told, each run of adjacent ones once.
    pane.table.sortByColumn(ELAPSED, Qt.SortOrder.AscendingOrder)
    pane.table.scrollToBottom()
    told.clear()
    pane.repaint_live_rows()
    shown = pane.shown_rows()
    expected = {pane.proxy.mapToSource(pane.proxy.index(r, 0)).row() for r in shown}
    rows = {row for first, last, _, _ in told for row in range(first, last + 1)}
    assert rows == {r for r in expected if r < model.live_count}
    assert len(rows) < 100

    pane.hide()
    told.clear()
    pane.repaint_live_rows()
    assert told == []  # a hidden window repaints nothing


def _rows_found(model: OperationTableModel, ids: list[str]) -> None:
    """Every row's operation is found at that row; an operation not held is not found."""
    rows = [model.operation(r).id for r in range(model.rowCount())]
    assert len(set(rows)) == len(rows)
    assert all(model.row_of(op_id) == row for row, op_id in enumerate(rows))
    assert all(model.row_of(op_id) is None for op_id in set(ids) - set(rows))


def _random_batch(rng: random.Random, ids: list[str], most: int = 40) -> list[OperationView]:
    return [op(1_000_000 + int(i[4:]), rng.choice(STATUSES), id=i) for i in rng.sample(ids, rng.randrange(1, most))]


def test_each_operation_s_row_is_found_as_rows_come_move_and_go(qloop, qtmodeltester):
    """The model finds an operation's row without a scan, kept as rows are inserted at the
    head of a section, moved between sections and taken out (a filter): checked against
    the rows themselves after every batch, with Qt's checks of every signal."""
    model = OperationTableModel(ListSource([op(i) for i in range(30)]))
    qtmodeltester.check(model)
    rng = random.Random(26)
    ids = [f"live{i}" for i in range(20)]
    for name in ("all", "in_flight", "failed"):
        qloop.run_until_complete(model.reload(name))
        for _ in range(30):
            model.apply_changes(_random_batch(rng, ids, 8))
            _rows_found(model, ids)


def test_rows_are_found_as_the_history_is_read_and_let_go_at_either_end(qloop, isolated_home):
    from hostapp.ui.operations_model import HISTORY_KEPT, PAGE_SIZE

    model = OperationTableModel(_journal_history(isolated_home, HISTORY_KEPT + 4 * PAGE_SIZE))
    rng = random.Random(26)
    ids = [f"live{i}" for i in range(300)]

    async def scenario() -> None:
        await model.reload()
        while model.canFetchMore():
            await model.fetch_next_page()  # past HISTORY_KEPT the rows above are let go
            model.apply_changes(_random_batch(rng, ids))
            _rows_found(model, ids)
        assert model.history_cut_above
        while model.history_cut_above:
            await model.fetch_newer_page()  # read again above, let go below
            model.apply_changes(_random_batch(rng, ids))
            _rows_found(model, ids)
        assert model.canFetchMore()

    qloop.run_until_complete(scenario())


class HeldSource(ListSource):
    """Reads that wait until the test lets them answer, with what the list held when asked."""

    def __init__(self, ops: list[OperationView]):
        super().__init__(ops)
        self.go_on = asyncio.Event()

    async def operations(self, statuses=None, limit=200, offset=0, **filters):
        answer = await super().operations(statuses, limit, offset, **filters)
        await self.go_on.wait()
        return answer


def test_changes_that_arrive_while_the_journal_is_read_are_kept(qloop, qtmodeltester):
    """A restarted agent answers the list from its journal while its engine attaches the
    operations: the engine's views, arriving before the list, win over the journal's rows;
    no row appears twice."""
    journal = [op(1, api.RUNNING, progress=10.0, total=100.0), op(2, api.RUNNING), op(3)]
    source = HeldSource(journal)
    model = OperationTableModel(source)
    reading = qloop.create_task(model.reload())
    qloop.run_until_complete(asyncio.sleep(0))
    model.apply_changes([op(1, api.RUNNING, progress=55.0, total=100.0, message="attached"),
                         op(2, api.COMPLETED), op(4, api.RUNNING)])
    source.go_on.set()
    qloop.run_until_complete(reading)
    qtmodeltester.check(model)
    rows = [model.operation(r) for r in range(model.rowCount())]
    assert sorted(o.id for o in rows) == ["op1", "op2", "op3", "op4"]
    by_id = {o.id: o for o in rows}
    assert (by_id["op1"].progress, by_id["op1"].message) == (55.0, "attached")
    assert by_id["op2"].status == api.COMPLETED and model.row_of("op2") >= model.live_count
    assert model.live_count == 2  # op4 and op1
    assert model.total == 4
    model.apply_changes([op(1, api.RUNNING, progress=60.0, total=100.0)])  # the reload is over
    assert model.operation(model.row_of("op1")).progress == 60.0


# -- the history, bounded ---------------------------------------------------------------------

def _journal_history(home: Path, rows: int):
    """The engine's facade over a real journal of ``rows`` finished operations (no server,
    not started: the history is read from the journal)."""
    from bench.window_probe import seed_history
    from hostapp.engine.facade import LocalEngine
    from hostapp.engine.service import Engine

    seed_history(home, rows)
    return LocalEngine(Engine(home))


def _counting_older_reads(model: OperationTableModel) -> list[int]:
    """From now on, count the model's reads of the page below the rows it holds: the
    list's one number."""
    reads = [0]
    read_older = model.fetch_next_page

    async def counted() -> int:
        reads[0] += 1
        return await read_older()

    model.fetch_next_page = counted  # type: ignore[method-assign]
    return reads


def _age(op_id: str) -> int:
    """The place of a seeded operation in the history, newest (the template) first."""
    return 0 if op_id == "template" else int(op_id[1:])


def _history_ids(model: OperationTableModel) -> list[str]:
    return [model.operation(r).id for r in range(model.live_count, model.rowCount())]


def test_the_history_held_is_bounded_and_read_again_by_key(qloop, isolated_home):
    import shiboken6
    from PySide6.QtTest import QAbstractItemModelTester

    from hostapp.ui.operations_model import HISTORY_KEPT, PAGE_SIZE

    rows = HISTORY_KEPT * 2 + PAGE_SIZE // 2
    model = OperationTableModel(_journal_history(isolated_home, rows))
    seen: list[str] = []
    held_most = 0

    def inserted(_parent: object, first: int, last: int) -> None:
        nonlocal held_most
        seen.extend(model.operation(r).id for r in range(first, last + 1))
        held_most = max(held_most, model.rowCount() - model.live_count)

    async def scenario() -> None:
        qloop_model_tester = QAbstractItemModelTester(model)  # Qt's checks of every change
        model.modelReset.connect(lambda: seen.extend(_history_ids(model)))
        model.rowsInserted.connect(inserted)
        # Qt's tester fetches more at every change, as an eager view would: down to the end.
        await model.reload()
        newest = _history_ids(model)[0]
        await until_async(lambda: not model.canFetchMore() and not model._loading, timeout=180,
                          what="the whole history paged")
        assert len(seen) == rows and seen == sorted(seen, key=_age)  # every row once, in order
        assert held_most <= HISTORY_KEPT + PAGE_SIZE  # a page comes before the excess goes
        assert model.rowCount() - model.live_count <= HISTORY_KEPT
        assert model.history_cut_above and _history_ids(model)[-1] == seen[-1]
        assert model.total == rows
        shiboken6.delete(qloop_model_tester)  # it would page down again as the model pages up
        # Back up: the rows let go are read again above, those at the bottom let go.
        while model.history_cut_above:
            await model.fetch_newer_page()
            held = _history_ids(model)
            assert len(held) <= HISTORY_KEPT and held == sorted(held, key=_age)
        assert _history_ids(model)[0] == newest and model.canFetchMore()

    qloop.run_until_complete(scenario())


def test_rows_on_screen_are_never_let_go(qloop, isolated_home):
    from hostapp.ui.operations_model import HISTORY_KEPT, PAGE_SIZE

    model = OperationTableModel(_journal_history(isolated_home, HISTORY_KEPT + 3 * PAGE_SIZE))
    qloop.run_until_complete(model.reload())
    model.rows_on_screen = lambda: [model.live_count + 3]  # the view shows the top of the history
    while model.canFetchMore():
        qloop.run_until_complete(model.fetch_next_page())
    assert not model.history_cut_above and model.rowCount() == HISTORY_KEPT + 3 * PAGE_SIZE


def test_scrolling_a_long_history_down_and_back_up_in_the_window(qloop, qtbot, tmp_path, isolated_home):
    from hostapp.ui.operations_model import HISTORY_KEPT

    rows = HISTORY_KEPT * 2
    model = OperationTableModel(_journal_history(isolated_home, rows))
    qloop.run_until_complete(model.reload())
    pane = _pane(tmp_path, qtbot, model)
    bar = pane.table.verticalScrollBar()
    newest = _history_ids(model)[0]
    # The newest chosen, as the window does at start: its row is let go on the way down.
    assert pane.select(newest)

    def settle() -> None:
        qloop.run_until_complete(asyncio.sleep(0.01))

    def scrolled_to(end: Callable[[], int], done: Callable[[], bool]) -> Callable[[], bool]:
        def step() -> bool:
            if done():
                return True
            if not model._loading:
                bar.setValue(end())
            return False
        return step

    # Down to the end of the history, as a person dragging the scroll bar to the bottom.
    qloop.run_until_complete(until_async(
        scrolled_to(bar.maximum, lambda: not model.canFetchMore() and not model._loading), timeout=180,
        what="the end of the history"))
    assert model.history_cut_above
    assert model.rowCount() - model.live_count <= HISTORY_KEPT
    bar.setValue(bar.maximum())
    settle()
    last_shown = pane.table.indexAt(pane.table.viewport().rect().bottomLeft()).data(OperationRole)
    assert last_shown is not None and last_shown.id == f"h{rows - 1:07d}"  # the oldest
    top = pane._top_operation()
    assert model.row_of(newest) is None and pane.selected().id == newest  # let go, still the choice
    older_reads = _counting_older_reads(model)
    # And up again: the rows let go come back, page by page, to the newest.
    qloop.run_until_complete(until_async(
        scrolled_to(bar.minimum, lambda: not model.history_cut_above and not model._loading), timeout=180,
        what="the top of the history"))
    assert not model.history_cut_above
    bar.setValue(bar.minimum())
    settle()
    assert pane._top_operation() == newest and top != newest
    assert older_reads[0] == 0  # going up reads only what is above
    assert pane.table.currentIndex().data(OperationRole).id == newest  # chosen again, where it is


def test_progress_off_screen_is_not_told_to_the_view_and_is_shown_when_scrolled_to(qloop, qtbot, tmp_path):
    """10,000 calls stepping once a second each are 10,000 changed rows a second: told to
    the view's sort-and-filter proxy one by one, each ran its Python filter. A change that
    leaves a row's status and end as they were cannot move it or hide it while the view is
    neither sorted by what changed nor searched: only the rows on screen are told; a row
    off screen shows its latest when it is scrolled to."""
    live = [op(i, api.RUNNING, progress=1.0, total=100.0) for i in range(3_000)]
    model = OperationTableModel(ListSource(live))
    qloop.run_until_complete(model.reload())
    pane = _pane(tmp_path, qtbot, model)
    on_screen = set(pane.source_rows_on_screen())
    assert 3 <= len(on_screen) < 100
    told = _told(model)

    def stepped(i: int, progress: float, **kw) -> OperationView:
        return op(i, api.RUNNING, progress=progress, total=100.0, message=f"step {progress:g}", **kw)

    model.apply_changes([stepped(i, 2.0) for i in range(3_000)])
    rows = {row for first, last, _, _ in told for row in range(first, last + 1)}
    assert rows == on_screen
    assert len(told) == 1  # the rows on screen are adjacent: one signal
    far = model.row_of("op0")  # the oldest: the last row
    assert far not in on_screen
    pane.table.scrollToBottom()
    assert model.data(model.index(far, PROGRESS)) == "2%"
    assert pane.proxy.index(pane.proxy.rowCount() - 1, 3).data().startswith("step 2")

    # A status change is told wherever its row is (the proxy filters and counts on it) ...
    told.clear()
    pane.table.scrollToTop()
    model.apply_changes([op(1_500, api.INPUT_REQUIRED, needs_input=True)])
    assert [(first, last) for first, last, _, _ in told] == [(model.row_of("op1500"),) * 2]
    # ... and so is every change while the view searches, or sorts by what progress moves.
    pane.search.setText("step")
    told.clear()
    model.apply_changes([stepped(10, 3.0)])
    assert [first for first, *_ in told] == [model.row_of("op10")]
    pane.search.setText("")
    pane.table.sortByColumn(PROGRESS, Qt.SortOrder.DescendingOrder)
    told.clear()
    model.apply_changes([stepped(20, 90.0)])
    assert [first for first, *_ in told] == [model.row_of("op20")]
    assert pane.proxy.mapToSource(pane.proxy.index(0, 0)).row() == model.row_of("op20")


def test_calls_new_to_the_window_in_one_batch_are_inserted_at_once(qloop, qtmodeltester):
    """An agent that restarts tells the window of every call it carries; 10,000 calls
    starting together are as many new rows. Inserted one at a time, each went through the
    proxy and the view; a batch's new rows in flight now come in one insertion, in the
    order one at a time gave (the last told at the top), after those already there."""
    model = OperationTableModel(ListSource([op(i, api.RUNNING) for i in range(3)]))
    qloop.run_until_complete(model.reload())
    qtmodeltester.check(model)
    inserted: list[tuple[int, int]] = []
    model.rowsInserted.connect(lambda _parent, first, last: inserted.append((first, last)))
    batch = [op(i, api.RUNNING, progress=1.0) for i in range(10, 2_010)]
    batch += [op(1, api.RUNNING, progress=5.0), op(2_500), op(20, api.RUNNING, progress=2.0)]
    model.apply_changes(batch)
    assert inserted == [(3, 3), (0, 1_999)]  # the finished one at the head of the history, then the batch
    assert [model.operation(r).id for r in (0, 1, 1_999, 2_000)] == ["op2009", "op2008", "op10", "op2"]
    assert model.operation(1_989).progress == 2.0  # told twice in the batch: its latest, once
    assert model.operation(model.row_of("op1")).progress == 5.0
    assert model.total == 3 + 2_000 + 1
    _rows_found(model, [f"op{i}" for i in range(3_000)])


def test_a_view_left_at_the_end_of_the_rows_held_reads_no_page_on_its_own(qloop, qtbot, tmp_path, isolated_home):
    """Scrolled to the end until rows are let go above, then left there: the model read page
    after page on its own (a read every 25 ms against the agent, down a million rows). Its
    rows let go above, the view was left one row short of the end of what it held, the
    last row on screen, so Qt asked for more: the pane had kept the top row only when the
    view, not yet laid out again, said it had moved."""
    model = OperationTableModel(_journal_history(isolated_home, 10 * PAGE_SIZE + HISTORY_KEPT))
    qloop.run_until_complete(model.reload())
    pane = _pane(tmp_path, qtbot, model)
    bar = pane.table.verticalScrollBar()

    def scrolled_until_let_go() -> bool:
        if model.history_cut_above and not model._loading:
            return True
        if not model._loading:
            bar.setValue(bar.maximum())
        return False

    qloop.run_until_complete(until_async(scrolled_until_let_go, timeout=60, what="rows let go above"))
    top = pane._top_operation()
    reads = _counting_older_reads(model)
    qloop.run_until_complete(asyncio.sleep(1.0))
    assert reads[0] == 0
    assert pane._top_operation() == top  # the rows on screen stayed where they were


def test_the_chosen_operation_stays_chosen_when_the_rows_are_read_again(qloop, qtbot, tmp_path):
    """A filter changed, or a new agent's operations read again, reset the model; the
    operation the person chose stays chosen where it is still shown, also when it was chosen
    while the read was under way (an agent under load answers slowly)."""
    model = OperationTableModel(ListSource([op(i, api.RUNNING) for i in range(3)] + [op(i) for i in range(3, 6)]))
    qloop.run_until_complete(model.reload())
    pane = _pane(tmp_path, qtbot, model)

    def chosen() -> str | None:
        view = pane.selected()
        return view.id if view is not None else None

    reading = qloop.create_task(model.reload("all"))
    qloop.run_until_complete(asyncio.sleep(0))  # the read is under way
    assert pane.select("op1")
    qloop.run_until_complete(reading)
    assert chosen() == "op1"
    qloop.run_until_complete(model.reload("in_flight"))
    assert chosen() == "op1"
    assert pane.select("op2")
    qloop.run_until_complete(model.reload("finished"))  # not shown there: nothing is chosen
    assert chosen() is None
    assert pane.select("op4")
    qloop.run_until_complete(model.reload("all"))
    assert chosen() == "op4"
