"""The main window: servers, operations, the selected operation's details.

Everything here runs on the GUI thread inside the qasync loop. Engine calls are awaited
in tasks started by :meth:`MainWindow.run`; none of them blocks the window. The window
never learns how an operation is carried (task, stream, resume token…): it shows
operations.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QByteArray,
    QPoint,
    QSettings,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import (
    QAction,
    QCloseEvent,
    QGuiApplication,
    QIcon,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QMainWindow,
    QMenu,
    QPushButton,
    QSplitter,
    QStyle,
    QSystemTrayIcon,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import (
    TERMINAL,
    EngineApi,
    EngineError,
    InputRequest,
    JsonObject,
    OperationStatus,
    OperationView,
    ServerState,
    ServerView,
)
from hostapp.protocol.skills import EXTENSION_ID as SKILLS_EXTENSION
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.adapter import EngineSignals
from hostapp.ui.async_dialog import run_dialog
from hostapp.ui.banner import Banner
from hostapp.ui.details import VIEW_CALLS_SHOWN, OperationDetails
from hostapp.ui.elicitation_queue import ElicitationQueue
from hostapp.ui.operations_model import FILTERS, OperationTableModel
from hostapp.ui.operations_pane import SHOWCASE_TOOLS, OperationsPane, make_table
from hostapp.ui.result_view import result_as_text
from hostapp.ui.server_actions import ServerActions
from hostapp.ui.servers_model import TARGET as SERVER_TARGET
from hostapp.ui.servers_model import ServerRole, ServerTableModel
from hostapp.ui.theme import glyph_icon
from hostapp.ui.window_parts import DETAILS_HEIGHT, OUTCOME_NOTICES, TITLE, Summary, arrange_splitter

if TYPE_CHECKING:
    from hostapp.ui.call_dialog import StartCallDialog
    from hostapp.ui.resources_dialog import ResourcesDialog
    from hostapp.ui.server_log_dialog import ServerLogDialog
    from hostapp.ui.skills_dialog import SkillsDialog

log = logging.getLogger(__name__)

RESOURCES = Path(__file__).resolve().parent.parent.parent / "resources"


def app_icon() -> QIcon:
    """The application icon (from resources/, or the style's generic one when not installed)."""
    for name in ("hostapp.svg", "hostapp.png"):
        path = RESOURCES / name
        if path.is_file():
            return QIcon(str(path))
    from PySide6.QtWidgets import QApplication

    return QApplication.style().standardIcon(QStyle.StandardPixmap.SP_ComputerIcon)


class MainWindow(QMainWindow):
    """Servers on top, operations in the middle, details of the selected one below.

    Signals:
        quitRequested(): the person closed the window or chose Quit; the app shuts down.
        notified(str, str): a desktop notification was raised (title, text).
    """

    quitRequested = Signal()
    notified = Signal(str, str)

    def __init__(self, engine: EngineApi, signals: EngineSignals, settings: QSettings, home: Path) -> None:
        super().__init__()
        self.engine = engine
        self.signals = signals
        self.settings = settings
        self.home = Path(home)
        self._tasks: set[asyncio.Task] = set()
        self._last_status: dict[str, str] = {}
        self._closing = False
        self._file_dialog: QFileDialog | None = None
        # The dialog open right now (None when closed): the window drives it, tests inspect it.
        self.call_dialog: StartCallDialog | None = None
        self.skills_dialog: SkillsDialog | None = None
        self.resources_dialog: ResourcesDialog | None = None
        self.log_dialog: ServerLogDialog | None = None
        # Servers whose last attempt was refused for want of sign-in. Kept while they retry
        # (connecting…), so that the Sign in button does not come and go with each attempt.
        self._needs_sign_in: set[str] = set()
        # Servers whose trouble the person dismissed on the banner: kept out of it until they connect.
        self._trouble_dismissed: set[str] = set()
        self.setObjectName("mainWindow")
        # The application's display name ("hostapp") is added to the title by Qt.
        self.setWindowTitle(TITLE)
        self.setWindowIcon(app_icon())

        self.servers_model = ServerTableModel(self)
        self.server_actions = ServerActions(engine, self.servers_model, self, run=self.run,
                                            selected=self.selected_server)
        self.ops_model = OperationTableModel(engine, self)
        self.summary = Summary()
        self.banner = Banner()
        self.details = OperationDetails(self.home / "attachments")
        self.details.estimate = self.ops_model.estimate
        self.details.status = self.ops_model.shown_status
        self.details.enable_app_views(engine)
        self.details.result_view.read_resource = engine.read_resource
        self.elicitations = ElicitationQueue(self._answer_question, self._operation_title, self,
                                             draft=lambda request_id: self.engine.draft_reply(request_id))

        self._build_actions()
        self._build_layout()
        self._build_tray()
        self._connect()
        self._restore_geometry()
        self._update_actions()

    # -- construction -----------------------------------------------------------------

    def _action(self, text: str, slot: Callable[..., object],
                shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None, *, tip: str = "",
                icon: QStyle.StandardPixmap | QIcon | None = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if tip:
            action.setToolTip(tip + (f" ({action.shortcut().toString(QKeySequence.SequenceFormat.NativeText)})"
                                     if shortcut else ""))
            action.setStatusTip(tip)
        if isinstance(icon, QIcon):
            action.setIcon(icon)
        elif icon is not None:
            action.setIcon(self.style().standardIcon(icon))
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _build_actions(self) -> None:
        S = QStyle.StandardPixmap
        self.start_action = self._action("&Start call…", self.start_call, QKeySequence.StandardKey.New,
                                         tip="Call a tool on a server", icon=glyph_icon("play"))
        self.cancel_action = self._action("&Cancel", self.cancel_selected, "Ctrl+.",
                                          tip="Cancel the selected operation", icon=glyph_icon("stop"))
        self.rerun_action = self._action("&Re-run", self.rerun_selected, "Ctrl+R",
                                         tip="Run the selected call again as a new operation", icon=glyph_icon("rerun"))
        self.copy_action = self._action("C&opy result", self.copy_selected, "Ctrl+Shift+C",
                                        tip="Copy the result of the selected operation")
        self.save_action = self._action("Sa&ve result…", self.save_selected, QKeySequence.StandardKey.Save,
                                        tip="Save the result of the selected operation", icon=S.SP_DialogSaveButton)
        self.add_server_action = self._action("&Add server…", self.server_actions.add_server, "Ctrl+Shift+N",
                                              tip="Configure a new MCP server", icon=S.SP_FileDialogNewFolder)
        self.edit_server_action = self._action("&Edit server…", self.server_actions.edit_server, "F2",
                                               tip="Change the selected server")
        self.remove_server_action = self._action("Re&move server", self.server_actions.remove_server,
                                                 "Ctrl+Shift+Delete",
                                                 tip="Remove the selected server (its history stays)")
        self.reconnect_action = self._action("Re&connect", self.server_actions.reconnect_server, "F5",
                                             tip="Connect the selected server now")
        self.stop_retrying_action = self._action("S&top retrying", self.server_actions.stop_retrying_server,
                                                 tip="Stop connecting to the selected server until Reconnect "
                                                 "(it stays configured)")
        self.sign_in_action = self._action("Sign &in…", self.server_actions.sign_in_server,
                                           tip="Sign in to the selected server in your browser (it asks for it)",
                                           icon=S.SP_DialogYesButton)
        self.sign_out_action = self._action("Sign o&ut", self.server_actions.sign_out_server,
                                            tip="Forget the sign-in of the selected server "
                                            "(its tokens leave the keyring)")
        self.skills_action = self._action("S&kills…", self.show_skills,
                                          tip="The skills the selected server offers; load one to read it")
        self.resources_action = self._action("Re&sources…", self.show_resources,
                                             tip="The resources the selected server offers; read one, "
                                             "or watch it for changes")
        self.log_action = self._action("&Log…", self.show_log,
                                       tip="What the selected server logged, and the level it is asked for")
        self.import_action = self._action("&Import servers…", self.server_actions.import_servers, "Ctrl+I",
                                          tip="Import servers from Claude Desktop, VS Code or Cursor")
        self.quit_action = self._action("&Quit", self.quitRequested.emit, QKeySequence.StandardKey.Quit,
                                        tip="Quit hostapp (running operations resume next time)")
        self.reset_layout_action = self._action("Reset &layout", self.reset_layout,
                                                tip="Give the panes and columns their first sizes back, "
                                                "the selected operation's details shown")
        self.filter_actions: dict[str, QAction] = {}
        for i, (key, (label, _)) in enumerate(FILTERS.items(), start=1):
            self.filter_actions[key] = self._action(f"Show {label.lower()}",
                                                    lambda _=False, k=key: self.set_filter(k), f"Ctrl+{i}")

        menu = self.menuBar()
        file_menu = self.file_menu = menu.addMenu("&File")
        for a in (self.add_server_action, self.import_action):
            file_menu.addAction(a)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        server_menu = menu.addMenu("Se&rver")
        for a in (self.add_server_action, self.edit_server_action, self.reconnect_action, self.stop_retrying_action,
                  self.remove_server_action):
            server_menu.addAction(a)
        server_menu.addSeparator()
        server_menu.addAction(self.sign_in_action)
        server_menu.addAction(self.sign_out_action)
        server_menu.addSeparator()
        server_menu.addAction(self.skills_action)
        server_menu.addAction(self.resources_action)
        server_menu.addAction(self.log_action)
        op_menu = menu.addMenu("&Operation")
        for a in (self.start_action, self.cancel_action, self.rerun_action, self.copy_action, self.save_action):
            op_menu.addAction(a)
        view_menu = menu.addMenu("&View")
        for a in self.filter_actions.values():
            view_menu.addAction(a)
        view_menu.addSeparator()
        view_menu.addAction(self.reset_layout_action)

        toolbar = QToolBar("Main")
        toolbar.setObjectName("mainToolbar")
        toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        toolbar.setMovable(False)
        # Each action has one visible place besides the menus: what concerns the whole
        # window here, a server's actions under the servers, an operation's in its details.
        for a in (self.start_action, self.add_server_action, self.import_action):
            toolbar.addAction(a)
        self.addToolBar(toolbar)

    def _build_layout(self) -> None:
        self.servers_table = make_table(self.servers_model, "Servers")
        header = self.servers_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(SERVER_TARGET, QHeaderView.ResizeMode.Stretch)
        servers_box = QGroupBox("Servers")
        slay = QVBoxLayout(servers_box)
        slay.addWidget(self.servers_table)
        srow = QHBoxLayout()
        self.server_buttons: dict[QAction, QPushButton] = {}
        for action in (self.edit_server_action, self.reconnect_action, self.sign_in_action,
                       self.remove_server_action):
            button = QPushButton(action.text().replace("&", "&"))
            name_as_shown(button, action.toolTip())
            button.clicked.connect(action.trigger)
            action.enabledChanged.connect(button.setEnabled)
            button.setEnabled(action.isEnabled())
            self.server_buttons[action] = button
            srow.addWidget(button)
        srow.addStretch(1)
        slay.addLayout(srow)

        self.ops_pane = OperationsPane(self.ops_model, self.settings)
        self.ops_table = self.ops_pane.table
        self.filter_box = self.ops_pane.filter_box
        self.count_label = self.ops_pane.count_label
        self.statusBar().addPermanentWidget(self.count_label)

        details_box = QGroupBox("Selected operation")
        QVBoxLayout(details_box).addWidget(self.details)

        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.setObjectName("mainSplitter")
        self.servers_box = servers_box
        self.details_box = details_box
        self.layout_balancer = arrange_splitter(self.splitter, servers_box, self.servers_table, self.ops_pane,
                                                details_box)

        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(self.banner)
        lay.addWidget(self.splitter, 1)
        self.setCentralWidget(central)
        self.statusBar().showMessage("Ready")

    def _build_tray(self) -> None:
        self.tray: QSystemTrayIcon | None = None
        if not QSystemTrayIcon.isSystemTrayAvailable():
            return
        self.tray = QSystemTrayIcon(self.windowIcon(), self)
        self.tray.setToolTip(self.windowTitle() or "hostapp")
        menu = QMenu(self)
        menu.addAction("Show hostapp", self.show_normal)
        menu.addAction(self.start_action)
        menu.addSeparator()
        menu.addAction(self.quit_action)
        self.tray.setContextMenu(menu)
        self.tray.activated.connect(self._on_tray_activated)
        self.tray.show()

    def _connect(self) -> None:
        s = self.signals
        s.operationsChanged.connect(self._operations_changed)
        s.operationEvent.connect(self._operation_event)
        s.serverChanged.connect(self._server_changed)
        s.serverRemoved.connect(self._server_removed)
        s.inputRequested.connect(self._input_requested)
        s.inputWithdrawn.connect(self.elicitations.withdraw)
        s.problemReported.connect(self._problem)
        self.banner.dismissed.connect(self._banner_dismissed)
        self.server_actions.changed.connect(self._servers_edited)
        self.server_actions.status.connect(lambda text, ms: self.statusBar().showMessage(text, ms))
        self.ops_table.selectionModel().currentRowChanged.connect(lambda *_: self._selection_changed())
        self.ops_model.modelReset.connect(self._selection_changed)
        # Rows move between "in flight" and "finished": re-check what the actions apply to once the model settled.
        self._actions_timer = QTimer(self)
        self._actions_timer.setSingleShot(True)
        self._actions_timer.setInterval(0)
        self._actions_timer.timeout.connect(self._update_actions)
        for sig in (self.ops_model.dataChanged, self.ops_model.rowsInserted, self.ops_model.rowsRemoved,
                    self.ops_model.layoutChanged):
            sig.connect(self._actions_timer.start)
        self.ops_model.totalChanged.connect(self._update_count)
        self.ops_model.rowsInserted.connect(lambda *_: self._update_count())
        self.ops_model.rowsRemoved.connect(lambda *_: self._update_count())
        self.servers_table.selectionModel().currentRowChanged.connect(lambda *_: self._update_actions())
        self.servers_table.doubleClicked.connect(lambda *_: self.server_actions.edit_server())
        self.filter_box.currentIndexChanged.connect(lambda _: self.set_filter(self.filter_box.currentData()))
        self.details.cancelRequested.connect(lambda _id: self.cancel_selected())
        self.details.rerunRequested.connect(lambda _id: self.rerun_selected())
        self.details.copyRequested.connect(lambda _id: self.copy_selected())
        self.details.saveRequested.connect(lambda _id: self.save_selected())
        self.elicitations.waitingChanged.connect(self._questions_waiting)
        self.ops_pane.questionsRequested.connect(self.elicitations.open_later)
        self.ops_pane.startRequested.connect(self.start_action.trigger)
        self.ops_table.customContextMenuRequested.connect(self._ops_menu)
        self.servers_table.customContextMenuRequested.connect(self._servers_menu)

    def _ops_menu(self, pos: QPoint) -> None:
        menu = QMenu(self)
        for a in (self.cancel_action, self.rerun_action, self.copy_action, self.save_action):
            menu.addAction(a)
        menu.popup(self.ops_table.viewport().mapToGlobal(pos))

    def _servers_menu(self, pos: QPoint) -> None:
        menu = QMenu(self)
        for a in (self.edit_server_action, self.reconnect_action, self.stop_retrying_action, self.sign_in_action,
                  self.sign_out_action, self.skills_action, self.resources_action, self.log_action,
                  self.remove_server_action):
            menu.addAction(a)
        menu.popup(self.servers_table.viewport().mapToGlobal(pos))

    # -- geometry ---------------------------------------------------------------------

    def _restore_geometry(self) -> None:
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        else:
            self.resize(1280, 800)
        state = self.settings.value("window/splitter")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.splitter.restoreState(state)
        # Details the window collapsed (too small then) come back; details the person closed stay closed.
        self.layout_balancer.hidden_by_person = bool(self.settings.value("window/details_hidden", False, type=bool))
        height = self.settings.value("window/details_height", self.layout_balancer.details_height, type=int)
        self.layout_balancer.details_height = height if isinstance(height, int) else DETAILS_HEIGHT
        self.layout_balancer.rebalance()
        columns = self.settings.value("window/operations_columns")
        if isinstance(columns, QByteArray) and not columns.isEmpty() \
                and self.ops_table.horizontalHeader().restoreState(columns):
            self.ops_pane.columns_set_by_person = True
        filter_name = self.settings.value("window/filter", "all")
        if filter_name in FILTERS:
            self.filter_box.setCurrentIndex(list(FILTERS).index(filter_name))

    def reset_layout(self) -> None:
        """View → Reset layout: the panes' and columns' first sizes, the details shown."""
        self.layout_balancer.reset()
        self.ops_pane.columns_set_by_person = False
        self.ops_pane.fit_columns()
        self.statusBar().showMessage("Layout reset", 3000)

    def save_geometry(self) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/splitter", self.splitter.saveState())
        self.settings.setValue("window/details_hidden", self.layout_balancer.hidden_by_person)
        self.settings.setValue("window/details_height", self.layout_balancer.details_height)
        self.settings.setValue("window/operations_columns", self.ops_table.horizontalHeader().saveState())
        self.settings.setValue("window/filter", self.ops_model.filter_name)
        self.settings.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        if self._closing:
            event.accept()
            return
        # The app shuts the engine down first, then closes the window for good.
        event.ignore()
        self.quitRequested.emit()

    @property
    def closing_for_good(self) -> bool:
        """The window closes for real (:meth:`close_for_good`), not to the tray."""
        return self._closing

    def close_for_good(self) -> None:
        self._closing = True
        self.save_geometry()
        self.elicitations.close_all()
        if self.tray is not None:
            self.tray.hide()
        self.close()

    def show_normal(self) -> None:
        self.showNormal()
        self.raise_()
        self.activateWindow()

    def _on_tray_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason == QSystemTrayIcon.ActivationReason.Trigger:
            self.show_normal()

    # -- async plumbing ---------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, Any], what: str) -> asyncio.Task[Any]:
        """Run an engine call in the background; a failure is shown, never raised into Qt."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)

        def done(t: asyncio.Task) -> None:
            self._tasks.discard(t)
            if t.cancelled():
                return
            exc = t.exception()
            if exc is not None:
                log.info("%s failed: %s", what, exc, exc_info=exc)
                self.show_error(f"Could not {what}: {exc}")

        task.add_done_callback(done)
        return task

    def show_error(self, message: str) -> None:
        self.banner.set_message("error", message)
        self.statusBar().showMessage(message, 15000)

    async def load_operations(self) -> None:
        """Fill the operations table from the journal. Needs no started engine: at
        start-up the rows are shown before the keyring is read or any server connected,
        and the engine's restored operations then update them in place."""
        await self.ops_model.reload(self.ops_model.filter_name)
        self._update_summary([op for r in range(self.ops_model.live_count)
                              if (op := self.ops_model.operation(r)) is not None])
        if self.ops_model.rowCount():
            self.ops_table.selectRow(0)
        self._update_count()

    async def load_servers(self) -> None:
        """Fill the servers table and the keyring banner (after ``engine.start()``)."""
        with self.servers_model.reading():
            servers = await self.engine.servers()
            self._needs_sign_in = {s.name for s in servers if s.state == ServerState.NEEDS_SIGN_IN}
            # The row the person selected (not merely the table's current cell, which Qt
            # sets without a selection) is selected again once the rows are read again.
            picked = self.servers_table.selectionModel().selectedRows()
            chosen = self.servers_model.server(picked[0].row()) if picked else None
            self.servers_model.set_servers(servers)
        row = self.servers_model.row_of(chosen.name) if chosen is not None else None
        if row is not None:
            self.servers_table.selectRow(row)
        self._servers_health()
        problem = await self.engine.keyring_problem()
        self.banner.set_message("keyring", f"Keyring unavailable: {problem}" if problem else None)
        self._update_actions()  # Start is possible once a server is listed

    # -- engine events ----------------------------------------------------------------

    def _operations_changed(self, ops: list[OperationView]) -> None:
        self.ops_model.apply_changes(ops)
        self._update_summary(ops)
        shown = self.details.op
        for op in ops:
            if shown is not None and op.id == shown.id:
                self.details.update_operation(op)
            if op.view_of is not None:
                self.details.update_view_call(op)
            self._maybe_notify(op)
        if shown is None and self.ops_model.rowCount() and not self.ops_table.currentIndex().isValid():
            self.ops_table.selectRow(0)
        self._update_actions()

    def _maybe_notify(self, op: OperationView) -> None:
        if op.view_of is not None or (self.details.app_views is not None
                                      and op.id in self.details.app_views.view_calls):
            return  # a call a tool's view made: the view shows its outcome
        before = self._last_status.get(op.id)
        self._last_status[op.id] = op.status
        if before == op.status or (before is None and op.status not in TERMINAL | {OperationStatus.INPUT_REQUIRED}):
            return
        if before is not None and before in TERMINAL:
            return
        tool = op.tool or op.method
        if op.status == OperationStatus.COMPLETED:
            self.notify("Operation finished", f"{tool} on {op.server} finished.")
        elif op.status in (OperationStatus.FAILED, OperationStatus.EXPIRED, OperationStatus.UNKNOWN):
            why = (op.error or {}).get("message") or op.message or ""
            # The outcome's own word: an unknown outcome is not a failure (it may have run).
            title, verb = OUTCOME_NOTICES[op.status]
            self.notify(title, f"{tool} on {op.server} {verb}.", detail=why)
        # "Input needed" is announced with the question itself (see _input_requested).

    def notify(self, title: str, text: str, detail: str = "") -> None:
        """A desktop notification, and the same words in the status bar.

        Some notification servers render markup in the body, so the desktop gets only our own
        sentence with markup characters removed from names; the server's free text
        (``detail``) goes to the status bar, which shows plain text.
        """
        if self.tray is not None and self.tray.supportsMessages():
            self.tray.showMessage(title, re.sub(r"[<>&]", "", text), QSystemTrayIcon.MessageIcon.Information, 8000)
        self.statusBar().showMessage(f"{title}: {text}" + (f" {detail}" if detail else ""), 10000)
        self.notified.emit(title, text)

    def _operation_event(self, op_id: str, kind: str, data: JsonObject) -> None:
        if self.details.op is not None and op_id == self.details.op.id:
            self.details.add_event(kind, data)
        if kind == "log" and not op_id and self.log_dialog is not None:
            self.log_dialog.log_event(data)
        if kind == "resource_updated" and self.resources_dialog is not None:
            self.resources_dialog.resource_updated(str(data.get("server")), str(data.get("uri")))

    def _server_changed(self, server: ServerView) -> None:
        if server.state == ServerState.NEEDS_SIGN_IN:
            self._needs_sign_in.add(server.name)
        elif server.state not in (ServerState.CONNECTING, ServerState.RECONNECTING):
            self._needs_sign_in.discard(server.name)
        if server.state == ServerState.CONNECTED:
            self._trouble_dismissed.discard(server.name)  # its next trouble is news
        self.servers_model.update_server(server)
        self._servers_health()
        self._update_actions()

    def _server_removed(self, name: str) -> None:
        """Removed by any client (this window, the command line): the row goes."""
        self._needs_sign_in.discard(name)
        self._trouble_dismissed.discard(name)
        self.servers_model.remove_server(name)
        self._servers_health()
        self._update_actions()

    def _servers_edited(self) -> None:
        self._servers_health()
        self._update_actions()

    def _servers_in_trouble(self) -> tuple[list[ServerView], list[ServerView]]:
        """(offline, needing sign-in): the servers the banner speaks of."""
        offline, sign_in = [], []
        for s in self.servers_model.servers():
            if s.state == ServerState.OFFLINE:
                offline.append(s)
            elif s.name in self._needs_sign_in:
                sign_in.append(s)
        return offline, sign_in

    def _servers_health(self) -> None:
        self.ops_pane.set_servers([s.name for s in self.servers_model.servers()])
        offline, sign_in = self._servers_in_trouble()
        # A server that keeps failing goes offline anew after every attempt: one the person
        # dismissed stays out of the banner until it has connected (or was removed).
        offline = [s for s in offline if s.name not in self._trouble_dismissed]
        sign_in = [s for s in sign_in if s.name not in self._trouble_dismissed]
        lines = [f"{s.name} is offline" + (f": {s.error}" if s.error else "") +
                 ". hostapp keeps trying; its operations continue once it is back." for s in offline]
        lines += [f"{s.name} needs you to sign in: select it and choose Sign in. Its calls wait until then."
                  for s in sign_in]
        self.banner.set_message("servers", "\n".join(lines) or None)
        if offline:
            names = [s.name for s in offline]
            self.banner.offer("servers", f"Stop retrying {names[0]}" if len(names) == 1 else "Stop retrying all",
                              lambda: self._stop_retrying(names))
        else:
            self.banner.withdraw_offer("servers")
        self.ops_model.set_awaiting_sign_in(self._needs_sign_in & {s.name for s in self.servers_model.servers()})

    def _banner_dismissed(self, keys: list[str]) -> None:
        if "servers" in keys:
            offline, sign_in = self._servers_in_trouble()
            self._trouble_dismissed.update(s.name for s in [*offline, *sign_in])
            self._servers_health()

    def _stop_retrying(self, names: list[str]) -> None:
        """The banner's Stop retrying: the servers it names stay configured, unconnected until Reconnect."""
        async def stop_all() -> None:
            for name in names:
                await self.server_actions.stop_retrying(name)

        self.run(stop_all(), "stop retrying")

    def _problem(self, kind: str, message: str) -> None:
        if kind == "keyring":  # an empty message: the keyring works again
            self.banner.set_message("keyring", f"Keyring unavailable: {message}" if message else None)
        else:
            self.banner.set_message(kind, message)

    def _input_requested(self, request: InputRequest) -> None:
        if self.elicitations.holds(request.id):
            return
        title = self._operation_title(request.operation_id) or "an operation"
        self.notify("Input needed", f"{request.server} asks for your input about {title}.", detail=request.message)
        self.elicitations.enqueue(request)

    def _answer_question(self, request_id: str, answer: JsonObject) -> None:
        self.run(self.engine.answer_input(request_id, answer), "answer the question")

    def _operation_title(self, op_id: str | None) -> str | None:
        if op_id is None:
            return None
        row = self.ops_model.row_of(op_id)
        op = self.ops_model.operation(row) if row is not None else None
        return f"{op.tool or op.method} (#{op.id[:6]})" if op else f"operation #{op_id[:6]}"

    def _questions_waiting(self, count: int) -> None:
        self.ops_pane.set_questions(count)
        self._update_summary()

    def _update_summary(self, ops: list[OperationView] | None = None) -> None:
        """N running, M need you: in the title (what task bars show), and the tray's tooltip."""
        self.summary.update(ops or [])
        text = self.summary.text()
        self.setWindowTitle(f"{text} — {TITLE}" if text else TITLE)
        if self.tray is not None:
            self.tray.setToolTip(f"hostapp: {text}" if text else "hostapp: nothing running")

    # -- selection --------------------------------------------------------------------

    def selected_operation(self) -> OperationView | None:
        return self.ops_pane.selected()

    def select_operation(self, op_id: str) -> bool:
        return self.ops_pane.select(op_id)

    def _server_view(self, name: str) -> ServerView | None:
        row = self.servers_model.row_of(name)
        return self.servers_model.server(row) if row is not None else None

    def selected_server(self) -> ServerView | None:
        index = self.servers_table.currentIndex()
        return index.data(ServerRole) if index.isValid() else None

    def _selection_changed(self) -> None:
        op = self.selected_operation()
        if op is None:
            self.details.show_operation(None)
        elif self.details.op is None or self.details.op.id != op.id:
            self.details.show_operation(op)
            self.run(self._load_timeline(op.id), "read the timeline")
        self._update_actions()

    async def _load_timeline(self, op_id: str) -> None:
        events = await self.engine.events(op_id)
        if self.details.op is not None and self.details.op.id == op_id:
            self.details.show_operation(self.details.op, events)
        try:
            calls = await self.engine.operations(view_of=op_id, limit=VIEW_CALLS_SHOWN)
            count = await self.engine.count_operations(view_of=op_id)
        except EngineError:
            return  # an agent too old to tell a view's calls: they are rows of the list
        self.details.show_view_calls(op_id, calls, count)

    def _update_actions(self) -> None:
        op = self.selected_operation()
        server = self.selected_server()
        outcome = op is not None and (op.result is not None or op.error is not None)
        self.cancel_action.setEnabled(op is not None and op.in_flight)
        # A call of a removed server cannot run again until the server is added again.
        self.rerun_action.setEnabled(op is not None and not op.in_flight and op.tool is not None
                                     and self.servers_model.row_of(op.server) is not None)
        self.rerun_action.setStatusTip("Its server was removed: add it again to re-run the call"
                                       if op is not None and self.servers_model.row_of(op.server) is None
                                       else "Run the selected call again as a new operation")
        self.details.rerun_button.setEnabled(self.rerun_action.isEnabled())
        self.copy_action.setEnabled(outcome)
        self.save_action.setEnabled(outcome)
        self.start_action.setEnabled(bool(self.servers_model.rowCount()))
        for a in (self.edit_server_action, self.remove_server_action, self.reconnect_action, self.log_action):
            a.setEnabled(server is not None)
        # Skills need a server that is there and declared the extension (SEP-2640).
        offers_skills = server is not None and server.state == ServerState.CONNECTED \
            and SKILLS_EXTENSION in server.extensions
        self.skills_action.setEnabled(offers_skills)
        self.skills_action.setStatusTip(
            "The skills the selected server offers; load one to read it" if offers_skills or server is None
            else f"{server.name} is not connected" if server.state != ServerState.CONNECTED
            else f"{server.name} does not offer skills (it does not declare the skills extension)")
        self.resources_action.setEnabled(server is not None and server.state == ServerState.CONNECTED)
        self.resources_action.setStatusTip(
            "The resources the selected server offers; read one, or watch it for changes"
            if server is None or server.state == ServerState.CONNECTED else f"{server.name} is not connected")
        self.stop_retrying_action.setEnabled(server is not None and server.state in (
            ServerState.OFFLINE, ServerState.RECONNECTING, ServerState.CONNECTING, ServerState.NEEDS_SIGN_IN))
        signing_in = server is not None and server.name in self.server_actions.signing_in
        self.sign_in_action.setEnabled(server is not None and server.name in self._needs_sign_in and not signing_in)
        # Only where there is a sign-in to forget (not on a server that never signs in).
        self.sign_out_action.setEnabled(server is not None and server.signs_in and not signing_in)

    def _update_count(self, *_: Any) -> None:
        total = self.ops_model.total
        shown = self.ops_model.rowCount()
        self.count_label.setText(f"{total:,} operation{'s' if total != 1 else ''}" +
                                 (f" ({shown:,} loaded)" if shown < total else ""))

    def set_filter(self, name: str) -> None:
        if name not in FILTERS:
            return
        if self.filter_box.currentData() != name:
            self.filter_box.setCurrentIndex(list(FILTERS).index(name))  # comes back here
            return
        if name != self.ops_model.filter_name or not self.ops_model.rowCount():
            self.run(self.ops_model.reload(name), "read the operations")

    # -- operation actions ------------------------------------------------------------

    def start_call(self) -> None:
        self.run(self._start_call(), "start the call")

    async def _start_call(self, server: str | None = None, tool: str | None = None) -> OperationView | None:
        names = [s.name for s in self.servers_model.servers()]
        current = self.selected_server()
        default_server = server or (current.name if current else None)
        # Imported on first use: the form builder (jsonschema and its format checkers) is a
        # sixth of the app's import time, and the window is shown without it.
        from hostapp.ui.call_dialog import StartCallDialog

        if tool is None and not self.settings.value("call/last_server"):
            # A first call: the lab's showcase tool rather than whichever it lists first.
            showcase = SHOWCASE_TOOLS.get(default_server or (names[0] if names else ""))
            tool = showcase[0][0] if showcase else None
        dialog = StartCallDialog(names, self.engine.list_tools, self, server=default_server, tool=tool,
                                 memory=self.settings, server_view=self._server_view,
                                 reconnect=self.engine.reconnect)
        self.call_dialog = dialog
        try:
            if await run_dialog(dialog) != StartCallDialog.DialogCode.Accepted:
                return None
            assert dialog.server is not None and dialog.tool is not None  # set when it was accepted
            op = await self.engine.start_call(dialog.server, dialog.tool, dialog.arguments)
        finally:
            self.call_dialog = None
            dialog.deleteLater()
        self.ops_model.apply_changes([op])
        self.select_operation(op.id)
        self.statusBar().showMessage(f"Started {op.tool} on {op.server}", 5000)
        return op

    def show_skills(self) -> None:
        server = self.selected_server()
        if server is not None:
            self.run(self._show_skills(server.name), "show the skills")

    async def _show_skills(self, server: str) -> None:
        # Imported on first use, like the call dialog.
        from hostapp.ui.skills_dialog import SkillsDialog

        dialog = SkillsDialog(server, self.engine.list_skills, self.engine.load_skill, self)
        self.skills_dialog = dialog
        try:
            await run_dialog(dialog)
        finally:
            self.skills_dialog = None
            dialog.deleteLater()

    def show_resources(self) -> None:
        server = self.selected_server()
        if server is not None:
            self.run(self._show_resources(server.name), "show the resources")

    async def _show_resources(self, server: str) -> None:
        from hostapp.ui.resources_dialog import ResourcesDialog

        dialog = ResourcesDialog(server, self.engine, self)
        self.resources_dialog = dialog
        try:
            await run_dialog(dialog)
        finally:
            self.resources_dialog = None
            dialog.deleteLater()

    def show_log(self) -> None:
        server = self.selected_server()
        if server is not None:
            self.run(self._show_log(server.name), "show the server's log")

    async def _show_log(self, server: str) -> None:
        from hostapp.ui.server_log_dialog import ServerLogDialog

        dialog = ServerLogDialog(server, self.engine, self)
        self.log_dialog = dialog
        try:
            await run_dialog(dialog)
        finally:
            self.log_dialog = None
            dialog.deleteLater()

    def cancel_selected(self) -> None:
        op = self.selected_operation()
        if op is not None and op.in_flight:
            self.run(self.engine.cancel(op.id), "cancel the operation")
            self.statusBar().showMessage(f"Cancelling {op.tool or op.method}…", 5000)

    def rerun_selected(self) -> None:
        op = self.selected_operation()
        if op is not None and not op.in_flight:
            self.run(self._rerun(op.id), "re-run the call")

    async def _rerun(self, op_id: str) -> None:
        new = await self.engine.rerun(op_id)
        self.ops_model.apply_changes([new])
        self.select_operation(new.id)

    def copy_selected(self) -> None:
        op = self.selected_operation()
        if op is not None:
            QGuiApplication.clipboard().setText(result_as_text(op.result, op.error))
            self.statusBar().showMessage("Result copied", 3000)

    def save_selected(self) -> None:
        op = self.selected_operation()
        if op is None or (op.result is None and op.error is None):
            return
        dialog = QFileDialog(self, "Save result")
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setNameFilters(["JSON (*.json)", "Text (*.txt)"])
        dialog.setDefaultSuffix("json")
        dialog.selectFile(f"{op.tool or 'result'}-{op.id[:6]}.json")
        dialog.fileSelected.connect(lambda path, o=op: self.save_result(o, Path(path)))
        self._file_dialog = dialog
        dialog.open()

    def save_result(self, op: OperationView, path: Path) -> None:
        if path.suffix.lower() == ".txt":
            text = result_as_text(op.result, op.error)
        else:
            text = json.dumps({"result": op.result, "error": op.error} if op.error else op.result,
                              ensure_ascii=False, indent=2)
        try:
            path.write_text(text + "\n", encoding="utf-8")
        except OSError as exc:
            self.show_error(f"Could not save the result: {exc.strerror or exc}")
            return
        self.statusBar().showMessage(f"Saved to {path}", 5000)
