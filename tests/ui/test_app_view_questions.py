"""What the window asks the person on a view's behalf shows everything: the whole
arguments of a call (scrollable, open from the start), and a link's address with its
reordering characters shown as code points ("invoice-\u202efdp.exe" is not a PDF)."""

from __future__ import annotations

import asyncio
import json

import pytest
from PySide6.QtWidgets import QApplication, QMessageBox, QTextEdit, QWidget

from hostapp.ui.apps.pane import AppViewPane, AppViews
from tests.ui.test_window import until

pytestmark = pytest.mark.timeout(60)


def boxes(name: str) -> list[QMessageBox]:
    return [w for w in QApplication.topLevelWidgets()
            if isinstance(w, QMessageBox) and w.objectName() == name and w.isVisible()]


def test_the_consent_shows_the_whole_arguments_and_a_link_its_reordering(qtbot, qloop):
    window = QWidget()
    qtbot.addWidget(window)
    window.show()
    views = AppViews(None, AppViewPane(window), window)  # type: ignore[arg-type]  # no engine is asked
    arguments = {"to": "a@example.com", "body": "y" * 400, "bcc": "\u202eevil@example.com"}

    async def scenario():
        asking = asyncio.ensure_future(views.consent.allow("mail", "send", "compose", arguments))
        await until(lambda: boxes("appConsent"), 30, "the consent question")
        [box] = boxes("appConsent")
        assert json.loads(box.detailedText().replace("<U+202E>", "\u202e")) == arguments  # all of it
        assert "<U+202E>evil@example.com" in box.detailedText()
        details = box.findChild(QTextEdit)
        assert details is not None and details.isVisible()  # open, and scrollable
        assert "\u202e" not in box.text() + box.detailedText()
        box.button(QMessageBox.StandardButton.No).click()
        assert await asking is False

        opening = asyncio.ensure_future(views._open_link("https://files.example/invoice-\u202efdp.exe"))
        await until(lambda: boxes("appOpenLink"), 30, "the link question")
        [box] = boxes("appOpenLink")
        assert "invoice-<U+202E>fdp.exe" in box.text() and "\u202e" not in box.text()
        assert "on files.example" in box.text()
        box.button(QMessageBox.StandardButton.Cancel).click()
        assert await opening is False

    qloop.run_until_complete(scenario())
