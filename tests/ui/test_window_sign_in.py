"""Sign-in in the window: a remote server that needs it, the Sign in button, a call that
waits for it and then runs.

The server is tests/support/oauth_test_server.py in a subprocess: a protected MCP server
and its authorization server, whose pages answer without a person. The person's browser
is played by a separate process that follows the authorization URL (as in tests/auth).
Sign out is in the Server menu too: a call started after it waits, shown "waiting for
sign-in", and runs once signed in again. Tokens go to a private keyring. The long call
is the server's ``slow`` tool: it drops the call's stream and expires every token, so
its answer is fetched by a resumption with a refreshed token.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from PySide6.QtCore import QSettings
from PySide6.QtWidgets import QMessageBox

pytest.importorskip("hostapp.store.journal", reason="the journal is needed for the window's engine")

from hostapp.app import FIRST_RUN_KEY
from hostapp.engine import api
from hostapp.store.journal import ServerConfig
from hostapp.ui.operations_model import MESSAGE, WAITING_FOR_SIGN_IN
from tests.auth.conftest import SERVER_SCRIPT, OAuthTestServer
from tests.auth.test_sign_in import Browser
from tests.support.keyring_daemon import missing_programs, private_keyring
from tests.ui.test_window import op_of, shown_host, until

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(bool(missing_programs()), reason="needs dbus and gnome-keyring for a private keyring"),
              # A response stream left half-read at quit must be closed, not left to the
              # garbage collector after the event loop is gone.
              pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")]

SERVER = "protected"


@pytest.fixture
def oauth_server():
    process = subprocess.Popen([sys.executable, str(SERVER_SCRIPT)], stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("PORT "), f"the OAuth test server did not start (said {line!r})"
        yield OAuthTestServer(f"http://127.0.0.1:{int(line.split()[1])}")
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()


@pytest.fixture
def host(qtbot, qloop, isolated_home, tmp_path, agents):
    with private_keyring(tmp_path / "keyring"):
        # Not a first launch: no built-in lab, only the protected server.
        settings = QSettings(str(isolated_home / "hostapp.ini"), QSettings.Format.IniFormat)
        settings.setValue(FIRST_RUN_KEY, True)
        settings.sync()
        with shown_host(qloop, isolated_home) as app:
            yield app


def server_view(window):
    row = window.servers_model.row_of(SERVER)
    return window.servers_model.server(row) if row is not None else None


async def address_box(window) -> QMessageBox:
    await until(lambda: window.server_actions.confirm_box is not None
                and window.server_actions.confirm_box.isVisible(), what="the sign-in address to be shown")
    box = window.server_actions.confirm_box
    assert box.objectName() == "signInAddress"
    return box


def test_sign_in_from_the_window_then_the_waiting_call_runs(host, qloop, oauth_server, tmp_path):
    window = host.window
    browser = Browser()
    window.server_actions.open_url = browser.open   # the test's browser instead of the person's
    sign_in_button = window.server_buttons[window.sign_in_action]

    async def scenario():
        await host.start()
        await host.api.add_server(ServerConfig(name=SERVER, transport="http", url=oauth_server.mcp_url))
        await until(lambda: server_view(window) is not None and server_view(window).state == api.NEEDS_SIGN_IN,
                    what="the server to need sign-in")
        row = window.servers_model.row_of(SERVER)
        assert window.servers_model.data(window.servers_model.index(row, 2)) == "needs sign-in"
        assert "needs you to sign in" in (window.banner.message("servers") or "")
        assert not window.sign_in_action.isEnabled()      # nothing selected yet
        window.servers_table.selectRow(row)
        await until(lambda: window.sign_in_action.isEnabled() and sign_in_button.isEnabled(),
                    what="Sign in to be offered")
        assert window.sign_out_action.isEnabled()
        window.grab().save(str(tmp_path / "needs-sign-in.png"))

        # A call on it is accepted and waits (the engine waits for the next connection):
        # it neither fails nor ends before the sign-in.
        starting = asyncio.ensure_future(host.api.start_call(SERVER, "slow", {}))
        await asyncio.sleep(0.5)
        assert not starting.done() or starting.result().in_flight, starting
        assert not oauth_server.stats().get("authorization_code")

        # The address the server named is shown before anything opens; Cancel opens nothing.
        sign_in_button.click()
        box = await address_box(window)
        assert f"{oauth_server.base_url}/authorize?" in box.text() and "It is on 127.0.0.1" in box.text()
        box.button(QMessageBox.StandardButton.Cancel).click()
        await until(lambda: sign_in_button.isEnabled(), what="Sign in to be offered again")
        assert not browser.opened

        sign_in_button.click()
        box = await address_box(window)
        window.grab().save(str(tmp_path / "sign-in-address.png"))
        box.button(QMessageBox.StandardButton.Open).click()
        await until(lambda: browser.opened or window.banner.message("error"),
                    what="the authorization page to be opened")
        assert browser.opened, window.banner.message("error")
        assert not window.sign_in_action.isEnabled()      # one sign-in at a time
        op = await asyncio.wait_for(starting, 30)
        await until(lambda: server_view(window).state == api.CONNECTED, what="the server to connect")
        assert window.banner.message("servers") is None
        assert not window.sign_in_action.isEnabled()
        await until(lambda: op_of(window, op.id) is not None and op_of(window, op.id).status in api.TERMINAL,
                    what="the call to finish")
        outcome = op_of(window, op.id)
        window.grab().save(str(tmp_path / "signed-in.png"))
        await host.shutdown(stop_loop=False)
        return outcome

    outcome = qloop.run_until_complete(scenario())
    assert outcome.status == api.COMPLETED, (outcome.status, outcome.message, outcome.error)
    assert outcome.result["content"][0]["text"] == "slow done"
    stats = oauth_server.stats()
    assert stats.get("authorization_code") == 1 and stats.get("refresh_token", 0) >= 1, stats
    assert len(browser.opened) == 1


def test_calls_in_flight_on_a_server_that_needs_sign_in_say_so(host, qloop):
    """The operations table shows what such a call waits for, until the server is back."""
    model = host.window.ops_model
    waiting = api.OperationView(id="op1", server=SERVER, tool="slow", method="tools/call", arguments={},
                                status=api.PENDING, message="starting")
    ended = api.OperationView(id="op2", server=SERVER, tool="slow", method="tools/call", arguments={},
                              status=api.COMPLETED, message="slow done")
    model.apply_changes([waiting, ended])
    message = {op: model.index(model.row_of(op), MESSAGE) for op in ("op1", "op2")}
    model.set_awaiting_sign_in({SERVER})
    assert model.data(message["op1"]) == WAITING_FOR_SIGN_IN
    assert model.data(message["op2"]) == "slow done"
    model.set_awaiting_sign_in(set())
    assert model.data(message["op1"]) == "starting"


def test_after_sign_out_a_new_call_waits_for_sign_in(host, qloop, oauth_server, tmp_path):
    """Signed out: the server needs sign-in again; a call started meanwhile is shown waiting
    for it, and runs once the person signed in again."""
    window = host.window
    browser = Browser()
    window.server_actions.open_url = browser.open

    async def scenario():
        await host.start()
        await host.api.add_server(ServerConfig(name=SERVER, transport="http", url=oauth_server.mcp_url))
        await until(lambda: SERVER in window._needs_sign_in, what="the server to need sign-in")
        window.servers_table.selectRow(window.servers_model.row_of(SERVER))
        await until(window.sign_in_action.isEnabled, what="Sign in to be offered")
        window.sign_in_action.trigger()
        (await address_box(window)).button(QMessageBox.StandardButton.Open).click()
        await until(lambda: server_view(window).state == api.CONNECTED, what="the first sign-in")

        window.sign_out_action.trigger()
        await until(lambda: server_view(window).state == api.NEEDS_SIGN_IN, what="the sign-out")
        op = await asyncio.wait_for(host.api.start_call(SERVER, "whoami", {}), 10)
        await until(lambda: op_of(window, op.id) is not None, what="the call in the window")
        row = window.ops_model.row_of(op.id)
        assert window.ops_model.data(window.ops_model.index(row, MESSAGE)) == WAITING_FOR_SIGN_IN
        assert op_of(window, op.id).in_flight

        await until(window.sign_in_action.isEnabled, what="Sign in to be offered again")
        window.ops_table.selectRow(row)
        window.grab().save(str(tmp_path / "waiting-for-sign-in.png"))
        window.sign_in_action.trigger()
        (await address_box(window)).button(QMessageBox.StandardButton.Open).click()
        await until(lambda: op_of(window, op.id).status in api.TERMINAL, what="the call to finish")
        outcome = op_of(window, op.id)
        await host.shutdown(stop_loop=False)
        return outcome

    outcome = qloop.run_until_complete(scenario())
    assert outcome.status == api.COMPLETED, (outcome.status, outcome.message, outcome.error)
    assert outcome.result["content"][0]["text"] == "signed in"
    assert len(browser.opened) == 2
