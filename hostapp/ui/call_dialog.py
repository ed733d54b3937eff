"""Starting a call: pick a server and a tool, fill its arguments, validate, send."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from hostapp.protocol.apps import tool_ui
from hostapp.ui.forms import ToolArgumentsForm
from hostapp.ui.result_view import plain_label, plain_tooltip

ToolLoader = Callable[[str], Awaitable[list[dict[str, Any]]]]


class StartCallDialog(QDialog):
    """Server and tool pickers over the tool's generated arguments form.

    After ``accepted``: :attr:`server`, :attr:`tool` and :attr:`arguments` hold the call.
    Tools are read through ``load_tools`` (the engine's ``list_tools``) without blocking.
    """

    def __init__(self, servers: list[str], load_tools: ToolLoader, parent: QWidget | None = None, *,
                 server: str | None = None, tool: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Start a call")
        self._load_tools = load_tools
        self._tools: dict[str, dict[str, Any]] = {}
        self._wanted_tool = tool
        self._load_task: asyncio.Task | None = None
        self.server: str | None = None
        self.tool: str | None = None
        self.arguments: dict[str, Any] = {}
        self.form: ToolArgumentsForm | None = None

        self.server_box = QComboBox()
        self.server_box.setAccessibleName("Server")
        self.server_box.addItems(servers)
        self.tool_list = QListWidget()
        self.tool_list.setAccessibleName("Tools")
        self.description = plain_label("")
        self.description.setAccessibleName("Tool description")
        self.status = plain_label("")
        self.form_area = QScrollArea()
        self.form_area.setWidgetResizable(True)
        self.form_area.setFrameShape(QFrame.Shape.NoFrame)
        self.form_area.setAccessibleName("Arguments")

        right = QWidget()
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 0, 0, 0)
        rlay.addWidget(self.description)
        rlay.addWidget(self.form_area, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.tool_list)
        split.addWidget(right)
        split.setStretchFactor(1, 2)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.start_button = self.buttons.addButton("Start", QDialogButtonBox.ButtonRole.AcceptRole)
        self.start_button.setEnabled(False)
        self.buttons.accepted.connect(self._try_accept)
        self.buttons.rejected.connect(self.reject)

        top = QFormLayout()
        top.addRow("&Server:", self.server_box)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(split, 1)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        self.resize(820, 560)

        self.server_box.currentTextChanged.connect(self._server_chosen)
        self.tool_list.currentItemChanged.connect(self._tool_chosen)
        if server:
            self.server_box.setCurrentText(server)
        self._server_chosen(self.server_box.currentText())

    def _server_chosen(self, name: str) -> None:
        self.tool_list.clear()
        self._tools = {}
        self._show_form(None)
        if not name:
            self.status.setText("No server is configured.")
            return
        self.status.setText(f"Reading the tools of {name}…")
        if self._load_task is not None:
            self._load_task.cancel()
        self._load_task = asyncio.ensure_future(self._read_tools(name))

    async def _read_tools(self, name: str) -> None:
        try:
            tools = await self._load_tools(name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the failure, the dialog shows it and stays usable
            self.status.setText(f"Cannot read the tools of {name}: {exc}")
            return
        if self.server_box.currentText() != name:
            return
        # A tool only a server's app views may call (MCP Apps, visibility ["app"]) is not offered.
        self._tools = {t.get("name", ""): t for t in tools if t.get("name") and tool_ui(t).model_visible}
        for tname, tool in self._tools.items():
            item = QListWidgetItem(tname)
            item.setToolTip(plain_tooltip(str(tool.get("description") or "")))
            self.tool_list.addItem(item)
        self.status.setText(f"{len(self._tools)} tools." if self._tools else f"{name} offers no tools.")
        wanted = self._wanted_tool or (next(iter(self._tools)) if self._tools else None)
        self._wanted_tool = None
        matches = self.tool_list.findItems(wanted or "", Qt.MatchFlag.MatchExactly) if wanted else []
        if matches:
            self.tool_list.setCurrentItem(matches[0])

    def _tool_chosen(self, item: QListWidgetItem | None, _previous=None) -> None:
        self._show_form(self._tools.get(item.text()) if item else None)

    def _show_form(self, tool: dict[str, Any] | None) -> None:
        self.form = None
        if tool is None:
            self.description.setText("")
            self.form_area.setWidget(QWidget())
            self.start_button.setEnabled(False)
            return
        self.description.setText((tool.get("description") or "").strip() or "No description.")
        self.form = ToolArgumentsForm(tool.get("inputSchema") or {"type": "object"})
        self.form_area.setWidget(self.form)
        self.start_button.setEnabled(True)

    def select_tool(self, name: str) -> bool:
        matches = self.tool_list.findItems(name, Qt.MatchFlag.MatchExactly)
        if matches:
            self.tool_list.setCurrentItem(matches[0])
        return bool(matches)

    def _try_accept(self) -> None:
        if self.form is None:
            return
        problems = self.form.validate()
        if problems:
            self.status.setText("Fix the arguments first: " + "; ".join(problems[:3]))
            return
        self.server = self.server_box.currentText()
        self.tool = self.tool_list.currentItem().text()
        self.arguments = self.form.arguments()
        self.accept()

    def done(self, code: int) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        super().done(code)
