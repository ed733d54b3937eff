"""The server dialog sets how an HTTP server signs in: the grant, the client id, a client
secret (kept in the keyring only, never shown back, replaced by typing a new one), a private
key imported from a PEM file, DPoP. A real protected MCP server checks each sign-in
(tests/support/extension_peer.py); after every step no file of the home, the SQLite journal
included, holds a secret. Renaming the server carries its credentials along."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from hostapp.app import FIRST_RUN_KEY
from hostapp.engine import api
from tests.ui.test_window import shown_host, until
from tests.ui.test_window_servers import view_of

pytestmark = pytest.mark.timeout(180)

SECRET = "dialog-s3cret-for-the-keyring-only-7d2e"
SECOND = "second-s3cret-typed-to-replace-9a41"


def files_holding(home: Path, needle: str) -> list[str]:
    return [str(p) for p in home.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def test_the_server_dialog_edits_sign_in_settings_with_secrets_in_the_keyring(qtbot, qloop, isolated_home, tmp_path,
                                                                              agents):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.auth.test_cli_sign_in_settings import McpPeer
    from tests.support.extension_peer import ServedPeer
    from tests.support.keyring_daemon import missing_programs, private_keyring

    if missing_programs():
        pytest.skip(f"needs {', '.join(missing_programs())} for a private keyring")
    served = ServedPeer(McpPeer())
    peer = served.peer
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    key_file = tmp_path / "client.pem"
    key_file.write_text(pem)
    pem_body = pem.splitlines()[1]

    with private_keyring(tmp_path / "keyring"), shown_host(qloop, isolated_home) as host:
        host.settings.setValue(FIRST_RUN_KEY, True)
        window = host.window

        async def dialog_for(name: str | None):
            if name is None:
                window.add_server_action.trigger()
            else:
                window.servers_table.selectRow(window.servers_model.row_of(name))
                await until(lambda: window.edit_server_action.isEnabled())
                window.edit_server_action.trigger()
            await until(lambda: window.server_actions.server_dialog is not None, what="the server dialog")
            return window.server_actions.server_dialog

        async def save(dialog) -> None:
            dialog.buttons.accepted.emit()
            assert dialog.result_settings is not None, dialog.error_label.text()
            await until(lambda: window.server_actions.server_dialog is None, what="the server to be saved")

        async def signs_in(name: str, tokens_before: int) -> None:
            # Counted before the save: the new sign-in may come while the save is confirmed,
            # and the server's row says connected from before the save until it reconnects.
            await until(lambda: len(peer.requests_to("/token")) > tokens_before
                        and (v := view_of(window, name)) and v.state == api.CONNECTED and v.tools_count == 1,
                        timeout=60, what=f"{name} to sign in again and connect")

        async def scenario():
            from hostapp.auth import TokenStore
            from hostapp.store.secrets import SecretStore

            await host.start()
            # Added with the client credentials grant, a secret and DPoP; tested first.
            dialog = await dialog_for(None)
            dialog.name_edit.setText("svc")
            dialog.transport.setCurrentIndex(1)
            dialog.url_edit.setText(peer.mcp_url)
            form = dialog.sign_in
            form.grant.setCurrentIndex(form.grant.findData("client_credentials"))
            assert form.secret.isVisibleTo(form) and not form.assertion_file.isVisibleTo(form)
            form.client_id.setText("machine")
            form.secret.setText(SECRET)
            form.dpop.setChecked(True)
            await dialog.test_connection()
            assert dialog.check_label.text().startswith("✓ Connected (peer)"), dialog.check_label.text()
            [tested] = peer.requests_to("/token")
            assert tested.headers["authorization"] == basic("machine", SECRET)  # the secret typed, unsaved
            store = TokenStore(SecretStore(host.home))  # the agent's keyring, read beside it
            assert store.credential_names("svc") == [] and not store.signed_in("svc")  # nothing kept
            assert await host.api.server_configs() == []
            await save(dialog)
            await signs_in("svc", 1)
            first = peer.requests_to("/token")[1]
            assert first.form["grant_type"] == "client_credentials"
            assert first.headers["authorization"] == basic("machine", SECRET) and "dpop" in first.headers
            cfg = await host.api.server_config("svc")
            assert cfg.auth == {"grant": "client_credentials", "client_id": "machine", "dpop": True}
            assert files_holding(isolated_home, SECRET) == []

            # Edited: the settings are shown, the secret is not; a new one typed replaces it.
            dialog = await dialog_for("svc")
            form = dialog.sign_in
            assert form.grant.currentData() == "client_credentials" and form.client_id.text() == "machine"
            assert form.dpop.isChecked() and form.secret.text() == "" and "keyring" in form.secret.placeholderText()
            form.scope.setText("mcp:tools")
            form.secret.setText(SECOND)
            before = len(peer.requests_to("/token"))
            await save(dialog)
            await signs_in("svc", before)
            assert peer.requests_to("/token")[-1].headers["authorization"] == basic("machine", SECOND)
            assert (await host.api.server_config("svc")).auth["scope"] == "mcp:tools"

            # Renamed: the secret goes along, under the new name.
            dialog = await dialog_for("svc")
            dialog.name_edit.setText("svc-renamed")
            before = len(peer.requests_to("/token"))
            await save(dialog)
            await signs_in("svc-renamed", before)
            assert peer.requests_to("/token")[-1].headers["authorization"] == basic("machine", SECOND)

            # A private key imported from a PEM file signs in instead of the secret.
            dialog = await dialog_for("svc-renamed")
            dialog.sign_in.import_key_file(key_file)
            assert "client.pem" in dialog.sign_in.key_label.text()
            before = len(peer.requests_to("/token"))
            await save(dialog)
            key_file.unlink()  # imported: the file is no longer needed
            await signs_in("svc-renamed", before)
            last = peer.requests_to("/token")[-1]
            assert last.form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
            assert (await host.api.server_config("svc-renamed")).auth["client_auth"] == "private_key_jwt"
            dialog = await dialog_for("svc-renamed")
            assert "A private key is kept in the keyring" in dialog.sign_in.key_label.text()
            dialog.reject()
            await until(lambda: window.server_actions.server_dialog is None)

            # Settings that cannot work are refused in the dialog, in words.
            dialog = await dialog_for(None)
            dialog.name_edit.setText("bad")
            dialog.transport.setCurrentIndex(1)
            dialog.url_edit.setText(peer.mcp_url)
            dialog.sign_in.grant.setCurrentIndex(dialog.sign_in.grant.findData("client_credentials"))
            dialog.buttons.accepted.emit()
            assert "client ID" in dialog.error_label.text()
            with pytest.raises(ValueError, match="not a PEM private key"):
                dialog.sign_in.import_key_file(Path(__file__))
            dialog.reject()
            await until(lambda: window.server_actions.server_dialog is None)
            await host.shutdown(stop_loop=False)

        try:
            qloop.run_until_complete(scenario())
        finally:
            served.stop()
        for needle in (SECRET, SECOND, pem_body):
            assert files_holding(isolated_home, needle) == [], needle
