"""Reads the MCP server lists of other clients so a person can import them.

Three formats are understood: Claude Desktop (``claude_desktop_config.json``,
``mcpServers``), Cursor (``mcp.json``, ``mcpServers``, stdio or ``url`` + ``headers``) and
VS Code (``mcp.json``, ``servers`` with a ``type``). No Qt here: the import dialog shows
what this module finds. Values whose name suggests a credential are marked secret, so
they go to the keyring on import and never into the journal.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

#: Names of environment variables and headers whose values are credentials.
SECRET_NAME = re.compile(r"(token|secret|key|passw|auth|cookie|credential|session)", re.IGNORECASE)


@dataclass
class ImportedServer:
    """A server as another client configured it, ready to become a ServerConfig."""

    name: str
    transport: Literal["stdio", "http"]
    source: str                         # which client's file it came from, in words
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    secret_names: set[str] = field(default_factory=set)   # env or header names to keep in the keyring
    warnings: list[str] = field(default_factory=list)

    def split_secrets(self) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, str]]]:
        """(plain env, plain headers, {"env": ..., "headers": ...} secret values)."""
        env = {k: v for k, v in self.env.items() if k not in self.secret_names}
        headers = {k: v for k, v in self.headers.items() if k not in self.secret_names}
        secrets = {"env": {k: v for k, v in self.env.items() if k in self.secret_names},
                   "headers": {k: v for k, v in self.headers.items() if k in self.secret_names}}
        return env, headers, secrets


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def known_config_files(home: Path | None = None, cwd: Path | None = None) -> list[tuple[str, Path]]:
    """(client, path) of the configuration files that exist on this machine."""
    home = Path(home) if home else Path.home()
    cwd = Path(cwd) if cwd else Path.cwd()
    if sys.platform == "darwin":
        support = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        support = Path(os.environ.get("APPDATA", home / "AppData" / "Roaming"))
    else:
        support = Path(os.environ.get("XDG_CONFIG_HOME", home / ".config"))
    candidates = [
        ("Claude Desktop", support / "Claude" / "claude_desktop_config.json"),
        ("VS Code", support / "Code" / "User" / "mcp.json"),
        ("VS Code (workspace)", cwd / ".vscode" / "mcp.json"),
        ("Cursor", home / ".cursor" / "mcp.json"),
        ("Cursor (project)", cwd / ".cursor" / "mcp.json"),
    ]
    return [(client, path) for client, path in candidates if path.is_file()]


def _strings(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _one(name: str, entry: Any, source: str, *, typed: bool) -> ImportedServer | None:
    if not isinstance(entry, dict):
        return None
    kind = str(entry.get("type") or "").lower() if typed else ""
    url = entry.get("url") or entry.get("serverUrl")
    server = ImportedServer(name=str(name), transport="stdio", source=source)
    if url or kind in ("http", "sse", "streamable-http"):
        if not url:
            return None
        server.transport, server.url = "http", str(url)
        server.headers = _strings(entry.get("headers"))
        if kind == "sse":
            server.warnings.append("configured for the old HTTP+SSE transport; hostapp speaks Streamable HTTP")
    elif entry.get("command"):
        server.command = str(entry["command"])
        server.args = [str(a) for a in entry.get("args") or []]
        server.env = _strings(entry.get("env"))
        if entry.get("envFile"):
            server.warnings.append(f"its envFile {entry['envFile']!r} is not read; add those variables by hand")
    else:
        return None
    server.secret_names = {k for k in (*server.env, *server.headers) if is_secret_name(k)}
    for k, v in {**server.env, **server.headers}.items():
        if "${" in v:
            server.warnings.append(f"{k} refers to {v}, which only {source} can fill in; edit it after import")
    return server


def parse_config(text: str, source: str = "") -> list[ImportedServer]:
    """The servers of one configuration file's text (any of the three formats).

    Raises ValueError with a readable message when the text is not such a file.
    """
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("not an MCP client configuration (expected a JSON object)")
    if isinstance(data.get("mcpServers"), dict):
        entries, typed = data["mcpServers"], False
        source = source or "Claude Desktop or Cursor"
    elif isinstance(data.get("servers"), dict):
        entries, typed = data["servers"], True
        source = source or "VS Code"
    elif isinstance(data.get("mcp"), dict) and isinstance(data["mcp"].get("servers"), dict):
        entries, typed = data["mcp"]["servers"], True   # VS Code settings.json
        source = source or "VS Code"
    else:
        raise ValueError("no 'mcpServers' or 'servers' object in this file")
    servers = [s for name, entry in entries.items() if (s := _one(name, entry, source, typed=typed)) is not None]
    return servers


def read_config(path: Path, source: str = "") -> list[ImportedServer]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_config(text, source)
