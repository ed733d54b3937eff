"""Light or dark, as the system says; forced only when asked.

Qt follows the desktop's colour scheme by itself where the platform reports one. Where
it cannot (a bare X11 session, the offscreen platform that renders the documentation
screenshots) ``HOSTAPP_COLOR_SCHEME=dark|light`` chooses, and the Fusion style with a
palette built here draws it. Widgets never hard-code colours: they take palette roles.
"""

from __future__ import annotations

import os

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

#: Environment variable that forces a colour scheme ("dark" or "light").
SCHEME_ENV = "HOSTAPP_COLOR_SCHEME"


def dark_palette() -> QPalette:
    p = QPalette()
    window, base, alt, text = QColor(0x2b, 0x2d, 0x30), QColor(0x1e, 0x1f, 0x22), QColor(0x26, 0x28, 0x2b), \
        QColor(0xe6, 0xe6, 0xe6)
    disabled = QColor(0x80, 0x80, 0x80)
    roles = {
        QPalette.ColorRole.Window: window, QPalette.ColorRole.WindowText: text,
        QPalette.ColorRole.Base: base, QPalette.ColorRole.AlternateBase: alt,
        QPalette.ColorRole.ToolTipBase: QColor(0x4a, 0x3f, 0x1f), QPalette.ColorRole.ToolTipText: text,
        QPalette.ColorRole.PlaceholderText: disabled, QPalette.ColorRole.Text: text,
        QPalette.ColorRole.Button: QColor(0x35, 0x37, 0x3b), QPalette.ColorRole.ButtonText: text,
        QPalette.ColorRole.BrightText: QColor(0xff, 0x6b, 0x6b), QPalette.ColorRole.Highlight: QColor(0x3d, 0x7e, 0xd6),
        QPalette.ColorRole.HighlightedText: QColor(0xff, 0xff, 0xff), QPalette.ColorRole.Link: QColor(0x6c, 0xb2, 0xff),
        QPalette.ColorRole.Light: QColor(0x45, 0x47, 0x4b), QPalette.ColorRole.Midlight: QColor(0x3a, 0x3c, 0x40),
        QPalette.ColorRole.Mid: QColor(0x24, 0x25, 0x28), QPalette.ColorRole.Dark: QColor(0x18, 0x19, 0x1b),
        QPalette.ColorRole.Shadow: QColor(0x0c, 0x0c, 0x0c),
    }
    for role, color in roles.items():
        p.setColor(role, color)
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, disabled)
    return p


def light_palette() -> QPalette:
    p = QApplication.style().standardPalette()
    # The warning banner uses ToolTipBase: a soft yellow reads as "attention" in light mode.
    p.setColor(QPalette.ColorRole.ToolTipBase, QColor(0xff, 0xf4, 0xc8))
    p.setColor(QPalette.ColorRole.ToolTipText, QColor(0x20, 0x20, 0x20))
    return p


def apply_color_scheme(app: QApplication, scheme: str | None = None) -> str:
    """Apply ``scheme`` (or ``$HOSTAPP_COLOR_SCHEME``); returns what is in effect ("system" if nothing forced)."""
    scheme = (scheme or os.environ.get(SCHEME_ENV) or "").strip().lower()
    if scheme not in ("dark", "light"):
        return "system"
    app.setStyle("Fusion")
    app.styleHints().setColorScheme(Qt.ColorScheme.Dark if scheme == "dark" else Qt.ColorScheme.Light)
    app.setPalette(dark_palette() if scheme == "dark" else light_palette())
    return scheme
