"""The window as a client of the background agent: closing, quitting, coming back.

The agent carries the work, so the window's life is the person's business only:

- ✕ hides the window to the tray where there is one (the first time, a note says the work
  goes on and how to quit); without a tray it means Quit.
- Quit (menu, tray menu, Ctrl+Q) asks only while operations are running: keep them
  running in the background (the default) or stop everything (the agent too), with the
  operations that survive a stop listed apart from those that do not.
- Another launch of ``hostapp`` brings this window forward, at an operation when it names
  one (a notification's action does).
- The agent's loss is said in the banner, and once a new agent answers, the window reads
  its state again (rows, servers, questions) and keeps its selection.
- "Start hostapp at login" reflects and changes the login entry.

Nothing here knows how the agent is reached or how the login entry is written: the
composition root (:mod:`hostapp.app`) passes what it needs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QSystemTrayIcon

from hostapp.engine.api import EngineApi, EngineError
from hostapp.ui.agent_link import LOST, RECONNECTED, RESUMED, STOPPED, UNAVAILABLE, AgentLink
from hostapp.ui.async_dialog import run_dialog
from hostapp.ui.quit_dialog import KEEP, STOP, QuitDialog

if TYPE_CHECKING:
    from hostapp.ui.main_window import MainWindow

log = logging.getLogger(__name__)

#: Settings key: the note about closing to the tray was shown once.
TRAY_NOTE_KEY = "window/tray_note_shown"
TRAY_NOTE = ("hostapp is still running in the background: your operations go on, and you are told when "
             "they finish. To quit, choose Quit in this icon's menu (or Ctrl+Q in the window).")


class AutostartControl(Protocol):
    """The login entry, as the window sees it: ``(enabled, where)`` for each."""

    def status(self) -> tuple[bool, str]: ...

    def set_enabled(self, enabled: bool) -> tuple[bool, str]: ...


class WindowLifecycle(QObject):
    """Close, quit, bring forward and reconnect for one :class:`MainWindow`.

    Signals:
        quitConfirmed(bool): the window is to quit; True when everything is to stop (the agent too).
        noteShown(str): the one-time tray note was shown.
    """

    quitConfirmed = Signal(bool)
    noteShown = Signal(str)

    def __init__(self, window: MainWindow, engine: EngineApi, settings: QSettings, *,
                 autostart: AutostartControl | None = None) -> None:
        super().__init__(window)
        self.window = window
        self.engine = engine
        self.settings = settings
        self.autostart = autostart
        self.quitting = False
        self.quit_dialog: QuitDialog | None = None
        self._asking: asyncio.Task[None] | None = None
        self.autostart_action: QAction | None = None
        window.installEventFilter(self)
        window.quit_action.setToolTip("Quit hostapp (asks first while operations are running: they can go "
                                      "on in the background)")
        if window.tray is not None:
            window.tray.messageClicked.connect(self.bring_forward)
        if autostart is not None:
            self._add_autostart_action(autostart)

    # -- ✕ ---------------------------------------------------------------------------

    def has_tray(self) -> bool:
        return self.window.tray is not None and QSystemTrayIcon.isSystemTrayAvailable()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is self.window and event.type() == QEvent.Type.Close and not self.quitting
                and not self.window.closing_for_good):
            event.ignore()
            if self.has_tray():
                self.hide_to_tray()
            else:
                self.request_quit()
            return True
        return super().eventFilter(watched, event)

    def hide_to_tray(self) -> None:
        self.window.save_geometry()
        self.window.hide()
        if self.settings.value(TRAY_NOTE_KEY, False, type=bool):
            return
        self.settings.setValue(TRAY_NOTE_KEY, True)
        self.settings.sync()
        tray = self.window.tray
        if tray is not None:
            tray.showMessage("hostapp keeps running", TRAY_NOTE, QSystemTrayIcon.MessageIcon.Information, 15000)
        self.noteShown.emit(TRAY_NOTE)

    # -- Quit ------------------------------------------------------------------------

    def request_quit(self) -> None:
        """Quit, asking first while operations are running."""
        if self.quitting:
            return
        if self._asking is not None and not self._asking.done():
            if self.quit_dialog is not None:
                self.quit_dialog.raise_()
                self.quit_dialog.activateWindow()
            return
        self._asking = asyncio.ensure_future(self._quit())

    async def _quit(self) -> None:
        try:
            running = await asyncio.wait_for(self.engine.unfinished_operations(), 10)
        except (EngineError, TimeoutError) as exc:  # no agent to ask: nothing of ours runs here
            log.info("quitting without asking: %s", exc)
            running = []
        if not running:
            self._confirm(False)
            return
        dialog = QuitDialog(running, self.window if self.window.isVisible() else None)
        self.quit_dialog = dialog
        try:
            await run_dialog(dialog)
            choice = dialog.choice
        finally:
            self.quit_dialog = None
            dialog.deleteLater()
        if choice in (KEEP, STOP):
            self._confirm(choice == STOP)

    def _confirm(self, stop_everything: bool) -> None:
        self.quitting = True
        self.quitConfirmed.emit(stop_everything)

    # -- another launch --------------------------------------------------------------

    def bring_forward(self, op_id: str | None = None) -> None:
        """Show the window on top (from the tray, un-minimized), at ``op_id`` when given."""
        w = self.window
        w.setWindowState((w.windowState() & ~Qt.WindowState.WindowMinimized) | Qt.WindowState.WindowActive)
        w.show()
        w.raise_()
        w.activateWindow()
        if op_id:
            w.run(self.show_operation(op_id), "show the operation")

    async def show_operation(self, op_id: str) -> None:
        """Select ``op_id`` in the operations table (the filter widens to All when it hides it)."""
        w = self.window
        op = await self.engine.operation(op_id)
        if op is None:
            w.show_error(f"There is no operation {op_id} in this home.")
            return
        if not w.ops_model.matches(op):
            w.filter_box.blockSignals(True)
            w.filter_box.setCurrentIndex(w.filter_box.findData("all"))
            w.filter_box.blockSignals(False)
            await w.ops_model.reload("all")
        w.ops_model.apply_changes([op])  # an old one beyond the first page of history
        row = w.ops_model.row_of(op_id)
        if row is not None:
            w.ops_table.selectRow(row)
            w.ops_table.scrollTo(w.ops_model.index(row, 0))

    # -- the agent's loss ------------------------------------------------------------

    def agent_changed(self, state: str, message: str) -> None:
        """The link to the agent changed (:mod:`hostapp.ui.agent_link`'s states)."""
        w = self.window
        if state in (LOST, UNAVAILABLE, STOPPED):
            # The rows' states were the agent's: without it nothing holds a connection,
            # and nothing carries the work.
            why = {LOST: "agent restarting", UNAVAILABLE: "agent unreachable", STOPPED: "agent stopped"}[state]
            w.servers_model.set_agent_away(why)
            w.ops_model.set_paused(why)
            w.banner.set_message("agent", message)
            w.statusBar().showMessage(message, 15000)
            if state == STOPPED and isinstance(self.engine, AgentLink):
                w.banner.offer("agent", "Start agent", self.engine.restart)
            return
        w.banner.set_message("agent", None)
        w.ops_model.set_paused(None)  # the new agent's views come with the reload below
        if state == RESUMED:
            # The same agent, and every event missed meanwhile came again: nothing to read.
            w.servers_model.set_agent_away(None)
            w.statusBar().showMessage("Connected to the background agent again.", 10000)
        elif state == RECONNECTED:
            w.statusBar().showMessage("Connected to the background agent again.", 10000)
            w.run(self.refresh(), "read the operations again")

    async def refresh(self) -> None:
        """Read what the new agent carries; the filter stays, and so does the selection (the
        operations pane chooses it again after the reload's reset)."""
        w = self.window
        await w.ops_model.reload()
        await w.load_servers()
        w.elicitations.close_all()  # the questions of the agent that died; the new one asks again
        for question in await self.engine.open_questions():
            w.signals.input_requested(question)

    # -- start at login --------------------------------------------------------------

    def _add_autostart_action(self, control: AutostartControl) -> None:
        action = QAction("Start hostapp at &login", self)
        action.setCheckable(True)
        action.setObjectName("autostartAction")
        self.autostart_action = action
        self._show_autostart(*self._read_autostart(control))
        action.toggled.connect(self._autostart_toggled)
        menu = self.window.file_menu
        menu.insertAction(self.window.quit_action, action)
        menu.insertSeparator(self.window.quit_action)
        menu.aboutToShow.connect(lambda: self._show_autostart(*self._read_autostart(control)))

    def _read_autostart(self, control: AutostartControl) -> tuple[bool, str]:
        try:
            return control.status()
        except OSError as exc:
            return False, f"unreadable: {exc.strerror or exc}"

    def _show_autostart(self, enabled: bool, where: str) -> None:
        action = self.autostart_action
        assert action is not None
        action.blockSignals(True)
        action.setChecked(enabled)
        action.blockSignals(False)
        tip = ("The background agent starts when you log in, and resumes unfinished work after a restart "
               f"({where})")
        action.setToolTip(tip)
        action.setStatusTip(tip)

    def _autostart_toggled(self, enabled: bool) -> None:
        assert self.autostart is not None
        try:
            state = self.autostart.set_enabled(enabled)
        except OSError as exc:
            self.window.show_error(f"Could not change the login entry: {exc.strerror or exc}")
            state = self._read_autostart(self.autostart)
        self._show_autostart(*state)
        self.window.statusBar().showMessage(
            ("hostapp starts at login" if state[0] else "hostapp no longer starts at login") + f" ({state[1]})",
            8000)
