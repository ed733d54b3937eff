"""Pieces of the main window that need no window: its title and summary, the words of its
notifications, and how its three panes share the height.

The summary ("2 running, 1 needs you, 1 stalled") goes into the window title, which is what task
bars and window lists show; Qt has no portable taskbar progress on Linux (Windows has
ITaskbarList3, macOS a dock badge; neither is wrapped by Qt 6), so the title carries it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from PySide6.QtCore import QEvent, QObject, QTimer
from PySide6.QtWidgets import QSplitter, QTableView, QWidget

from hostapp.engine.api import OperationStatus, OperationView

#: The window's own title (the application name is added by Qt, as the desktop wants).
TITLE = "MCP operations"

#: Notification title and verb for an operation that ended without a result.
OUTCOME_NOTICES: dict[str, tuple[str, str]] = {
    OperationStatus.FAILED: ("Operation failed", "failed"),
    OperationStatus.EXPIRED: ("Operation expired", "expired on the server"),
    OperationStatus.UNKNOWN: ("Outcome unknown", "may or may not have run"),
}

#: Rows the servers table shows at least and at most before it scrolls.
SERVER_ROWS = (1, 5)


class Summary:
    """How many operations run, how many wait for the person and how many have stalled,
    from the changes seen (of the top-level operations the list shows: a view's calls are
    not counted). A stalled operation is counted as stalled only, even one that waits for
    input: what it waits for was never asked of the person, so it does not need them."""

    RUNNING, NEEDS, STALLED = "running", "needs", "stalled"

    def __init__(self) -> None:
        self._kind: dict[str, str] = {}
        # Kept as the changes come (a count over every status at each batch cost ~9 % of
        # the window with 10,000 in flight).
        self._counts = {self.RUNNING: 0, self.NEEDS: 0, self.STALLED: 0}

    @classmethod
    def kind_of(cls, op: OperationView) -> str | None:
        """Which count an operation is in (None: finished, in none)."""
        if not op.in_flight:
            return None
        if op.stalled:
            return cls.STALLED
        return cls.NEEDS if op.status == OperationStatus.INPUT_REQUIRED else cls.RUNNING

    def update(self, ops: Iterable[OperationView]) -> None:
        for op in ops:
            if op.view_of is not None:
                continue  # a call an app view made: not in the list, not counted
            before = self._kind.pop(op.id, None)
            if before is not None:
                self._counts[before] -= 1
            kind = self.kind_of(op)
            if kind is not None:
                self._kind[op.id] = kind
                self._counts[kind] += 1

    def counts(self) -> tuple[int, int, int]:
        """(running, needing the person, stalled)."""
        return self._counts[self.RUNNING], self._counts[self.NEEDS], self._counts[self.STALLED]

    def text(self) -> str:
        running, needs, stalled = self.counts()
        parts = []
        if running:
            parts.append(f"{running} running")
        if needs:
            parts.append(f"{needs} need{'s' if needs == 1 else ''} you")
        if stalled:
            parts.append(f"{stalled} stalled")
        return ", ".join(parts)


def fit_table_to_rows(table: QTableView, rows: int, most: int = SERVER_ROWS[1]) -> None:
    """Make a table as high as ``rows`` rows (within :data:`SERVER_ROWS` and ``most``), so
    that every server is visible without the table taking the operations' room."""
    shown = max(SERVER_ROWS[0], min(SERVER_ROWS[1], most, rows))
    height = (table.horizontalHeader().sizeHint().height() + shown * table.verticalHeader().defaultSectionSize()
              + 2 * table.frameWidth() + 2)
    table.setFixedHeight(height)


def arrange_splitter(splitter: QSplitter, servers: QWidget, servers_table: QTableView, operations: QWidget,
                     details: QWidget) -> DetailsGiveWay:
    """Servers sized to their rows, operations the largest and always visible, the details
    giving way first (they may collapse in a small window, and come back when it grows)."""
    for pane in (servers, operations, details):
        splitter.addWidget(pane)
    splitter.setStretchFactor(0, 0)
    splitter.setStretchFactor(1, 3)
    splitter.setStretchFactor(2, 2)
    splitter.setCollapsible(0, False)
    splitter.setCollapsible(1, False)
    splitter.setCollapsible(2, True)
    details.setMinimumHeight(1)  # explicit, or the splitter takes its contents' minimum
    model = servers_table.model()

    def refit(*_args: object) -> None:
        # At most a third of the splitter's height goes to the servers' rows.
        row = servers_table.verticalHeader().defaultSectionSize()
        most = max(1, (splitter.height() // 3 - servers_table.horizontalHeader().sizeHint().height()) // row)
        fit_table_to_rows(servers_table, model.rowCount(), most)
        servers.setMaximumHeight(servers.sizeHint().height())
        servers.setMinimumHeight(servers.sizeHint().height())

    for signal in (model.rowsInserted, model.rowsRemoved, model.modelReset):
        signal.connect(refit)
    # A new server is scrolled into view when the table has reached its limit: once the
    # table has its new height and scroll range (scrolling at the insertion uses the old ones).
    newest: list[int] = []

    def scroll_to_newest(*_args: object) -> None:
        if newest and model.rowCount():
            servers_table.scrollTo(model.index(min(newest[-1], model.rowCount() - 1), 0))

    def show_new(_parent: object, _first: int, last: int) -> None:
        newest[:] = [last]
        QTimer.singleShot(0, scroll_to_newest)

    model.rowsInserted.connect(show_new)
    servers_table.verticalScrollBar().rangeChanged.connect(scroll_to_newest)
    refit()
    balancer = DetailsGiveWay(splitter, servers, operations, refit)
    balancer.reset()
    return balancer


#: Rows of operations kept in view before the details pane gets any height.
OPERATION_ROWS = 6
#: Below this height the details pane is collapsed rather than shown as a sliver.
DETAILS_MIN = 90
#: The details' height in a fresh layout, and what they come back with after a collapse.
DETAILS_HEIGHT = 300


class DetailsGiveWay(QObject):
    """When the splitter shrinks, the details pane gives its height to the operations
    until they show :data:`OPERATION_ROWS` rows, and collapses when too little is left.
    When it grows again the details come back with the height they had, unless the person
    closed them by dragging the handle (``hidden_by_person``); :meth:`reset` brings the
    first layout back."""

    def __init__(self, splitter: QSplitter, servers: QWidget, operations: QWidget,
                 refit: Callable[[], None]) -> None:
        super().__init__(splitter)
        self.refit = refit
        self.splitter = splitter
        self.servers = servers
        self.operations = operations
        self.hidden_by_person = False
        self.details_height = DETAILS_HEIGHT
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(0)
        self._timer.timeout.connect(self.rebalance)
        splitter.installEventFilter(self)
        splitter.splitterMoved.connect(self._moved_by_person)

    def reset(self) -> None:
        """The first layout: servers sized to their rows, the operations their rows, and the
        details what is left, up to :data:`DETAILS_HEIGHT`."""
        self.hidden_by_person = False
        self.details_height = DETAILS_HEIGHT
        self.refit()
        servers = self.servers.sizeHint().height()
        rest = sum(self.splitter.sizes()) - servers
        if rest <= 0:  # not laid out yet: the first resize shares the height
            self.splitter.setSizes([servers, 330, DETAILS_HEIGHT])
            return
        operations = max(self.wanted(), rest - DETAILS_HEIGHT)
        details = rest - operations
        if details < DETAILS_MIN:
            operations, details = rest, 0
        self.splitter.setSizes([servers, operations, details])

    def _moved_by_person(self, _pos: int, _index: int) -> None:
        details = self.splitter.sizes()[2]
        self.hidden_by_person = details == 0
        if details >= DETAILS_MIN:
            self.details_height = details

    def wanted(self) -> int:
        table = self.operations.findChild(QTableView)
        row = table.verticalHeader().defaultSectionSize() if table is not None else 30
        return self.operations.minimumSizeHint().height() + (OPERATION_ROWS - 3) * row

    def rebalance(self) -> None:
        self.refit()
        sizes = self.splitter.sizes()
        if len(sizes) != 3:
            return
        need = self.wanted() - sizes[1]
        if need > 0 and sizes[2] > 0:
            give = min(need, sizes[2])
            sizes[1] += give
            sizes[2] -= give
        if 0 < sizes[2] < DETAILS_MIN:
            sizes[1] += sizes[2]
            sizes[2] = 0
        spare = sizes[1] - self.wanted()
        if 0 < sizes[2] < self.details_height and spare > 0:
            # Squeezed (a banner took the height): the details take back what the operations
            # do not need, so their timeline and result show more than a sliver.
            grow = min(spare, self.details_height - sizes[2], max(0, (sizes[1] - sizes[2]) // 2))
            sizes[1] -= grow
            sizes[2] += grow
        elif sizes[2] == 0 and not self.hidden_by_person and spare >= DETAILS_MIN:
            # Room again: the details come back, as high as they were if there is room for it
            # (the operations stay the larger pane).
            sizes[2] = min(spare, self.details_height, sizes[1] // 2)
            sizes[1] -= sizes[2]
        if sizes != self.splitter.sizes():
            self.splitter.setSizes(sizes)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.splitter and event.type() == QEvent.Type.Resize:
            self._timer.start()
        return False
