"""Awaitable dialogs: show a dialog and await its outcome without a nested event loop.

A nested ``exec()`` inside the qasync loop would re-enter the asyncio loop; instead the
dialog's ``finished`` signal resolves a future and the dialog is opened non-blocking.
"""

from __future__ import annotations

import asyncio
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QMessageBox, QWidget


async def run_dialog(dialog: QDialog, *, modal: bool = True) -> int:
    """Open ``dialog`` (window-modal unless ``modal`` is false) and await its result code."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def finished(code: int) -> None:
        if not future.done():
            future.set_result(code)

    dialog.finished.connect(finished)
    if modal:
        dialog.open()
    else:
        dialog.show()
    try:
        return await future
    finally:
        dialog.finished.disconnect(finished)


def plain_question(name: str, icon: QMessageBox.Icon, title: str, text: str,
                   buttons: QMessageBox.StandardButton, default: QMessageBox.StandardButton,
                   parent: QWidget | None) -> QMessageBox:
    """A question whose text is plain text (what a server or a view wrote never formats it),
    with ``default`` the button Enter presses; named ``name`` for tests and tools."""
    box = QMessageBox(icon, title, text, buttons, parent)
    box.setTextFormat(Qt.TextFormat.PlainText)
    box.setDefaultButton(default)
    box.setObjectName(name)
    return box


class TaskDialog(QDialog):
    """A dialog whose reads run as tasks it owns (:meth:`spawn`): closing it cancels those
    still running, so none touches its widgets after they are gone."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def done(self, result: int) -> None:
        for task in list(self._tasks):
            task.cancel()
        super().done(result)
