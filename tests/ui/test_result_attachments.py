"""A result's audio reaches the disk only when the person saves it, under a name from an
allow-list of audio types, never executable; only an allow-listed type is ever handed to
the OS to open. A server's ``mimeType`` is a claim: ``application/javascript`` must not
become a ``.js`` file that one click runs."""

from __future__ import annotations

import base64
import os
import stat
import struct
from pathlib import Path

import pytest
from PySide6.QtWidgets import QMessageBox, QPushButton

from hostapp.ui.result_view import ResultView
from tests.ui.test_window import until

pytestmark = pytest.mark.timeout(60)

WAV = b"RIFF" + struct.pack("<I", 4) + b"WAVE"
SCRIPT = b"require('child_process').exec('touch /tmp/owned')\n"


def button(view: ResultView, text: str) -> QPushButton:
    [found] = [b for b in view.findChildren(QPushButton) if b.text() == text]
    return found


def audio(mime: str, data: bytes) -> dict:
    return {"content": [{"type": "audio", "mimeType": mime, "data": base64.b64encode(data).decode()}]}


async def save_as(view: ResultView, folder: Path, *, replace: bool = False) -> Path:
    button(view, "Save…").click()
    await until(lambda: view.save_dialog is not None and view.save_dialog.isVisible(), 30, "the save dialog")
    dialog = view.save_dialog
    offered = Path(dialog.selectedFiles()[0]).name
    target = folder / offered
    dialog.selectFile(str(target))
    dialog.accept()
    if replace:
        await until(lambda: view.replace_box is not None and view.replace_box.isVisible(), 30, "the question")
        view.replace_box.button(QMessageBox.StandardButton.Yes).click()
    await until(lambda: target in view.saved_files, 30, "the file to be written")
    return target


def test_an_untrusted_type_is_saved_only_on_request_as_bin_and_never_opened(qtbot, qloop, tmp_path):
    view = ResultView(tmp_path / "attachments")
    qtbot.addWidget(view)
    opened: list[Path] = []
    view.open_file = opened.append
    before = set(tmp_path.rglob("*"))
    view.show_outcome(audio("application/javascript", SCRIPT), None, op_id="op1")
    assert set(tmp_path.rglob("*")) == before  # shown, not written
    assert button(view, "Open").isHidden()

    target = qloop.run_until_complete(save_as(view, tmp_path))
    assert target.name == "op1-0.bin" and target.read_bytes() == SCRIPT
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert not button(view, "Open").isEnabled()
    button(view, "Open").click()
    assert opened == []


def test_a_known_audio_type_is_saved_under_its_suffix_and_may_be_opened(qtbot, qloop, tmp_path):
    view = ResultView(tmp_path / "attachments")
    qtbot.addWidget(view)
    opened: list[Path] = []
    view.open_file = opened.append
    view.show_outcome(audio("audio/wav", WAV), None, op_id="op2")
    assert not button(view, "Open").isEnabled()  # nothing saved yet

    existing = tmp_path / "op2-0.wav"
    existing.write_bytes(b"old")
    os.chmod(existing, 0o755)  # an executable file in the way keeps no execute bit
    target = qloop.run_until_complete(save_as(view, tmp_path, replace=True))
    assert target == existing and target.read_bytes() == WAV
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert button(view, "Open").isEnabled()
    button(view, "Open").click()
    assert opened == [target]
