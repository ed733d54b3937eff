"""The operations and servers models with real OperationView data, checked by qtmodeltester."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QModelIndex, Qt, QTimer
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import QStyleOptionViewItem, QTableView

from hostapp.engine import api
from hostapp.engine.api import OperationView, ServerView
from hostapp.ui.adapter import EngineSignals
from hostapp.ui.operations_model import (
    ELAPSED,
    MESSAGE,
    PAGE_SIZE,
    PROGRESS,
    STATUS,
    OperationRole,
    OperationTableModel,
)
from hostapp.ui.progress_delegate import ProgressDelegate
from hostapp.ui.servers_model import STATUS as SERVER_STATUS
from hostapp.ui.servers_model import ServerTableModel
from tests.support.waiting import DEADLINE


class ListSource:
    """Operations held in a list, answering like ``Engine.operations`` (newest first) and counting reads."""

    def __init__(self, ops: list[OperationView]):
        self.ops = ops
        self.reads: list[tuple[int, int]] = []

    async def operations(self, statuses=None, limit=200, offset=0, before=None, after=None, top_level=False,
                         view_of=None):
        self.reads.append((limit, offset) if before is None and after is None else (limit, before or after))
        chosen = [o for o in sorted(self.ops, key=lambda o: (o.created_at, o.id), reverse=True)
                  if (statuses is None or o.status in statuses) and self._kept(o, top_level, view_of)]
        if before is not None:
            chosen = [o for o in chosen if (o.created_at, o.id) < tuple(before)]
        if after is not None:
            chosen = [o for o in chosen if (o.created_at, o.id) > tuple(after)][-limit:]
        return chosen[offset:offset + limit]

    async def count_operations(self, statuses=None, top_level=False, view_of=None):
        return sum(1 for o in self.ops
                   if (statuses is None or o.status in statuses) and self._kept(o, top_level, view_of))

    @staticmethod
    def _kept(o: OperationView, top_level: bool, view_of: str | None) -> bool:
        return (not top_level or o.view_of is None) and (view_of is None or o.view_of == view_of)


def op(i: int, status: str = api.COMPLETED, **kw) -> OperationView:
    base = dict(id=f"op{i}", server="lab", tool="sleep_with_progress", method="tools/call", arguments={},
                status=status, created_at=1000.0 + i, updated_at=1000.0 + i,
                ended_at=(1010.0 + i) if status in api.TERMINAL else None)
    base.update(kw)
    return OperationView(**base)


def test_in_flight_first_then_history(qloop, qtmodeltester):
    source = ListSource([op(1), op(2, api.RUNNING, progress=3, total=10), op(3, api.FAILED), op(4, api.INPUT_REQUIRED,
                                                                                             needs_input=True)])
    model = OperationTableModel(source)
    qloop.run_until_complete(model.reload())
    qtmodeltester.check(model)
    assert [model.operation(r).id for r in range(model.rowCount())] == ["op4", "op2", "op3", "op1"]
    assert model.data(model.index(1, PROGRESS)) == "30%"
    assert model.data(model.index(0, STATUS)) == "Needs your input"
    assert model.total == 4
    # Server text in a tooltip is shown literally, never as markup.
    model.apply_changes([op(2, api.RUNNING, message="<b>bold</b> & <img src=x>")])
    tip = model.data(model.index(1, 3), Qt.ItemDataRole.ToolTipRole)
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; &lt;img src=x&gt;" in tip and "<b>" not in tip


def test_a_status_icon_comes_from_the_style_in_use(qloop, qapp, monkeypatch):
    """Each status's icon is the style's own, made once per style: a new style (the person's
    theme changed) gives new icons; cells answer no role they do not fill."""
    from PySide6.QtWidgets import QApplication, QStyle, QStyleFactory

    from hostapp.ui import operations_model

    source = ListSource([op(1), op(2, api.FAILED), op(3, api.RUNNING, progress=1, total=4)])
    model = OperationTableModel(source)
    qloop.run_until_complete(model.reload())
    rows = {model.operation(r).id: r for r in range(model.rowCount())}

    def icon(op_id: str):
        return model.data(model.index(rows[op_id], STATUS), Qt.ItemDataRole.DecorationRole)

    def same(a, b) -> bool:
        return a.pixmap(16).toImage() == b.pixmap(16).toImage()

    style = QApplication.style()
    assert same(icon("op1"), style.standardIcon(QStyle.StandardPixmap.SP_DialogApplyButton))
    assert same(icon("op2"), style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxCritical))
    assert icon("op1") is icon("op1")  # made once
    assert icon("op3") is None  # running: no icon
    assert model.data(model.index(rows["op1"], STATUS), Qt.ItemDataRole.ForegroundRole) is None
    before = icon("op1")
    other = QStyleFactory.create("Fusion" if style.name().lower() != "fusion" else "Windows")
    monkeypatch.setattr(operations_model, "QApplication", type("App", (), {"style": staticmethod(lambda: other)}))
    assert icon("op1") is not before
    assert same(icon("op1"), other.standardIcon(QStyle.StandardPixmap.SP_DialogApplyButton))


def test_history_is_paged_not_loaded_at_once(qloop, qtmodeltester):
    source = ListSource([op(i) for i in range(100_000)])
    model = OperationTableModel(source)
    qloop.run_until_complete(model.reload())
    assert model.rowCount() == PAGE_SIZE
    assert model.total == 100_000
    assert model.canFetchMore(QModelIndex())
    added = qloop.run_until_complete(model.fetch_next_page())
    assert added == PAGE_SIZE and model.rowCount() == 2 * PAGE_SIZE
    assert all(limit <= 10_000 for limit, _ in source.reads)
    last = model.operation(PAGE_SIZE - 1)
    assert source.reads[-1] == (PAGE_SIZE, (last.created_at, last.id))  # by key, not by offset
    qtmodeltester.check(model)


def test_live_changes_move_rows_between_sections(qloop, qtmodeltester):
    source = ListSource([op(1), op(2, api.RUNNING)])
    model = OperationTableModel(source)
    qloop.run_until_complete(model.reload())
    qtmodeltester.check(model)
    # A new call appears at the top; the running one finishes and heads the history.
    model.apply_changes([op(3, api.PENDING), op(2, api.COMPLETED, message="done")])
    assert [model.operation(r).id for r in range(model.rowCount())] == ["op3", "op2", "op1"]
    assert model.live_count == 1
    assert model.total == 3
    # Same batch twice changes nothing.
    model.apply_changes([op(2, api.COMPLETED, message="done")])
    assert model.rowCount() == 3


def test_filters_keep_only_matching_rows(qloop, qtmodeltester):
    source = ListSource([op(1), op(2, api.RUNNING), op(3, api.FAILED), op(4, api.UNKNOWN), op(5, api.INPUT_REQUIRED)])
    model = OperationTableModel(source)
    for name, expected in [("in_flight", {"op2", "op5"}), ("needs_input", {"op5"}), ("finished", {"op1"}),
                           ("failed", {"op3", "op4"}), ("all", {"op1", "op2", "op3", "op4", "op5"})]:
        qloop.run_until_complete(model.reload(name))
        assert {model.operation(r).id for r in range(model.rowCount())} == expected, name
        qtmodeltester.check(model)
    qloop.run_until_complete(model.reload("in_flight"))
    model.apply_changes([op(2, api.COMPLETED)])  # leaves the in-flight view
    assert {model.operation(r).id for r in range(model.rowCount())} == {"op5"}
    with pytest.raises(ValueError):
        qloop.run_until_complete(model.reload("nonsense"))


def test_adapter_coalesces_progress_bursts(qtbot):
    signals = EngineSignals()
    batches = []
    signals.operationsChanged.connect(batches.append)
    for step in range(5000):
        signals.operation_changed(op(1, api.RUNNING, progress=step, total=5000))
        signals.operation_changed(op(2, api.RUNNING, progress=step))
    assert batches == []  # nothing is emitted per notification
    qtbot.waitUntil(lambda: bool(batches), timeout=int(DEADLINE * 1000))
    assert len(batches) == 1
    assert {o.id: o.progress for o in batches[0]} == {"op1": 4999, "op2": 4999}


def test_a_large_batch_is_handed_on_in_slices_with_the_window_s_events_between(qtbot):
    """10,000 calls stepping once a second are a batch of hundreds at every refresh: handed
    on whole, the window's event loop waited for all of it (its lag's 99th percentile was
    the batch). It goes in slices, a turn of the loop apart, each operation once, the
    latest of each; ``flush`` (a question, the window closing) still hands on everything."""
    signals = EngineSignals()
    batches: list[list[OperationView]] = []
    between: list[int] = []  # batches handed on when a zero-time timer fired
    signals.operationsChanged.connect(lambda ops: (batches.append(ops), time.sleep(0.002)))
    probe = QTimer()
    probe.timeout.connect(lambda: between.append(len(batches)))
    for i in range(3_000):
        signals.operation_changed(op(i, api.RUNNING, progress=1))
    signals.operation_changed(op(7, api.RUNNING, progress=2))
    probe.start(0)
    qtbot.waitUntil(lambda: sum(map(len, batches)) == 3_000, timeout=int(DEADLINE * 1000))
    probe.stop()
    assert len(batches) > 3
    handed = [o.id for batch in batches for o in batch]
    assert sorted(handed) == sorted(f"op{i}" for i in range(3_000))
    assert next(o for batch in batches for o in batch if o.id == "op7").progress == 2
    # Other events ran between the slices (the probe's timer saw the count in between).
    assert any(0 < seen < len(batches) for seen in between)

    for i in range(3_000):
        signals.operation_changed(op(i, api.RUNNING, progress=3))
    batches.clear()
    signals.flush()
    assert sum(map(len, batches)) == 3_000


def test_adapter_delivers_status_before_question(qtbot):
    signals = EngineSignals()
    seen = []
    signals.operationsChanged.connect(lambda ops: seen.append(("ops", ops[0].status)))
    signals.inputRequested.connect(lambda req: seen.append(("ask", req.id)))
    signals.operation_changed(op(1, api.INPUT_REQUIRED))
    signals.input_requested(api.InputRequest("q1", "op1", "lab", "form", "Who?", {}))
    assert seen == [("ops", api.INPUT_REQUIRED), ("ask", "q1")]


def test_servers_model(qtmodeltester):
    model = ServerTableModel()
    model.set_servers([ServerView("lab", "stdio", "python -m hostapp lab serve --stdio", state=api.CONNECTED,
                                  protocol_version="2025-11-25", tools_count=12)])
    qtmodeltester.check(model)
    model.update_server(ServerView("remote", "http", "http://127.0.0.1:9/mcp", state=api.RECONNECTING, retry_in=9.6))
    model.update_server(ServerView("lab", "stdio", "x", state=api.NEEDS_SIGN_IN))
    qtmodeltester.check(model)
    assert model.data(model.index(1, SERVER_STATUS)) == "reconnecting in 10 s"
    assert model.data(model.index(0, SERVER_STATUS)) == "needs sign-in"
    model.remove_server("lab")
    assert model.rowCount() == 1
    qtmodeltester.check(model)


def test_the_servers_read_again_keep_what_was_told_meanwhile(qapp, qtmodeltester):
    """While every server is read again, what is told meanwhile is told again over the
    answer, in order, with the countdown it had; two reads at once keep the newer word; a
    read that fails keeps nothing."""
    model = ServerTableModel()
    lab = ServerView("lab", "stdio", "x", state=api.CONNECTING)
    model.set_servers([lab])
    with model.reading():
        model.update_server(ServerView("lab", "stdio", "x", state=api.RECONNECTING, retry_in=30))
        model.update_server(ServerView("old", "stdio", "y", state=api.CONNECTED))
        model.remove_server("old")
        time.sleep(1.1)  # the countdown runs from when the change came, not from the answer
        model.set_servers([lab, ServerView("old", "stdio", "y", state=api.CONNECTED)])  # older
    qtmodeltester.check(model)
    assert [s.name for s in model.servers()] == ["lab"]
    assert model.servers()[0].state == api.RECONNECTING
    assert model.data(model.index(0, SERVER_STATUS)) in ("reconnecting in 29 s", "reconnecting in 28 s")
    with model.reading():  # two at once: the later (older) answer does not undo the first
        with model.reading():
            model.update_server(ServerView("lab", "stdio", "x", state=api.CONNECTED))
            model.set_servers([ServerView("lab", "stdio", "x", state=api.CONNECTED)])
        model.set_servers([lab])
    assert model.servers()[0].state == api.CONNECTED
    with pytest.raises(RuntimeError), model.reading():
        model.update_server(ServerView("lab", "stdio", "x", state=api.OFFLINE))
        raise RuntimeError("the agent went away")
    model.set_servers([lab])
    assert model.servers()[0].state == api.CONNECTING  # nothing kept from the failed read


@pytest.mark.parametrize("view", [
    op(1, api.RUNNING, progress=42, total=100),
    op(2, api.RUNNING, progress=3),                 # no total: indeterminate
    op(3, api.COMPLETED),
])
def test_progress_delegate_paints_a_bar(qapp, view):
    table = QTableView()
    source = ListSource([view])
    model = OperationTableModel(source)
    model.apply_changes([view])
    table.setModel(model)
    delegate = ProgressDelegate(table)
    delegate.clock = lambda: 0.8   # half-way through a sweep: the chunk is in the middle of the bar
    image = QImage(200, 24, QImage.Format.Format_ARGB32)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    option = QStyleOptionViewItem()
    option.rect = image.rect()
    option.palette = table.palette()
    option.fontMetrics = table.fontMetrics()
    option.widget = table
    delegate.paint(painter, option, model.index(0, PROGRESS))
    painter.end()
    highlight = table.palette().highlight().color()

    def near(c):
        return sum(abs(a - b) for a, b in zip(c.getRgb()[:3], highlight.getRgb()[:3], strict=True)) < 90

    filled = sum(1 for x in range(3, 197) if near(image.pixelColor(x, 12)))
    if view.id == "op1":
        assert 50 < filled < 130       # about 42 % of the bar
    elif view.id == "op2":
        assert 0 < filled < 120        # a sliding chunk, never the whole bar
    else:
        assert filled > 150            # done: full
    assert model.index(0, PROGRESS).data(OperationRole) is view
    assert model.data(model.index(0, ELAPSED))


@pytest.mark.parametrize("ending", [api.COMPLETED, api.CANCELLED, api.FAILED, api.RUNNING])
def test_selection_stays_on_the_operation_when_rows_reorder(qloop, qtmodeltester, ending):
    """A selected operation that finishes (or is answered) moves to another row: the
    selection goes with it, instead of staying on the row number."""
    source = ListSource([op(1), op(2, api.RUNNING), op(3, api.INPUT_REQUIRED, needs_input=True),
                         op(4, api.RUNNING), op(5, api.COMPLETED)])
    model = OperationTableModel(source)
    qloop.run_until_complete(model.reload())
    view = QTableView()
    view.setModel(model)
    view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
    target = "op3" if ending == api.RUNNING else "op4"
    view.selectRow(model.row_of(target))
    assert view.currentIndex().data(OperationRole).id == target
    before = model.row_of(target)
    changed = op(int(target[2:]), ending, ended_at=2000.0 if ending in api.TERMINAL else None)
    model.apply_changes([changed])
    qtmodeltester.check(model)
    if ending != api.RUNNING:
        assert model.row_of(target) != before  # it did move
    assert view.currentIndex().data(OperationRole).id == target
    assert [i.row() for i in view.selectionModel().selectedRows()] == [model.row_of(target)]
    # A finished operation that comes back in flight (a re-delivered status) moves up, selected.
    if ending in api.TERMINAL:
        model.apply_changes([op(int(target[2:]), api.RUNNING)])
        assert view.currentIndex().data(OperationRole).id == target


# -- time left: it ages while nothing comes, and a pause is no measure of the rate ------------

def _running(t0: float, status: str = api.RUNNING, **kw) -> OperationView:
    return op(7, status, created_at=t0, **kw)


def test_a_stalled_call_with_a_total_ages_its_estimate_and_says_no_news(qloop):
    t0 = time.time() - 171  # 2:51 into a 120 s job whose 10 % came after 12 s, and then nothing
    model = OperationTableModel(ListSource([]))
    qloop.run_until_complete(model.reload())
    model.apply_changes([_running(t0, updated_at=t0)])
    model.apply_changes([_running(t0, progress=1, total=10, updated_at=t0 + 12)])
    running = model.operation(model.row_of("op7"))
    # Between two pieces of news the time left counts down...
    soon = model.estimate(running, now=t0 + 20)
    assert soon is not None and not soon.stalled and soon.seconds_left == pytest.approx(100)
    # ...and once news is long overdue it grows for as long as nothing comes.
    later, latest = model.estimate(running, now=t0 + 100), model.estimate(running, now=t0 + 171)
    assert later is not None and latest is not None and later.stalled and latest.stalled
    assert soon.seconds_left < later.seconds_left < latest.seconds_left
    assert latest.seconds_left == pytest.approx(9 * 171)
    # The latest message says so, as it does for a call without a total.
    assert model.data(model.index(model.row_of("op7"), MESSAGE)).endswith("no news for 3 min")


def test_slow_but_regular_steps_are_not_called_silent(qloop):
    t0 = time.time() - 270
    model = OperationTableModel(ListSource([]))
    qloop.run_until_complete(model.reload())
    for step in (1, 2, 3):  # one step every 90 s; the last one 90 s ago
        model.apply_changes([_running(t0, progress=step, total=10, updated_at=t0 + 90 * step - 90)])
    text = model.data(model.index(model.row_of("op7"), MESSAGE))
    assert "no news" not in text
    estimate = model.estimate(model.operation(model.row_of("op7")))
    assert estimate is not None and not estimate.stalled


def test_the_time_spent_on_a_question_or_without_an_agent_does_not_slow_the_rate(qloop):
    model = OperationTableModel(ListSource([]))
    qloop.run_until_complete(model.reload())
    # Half done in 10 s, then a question the person answers 3 minutes later.
    model.apply_changes([_running(0.0, progress=0, total=10, updated_at=0.0)])
    model.apply_changes([_running(0.0, progress=5, total=10, updated_at=10.0)])
    model.apply_changes([_running(0.0, status=api.INPUT_REQUIRED, needs_input=True, progress=5, total=10,
                                  updated_at=12.0)])
    assert model.estimate(model.operation(model.row_of("op7")), now=100.0) is None
    answered = _running(0.0, progress=5, total=10, updated_at=192.0)
    model.apply_changes([answered])
    # No figure before the work moves again rather than one measured across the question...
    assert model.estimate(answered, now=193.0) is None
    moved = _running(0.0, progress=6, total=10, updated_at=194.0)
    model.apply_changes([moved])
    estimate = model.estimate(moved, now=194.0)
    # ...then the rate of the work since the answer: 1 step in 2 s, 4 to go.
    assert estimate is not None and estimate.rate == pytest.approx(0.5) and estimate.seconds_left == pytest.approx(8)

    # No agent carried the work for a while: the same.
    t0 = time.time() - 400
    model.apply_changes([op(8, api.RUNNING, created_at=t0, progress=5, total=10, updated_at=t0 + 10)])
    model.set_paused("agent stopped")
    model.set_paused(None)
    resumed = time.time()
    model.apply_changes([op(8, api.RUNNING, created_at=t0, progress=5, total=10, updated_at=t0 + 10)])
    assert model.estimate(model.operation(model.row_of("op8")), now=resumed) is None
    moved = op(8, api.RUNNING, created_at=t0, progress=6, total=10, updated_at=resumed + 2)
    model.apply_changes([moved])
    estimate = model.estimate(moved, now=resumed + 2)
    assert estimate is not None and estimate.seconds_left == pytest.approx(8, abs=0.1)


def test_an_operation_the_host_found_stalled_says_so_until_it_ends(qloop):
    model = OperationTableModel(ListSource([]))
    qloop.run_until_complete(model.reload())
    why = "the server has said for 6.0 s that it needs input, but asked no question hostapp could show"
    model.apply_changes([op(8, api.INPUT_REQUIRED, needs_input=True, message="waiting for your answer",
                            stalled=why)])
    index = model.index(model.row_of("op8"), MESSAGE)
    assert model.data(index) == f"Stalled: {why}"
    assert "asked no" in model.data(index, Qt.ItemDataRole.ToolTipRole)
    assert model.data(model.index(model.row_of("op8"), STATUS)) == "Stalled"
    model.apply_changes([op(8, api.INPUT_REQUIRED, needs_input=True, message="waiting for your answer")])
    assert model.data(model.index(model.row_of("op8"), MESSAGE)) == "waiting for your answer"
    assert model.data(model.index(model.row_of("op8"), STATUS)) != "Stalled"
