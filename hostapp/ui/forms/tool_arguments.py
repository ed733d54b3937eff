"""The form of a tool's arguments: the tree its ``inputSchema`` becomes.

:class:`ToolArgumentsForm` renders the nodes :mod:`hostapp.protocol.schema_form` builds,
with a "Raw JSON" switch for whatever the widgets cannot express. It only collects and
shows; what is valid is decided by the protocol layer.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from hostapp.protocol.schema_form import (
    FormNode,
    build_form,
    defaults,
    validate_arguments,
)
from hostapp.ui.forms.widgets import (
    NOT_SET,
    caption,
    error_label,
    hint_label,
    list_height,
    plain_label,
    show_error,
)


class _NodeEditor:
    """Widgets for one node of a tool-arguments tree."""

    def __init__(self, node: FormNode):
        self.node = node
        self.widget: QWidget = QWidget()
        self.error = error_label()

    def value(self) -> Any:  # NOT_SET or a JSON value; raises ValueError for bad text
        raise NotImplementedError

    def set_value(self, value: Any) -> None:
        raise NotImplementedError

    def editors(self) -> list[_NodeEditor]:
        return [self]


class _TextEditor(_NodeEditor):
    """Strings, numbers and integers: a line edit, blank meaning "not given"."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        self.line = QLineEdit()
        if node.kind == "string" and node.max_length is not None:
            self.line.setMaxLength(max(node.max_length, 1))
        self.line.setPlaceholderText(_placeholder(node))
        self.widget = self.line

    def value(self) -> Any:
        text = self.line.text()
        if not text.strip():
            return None if self.node.nullable and self.node.required else NOT_SET
        if self.node.kind == "string":
            return text
        try:
            number = json.loads(text.strip())
        except json.JSONDecodeError:
            number = None
        if self.node.kind == "integer" and isinstance(number, float) and number.is_integer():
            number = int(number)
        wanted = int if self.node.kind == "integer" else (int, float)
        if not isinstance(number, wanted) or isinstance(number, bool):
            raise ValueError("enter a whole number" if self.node.kind == "integer" else "enter a number")
        return number

    def set_value(self, value: Any) -> None:
        if value is NOT_SET or value is None:
            self.line.setText("")
        elif self.node.kind == "string":
            self.line.setText(str(value))
        else:
            self.line.setText(json.dumps(value))


def _placeholder(node: FormNode) -> str:
    if node.kind == "string":
        return {"date": "YYYY-MM-DD", "date-time": "YYYY-MM-DDTHH:MM:SSZ", "email": "name@example.com",
                "uri": "https://…"}.get(node.format or "", "")
    bounds = []
    if node.minimum is not None:
        bounds.append(f"≥ {node.minimum}")
    if node.maximum is not None:
        bounds.append(f"≤ {node.maximum}")
    return ", ".join(bounds) or ("whole number" if node.kind == "integer" else "number")


class _ChoiceEditor(_NodeEditor):
    """Enums, and booleans that may be left unset: a combo box with a "not set" entry."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        self.combo = QComboBox()
        self.combo.addItem("(not set)", NOT_SET)
        if node.kind == "boolean":
            choices = [("true", True), ("false", False)]
        else:
            choices = [(option.title, option.value) for option in node.options]
        for title, _ in choices:
            self.combo.addItem(title)
        # Values are kept here by position, not as item data: QVariant would turn some
        # JSON values (null, nested lists) into something else on the way through.
        self._values = [NOT_SET] + [value for _, value in choices]
        self.widget = self.combo

    def value(self) -> Any:
        return self._values[self.combo.currentIndex()]

    def set_value(self, value: Any) -> None:
        for index, candidate in enumerate(self._values):
            if index and candidate == value and type(candidate) is type(value):
                self.combo.setCurrentIndex(index)
                return
        self.combo.setCurrentIndex(0)


class _CheckEditor(_NodeEditor):
    """A boolean that always has a value (required, or given a default)."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        self.check = QCheckBox(caption(node.title, node.required))
        self.widget = self.check

    def value(self) -> Any:
        return self.check.isChecked()

    def set_value(self, value: Any) -> None:
        self.check.setChecked(value is True)


class _MultiChoiceEditor(_NodeEditor):
    """An array of enum values: a list of check boxes."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        assert node.items is not None
        self.list = QListWidget()
        self._values = [option.value for option in node.items.options]
        for index, option in enumerate(node.items.options):
            item = QListWidgetItem(option.title)
            item.setData(Qt.ItemDataRole.UserRole, index)
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Unchecked)
            self.list.addItem(item)
        list_height(self.list, self.list.count())
        self.widget = self.list

    def value(self) -> Any:
        chosen = [
            self._values[i] for i in range(self.list.count())
            if self.list.item(i).checkState() == Qt.CheckState.Checked
        ]
        return chosen if chosen or self.node.required else NOT_SET

    def set_value(self, value: Any) -> None:
        wanted = value if isinstance(value, list) else []
        for i in range(self.list.count()):
            checked = self._values[i] in wanted
            self.list.item(i).setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)


class _LinesEditor(_NodeEditor):
    """An array of strings or numbers: one element per line."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText("one value per line")
        self.text.setTabChangesFocus(True)
        self.text.setFixedHeight(self.text.fontMetrics().lineSpacing() * 4 + 12)
        self._item = _TextEditor(node.items) if node.items is not None else None
        self.widget = self.text

    def value(self) -> Any:
        lines = [line for line in self.text.toPlainText().splitlines() if line.strip()]
        if not lines:
            return [] if self.node.required else NOT_SET
        assert self._item is not None
        values = []
        for number, line in enumerate(lines, start=1):
            self._item.line.setText(line)
            try:
                values.append(self._item.value())
            except ValueError as exc:
                raise ValueError(f"line {number}: {exc}") from None
        return values

    def set_value(self, value: Any) -> None:
        if not isinstance(value, list):
            self.text.setPlainText("")
            return
        self.text.setPlainText("\n".join(v if isinstance(v, str) else json.dumps(v) for v in value))


class _JsonEditor(_NodeEditor):
    """Anything the widgets cannot express: JSON typed by the person."""

    def __init__(self, node: FormNode, lines: int = 3):
        super().__init__(node)
        self.text = QPlainTextEdit()
        self.text.setPlaceholderText("JSON value" + (f" ({node.reason})" if node.reason else ""))
        self.text.setTabChangesFocus(True)
        self.text.setFixedHeight(self.text.fontMetrics().lineSpacing() * lines + 12)
        self.widget = self.text

    def value(self) -> Any:
        text = self.text.toPlainText()
        if not text.strip():
            return NOT_SET
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None

    def set_value(self, value: Any) -> None:
        self.text.setPlainText("" if value is NOT_SET else json.dumps(value, indent=2, ensure_ascii=False))


class _ObjectEditor(_NodeEditor):
    """An object: its properties in a form layout, inside a titled box unless it is the root."""

    def __init__(self, node: FormNode, root: bool = False):
        super().__init__(node)
        if root:
            container = QWidget()
        else:
            container = QGroupBox(caption(node.title, node.required))  # group titles are plain
            if not node.required:
                # An optional object is sent only when the person asks for it.
                container.setCheckable(True)
                container.setChecked(False)
        layout = QFormLayout(container)
        layout.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        layout.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        if root:
            layout.setContentsMargins(0, 0, 0, 0)
        if not root and node.description:
            layout.addRow(hint_label(node.description))
        self.children: list[_NodeEditor] = []
        for child in node.properties:
            editor = make_node_editor(child)
            self.children.append(editor)
            column = QWidget()
            stack = QVBoxLayout(column)
            stack.setContentsMargins(0, 0, 0, 0)
            stack.setSpacing(2)
            stack.addWidget(editor.widget)
            if child.description and child.kind != "object":
                stack.addWidget(hint_label(child.description))
            stack.addWidget(editor.error)
            if isinstance(editor, (_ObjectEditor, _CheckEditor)):
                layout.addRow(column)  # carries its own title
            else:
                label = plain_label(caption(child.title, child.required))
                label.setBuddy(editor.widget)
                # The buddy is not the editor's sibling (a column holds it): name it for
                # screen readers, which look for a buddy among siblings only.
                if not editor.widget.accessibleName():
                    editor.widget.setAccessibleName(child.title)
                layout.addRow(label, column)
        self.box = container if isinstance(container, QGroupBox) else None
        self.widget = container
        self.form = layout
        self.remove_button: QPushButton | None = None  # a row of an array of objects has one

    def value(self) -> Any:
        if self.box is not None and self.box.isCheckable() and not self.box.isChecked():
            return NOT_SET
        values: dict[str, Any] = {}
        problems = []
        for editor in self.children:
            try:
                value = editor.value()
            except ValueError as exc:
                problems.append(exc)
                continue
            if value is not NOT_SET:
                values[editor.node.name] = value
        if problems:
            raise problems[0]
        return values

    def set_value(self, value: Any) -> None:
        if self.box is not None and self.box.isCheckable():
            self.box.setChecked(isinstance(value, dict))
        given = value if isinstance(value, dict) else {}
        for editor in self.children:
            editor.set_value(given.get(editor.node.name, NOT_SET))

    def editors(self) -> list[_NodeEditor]:
        found: list[_NodeEditor] = [self]
        for child in self.children:
            found.extend(child.editors())
        return found


class _ObjectListEditor(_NodeEditor):
    """An array of objects: one sub-form per element, with buttons to add and remove."""

    def __init__(self, node: FormNode):
        super().__init__(node)
        assert node.items is not None and node.items.kind == "object"
        self.rows: list[_ObjectEditor] = []
        self.widget = QWidget()
        self._layout = QVBoxLayout(self.widget)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(lambda: self.add_row())
        self._layout.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignLeft)

    def add_row(self, value: Any = NOT_SET) -> _ObjectEditor:
        assert self.node.items is not None
        row = _ObjectEditor(self.node.items)
        remove = QPushButton("Remove")
        remove.clicked.connect(lambda: self.remove_row(row))
        bar = QWidget()
        bar_layout = QHBoxLayout(bar)
        bar_layout.setContentsMargins(0, 0, 0, 0)
        bar_layout.addStretch(1)
        bar_layout.addWidget(remove)
        row.form.addRow(bar)
        row.remove_button = remove
        row.set_value(value if value is not NOT_SET else defaults(self.node.items))
        self.rows.append(row)
        self._layout.insertWidget(self._layout.count() - 1, row.widget)
        self._renumber()
        return row

    def remove_row(self, row: _ObjectEditor) -> None:
        self.rows.remove(row)
        self._layout.removeWidget(row.widget)
        row.widget.hide()
        row.widget.deleteLater()
        self._renumber()

    def _renumber(self) -> None:
        for number, row in enumerate(self.rows, start=1):
            if row.box is not None:  # always: a row is never the root
                row.box.setTitle(f"{number}.")

    def value(self) -> Any:
        if not self.rows:
            return [] if self.node.required else NOT_SET
        values = []
        for number, row in enumerate(self.rows, start=1):
            try:
                values.append(row.value())
            except ValueError as exc:
                raise ValueError(f"element {number}: {exc}") from None
        return values

    def set_value(self, value: Any) -> None:
        for row in list(self.rows):
            self.remove_row(row)
        if isinstance(value, list):
            for element in value:
                self.add_row(element if isinstance(element, dict) else {})


def make_node_editor(node: FormNode, root: bool = False) -> _NodeEditor:
    """The editor that suits ``node``; JSON text for whatever has no better widget."""
    if node.kind == "object":
        return _ObjectEditor(node, root=root)
    if node.kind in ("string", "number", "integer"):
        return _TextEditor(node)
    if node.kind == "boolean":
        return _CheckEditor(node) if node.required or node.has_default else _ChoiceEditor(node)
    if node.kind == "enum":
        return _ChoiceEditor(node)
    if node.kind == "array" and node.items is not None:
        if node.items.kind == "enum":
            return _MultiChoiceEditor(node)
        if node.items.kind in ("string", "number", "integer"):
            return _LinesEditor(node)
        if node.items.kind == "object":
            return _ObjectListEditor(node)
    return _JsonEditor(node)


class ToolArgumentsForm(QWidget):
    """The arguments of a tool call, as widgets or as raw JSON.

    Signals:
        rawModeChanged(bool): the "Raw JSON" switch changed.

    States: form mode (widgets) and raw mode (one JSON text). Switching carries the
    arguments across; switching back from JSON that does not parse stays in raw mode and
    says why. :meth:`arguments` reads whichever mode is showing; :meth:`validate` checks
    them against the whole ``inputSchema``.
    """

    rawModeChanged = Signal(bool)

    def __init__(self, input_schema: Any, parent: QWidget | None = None):
        super().__init__(parent)
        self._schema = input_schema
        self.tree = build_form(input_schema)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

        self.raw_toggle = QCheckBox("Raw JSON")
        self.raw_toggle.setToolTip("Edit the arguments as one JSON object")
        layout.addWidget(self.raw_toggle, 0, Qt.AlignmentFlag.AlignRight)

        self._root = make_node_editor(self.tree, root=True)
        layout.addWidget(self._root.widget)
        if not self.tree.properties and self.tree.kind == "object":
            self._root.widget.hide()
            self._no_arguments = plain_label("This tool takes no arguments.")
            layout.addWidget(self._no_arguments)

        self.raw_text = QPlainTextEdit()
        self.raw_text.setTabChangesFocus(True)
        self.raw_text.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.raw_text.hide()
        layout.addWidget(self.raw_text)

        self.errors = error_label()
        layout.addWidget(self.errors)
        layout.addStretch(1)

        self._by_path = {editor.node.path: editor for editor in self._root.editors()}
        if self.tree.kind == "object":
            self._root.set_value(defaults(self.tree))
        self.raw_toggle.toggled.connect(self._on_raw_toggled)
        if self.tree.kind == "raw_json":
            # Nothing to show as widgets: start (and stay) in raw mode.
            self.raw_toggle.setChecked(True)
            self.raw_toggle.setEnabled(False)

    # -- public API ---------------------------------------------------------------------

    def is_raw(self) -> bool:
        return self.raw_toggle.isChecked()

    def arguments(self) -> dict[str, Any]:
        """The arguments as they stand; raises ``ValueError`` for text that is not JSON."""
        if self.is_raw():
            text = self.raw_text.toPlainText()
            if not text.strip():
                return {}
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
            if not isinstance(value, dict):
                raise ValueError("the arguments must be a JSON object")
            return value
        value = self._root.value()
        return value if isinstance(value, dict) else {}

    def set_arguments(self, args: dict[str, Any]) -> None:
        if self.is_raw():
            self.raw_text.setPlainText(json.dumps(args, indent=2, ensure_ascii=False))
        else:
            self._root.set_value(args)

    def validate(self) -> list[str]:
        """Problems with the arguments (also shown in the form); ``[]`` when they can be sent."""
        for editor in self._by_path.values():
            show_error(editor.error, None)
        try:
            messages = self._text_problems() or validate_arguments(self._schema, self.arguments())
        except ValueError as exc:
            messages = [f"$: {exc}"]
        show_error(self.errors, "\n".join(messages))
        if not self.is_raw():
            for message in messages:
                target = self._editor_for(message.split(":", 1)[0])
                if target is not None:
                    show_error(target.error, message.split(": ", 1)[1] if ": " in message else message)
        return messages

    def error_text(self) -> str:
        return self.errors.text() if not self.errors.isHidden() else ""

    def editor_widget(self, *path: str) -> QWidget:
        """The widget for the value at ``path`` (property names, ``"*"`` for array items)."""
        return self._by_path[tuple(path)].widget

    # -- internals ----------------------------------------------------------------------

    def _text_problems(self) -> list[str]:
        """Per-field text that does not parse, each with its JSON path."""
        if self.is_raw():
            return []
        problems = []
        for editor in self._by_path.values():
            if isinstance(editor, _ObjectEditor):
                continue
            try:
                editor.value()
            except ValueError as exc:
                problems.append(f"{editor.node.json_path}: {exc}")
        return problems

    def _editor_for(self, json_path: str) -> _NodeEditor | None:
        for editor in self._by_path.values():
            if editor.node.json_path == json_path and not isinstance(editor, _ObjectEditor):
                return editor
        return None

    def _on_raw_toggled(self, raw: bool) -> None:
        if raw:
            try:
                current = self._root.value()
            except ValueError:
                current = NOT_SET  # keep what parses; the widgets stay as they were
            if current is NOT_SET:
                current = {}
            self.raw_text.setPlainText(json.dumps(current, indent=2, ensure_ascii=False))
            self._root.widget.hide()
            self.raw_text.show()
        else:
            try:
                args = json.loads(self.raw_text.toPlainText() or "{}")
                if not isinstance(args, dict):
                    raise ValueError("the arguments must be a JSON object")
            except ValueError as exc:
                message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
                show_error(self.errors, f"Cannot show this as a form: {message}")
                self.raw_toggle.blockSignals(True)
                self.raw_toggle.setChecked(True)
                self.raw_toggle.blockSignals(False)
                return
            self._root.set_value(args)
            self.raw_text.hide()
            if self.tree.properties:
                self._root.widget.show()
            show_error(self.errors, None)
        self.rawModeChanged.emit(self.is_raw())
