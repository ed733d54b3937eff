"""What the window does to servers: add, edit, remove, import, reconnect, sign in and out.

The window owns the actions (menus, buttons, shortcuts) and the servers table; this object
carries them out through the engine's facade, opening the server and import dialogs as
awaitable dialogs. Secret values the person typed go to the engine apart from the
configuration, and from there to the keyring only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QMessageBox, QWidget

from hostapp.engine.api import IN_FLIGHT, EngineApi, OperationStatus, OperationView, ServerView
from hostapp.protocol.shown_text import reveal_reordering
from hostapp.ui.async_dialog import plain_question, run_dialog
from hostapp.ui.config_import import ImportedServer
from hostapp.ui.server_dialog import ImportDialog, ServerDialog, ServerSettings
from hostapp.ui.servers_model import ServerTableModel

#: How long a sign-in waits for the browser to come back before it gives up.
SIGN_IN_TIMEOUT_SECONDS = 300.0

#: Runs an engine call in the background and shows its failure (MainWindow.run).
Runner = Callable[[Coroutine[Any, Any, Any], str], "asyncio.Task[Any]"]


class ServerActions(QObject):
    """The server actions of the main window.

    Signals:
        changed(): the configured servers or a sign-in under way changed; the window
            re-checks its banner and which actions apply.
        status(str, int): a line for the status bar, and how long to show it (ms; 0: until replaced).
    """

    changed = Signal()
    status = Signal(str, int)

    def __init__(self, engine: EngineApi, servers_model: ServerTableModel, parent: QWidget, *,
                 run: Runner, selected: Callable[[], ServerView | None]) -> None:
        super().__init__(parent)
        self.engine = engine
        self.servers_model = servers_model
        self._parent = parent
        self._run = run
        self._selected = selected
        # The dialogs open right now (None when closed): the window drives them, tests inspect them.
        self.server_dialog: ServerDialog | None = None
        self.import_dialog: ImportDialog | None = None
        self.confirm_box: QMessageBox | None = None
        # How a sign-in's authorization page is shown: the person's browser.
        self.open_url: Callable[[str], object] = lambda url: QDesktopServices.openUrl(QUrl(url))
        #: Servers with a sign-in under way (one at a time per server).
        self.signing_in: set[str] = set()

    def _taken_names(self) -> set[str]:
        return {s.name for s in self.servers_model.servers()}

    # -- add, edit, remove ------------------------------------------------------------

    def add_server(self) -> None:
        self._run(self.edit(None), "add the server")

    def edit_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.edit(server.name), "change the server")

    async def edit(self, name: str | None, imported: ImportedServer | None = None) -> None:
        """Open the server dialog (for ``name``, or a new server) and save what it produced."""
        existing = await self.engine.server_config(name) if name else None
        dialog = ServerDialog(self._parent, existing=existing, taken_names=self._taken_names(),
                              check=self.engine.check_server)
        if imported is not None:
            dialog.fill_imported(imported)
        self.server_dialog = dialog
        try:
            if await run_dialog(dialog) != ServerDialog.DialogCode.Accepted or dialog.result_settings is None:
                return
            await self.save(dialog.result_settings, replacing=name)
            saved = dialog.result_settings.name
            if dialog.tested is None:
                self.status.emit(f"Saved {saved} without a connection test: hostapp connects to it now, "
                                 "and its row says how that goes", 10000)
            elif dialog.tested is False:
                self.status.emit(f"Saved {saved} although its connection test failed: hostapp keeps trying "
                                 "to connect", 10000)
            else:
                self.status.emit(f"Saved {saved} (its connection test succeeded)", 5000)
        finally:
            self.server_dialog = None
            dialog.deleteLater()

    async def save(self, settings: ServerSettings, replacing: str | None = None) -> None:
        cfg = settings.to_config()
        if replacing is not None and replacing == settings.name:
            await self.engine.update_server(cfg, settings.secrets)
        elif replacing is not None:
            # Renamed: the engine carries the kept secret values over to the new name.
            await self.engine.replace_server(replacing, cfg, settings.secrets)
            self.servers_model.remove_server(replacing)
        else:
            await self.engine.add_server(cfg, settings.secrets)
        with self.servers_model.reading():
            self.servers_model.set_servers(await self.engine.servers())
        self.changed.emit()

    def remove_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.remove(server.name), "remove the server")

    async def remove(self, name: str) -> bool:
        """Remove a server; when operations run on it, only once the person agreed to what
        happens to them (the engine ends them: see hostapp.engine.accounts.retire_operations)."""
        running = [op for op in await self.engine.operations(set(IN_FLIGHT), limit=100_000) if op.server == name]
        if running and not await self._confirm_removal(name, running):
            return False
        await self.engine.remove_server(name)
        self.servers_model.remove_server(name)
        self.changed.emit()
        ended = f"; {len(running)} operation{'s' if len(running) != 1 else ''} ended" if running else ""
        self.status.emit(f"Removed {name}{ended}; its operations stay in the history", 5000)
        return True

    async def _confirm_removal(self, name: str, running: list[OperationView]) -> bool:
        n = len(running)
        unsent = sum(1 for op in running if op.status == OperationStatus.PENDING)
        box = QMessageBox(QMessageBox.Icon.Warning, "Remove server",
                          f"{n} operation{'s are' if n != 1 else ' is'} running on {name}.",
                          QMessageBox.StandardButton.Cancel, self._parent)
        words = [f"If you remove {name}, hostapp stops following "
                 f"{'them' if n != 1 else 'it'}: a call in progress ends as “unknown”, because hostapp can "
                 "no longer learn its outcome (the server may still finish it)."]
        if unsent:
            words.append(f"{unsent} not sent yet will fail without running.")
        words.append("They stay in the history; to re-run them, add the server again.")
        box.setInformativeText(" ".join(words))
        box.setTextFormat(Qt.TextFormat.PlainText)
        remove = box.addButton("Remove and end them", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        self.confirm_box = box
        try:
            await run_dialog(box)
            return box.clickedButton() is remove
        finally:
            self.confirm_box = None
            box.deleteLater()

    def reconnect_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.engine.reconnect(server.name), "reconnect")

    def stop_retrying_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.stop_retrying(server.name), f"stop retrying {server.name}")

    async def stop_retrying(self, name: str) -> None:
        """Keep the server configured but stop connecting to it, until Reconnect."""
        await self.engine.stop_retrying(name)
        self.changed.emit()
        self.status.emit(f"Stopped retrying {name}; choose Reconnect to try again", 5000)

    # -- sign in and out --------------------------------------------------------------

    def sign_in_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.sign_in(server.name), f"sign in to {server.name}")

    async def sign_in(self, name: str) -> None:
        """Sign in to an HTTP server in the browser (OAuth), then connect it with the new tokens.

        Calls already started on the server wait for its next connection, so they go on
        from here.
        """
        cfg = await self.engine.server_config(name)
        if cfg is None or cfg.transport != "http" or not cfg.url:
            raise ValueError(f"{name} is not an HTTP server")
        self.signing_in.add(name)
        self.changed.emit()
        self.status.emit(f"Signing in to {name}: continue in your browser…", 0)
        try:
            url = await self.engine.begin_sign_in(name, timeout=SIGN_IN_TIMEOUT_SECONDS)
            if url:
                if not await self.confirm_sign_in_address(name, url):
                    self.status.emit(f"Sign-in to {name} cancelled", 5000)
                    return
                self.open_url(url)
            await self.engine.finish_sign_in(name)
        finally:
            self.signing_in.discard(name)
            self.changed.emit()
        self.status.emit(f"Signed in to {name}", 5000)
        await self.engine.reconnect(name)

    async def confirm_sign_in_address(self, name: str, url: str) -> bool:
        """Show the authorization address the server's metadata named before the browser
        opens it; only ``http`` and ``https`` addresses are ever handed to the desktop."""
        target = QUrl(url)
        if target.scheme().lower() not in ("http", "https") or not target.host():
            raise ValueError(f"the sign-in address for {name} is not a web address; it was not opened")
        box = plain_question("signInAddress", QMessageBox.Icon.Question, f"Sign in to {name}",
                             f"To sign in to {name}, hostapp opens this address in your browser. "
                             f"It is on {target.host(QUrl.ComponentFormattingOption.FullyEncoded)}:\n\n"
                             f"{reveal_reordering(url)}",
                             QMessageBox.StandardButton.Open | QMessageBox.StandardButton.Cancel,
                             QMessageBox.StandardButton.Open, self._parent)
        self.confirm_box = box
        try:
            return await run_dialog(box) == QMessageBox.StandardButton.Open.value
        finally:
            self.confirm_box = None
            box.deleteLater()

    def sign_out_server(self) -> None:
        server = self._selected()
        if server is not None:
            self._run(self.sign_out(server.name), f"sign out of {server.name}")

    async def sign_out(self, name: str) -> None:
        """Forget the server's tokens; its next connection asks for sign-in again."""
        await self.engine.sign_out(name)
        self.status.emit(f"Signed out of {name}", 5000)
        await self.engine.reconnect(name)

    # -- import -----------------------------------------------------------------------

    def import_servers(self) -> None:
        self._run(self.import_from(), "import servers")

    async def import_from(self, dialog: ImportDialog | None = None) -> int:
        """Let the person pick servers configured in other clients; add the chosen ones."""
        dialog = dialog or ImportDialog(self._parent, taken_names=self._taken_names())
        self.import_dialog = dialog
        try:
            if await run_dialog(dialog) != ImportDialog.DialogCode.Accepted:
                return 0
            chosen = dialog.chosen()
        finally:
            self.import_dialog = None
            dialog.deleteLater()
        added = 0
        for imported in chosen:
            await self.save(ServerSettings.from_imported(imported))
            added += 1
        self.status.emit(f"Imported {added} server{'s' if added != 1 else ''}", 5000)
        return added
