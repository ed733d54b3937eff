"""The question Quit asks while operations are running: keep them going, or stop everything.

The background agent carries the work, so quitting the window alone loses nothing: that is
the default. Stopping everything stops the agent too; the dialog says beforehand which of
the running operations survive that (their mechanism can resume them when the agent
starts again) and which do not, each with why (the engine decides: the view's
``lost_at_stop``).
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import OperationView
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.result_view import plain_label

KEEP, STOP = "keep", "stop"


def describe(op: OperationView) -> str:
    what = f"{op.tool or op.method} on {op.server}"
    if op.lost_at_stop is not None:
        return f"{what} — {op.lost_at_stop}"
    return f"{what} — {op.message}" if op.message else what


class QuitDialog(QDialog):
    """Lists the running operations by whether they survive the agent's stop (each view says).

    ``choice`` is :data:`KEEP`, :data:`STOP`, or None (cancelled).
    """

    def __init__(self, running: list[OperationView], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("quitDialog")
        self.setWindowTitle("Quit hostapp")
        self.setMinimumWidth(self.fontMetrics().averageCharWidth() * 80)
        self.choice: str | None = None
        self.survivors = [op for op in running if op.survives_stop]
        self.lost = [op for op in running if not op.survives_stop]
        n = len(running)
        lay = QVBoxLayout(self)
        lay.addWidget(plain_label(
            f"{n} operation{'s are' if n != 1 else ' is'} still running. {'They' if n != 1 else 'It'} can keep "
            "running in the background after the window closes (the hostapp agent carries "
            f"{'them' if n != 1 else 'it'}; reopen the window to see {'them' if n != 1 else 'it'})."))
        self.survivor_list = self._section(
            lay, "If you stop everything, these will resume when hostapp starts again:", self.survivors,
            "survivors")
        self.lost_list = self._section(
            lay, "If you stop everything, these cannot resume, and end (each says why):",
            self.lost, "lost")
        buttons = QDialogButtonBox()
        self.keep_button = QPushButton("&Keep running in the background")
        self.stop_button = QPushButton("&Stop everything")
        name_as_shown(self.keep_button, "Quit the window, keep the operations running in the background")
        name_as_shown(self.stop_button, "Quit and stop every operation and the background agent")
        buttons.addButton(self.keep_button, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.stop_button, QDialogButtonBox.ButtonRole.DestructiveRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.keep_button.setDefault(True)
        self.keep_button.setAutoDefault(True)
        self.stop_button.setAutoDefault(False)
        self.keep_button.clicked.connect(lambda: self._choose(KEEP))
        self.stop_button.clicked.connect(lambda: self._choose(STOP))
        buttons.rejected.connect(self.reject)
        lay.addWidget(buttons)
        self.keep_button.setFocus()

    def _section(self, lay: QVBoxLayout, title: str, ops: list[OperationView], name: str) -> QListWidget:
        label = QLabel(title)
        label.setWordWrap(True)
        items = QListWidget()
        items.setObjectName(name)
        items.setAccessibleName(title)
        items.addItems([describe(op) for op in ops])
        items.setMaximumHeight(max(1, min(len(ops), 6)) * (items.fontMetrics().height() + 6) + 6)
        label.setBuddy(items)
        lay.addWidget(label)
        lay.addWidget(items)
        label.setVisible(bool(ops))
        items.setVisible(bool(ops))
        return items

    def _choose(self, choice: str) -> None:
        self.choice = choice
        self.accept()
