"""What a screen reader (and voice control) calls a control: the words the control shows.

A control's accessible name is the text a person sees on it, so that "Edit server…" is
announced, and can be spoken to voice control, as "Edit server"; what the control does
in more words is its accessible description (and its tooltip). Controls without words of
their own (a line edit's clear button) get a name that says what they do.
"""

from __future__ import annotations

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QAbstractButton, QLineEdit, QToolButton


def shown_words(text: str) -> str:
    """A control's text as a person reads it: no mnemonic marker, no trailing ellipsis."""
    words = text.replace("&&", "\0").replace("&", "").replace("\0", "&").strip()
    for tail in ("…", "..."):
        if words.endswith(tail):
            words = words[: -len(tail)].rstrip()
    return words


def name_as_shown(button: QAbstractButton, description: str = "") -> None:
    """Name ``button`` by its text; ``description`` says more."""
    button.setAccessibleName(shown_words(button.text()))
    if description:
        button.setAccessibleDescription(description)


def name_clear_button(line: QLineEdit, name: str) -> None:
    """Name the clear button ``setClearButtonEnabled`` adds to ``line`` (it has no text)."""
    for action in line.findChildren(QAction):
        if action.objectName() == "_q_qlineeditclearaction":
            action.setText(name)
            action.setToolTip(name)
    for button in line.findChildren(QToolButton):
        button.setAccessibleName(name)
        button.setToolTip(name)
