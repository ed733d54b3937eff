"""Editing a server in the window keeps what the dialog does not show: its sign-in settings."""

from __future__ import annotations


def test_editing_a_server_in_the_window_keeps_its_sign_in_settings(qtbot, qloop):
    from PySide6.QtWidgets import QWidget

    from hostapp.engine.api import ServerConfig
    from hostapp.ui.server_actions import ServerActions
    from hostapp.ui.server_dialog import ServerSettings
    from hostapp.ui.servers_model import ServerTableModel

    auth = {"grant": "client_credentials", "client_id": "machine", "dpop": True}
    saved: list[ServerConfig] = []

    class Engine:
        async def server_config(self, name: str) -> ServerConfig:
            return ServerConfig("svc", "http", url="https://example.test/mcp", auth=auth)

        async def update_server(self, cfg: ServerConfig, secrets=None) -> None:
            saved.append(cfg)

        async def servers(self) -> list:
            return []

    parent = QWidget()
    qtbot.addWidget(parent)
    actions = ServerActions(Engine(), ServerTableModel(), parent, run=lambda coro, what: None,  # type: ignore[arg-type]
                            selected=lambda: None)
    edited = ServerSettings(name="svc", transport="http", url="https://example.test/v2/mcp")
    qloop.run_until_complete(actions.save(edited, replacing="svc"))
    assert saved[-1].url == "https://example.test/v2/mcp" and saved[-1].auth == auth
