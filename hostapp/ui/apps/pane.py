"""The details pane's "App view" tab: the view of the selected operation's tool.

:class:`AppViews` is what :class:`hostapp.ui.details.OperationDetails` holds once the
window enabled app views. For the shown operation it asks the engine for the tool's
``_meta.ui``; when the tool declares a view it reads the resource, renders it in an
:class:`~hostapp.ui.apps.sandbox.AppSandbox` and hands the operation's outcome to its
:class:`~hostapp.ui.apps.bridge.AppBridge` when it comes. Nothing is stored: after a
restart of the window the same steps run again with the journaled outcome. A view whose
operation's timeline lists calls it made before is shown again from that record: its
calls are answered with what they returned then, and none is made again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import QLabel, QMessageBox, QVBoxLayout, QWidget

from hostapp import __version__
from hostapp.engine import api
from hostapp.protocol.apps import ViewResource, find_tool, tool_ui
from hostapp.protocol.shown_text import reveal_reordering
from hostapp.ui.apps import unavailable_reason
from hostapp.ui.apps.bridge import AppBridge, ConsentBook
from hostapp.ui.async_dialog import plain_question, run_dialog

log = logging.getLogger(__name__)

#: Above a view shown again from the record.
REPLAY_NOTE = ("Shown again from the record: the view's tool calls get what they returned before and are not "
               "made again. Call the tool again for fresh data.")


class AppViewPane(QWidget):
    """A status line and, when there is one, the rendered view."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.status = QLabel("")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setWordWrap(True)
        self.status.setAccessibleName("App view status")
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addWidget(self.status)
        self.sandbox: Any = None

    def say(self, text: str) -> None:
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def put(self, sandbox: QWidget) -> None:
        old = self.take()
        if old is not None:
            old.deleteLater()
        self.sandbox = sandbox
        self._layout.addWidget(sandbox, 1)

    def take(self) -> Any:
        """The rendered view, out of the pane (hidden, not yet deleted), or None."""
        sandbox, self.sandbox = self.sandbox, None
        if sandbox is not None:
            self._layout.removeWidget(sandbox)
            sandbox.hide()
        return sandbox


class AppViews(QObject):
    """Decides whether the shown operation has a view, and runs it.

    Signals: ``available(bool)``: the shown operation's tool has a view (show the tab or
    hide it); ``bridgeChanged()``: a new view is up (tests and the window may look at it).
    """

    available = Signal(bool)
    bridgeChanged = Signal()

    def __init__(self, engine: api.EngineApi, pane: AppViewPane, parent: QWidget) -> None:
        super().__init__(parent)
        self.engine = engine
        self.pane = pane
        self.consent = ConsentBook(self._ask_consent)
        self.bridge: AppBridge | None = None
        self._op_id: str | None = None
        self._loading: asyncio.Task[None] | None = None
        self._window = parent
        self._endings: set[asyncio.Task[None]] = set()
        #: Operations the views started while the window runs (their view shows the outcome).
        self.view_calls: set[str] = set()

    # -- what the details pane calls ----------------------------------------------------------

    def show_operation(self, op: api.OperationView | None) -> None:
        if op is not None and op.id == self._op_id:
            self.update_operation(op)
            return
        self._close()
        self._op_id = op.id if op is not None else None
        self.available.emit(False)
        if op is not None and op.tool is not None and op.method == "tools/call":
            self._loading = asyncio.ensure_future(self._load(op))

    def update_operation(self, op: api.OperationView) -> None:
        if self.bridge is not None and op.id == self._op_id:
            self.bridge.deliver(op)

    # -- the view ------------------------------------------------------------------------------

    async def _load(self, op: api.OperationView) -> None:
        try:
            tools = await self.engine.list_tools(op.server)
        except api.EngineError as exc:
            log.debug("no tool list for %s: %s", op.server, exc)
            return
        tool = find_tool(tools, op.tool or "")
        uri = tool_ui(tool).resource_uri if tool is not None else None
        if uri is None or op.id != self._op_id:
            return
        self.available.emit(True)
        reason = unavailable_reason()
        if reason is not None:
            self.pane.say(reason)
            return
        self.pane.say(f"Loading the view {uri} from {op.server}…")
        try:
            resource = ViewResource.from_json(await self.engine.read_app_view(op.server, uri))
        except (api.EngineError, ValueError) as exc:
            if op.id == self._op_id:
                self.pane.say(f"The view {uri} cannot be shown: {exc}")
            return
        if op.id != self._op_id:
            return
        current = await self.engine.operation(op.id) or op
        try:
            earlier = [e["data"] for e in await self.engine.events(op.id) if e.get("kind") == api.EVENT_VIEW_CALL]
        except api.EngineError as exc:
            log.debug("no timeline for %s: %s", op.id, exc)
            earlier = []
        if op.id != self._op_id:
            return
        self._render(current, tool, resource, earlier or None)

    def _render(self, op: api.OperationView, tool: dict[str, Any] | None, resource: ViewResource,
                record: list[dict[str, Any]] | None = None) -> None:
        from hostapp.ui.apps.sandbox import AppSandbox

        sandbox = AppSandbox(resource)
        sandbox.setAccessibleName(f"App view of {op.tool}")
        dark = self.pane.palette().color(QPalette.ColorRole.Window).lightness() < 128
        bridge = AppBridge(self.engine, op, tool, resource, sandbox.post, consent=self.consent,
                           open_link=self._open_link, resized=sandbox.set_view_height,
                           theme="dark" if dark else "light", width=max(320, self.pane.width()),
                           host_version=__version__, started=self.view_calls.add, record=record)
        sandbox.messageReceived.connect(bridge.receive)
        sandbox.refused.connect(lambda kind, target: self.pane.say(
            f"The view tried a {kind} the sandbox does not allow: {target[:200]}"))
        self.pane.say(REPLAY_NOTE if record is not None else "")
        self.pane.put(sandbox)
        self.bridge = bridge
        sandbox.load_view()
        self.bridgeChanged.emit()

    def _close(self) -> None:
        if self._loading is not None and not self._loading.done():
            self._loading.cancel()
        self._loading = None
        bridge, self.bridge = self.bridge, None
        sandbox = self.pane.take()
        if sandbox is not None:
            async def end() -> None:
                try:
                    if bridge is not None:
                        await bridge.teardown()
                finally:
                    sandbox.deleteLater()

            task = asyncio.ensure_future(end())
            self._endings.add(task)
            task.add_done_callback(self._endings.discard)
        self.pane.say("")

    def close(self) -> None:
        self._close()
        self._op_id = None

    # -- the person ---------------------------------------------------------------------------

    async def _ask_consent(self, server: str, tool: str, asked_by: str, arguments: dict[str, Any]) -> bool:
        # The whole arguments, in a scrollable box shown open: a field cut off is a field
        # the person agreed to without seeing it.
        shown = reveal_reordering(json.dumps(arguments, ensure_ascii=False, indent=2))
        box = QMessageBox(QMessageBox.Icon.Question, "Allow the view to call a tool?",
                          reveal_reordering(f"The view of {asked_by} on {server} wants to call the tool {tool} "
                                            f"on {server} with the arguments below ({len(shown.encode())} bytes).\n\n"
                                            f"Allow this, and further calls of {tool} from its views while "
                                            f"hostapp runs?"),
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self._window)
        box.setTextFormat(Qt.TextFormat.PlainText)
        box.setDetailedText(shown)
        for button in box.buttons():
            if box.buttonRole(button) == QMessageBox.ButtonRole.ActionRole:
                button.click()  # "Show Details…": the arguments are open from the start
        box.setDefaultButton(QMessageBox.StandardButton.No)
        box.setObjectName("appConsent")
        return await run_dialog(box) == QMessageBox.StandardButton.Yes.value

    async def _open_link(self, url: str) -> bool:
        target = QUrl(url)
        # Reordering characters shown as code points: "invoice-\u202efdp.exe" does not pass for a PDF.
        box = plain_question("appOpenLink", QMessageBox.Icon.Question, "Open a link from the view?",
                             f"The view asks to open this address on "
                             f"{target.host(QUrl.ComponentFormattingOption.FullyEncoded)} in your browser:\n\n"
                             f"{reveal_reordering(url)}",
                             QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
                             QMessageBox.StandardButton.Cancel, self._window)
        if await run_dialog(box) != QMessageBox.StandardButton.Open.value:
            return False
        return QDesktopServices.openUrl(QUrl(url))
