"""The strip above the tables for conditions a person must know about: the keyring, servers
that are offline or need sign-in, an action that failed.

Conditions clear themselves when they end. Dismiss takes an error report away, and hides
the servers' conditions until their words change; the window words them so that a server
that keeps failing stays hidden until it has connected once (``dismissed`` tells it what
the person dismissed). A keyring that takes no secrets stays in view. A condition may
offer one action beside it (Start agent, Stop retrying), shown while it is.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QStyle, QWidget

from hostapp.ui.result_view import plain_label

#: What Dismiss hides (see the module doc).
DISMISSABLE = frozenset({"error", "servers"})


class Banner(QFrame):
    """A strip above the tables for conditions a person must know about (keyring, offline servers).

    Signals:
        dismissed(list[str]): the keys of the conditions the person just dismissed.
    """

    dismissed = Signal(list)

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
        self.dismiss_button.setAccessibleName("Dismiss")
        self.dismiss_button.setAccessibleDescription("Dismiss the warnings")
        self.dismiss_button.clicked.connect(self.dismiss)
        self.dismiss_button.hide()
        # The action each condition may offer (Start agent, Stop retrying), shown while it is.
        self._actions: dict[str, tuple[QPushButton, Callable[[], None]]] = {}
        self._buttons = QHBoxLayout()
        self._buttons.setContentsMargins(0, 0, 0, 0)
        # Conditions the person dismissed, hidden while their words stay the same.
        self._dismissed: dict[str, str] = {}
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        lay.addWidget(self.label, 1)
        lay.addLayout(self._buttons)
        lay.addWidget(self.dismiss_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def offer(self, key: str, text: str, act: Callable[[], None]) -> None:
        """A button beside the condition ``key`` while it is shown (``act`` on a click)."""
        if key in self._actions:
            button = self._actions[key][0]
        else:
            button = QPushButton()
            button.clicked.connect(lambda: self._act(key))
            self._buttons.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        button.setText(text)
        button.setAccessibleName(text)
        self._actions[key] = (button, act)
        self._show_actions()

    def withdraw_offer(self, key: str) -> None:
        """The condition ``key`` offers no action any more."""
        entry = self._actions.pop(key, None)
        if entry is not None:
            entry[0].hide()
            entry[0].deleteLater()

    def action_button(self, key: str) -> QPushButton | None:
        """The button the condition ``key`` offers, if any."""
        entry = self._actions.get(key)
        return entry[0] if entry is not None else None

    def _act(self, key: str) -> None:
        entry = self._actions.get(key)
        if entry is not None:
            entry[1]()

    def _shown(self) -> dict[str, str]:
        return {k: m for k, m in self._messages.items() if self._dismissed.get(k) != m}

    def _show_actions(self) -> None:
        shown = self._shown()
        for key, (button, _act) in self._actions.items():
            button.setVisible(key in shown)

    def set_message(self, key: str, message: str | None) -> None:
        if message:
            self._messages[key] = message
        else:
            self._messages.pop(key, None)
        if self._dismissed.get(key) != message:
            self._dismissed.pop(key, None)  # changed: shown again
        shown = self._shown()
        self.label.setText("\n".join(shown.values()))
        self.dismiss_button.setVisible(bool(DISMISSABLE & set(shown)))
        self.setVisible(bool(shown))
        if not message:
            self.withdraw_offer(key)
        self._show_actions()

    def message(self, key: str) -> str | None:
        return self._messages.get(key)

    def dismiss(self) -> None:
        """The error report goes; the servers' conditions hide until they change."""
        keys = sorted(DISMISSABLE & set(self._shown()))
        self._messages.pop("error", None)
        for key in DISMISSABLE & set(self._messages):
            self._dismissed[key] = self._messages[key]
        self.set_message("error", None)
        self.dismissed.emit(keys)


