"""Starting a call: pick a server and a tool, fill its arguments, validate, send.

The dialog remembers the last call (server, tool) and each tool's last arguments in the
window's settings, and offers them the next time; arguments the schema marks as
passwords or write-only are never remembered.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QScrollArea,
    QSplitter,
    QStyle,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import ServerState, ServerView
from hostapp.protocol.apps import tool_ui
from hostapp.ui.accessible import name_as_shown, name_clear_button
from hostapp.ui.forms import ToolArgumentsForm
from hostapp.ui.result_view import plain_label, plain_tooltip

ToolLoader = Callable[[str], Awaitable[list[dict[str, Any]]]]

#: How the chooser names the state of a server that cannot answer now.
SERVER_STATE_WORDS: dict[str, str] = {ServerState.OFFLINE: "offline", ServerState.RECONNECTING: "reconnecting",
                      ServerState.NEEDS_SIGN_IN: "needs sign-in", ServerState.DISABLED: "retries stopped"}

#: How long Retry waits for the server's attempt to end before it reads the tools anyway.
RETRY_WAIT_SECONDS = 30.0


class StartCallDialog(QDialog):
    """Server and tool pickers over the tool's generated arguments form.

    After ``accepted``: :attr:`server`, :attr:`tool` and :attr:`arguments` hold the call.
    Tools are read through ``load_tools`` (the engine's ``list_tools``) without blocking.
    """

    def __init__(self, servers: list[str], load_tools: ToolLoader, parent: QWidget | None = None, *,
                 server: str | None = None, tool: str | None = None, memory: QSettings | None = None,
                 server_view: Callable[[str], ServerView | None] | None = None,
                 reconnect: Callable[[str], Awaitable[None]] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Start a call")
        self._memory = memory
        if memory is not None and server is None and memory.value("call/last_server") in servers:
            server = str(memory.value("call/last_server"))
        if memory is not None and tool is None and server is not None \
                and memory.value("call/last_server") == server:
            tool = str(memory.value("call/last_tool") or "") or None
        self._load_tools = load_tools
        self._server_view = server_view or (lambda _name: None)
        self._reconnect = reconnect
        self._tools: dict[str, dict[str, Any]] = {}
        self._wanted_tool = tool
        self._hidden_choice: str | None = None  # the tool chosen before a search hid it
        self._load_task: asyncio.Task | None = None
        self.server: str | None = None
        self.tool: str | None = None
        self.arguments: dict[str, Any] = {}
        self.form: ToolArgumentsForm | None = None

        self.server_box = QComboBox()
        self.server_box.setAccessibleName("Server")
        for name in servers:
            self.server_box.addItem(name, name)  # the text may say more (offline); the data is the name
        self.tool_list = QListWidget()
        self.tool_list.setAccessibleName("Tools")
        self.tool_search = QLineEdit()
        self.tool_search.setPlaceholderText("Search tools")
        self.tool_search.setClearButtonEnabled(True)
        self.tool_search.setAccessibleName("Search the tools")
        name_clear_button(self.tool_search, "Clear the search")
        self.tool_search.textChanged.connect(self._filter_tools)
        self.description = plain_label("")
        self.description.setAccessibleName("Tool description")
        self.status = plain_label("")
        self.form_area = QScrollArea()
        self.form_area.setWidgetResizable(True)
        self.form_area.setFrameShape(QFrame.Shape.NoFrame)
        self.form_area.setAccessibleName("Arguments")
        # Not a Tab stop of its own (it would show no focus): Tab goes to its fields.
        self.form_area.setFocusPolicy(Qt.FocusPolicy.NoFocus)

        right = QWidget()
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 0, 0, 0)
        rlay.addWidget(self.description)
        rlay.addWidget(self.form_area, 1)
        left = QWidget()
        llay = QVBoxLayout(left)
        llay.setContentsMargins(0, 0, 0, 0)
        llay.addWidget(self.tool_search)
        llay.addWidget(self.tool_list, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(1, 2)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.retry_button = self.buttons.addButton("&Retry now", QDialogButtonBox.ButtonRole.ActionRole)
        name_as_shown(self.retry_button, "Connect to the server now and read its tools")
        self.retry_button.clicked.connect(self.retry)
        self.retry_button.hide()
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

        # While the server is unavailable, the words follow its state each second, and its
        # tools are read as soon as it connects.
        self._watch = QTimer(self)
        self._watch.setInterval(1000)
        self._watch.timeout.connect(self._follow_server)
        self._mark_servers()
        self.server_box.currentIndexChanged.connect(lambda _i: self._server_chosen(self.chosen_server()))
        self.tool_list.currentItemChanged.connect(self._tool_chosen)
        if server and self.server_box.findData(server) >= 0:
            self.server_box.setCurrentIndex(self.server_box.findData(server))
        # The tool list has the focus: type to search it, arrows to choose, Tab to the form.
        self._order_tabs()
        self.tool_list.setFocus(Qt.FocusReason.OtherFocusReason)
        self._server_chosen(self.chosen_server())

    def chosen_server(self) -> str:
        """The name of the server chosen (its item's text may also say it is offline)."""
        return str(self.server_box.currentData() or "")

    def _mark_servers(self) -> None:
        """Servers that cannot answer now say so in the chooser: "nocmd (offline)", an icon,
        and why in the tooltip."""
        warning = self.style().standardIcon(QStyle.StandardPixmap.SP_MessageBoxWarning)
        for i in range(self.server_box.count()):
            name = str(self.server_box.itemData(i))
            view = self._server_view(name)
            state = None if view is None or view.state in (ServerState.CONNECTED, ServerState.CONNECTING) \
                else SERVER_STATE_WORDS.get(view.state, str(view.state).replace("_", " "))
            self.server_box.setItemText(i, f"{name} ({state})" if state else name)
            self.server_box.setItemIcon(i, warning if state else QIcon())
            self.server_box.setItemData(i, plain_tooltip(self.unavailable_text(view)) if state else None,
                                        Qt.ItemDataRole.ToolTipRole)

    def _server_chosen(self, name: str) -> None:
        self._watch.stop()
        self.tool_list.clear()
        self._tools = {}
        self._show_form(None)
        if not name:
            self.status.setText("No server is configured.")
            return
        if self._load_task is not None:
            self._load_task.cancel()
        self.retry_button.hide()
        unavailable = self.unavailable_text(self._server_view(name))
        if unavailable:
            # Said at once, rather than after the wait for a connection that is not there.
            self.status.setText(unavailable)
            self.retry_button.setVisible(self._reconnect is not None)
            self._watch.start()
            return
        self.status.setText(f"Reading the tools of {name}…")
        self._load_task = asyncio.ensure_future(self._read_tools(name))

    @staticmethod
    def unavailable_text(server: ServerView | None) -> str:
        """Why the server's tools cannot be read now, in plain words ("" when they can)."""
        if server is None or server.state in (ServerState.CONNECTED, ServerState.CONNECTING):
            return ""
        why = f" Last error: {server.error}" if server.error else ""
        if server.state == ServerState.NEEDS_SIGN_IN:
            return f"{server.name} needs you to sign in first (Server ▸ Sign in).{why}"
        if server.state == ServerState.DISABLED:
            return f"{server.name} is not being connected (retries were stopped).{why}"
        when = ""
        if server.retry_at is not None:
            when = f" hostapp tries again in {max(0, round(server.retry_at - time.time()))} s."
        state = "offline" if server.state == ServerState.OFFLINE else "reconnecting"
        return f"{server.name} is {state}.{when}{why}"

    def _follow_server(self) -> None:
        name = self.chosen_server()
        if self.retry_button.isHidden() or (self._load_task is not None and not self._load_task.done()):
            self._watch.stop()
            return
        view = self._server_view(name)
        unavailable = self.unavailable_text(view)
        self._mark_servers()
        if view is not None and view.state == ServerState.CONNECTED:
            self._watch.stop()
            self._server_chosen(name)
        elif unavailable:
            self.status.setText(unavailable)

    def retry(self) -> None:
        """Connect the server now, and read its tools once it answers."""
        name = self.chosen_server()
        if not name or self._reconnect is None:
            return
        self.retry_button.hide()
        self._watch.stop()
        self.status.setText(f"Connecting to {name}…")
        if self._load_task is not None:
            self._load_task.cancel()
        self._load_task = asyncio.ensure_future(self._retry(name))

    async def _retry(self, name: str) -> None:
        assert self._reconnect is not None
        before = self._server_view(name)
        try:
            await self._reconnect(name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - shown, the dialog stays usable
            self._cannot_read(name, exc)
            return
        # Until this attempt ended: connected, or failed again (a new retry is planned).
        loop = asyncio.get_running_loop()
        end = loop.time() + RETRY_WAIT_SECONDS
        while loop.time() < end:
            view = self._server_view(name)
            if view is None or view.state == ServerState.CONNECTED:
                break
            if view is not before and view.retry_at is not None and (
                    before is None or view.retry_at != before.retry_at):
                self.status.setText(self.unavailable_text(view))
                self.retry_button.show()
                return
            await asyncio.sleep(0.1)
        await self._read_tools(name)

    def _cannot_read(self, name: str, exc: BaseException) -> None:
        reason = str(exc) or self.unavailable_text(self._server_view(name)) or type(exc).__name__
        self.status.setText(f"Cannot read the tools of {name}: {reason}")
        self.retry_button.setVisible(self._reconnect is not None)

    async def _read_tools(self, name: str) -> None:
        try:
            tools = await self._load_tools(name)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the failure, the dialog shows it and stays usable
            if self.chosen_server() == name:
                self._cannot_read(name, exc)
            return
        if self.chosen_server() != name:
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
        elif self.tool_list.count():
            self.tool_list.setCurrentRow(0)  # the tool asked for is not (or no longer) offered
        self._filter_tools(self.tool_search.text())
        if self.isVisible() and self.focusWidget() in (None, self.server_box, self.tool_list):
            self.tool_list.setFocus(Qt.FocusReason.OtherFocusReason)

    def _filter_tools(self, text: str) -> None:
        """Hide the tools whose name and description do not contain every word searched."""
        words = text.lower().split()
        first_shown = None
        for i in range(self.tool_list.count()):
            item = self.tool_list.item(i)
            tool = self._tools.get(item.text(), {})
            haystack = f"{item.text()} {tool.get('description') or ''}".lower()
            hidden = not all(w in haystack for w in words)
            item.setHidden(hidden)
            if not hidden and first_shown is None:
                first_shown = item
        current = self.tool_list.currentItem()
        if current is not None and current.isHidden():
            self._hidden_choice = current.text()
        if current is None or current.isHidden():
            # The tool chosen before the search comes back when the search shows it again;
            # when nothing matches, no tool is chosen: Start cannot call one the person cannot see.
            again = self.tool_list.findItems(self._hidden_choice or "", Qt.MatchFlag.MatchExactly)
            shown = again[0] if again and not again[0].isHidden() else first_shown
            if shown is not None:
                self.tool_list.setCurrentItem(shown)
            else:  # nothing matches: no form, Start disabled
                self.tool_list.setCurrentRow(-1)
        if self._tools:
            self.status.setText(f"No tool matches “{text.strip()}”." if first_shown is None
                                else f"{len(self._tools)} tools.")

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
        remembered = self._remembered_arguments(tool.get("name", ""))
        if remembered:
            try:
                self.form.set_arguments(remembered)
            except (ValueError, TypeError, KeyError):
                pass  # the tool's schema changed since: start from its defaults
        self.form_area.setWidget(self.form)
        self.start_button.setEnabled(True)
        self._order_tabs()

    def _order_tabs(self) -> None:
        """Tab goes down the dialog as it reads: server, search, tools, the form's fields
        (made after the buttons, they would otherwise come last), then the buttons."""
        fields = [] if self.form is None else [
            w for w in self.form.findChildren(QWidget)
            if w.focusPolicy() & Qt.FocusPolicy.TabFocus and w.window() is self]  # not a combo box's popup
        chain: list[QWidget] = [self.server_box, self.tool_search, self.tool_list, *fields,
                                *[b for b in (self.retry_button, self.start_button,
                                              self.buttons.button(QDialogButtonBox.StandardButton.Cancel))
                                  if b is not None]]
        for before, after in itertools.pairwise(chain):
            self.setTabOrder(before, after)

    def select_tool(self, name: str) -> bool:
        matches = self.tool_list.findItems(name, Qt.MatchFlag.MatchExactly)
        if matches:
            self.tool_list.setCurrentItem(matches[0])
        return bool(matches)

    def _try_accept(self) -> None:
        current = self.tool_list.currentItem()
        if self.form is None or current is None or current.isHidden():
            return
        problems = self.form.validate()
        if problems:
            self.status.setText("Fix the arguments first: " + "; ".join(problems[:3]))
            return
        self.server = self.chosen_server()
        self.tool = current.text()
        self.arguments = self.form.arguments()
        self._remember()
        self.accept()

    # -- memory -------------------------------------------------------------------------

    def _key(self, tool: str) -> str:
        return f"call/arguments/{self.chosen_server()}/{tool}".replace("//", "/")

    def _remembered_arguments(self, tool: str) -> dict[str, Any] | None:
        if self._memory is None or not tool:
            return None
        try:
            value = json.loads(str(self._memory.value(self._key(tool)) or "null"))
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, dict) else None

    def _remember(self) -> None:
        if self._memory is None or self.tool is None:
            return
        schema = (self._tools.get(self.tool) or {}).get("inputSchema") or {}
        props = schema.get("properties") if isinstance(schema, dict) else None
        secret = {name for name, spec in (props or {}).items()
                  if isinstance(spec, dict) and (spec.get("format") == "password" or spec.get("writeOnly"))}
        kept = {k: v for k, v in self.arguments.items() if k not in secret}
        self._memory.setValue("call/last_server", self.server)
        self._memory.setValue("call/last_tool", self.tool)
        self._memory.setValue(self._key(self.tool), json.dumps(kept, ensure_ascii=False))

    def done(self, code: int) -> None:
        self._watch.stop()
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
        super().done(code)
