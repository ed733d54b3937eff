"""The window's servers as people meet them when something is wrong: a server that answers
requests nobody sent, one that cannot connect (the countdown, the last error, Stop retrying,
a banner that can be dismissed, Start call saying at once why there are no tools), Test
connection in the server dialog, and removing a server while a call runs on it.

Real engine, real stdio servers: the hostile server (tests/support/hostile_server.py) and
a command that does not exist."""

from __future__ import annotations

import asyncio
import html
import re

import pytest
from PySide6.QtWidgets import QMessageBox

from hostapp.app import FIRST_RUN_KEY
from hostapp.engine import api
from hostapp.ui.servers_model import NAME, PROBLEM, STATUS
from tests.support.hostile_server import SECRET, TOOLS, stdio_command
from tests.ui.test_window import shown_host, until

pytestmark = pytest.mark.timeout(180)

MISSING = "/nonexistent/mcp-server-for-a-test"


@pytest.fixture
def host(qtbot, qloop, isolated_home):
    with shown_host(qloop, isolated_home) as app:
        app.settings.setValue(FIRST_RUN_KEY, True)  # no lab: the servers are the test's
        yield app


def hostile(name: str = "hostile") -> api.ServerConfig:
    command, *args = stdio_command()
    return api.ServerConfig(name=name, transport="stdio", command=command, args=args)


def missing(name: str = "nocmd") -> api.ServerConfig:
    return api.ServerConfig(name=name, transport="stdio", command=MISSING)


def view_of(window, name: str) -> api.ServerView | None:
    row = window.servers_model.row_of(name)
    return window.servers_model.server(row) if row is not None else None


def cell(window, name: str, col: int, role=None):
    from PySide6.QtCore import Qt

    model = window.servers_model
    return model.data(model.index(model.row_of(name), col), role or Qt.ItemDataRole.DisplayRole)


def test_a_server_that_answers_requests_nobody_sent_is_marked(host, qloop):
    from PySide6.QtCore import Qt

    window = host.window

    async def scenario():
        await host.start()
        await host.api.add_server(hostile())
        await until(lambda: (v := view_of(window, "hostile")) and v.state == api.CONNECTED, what="the connection")
        assert cell(window, "hostile", NAME, Qt.ItemDataRole.DecorationRole) is None
        op = await host.api.start_call("hostile", "stray", {})
        await host.api.wait_finished(op.id)
        await until(lambda: view_of(window, "hostile").stray_answers == 1, what="the stray count")
        shown = cell(window, "hostile", NAME, Qt.ItemDataRole.ToolTipRole)
        # The tooltip is escaped text wrapped at 80 columns: read it as a person does.
        tooltip = " ".join(html.unescape(re.sub(r"<[^>]+>", "", shown)).split())
        assert "1 reply to requests hostapp never sent: the server may be confused; calls may hang" in tooltip
        assert SECRET not in tooltip
        assert cell(window, "hostile", NAME, Qt.ItemDataRole.DecorationRole) is not None
        assert "1 stray reply" in cell(window, "hostile", PROBLEM)
        assert "never sent" in cell(window, "hostile", NAME, Qt.ItemDataRole.AccessibleTextRole)
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_a_server_that_cannot_connect_counts_down_and_can_stop_retrying(host, qloop):
    window = host.window

    async def scenario():
        await host.start()
        await host.api.add_server(missing())
        await until(lambda: (v := view_of(window, "nocmd")) and v.retry_at is not None, what="a planned retry")
        assert cell(window, "nocmd", STATUS).startswith("reconnecting in ")
        assert cell(window, "nocmd", PROBLEM).startswith("last error: ")
        assert MISSING in cell(window, "nocmd", PROBLEM) or "No such file" in cell(window, "nocmd", PROBLEM)

        window.servers_table.selectRow(window.servers_model.row_of("nocmd"))
        await until(lambda: window.stop_retrying_action.isEnabled(), what="Stop retrying to apply")
        window.stop_retrying_action.trigger()
        await until(lambda: view_of(window, "nocmd").state == api.DISABLED, what="the retries to stop")
        assert cell(window, "nocmd", STATUS) == "retries stopped"
        assert cell(window, "nocmd", PROBLEM).startswith("last error: ")
        assert not window.stop_retrying_action.isEnabled()
        window.reconnect_action.trigger()
        await until(lambda: view_of(window, "nocmd").state != api.DISABLED, what="a new attempt")
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_the_offline_banner_can_be_dismissed_until_something_changes(host, qloop):
    window = host.window

    async def scenario():
        await host.start()
        await host.api.add_server(missing())
        await until(lambda: "nocmd is offline" in (window.banner.message("servers") or ""), timeout=60,
                    what="the offline banner")
        banner = window.banner
        assert banner.isVisible() and banner.dismiss_button.isVisible()
        assert "nocmd is offline" in banner.label.text()
        banner.dismiss_button.click()
        assert "nocmd" not in banner.label.text()
        assert banner.isVisible() == bool(banner.message("keyring"))  # only a keyring problem stays
        # The server keeps failing: every new attempt ends offline again, and the banner stays quiet.
        attempts: list[str] = []
        window.signals.serverChanged.connect(
            lambda view: attempts.append(view.state) if view.name == "nocmd" else None)
        await until(lambda: attempts.count(api.OFFLINE) >= 2, timeout=60, what="two more failed attempts")
        assert "nocmd" not in banner.label.text() and "nocmd" not in (banner.message("servers") or "")
        await host.api.add_server(missing("other"))  # a new condition shows
        await until(lambda: "other is offline" in banner.label.text(), timeout=60, what="the second server's banner")
        assert banner.isVisible() and "nocmd" not in banner.label.text()

        # The banner offers to stop retrying the server it speaks of.
        stop = banner.action_button("servers")
        assert stop is not None and stop.isVisible() and stop.text() == "Stop retrying other"
        assert stop.accessibleName() == stop.text()
        stop.click()
        await until(lambda: view_of(window, "other").state == api.DISABLED, what="the retries to stop")
        await until(lambda: "other" not in banner.label.text(), what="the banner to clear")
        assert view_of(window, "nocmd").state != api.DISABLED  # the dismissed one was not named
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_start_call_on_a_server_that_cannot_connect_says_so_at_once(host, qloop):
    from PySide6.QtCore import Qt

    window = host.window

    async def scenario():
        await host.start()
        await host.api.add_server(missing())
        await host.api.add_server(hostile())
        await until(lambda: (v := view_of(window, "nocmd")) and v.retry_at is not None and v.error,
                    what="the first failure")
        await until(lambda: (v := view_of(window, "hostile")) and v.state == api.CONNECTED, what="hostile")
        window.servers_table.selectRow(window.servers_model.row_of("nocmd"))
        window.start_action.trigger()
        await until(lambda: window.call_dialog is not None, what="the start dialog")
        dialog = window.call_dialog
        # The chooser marks the server that cannot answer, and only that one.
        box = dialog.server_box
        texts = {box.itemData(i): box.itemText(i) for i in range(box.count())}
        assert texts["hostile"] == "hostile" and texts["nocmd"] in ("nocmd (offline)", "nocmd (reconnecting)"), texts
        marked = box.findData("nocmd")
        assert not box.itemIcon(marked).isNull() and box.itemIcon(box.findData("hostile")).isNull()
        assert "Last error: " in box.itemData(marked, Qt.ItemDataRole.ToolTipRole)
        assert dialog.chosen_server() == "nocmd"
        text = dialog.status.text()
        assert "nocmd is " in text and "Last error: " in text and "Reading the tools" not in text
        assert dialog.retry_button.isVisible() and not dialog.start_button.isEnabled()
        before = view_of(window, "nocmd").retry_at
        dialog.retry_button.click()
        await until(lambda: dialog.retry_button.isVisible(), timeout=40, what="the retry to end")
        assert view_of(window, "nocmd").retry_at != before  # a new attempt was made
        assert "Last error: " in dialog.status.text()
        dialog.reject()
        await until(lambda: window.call_dialog is None)
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_start_call_reads_the_tools_once_the_server_comes_back(host, qloop, tmp_path):
    window = host.window
    script = tmp_path / "late-server"

    async def scenario():
        await host.start()
        await host.api.add_server(api.ServerConfig(name="late", transport="stdio", command=str(script)))
        await until(lambda: (v := view_of(window, "late")) and v.retry_at is not None, what="the first failure")
        window.start_action.trigger()
        await until(lambda: window.call_dialog is not None, what="the start dialog")
        dialog = window.call_dialog
        assert "late is " in dialog.status.text() and dialog.retry_button.isVisible()
        # The server's program appears; the next attempt connects, and the dialog follows.
        script.write_text("#!/bin/sh\nexec " + " ".join(stdio_command()) + "\n")
        script.chmod(0o755)
        await until(lambda: dialog.tool_list.count() == len(TOOLS), timeout=60, what="the tools")
        assert dialog.retry_button.isHidden() and dialog.status.text() == f"{len(TOOLS)} tools."
        dialog.reject()
        await until(lambda: window.call_dialog is None)
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_test_connection_in_the_server_dialog_saves_nothing(host, qloop):
    window = host.window

    async def scenario():
        await host.start()
        window.add_server_action.trigger()
        await until(lambda: window.server_actions.server_dialog is not None)
        dialog = window.server_actions.server_dialog
        assert dialog.check_button.isVisible()
        command, *args = stdio_command()
        dialog.name_edit.setText("trial")
        dialog.command_edit.setText(command)
        dialog.args_edit.setText(" ".join(args))
        await dialog.test_connection()
        assert dialog.check_label.text().startswith(f"✓ Connected (hostile): MCP 2025-06-18, {len(TOOLS)} tools")
        assert dialog.tested is True
        dialog.command_edit.setText(MISSING)
        assert dialog.check_label.text().startswith("Not tested yet")  # the result was for other settings
        assert dialog.tested is None
        await dialog.test_connection()
        result = dialog.check_label.text()
        assert result.startswith("✗ Cannot connect: ") and len(result) > len("✗ Cannot connect: ") + 5
        assert await host.api.server_configs() == []  # nothing was saved
        # OK saves them anyway, and says the test failed.
        dialog.buttons.accepted.emit()
        await until(lambda: window.server_actions.server_dialog is None)
        await until(lambda: "trial" in window.statusBar().currentMessage(), what="the saved message")
        assert "although its connection test failed" in window.statusBar().currentMessage()

        # Settings never tested: the dialog says so before OK, and the window after.
        window.add_server_action.trigger()
        await until(lambda: window.server_actions.server_dialog is not None)
        dialog = window.server_actions.server_dialog
        assert dialog.check_label.text().startswith("Not tested yet") and dialog.check_label.isVisible()
        dialog.name_edit.setText("untried")
        dialog.command_edit.setText(command)
        dialog.args_edit.setText(" ".join(args))
        dialog.buttons.accepted.emit()
        await until(lambda: "untried" in window.statusBar().currentMessage(), what="the saved message")
        assert "without a connection test" in window.statusBar().currentMessage()
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_removing_a_server_with_a_call_running_asks_and_ends_it_truthfully(host, qloop):
    window = host.window

    async def remove_and_answer(button):
        window.servers_table.selectRow(window.servers_model.row_of("hostile"))
        await until(lambda: window.remove_server_action.isEnabled())
        window.remove_server_action.trigger()
        await until(lambda: window.server_actions.confirm_box is not None, what="the confirmation")
        box = window.server_actions.confirm_box
        words = box.text() + " " + box.informativeText()
        button(box).click()
        return words

    async def scenario():
        await host.start()
        await host.api.add_server(hostile())
        await until(lambda: (v := view_of(window, "hostile")) and v.state == api.CONNECTED)
        op = await host.api.start_call("hostile", "silent", {})
        await until(lambda: (o := window.ops_model.operation(window.ops_model.row_of(op.id) or 0))
                    and o.status == api.RUNNING, what="the call to run")

        words = await remove_and_answer(lambda box: box.button(QMessageBox.StandardButton.Cancel))
        assert "1 operation is running on hostile" in words and "“unknown”" in words
        await until(lambda: window.server_actions.confirm_box is None)
        assert view_of(window, "hostile") is not None  # kept
        assert (await host.api.operation(op.id)).status == api.RUNNING

        await remove_and_answer(lambda box: next(b for b in box.buttons() if b.text() == "Remove and end them"))
        await until(lambda: view_of(window, "hostile") is None, what="the server to go")
        ended = await host.api.wait_finished(op.id)
        assert ended.status == api.UNKNOWN
        assert "was removed while the call ran" in ended.error["message"]
        await until(lambda: window.ops_model.operation(window.ops_model.row_of(op.id)).status == api.UNKNOWN)
        window.ops_table.selectRow(window.ops_model.row_of(op.id))
        await until(lambda: (s := window.selected_operation()) and s.id == op.id)
        assert not window.rerun_action.isEnabled() and not window.details.rerun_button.isEnabled()
        assert "no server named" not in window.banner.label.text()
        assert "internal error" not in window.banner.label.text()

        await host.api.add_server(hostile())  # added again: the call can run again
        await window.load_servers()
        await until(lambda: window.rerun_action.isEnabled(), what="Re-run to come back")
        assert window.details.rerun_button.isEnabled()
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_skills_is_offered_only_for_a_connected_server_that_declares_the_extension(host, qloop):
    """Skills… is enabled for the lab (it declares io.modelcontextprotocol/skills), and
    loads its skill; for a connected server without the extension and for an offline one it
    is disabled, and its status tip says why."""
    from hostapp.app import lab_server_config

    window = host.window

    def select(name: str) -> None:
        window.servers_table.selectRow(window.servers_model.row_of(name))

    async def scenario():
        await host.start()
        await host.api.add_server(lab_server_config(host.home))
        await host.api.add_server(hostile())
        await host.api.add_server(missing())
        for name in ("lab", "hostile"):
            await until(lambda n=name: (v := view_of(window, n)) is not None and v.state == api.CONNECTED,
                        timeout=60, what=f"{name} to connect")
        await until(lambda: view_of(window, "nocmd") is not None and view_of(window, "nocmd").state == api.OFFLINE,
                    timeout=60, what="nocmd to fail")

        select("hostile")
        assert not window.skills_action.isEnabled()
        assert "does not offer skills" in window.skills_action.statusTip()
        select("nocmd")
        assert not window.skills_action.isEnabled()
        assert "nocmd is not connected" in window.skills_action.statusTip()
        select("lab")
        assert window.skills_action.isEnabled()

        window.skills_action.trigger()
        await until(lambda: window.skills_dialog is not None and window.skills_dialog.skill_list.count() == 1,
                    timeout=60, what="the lab's skill")
        dialog = window.skills_dialog
        assert dialog.skill_list.item(0).text() == "lab-tour"
        dialog.load_button.click()
        await until(lambda: dialog.loaded is not None, timeout=60, what="the skill to load")
        assert "A tour of the lab" in dialog.text.toPlainText()
        assert "read and verified" in dialog.status.text()
        dialog.reject()
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())


def test_a_server_that_restarted_says_so_on_its_row(host, qloop):
    # The TypeScript SDK's example server forgets its sessions when it restarts: the row
    # stays connected and says what happened, and the next call works.
    from tests.support.peers import start_ts_example_server

    window = host.window
    peer = start_ts_example_server()

    async def scenario():
        await host.start()
        await host.api.add_server(api.ServerConfig(name="ts", transport="http", url=peer.url))
        await until(lambda: (v := view_of(window, "ts")) and v.state == api.CONNECTED, what="the connection")
        assert cell(window, "ts", PROBLEM) == ""
        await asyncio.to_thread(peer.restart)
        op = await host.api.start_call("ts", "greet", {"name": "again"})
        assert (await host.api.wait_finished(op.id)).status == api.COMPLETED
        await until(lambda: "new session" in cell(window, "ts", PROBLEM), what="the note on the row")
        assert "restarted" in cell(window, "ts", PROBLEM) and cell(window, "ts", STATUS) == "connected"
        await host.shutdown(stop_loop=False)

    try:
        qloop.run_until_complete(scenario())
    finally:
        peer.stop()


def test_a_change_told_while_the_servers_are_read_again_is_not_undone_by_the_answer(host, qloop):
    """The agent's answer to "every server" and a change it told just after come in one
    read of its socket: the change is handed on at once, the answer when the window's read
    goes on. The answer must not put the server back (after a new agent connected its
    servers, the table said "connecting" for good)."""
    import dataclasses

    window = host.window

    async def scenario():
        await host.start()
        await host.api.add_server(missing())
        await until(lambda: view_of(window, "nocmd") is not None, what="the server's row")
        read = window.engine.servers

        async def answered_then_a_change_told():
            answer = await read()
            told = next(s for s in answer if s.name == "nocmd")
            # What the agent said after it answered (a later attempt), handed on first.
            window.signals.server_changed(dataclasses.replace(told, state=api.DISABLED, retry_in=None,
                                                              retry_at=None))
            return answer

        window.engine.servers = answered_then_a_change_told
        try:
            await window.load_servers()
        finally:
            del window.engine.servers
        assert view_of(window, "nocmd").state == api.DISABLED
        assert cell(window, "nocmd", STATUS) == "retries stopped"
        # Once read, a change is only shown: nothing is kept to be told again.
        window.signals.server_changed(dataclasses.replace(view_of(window, "nocmd"), state=api.CONNECTING))
        assert view_of(window, "nocmd").state == api.CONNECTING
        assert window.servers_model._told_while_read is None
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())
