"""The strip above the tables for conditions a person must know about: the keyring, servers
that are offline or need sign-in, an action that failed.

Conditions clear themselves when they end. Dismiss takes an error report away, and hides
the servers' conditions until their words change (a server that goes offline anew, or
another one, shows again); a keyring that takes no secrets stays in view.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QStyle, QWidget

from hostapp.ui.result_view import plain_label

#: What Dismiss hides (see the module doc).
DISMISSABLE = frozenset({"error", "servers"})


class Banner(QFrame):
    """A strip above the tables for conditions a person must know about (keyring, offline servers)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setBackgroundRole(self.palette().ColorRole.ToolTipBase)
        self.setForegroundRole(self.palette().ColorRole.ToolTipText)
        self.setAccessibleName("Warnings")
        self._messages: dict[str, str] = {}
        icon = QLabel()
        icon.setPixmap(self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning).pixmap(20, 20))
        self.label = plain_label("")
        self.label.setForegroundRole(self.palette().ColorRole.ToolTipText)
        # Conditions (keyring, servers) clear themselves; an error report is dismissed by the person.
        self.dismiss_button = QPushButton("Dismiss")
        self.dismiss_button.setAccessibleName("Dismiss the warnings")
        self.dismiss_button.clicked.connect(self.dismiss)
        self.dismiss_button.hide()
        # One action a condition may offer (Start agent), shown while that condition is.
        self.action_button = QPushButton()
        self.action_button.hide()
        self.action_button.clicked.connect(self._act)
        self._action: tuple[str, Callable[[], None]] | None = None
        # Conditions the person dismissed, hidden while their words stay the same.
        self._dismissed: dict[str, str] = {}
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.label, 1)
        lay.addWidget(self.action_button, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def offer(self, key: str, text: str, act: Callable[[], None]) -> None:
        """A button beside the condition ``key`` while it is shown (``act`` on a click)."""
        self._action = (key, act)
        self.action_button.setText(text)
        self.action_button.setAccessibleName(text)
        self._show_action()

    def _act(self) -> None:
        if self._action is not None:
            self._action[1]()

    def _show_action(self) -> None:
        self.action_button.setVisible(self._action is not None and self._action[0] in self._messages)

    def set_message(self, key: str, message: str | None) -> None:
        if message:
            self._messages[key] = message
        else:
            self._messages.pop(key, None)
        if self._dismissed.get(key) != message:
            self._dismissed.pop(key, None)  # changed: shown again
        shown = {k: m for k, m in self._messages.items() if self._dismissed.get(k) != m}
        self.label.setText("\n".join(shown.values()))
        self.dismiss_button.setVisible(bool(DISMISSABLE & set(shown)))
        self.setVisible(bool(shown))
        if self._action is not None and self._action[0] == key and not message:
            self._action = None
        self._show_action()

    def message(self, key: str) -> str | None:
        return self._messages.get(key)

    def dismiss(self) -> None:
        """The error report goes; the servers' conditions hide until they change."""
        self._messages.pop("error", None)
        for key in DISMISSABLE & set(self._messages):
            self._dismissed[key] = self._messages[key]
        self.set_message("error", None)


