"""What every table of the window has in common: flat rows, fixed columns, a header each.

The operations table and the servers table differ in their rows and in what a cell
shows; their shape (no children, one header per column, rows enabled and selectable)
is defined here once.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt

#: The invalid index Qt passes as the parent of a table's rows.
TOP_LEVEL = QModelIndex()
#: Every row's flags (made once: each ``|`` of Qt's flags is a Python enum operation, and
#: a repaint asks for the flags of every cell shown).
ROW_FLAGS = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemNeverHasChildren


class FlatTableModel(QAbstractTableModel):
    """A table model without children whose columns are named by :attr:`headers`.

    A subclass sets :attr:`headers`, says how many rows it has in :meth:`row_count`,
    and answers :meth:`data`.
    """

    #: The column titles, in column order.
    headers: tuple[str, ...] = ()

    def row_count(self) -> int:
        """How many rows the table has now."""
        raise NotImplementedError

    def accessible_text(self, column: int, shown: str) -> str:
        """What a screen reader says for a cell: its column's title, then what it shows."""
        return f"{self.headers[column]}: {shown}"

    def emit_row_changed(self, row: int) -> None:
        """Every cell of ``row`` may show something new."""
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(self.headers) - 1))

    def emit_all_changed(self) -> None:
        """Every cell may show something new (a change that concerns every row)."""
        if self.row_count():
            self.dataChanged.emit(self.index(0, 0), self.index(self.row_count() - 1, len(self.headers) - 1))

    # -- QAbstractTableModel ------------------------------------------------------------

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> int:
        return 0 if parent.isValid() else self.row_count()

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> int:
        return 0 if parent.isValid() else len(self.headers)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole \
                and 0 <= section < len(self.headers):
            return self.headers[section]
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        if not index.isValid():
            return Qt.ItemFlag.NoItemFlags
        return ROW_FLAGS
