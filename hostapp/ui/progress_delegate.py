"""Draws an operation's progress as a bar inside its table cell.

Determinate when the server gave a total (the percentage on the bar), indeterminate
otherwise: a chunk that slides with the clock, so the model's periodic refresh of live
rows animates it without any per-row timer. Colours come from the palette, so the bar
follows the system's light or dark scheme.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QSize, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionProgressBar, QStyleOptionViewItem

from hostapp.engine import api
from hostapp.presentation import time_left
from hostapp.ui.operations_model import EstimateRole, OperationRole, shown_fraction

#: Width of the sliding chunk of an indeterminate bar, as a share of the bar.
CHUNK_SHARE = 0.3
#: Seconds the chunk takes to cross the bar once.
SWEEP_SECONDS = 1.6


class ProgressDelegate(QStyledItemDelegate):
    """Paints the Progress column; everything else is the default delegate's job.

    ``clock`` (seconds, monotonic) places the chunk of an indeterminate bar.
    """

    clock = staticmethod(time.monotonic)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem,
              index: QModelIndex | QPersistentModelIndex) -> None:
        op = index.data(OperationRole)
        if op is None:
            super().paint(painter, option, index)
            return
        widget = option.widget
        style = widget.style() if widget is not None else QApplication.style()
        # Background and selection as for any cell, but no text.
        cell = QStyleOptionViewItem(option)
        self.initStyleOption(cell, index)
        cell.text = ""
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, cell, painter, widget)

        bar = QStyleOptionProgressBar()
        bar.rect = option.rect.adjusted(3, 3, -3, -3)
        bar.state = option.state | QStyle.StateFlag.State_Horizontal
        bar.direction = option.direction
        bar.palette = option.palette
        bar.fontMetrics = option.fontMetrics
        bar.minimum, bar.maximum = 0, 1000
        bar.textVisible = True
        bar.textAlignment = Qt.AlignmentFlag.AlignCenter
        fraction = shown_fraction(op)
        # No empty bar where nothing moves: a call that ended without a known share of
        # its work, or one waiting for the person (its status says so).
        if fraction is None and (not op.in_flight or op.status == api.OperationStatus.INPUT_REQUIRED):
            return
        if fraction is not None:
            bar.progress = round(fraction * 1000)
            bar.text = f"{fraction * 100:.0f}%"
            estimate = index.data(EstimateRole)
            if estimate is not None:
                bar.text += f" · {time_left(estimate.seconds_left)}"
        else:
            bar.progress, bar.text = 0, ""
        style.drawControl(QStyle.ControlElement.CE_ProgressBar, bar, painter, widget)
        # Working, with no share of the work known: a chunk that slides.
        if fraction is None:
            self._paint_sliding_chunk(painter, bar)

    def _paint_sliding_chunk(self, painter: QPainter, bar: QStyleOptionProgressBar) -> None:
        groove = bar.rect.adjusted(2, 2, -2, -2)
        if groove.width() <= 4:
            return
        chunk_width = max(8, int(groove.width() * CHUNK_SHARE))
        phase = (self.clock() % SWEEP_SECONDS) / SWEEP_SECONDS
        travel = groove.width() + chunk_width
        left = groove.left() - chunk_width + int(travel * phase)
        chunk = QRect(left, groove.top(), chunk_width, groove.height()).intersected(groove)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(bar.palette.highlight())
        painter.drawRoundedRect(chunk, 2, 2)
        painter.restore()

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> QSize:
        hint = super().sizeHint(option, index)
        return QSize(max(hint.width(), 140), max(hint.height(), option.fontMetrics.height() + 8))
