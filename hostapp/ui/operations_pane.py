"""The operations pane: the table and what narrows it (status, server, search), sorting,
"Clear finished", the open questions, and a first-run hint when there is nothing to show.

The table model (:class:`~hostapp.ui.operations_model.OperationTableModel`) holds the rows;
a sort-and-filter proxy stands between it and the view. "Clear finished" only hides: the
finished operations stay in the journal, with their results, and "Show cleared" brings
them back (the time of the last clearing is kept in the settings).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from PySide6.QtCore import (
    QAbstractItemModel,
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QPoint,
    QSettings,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import OperationView
from hostapp.ui.accessible import name_as_shown, name_clear_button
from hostapp.ui.operations_model import (
    ELAPSED,
    FILTERS,
    MESSAGE,
    PAGE_SIZE,
    PROGRESS,
    SERVER,
    STATUS,
    SURVIVES,
    TOOL,
    OperationRole,
    OperationTableModel,
    SortRole,
    status_text,
)
from hostapp.ui.progress_delegate import ProgressDelegate
from hostapp.ui.result_view import plain_label

#: What the empty list suggests on a first run: the showcase tools of each built-in lab
#: server that is configured (by name), and what each shows.
SHOWCASE_TOOLS: dict[str, tuple[tuple[str, str], ...]] = {
    "lab": (("long_task_ext", "a task that survives a restart"), ("ask_form", "a question for you"),
            ("show_card", "an app view")),
    "lab-http": (("long_sse", "a stream resumed after a break"), ("sleep_with_progress", "live progress"),
                 ("ask_model", "a message asked of your model")),
}
ALL_SERVERS = ""
#: Column widths in a wide window; in a narrower one they shrink (to 60 %) so that the
#: latest message keeps :data:`MESSAGE_MIN` pixels, until the person sizes a column.
COLUMN_WIDTHS = {TOOL: 140, SERVER: 60, PROGRESS: 160, STATUS: 145, ELAPSED: 55, SURVIVES: 175}
MESSAGE_MIN = 180


def make_table(model: QAbstractItemModel, name: str) -> QTableView:
    """A table of whole rows, one selected at a time, as both of the window's tables are."""
    table = QTableView()
    table.setModel(model)
    table.setAccessibleName(name)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    table.setWordWrap(False)
    table.verticalHeader().setVisible(False)
    table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 12)
    table.horizontalHeader().setHighlightSections(False)
    table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
    # Tab goes to the next control (arrows move between rows), not from cell to cell of a
    # selected row, where nothing visible happens.
    table.setTabKeyNavigation(False)
    return table


class OperationFilter(QSortFilterProxyModel):
    """Search text, one server, and the cleared finished operations hidden; sorts by
    :data:`SortRole` (numbers for progress and elapsed time)."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setSortRole(SortRole)
        self.setDynamicSortFilter(True)
        self._text = ""
        self._server = ALL_SERVERS
        self.cleared_before: float | None = None  # finished before then: hidden
        self.show_cleared = False

    def _refilter(self, change: Callable[[], None]) -> None:
        """Change what the filter lets through. Qt 6.10 replaced invalidateRowsFilter
        (deprecated there) with beginFilterChange before and endFilterChange after."""
        if hasattr(self, "endFilterChange"):
            self.beginFilterChange()
            change()
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - Qt before 6.10
            change()
            self.invalidateRowsFilter()

    def set_text(self, text: str) -> None:
        self._refilter(lambda: setattr(self, "_text", text.strip().lower()))

    def set_server(self, server: str) -> None:
        self._refilter(lambda: setattr(self, "_server", server))

    def set_cleared(self, before: float | None, show: bool) -> None:
        def change() -> None:
            self.cleared_before, self.show_cleared = before, show
        self._refilter(change)

    def moved_by_progress(self) -> bool:
        """Whether a change of progress or message can move a row or hide it: while a search
        looks in messages, or the rows are sorted by anything but their server (a tool's
        name counts its app view's calls)."""
        return bool(self._text) or self.sortColumn() not in (-1, SERVER)

    def is_cleared(self, op: OperationView) -> bool:
        return (self.cleared_before is not None and not op.in_flight and op.ended_at is not None
                and op.ended_at <= self.cleared_before)

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        source = self.sourceModel()
        op = source.operation(source_row) if isinstance(source, OperationTableModel) else None
        if op is None:
            return True
        if self._server and op.server != self._server:
            return False
        if not self.show_cleared and self.is_cleared(op):
            return False
        if self._text:
            haystack = " ".join((op.tool or op.method, op.server, op.message or "", status_text(op), op.id)).lower()
            return all(word in haystack for word in self._text.split())
        return True


class OperationsPane(QGroupBox):
    """The operations group: a row of controls over the table.

    Signals:
        questionsRequested(): the person wants to see the questions answered later.
        startRequested(): the first-run hint's link to Start call was followed.
    """

    questionsRequested = Signal()
    startRequested = Signal()

    def __init__(self, model: OperationTableModel, settings: QSettings, parent: QWidget | None = None) -> None:
        super().__init__("Operations", parent)
        self.model = model
        self.settings = settings
        self.proxy = OperationFilter(self)
        self.proxy.setSourceModel(model)
        self.table = make_table(self.proxy, "Operations")
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setSortIndicatorShown(True)
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.table.setItemDelegateForColumn(PROGRESS, ProgressDelegate(self.table))
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(MESSAGE, QHeaderView.ResizeMode.Stretch)
        #: Set once the person resized a column (or their widths were restored): kept then.
        self.columns_set_by_person = False
        self._fitting = False
        header.sectionResized.connect(self._section_resized)
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height()
                                    + 3 * self.table.verticalHeader().defaultSectionSize() + 4)

        self.filter_box = QComboBox()
        self.filter_box.setAccessibleName("Show operations")
        for key, (label, _) in FILTERS.items():
            self.filter_box.addItem(label, key)
        self.server_box = QComboBox()
        self.server_box.setAccessibleName("Show the operations of server")
        self.server_box.addItem("All servers", ALL_SERVERS)
        self.search = QLineEdit()
        self.search.setPlaceholderText("Search")
        self.search.setClearButtonEnabled(True)
        self.search.setAccessibleName("Search the operations")
        name_clear_button(self.search, "Clear the search")
        # Shown by the window in its status bar (this pane's height goes to the rows).
        self.count_label = plain_label("", wrap=False, selectable=False)
        self.count_label.setAccessibleName("Number of operations")
        self.questions_button = QPushButton("")
        self.questions_button.setFlat(True)
        # Named by its text ("1 question waiting for you"), which changes.
        self.questions_button.setAccessibleDescription("Open the questions waiting for you")
        self.questions_button.setToolTip("Show the questions you chose to answer later")
        font = self.questions_button.font()
        font.setBold(True)
        self.questions_button.setFont(font)
        self.questions_button.hide()
        self.clear_button = QPushButton("C&lear finished")
        name_as_shown(self.clear_button, "Hide the finished operations (they stay in the history)")
        self.clear_button.setToolTip("Hide the operations that have ended from this list; "
                                     "they stay in the journal and come back with Show cleared")
        self.show_cleared_button = QPushButton("Show cleared")
        self.show_cleared_button.setCheckable(True)
        self.show_cleared_button.setAccessibleDescription("Show the cleared operations again")
        self.show_cleared_button.hide()

        show = QLabel("S&how:")
        show.setBuddy(self.filter_box)
        server = QLabel("Ser&ver:")
        server.setBuddy(self.server_box)
        row = QHBoxLayout()
        row.addWidget(show)
        row.addWidget(self.filter_box)
        row.addWidget(server)
        row.addWidget(self.server_box)
        row.addWidget(self.search, 1)
        row.addWidget(self.questions_button)
        row.addWidget(self.clear_button)
        row.addWidget(self.show_cleared_button)
        lay = QVBoxLayout(self)
        lay.addLayout(row)
        lay.addWidget(self.table, 1)

        self._server_names: list[str] = []
        self.empty_hint = QLabel(self.table.viewport())
        self.empty_hint.setTextFormat(Qt.TextFormat.RichText)  # our own words only
        self.empty_hint.setWordWrap(True)
        self.empty_hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty_hint.setForegroundRole(self.empty_hint.foregroundRole().PlaceholderText)
        self.empty_hint.linkActivated.connect(lambda _link: self.startRequested.emit())
        self.table.viewport().installEventFilter(self)

        cleared = settings.value("operations/cleared_before")
        try:
            self.proxy.set_cleared(float(cleared), False) if cleared not in (None, "") else None
        except (TypeError, ValueError):
            pass
        self.search.textChanged.connect(self.proxy.set_text)
        self.server_box.currentIndexChanged.connect(lambda _i: self.proxy.set_server(self.server_box.currentData()))
        self.clear_button.clicked.connect(self.clear_finished)
        self.show_cleared_button.toggled.connect(
            lambda on: self.proxy.set_cleared(self.proxy.cleared_before, on))
        self.questions_button.clicked.connect(self.questionsRequested.emit)
        for sig in (self.proxy.rowsInserted, self.proxy.rowsRemoved, self.proxy.modelReset, self.proxy.layoutChanged):
            sig.connect(self._refresh)
        self.model.loadingChanged.connect(lambda _on: self._refresh())
        self.model.modelReset.connect(self._refresh)
        self.model.liveCellsAged.connect(self.repaint_live_rows)
        # The model holds a bounded stretch of the history: it never lets go of the rows on
        # screen, the rows let go above are read again as the view comes back up, and the
        # row at the top of the view stays there when rows come or go elsewhere.
        self.model.rows_on_screen = self.source_rows_on_screen
        self.model.every_change_told = self.proxy.moved_by_progress
        self._anchor: str | None = None
        self._reading_newer: asyncio.Task[int] | None = None
        # The chosen operation while its row is let go (selected again when read again).
        self._chosen_let_go: OperationView | None = None
        self.model.lettingGo.connect(self._letting_go)
        # The chosen operation across a reset (a filter changed, a new agent's rows read):
        # chosen again where it is still shown.
        self._chosen_before_reset: str | None = None
        self.model.modelAboutToBeReset.connect(self._remember_chosen)
        self.model.modelReset.connect(self._choose_after_reset)
        self.table.selectionModel().currentRowChanged.connect(self._chosen_again)
        self.model.rowsAboutToBeRemoved.connect(self._hold_top_row)
        self.model.rowsAboutToBeInserted.connect(self._hold_top_row)
        self.model.rowsRemoved.connect(self._keep_top_row)
        self.model.rowsInserted.connect(self._keep_top_row)
        self.table.verticalScrollBar().valueChanged.connect(self._maybe_read_newer)
        self._refresh()

    # -- what the pane shows ------------------------------------------------------------

    def set_servers(self, names: list[str]) -> None:
        if names != self._server_names:
            self._server_names = list(names)
            self._place_hint()
        current = self.server_box.currentData()
        self.server_box.blockSignals(True)
        self.server_box.clear()
        self.server_box.addItem("All servers", ALL_SERVERS)
        for name in names:
            self.server_box.addItem(name, name)
        index = self.server_box.findData(current)
        self.server_box.setCurrentIndex(max(0, index))
        self.server_box.blockSignals(False)
        if index < 0 and current:
            self.proxy.set_server(ALL_SERVERS)

    def set_questions(self, count: int) -> None:
        self.questions_button.setText(f"{count} question{'s' if count != 1 else ''} waiting for you"
                                      if count else "")
        self.questions_button.setVisible(bool(count))

    def clear_finished(self) -> None:
        """Hide every operation that has ended by now (they stay in the journal)."""
        ended = [op.ended_at for op in self._source_ops() if not op.in_flight and op.ended_at is not None]
        if not ended:
            return
        before = max(ended)
        self.settings.setValue("operations/cleared_before", before)
        self.show_cleared_button.setChecked(False)
        self.proxy.set_cleared(before, False)
        self._refresh()

    def cleared_count(self) -> int:
        if self.proxy.cleared_before is None:
            return 0  # (counted at every row that comes or goes: nothing to walk when none is)
        return sum(1 for op in self._source_ops() if self.proxy.is_cleared(op))

    def _source_ops(self) -> list[OperationView]:
        return [op for r in range(self.model.rowCount()) if (op := self.model.operation(r)) is not None]

    def _refresh(self, *_args: object) -> None:
        cleared = self.cleared_count()
        self.show_cleared_button.setText(f"Show cleared ({cleared:,})")
        self.show_cleared_button.setVisible(bool(cleared) or self.show_cleared_button.isChecked())
        self._place_hint()

    def _place_hint(self) -> None:
        empty = self.proxy.rowCount() == 0
        if empty:
            if not self.model.loaded:
                self.empty_hint.setText("<p>Loading…</p>")  # not "no operations" over a history not read yet
            elif self.model.total == 0 and self.model.filter_name == "all" and not self.model.rowCount():
                self.empty_hint.setText(self.first_run_text())
            else:
                self.empty_hint.setText("<p>No operation matches what is chosen above.</p>")
            self.empty_hint.setGeometry(self.table.viewport().rect().adjusted(24, 12, -24, -12))
        self.empty_hint.setVisible(empty)

    def first_run_text(self) -> str:
        """The empty list's invitation: the showcase tools of the lab servers configured."""
        labs = [name for name in SHOWCASE_TOOLS if name in self._server_names]
        if not labs:
            return ("<p><b>No operations yet.</b></p><p>Add a server (File ▸ Add server…), then choose "
                    "<a href='start'>Start call…</a> (Ctrl+N) to call one of its tools.</p>")
        lines = "".join(
            f"<li><b>{name}</b>: " + ", ".join(f"{tool} ({what})" for tool, what in SHOWCASE_TOOLS[name]) + "</li>"
            for name in labs)
        skills = " The lab also offers a skill: select it, then Server ▸ Skills… shows it." if "lab" in labs else ""
        return ("<p><b>No operations yet.</b></p><p>Choose <a href='start'>Start call…</a> (Ctrl+N) and try "
                f"one of the built-in lab's tools:</p><ul>{lines}</ul>"
                f"<p>Calls you start appear here with their progress; they keep running while this "
                f"window is closed.{skills}</p>")

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self._place_hint()
            self.fit_columns()
        return False

    def fit_columns(self) -> None:
        if self.columns_set_by_person:
            return
        total = sum(COLUMN_WIDTHS.values())
        scale = min(1.0, max(0.6, (self.table.viewport().width() - MESSAGE_MIN) / total))
        self._fitting = True
        try:
            for col, width in COLUMN_WIDTHS.items():
                self.table.setColumnWidth(col, int(width * scale))
        finally:
            self._fitting = False

    def _section_resized(self, column: int, _old: int, _new: int) -> None:
        if not self._fitting and column != MESSAGE and self.table.horizontalHeader().sectionsClickable() \
                and self.table.isVisible() and QApplication.mouseButtons() != Qt.MouseButton.NoButton:
            self.columns_set_by_person = True

    def shown_rows(self) -> range:
        """The view's rows on screen now (empty when the table is hidden)."""
        table = self.table
        if not table.isVisible() or not self.proxy.rowCount():
            return range(0)
        first = table.rowAt(0)
        if first < 0:
            return range(0)
        last = table.rowAt(table.viewport().height() - 1)
        return range(first, (self.proxy.rowCount() if last < 0 else last + 1))

    def source_rows_on_screen(self) -> list[int]:
        proxy = self.proxy
        return [proxy.mapToSource(proxy.index(row, 0)).row() for row in self.shown_rows()]

    def _top_operation(self) -> str | None:
        index = self.table.indexAt(QPoint(0, 0))
        op = index.data(OperationRole) if index.isValid() else None
        return op.id if op is not None else None

    def _hold_top_row(self, _parent: QModelIndex, first: int, _last: int) -> None:
        # Only the history's rows (those the model lets go and reads again); the rows in
        # flight come and go at the top as they always did. Not over a row held already:
        # rows let go were held when the model said so (see _letting_go).
        if first >= self.model.live_count and self.table.isVisible() and self._anchor is None:
            self._anchor = self._top_operation()

    def _keep_top_row(self, *_args: object) -> None:
        self._choose_read_again()
        anchor, self._anchor = self._anchor, None
        if anchor is None or self._top_operation() == anchor:
            return
        row = self.row_of(anchor)
        if row is not None:
            self.table.scrollTo(self.proxy.index(row, 0), QAbstractItemView.ScrollHint.PositionAtTop)

    def _letting_go(self, first: int, last: int) -> None:
        """The chosen row is let go (far off screen): Qt would make a neighbour current and
        scroll the view to it, where the model, seeing the end of its rows on screen, read
        the page beyond; going back up, every page read above made the model read one
        below. The choice is kept aside (still the selected operation) until its row is
        read again."""
        # The top row is held here, before the removal: the proxy takes the rows out of the
        # view already when the model says they are about to go, and the view's top row
        # then was one 200 rows further down, at the end of what it holds (where Qt asked
        # for the next page, and the next, on its own).
        if self.table.isVisible():
            self._anchor = self._top_operation()
        current = self.table.currentIndex()
        if current.isValid() and first <= self.proxy.mapToSource(current).row() <= last:
            self._chosen_let_go = current.data(OperationRole)
            self.table.selectionModel().clear()

    def _choose_read_again(self) -> None:
        chosen = self._chosen_let_go
        if chosen is None or (row := self.row_of(chosen.id)) is None:
            return
        self._chosen_let_go = None
        scrolls = self.table.hasAutoScroll()
        self.table.setAutoScroll(False)  # chosen again where it is, not scrolled to
        try:
            self.table.selectionModel().setCurrentIndex(
                self.proxy.index(row, 0),
                QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows)
        finally:
            self.table.setAutoScroll(scrolls)

    def _chosen_again(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self._chosen_let_go = None  # another row chosen (or the kept one again)

    def _remember_chosen(self) -> None:
        chosen = self.selected()
        self._chosen_before_reset = chosen.id if chosen is not None else None

    def _choose_after_reset(self) -> None:
        """The rows were read again: the operation chosen before is chosen again if it is
        still shown (else nothing is), whether the read began before or after the choice."""
        self._chosen_let_go = None
        chosen, self._chosen_before_reset = self._chosen_before_reset, None
        if chosen is not None:
            self.select(chosen)

    def _maybe_read_newer(self, _value: int) -> None:
        """Near the top of the history held, with rows let go above it: read them again."""
        if not self.model.history_cut_above or (self._reading_newer is not None and not self._reading_newer.done()):
            return
        rows = self.source_rows_on_screen()
        if rows and min(rows) < self.model.live_count + PAGE_SIZE // 2:
            try:
                self._reading_newer = asyncio.get_running_loop().create_task(self.model.fetch_newer_page())
            except RuntimeError:
                pass  # no event loop: nothing can be read now

    def repaint_live_rows(self) -> None:
        """Time passed: only the rows on screen are told (elapsed times are computed when
        a cell is painted), so the cost does not grow with the operations in flight."""
        proxy = self.proxy
        self.model.refresh_live_rows(proxy.mapToSource(proxy.index(row, 0)).row() for row in self.shown_rows())

    # -- rows and operations ---------------------------------------------------------------

    def row_of(self, op_id: str) -> int | None:
        """The view's row of an operation (None when it is not loaded or filtered out)."""
        row = self.model.row_of(op_id)
        if row is None:
            return None
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        return index.row() if index.isValid() else None

    def select(self, op_id: str) -> bool:
        row = self.row_of(op_id)
        if row is not None:
            self.table.selectRow(row)
        return row is not None

    def selected(self) -> OperationView | None:
        """The chosen operation (also while its row is let go, far off screen)."""
        index = self.table.currentIndex()
        return index.data(OperationRole) if index.isValid() else self._chosen_let_go


__all__ = ["MESSAGE", "OperationFilter", "OperationsPane", "make_table"]
