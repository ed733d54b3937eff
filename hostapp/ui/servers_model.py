"""The servers table: each configured server and the state of its connection."""

from __future__ import annotations

import time
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtWidgets import QApplication, QStyle

from hostapp.engine import api
from hostapp.engine.api import ServerView
from hostapp.ui.flat_table_model import FlatTableModel
from hostapp.ui.result_view import plain_tooltip

#: The role that carries the whole :class:`ServerView` of a row.
ServerRole = Qt.ItemDataRole.UserRole + 1

NAME, TRANSPORT, STATUS, PROTOCOL, TOOLS, TARGET = range(6)
HEADERS = ("Name", "Transport", "Status", "Protocol", "Tools", "Command or URL")

TRANSPORT_TEXT = {"stdio": "stdio", "http": "HTTP"}


class ServerTableModel(FlatTableModel):
    """One row per configured server, in the order they were first seen.

    ``reconnecting in N s`` counts down on a one-second timer from the delay the engine
    reported, so the engine need not tell the window every second.
    """

    headers = HEADERS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._servers: list[ServerView] = []
        self._seen_at: dict[str, float] = {}  # when each view arrived (for the countdown)
        self._countdown = QTimer(self)
        self._countdown.setInterval(1000)
        self._countdown.timeout.connect(self._refresh_countdowns)

    def set_servers(self, servers: list[ServerView]) -> None:
        self.beginResetModel()
        self._servers = list(servers)
        now = time.monotonic()
        self._seen_at = {s.name: now for s in servers}
        self.endResetModel()
        self._update_countdown()

    def update_server(self, server: ServerView) -> None:
        self._seen_at[server.name] = time.monotonic()
        row = self.row_of(server.name)
        if row is None:
            row = len(self._servers)
            self.beginInsertRows(QModelIndex(), row, row)
            self._servers.append(server)
            self.endInsertRows()
        else:
            self._servers[row] = server
            self.emit_row_changed(row)
        self._update_countdown()

    def remove_server(self, name: str) -> None:
        row = self.row_of(name)
        if row is not None:
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._servers[row]
            self.endRemoveRows()
            self._seen_at.pop(name, None)
        self._update_countdown()

    def row_of(self, name: str) -> int | None:
        for i, s in enumerate(self._servers):
            if s.name == name:
                return i
        return None

    def server(self, row: int) -> ServerView | None:
        return self._servers[row] if 0 <= row < len(self._servers) else None

    def servers(self) -> list[ServerView]:
        return list(self._servers)

    def status_text(self, server: ServerView) -> str:
        if server.state == api.ServerState.RECONNECTING and server.retry_in is not None:
            left = server.retry_in - (time.monotonic() - self._seen_at.get(server.name, time.monotonic()))
            return f"reconnecting in {max(0, round(left))} s"
        labels: dict[str, str] = {
            api.ServerState.CONNECTING: "connecting",
            api.ServerState.CONNECTED: "connected",
            api.ServerState.RECONNECTING: "reconnecting",
            api.ServerState.OFFLINE: "offline",
            api.ServerState.NEEDS_SIGN_IN: "needs sign-in",
            api.ServerState.DISABLED: "disabled",
        }
        return labels.get(server.state, server.state)

    def _update_countdown(self) -> None:
        waiting = any(s.state == api.ServerState.RECONNECTING for s in self._servers)
        if waiting and not self._countdown.isActive():
            self._countdown.start()
        elif not waiting:
            self._countdown.stop()

    def _refresh_countdowns(self) -> None:
        for row, s in enumerate(self._servers):
            if s.state == api.ServerState.RECONNECTING:
                self.dataChanged.emit(self.index(row, STATUS), self.index(row, STATUS))

    # -- the table ------------------------------------------------------------------------

    def row_count(self) -> int:
        return len(self._servers)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        server = self.server(index.row())
        if server is None:
            return None
        col = index.column()
        if role == ServerRole:
            return server
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(server, col)
        if role == Qt.ItemDataRole.ToolTipRole and col == STATUS and server.error:
            return plain_tooltip(server.error)
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return self.accessible_text(col, self._display(server, col))
        if role == Qt.ItemDataRole.DecorationRole and col == STATUS:
            style = QApplication.style()
            pixmaps: dict[str, QStyle.StandardPixmap] = {
                api.ServerState.CONNECTED: QStyle.StandardPixmap.SP_DialogApplyButton,
                api.ServerState.OFFLINE: QStyle.StandardPixmap.SP_MessageBoxCritical,
                api.ServerState.NEEDS_SIGN_IN: QStyle.StandardPixmap.SP_MessageBoxWarning,
                api.ServerState.RECONNECTING: QStyle.StandardPixmap.SP_BrowserReload,
                api.ServerState.CONNECTING: QStyle.StandardPixmap.SP_BrowserReload,
            }
            pixmap = pixmaps.get(server.state)
            return style.standardIcon(pixmap) if pixmap is not None and style is not None else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == TOOLS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _display(self, server: ServerView, col: int) -> str:
        if col == NAME:
            return server.name
        if col == TRANSPORT:
            return TRANSPORT_TEXT.get(server.transport, server.transport)
        if col == STATUS:
            return self.status_text(server)
        if col == PROTOCOL:
            # "MCP 2026-07-28": a bare version reads as a date.
            return f"MCP {server.protocol_version}" if server.protocol_version else "—"
        if col == TOOLS:
            return "—" if server.tools_count is None else str(server.tools_count)
        if col == TARGET:
            return server.target
        return ""
