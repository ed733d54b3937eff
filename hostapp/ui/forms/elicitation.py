"""The form of a form-mode elicitation: one editor per flat field.

:class:`ElicitationForm` renders the fields :mod:`hostapp.protocol.elicitation` parsed
from the server's ``requestedSchema``; it only collects and shows, and what is valid is
decided by the protocol layer, so the rules live in one place.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QDate, QDateTime, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDateTimeEdit,
    QDoubleSpinBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from hostapp.protocol.elicitation import Field, default_content, validate_content
from hostapp.ui.forms.widgets import (
    INT_LIMIT,
    NOT_SET,
    caption,
    error_label,
    hint_label,
    list_height,
    plain_label,
    show_error,
)


class _FieldEditor:
    """The widget(s) for one elicitation field, with a uniform get/set/changed surface."""

    def __init__(self, f: Field):
        self.field = f
        self.widget: QWidget
        self._optional_toggle: QCheckBox | None = None
        self.value_widget: QWidget = self._make()

    # -- construction -------------------------------------------------------------------

    def _make(self) -> QWidget:
        f = self.field
        if f.kind == "string" and f.format == "date":
            date_edit = QDateEdit()
            date_edit.setDisplayFormat("yyyy-MM-dd")
            date_edit.setCalendarPopup(True)
            date_edit.setDate(QDate.currentDate())
            return self._maybe_optional(date_edit)
        if f.kind == "string" and f.format == "date-time":
            date_time_edit = QDateTimeEdit()
            date_time_edit.setDisplayFormat("yyyy-MM-dd HH:mm:ss")
            date_time_edit.setCalendarPopup(True)
            date_time_edit.setDateTime(QDateTime.currentDateTime())
            return self._maybe_optional(date_time_edit)
        if f.kind == "string":
            line_edit = QLineEdit()
            if f.max_length is not None:
                line_edit.setMaxLength(max(f.max_length, 1))
            line_edit.setPlaceholderText(
                {"email": "name@example.com", "uri": "https://…"}.get(f.format or "", "")
            )
            self.widget = line_edit
            return line_edit
        if f.kind == "integer":
            spin_box = QSpinBox()
            spin_box.setRange(
                int(max(f.minimum if f.minimum is not None else -INT_LIMIT, -INT_LIMIT)),
                int(min(f.maximum if f.maximum is not None else INT_LIMIT, INT_LIMIT)),
            )
            spin_box.setValue(int(min(max(0, spin_box.minimum()), spin_box.maximum())))
            return self._maybe_optional(spin_box)
        if f.kind == "number":
            number_box = QDoubleSpinBox()
            number_box.setDecimals(_decimals_for(f))
            number_box.setRange(
                float(f.minimum) if f.minimum is not None else -1e15,
                float(f.maximum) if f.maximum is not None else 1e15,
            )
            number_box.setStepType(QAbstractSpinBox.StepType.AdaptiveDecimalStepType)
            number_box.setValue(min(max(0.0, number_box.minimum()), number_box.maximum()))
            return self._maybe_optional(number_box)
        if f.kind == "boolean":
            check_box = QCheckBox(f.title)  # a check box's own text is always plain
            self.widget = check_box
            return check_box
        if f.kind == "single_select":
            combo_box = QComboBox()
            # A visible empty entry: the person must choose, nothing is chosen for them.
            combo_box.addItem("— choose —" if f.required else "(none)", NOT_SET)
            for option in f.options:
                combo_box.addItem(option.title, option.value)
            self.widget = combo_box
            return combo_box
        list_widget = QListWidget()  # multi_select
        for option in f.options:
            item = QListWidgetItem(option.title)
            item.setData(Qt.ItemDataRole.UserRole, option.value)
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            list_widget.addItem(item)
        list_height(list_widget, list_widget.count())
        self.widget = list_widget
        return list_widget

    def _maybe_optional(self, editor: QWidget) -> QWidget:
        """Spin boxes and date editors cannot be empty; an optional one gets a switch."""
        if self.field.required:
            self.widget = editor
            return editor
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        toggle = QCheckBox("Give a value")
        toggle.toggled.connect(editor.setEnabled)
        editor.setEnabled(False)
        row.addWidget(toggle)
        row.addWidget(editor, 1)
        self._optional_toggle = toggle
        self.widget = box
        return editor

    # -- value --------------------------------------------------------------------------

    def value(self) -> Any:
        """The value entered, or :data:`NOT_SET`."""
        f, w = self.field, self.value_widget
        if self._optional_toggle is not None and not self._optional_toggle.isChecked():
            return NOT_SET
        if isinstance(w, QDateTimeEdit) and f.format == "date-time":
            return _iso_with_offset(w.dateTime())
        if isinstance(w, QDateEdit):
            return w.date().toString("yyyy-MM-dd")
        if isinstance(w, QLineEdit):
            return w.text() if w.text().strip() else NOT_SET
        if isinstance(w, (QSpinBox, QDoubleSpinBox)):
            return w.value()
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QComboBox):
            return w.currentData()
        assert isinstance(w, QListWidget)
        chosen = [
            w.item(i).data(Qt.ItemDataRole.UserRole)
            for i in range(w.count())
            if w.item(i).checkState() == Qt.CheckState.Checked
        ]
        return chosen if chosen else NOT_SET

    def set_value(self, value: Any) -> None:
        f, w = self.field, self.value_widget
        if self._optional_toggle is not None:
            self._optional_toggle.setChecked(value is not NOT_SET and value is not None)
            if value is NOT_SET or value is None:
                return
        if (value is NOT_SET or value is None) and isinstance(w, (QDateTimeEdit, QSpinBox, QDoubleSpinBox)):
            return  # these always hold a value; a required one keeps its starting value
        if isinstance(w, QDateTimeEdit) and f.format == "date-time":
            parsed = QDateTime.fromString(str(value), Qt.DateFormat.ISODate)
            if parsed.isValid():
                w.setDateTime(parsed.toLocalTime())
        elif isinstance(w, QDateEdit):
            parsed_date = QDate.fromString(str(value), "yyyy-MM-dd")
            if parsed_date.isValid():
                w.setDate(parsed_date)
        elif isinstance(w, QLineEdit):
            w.setText("" if value is NOT_SET or value is None else str(value))
        elif isinstance(w, QSpinBox):
            w.setValue(int(value))
        elif isinstance(w, QDoubleSpinBox):
            w.setValue(float(value))
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QComboBox):
            index = w.findData(value) if value is not NOT_SET else 0
            w.setCurrentIndex(max(index, 0))
        elif isinstance(w, QListWidget):
            wanted = set(value) if isinstance(value, (list, tuple)) else set()
            for i in range(w.count()):
                item = w.item(i)
                checked = item.data(Qt.ItemDataRole.UserRole) in wanted
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)

    def connect_changed(self, slot: Callable[[], None]) -> None:
        w = self.value_widget
        if self._optional_toggle is not None:
            self._optional_toggle.toggled.connect(lambda _=None: slot())
        if isinstance(w, QLineEdit):
            w.textEdited.connect(lambda _=None: slot())
        elif isinstance(w, QDateTimeEdit):  # also QDateEdit
            w.dateTimeChanged.connect(lambda _=None: slot())
        elif isinstance(w, (QSpinBox, QDoubleSpinBox)):
            w.valueChanged.connect(lambda _=None: slot())
        elif isinstance(w, QCheckBox):
            w.toggled.connect(lambda _=None: slot())
        elif isinstance(w, QComboBox):
            w.currentIndexChanged.connect(lambda _=None: slot())
        elif isinstance(w, QListWidget):
            w.itemChanged.connect(lambda _=None: slot())


def _decimals_for(f: Field) -> int:
    """Enough decimals for the bounds and default the server gave (2 at least, 10 at most)."""
    decimals = 2
    for number in (f.minimum, f.maximum, f.default):
        if isinstance(number, float) and math.isfinite(number):
            text = repr(number)
            if "e" not in text and "." in text:
                decimals = max(decimals, len(text.split(".", 1)[1]))
    return min(decimals, 10)


def _iso_with_offset(moment: QDateTime) -> str:
    """RFC 3339 text of a local date-time, with the offset the date-time format requires."""
    local = moment.toLocalTime()
    offset = local.offsetFromUtc()
    sign = "+" if offset >= 0 else "-"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return local.toString("yyyy-MM-ddTHH:mm:ss") + f"{sign}{hours:02d}:{minutes:02d}"


class ElicitationForm(QWidget):
    """Widgets for the fields of a form-mode elicitation, defaults filled in.

    Signals:
        contentChanged(): the person changed a value.

    :meth:`content` returns what was entered (blank fields left out); :meth:`validate`
    shows a message under each field that is wrong and returns them by field name.
    """

    contentChanged = Signal()

    def __init__(self, fields: Sequence[Field], parent: QWidget | None = None):
        super().__init__(parent)
        self._fields = list(fields)
        self._editors: dict[str, _FieldEditor] = {}
        self._errors: dict[str, QLabel] = {}
        layout = QFormLayout(self)
        layout.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        for f in self._fields:
            editor = _FieldEditor(f)
            self._editors[f.name] = editor
            column = QWidget()
            stack = QVBoxLayout(column)
            stack.setContentsMargins(0, 0, 0, 0)
            stack.setSpacing(2)
            stack.addWidget(editor.widget)
            if f.description:
                stack.addWidget(hint_label(f.description))
            error = error_label()
            stack.addWidget(error)
            self._errors[f.name] = error
            if f.kind == "boolean":  # the check box carries the title; the row marks "required"
                label = plain_label("*" if f.required else "")
            else:
                label = plain_label(caption(f.title, f.required))
            label.setBuddy(editor.value_widget)
            # Screen readers look for a buddy among siblings only: name the editor itself.
            if not editor.value_widget.accessibleName():
                editor.value_widget.setAccessibleName(f.title)
            layout.addRow(label, column)
            editor.connect_changed(functools.partial(self._on_changed, f.name))
        self.set_content(default_content(self._fields))

    # -- public API ---------------------------------------------------------------------

    @property
    def fields(self) -> list[Field]:
        return list(self._fields)

    def editor(self, name: str) -> QWidget:
        """The widget that holds ``name``'s value (for focus, tests and accessibility)."""
        return self._editors[name].value_widget

    def optional_toggle(self, name: str) -> QCheckBox | None:
        """The "Give a value" switch of an optional number or date field, if it has one."""
        return self._editors[name]._optional_toggle

    def content(self) -> dict[str, Any]:
        """What the person entered, by field name; fields left blank are absent."""
        values = {}
        for name, editor in self._editors.items():
            value = editor.value()
            if value is not NOT_SET:
                values[name] = value
        return values

    def set_content(self, content: dict[str, Any]) -> None:
        for name, editor in self._editors.items():
            editor.set_value(content.get(name, NOT_SET))
        self.clear_errors()

    def validate(self) -> dict[str, str]:
        """Check :meth:`content`, show each problem under its field, and return them."""
        errors = validate_content(self._fields, self.content())
        for name, label in self._errors.items():
            show_error(label, errors.get(name))
        first = next((name for name in self._editors if name in errors), None)
        if first is not None:
            self._editors[first].value_widget.setFocus()
        return errors

    def error_text(self, name: str) -> str:
        """The message shown under ``name`` ("" when none is shown)."""
        label = self._errors[name]
        return label.text() if not label.isHidden() else ""

    def clear_errors(self) -> None:
        for label in self._errors.values():
            show_error(label, None)

    def _on_changed(self, name: str) -> None:
        # The message described the old value; it goes as soon as the person acts on it.
        show_error(self._errors[name], None)
        self.contentChanged.emit()
