"""The servers table: each configured server and the state of its connection."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer
from PySide6.QtWidgets import QApplication, QStyle

from hostapp.engine import api
from hostapp.engine.api import ServerView
from hostapp.protocol.eras import STATELESS_VERSION
from hostapp.ui.flat_table_model import FlatTableModel
from hostapp.ui.result_view import plain_tooltip

#: The role that carries the whole :class:`ServerView` of a row.
ServerRole = Qt.ItemDataRole.UserRole + 1

NAME, TRANSPORT, STATUS, PROTOCOL, TOOLS, TARGET, PROBLEM = range(7)
HEADERS = ("Name", "Transport", "Status", "MCP revision", "Tools", "Command or URL", "Problem")

TRANSPORT_TEXT = {"stdio": "stdio", "http": "HTTP"}


#: What the MCP revision column means, for its tooltip.
PROTOCOL_TIP = ("The revision of the MCP specification this connection speaks; revisions are named by "
                "the date they were released. From 2026-07-28 MCP is stateless (each request stands alone); "
                "earlier revisions begin with a handshake that opens a session.")


def protocol_text(version: str | None) -> str:
    """The revision a connection speaks, and what kind it is: a bare "2026-07-28" reads as a date."""
    if not version:
        return "—"
    return f"{version} · {'stateless' if version == STATELESS_VERSION else 'with handshake'}"


class ServerTableModel(FlatTableModel):
    """One row per configured server, in the order they were first seen.

    ``reconnecting in N s`` counts down on a one-second timer to the time the engine
    planned its next attempt for, so the engine need not tell the window every second.
    A server that answered requests nobody sent has a warning marker on its name, and the
    Problem column says so with the last connection error.
    """

    headers = HEADERS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._servers: list[ServerView] = []
        self._seen_at: dict[str, float] = {}  # when each view arrived (for the countdown)
        self._countdown = QTimer(self)
        self._countdown.setInterval(1000)
        self._countdown.timeout.connect(self._refresh_countdowns)
        #: Why no agent holds the connections now (it stopped, or is starting again), or
        #: None: the rows' last states are then the agent's last word, not the truth.
        self._agent_away: str | None = None
        #: While every server is read again: the changes told meanwhile, in order, each with
        #: when it came (see :meth:`reading`); None when no read is under way.
        self._told_while_read: list[tuple[str, Any, float]] | None = None
        self._reads = 0  # reads under way

    def set_agent_away(self, why: str | None) -> None:
        """No agent holds the connections (``why``, a few words: "agent stopped"), or one
        does again (None). Meanwhile every row says so instead of its last state."""
        if why == self._agent_away:
            return
        self._agent_away = why
        self.emit_all_changed()
        self._update_countdown()

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """While every server is read again, for :meth:`set_servers` to show the answer: the
        changes told meanwhile are kept and told again over that answer. A change the agent
        told after it answered is handed on by its client while the answer still waits for
        the reader's next turn (one loop turn, or many under load): the answer alone would
        put the server back to what it was ("connecting" for good, after a new agent
        connected it). Telling again those that came before the answer is harmless: each
        server's changes come in order, its last is its latest state."""
        self._reads += 1
        if self._told_while_read is None:
            self._told_while_read = []
        try:
            yield
        finally:
            self._reads -= 1
            if not self._reads:
                self._told_while_read = None

    def set_servers(self, servers: list[ServerView]) -> None:
        self.beginResetModel()
        self._agent_away = None  # read from an agent: the truth again
        self._servers = list(servers)
        now = time.monotonic()
        self._seen_at = {s.name: now for s in servers}
        self.endResetModel()
        # Everything told since the first read under way began (for two at once, the
        # older answer must not undo what the newer showed), told again over the answer.
        for kind, value, at in self._told_while_read or ():
            if kind == "changed":
                self._show(value, at)
            else:
                self._drop(value)
        self._update_countdown()

    def update_server(self, server: ServerView) -> None:
        now = time.monotonic()
        if self._told_while_read is not None:
            self._told_while_read.append(("changed", server, now))
        self._show(server, now)
        self._update_countdown()

    def remove_server(self, name: str) -> None:
        if self._told_while_read is not None:
            self._told_while_read.append(("removed", name, time.monotonic()))
        self._drop(name)
        self._update_countdown()

    def _show(self, server: ServerView, seen_at: float) -> None:
        """Its row shows ``server`` (a new row if it had none); its countdown runs from ``seen_at``."""
        self._seen_at[server.name] = seen_at
        row = self.row_of(server.name)
        if row is None:
            row = len(self._servers)
            self.beginInsertRows(QModelIndex(), row, row)
            self._servers.append(server)
            self.endInsertRows()
        else:
            self._servers[row] = server
            self.emit_row_changed(row)

    def _drop(self, name: str) -> None:
        row = self.row_of(name)
        if row is not None:
            self.beginRemoveRows(QModelIndex(), row, row)
            del self._servers[row]
            self.endRemoveRows()
            self._seen_at.pop(name, None)

    def row_of(self, name: str) -> int | None:
        for i, s in enumerate(self._servers):
            if s.name == name:
                return i
        return None

    def server(self, row: int) -> ServerView | None:
        return self._servers[row] if 0 <= row < len(self._servers) else None

    def servers(self) -> list[ServerView]:
        return list(self._servers)

    def seconds_to_retry(self, server: ServerView) -> float | None:
        """Seconds until the server's next connection attempt, or None when none is planned."""
        if self._agent_away is not None or server.state not in (api.ServerState.RECONNECTING, api.ServerState.OFFLINE):
            return None
        if server.retry_at is not None:
            return max(0.0, server.retry_at - time.time())
        if server.retry_in is not None:
            return max(0.0, server.retry_in - (time.monotonic() - self._seen_at.get(server.name, time.monotonic())))
        return None

    def status_text(self, server: ServerView) -> str:
        if self._agent_away is not None:
            return f"not connected ({self._agent_away})"
        left = self.seconds_to_retry(server)
        if left is not None:
            return f"reconnecting in {round(left)} s"
        labels: dict[str, str] = {
            api.ServerState.CONNECTING: "connecting",
            api.ServerState.CONNECTED: "connected",
            api.ServerState.RECONNECTING: "reconnecting",
            api.ServerState.OFFLINE: "offline",
            api.ServerState.NEEDS_SIGN_IN: "needs sign-in",
            api.ServerState.DISABLED: "retries stopped",
        }
        return labels.get(server.state, server.state)

    @staticmethod
    def problem_text(server: ServerView) -> str:
        """The last error while the server is not connected, in plain words; while it is,
        what happened to the connection that the person should know (a new session
        because the server forgot the old one); "" when none."""
        if server.state == api.ServerState.CONNECTED:
            return server.note or ""
        return f"last error: {server.error}" if server.error else ""

    @staticmethod
    def stray_text(server: ServerView) -> str:
        """What the server's stray replies mean, for its row's tooltip ("" when none)."""
        n = server.stray_answers
        if not n:
            return ""
        text = (f"{n} repl{'y' if n == 1 else 'ies'} to requests hostapp never sent: the server may be "
                "confused; calls may hang")
        return text + (f"\nThe latest: {server.last_stray}" if server.last_stray else "")

    def _update_countdown(self) -> None:
        waiting = any(self.seconds_to_retry(s) is not None for s in self._servers)
        if waiting and not self._countdown.isActive():
            self._countdown.start()
        elif not waiting:
            self._countdown.stop()

    def _refresh_countdowns(self) -> None:
        for row, s in enumerate(self._servers):
            if self.seconds_to_retry(s) is not None:
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
        if role == Qt.ItemDataRole.ToolTipRole:
            return self._tooltip(server, col)
        if role == Qt.ItemDataRole.AccessibleTextRole:
            text = self._display(server, col)
            if col == NAME and server.stray_answers:
                text += f", {self.stray_text(server).splitlines()[0]}"
            return self.accessible_text(col, text)
        if role == Qt.ItemDataRole.DecorationRole and col == NAME and server.stray_answers:
            style = QApplication.style()
            return style.standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning) if style is not None else None
        if role == Qt.ItemDataRole.DecorationRole and col == STATUS:
            style = QApplication.style()
            pixmaps: dict[str, QStyle.StandardPixmap] = {
                api.ServerState.CONNECTED: QStyle.StandardPixmap.SP_DialogApplyButton,
                api.ServerState.OFFLINE: QStyle.StandardPixmap.SP_MessageBoxCritical,
                api.ServerState.NEEDS_SIGN_IN: QStyle.StandardPixmap.SP_MessageBoxWarning,
                api.ServerState.RECONNECTING: QStyle.StandardPixmap.SP_BrowserReload,
                api.ServerState.CONNECTING: QStyle.StandardPixmap.SP_BrowserReload,
            }
            pixmap = None if self._agent_away is not None else pixmaps.get(server.state)
            return style.standardIcon(pixmap) if pixmap is not None and style is not None else None
        if role == Qt.ItemDataRole.TextAlignmentRole and col == TOOLS:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def _tooltip(self, server: ServerView, col: int) -> str | None:
        if col == PROTOCOL and server.protocol_version:
            return plain_tooltip(PROTOCOL_TIP)
        lines = []
        if col in (NAME, STATUS, PROBLEM) and server.stray_answers:
            lines.append(self.stray_text(server))
        if col in (STATUS, PROBLEM) and server.error:
            lines.insert(0, f"Last error: {server.error}")
        if col in (STATUS, PROBLEM) and server.note:
            lines.insert(0, server.note[:1].upper() + server.note[1:])
        return plain_tooltip("\n".join(lines)) if lines else None

    def _display(self, server: ServerView, col: int) -> str:
        if col == NAME:
            return server.name
        if col == TRANSPORT:
            return TRANSPORT_TEXT.get(server.transport, server.transport)
        if col == STATUS:
            return self.status_text(server)
        if col == PROTOCOL:
            return protocol_text(server.protocol_version)
        if col == TOOLS:
            return "—" if server.tools_count is None else str(server.tools_count)
        if col == TARGET:
            return server.target
        if col == PROBLEM:
            stray = server.stray_answers
            parts = [self.problem_text(server),
                     f"⚠ {stray} stray repl{'y' if stray == 1 else 'ies'}" if stray else ""]
            return "; ".join(p for p in parts if p)
        return ""
