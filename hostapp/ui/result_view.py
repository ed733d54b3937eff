"""Shows a tool's result by content type: text, structured content, images, audio,
embedded resources and resource links, and a server's error.

Everything a server sent is shown as plain text: labels get ``Qt.PlainText``, text goes
into plain-text editors, and nothing is ever handed to a rich-text or HTML renderer.
Audio is kept in memory until the person saves it (nothing is written by showing a
result); the name it is offered under comes from an allow-list of audio types (anything
else is ``.bin``), the file is never executable, and only an allow-listed type is ever
handed to the OS to open. A resource link is read from its server only when the person
presses its Open (``read_resource``), and shown the same way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import html
import json
import os
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QStandardPaths, Qt, QUrl
from PySide6.QtGui import QDesktopServices, QImage, QPixmap
from PySide6.QtWidgets import (
    QFileDialog,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from hostapp.protocol.tool_results import content_blocks, text_of
from hostapp.ui.async_dialog import plain_question, run_dialog

#: Largest width an image is shown at (it is scaled down, never up).
MAX_IMAGE_WIDTH = 640

#: The audio types a saved file is named after, and the only ones the OS is asked to open
#: (a server's ``mimeType`` is only a claim: ``application/javascript`` must not become a
#: ``.js`` that a double click runs).
AUDIO_TYPES = {
    "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/wave": ".wav", "audio/vnd.wave": ".wav",
    "audio/mpeg": ".mp3", "audio/mp3": ".mp3", "audio/mp4": ".m4a", "audio/x-m4a": ".m4a", "audio/aac": ".aac",
    "audio/ogg": ".ogg", "audio/opus": ".opus", "audio/flac": ".flac", "audio/x-flac": ".flac",
    "audio/webm": ".weba",
}


def audio_suffix(mime: str) -> str | None:
    """The file name suffix of an allow-listed audio type (parameters ignored), else None."""
    return AUDIO_TYPES.get(mime.split(";")[0].strip().lower())


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` readable and writable by this user only, never executable
    (an existing file keeps no execute bit either)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def plain_label(text: str = "", *, wrap: bool = True, selectable: bool = True) -> QLabel:
    """A QLabel that can never interpret what it shows as markup."""
    label = QLabel()
    label.setTextFormat(Qt.TextFormat.PlainText)
    label.setText(text)
    label.setWordWrap(wrap)
    if selectable:
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                      | Qt.TextInteractionFlag.TextSelectableByKeyboard)
    return label


#: Longest line of a tooltip, in characters; longer lines are broken between words.
TOOLTIP_COLUMNS = 80


def plain_tooltip(text: str) -> str:
    """A tooltip that shows ``text`` literally: Qt guesses rich text in tooltips, so escape it.

    Qt lays a rich-text tooltip out in a word-wrapping label, which breaks a sentence after
    a few words; so the lines are broken here, at :data:`TOOLTIP_COLUMNS`, and kept whole."""
    lines = []
    for line in text.splitlines() or [""]:
        lines.extend(textwrap.wrap(line, TOOLTIP_COLUMNS, break_long_words=True, replace_whitespace=False)
                     or [""])
    return "<p style='white-space:pre'>" + html.escape("\n".join(lines)) + "</p>"


def result_as_text(result: dict[str, Any] | None, error: dict[str, Any] | None = None) -> str:
    """What "Copy result" puts on the clipboard: the text blocks, else the JSON."""
    if error and not result:
        if not isinstance(error, dict):
            return text_of(error)
        code = error.get("code")
        return f"Error {code}: {text_of(error.get('message', ''))}" if code is not None \
            else text_of(error.get("message", ""))
    if not result:
        return ""
    texts = [text_of(b.get("text", "")) for b in content_blocks(result) if b.get("type") == "text"]
    if texts:
        return "\n".join(texts)
    return json.dumps(result, ensure_ascii=False, indent=2)


def decode_base64(data: Any) -> bytes | None:
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def json_tree_items(value: Any, key: str = "") -> QTreeWidgetItem:
    """A tree item for a JSON value (objects and arrays become children)."""
    item = QTreeWidgetItem([key, ""])
    if isinstance(value, dict):
        item.setText(1, f"{{{len(value)}}}")
        for k, v in value.items():
            item.addChild(json_tree_items(v, str(k)))
    elif isinstance(value, list):
        item.setText(1, f"[{len(value)}]")
        for i, v in enumerate(value):
            item.addChild(json_tree_items(v, str(i)))
    else:
        item.setText(1, json.dumps(value, ensure_ascii=False))
    return item


class ResultView(QScrollArea):
    """The rendered result (or error) of one operation; rebuilt by :meth:`show_outcome`."""

    def __init__(self, attachments_dir: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.attachments_dir = Path(attachments_dir)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName("Result")
        self._body = QWidget()
        self._layout = QVBoxLayout(self._body)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self.setWidget(self._body)
        self.saved_files: list[Path] = []
        #: The save dialog while it is open (tests and the window may drive it).
        self.save_dialog: QFileDialog | None = None
        self.replace_box: QMessageBox | None = None
        #: How a saved audio file of an allow-listed type is opened: the person's player.
        self.open_file: Callable[[Path], object] = lambda path: QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))
        #: How a resource link is read when the person opens it (the engine's
        #: ``read_resource``); None: links are only shown.
        self.read_resource: Callable[[str, str], Awaitable[dict[str, Any]]] | None = None
        self._server = ""
        self._saving: set[asyncio.Task[None]] = set()
        self.show_outcome(None, None)

    def _clear(self) -> None:
        while self._layout.count():
            item = self._layout.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.saved_files = []

    def show_outcome(self, result: dict[str, Any] | None, error: dict[str, Any] | None, *,
                     op_id: str = "", placeholder: str = "No result yet.", server: str = "") -> None:
        self._clear()
        self._server = server
        if error:
            self._add_error(error)
        if result:
            if result.get("isError"):
                warn = plain_label("The tool reported an error:")
                warn.setObjectName("toolError")
                self._layout.addWidget(warn)
            for i, block in enumerate(result.get("content") or []):
                self._add_block(block, op_id, i)
            if result.get("structuredContent") is not None:
                self._add_structured(result["structuredContent"])
        if not error and not result:
            self._layout.addWidget(plain_label(placeholder))
        self._layout.addStretch(1)

    # -- blocks ---------------------------------------------------------------------------

    def _add_error(self, error: dict[str, Any]) -> None:
        box = QGroupBox("Error from the server" if error.get("code") is not None else "Error")
        lay = QVBoxLayout(box)
        code = error.get("code")
        lay.addWidget(plain_label((f"{code}: " if code is not None else "") + str(error.get("message", ""))))
        if error.get("data") is not None:
            lay.addWidget(self._text_box(json.dumps(error["data"], ensure_ascii=False, indent=2)))
        self._layout.addWidget(box)

    def _text_box(self, text: str, max_lines: int = 18) -> QPlainTextEdit:
        edit = QPlainTextEdit()
        edit.setReadOnly(True)
        edit.setPlainText(text)
        edit.setAccessibleName("Result text")
        # Room for the wrapped lines (about 90 characters each), within bounds.
        wrapped = sum(1 + len(line) // 90 for line in text.splitlines() or [""])
        lines = min(max_lines, max(2, wrapped + 1))
        edit.setFixedHeight(edit.fontMetrics().lineSpacing() * lines + 12)
        return edit

    def _add_block(self, block: dict[str, Any], op_id: str, index: int) -> None:
        kind = block.get("type")
        if kind == "text":
            self._layout.addWidget(self._text_box(str(block.get("text", ""))))
        elif kind == "image":
            self._add_image(block)
        elif kind == "audio":
            self._add_audio(block, op_id, index)
        elif kind == "resource":
            self._add_resource(block.get("resource") or {})
        elif kind == "resource_link":
            self._add_link(block)
        else:
            box = QGroupBox(f"Content of type {kind!r}")
            QVBoxLayout(box).addWidget(self._text_box(json.dumps(block, ensure_ascii=False, indent=2)))
            self._layout.addWidget(box)

    def _add_image(self, block: dict[str, Any]) -> None:
        box = QGroupBox(f"Image ({block.get('mimeType', 'unknown type')})")
        lay = QVBoxLayout(box)
        image = QImage()
        data = decode_base64(block.get("data"))
        if data is None or not image.loadFromData(data):
            lay.addWidget(plain_label("The image could not be decoded."))
        else:
            label = QLabel()
            label.setAccessibleName("Result image")
            pixmap = QPixmap.fromImage(image)
            if pixmap.width() > MAX_IMAGE_WIDTH:
                pixmap = pixmap.scaledToWidth(MAX_IMAGE_WIDTH, Qt.TransformationMode.SmoothTransformation)
            label.setPixmap(pixmap)
            label.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
            lay.addWidget(label)
            lay.addWidget(plain_label(f"{image.width()} × {image.height()} pixels"))
        self._layout.addWidget(box)

    def _add_audio(self, block: dict[str, Any], op_id: str, index: int) -> None:
        mime = str(block.get("mimeType") or "audio/octet-stream")
        box = QGroupBox(f"Audio ({mime})")
        lay = QHBoxLayout(box)
        data = decode_base64(block.get("data"))
        if data is None:
            lay.addWidget(plain_label("The audio could not be decoded."))
            self._layout.addWidget(box)
            return
        suffix = audio_suffix(mime)
        status = plain_label(f"{len(data):,} bytes" + ("" if suffix else
                             "; not a known audio type: it can be saved (as .bin), not opened"))
        lay.addWidget(status, 1)
        save = QPushButton("Save…")
        save.setAccessibleName("Save the audio to a file")
        play = QPushButton("Open")
        play.setAccessibleName("Open the saved audio file")
        play.setEnabled(False)
        play.setVisible(suffix is not None)
        saved: list[Path] = []

        def saved_as(path: Path) -> None:
            saved[:] = [path]
            status.setText(f"{len(data):,} bytes saved to {path}")
            # Only a known audio type, under its own suffix, goes to the OS's opener.
            play.setEnabled(suffix is not None and path.suffix.lower() == suffix)

        save.clicked.connect(lambda: self._start_saving(data, f"{op_id or 'result'}-{index}{suffix or '.bin'}",
                                                        saved_as))
        play.clicked.connect(lambda: saved and self.open_file(saved[0]))
        lay.addWidget(save)
        lay.addWidget(play)
        self._layout.addWidget(box)

    def _start_saving(self, data: bytes, name: str, done: Callable[[Path], None], what: str = "the audio") -> None:
        task = asyncio.ensure_future(self._save(data, name, done, what))
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)

    async def _save(self, data: bytes, name: str, done: Callable[[Path], None], what: str = "the audio") -> None:
        """Ask where, then write: the only way a result's attachment reaches the disk."""
        folder = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.DownloadLocation) or str(Path.home())
        dialog = QFileDialog(self, f"Save {what}", str(Path(folder) / name))
        dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dialog.setFileMode(QFileDialog.FileMode.AnyFile)
        dialog.setOption(QFileDialog.Option.DontUseNativeDialog)  # awaitable, the same everywhere
        dialog.setOption(QFileDialog.Option.DontConfirmOverwrite)  # asked below, awaitably
        dialog.setObjectName("saveAttachment")
        self.save_dialog = dialog
        try:
            if await run_dialog(dialog) != QFileDialog.DialogCode.Accepted or not dialog.selectedFiles():
                return
            path = Path(dialog.selectedFiles()[0])
        finally:
            self.save_dialog = None
            dialog.deleteLater()
        if path.exists() and not await self._replace(path):
            return
        try:
            write_private(path, data)
        except OSError as exc:
            self._layout.addWidget(plain_label(f"{what.capitalize()} could not be saved to {path}: "
                                               f"{exc.strerror or exc}"))
            return
        self.saved_files.append(path)
        done(path)

    async def _replace(self, path: Path) -> bool:
        box = plain_question("replaceAttachment", QMessageBox.Icon.Warning, "Replace the file?",
                             f"{path} exists already. Replace it?",
                             QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                             QMessageBox.StandardButton.No, self)
        self.replace_box = box
        try:
            return await run_dialog(box) == QMessageBox.StandardButton.Yes.value
        finally:
            self.replace_box = None
            box.deleteLater()

    def _add_resource(self, res: dict[str, Any]) -> None:
        box = QGroupBox("Embedded resource")
        lay = QVBoxLayout(box)
        lay.addWidget(plain_label(f"{res.get('uri', '')}  ({res.get('mimeType', 'unknown type')})"))
        if "text" in res:
            lay.addWidget(self._text_box(str(res.get("text", ""))))
        else:
            data = decode_base64(res.get("blob"))
            lay.addWidget(plain_label(f"binary, {len(data or b''):,} bytes"))
        self._layout.addWidget(box)

    def _add_link(self, link: dict[str, Any]) -> None:
        box = QGroupBox("Resource link")
        lay = QVBoxLayout(box)
        title = link.get("title") or link.get("name") or ""
        uri = link.get("uri")
        lay.addWidget(plain_label(f"{title}  {uri or ''}".strip()))
        if link.get("description"):
            lay.addWidget(plain_label(str(link["description"])))
        if self.read_resource is not None and self._server and isinstance(uri, str) and uri:
            # Read from the server that gave the link, when the person asks: never before.
            open_button = QPushButton("Open")
            open_button.setAccessibleName("Open")
            open_button.setAccessibleDescription("Read the linked resource from the server")
            row = QHBoxLayout()
            row.addWidget(open_button)
            row.addStretch(1)
            lay.addLayout(row)
            server = self._server

            def open_link() -> None:
                open_button.setEnabled(False)
                task = asyncio.ensure_future(self._open_link(lay, server, uri, open_button))
                self._saving.add(task)
                task.add_done_callback(self._saving.discard)

            open_button.clicked.connect(open_link)
        self._layout.addWidget(box)

    async def _open_link(self, lay: QVBoxLayout, server: str, uri: str, button: QPushButton) -> None:
        """Read the linked resource and show it under the link: text as plain text, binary
        by its size with Save…."""
        assert self.read_resource is not None
        try:
            read = await self.read_resource(server, uri)
        except Exception as exc:  # noqa: BLE001 - whatever failed, it is what the person is shown
            lay.addWidget(plain_label(f"Cannot read {uri}: {exc}"))
            button.setEnabled(True)
            return
        for item in read.get("contents") or []:
            lay.addWidget(plain_label(f"{item.get('uri', '')}  ({item.get('mimeType') or 'no type given'})"))
            if isinstance(item.get("text"), str):
                lay.addWidget(self._text_box(item["text"]))
                continue
            data = decode_base64(item.get("blob"))
            if data is None:
                lay.addWidget(plain_label("The content could not be decoded."))
                continue
            row = QHBoxLayout()
            status = plain_label(f"binary, {len(data):,} bytes")
            save = QPushButton("Save…")
            save.setAccessibleName("Save…")
            save.setAccessibleDescription("Save the resource to a file")
            row.addWidget(status, 1)
            row.addWidget(save)
            lay.addLayout(row)

            def saved_as(path: Path, status: QLabel = status, size: int = len(data)) -> None:
                status.setText(f"binary, {size:,} bytes saved to {path}")

            save.clicked.connect(lambda _=False, d=data, done=saved_as: self._start_saving(
                d, "resource.bin", done, "the resource"))

    def _add_structured(self, value: Any) -> None:
        box = QGroupBox("Structured content")
        lay = QVBoxLayout(box)
        tree = QTreeWidget()
        tree.setAccessibleName("Structured content")
        tree.setHeaderLabels(["Key", "Value"])
        root = json_tree_items(value, "")
        tree.addTopLevelItems(root.takeChildren() if root.childCount() else [root])
        tree.expandToDepth(1)
        tree.resizeColumnToContents(0)
        tree.setMinimumHeight(140)
        lay.addWidget(tree)
        self._layout.addWidget(box)
