"""The window as people use it every day, against the real lab through the real engine:
a small window, questions answered later, the summary in the title, narrowing and
sorting the list, the first-run hint, notifications in the outcome's own words."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest
from PySide6.QtCore import Qt

from hostapp.engine import api
from hostapp.engine.api import ServerView
from hostapp.ui.operations_model import ELAPSED, MESSAGE, PROGRESS, SURVIVES, TOOL
from tests.ui.test_window import dispose, op_of, start_via_dialog, until

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def small_host(qtbot, qloop, isolated_home, agents):
    from hostapp.app import HostApp, agent_link

    app = HostApp(isolated_home, agent_link(isolated_home))
    app.window.resize(800, 500)
    app.window.show()
    try:
        yield app
    finally:
        if not app.stopped.is_set():
            qloop.run_until_complete(app.shutdown(stop_loop=False))
        dispose(app.window)


def visible_rows(table) -> int:
    """How many whole rows the table's viewport shows."""
    return table.viewport().height() // table.verticalHeader().defaultSectionSize()


def test_a_small_window_keeps_the_operations_in_view(small_host, qloop):
    window = small_host.window

    async def scenario():
        await small_host.start()
        await until(lambda: window.servers_model.rowCount() == 2, what="the lab's two entries")
        await asyncio.sleep(0.2)
        assert window.height() <= 520
        # The operations list is the largest pane and shows rows; the details gave way.
        sizes = window.splitter.sizes()
        assert sizes[1] == max(sizes), sizes
        assert visible_rows(window.ops_table) >= 3, (sizes, window.ops_table.viewport().height())
        # The columns shrink so that the latest message keeps room, without scrolling sideways.
        assert window.ops_table.columnWidth(MESSAGE) >= 150
        assert not window.ops_table.horizontalScrollBar().isVisible()
        # The servers table shows each of its rows, a new one included.
        assert visible_rows(window.servers_table) >= 1
        window.servers_model.update_server(ServerView(name="extra", transport="stdio", target="nothing"))
        await asyncio.sleep(0.2)
        # At most a third of the height goes to the servers: past that, the new one is scrolled into view.
        assert visible_rows(window.servers_table) >= 1, window.servers_table.height()
        table, row = window.servers_table, window.servers_model.row_of("extra")
        top = table.rowViewportPosition(row)
        assert 0 <= top and top + table.rowHeight(row) <= table.viewport().height(), (top, table.viewport().height())
        # Three servers in a 500-pixel window (under the keyring warning): rows of operations still show.
        assert visible_rows(window.ops_table) >= 2, window.splitter.sizes()
        sizes = window.splitter.sizes()
        assert sizes[1] == max(sizes), sizes
        await small_host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_first_run_hint_question_later_summary_and_list_tools(small_host, qloop):
    window = small_host.window
    notes: list[tuple[str, str]] = []
    window.notified.connect(lambda title, text: notes.append((title, text)))
    window.resize(1280, 800)

    async def scenario():
        await small_host.start()
        def lab_connected() -> bool:
            row = window.servers_model.row_of("lab")
            return row is not None and window.servers_model.server(row).state == api.CONNECTED

        await until(lab_connected, what="the lab to connect")
        # Neither lab server signs in: Sign out has nothing to forget there.
        for name in ("lab-http", "lab"):
            await until(lambda name=name: window.servers_model.row_of(name) is not None, what=f"{name}'s row")
            window.servers_table.selectRow(window.servers_model.row_of(name))
            await until(lambda name=name: (window.selected_server() or api.ServerView("", "", "")).name == name,
                        what=f"{name} selected")
            assert window.sign_in_action.isEnabled() is window.sign_out_action.isEnabled() is False
        window.servers_table.clearSelection()
        # An empty first run says what to do.
        hint = window.ops_pane.empty_hint
        assert hint.isVisible() and "Start call" in hint.text() and "long_task_ext" in hint.text()
        # Both lab servers' showcase tools, the app view and the skill among them.
        assert "<b>lab</b>" in hint.text() and "<b>lab-http</b>" in hint.text()
        assert "show_card (an app view)" in hint.text() and "long_sse" in hint.text() and "Skills" in hint.text()
        assert window.windowTitle() == "MCP operations"
        # Start call opens on a showcase tool the first time, not on whichever the lab lists first.
        window.start_action.trigger()
        await until(lambda: window.call_dialog is not None and window.call_dialog.form is not None,
                    what="the start dialog's first screen")
        assert window.call_dialog.server_box.currentText() == "lab"
        assert window.call_dialog.tool_list.currentItem().text() == "long_task_ext"
        window.call_dialog.reject()
        await until(lambda: window.call_dialog is None, what="the dialog to close")

        # A question closed with Esc stays open, and the row and the title say so.
        prompts = []
        window.elicitations.promptShown.connect(prompts.append)
        form_op = await start_via_dialog(window, "ask_form", {"message": "Which colour?"})
        assert not hint.isVisible()
        await until(lambda: prompts and prompts[-1].isVisible(), what="the prompt")  # shown, then asking
        prompts[-1].activateWindow()
        prompts[-1].reject()  # what Esc and the close button do
        await until(lambda: window.elicitations.prompt is None, what="the prompt to close")
        await asyncio.sleep(0.3)
        op = op_of(window, form_op)
        assert op.status == api.INPUT_REQUIRED, op
        button = window.ops_pane.questions_button
        assert button.isVisible() and button.text() == "1 question waiting for you"
        assert "1 needs you" in window.windowTitle()
        if window.tray is not None:
            assert "1 needs you" in window.tray.toolTip()
        button.click()
        await until(lambda: len(prompts) == 2 and prompts[-1].isVisible(), what="the question again")
        prompts[-1].form.editor("email").setText("ada@example.com")
        prompts[-1].accept_button.click()
        await until(lambda: op_of(window, form_op).status == api.COMPLETED, what="the answered call")
        assert not button.isVisible()

        # A long call: the title counts it; the details give a rate and the time left.
        long_op = await start_via_dialog(window, "sleep_with_progress", {"seconds": 30, "steps": 30})
        await until(lambda: "1 running" in window.windowTitle(), what="the running count in the title")
        await until(lambda: (op_of(window, long_op).progress or 0) >= 3, what="progress")
        window.select_operation(long_op)
        await until(lambda: "left" in window.details.summary.text(), what="the time left")
        row = window.ops_pane.row_of(long_op)
        assert "lost if hostapp stops" in window.ops_pane.proxy.index(row, SURVIVES).data()
        window.cancel_action.trigger()
        await until(lambda: op_of(window, long_op).status == api.CANCELLED, what="the cancellation")
        await until(lambda: window.windowTitle() == "MCP operations", what="the title without a count")

        # Narrowing the list: search, server, sorting, Clear finished (and back).
        pane = window.ops_pane
        assert pane.proxy.rowCount() == 2
        pane.search.setText("ask_form")
        assert pane.proxy.rowCount() == 1 and pane.proxy.index(0, TOOL).data() == "ask_form"
        pane.search.setText("")
        pane.server_box.setCurrentIndex(pane.server_box.findData("lab"))
        assert pane.proxy.rowCount() == 2
        window.ops_table.sortByColumn(ELAPSED, Qt.SortOrder.DescendingOrder)
        first = pane.proxy.index(0, 0).data(Qt.ItemDataRole.UserRole + 1)
        assert first.id == max((op_of(window, i) for i in (form_op, long_op)),
                               key=lambda o: o.ended_at - o.created_at).id
        window.ops_table.sortByColumn(TOOL, Qt.SortOrder.AscendingOrder)
        assert [pane.proxy.index(r, TOOL).data() for r in range(2)] == ["ask_form", "sleep_with_progress"]
        window.select_operation(long_op)
        pane.clear_button.click()
        assert pane.proxy.rowCount() == 0 and window.ops_model.rowCount() == 2  # hidden, not deleted
        assert pane.show_cleared_button.isVisible() and "(2)" in pane.show_cleared_button.text()
        assert "matches" in pane.empty_hint.text()
        pane.show_cleared_button.click()
        assert pane.proxy.rowCount() == 2

        # The notification of an unknown outcome says so.
        base = op_of(window, long_op)
        window._maybe_notify(dataclasses.replace(base, id="x1", status=api.RUNNING, ended_at=None))
        window._maybe_notify(dataclasses.replace(base, id="x1", status=api.UNKNOWN))
        assert notes[-1][0] == "Outcome unknown", notes
        await small_host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_progress_cells_show_time_left_and_no_bar_for_ended_calls(qloop):
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtWidgets import QStyleOptionViewItem, QTableView

    from hostapp.ui.operations_model import OperationTableModel
    from hostapp.ui.progress_delegate import ProgressDelegate
    from tests.ui.test_models import ListSource, op

    running = op(1, api.RUNNING, progress=2, total=10, created_at=1000.0, updated_at=1002.0)
    model = OperationTableModel(ListSource([running, op(2, api.FAILED), op(3, api.INPUT_REQUIRED, needs_input=True),
                                            op(4, api.COMPLETED, progress=7, total=8)]))
    qloop.run_until_complete(model.reload())
    model.apply_changes([dataclasses.replace(running, progress=4, updated_at=1004.0)])
    row = model.row_of("op1")
    estimate = model.estimate(model.operation(row), now=1004.0)
    assert estimate is not None and estimate.rate == pytest.approx(1.0) and estimate.seconds_left == pytest.approx(6)
    # A working call without a total that has been silent says so beside its last message.
    quiet = dataclasses.replace(running, id="op9", progress=None, total=None, message="starting",
                                updated_at=time.time() - 300)
    model.apply_changes([quiet])
    assert model.data(model.index(model.row_of("op9"), MESSAGE)) == "starting · no news for 5 min"
    model.apply_changes([dataclasses.replace(quiet, updated_at=time.time())])
    assert model.data(model.index(model.row_of("op9"), MESSAGE)) == "starting"
    # A completed call is whole even if its last step was never reported.
    assert model.data(model.index(model.row_of("op4"), PROGRESS)) == "100%"

    view = QTableView()
    view.setModel(model)
    delegate = ProgressDelegate(view)

    def painted(op_id: str) -> bool:
        image = QImage(200, 24, QImage.Format.Format_ARGB32)
        image.fill(0)
        painter = QPainter(image)
        option = QStyleOptionViewItem()
        option.rect = image.rect()
        option.palette = view.palette()
        delegate.paint(painter, option, model.index(model.row_of(op_id), PROGRESS))
        painter.end()
        return any(image.pixel(x, 12) != 0 for x in range(10, 190, 5))

    assert painted("op1") and painted("op4")
    assert not painted("op2") and not painted("op3")  # no empty bars on failed or waiting rows


def test_partial_results_fold_into_one_readable_row(qtbot, tmp_path):
    from hostapp.ui.details import OperationDetails

    details = OperationDetails(tmp_path)
    qtbot.addWidget(details)
    chunk = {"content": [{"type": "text", "text": "rows 1-100\nready"}], "resultType": "complete"}
    details.add_event("status", {"to": "running"}, 1.0)
    for _ in range(5):
        details.add_event("partial_result", {"result": chunk}, 2.0)
    details.add_event("partial_result", {"result": {"content": [{"type": "text", "text": "rows 101-200"}]}}, 3.0)
    details.add_event(api.EVENT_RESUMED, {"mechanism": "tasks_extension",
                                          "message": "resumed after hostapp restarted"}, 4.0)
    tree = details.timeline
    assert tree.topLevelItemCount() == 3  # status, one row of partial results, resumed
    folded = tree.topLevelItem(1)
    assert folded.text(1) == "partial results (6)" and folded.text(2) == "latest: rows 101-200"
    assert not folded.isExpanded() and folded.childCount() == 2
    assert folded.child(0).text(2) == "rows 1-100 ready" and folded.child(0).text(1) == "× 5"
    assert "{" not in folded.text(2)  # readable text, not JSON
    assert tree.topLevelItem(2).text(1) == "resumed"
    assert tree.topLevelItem(2).text(2) == "resumed after hostapp restarted — resumable (task)"


def test_import_dialog_says_what_it_found_and_shows_whole_titles(qtbot, tmp_path, monkeypatch):
    import json as _json

    from hostapp.ui.server_dialog import ImportDialog

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    dialog = ImportDialog(search_home=tmp_path / "nobody", search_cwd=tmp_path)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.status.text().startswith("No configuration files were found")
    chosen = tmp_path / "mcp.json"
    chosen.write_text(_json.dumps({"mcpServers": {"files": {"command": "npx", "args": ["server-files"]}}}))
    dialog.add_file(chosen)
    assert "No configuration files" not in dialog.status.text() and "1 server found" in dialog.status.text()
    header = dialog.tree.header()
    metrics = header.fontMetrics()
    for col in range(3):
        title = dialog.tree.headerItem().text(col)
        assert header.sectionSize(col) >= metrics.horizontalAdvance(title), title


def test_protocol_column_and_tooltips_read_well(qapp):
    from PySide6.QtWidgets import QLabel

    from hostapp.ui.result_view import plain_tooltip
    from hostapp.ui.servers_model import PROTOCOL, ServerTableModel

    model = ServerTableModel()
    model.set_servers([ServerView(name="lab", transport="stdio", target="x", state=api.CONNECTED,
                                  protocol_version="2026-07-28")])
    assert model.data(model.index(0, PROTOCOL)) == "2026-07-28 · stateless"
    assert model.headerData(PROTOCOL, Qt.Orientation.Horizontal) == "MCP revision"
    assert "revision of the MCP specification" in model.data(model.index(0, PROTOCOL), Qt.ItemDataRole.ToolTipRole)
    model.set_servers([ServerView(name="old", transport="http", target="x", state=api.CONNECTED,
                                  protocol_version="2025-11-25")])
    assert model.data(model.index(0, PROTOCOL)) == "2025-11-25 · with handshake"
    # Qt shows a rich-text tooltip in a word-wrapping label: a sentence must not wrap
    # after a few words.
    sentence = "long_task_ext: step 26/120, reading the archive of the second quarter"
    label = QLabel()
    label.setWordWrap(True)
    label.setText(plain_tooltip(sentence))
    label.adjustSize()
    assert label.width() >= label.fontMetrics().horizontalAdvance(sentence) * 0.9, label.width()


TOOLS = [
    {"name": "sleep_with_progress", "description": "Wait and report progress.",
     "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}, "steps": {"type": "integer"}}}},
    {"name": "ask_form", "description": "Ask the person a question.",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"},
                                                      "token": {"type": "string", "format": "password"}}}},
]


def test_start_call_focuses_the_tools_searches_them_and_remembers_the_last_call(qtbot, qloop, tmp_path):
    from PySide6.QtCore import QSettings

    from hostapp.ui.call_dialog import StartCallDialog

    memory = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)

    async def load(_server):
        return TOOLS

    async def scenario():
        dialog = StartCallDialog(["lab", "other"], load, memory=memory)
        qtbot.addWidget(dialog)
        dialog.show()
        dialog.activateWindow()
        await until(lambda: dialog.tool_list.count() == 2, what="the tools")
        assert dialog.focusWidget() is dialog.tool_list
        dialog.tool_search.setText("question")
        shown = [dialog.tool_list.item(i).text() for i in range(2) if not dialog.tool_list.item(i).isHidden()]
        assert shown == ["ask_form"] and dialog.tool_list.currentItem().text() == "ask_form"
        dialog.form.set_arguments({"message": "Which colour?", "token": "s3cret"})
        dialog.start_button.click()
        assert dialog.result() == StartCallDialog.DialogCode.Accepted

        again = StartCallDialog(["lab", "other"], load, memory=memory)
        qtbot.addWidget(again)
        again.show()
        await until(lambda: again.tool_list.count() == 2 and again.form is not None, what="the tools again")
        assert again.server_box.currentText() == "lab"
        assert again.tool_list.currentItem().text() == "ask_form"
        assert again.form.arguments().get("message") == "Which colour?"
        assert "token" not in again.form.arguments()  # a password is never remembered
        memory.sync()
        assert "s3cret" not in (tmp_path / "settings.ini").read_text()
        again.reject()

    qloop.run_until_complete(scenario())


def test_an_empty_list_says_loading_until_the_journal_was_read(qtbot, qloop, tmp_path):
    from PySide6.QtCore import QSettings

    from hostapp.ui.operations_model import OperationTableModel
    from hostapp.ui.operations_pane import OperationsPane
    from tests.ui.test_models import ListSource, op

    settings = QSettings(str(tmp_path / "settings.ini"), QSettings.Format.IniFormat)
    history = ListSource([op(i) for i in range(5)])
    pane = OperationsPane(OperationTableModel(history), settings)
    qtbot.addWidget(pane)
    pane.resize(900, 400)
    pane.show()
    # A cold start over a full history: not "No operations yet" before the journal is read.
    assert pane.empty_hint.isVisible() and pane.empty_hint.text() == "<p>Loading…</p>"
    qloop.run_until_complete(pane.model.reload())
    assert not pane.empty_hint.isVisible() and pane.model.rowCount() == 5

    empty = OperationsPane(OperationTableModel(ListSource([])), settings)
    qtbot.addWidget(empty)
    empty.resize(900, 400)
    empty.show()
    qloop.run_until_complete(empty.model.reload())
    assert "No operations yet" in empty.empty_hint.text() and "Add a server" in empty.empty_hint.text()
    empty.set_servers(["lab"])
    assert "show_card" in empty.empty_hint.text() and "lab-http" not in empty.empty_hint.text()


def test_start_call_with_a_search_that_matches_nothing_starts_nothing(qtbot, qloop):
    from hostapp.ui.call_dialog import StartCallDialog

    async def load(_server):
        return TOOLS

    async def scenario():
        dialog = StartCallDialog(["lab"], load)
        qtbot.addWidget(dialog)
        dialog.show()
        await until(lambda: dialog.tool_list.count() == 2 and dialog.form is not None, what="the tools")
        dialog.tool_list.setCurrentRow(1)
        chosen = dialog.tool_list.currentItem().text()
        dialog.tool_search.setText("no such tool anywhere")
        assert all(dialog.tool_list.item(i).isHidden() for i in range(2))
        assert dialog.tool_list.currentItem() is None and dialog.form is None
        assert not dialog.start_button.isEnabled()
        assert "No tool matches “no such tool anywhere”" in dialog.status.text()
        qtbot.keyClick(dialog.tool_search, Qt.Key.Key_Return)  # Enter in the search: nothing starts
        dialog._try_accept()
        assert dialog.result() != StartCallDialog.DialogCode.Accepted and dialog.isVisible()
        assert dialog.tool is None
        # Clearing the search brings the tool chosen before back.
        dialog.tool_search.clear()
        assert dialog.tool_list.currentItem().text() == chosen and dialog.start_button.isEnabled()
        assert dialog.status.text() == "2 tools."
        dialog.reject()

    qloop.run_until_complete(scenario())


def test_the_details_come_back_after_a_small_window_and_a_restart(qtbot, qloop, isolated_home):
    from PySide6.QtCore import QPoint

    from hostapp.app import HostApp, agent_link
    from hostapp.ui.window_parts import DETAILS_MIN

    def open_window() -> HostApp:
        app = HostApp(isolated_home, agent_link(isolated_home))
        app.window.resize(1280, 800)
        app.window.show()
        qtbot.waitExposed(app.window)
        return app

    def details(app: HostApp) -> int:
        return app.window.splitter.sizes()[2]

    def close(app: HostApp) -> None:
        app.window.save_geometry()
        if not app.stopped.is_set():
            qloop.run_until_complete(app.shutdown(stop_loop=False))
        dispose(app.window)

    app = open_window()
    window = app.window
    qtbot.waitUntil(lambda: details(app) >= DETAILS_MIN)
    shown = details(app)
    assert window.details.cancel_button.isVisible()
    window.resize(800, 500)
    qtbot.waitUntil(lambda: details(app) == 0)  # too small: the details give way to the operations
    close(app)  # and the window is closed that small

    app = open_window()  # the next day, full size again
    window = app.window
    qtbot.waitUntil(lambda: details(app) >= DETAILS_MIN)
    assert window.details_box.isVisible() and window.details.cancel_button.isVisible()
    window.resize(800, 500)
    qtbot.waitUntil(lambda: details(app) == 0)
    window.resize(1280, 800)
    qtbot.waitUntil(lambda: details(app) >= DETAILS_MIN)  # comes back as the window grows
    assert window.splitter.sizes()[1] >= details(app) >= min(shown, DETAILS_MIN)

    # The person drags the handle down to close them: they stay closed through a resize...
    handle = window.splitter.handle(2)
    qtbot.mousePress(handle, Qt.MouseButton.LeftButton, pos=QPoint(handle.width() // 2, 2))
    qtbot.mouseMove(handle, QPoint(handle.width() // 2, window.splitter.height()))
    qtbot.mouseRelease(handle, Qt.MouseButton.LeftButton, pos=QPoint(handle.width() // 2, window.splitter.height()))
    qtbot.waitUntil(lambda: details(app) == 0)
    window.resize(1200, 760)
    window.resize(1280, 800)
    qtbot.wait(50)
    assert details(app) == 0
    # ...until View → Reset layout.
    view_menu = next(a.menu() for a in window.menuBar().actions() if a.text() == "&View")
    assert window.reset_layout_action in view_menu.actions()
    window.reset_layout_action.trigger()
    qtbot.waitUntil(lambda: details(app) >= DETAILS_MIN)
    close(app)
