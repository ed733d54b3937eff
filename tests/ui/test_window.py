"""The real window against the real lab server (a stdio subprocess), as the app wires it:
a client of the home's background agent, which it starts itself.

A newcomer's path: first launch configures the lab, then start a call and watch its bar
move, answer a form, decline a URL, cancel a long call, read a result; finally quit
cleanly. Driven through the widgets a person uses (actions, dialogs, buttons).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest
from PySide6.QtCore import QCoreApplication, QEvent, QSettings
from PySide6.QtWidgets import QLineEdit, QPlainTextEdit

pytest.importorskip("hostapp.store.journal", reason="the journal is needed for the window's engine")

from hostapp.app import FIRST_RUN_KEY, LAB_HTTP_SERVER_NAME, LAB_SERVER_NAME, HostApp, agent_link
from hostapp.engine import api
from hostapp.ui.operations_model import PROGRESS
from tests.support.waiting import until_async as until

pytestmark = pytest.mark.timeout(180)


async def start_via_dialog(window, tool: str, arguments: dict) -> str:
    """Start a call the way a person does; returns the new operation's id."""
    window.start_action.trigger()
    await until(lambda: window.call_dialog is not None and window.call_dialog.select_tool(tool),
                what=f"the tool {tool} in the start dialog")
    dialog = window.call_dialog
    dialog.form.set_arguments(arguments)
    dialog.start_button.click()
    await until(lambda: window.call_dialog is None, what="the call to start")
    op = window.selected_operation()
    assert op is not None and op.tool == tool
    return op.id


def dispose(widget) -> None:
    """Delete a window now, at a known point, rather than whenever the event loop next runs."""
    widget.close()
    widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def op_of(window, op_id: str):
    row = window.ops_model.row_of(op_id)
    return window.ops_model.operation(row) if row is not None else None


def result_texts(window) -> list[str]:
    return [w.toPlainText() for w in window.details.result_view.findChildren(QPlainTextEdit)]


@contextlib.contextmanager
def shown_host(qloop, home):
    """The app on ``home`` with its window shown at 1280x800, the agent's client as in the
    app (the agent is started on demand; the ``agents`` fixture gives it the tests' keyring
    and stops it at the end); shut down and deleted after."""
    app = HostApp(home, agent_link(home))
    app.stop_loop_on_quit = False
    app.window.resize(1280, 800)
    app.window.show()
    try:
        yield app
    finally:
        if not app.stopped.is_set():
            qloop.run_until_complete(app.shutdown(stop_loop=False))
        dispose(app.window)


@pytest.fixture
def host(qtbot, qloop, isolated_home, agents):
    with shown_host(qloop, isolated_home) as app:
        yield app


def test_newcomer_session(host, qloop, isolated_home):
    window = host.window
    notes: list[tuple[str, str]] = []
    window.notified.connect(lambda title, text: notes.append((title, text)))

    async def scenario():
        await host.start()
        # First launch: the lab is configured and connects on its own.
        assert [s.name for s in await host.api.servers()] == [LAB_SERVER_NAME, LAB_HTTP_SERVER_NAME]
        await until(lambda: window.servers_model.rowCount() == 2
                    and all(window.servers_model.server(i).state == api.CONNECTED for i in range(2)),
                    what="the lab to connect, on stdio and over HTTP")
        assert window.servers_model.server(0).tools_count

        # Invalid arguments keep the dialog open with the problem shown.
        window.start_action.trigger()
        await until(lambda: window.call_dialog is not None and window.call_dialog.select_tool("sleep_with_progress"))
        window.call_dialog.form.set_arguments({"seconds": 1, "steps": 0})
        window.call_dialog.start_button.click()
        await asyncio.sleep(0.1)
        assert window.call_dialog is not None and window.call_dialog.isVisible()
        assert "steps" in window.call_dialog.status.text()
        window.call_dialog.reject()
        await until(lambda: window.call_dialog is None)

        # A call with progress: the bar moves, then the result is shown.
        op_id = await start_via_dialog(window, "sleep_with_progress", {"seconds": 1.5, "steps": 6, "message": "tick"})
        seen = set()

        def progressed():
            op = op_of(window, op_id)
            if op is not None and op.fraction is not None:
                seen.add(round(op.fraction, 2))
            return op is not None and op.status == api.COMPLETED

        await until(progressed, what="the call to complete")
        assert len([f for f in seen if 0 < f < 1]) >= 2, f"the bar did not move: {seen}"
        row = window.ops_model.row_of(op_id)
        assert window.ops_model.data(window.ops_model.index(row, PROGRESS)) == "100%"
        window.ops_table.selectRow(row)
        await until(lambda: any("finished 6 steps" in t for t in result_texts(window)), what="the result")
        assert window.copy_action.isEnabled() and window.rerun_action.isEnabled()
        await until(lambda: window.details.timeline.topLevelItemCount() > 0, what="the timeline")
        assert ("Operation finished", "sleep_with_progress on lab finished.") in notes

        # A form elicitation, answered in its prompt.
        prompts = []
        window.elicitations.promptShown.connect(prompts.append)
        form_op = await start_via_dialog(window, "ask_form", {"message": "Who are you?"})
        await until(lambda: prompts, what="the form prompt")
        await until(lambda: op_of(window, form_op).needs_input, what="the needs-input badge")
        prompt = prompts[-1]
        email = prompt.form.editor("email")
        assert isinstance(email, QLineEdit)
        email.setText("ada@example.com")
        prompt.accept_button.click()
        await until(lambda: op_of(window, form_op).status == api.COMPLETED, what="the form call to finish")
        text = op_of(window, form_op).result["content"][0]["text"]
        assert '"action": "accept"' in text and "ada@example.com" in text

        # A URL elicitation, declined.
        url_op = await start_via_dialog(window, "ask_url", {})
        await until(lambda: len(prompts) == 2, what="the URL prompt")
        assert prompts[-1].url_text.toPlainText().startswith("http://127.0.0.1")
        prompts[-1].decline_button.click()
        await until(lambda: op_of(window, url_op).status in api.TERMINAL, what="the URL call to finish")
        assert "ask_url answer: decline" in op_of(window, url_op).result["content"][0]["text"]

        # A long call, cancelled from the window.
        long_op = await start_via_dialog(window, "sleep_with_progress", {"seconds": 60, "steps": 60})
        await until(lambda: (op_of(window, long_op).progress or 0) > 0, what="the long call to progress")
        assert window.cancel_action.isEnabled()
        window.cancel_action.trigger()
        await until(lambda: op_of(window, long_op).status == api.CANCELLED, what="the cancellation")
        await until(lambda: not window.cancel_action.isEnabled(), what="Cancel to be disabled")
        assert window.rerun_action.isEnabled()

        # Filters page from the journal.
        window.set_filter("failed")
        await until(lambda: window.ops_model.filter_name == "failed" and window.ops_model.rowCount() == 0)
        window.set_filter("finished")
        await until(lambda: window.ops_model.filter_name == "finished" and window.ops_model.rowCount() == 4)
        window.set_filter("all")
        await until(lambda: window.ops_model.filter_name == "all")

        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())
    assert host.stopped.is_set() and not window.isVisible()
    settings = QSettings(str(isolated_home / "hostapp.ini"), QSettings.Format.IniFormat)
    assert settings.value(FIRST_RUN_KEY, type=bool) and not settings.value("window/geometry").isEmpty()


def test_results_are_saved_and_copied(host, qloop, tmp_path):
    window = host.window

    async def scenario():
        await host.start()
        op_id = await start_via_dialog(window, "sleep_with_progress", {"seconds": 0.1, "steps": 1})
        await until(lambda: op_of(window, op_id).status == api.COMPLETED)
        window.ops_table.selectRow(window.ops_model.row_of(op_id))
        await until(lambda: window.copy_action.isEnabled() and window.rerun_action.isEnabled())
        window.copy_action.trigger()
        target = tmp_path / "result.json"
        window.save_result(window.selected_operation(), target)
        saved = json.loads(target.read_text())
        assert saved["structuredContent"]["steps"] == 1
        # Re-run is a new operation, only on request.
        before = window.ops_model.total
        window.rerun_action.trigger()
        await until(lambda: window.ops_model.total == before + 1, what="the re-run")
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())
    from PySide6.QtGui import QGuiApplication

    assert "finished 1 steps" in QGuiApplication.clipboard().text()


def test_keyring_unavailable_is_a_banner(host, qloop, monkeypatch):
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")  # the agent's keyring
    qloop.run_until_complete(host.start())
    qloop.run_until_complete(until(lambda: "Keyring unavailable" in (host.window.banner.message("keyring") or ""),
                                   what="the keyring banner"))
    assert host.window.banner.isVisible()
    qloop.run_until_complete(until(lambda: host.window.servers_model.rowCount()
                                   and host.window.servers_model.server(0).state == api.CONNECTED))
    qloop.run_until_complete(host.shutdown(stop_loop=False))


def test_secret_header_goes_to_the_keyring_and_offline_server_is_a_banner(host, qloop, tmp_path):
    from tests.support.keyring_daemon import missing_programs, private_keyring

    if missing_programs():
        pytest.skip(f"needs {', '.join(missing_programs())} for a private keyring")
    window = host.window
    secret = "Bearer s3cret-value-for-the-test"

    async def scenario():
        await host.start()
        assert window.banner.message("keyring") is None
        window.add_server_action.trigger()
        await until(lambda: window.server_actions.server_dialog is not None)
        dialog = window.server_actions.server_dialog
        dialog.name_edit.setText("remote")
        dialog.transport.setCurrentIndex(1)
        dialog.url_edit.setText("http://127.0.0.1:9/mcp")   # nothing listens there
        dialog.headers_table.add_row("Authorization", secret, True)
        dialog.headers_table.add_row("X-Team", "blue", False)
        dialog.buttons.accepted.emit()
        await until(lambda: window.servers_model.row_of("remote") is not None, what="the new server")
        await until(lambda: "remote is offline" in (window.banner.message("servers") or ""), timeout=60,
                    what="the offline banner")
        await host.shutdown(stop_loop=False)

    with private_keyring(tmp_path / "keyring") as _daemon:
        qloop.run_until_complete(scenario())
        from hostapp.store.journal import OperationJournal
        from hostapp.store.paths import journal_path
        from hostapp.store.secrets import SecretStore

        journal = OperationJournal(journal_path(host.home))
        try:
            cfg = journal.get_server("remote")
        finally:
            journal.close()
        assert cfg.headers == {"X-Team": "blue"}
        ref = cfg.secret_headers["Authorization"]
        assert secret not in ref and SecretStore(host.home).get(ref) == secret
    for path in host.home.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), f"the secret leaked into {path}"


def test_import_servers_from_another_client(host, qloop, tmp_path):
    from hostapp.ui.server_dialog import ImportDialog

    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"servers": {"lab-copy": {
        "type": "stdio", "command": "python3",
        "args": ["-m", "hostapp", "lab", "serve", "--stdio"], "env": {"LAB_MODE": "quiet"}}}}))
    window = host.window

    async def scenario():
        await host.start()
        dialog = ImportDialog(window, taken_names={"lab"}, search_home=tmp_path / "nobody", search_cwd=tmp_path)
        dialog.add_file(config, "VS Code")
        task = asyncio.ensure_future(window.server_actions.import_from(dialog))
        await until(lambda: dialog.isVisible())
        dialog.import_button.click()
        assert await task == 1
        await until(lambda: window.servers_model.row_of("lab-copy") is not None)
        servers = await host.api.server_configs()
        await host.shutdown(stop_loop=False)
        return servers

    names = {s.name: s for s in qloop.run_until_complete(scenario())}
    assert names["lab-copy"].env == {"LAB_MODE": "quiet"} and names["lab-copy"].command == "python3"


def test_operation_in_flight_is_shown_again_after_a_restart(qtbot, qloop, isolated_home, agents):
    """Stop everything while a call runs; the next start shows it (resumed or, if it cannot be
    known, as such)."""
    with shown_host(qloop, isolated_home) as first:
        async def before():
            await first.start()
            op = await first.api.start_call("lab", "sleep_with_progress", {"seconds": 3, "steps": 6})
            await until(lambda: ((op_of(first.window, op.id) or op).progress or 0) > 0, what="progress")
            await first.shutdown(stop_loop=False, stop_everything=True)  # Quit > Stop everything
            return op.id

        op_id = qloop.run_until_complete(before())

    with shown_host(qloop, isolated_home) as second:  # a new agent
        async def after():
            await second.start()
            await until(lambda: second.window.ops_model.row_of(op_id) is not None, what="the operation")
            await until(lambda: op_of(second.window, op_id).status in api.TERMINAL, timeout=60, what="its outcome")
            outcome = op_of(second.window, op_id)
            await second.shutdown(stop_loop=False)
            return outcome

        outcome = qloop.run_until_complete(after())
    # A plain call on a stdio server died with the server process: its outcome cannot be known,
    # and it is shown as such (never re-sent); re-running it is the person's choice.
    assert outcome.status in (api.COMPLETED, api.UNKNOWN)
    if outcome.status == api.COMPLETED:
        assert "finished 6 steps" in outcome.result["content"][0]["text"]


def test_history_of_100000_operations_is_paged_from_the_journal(qtbot, qloop, isolated_home, agents, qtmodeltester):
    """The window reads one page of a large history, and the next page on scrolling."""
    import sqlite3
    import time as clock

    from hostapp.store.journal import OperationJournal, OperationRecord
    from hostapp.store.paths import journal_path
    from hostapp.ui.operations_model import PAGE_SIZE

    journal = OperationJournal(journal_path(isolated_home))
    now = clock.time()
    journal.create_operation_sync(OperationRecord(
        id="template", server="lab", method="tools/call", params={"name": "lab_stats", "arguments": {}},
        tool="lab_stats", jsonrpc_id=None, mechanism=None, status=api.PENDING, progress=None, total=None,
        message=None, created_at=now, updated_at=now, deadline=None, result=None, error=None, handle_ref=None,
        handle={}, resumable=True))
    journal.update_operation_sync("template", status=api.RUNNING)
    journal.finish_operation_sync("template", api.COMPLETED, result={"content": [{"type": "text", "text": "ok"}]})
    journal.close()
    # Copy the finished row 99,999 times in one statement, whatever the columns are.
    db = sqlite3.connect(journal_path(isolated_home))
    columns = [row[1] for row in db.execute("PRAGMA table_info(operations)")]
    chosen = ", ".join("printf('op%06d', n)" if c == "id" else "created_at - n" if c == "created_at" else c
                       for c in columns)
    db.execute(f"WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 99999) "
               f"INSERT INTO operations ({', '.join(columns)}) SELECT {chosen} FROM operations, seq "
               f"WHERE id = 'template'")
    db.commit()
    db.close()

    host = HostApp(isolated_home, agent_link(isolated_home))
    host.window.show()

    async def scenario():
        started = clock.perf_counter()
        await host.start()
        loaded = clock.perf_counter() - started
        model = host.window.ops_model
        assert model.total == 100_000 and model.rowCount() == PAGE_SIZE
        assert "100,000 operations" in host.window.count_label.text()
        host.window.ops_table.scrollToBottom()          # the view asks for more
        await until(lambda: model.rowCount() == 2 * PAGE_SIZE, what="the next page")
        assert model.operation(PAGE_SIZE).id == f"op{PAGE_SIZE:06d}"
        qtmodeltester.check(model)
        print(f"first page of 100,000 in {loaded:.3f} s")
        await host.shutdown(stop_loop=False)

    qloop.run_until_complete(scenario())
    dispose(host.window)


def test_edit_server_keeps_its_secret_and_reconnects(host, qloop, tmp_path):
    from hostapp.store.secrets import SecretStore
    from tests.support.keyring_daemon import missing_programs, private_keyring

    if missing_programs():
        pytest.skip(f"needs {', '.join(missing_programs())} for a private keyring")
    window = host.window

    async def edit(change) -> None:
        window.servers_table.selectRow(window.servers_model.row_of("lab"))
        await until(lambda: window.edit_server_action.isEnabled())
        window.edit_server_action.trigger()
        await until(lambda: window.server_actions.server_dialog is not None)
        change(window.server_actions.server_dialog)
        window.server_actions.server_dialog.buttons.accepted.emit()
        await until(lambda: window.server_actions.server_dialog is None, what="the edit to be saved")

    async def scenario():
        await host.start()
        await edit(lambda d: d.env_table.add_row("LAB_TOKEN", "t0ken-value", True))
        first = await host.api.server_config("lab")
        assert set(first.secret_env) == {"LAB_TOKEN"} and not first.env
        # Editing something else keeps the secret without typing it again.
        await edit(lambda d: d.env_table.add_row("LAB_MODE", "quiet", False))
        second = await host.api.server_config("lab")
        assert second.env == {"LAB_MODE": "quiet"}
        assert SecretStore(host.home).get(second.secret_env["LAB_TOKEN"]) == "t0ken-value"  # the agent's keyring
        await until(lambda: window.servers_model.server(window.servers_model.row_of("lab")).state == api.CONNECTED,
                    what="the edited server to connect")
        await host.shutdown(stop_loop=False)

    with private_keyring(tmp_path / "keyring"):
        qloop.run_until_complete(scenario())


def test_a_question_answered_on_the_command_line_leaves_the_window(host, qloop, isolated_home, agents):
    # `hostapp call lab-http ask_form` with no answers declines the question the window
    # shows too: once the command has its outcome, nothing of the question stays in the window.
    from tests.support.faults import HostCall

    window = host.window
    shown: list[api.InputRequest] = []

    async def scenario():
        await host.start()
        await until(lambda: any(s.name == LAB_HTTP_SERVER_NAME and s.state == api.CONNECTED
                                for s in window.servers_model.servers()), what="lab-http connected")
        window.signals.inputRequested.connect(shown.append)
        call = HostCall(isolated_home, "call", LAB_HTTP_SERVER_NAME, "ask_form", "--json",
                        "--args", json.dumps({"message": "Which colour?"}), env=agents.env)
        assert await asyncio.to_thread(call.wait) == 0, call.stderr
        assert "decline" in json.dumps(call.events), call.events
        assert [q.message for q in shown] == ["Which colour?"]  # the window was asked too
        await until(lambda: window.elicitations.current is None and not window.elicitations.waiting
                    and not window.elicitations.holds(shown[0].id), what="the question gone from the window")
        assert window.elicitations.prompt is None or not window.elicitations.prompt.isVisible()

    qloop.run_until_complete(scenario())
