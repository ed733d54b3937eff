"""Editing a server in the window keeps what the person did not change: its sign-in settings
(now shown and edited in the dialog) and the protocol revision the command line pinned."""

from __future__ import annotations


def test_editing_a_server_in_the_window_keeps_its_sign_in_settings_and_revision(qtbot, qloop):
    from PySide6.QtWidgets import QWidget

    from hostapp.engine.api import ServerConfig
    from hostapp.ui.server_actions import ServerActions
    from hostapp.ui.server_dialog import ServerDialog
    from hostapp.ui.servers_model import ServerTableModel

    auth = {"grant": "client_credentials", "client_id": "machine", "dpop": True, "token_endpoint": "https://as/t"}
    existing = ServerConfig("svc", "http", url="https://example.test/mcp", auth=auth, protocol_version="2025-06-18")
    saved: list[tuple[ServerConfig, dict]] = []

    class Engine:
        async def server_config(self, name: str) -> ServerConfig:
            return existing

        async def update_server(self, cfg: ServerConfig, secrets=None) -> None:
            saved.append((cfg, secrets))

        async def servers(self) -> list:
            return []

    parent = QWidget()
    qtbot.addWidget(parent)
    actions = ServerActions(Engine(), ServerTableModel(), parent, run=lambda coro, what: None,  # type: ignore[arg-type]
                            selected=lambda: None)
    dialog = ServerDialog(parent, existing=existing)
    dialog.url_edit.setText("https://example.test/v2/mcp")
    qloop.run_until_complete(actions.save(dialog.settings(), replacing="svc"))
    cfg, secrets = saved[-1]
    assert cfg.url == "https://example.test/v2/mcp" and cfg.auth == auth
    assert cfg.protocol_version == "2025-06-18"
    assert not (secrets or {}).get("credentials")  # nothing typed: the kept secret stays as it is
