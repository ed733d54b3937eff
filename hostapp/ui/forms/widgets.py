"""The pieces both kinds of form are made of: plain-text labels, hints, error lines.

Every text that comes from a server (titles, descriptions, option labels, messages) is
shown as plain text: a server must not be able to style, link or hide parts of a prompt
with markup.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (
    QLabel,
    QListWidget,
    QSizePolicy,
    QWidget,
)

NOT_SET = object()

INT_LIMIT = 2**31 - 1  # QSpinBox holds a C int
ERROR_COLOUR = QColor("#b3261e")


def plain_label(text: str, *, wrap: bool = True, parent: QWidget | None = None) -> QLabel:
    """A label that shows ``text`` literally, never as rich text, and can be selected."""
    label = QLabel(parent)
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    label.setWordWrap(wrap)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


def hint_label(text: str) -> QLabel:
    label = plain_label(text)
    font = label.font()
    font.setPointSizeF(max(font.pointSizeF() * 0.9, 7.0))
    label.setFont(font)
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, palette.color(QPalette.ColorRole.PlaceholderText))
    label.setPalette(palette)
    return label


def error_label() -> QLabel:
    label = plain_label("")
    label.setObjectName("fieldError")
    palette = label.palette()
    palette.setColor(QPalette.ColorRole.WindowText, ERROR_COLOUR)
    label.setPalette(palette)
    label.hide()
    return label


def show_error(label: QLabel, message: str | None) -> None:
    """Show ``message`` under a field, or take it away. A message taken away leaves its
    room (and its text, unseen, to keep the room's size) until another takes its place:
    the fields below do not jump up under the pointer the moment the person corrects one."""
    if message:
        label.setText(message)
        label.setVisible(True)
        return
    if not label.isHidden():
        policy = label.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        label.setSizePolicy(policy)
    label.setVisible(False)


def caption(title: str, required: bool) -> str:
    return f"{title} *" if required else title


def list_height(widget: QListWidget, rows: int) -> None:
    """Size a list to show its rows (up to six) without a scroll bar for short lists."""
    row = widget.sizeHintForRow(0) if widget.count() else widget.fontMetrics().height() + 4
    widget.setFixedHeight(row * max(1, min(rows, 6)) + 2 * widget.frameWidth() + 8)
    widget.setSpacing(1)
    widget.setMinimumWidth(120)  # its default size hint is wide enough to push the label aside
    widget.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
