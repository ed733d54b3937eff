"""The Resources… and Log… dialogs and a result's resource link, over a real engine in
this process and real servers: server-everything (a listing with templates, subscriptions
it pushes updates for, log messages at a level) and the `mcp` SDK (HTML and terminal
escapes, every byte value)."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QPushButton

from hostapp.engine import open_engine
from hostapp.engine.api import ServerConfig
from hostapp.ui.resources_dialog import ResourcesDialog
from hostapp.ui.result_view import ResultView
from hostapp.ui.server_log_dialog import MAX_LINES, ServerLogDialog
from tests.support.sdk_client_features_server import BINARY, HOSTILE_TEXT
from tests.support.waiting import until_async as until

pytestmark = pytest.mark.timeout(120)

DOC = "demo://resource/static/document/architecture.md"


class ToTheDialog:
    """The engine's listener: a resource's change goes to the open dialog, as the window does."""

    dialog: ResourcesDialog | None = None
    log: ServerLogDialog | None = None

    def operation_event(self, op_id: str, kind: str, data: dict) -> None:
        if kind == "resource_updated" and self.dialog is not None:
            self.dialog.resource_updated(data["server"], data["uri"])
        if kind == "log" and self.log is not None:
            self.log.log_event(data)

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: None


LISTENER = ToTheDialog()


@pytest.fixture
def engine(qloop, isolated_home, real_keyring, everything_http, sdk_server):
    engine = open_engine(isolated_home, LISTENER)

    async def start() -> None:
        await engine.start()
        await engine.add_server(ServerConfig(name="ev", transport="http", url=everything_http.url, log_level="info"))
        await engine.add_server(ServerConfig(name="sdk", transport="http", url=sdk_server.url))
        await engine.wait_connected("ev")
        await engine.wait_connected("sdk")

    qloop.run_until_complete(start())
    yield engine
    qloop.run_until_complete(engine.stop())


def test_resources_are_listed_read_and_watched_until_the_dialog_closes(qtbot, qloop, engine):
    async def scenario() -> None:
        dialog = ResourcesDialog("ev", engine)
        LISTENER.dialog = dialog
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: dialog.resource_list.count() > 0, what="the listing")
        texts = [dialog.resource_list.item(i).text() for i in range(dialog.resource_list.count())]
        assert "architecture.md" in texts and "template: Dynamic Blob Resource" in texts
        assert dialog.read_result is None  # nothing read until asked
        assert dialog.select_resource(DOC)
        await dialog.read_chosen()
        assert dialog.text.toPlainText().startswith("# Everything Server")

        dialog.watch_button.click()
        await until(lambda: dialog.watched == DOC, what="the subscription")
        op = await engine.start_call("ev", "toggle-subscriber-updates", {})
        await engine.wait_finished(op.id)
        await until(lambda: dialog.updates >= 1, what="an update to be shown")
        assert "changed at" in dialog.status.text() or "1 change" in dialog.status.text()
        dialog.reject()
        inner = engine._engine
        await until(lambda: inner.resource_watches.uris("ev") == [], what="the watch to end with the dialog")

    qloop.run_until_complete(scenario())


def test_server_text_is_shown_literally_and_a_binary_resource_saved_on_request(qtbot, qloop, engine, tmp_path):
    async def scenario() -> None:
        dialog = ResourcesDialog("sdk", engine)
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: dialog.resource_list.count() == 2, what="the listing")
        assert not dialog.watch_button.isEnabled()  # the SDK server offers no subscriptions
        assert dialog.select_resource("text://hostile")
        await dialog.read_chosen()
        shown = dialog.text.toPlainText()
        assert "<b>bold</b> <script>alert(1)</script>" in shown and "\x1b[31mred" in shown  # the characters, as sent
        assert dialog.text.document().toPlainText() == shown and not dialog.text.document().toHtml().count("<b>bold")

        assert dialog.select_resource("bin://bytes")
        await dialog.read_chosen()
        assert "binary" in dialog.text.toPlainText() and "256 bytes" in dialog.text.toPlainText()
        dialog.save_button.click()
        await until(lambda: dialog.save_dialog is not None and dialog.save_dialog.isVisible(), what="the save dialog")
        offered = Path(dialog.save_dialog.selectedFiles()[0]).name
        assert offered == "bytes"  # named after the resource's URI
        target = tmp_path / offered
        dialog.save_dialog.selectFile(str(target))
        dialog.save_dialog.accept()
        await until(lambda: target.exists() and target.read_bytes() == BINARY, what="the file")
        assert target.stat().st_mode & 0o777 == 0o600
        dialog.reject()

    qloop.run_until_complete(scenario())


def test_a_resource_link_in_a_result_opens_in_the_result_view(qtbot, qloop, engine):
    async def scenario() -> None:
        view = ResultView(Path("."))
        qtbot.addWidget(view)
        view.read_resource = engine.read_resource
        link = {"type": "resource_link", "uri": "text://hostile", "name": "hostile", "mimeType": "text/html"}
        view.show_outcome({"content": [link]}, None, op_id="op", server="sdk")
        [open_button] = [b for b in view.findChildren(QPushButton) if b.text() == "Open"]
        open_button.click()
        await until(lambda: any(HOSTILE_TEXT.split("\n")[0] in e.toPlainText()
                                for e in view.findChildren(QPlainTextEdit)), what="the resource's text")
        # shown without a server name, a link is only shown
        view.show_outcome({"content": [link]}, None, op_id="op")
        await until(lambda: not [b for b in view.findChildren(QPushButton) if b.text() == "Open"],
                    what="the earlier result's widgets to go")
        assert "text://hostile" in "".join(label.text() for label in view.findChildren(QLabel))

    qloop.run_until_complete(scenario())


def log_rows(dialog: ServerLogDialog) -> list[tuple[str, str, str, str]]:
    return [dialog.model.row_cells(row) for row in range(dialog.model.rowCount())]


def test_the_log_view_shows_what_the_server_logs_as_it_comes_and_sets_its_level(qtbot, qloop, engine):
    subscribed = "Subscribe Resource request for URI: "

    async def scenario() -> None:
        await engine.watch_resource("ev", DOC)  # server-everything logs each subscription at info
        await until(lambda: engine._engine.context.server_logs.entries("ev"), what="a first message")
        dialog = ServerLogDialog("ev", engine)
        LISTENER.log = dialog
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: any(subscribed + DOC in r[3] for r in log_rows(dialog)), what="the kept message")
        assert [dialog.model.headerData(c, Qt.Orientation.Horizontal) for c in range(4)] == \
            ["Time", "Level", "Logger", "Data"]
        row = next(r for r in log_rows(dialog) if subscribed + DOC in r[3])
        assert row[1] == "info" and re.fullmatch(r"\d\d:\d\d:\d\d", row[0])
        assert dialog.level.currentData() == "info"
        other = "demo://resource/static/document/features.md"
        await engine.watch_resource("ev", other)
        await until(lambda: any(subscribed + other in r[3] for r in log_rows(dialog)),
                    what="a new message, as it comes")
        assert sum(subscribed + DOC in r[3] for r in log_rows(dialog)) == 1  # each once

        dialog.level.setCurrentIndex(dialog.level.findData("error"))
        await until(lambda: engine._engine.journal.get_server("ev").log_level == "error", what="the level saved")
        assert engine._engine.connections["ev"].session.log_level == "error"  # on the live session
        LISTENER.log = None
        dialog.reject()

    qloop.run_until_complete(scenario())


def test_the_log_table_keeps_server_text_plain_on_one_line_and_its_last_messages(qtbot, qloop, engine):
    """Markup, line breaks and escapes stay text; data that is not a string is JSON; the
    table holds the newest MAX_LINES."""
    dialog = ServerLogDialog("nowhere", engine)
    qtbot.addWidget(dialog)
    dialog._filling = False  # the messages below come as events would, the kept ones aside
    hostile = "<b>bold</b>\nsecond line\x1b[31m\tred"
    dialog.add_entry({"server": "nowhere", "at": 1.0, "level": "warning", "logger": "<i>db</i>", "data": hostile})
    dialog.add_entry({"server": "nowhere", "at": 2.0, "level": "error", "data": {"rows": [1, 2], "why": "x\ny"}})
    (_t1, level, logger, data), (_t2, _l2, no_logger, as_json) = log_rows(dialog)
    assert (level, logger, data) == ("warning", "<i>db</i>", "<b>bold</b> second line [31m red")
    assert no_logger == "" and as_json == '{"rows": [1, 2], "why": "x\\ny"}'
    tip = dialog.model.data(dialog.model.index(0, 3), Qt.ItemDataRole.ToolTipRole)
    whole = "\n".join(line.expandtabs() for line in hostile.splitlines())
    assert html.unescape(re.sub(r"</?p[^>]*>", "", tip)) == whole  # whole, escaped
    assert "<b>" not in tip and "&lt;b&gt;" in tip
    json_tip = dialog.model.data(dialog.model.index(1, 3), Qt.ItemDataRole.ToolTipRole)
    assert '"rows": [\n' in html.unescape(json_tip)  # indented in full

    for n in range(3, MAX_LINES + 5):
        dialog.add_entry({"server": "nowhere", "at": float(n), "level": "info", "data": f"message {n}"})
    rows = log_rows(dialog)
    assert len(rows) == MAX_LINES and rows[0][3] == "message 5" and rows[-1][3] == f"message {MAX_LINES + 4}"
    dialog.reject()
