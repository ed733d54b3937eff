"""A server's resources: the list and its templates, one read when the person asks, saved
to a file on request, and watched for changes.

Opening the dialog reads only the listing. Read shows a text resource as plain text (a
server's HTML or terminal escapes are shown as the characters they are, never rendered)
and a binary one by its size; Save… writes what was read to a file the person chooses.
Watch subscribes through the engine (the agent's live connection); each change the server
pushes is shown with its time, and the shown resource is read again. Closing the dialog
stops watching.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QDialogButtonBox,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from hostapp.engine.api import EngineApi, EngineError
from hostapp.protocol.resources import ResourceError, blob_bytes, describe
from hostapp.ui.async_dialog import TaskDialog
from hostapp.ui.result_view import ResultView, plain_label, plain_tooltip

URI_ROLE = Qt.ItemDataRole.UserRole
#: The unwatching of closed dialogs, still telling the server.
_UNWATCHING: set[asyncio.Task[None]] = set()


class ResourcesDialog(TaskDialog):
    """The resources of one server: pick one, Read it, Save… it, Watch it."""

    def __init__(self, server: str, engine: EngineApi, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Resources of {server}")
        self.server = server
        self.engine = engine
        self._can_watch = False
        #: The URI watched now (None: none), and how many changes the server told of it.
        self.watched: str | None = None
        self.updates = 0
        #: What the last read gave (``{"contents": [...]}``), None until one.
        self.read_result: dict[str, Any] | None = None
        self._read_uri: str | None = None
        # Saving goes the way a result's attachment does (asked where, replacing asked,
        # written 0600): through a result view that is never shown.
        self._saver = ResultView(Path.home(), self)
        self._saver.hide()

        self.resource_list = QListWidget()
        self.resource_list.setAccessibleName("Resources")
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setAccessibleName("Resource")
        self.status = plain_label("")
        self.status.setAccessibleName("Resources status")
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.resource_list)
        split.addWidget(self.text)
        split.setStretchFactor(1, 2)

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.read_button = self.buttons.addButton("&Read", QDialogButtonBox.ButtonRole.ActionRole)
        self.save_button = self.buttons.addButton("&Save…", QDialogButtonBox.ButtonRole.ActionRole)
        self.watch_button = self.buttons.addButton("&Watch", QDialogButtonBox.ButtonRole.ActionRole)
        self.watch_button.setCheckable(True)
        self.watch_button.setToolTip("Be told each time the server says this resource changed (read again then)")
        for button in (self.read_button, self.save_button, self.watch_button):
            button.setEnabled(False)
        self.read_button.clicked.connect(self.read_chosen)
        self.save_button.clicked.connect(self.save_read)
        self.watch_button.toggled.connect(self._watch_toggled)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(split, 1)
        layout.addWidget(self.status)
        layout.addWidget(self.buttons)
        self.resize(860, 560)

        self.resource_list.currentItemChanged.connect(self._chosen)
        self.resource_list.itemActivated.connect(lambda _item: self.read_chosen())
        self.status.setText(f"Reading the resources of {server}…")
        self.spawn(self._list())

    def done(self, result: int) -> None:
        if self.watched is not None:
            uri, self.watched = self.watched, None
            # Not tied to the dialog: it outlives it, as the server must be told.
            task = asyncio.ensure_future(self._quietly(self.engine.unwatch_resource(self.server, uri)))
            _UNWATCHING.add(task)
            task.add_done_callback(_UNWATCHING.discard)
        super().done(result)

    @staticmethod
    async def _quietly(coro: Any) -> None:
        try:
            await coro
        except EngineError:
            pass

    async def _list(self) -> None:
        try:
            listing = await self.engine.list_resources(self.server)
        except EngineError as exc:
            self.status.setText(f"Cannot read the resources of {self.server}: {exc}")
            return
        self._can_watch = bool(listing.get("subscribe"))
        for entry in listing["resources"]:
            item = QListWidgetItem(str(entry.get("title") or entry.get("name") or entry["uri"]))
            item.setData(URI_ROLE, entry["uri"])
            item.setToolTip(plain_tooltip(describe(entry) + ("\n" + str(entry["description"])
                                                             if entry.get("description") else "")))
            self.resource_list.addItem(item)
        for entry in listing["templates"]:
            item = QListWidgetItem(f"template: {entry.get('title') or entry.get('name') or entry['uriTemplate']}")
            item.setToolTip(plain_tooltip(f"{describe(entry)}\nA template: its URIs are made by filling it in."))
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
            self.resource_list.addItem(item)
        count, templates = len(listing["resources"]), len(listing["templates"])
        self.status.setText(f"{count} resource{'s' if count != 1 else ''}, {templates} template"
                            f"{'s' if templates != 1 else ''}; none is read until you ask."
                            if count or templates else f"{self.server} lists no resources.")
        if count:
            self.resource_list.setCurrentRow(0)

    def chosen_uri(self) -> str | None:
        item = self.resource_list.currentItem()
        uri = item.data(URI_ROLE) if item is not None else None
        return uri if isinstance(uri, str) else None

    def select_resource(self, uri: str) -> bool:
        for row in range(self.resource_list.count()):
            if self.resource_list.item(row).data(URI_ROLE) == uri:
                self.resource_list.setCurrentRow(row)
                return True
        return False

    def _chosen(self, *_: object) -> None:
        uri = self.chosen_uri()
        self.read_button.setEnabled(uri is not None)
        self.watch_button.setEnabled(uri is not None and self._can_watch and self.watched in (None, uri))
        self.watch_button.setToolTip("Be told each time the server says this resource changed (read again then)"
                                     if self._can_watch else f"{self.server} does not offer subscriptions")
        self.watch_button.blockSignals(True)
        self.watch_button.setChecked(uri is not None and uri == self.watched)
        self.watch_button.blockSignals(False)

    def read_chosen(self) -> asyncio.Task[Any] | None:
        uri = self.chosen_uri()
        if uri is None:
            return None
        self.read_button.setEnabled(False)
        self.status.setText(f"Reading {uri}…")
        return self.spawn(self._read(uri))

    async def _read(self, uri: str) -> None:
        try:
            read = await self.engine.read_resource(self.server, uri)
        except EngineError as exc:
            self.status.setText(f"Cannot read {uri}: {exc}")
            return
        finally:
            self.read_button.setEnabled(self.chosen_uri() is not None)
        self.read_result, self._read_uri = read, uri
        parts = []
        binary = 0
        for item in read["contents"]:
            if isinstance(item.get("text"), str):
                parts.append(item["text"])
            else:
                size = len(_bytes(item))
                binary += size
                parts.append(f"[{item.get('uri')}: binary ({item.get('mimeType') or 'no type given'}), "
                             f"{size:,} bytes; Save… keeps it in a file]")
        self.text.setPlainText("\n".join(parts))
        self.save_button.setEnabled(True)
        self.status.setText(f"{uri}: read at {time.strftime('%H:%M:%S')}" + (
            f"; {self.updates} change{'s' if self.updates != 1 else ''} told" if uri == self.watched else ""))

    def save_read(self) -> None:
        if self.read_result is None:
            return
        data = b"".join(_bytes(item) for item in self.read_result["contents"])
        name = (self._read_uri or "resource").rstrip("/").rsplit("/", 1)[-1] or "resource"
        self._saver._start_saving(data, name, lambda path: self.status.setText(f"Saved {len(data):,} bytes to {path}"),
                                  "the resource")

    @property
    def save_dialog(self) -> Any:
        return self._saver.save_dialog

    def _watch_toggled(self, on: bool) -> None:
        uri = self.chosen_uri()
        if uri is None:
            return
        self.spawn(self._watch(uri) if on else self._unwatch(uri))

    async def _watch(self, uri: str) -> None:
        self.watch_button.setEnabled(False)
        try:
            await self.engine.watch_resource(self.server, uri)
        except EngineError as exc:
            self.status.setText(f"Cannot watch {uri}: {exc}")
            self.watch_button.blockSignals(True)
            self.watch_button.setChecked(False)
            self.watch_button.blockSignals(False)
            return
        finally:
            self.watch_button.setEnabled(True)
        self.watched, self.updates = uri, 0
        self.status.setText(f"Watching {uri}: each change the server tells of is read again.")

    async def _unwatch(self, uri: str) -> None:
        self.watched = None
        self._chosen()
        try:
            await self.engine.unwatch_resource(self.server, uri)
        except EngineError as exc:
            self.status.setText(f"Stopped watching {uri} (the server could not be told: {exc})")
            return
        self.status.setText(f"Stopped watching {uri}.")

    def resource_updated(self, server: str, uri: str) -> None:
        """The engine says the server changed ``uri`` (a ``resource_updated`` event)."""
        if server != self.server or uri != self.watched:
            return
        self.updates += 1
        self.status.setText(f"{uri} changed at {time.strftime('%H:%M:%S')} ({self.updates} so far); reading it again…")
        if self.chosen_uri() == uri:
            self.spawn(self._read(uri))


def _bytes(item: dict[str, Any]) -> bytes:
    try:
        return blob_bytes(item)
    except ResourceError:
        return b""
