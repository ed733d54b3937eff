"""Light or dark, as the system says; forced only when asked.

Qt follows the desktop's colour scheme by itself where the platform reports one. Where
it cannot (a bare X11 session, the offscreen platform that renders the documentation
screenshots) ``HOSTAPP_COLOR_SCHEME=dark|light`` chooses, and the Fusion style with a
palette built here draws it. Widgets never hard-code colours: they take palette roles.

Two things the styles leave weak are drawn here for both schemes (:class:`HostStyle`, a
proxy over whatever style is in use): the keyboard focus (a two-pixel frame in the
highlight colour on the focused control, and on focused lists and tables through
:data:`FOCUS_STYLE_SHEET`), and the frame of an unchecked check box, which Fusion draws
nearly black on a dark window. The toolbar's glyphs (:func:`glyph_icon`) are painted in
the palette's text colour when shown, so they follow a change of scheme.
"""

from __future__ import annotations

import os

from PySide6.QtCore import QPointF, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QIconEngine, QPainter, QPainterPath, QPalette, QPen, QPixmap
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

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


#: Lists, tables and text areas show their keyboard focus as a frame in the highlight colour.
FOCUS_STYLE_SHEET = ("QAbstractItemView:focus, QPlainTextEdit:focus, QTextEdit:focus, QScrollArea:focus "
                     "{ border: 2px solid palette(highlight); }")
#: Where no notification service shows the tray's messages, Qt draws its own balloon on a
#: fixed pale yellow (QBalloonTip); under an application style sheet its labels take the
#: palette's text colour, pale in the dark scheme. Dark text on that yellow in both schemes.
BALLOON_TEXT = "#1a1a1a"
BALLOON_STYLE_SHEET = f"QBalloonTip QLabel {{ color: {BALLOON_TEXT}; background: transparent; }}"


class HostStyle(QProxyStyle):
    """The style in use, with a focus frame one can see and check boxes readable in the dark."""

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption, painter: QPainter,
                      widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        if element == QStyle.PrimitiveElement.PE_IndicatorCheckBox:
            # An outline in the text colour, half strength: visible on light and dark alike.
            color = QColor(option.palette.color(QPalette.ColorRole.Text))
            color.setAlpha(150)
            painter.save()
            painter.setRenderHint(QPainter.RenderHint.Antialiasing)
            painter.setPen(QPen(color, 1))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5), 2, 2)
            painter.restore()
        elif element == QStyle.PrimitiveElement.PE_FrameFocusRect:
            self._focus_frame(painter, option.rect, option.palette)

    def drawControl(self, element: QStyle.ControlElement, option: QStyleOption, painter: QPainter,
                    widget: QWidget | None = None) -> None:
        super().drawControl(element, option, painter, widget)
        if element in (QStyle.ControlElement.CE_PushButton, QStyle.ControlElement.CE_ToolButtonLabel) \
                and option.state & QStyle.StateFlag.State_HasFocus:
            self._focus_frame(painter, option.rect.adjusted(1, 1, -1, -1), option.palette)

    @staticmethod
    def _focus_frame(painter: QPainter, rect: QRect, palette: QPalette) -> None:
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), 2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(rect).adjusted(1, 1, -1, -1), 3, 3)
        painter.restore()


class _GlyphEngine(QIconEngine):
    """Paints one glyph in the application palette's text colour at the time of painting."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def clone(self) -> QIconEngine:
        return _GlyphEngine(self.kind)

    def paint(self, painter: QPainter, rect: QRect, mode: QIcon.Mode, state: QIcon.State) -> None:
        palette = QApplication.palette()
        group = QPalette.ColorGroup.Disabled if mode == QIcon.Mode.Disabled else QPalette.ColorGroup.Active
        color = palette.color(group, QPalette.ColorRole.ButtonText)
        r = QRectF(rect).adjusted(rect.width() * 0.18, rect.height() * 0.18,
                                  -rect.width() * 0.18, -rect.height() * 0.18)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self.kind == "play":
            path = QPainterPath(QPointF(r.left() + r.width() * 0.12, r.top()))
            path.lineTo(QPointF(r.right(), r.center().y()))
            path.lineTo(QPointF(r.left() + r.width() * 0.12, r.bottom()))
            path.closeSubpath()
            painter.fillPath(path, color)
        elif self.kind == "stop":
            painter.fillRect(r.adjusted(r.width() * 0.1, r.height() * 0.1, -r.width() * 0.1, -r.height() * 0.1), color)
        elif self.kind == "rerun":
            pen = QPen(color, max(1.5, rect.width() / 9))
            painter.setPen(pen)
            painter.drawArc(r, 60 * 16, 300 * 16)
            tip = QPointF(r.center().x() + r.width() * 0.25, r.top() + r.height() * 0.07)
            head = QPainterPath(tip + QPointF(r.width() * 0.22, -r.height() * 0.02))
            head.lineTo(tip + QPointF(-r.width() * 0.05, -r.height() * 0.2))
            head.lineTo(tip + QPointF(-r.width() * 0.02, r.height() * 0.22))
            head.closeSubpath()
            painter.fillPath(head, color)
        painter.restore()

    def pixmap(self, size: QSize, mode: QIcon.Mode, state: QIcon.State) -> QPixmap:
        pixmap = QPixmap(size)
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        self.paint(painter, QRect(0, 0, size.width(), size.height()), mode, state)
        painter.end()
        return pixmap


def glyph_icon(kind: str) -> QIcon:
    """A "play", "stop" or "rerun" icon drawn in the palette's text colour (both schemes)."""
    return QIcon(_GlyphEngine(kind))


_installed: list[HostStyle] = []


def install_host_style(app: QApplication, base: str | None = None) -> None:
    """Put :class:`HostStyle` over ``base`` (a style name) or the style in use, once."""
    current = app.style()
    if base is None and isinstance(current, HostStyle):
        return
    style = HostStyle(base or current.name())
    # The application does not keep the Python object: without this reference it would be
    # collected, and the overrides with it.
    _installed.append(style)
    del _installed[:-2]
    app.setStyle(style)
    for sheet in (FOCUS_STYLE_SHEET, BALLOON_STYLE_SHEET):
        if sheet not in app.styleSheet():
            app.setStyleSheet(app.styleSheet() + sheet)


def apply_color_scheme(app: QApplication, scheme: str | None = None) -> str:
    """Apply ``scheme`` (or ``$HOSTAPP_COLOR_SCHEME``); returns what is in effect ("system" if nothing forced)."""
    scheme = (scheme or os.environ.get(SCHEME_ENV) or "").strip().lower()
    if scheme not in ("dark", "light"):
        install_host_style(app)
        return "system"
    install_host_style(app, "Fusion")
    app.styleHints().setColorScheme(Qt.ColorScheme.Dark if scheme == "dark" else Qt.ColorScheme.Light)
    app.setPalette(dark_palette() if scheme == "dark" else light_palette())
    return scheme
