"""Dialogs to add or edit a server and to import servers from other MCP clients.

A value marked secret (an API key in the environment, an ``Authorization`` header) is
returned apart from the configuration so the engine puts it in the keyring; the journal
only ever sees a reference.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Awaitable, Callable, Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QListWidget,
    QPushButton,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine import api
from hostapp.protocol.roots import normalize_root
from hostapp.ui.accessible import name_as_shown
from hostapp.ui.config_import import ImportedServer, known_config_files, read_config
from hostapp.ui.result_view import plain_label
from hostapp.ui.sign_in_form import SignInForm

if TYPE_CHECKING:
    from hostapp.engine.api import ServerConfig

#: Connects once with unsaved settings (the engine's ``check_server``).
Checker = Callable[["ServerConfig", dict[str, dict[str, str]]], Awaitable[dict[str, Any]]]

#: Shown in place of a secret value already in the keyring.
KEPT_IN_KEYRING = "(kept in the keyring; type to replace)"


@dataclass
class ServerSettings:
    """What the server dialog produced: the configuration fields and the secret values."""

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=lambda: {"env": {}, "headers": {}})
    kept_secrets: dict[str, dict[str, str]] = field(default_factory=lambda: {"env": {}, "headers": {}})
    #: How an HTTP server signs in (``ServerConfig.auth``; its secrets are in ``secrets["credentials"]``).
    auth: dict[str, Any] | None = None
    #: A revision the configuration pins (set by the command line; the dialog keeps it).
    protocol_version: str | None = None
    #: The folders the server is given (MCP roots): absolute, resolved paths.
    roots: list[str] = field(default_factory=list)
    #: The log level the server is asked for (set in its Log… view; the dialog keeps it).
    log_level: str | None = None

    def to_config(self) -> ServerConfig:
        """The server's definition for the engine (secret references are filled in by the engine)."""
        return api.ServerConfig(name=self.name, transport=self.transport, url=self.url, headers=dict(self.headers),
                                secret_headers=dict(self.kept_secrets["headers"]), command=self.command,
                                args=list(self.args), env=dict(self.env), secret_env=dict(self.kept_secrets["env"]),
                                protocol_version=self.protocol_version, roots=list(self.roots),
                                log_level=self.log_level,
                                auth=dict(self.auth) if self.auth and self.transport == "http" else None)

    @classmethod
    def from_imported(cls, s: ImportedServer) -> ServerSettings:
        env, headers, secrets = s.split_secrets()
        return cls(name=s.name, transport=s.transport, command=s.command, args=list(s.args), env=env,
                   url=s.url, headers=headers, secrets=secrets)


class PairsTable(QTableWidget):
    """Name / value / secret rows (environment variables or HTTP headers)."""

    def __init__(self, what: str, parent: QWidget | None = None) -> None:
        super().__init__(0, 3, parent)
        self.what = what
        self.setHorizontalHeaderLabels(["Name", "Value", "Secret"])
        self.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setVisible(False)
        self.setAccessibleName(what)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setMinimumHeight(110)

    def add_row(self, name: str = "", value: str = "", secret: bool = False, kept_ref: str | None = None) -> None:
        row = self.rowCount()
        self.insertRow(row)
        self.setItem(row, 0, QTableWidgetItem(name))
        value_edit = QLineEdit(value)
        value_edit.setAccessibleName(f"{self.what} value")
        if kept_ref is not None:
            value_edit.setPlaceholderText(KEPT_IN_KEYRING)
            value_edit.setProperty("kept_ref", kept_ref)
        self.setCellWidget(row, 1, value_edit)
        check = QCheckBox()
        check.setAccessibleName(f"{self.what} value is secret")
        check.setChecked(secret)
        check.toggled.connect(lambda on, e=value_edit: e.setEchoMode(
            QLineEdit.EchoMode.Password if on else QLineEdit.EchoMode.Normal))
        value_edit.setEchoMode(QLineEdit.EchoMode.Password if secret else QLineEdit.EchoMode.Normal)
        self.setCellWidget(row, 2, check)

    def remove_selected(self) -> None:
        for row in sorted({i.row() for i in self.selectedIndexes()}, reverse=True):
            self.removeRow(row)

    def values(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """(plain values, new secret values, secret references kept unchanged)."""
        plain: dict[str, str] = {}
        secret: dict[str, str] = {}
        kept: dict[str, str] = {}
        for row in range(self.rowCount()):
            item = self.item(row, 0)
            name = item.text().strip() if item else ""
            if not name:
                continue
            edit = self.cellWidget(row, 1)
            check = self.cellWidget(row, 2)
            assert isinstance(edit, QLineEdit) and isinstance(check, QCheckBox)  # as add_row made them
            is_secret = check.isChecked()
            ref = edit.property("kept_ref")
            if is_secret and ref and not edit.text():
                kept[name] = ref
            elif is_secret:
                secret[name] = edit.text()
            else:
                plain[name] = edit.text()
        return plain, secret, kept


#: What the dialog says of settings no connection test has tried.
NOT_TESTED = "Not tested yet: OK saves these settings without trying them; Test connection tries them first."


class ServerDialog(QDialog):
    """Add or edit one server (stdio command or Streamable HTTP URL)."""

    def __init__(self, parent: QWidget | None = None, *, existing: ServerConfig | None = None,
                 taken_names: Set[str] = frozenset(), check: Checker | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit server" if existing else "Add server")
        self.taken_names = set(taken_names) - ({existing.name} if existing else set())
        self.result_settings: ServerSettings | None = None
        self._existing = existing
        self._check = check
        self._check_task: asyncio.Task[None] | None = None

        self.name_edit = QLineEdit()
        self.name_edit.setAccessibleName("Server name")
        self.transport = QComboBox()
        self.transport.addItem("Local program (stdio)", "stdio")
        self.transport.addItem("Remote (Streamable HTTP)", "http")
        self.transport.setAccessibleName("Transport")

        stdio = QWidget()
        sform = QFormLayout(stdio)
        self.command_edit = QLineEdit()
        self.command_edit.setAccessibleName("Command")
        self.command_edit.setPlaceholderText("npx, uvx, python, /path/to/server …")
        self.args_edit = QLineEdit()
        self.args_edit.setAccessibleName("Arguments")
        self.args_edit.setPlaceholderText("arguments, separated by spaces (quote those with spaces)")
        self.env_table = PairsTable("Environment variable")
        sform.addRow("&Command:", self.command_edit)
        sform.addRow("&Arguments:", self.args_edit)
        sform.addRow("&Environment:", self._with_buttons(self.env_table))

        http = QWidget()
        hform = QFormLayout(http)
        self.url_edit = QLineEdit()
        self.url_edit.setAccessibleName("Server URL")
        self.url_edit.setPlaceholderText("https://example.com/mcp")
        self.headers_table = PairsTable("HTTP header")
        self.sign_in = SignInForm()
        self.http_tabs = QTabWidget()
        self.http_tabs.setAccessibleName("HTTP settings")
        self.http_tabs.addTab(self._with_buttons(self.headers_table), "&Headers")
        self.http_tabs.addTab(self.sign_in, "S&ign-in")
        hform.addRow("&URL:", self.url_edit)
        hform.addRow(self.http_tabs)

        self.roots_list = QListWidget()
        self.roots_list.setAccessibleName("Folders the server may work in")
        self.roots_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.roots_list.setMaximumHeight(90)
        self._folder_dialog: QFileDialog | None = None

        self.pages = QStackedWidget()
        self.pages.addWidget(stdio)
        self.pages.addWidget(http)
        self.transport.currentIndexChanged.connect(self.pages.setCurrentIndex)

        self.error_label = plain_label("")
        self.error_label.setAccessibleName("Problem")
        self.check_label = plain_label("")
        self.check_label.setAccessibleName("Connection test result")
        #: How the last connection test of the settings as they stand went: True, False, or
        #: None when they were not tested (OK then saves them untested, and says so).
        self.tested: bool | None = None
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.check_button = self.buttons.addButton("&Test connection", QDialogButtonBox.ButtonRole.ActionRole)
        name_as_shown(self.check_button, "Test the connection with these settings, without saving them")
        self.check_button.setToolTip("Connect once with these settings, without saving them")
        self.check_button.setVisible(check is not None)
        self.check_button.clicked.connect(self.test_connection)
        self.buttons.accepted.connect(self._try_accept)
        self.buttons.rejected.connect(self.reject)

        form = QFormLayout()
        form.addRow("&Name:", self.name_edit)
        form.addRow("&Transport:", self.transport)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.pages)
        roots_form = QFormLayout()
        roots_form.addRow("&Folders:", self._roots_box())
        layout.addLayout(roots_form)
        layout.addWidget(plain_label("Values marked secret are kept in the system keyring, never in hostapp's "
                                     "files.", selectable=False))
        layout.addWidget(self.check_label)
        layout.addWidget(self.error_label)
        layout.addWidget(self.buttons)
        self.resize(640, 520)
        if existing is not None:
            self._fill(existing)
        self._forget_check()
        # A test result holds for the settings it tested: a change takes it away.
        for edit in (self.name_edit, self.command_edit, self.args_edit, self.url_edit, self.sign_in.client_id,
                     self.sign_in.secret):
            edit.textChanged.connect(self._forget_check)
        for box in (self.transport, self.sign_in.grant):
            box.currentIndexChanged.connect(self._forget_check)

    def _with_buttons(self, table: PairsTable) -> QWidget:
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(table)
        row = QHBoxLayout()
        add = QPushButton("Add")
        add.setAccessibleName(f"Add {table.what.lower()}")
        add.clicked.connect(lambda: table.add_row())
        remove = QPushButton("Remove")
        remove.setAccessibleName(f"Remove selected {table.what.lower()}")
        remove.clicked.connect(table.remove_selected)
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        lay.addLayout(row)
        return box

    def _roots_box(self) -> QWidget:
        box = QWidget()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.roots_list)
        row = QHBoxLayout()
        add = QPushButton("Add folder…")
        name_as_shown(add, "Add a folder the server may work in")
        add.setToolTip("The server is told these folders (MCP roots) when it asks")
        add.clicked.connect(self._choose_folder)
        remove = QPushButton("Remove")
        name_as_shown(remove, "Remove the selected folders")
        remove.clicked.connect(self._remove_folders)
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        lay.addLayout(row)
        return box

    def add_folder(self, path: str) -> None:
        """Add a folder to the server's roots (absolute and resolved); a path that is not a
        folder is said, not added."""
        try:
            root = normalize_root(path)
        except ValueError as exc:
            self.error_label.setText(f"Cannot add the folder: {exc}.")
            return
        if root not in self.roots():
            self.roots_list.addItem(root)
        self.error_label.setText("")

    def roots(self) -> list[str]:
        return [self.roots_list.item(i).text() for i in range(self.roots_list.count())]

    def _choose_folder(self) -> None:
        dialog = QFileDialog(self, "Choose a folder the server may work in")
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
        dialog.fileSelected.connect(self.add_folder)
        self._folder_dialog = dialog
        dialog.open()

    def _remove_folders(self) -> None:
        for item in self.roots_list.selectedItems():
            self.roots_list.takeItem(self.roots_list.row(item))

    def _fill(self, cfg: ServerConfig) -> None:
        self.name_edit.setText(cfg.name)
        self.transport.setCurrentIndex(0 if cfg.transport == "stdio" else 1)
        self.command_edit.setText(cfg.command or "")
        self.args_edit.setText(shlex.join(cfg.args or []))
        self.url_edit.setText(cfg.url or "")
        for k, v in (cfg.env or {}).items():
            self.env_table.add_row(k, v)
        for k, ref in (cfg.secret_env or {}).items():
            self.env_table.add_row(k, "", True, kept_ref=ref)
        for k, v in (cfg.headers or {}).items():
            self.headers_table.add_row(k, v)
        for k, ref in (cfg.secret_headers or {}).items():
            self.headers_table.add_row(k, "", True, kept_ref=ref)
        self.sign_in.fill(cfg.auth)
        self.roots_list.addItems(list(cfg.roots or []))

    def fill_imported(self, s: ImportedServer) -> None:
        self.name_edit.setText(s.name)
        self.transport.setCurrentIndex(0 if s.transport == "stdio" else 1)
        self.command_edit.setText(s.command or "")
        self.args_edit.setText(shlex.join(s.args))
        self.url_edit.setText(s.url or "")
        for k, v in s.env.items():
            self.env_table.add_row(k, v, k in s.secret_names)
        for k, v in s.headers.items():
            self.headers_table.add_row(k, v, k in s.secret_names)

    def settings(self) -> ServerSettings:
        """The entered settings; raises ValueError with a message for the person."""
        name = self.name_edit.text().strip()
        if not name:
            raise ValueError("Give the server a name.")
        if name in self.taken_names:
            raise ValueError(f"A server named {name!r} already exists.")
        transport = self.transport.currentData()
        out = ServerSettings(name=name, transport=transport,
                             protocol_version=self._existing.protocol_version if self._existing else None,
                             roots=self.roots(), log_level=self._existing.log_level if self._existing else None)
        if transport == "stdio":
            out.command = self.command_edit.text().strip()
            if not out.command:
                raise ValueError("Enter the command that starts the server.")
            try:
                out.args = shlex.split(self.args_edit.text())
            except ValueError as exc:
                raise ValueError(f"The arguments cannot be split: {exc}.") from None
            out.env, out.secrets["env"], out.kept_secrets["env"] = self.env_table.values()
        else:
            out.url = self.url_edit.text().strip()
            if not out.url.startswith(("http://", "https://")):
                raise ValueError("The URL must start with http:// or https://.")
            out.headers, out.secrets["headers"], out.kept_secrets["headers"] = self.headers_table.values()
            out.auth, credentials = self.sign_in.settings()
            if credentials:
                out.secrets["credentials"] = credentials
        return out

    def _try_accept(self) -> None:
        try:
            self.result_settings = self.settings()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return
        self.accept()

    # -- Test connection ------------------------------------------------------------------

    def test_connection(self) -> asyncio.Task[None] | None:
        """Connect once with the settings as entered (nothing is saved): the handshake and
        the number of tools, or the failure in plain words."""
        if self._check is None:
            return None
        try:
            settings = self.settings()
        except ValueError as exc:
            self.error_label.setText(str(exc))
            return None
        self.error_label.setText("")
        if self._check_task is not None:
            self._check_task.cancel()
        self.check_label.setText(f"Connecting to {settings.name}…")
        self.check_button.setEnabled(False)
        self._check_task = asyncio.ensure_future(self._run_check(settings))
        return self._check_task

    def _forget_check(self, *_: object) -> None:
        if self._check_task is not None and not self._check_task.done():
            self._check_task.cancel()
            self.check_button.setEnabled(True)
        self.tested = None
        self.check_label.setText(NOT_TESTED if self._check is not None else "")

    async def _run_check(self, settings: ServerSettings) -> None:
        assert self._check is not None
        try:
            found = await self._check(settings.to_config(), settings.secrets)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the failure, it is the answer shown
            reason = str(exc) or type(exc).__name__
            self.tested = False
            self.check_label.setText(f"✗ Cannot connect: {reason}")
        else:
            self.tested = True
            tools = found.get("tools_count") or 0
            who = f" ({found['server_name']})" if found.get("server_name") else ""
            self.check_label.setText(f"✓ Connected{who}: MCP {found.get('protocol_version')}, "
                                     f"{tools} tool{'s' if tools != 1 else ''}. Nothing was saved.")
        finally:
            self.check_button.setEnabled(True)

    def done(self, code: int) -> None:
        if self._check_task is not None and not self._check_task.done():
            self._check_task.cancel()
        super().done(code)


class ImportDialog(QDialog):
    """Lists the servers found in other clients' configuration files; the checked ones are imported."""

    def __init__(self, parent: QWidget | None = None, *, taken_names: Set[str] = frozenset(),
                 search_home: Path | None = None, search_cwd: Path | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import servers")
        self.taken_names = set(taken_names)
        self.found: list[ImportedServer] = []
        self._files = 0      # configuration files read
        self._problem = ""   # why the last file could not be read
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Server", "From", "Command or URL", "Notes"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAccessibleName("Servers found")
        # Columns as wide as their titles and contents (never cut to "Command or UR").
        for col in range(3):
            self.tree.header().setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        self.tree.header().setStretchLastSection(True)
        self.status = plain_label("")
        choose = QPushButton("Choose a file…")
        choose.setAccessibleName("Choose a configuration file to import from")
        choose.clicked.connect(self._choose_file)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.import_button = self.buttons.addButton("Import", QDialogButtonBox.ButtonRole.AcceptRole)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(plain_label("Servers configured in Claude Desktop, VS Code and Cursor on this computer. "
                                     "Values that look like credentials go to the system keyring.",
                                     selectable=False))
        layout.addWidget(self.tree, 1)
        layout.addWidget(self.status)
        row = QHBoxLayout()
        row.addWidget(choose)
        row.addStretch(1)
        row.addWidget(self.buttons)
        layout.addLayout(row)
        self.resize(760, 380)
        self._file_dialog: QFileDialog | None = None
        for client, path in known_config_files(search_home, search_cwd):
            self.add_file(path, client)
        self._update_status()

    def add_file(self, path: Path, source: str = "") -> None:
        try:
            servers = read_config(path, source or Path(path).name)
        except ValueError as exc:
            self._problem = f"{path}: {exc}"
            self._update_status()
            return
        self._problem = ""
        self._files += 1
        for s in servers:
            self.found.append(s)
            item = QTreeWidgetItem([s.name, s.source, s.url or shlex.join([s.command or "", *s.args]),
                                    "; ".join(s.warnings)])
            clash = s.name in self.taken_names
            item.setCheckState(0, Qt.CheckState.Unchecked if clash else Qt.CheckState.Checked)
            if clash:
                item.setText(3, "; ".join(["a server with this name exists", *s.warnings]))
            self.tree.addTopLevelItem(item)
        self._update_status()

    def _update_status(self) -> None:
        """Says what was found, or the last file's problem; never a message that no longer holds."""
        if self._problem:
            text = self._problem
        elif self.found:
            n = len(self.found)
            text = f"{n} server{'s' if n != 1 else ''} found. Checked ones are imported."
        elif self._files:
            text = "The chosen files configure no servers. Choose another one."
        else:
            text = "No configuration files were found. Choose one to import from."
        self.status.setText(text)
        self.import_button.setEnabled(bool(self.found))

    def _choose_file(self) -> None:
        dialog = QFileDialog(self, "Choose an MCP configuration file")
        dialog.setNameFilter("JSON files (*.json);;All files (*)")
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.fileSelected.connect(lambda p: self.add_file(Path(p)))
        self._file_dialog = dialog
        dialog.open()

    def chosen(self) -> list[ImportedServer]:
        chosen = []
        for i, s in enumerate(self.found):
            item = self.tree.topLevelItem(i)
            if item is not None and item.checkState(0) == Qt.CheckState.Checked:
                chosen.append(s)
        return chosen
