"""Start the background agent at login, on each platform the way its session expects.

- Linux and other freedesktop systems: an XDG autostart entry,
  ``$XDG_CONFIG_HOME/autostart/io.github.hostapp.hostapp.desktop`` (``~/.config`` by
  default), read by every desktop session manager (GNOME, KDE, Xfce, LXQt...).
- macOS: a LaunchAgent, ``~/Library/LaunchAgents/io.github.hostapp.hostapp.plist``, loaded
  by launchd at login (``RunAtLoad``).
- Windows: a value named ``hostapp`` under the per-user Run key
  (``HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run``).

Each entry starts ``hostapp agent --autostart --tray``: the owner of the home resumes
every unfinished operation after a reboot without anyone opening the window, and, where
the session has a display, puts hostapp's icon in the tray (the window opens from it).
The command is this installation's ``hostapp`` launcher (the bundle's executable, or the
console script pip installed beside the interpreter), not the interpreter and a module.
When the home was chosen with ``HOSTAPP_HOME``, the entry carries that choice, so the
agent that starts at login owns the same home as the person's window and command line.
The XDG entry's icon is installed in the user's hicolor icon theme, where launchers and
session settings look it up by name.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from hostapp.store.paths import HOME_ENV

APP_ID = "io.github.hostapp.hostapp"
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"
RUN_VALUE = "hostapp"


#: The application's icon files (a clone's or the bundle's ``resources``), by hicolor size.
RESOURCES = Path(getattr(sys, "_MEIPASS", Path(__file__).resolve().parents[2])) / "resources"
ICONS = {"scalable": "hostapp.svg", "64x64": "hostapp-64.png"}


def self_command() -> list[str]:
    """The argv prefix that runs this installation's ``hostapp`` command now, in this
    session (the interpreter that runs, exactly)."""
    if getattr(sys, "frozen", False):  # a PyInstaller bundle: the executable is hostapp itself
        return [sys.executable]
    return [sys.executable, "-m", "hostapp"]


def launcher_command(executable: str | None = None, frozen: bool | None = None) -> list[str]:
    """The argv prefix a login entry runs: a stable launcher rather than an interpreter and
    a module. The bundle's executable; else the ``hostapp`` launcher installed beside the
    interpreter (the entry point ``pip install`` made); else the interpreter with ``-m hostapp``."""
    python = Path(executable or sys.executable)
    if getattr(sys, "frozen", False) if frozen is None else frozen:
        return [str(python)]
    for launcher in (python.with_name("hostapp"), python.with_name("hostapp.exe")):
        if launcher.is_file() and os.access(launcher, os.X_OK):
            return [str(launcher)]
    return [str(python), "-m", "hostapp"]


def agent_command(environ: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command an autostart entry runs, and the environment it must set.

    ``HOSTAPP_HOME`` is carried as an absolute path when it is set, so the agent owns the
    same home; without it the agent finds the platform's default home by itself.
    """
    env = os.environ if environ is None else environ
    extra: dict[str, str] = {}
    if env.get(HOME_ENV):
        extra[HOME_ENV] = str(Path(env[HOME_ENV]).expanduser().resolve())
    return [*launcher_command(), "agent", "--autostart", "--tray"], extra


def install_icons(data_home: Path, sources: Path = RESOURCES) -> list[Path]:
    """Copy the application's icon into ``data_home``'s hicolor theme under the app id (the
    name the entries give as ``Icon=``); returns the files written (none without sources)."""
    written = []
    for size, name in ICONS.items():
        source = sources / name
        if not source.is_file():
            continue
        target = data_home / "icons" / "hicolor" / size / "apps" / f"{APP_ID}{source.suffix}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        written.append(target)
    return written


@dataclass(frozen=True, slots=True)
class AutostartStatus:
    """What the platform's autostart holds for hostapp."""

    enabled: bool
    location: str  # the file or registry value, in plain words
    command: tuple[str, ...] | None = None  # the command the entry runs, when there is one
    current: bool = False  # the entry runs this installation with this home

    def to_json(self) -> dict[str, object]:
        return {
            "enabled": self.enabled,
            "location": self.location,
            "command": list(self.command) if self.command is not None else None,
            "current": self.current,
        }


class Autostart(Protocol):
    """One platform's way of starting the agent at login."""

    def enable(self) -> AutostartStatus: ...

    def disable(self) -> AutostartStatus: ...

    def status(self) -> AutostartStatus: ...


# -- freedesktop ------------------------------------------------------------------------

# Characters that oblige an Exec argument to be quoted (Desktop Entry Specification,
# "The Exec key").
_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")


def _quote_exec_arg(arg: str) -> str:
    arg = arg.replace("%", "%%")  # a lone % would start a field code
    if not arg or any(c in _RESERVED for c in arg):
        inner = "".join("\\" + c if c in '"`$\\' else c for c in arg)
        return f'"{inner}"'
    return arg


def _escape_string_value(value: str) -> str:
    """A desktop-entry string value: backslash, newline, tab and CR escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def _unescape_string_value(value: str) -> str:
    out: list[str] = []
    chars = iter(value)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            out.append({"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}.get(nxt, "\\" + nxt))
        else:
            out.append(c)
    return "".join(out)


def _replace_file(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a session manager or launchd never reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def exec_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """The value of an ``Exec`` key that runs ``argv`` with ``env`` set (through ``env``)."""
    words = [*(["env", *(f"{k}={v}" for k, v in env.items())] if env else []), *argv]
    return _escape_string_value(" ".join(_quote_exec_arg(w) for w in words))


def parse_exec_line(value: str) -> list[str]:
    """The argv an ``Exec`` value runs, as a launcher reads it (the inverse of :func:`exec_line`).

    Raises ``ValueError`` on an unterminated quote.
    """
    text = _unescape_string_value(value)
    argv: list[str] = []
    word: list[str] = []
    in_word = in_quotes = False
    chars = iter(text)
    for c in chars:
        if in_quotes:
            if c == "\\":
                nxt = next(chars, "")
                word.append(nxt if nxt in '"`$\\' else "\\" + nxt)
            elif c == '"':
                in_quotes = False
            else:
                word.append(c)
        elif c == '"':
            in_quotes = in_word = True
        elif c in " \t":
            if in_word:
                argv.append("".join(word))
                word, in_word = [], False
        else:
            word.append(c)
            in_word = True
    if in_quotes:
        raise ValueError("unterminated quote in Exec")
    if in_word:
        argv.append("".join(word))
    return [a.replace("%%", "%") for a in argv]


def _read_desktop_entry(path: Path) -> dict[str, str]:
    """The keys of the ``[Desktop Entry]`` group (other groups and locales ignored)."""
    keys: dict[str, str] = {}
    group = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            group = line.strip("[]")
            continue
        if group == "Desktop Entry" and "=" in line:
            key, _, value = line.partition("=")
            keys.setdefault(key.strip(), value.strip())
    return keys


class XdgAutostart:
    """An XDG autostart entry (``~/.config/autostart/<app id>.desktop``)."""

    def __init__(self, config_home: Path | None = None, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        if config_home is None:
            configured = env.get("XDG_CONFIG_HOME")
            # The specification: an unset or relative value means ~/.config.
            config_home = Path(configured) if configured and os.path.isabs(configured) else Path.home() / ".config"
        self.path = config_home / "autostart" / f"{APP_ID}.desktop"
        configured_data = env.get("XDG_DATA_HOME")
        self.data_home = Path(configured_data) if configured_data and os.path.isabs(configured_data) \
            else Path.home() / ".local" / "share"
        self._environ = env

    def wanted(self) -> tuple[list[str], dict[str, str]]:
        return agent_command(self._environ)

    def entry_text(self) -> str:
        argv, env = self.wanted()
        return "\n".join(
            [
                "[Desktop Entry]",
                "Type=Application",
                "Name=hostapp background agent",
                "Comment=Resumes and watches long MCP tool calls after you log in",
                f"Exec={exec_line(argv, env)}",
                "Icon=io.github.hostapp.hostapp",
                "Terminal=false",
                "NoDisplay=true",
                "X-GNOME-Autostart-enabled=true",
                "",
            ]
        )

    def enable(self) -> AutostartStatus:
        install_icons(self.data_home)  # before the entry that names it
        _replace_file(self.path, self.entry_text().encode("utf-8"))
        return self.status()

    def disable(self) -> AutostartStatus:
        self.path.unlink(missing_ok=True)
        return self.status()

    def status(self) -> AutostartStatus:
        where = str(self.path)
        try:
            keys = _read_desktop_entry(self.path)
        except (OSError, UnicodeDecodeError):  # none, or unreadable: it starts nothing
            return AutostartStatus(enabled=False, location=where)
        hidden = keys.get("Hidden", "false").lower() == "true"
        off = keys.get("X-GNOME-Autostart-enabled", "true").lower() == "false"
        try:
            command = tuple(parse_exec_line(keys.get("Exec", "")))
        except ValueError:
            command = ()
        argv, env = self.wanted()
        wanted = tuple([*(["env", *(f"{k}={v}" for k, v in env.items())] if env else []), *argv])
        return AutostartStatus(
            enabled=not hidden and not off and bool(command),
            location=where,
            command=command or None,
            current=command == wanted,
        )


# -- macOS ------------------------------------------------------------------------------


class LaunchAgent:
    """A per-user launchd agent (``~/Library/LaunchAgents/<app id>.plist``), run at load."""

    def __init__(self, home: Path | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.path = (home or Path.home()) / "Library" / "LaunchAgents" / f"{APP_ID}.plist"
        self._environ = os.environ if environ is None else environ

    def plist(self) -> dict[str, object]:
        argv, env = agent_command(self._environ)
        spec: dict[str, object] = {
            "Label": APP_ID,
            "ProgramArguments": argv,
            "RunAtLoad": True,
            # The agent exits by itself only when asked; a crash is not restarted by
            # launchd, so a person's "stop everything" is not undone behind their back.
            "KeepAlive": False,
            "ProcessType": "Interactive",
        }
        if env:
            spec["EnvironmentVariables"] = env
        return spec

    def enable(self) -> AutostartStatus:
        _replace_file(self.path, plistlib.dumps(self.plist()))
        return self.status()

    def disable(self) -> AutostartStatus:
        self.path.unlink(missing_ok=True)
        return self.status()

    def status(self) -> AutostartStatus:
        where = str(self.path)
        try:
            spec = plistlib.loads(self.path.read_bytes())
        except (OSError, plistlib.InvalidFileException, ValueError):  # none, or unreadable
            return AutostartStatus(enabled=False, location=where)
        args = spec.get("ProgramArguments") if isinstance(spec, dict) else None
        command = tuple(str(a) for a in args) if isinstance(args, list) else None
        wanted = self.plist()
        return AutostartStatus(
            enabled=bool(command) and bool(spec.get("RunAtLoad")),
            location=where,
            command=command,
            current=command == tuple(wanted["ProgramArguments"])  # type: ignore[arg-type]
            and spec.get("EnvironmentVariables") == wanted.get("EnvironmentVariables"),
        )


# -- Windows ----------------------------------------------------------------------------


class RunKeyRegistry(Protocol):
    """The three operations on the per-user Run key that autostart needs."""

    def get(self, name: str) -> str | None: ...

    def set(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> None: ...


class WinregRunKey:
    """:class:`RunKeyRegistry` on the real registry (Windows only)."""

    def __init__(self) -> None:
        import winreg

        self._winreg = winreg

    def get(self, name: str) -> str | None:
        w = self._winreg
        try:
            with w.OpenKey(w.HKEY_CURRENT_USER, RUN_KEY) as key:
                value, _kind = w.QueryValueEx(key, name)
        except FileNotFoundError:
            return None
        return str(value)

    def set(self, name: str, value: str) -> None:
        w = self._winreg
        with w.CreateKeyEx(w.HKEY_CURRENT_USER, RUN_KEY, 0, w.KEY_SET_VALUE) as key:
            w.SetValueEx(key, name, 0, w.REG_SZ, value)

    def delete(self, name: str) -> None:
        w = self._winreg
        try:
            with w.OpenKey(w.HKEY_CURRENT_USER, RUN_KEY, 0, w.KEY_SET_VALUE) as key:
                w.DeleteValue(key, name)
        except FileNotFoundError:
            pass


def windows_command_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """A Run-key command line. The Run key has no environment of its own, so a chosen home
    travels as ``--home`` (which ``hostapp agent`` accepts for this purpose)."""
    import subprocess

    args = list(argv)
    if HOME_ENV in env:
        args += ["--home", env[HOME_ENV]]
    return subprocess.list2cmdline(args)


class WindowsRunKey:
    """The per-user Run key value ``hostapp``."""

    def __init__(self, registry: RunKeyRegistry | None = None, environ: Mapping[str, str] | None = None) -> None:
        self._registry = registry if registry is not None else WinregRunKey()
        self._environ = os.environ if environ is None else environ

    def command_line(self) -> str:
        argv, env = agent_command(self._environ)
        return windows_command_line(argv, env)

    def enable(self) -> AutostartStatus:
        self._registry.set(RUN_VALUE, self.command_line())
        return self.status()

    def disable(self) -> AutostartStatus:
        self._registry.delete(RUN_VALUE)
        return self.status()

    def status(self) -> AutostartStatus:
        value = self._registry.get(RUN_VALUE)
        where = f"HKEY_CURRENT_USER\\{RUN_KEY}\\{RUN_VALUE}"
        if not value:
            return AutostartStatus(enabled=False, location=where)
        return AutostartStatus(enabled=True, location=where, command=(value,), current=value == self.command_line())


def for_platform(platform: str | None = None) -> Autostart:
    """The autostart of the platform this process runs on (or of ``platform``)."""
    name = platform or sys.platform
    if name.startswith("win"):
        return WindowsRunKey()
    if name == "darwin":
        return LaunchAgent()
    return XdgAutostart()
