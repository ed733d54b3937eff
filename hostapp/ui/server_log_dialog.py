"""A server's log: what it logged to the host (``notifications/message``), a table of
time, level, logger and data, each cell plain text (data on one line, whole in its
tooltip), new messages added as they come, and the level it is asked to send.

The messages are those the agent kept (:mod:`hostapp.engine.server_logs`); the window
adds each ``log`` event of the server after them. Changing the level saves it in the
server's configuration: the live connection tells the server (``logging/setLevel``) and
stays up.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialogButtonBox,
    QFormLayout,
    QHeaderView,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import LOG_LEVELS, EngineApi, EngineError
from hostapp.protocol.server_log import data_text, one_line
from hostapp.ui.async_dialog import TaskDialog
from hostapp.ui.result_view import plain_label, plain_tooltip

#: Messages the view holds at most (the oldest go first), as the agent keeps per server.
MAX_LINES = 1000

#: The parent of every row (a table has no other).
TOP_LEVEL = QModelIndex()

#: The columns, left to right.
COLUMNS = ("Time", "Level", "Logger", "Data")

#: Characters of the data shown in its cell (the tooltip has it whole).
DATA_CELL_CHARS = 500


def shown_time(entry: dict[str, Any]) -> str:
    at = entry.get("at")
    return time.strftime("%H:%M:%S", time.localtime(at)) if isinstance(at, (int, float)) else "--:--:--"


def shown_cells(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    """A message's cells, each plain text on one line."""
    return (shown_time(entry), one_line(str(entry.get("level") or "info")), one_line(str(entry.get("logger") or "")),
            one_line(data_text(entry))[:DATA_CELL_CHARS])


class ServerLogModel(QAbstractTableModel):
    """The messages shown, oldest first, at most :data:`MAX_LINES` of them."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._rows: deque[tuple[tuple[str, str, str, str], str]] = deque()

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        cells, whole = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return cells[index.column()]
        if role == Qt.ItemDataRole.ToolTipRole:
            return plain_tooltip(whole if index.column() == 3 else cells[index.column()])
        return None

    def append(self, entry: dict[str, Any]) -> None:
        if len(self._rows) >= MAX_LINES:
            self.beginRemoveRows(QModelIndex(), 0, 0)
            self._rows.popleft()
            self.endRemoveRows()
        row = len(self._rows)
        self.beginInsertRows(QModelIndex(), row, row)
        self._rows.append((shown_cells(entry), data_text(entry, indent=2)))
        self.endInsertRows()

    def row_cells(self, row: int) -> tuple[str, str, str, str]:
        return self._rows[row][0]


class ServerLogDialog(TaskDialog):
    """The log of one server, and its level."""

    def __init__(self, server: str, engine: EngineApi, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Log of {server}")
        self.server = server
        self.engine = engine
        self._last_at = float("-inf")
        self._filling = True
        self._early: list[dict[str, Any]] = []  # events that came while the kept ones were read

        self.level = QComboBox()
        self.level.setAccessibleName("Log level asked of the server")
        self.level.addItem("The server's default", None)
        for level in LOG_LEVELS:
            self.level.addItem(f"{level} and above", level)
        self.level.setEnabled(False)
        self.model = ServerLogModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setAccessibleName("Server log")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 6)
        header = self.table.horizontalHeader()
        metrics = self.table.fontMetrics()
        # Fixed widths the person may drag (fitting the contents would measure every row at each message).
        for column, sample in enumerate(("00:00:00", "emergency", "a logger's name")):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, metrics.horizontalAdvance(sample) + 24)
        header.setStretchLastSection(True)
        self.status = plain_label("")
        self.status.setAccessibleName("Log status")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)

        form = QFormLayout()
        form.addRow("&Level:", self.level)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self.resize(860, 480)
        self.level.currentIndexChanged.connect(self._level_chosen)
        self.status.setText(f"Reading what {server} logged…")
        self.spawn(self._fill())

    async def _fill(self) -> None:
        try:
            cfg = await self.engine.server_config(self.server)
            entries = await self.engine.server_log(self.server, MAX_LINES)
        except EngineError as exc:
            self.status.setText(f"Cannot read the log of {self.server}: {exc}")
            return
        if cfg is not None:
            self.level.setCurrentIndex(max(0, self.level.findData(cfg.log_level)))
            self.level.setEnabled(True)
        self._filling = False
        for entry in [*entries, *self._early]:
            self.add_entry(entry)
        self._early = []
        self.status.setText(self._summary())

    def _summary(self) -> str:
        count = self.model.rowCount()
        return (f"{count} message{'s' if count != 1 else ''} since the agent started (the last {MAX_LINES} at "
                "most); new ones are added "
                "as they come." if count else f"{self.server} has logged nothing since the agent started.")

    def add_entry(self, entry: dict[str, Any]) -> None:
        """A message of this server (kept, or a ``log`` event): added once, in order."""
        at = entry.get("at")
        if isinstance(at, (int, float)):
            if at <= self._last_at:
                return  # already shown (read with the kept ones)
            self._last_at = at
        scroll = self.table.verticalScrollBar()
        at_end = scroll.value() >= scroll.maximum()
        self.model.append(entry)
        if at_end:
            self.table.scrollToBottom()  # following the newest, unless the person scrolled up
        if not self._filling:
            self.status.setText(self._summary())

    def log_event(self, data: dict[str, Any]) -> None:
        """A ``log`` event from the engine (any server's)."""
        if data.get("server") != self.server:
            return
        if self._filling:
            self._early.append(data)
        else:
            self.add_entry(data)

    def _level_chosen(self, _index: int) -> None:
        if self.level.isEnabled():
            self.spawn(self._save_level(self.level.currentData()))

    async def _save_level(self, level: str | None) -> None:
        try:
            cfg = await self.engine.server_config(self.server)
            if cfg is None or cfg.log_level == level:
                return
            await self.engine.update_server(dataclasses.replace(cfg, log_level=level))
        except EngineError as exc:
            self.status.setText(f"The level could not be changed: {exc}")
            return
        self.status.setText(f"{self.server} is asked for {level} and above." if level else
                            f"{self.server} sends what it sends by default (from its next connection).")
