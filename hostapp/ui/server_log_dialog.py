"""A server's log: what it logged to the host (``notifications/message``), as plain text,
new messages added as they come, and the level it is asked to send.

The messages are those the agent kept (:mod:`hostapp.engine.server_logs`); the window
adds each ``log`` event of the server after them. Changing the level saves it in the
server's configuration: the live connection tells the server (``logging/setLevel``) and
stays up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import LOG_LEVELS, EngineApi, EngineError
from hostapp.protocol.server_log import log_line
from hostapp.ui.result_view import plain_label

#: Lines the view holds at most (the oldest go first), as the agent keeps per server.
MAX_LINES = 1000


def shown_line(entry: dict[str, Any]) -> str:
    at = entry.get("at")
    when = time.strftime("%H:%M:%S", time.localtime(at)) if isinstance(at, (int, float)) else "--:--:--"
    return f"{when} {log_line(entry)}"


class ServerLogDialog(QDialog):
    """The log of one server, and its level."""

    def __init__(self, server: str, engine: EngineApi, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Log of {server}")
        self.server = server
        self.engine = engine
        self._tasks: set[asyncio.Task[Any]] = set()
        self._last_at = float("-inf")
        self._filling = True
        self._early: list[dict[str, Any]] = []  # events that came while the kept ones were read

        self.level = QComboBox()
        self.level.setAccessibleName("Log level asked of the server")
        self.level.addItem("The server's default", None)
        for level in LOG_LEVELS:
            self.level.addItem(f"{level} and above", level)
        self.level.setEnabled(False)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Server log")
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.status = plain_label("")
        self.status.setAccessibleName("Log status")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)

        form = QFormLayout()
        form.addRow("&Level:", self.level)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.status)
        layout.addWidget(buttons)
        self.resize(860, 480)
        self.level.currentIndexChanged.connect(self._level_chosen)
        self.status.setText(f"Reading what {server} logged…")
        self._spawn(self._fill())

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def done(self, result: int) -> None:
        for task in list(self._tasks):
            task.cancel()
        super().done(result)

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
        count = self.text.blockCount() if self.text.toPlainText() else 0
        return (f"{count} message{'s' if count != 1 else ''} since the agent started; new ones are added "
                "as they come." if count else f"{self.server} has logged nothing since the agent started.")

    def add_entry(self, entry: dict[str, Any]) -> None:
        """A message of this server (kept, or a ``log`` event): added once, in order."""
        at = entry.get("at")
        if isinstance(at, (int, float)):
            if at <= self._last_at:
                return  # already shown (read with the kept ones)
            self._last_at = at
        self.text.appendPlainText(shown_line(entry))
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
            self._spawn(self._save_level(self.level.currentData()))

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
