"""Autostart entries: the XDG one is read back by a real launcher; the macOS and Windows
ones are generated and checked as data (their platforms are not here)."""

from __future__ import annotations

import json
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.agent import autostart
from hostapp.agent.autostart import (
    LaunchAgent,
    WindowsRunKey,
    XdgAutostart,
    exec_line,
    parse_exec_line,
)
from tests.support.waiting import DEADLINE, until

AWKWARD = ['plain', 'two words', 'quote"d', "it's", 'back\\slash', '$HOME', '`tick`', '100%', '%u', 'tab\there', '']


def test_exec_line_round_trips_awkward_arguments():
    line = exec_line(AWKWARD, {"HOSTAPP_HOME": "/tmp/a home/with $dollar"})
    assert "\n" not in line
    assert parse_exec_line(line) == ["env", "HOSTAPP_HOME=/tmp/a home/with $dollar", *AWKWARD]


def test_unterminated_quote_is_an_error():
    with pytest.raises(ValueError):
        parse_exec_line('"open')


@pytest.mark.skipif(shutil.which("gio") is None, reason="needs gio (Debian libglib2.0-bin)")
def test_a_real_launcher_runs_the_exec_line_as_written(tmp_path: Path):
    """GLib's launcher (what GNOME's session manager uses) runs our Exec line with no
    display, and the program receives exactly the arguments and environment we wrote."""
    out = tmp_path / "seen.json"
    probe = ("import json,os,sys; "
             "json.dump({'argv': sys.argv[1:], 'home': os.environ.get('HOSTAPP_HOME')}, open(sys.argv[1], 'w'))")
    args = [str(out), *[a for a in AWKWARD if a not in ("", "tab\there")]]
    home = str(tmp_path / "my home $x")
    entry = tmp_path / "probe.desktop"
    entry.write_text(
        "[Desktop Entry]\nType=Application\nName=probe\n"
        f"Exec={exec_line([sys.executable, '-c', probe, *args], {'HOSTAPP_HOME': home})}\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    subprocess.run(["gio", "launch", str(entry)], check=True, env=env, timeout=DEADLINE)

    def written() -> dict | None:
        try:
            return json.loads(out.read_text())
        except (FileNotFoundError, json.JSONDecodeError):  # not yet, or not all of it yet
            return None

    seen = until(written, what="the launched program to write what it received", interval=0.05)
    assert seen == {"argv": args, "home": home}


def test_xdg_entry_enable_status_disable(tmp_path: Path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "HOSTAPP_HOME": str(tmp_path / "home dir")}
    xdg = XdgAutostart(environ=env)
    assert xdg.path == tmp_path / "cfg" / "autostart" / "io.github.hostapp.hostapp.desktop"
    assert xdg.status().enabled is False

    status = xdg.enable()
    assert status.enabled and status.current
    assert status.command == (
        "env",
        f"HOSTAPP_HOME={(tmp_path / 'home dir').resolve()}",
        *autostart.launcher_command(),
        "agent",
        "--autostart",
        "--tray",
    )
    text = xdg.path.read_text()
    assert "Type=Application" in text and "NoDisplay=true" in text

    # Another installation (or another home) wrote it: enabled, but not this one.
    other = XdgAutostart(environ={**env, "HOSTAPP_HOME": str(tmp_path / "other")})
    assert other.status().enabled and not other.status().current

    # A person switched it off in their session settings.
    xdg.path.write_text(text.replace("X-GNOME-Autostart-enabled=true", "X-GNOME-Autostart-enabled=false"))
    assert xdg.status().enabled is False
    xdg.path.write_text(text + "Hidden=true\n")
    assert xdg.status().enabled is False

    assert xdg.disable().enabled is False
    assert not xdg.path.exists()
    assert xdg.disable().enabled is False  # twice is fine


def test_xdg_config_home_unset_or_relative_means_dot_config(monkeypatch, tmp_path: Path):
    monkeypatch.setenv("HOME", str(tmp_path))
    for env in ({}, {"XDG_CONFIG_HOME": "relative/dir"}):
        expected = tmp_path / ".config" / "autostart" / "io.github.hostapp.hostapp.desktop"
        assert XdgAutostart(environ=env).path == expected


def test_without_a_chosen_home_the_entry_sets_no_environment(tmp_path: Path):
    xdg = XdgAutostart(config_home=tmp_path, environ={})
    xdg.enable()
    assert xdg.status().command == (*autostart.launcher_command(), "agent", "--autostart", "--tray")


def test_launch_agent_plist(tmp_path: Path):
    agent = LaunchAgent(home=tmp_path, environ={"HOSTAPP_HOME": "/Users/me/hostapp home"})
    assert agent.status().enabled is False
    status = agent.enable()
    assert agent.path == tmp_path / "Library" / "LaunchAgents" / "io.github.hostapp.hostapp.plist"
    spec = plistlib.loads(agent.path.read_bytes())
    assert spec["Label"] == "io.github.hostapp.hostapp"
    assert spec["ProgramArguments"] == [*autostart.launcher_command(), "agent", "--autostart", "--tray"]
    assert spec["RunAtLoad"] is True
    assert spec["EnvironmentVariables"] == {"HOSTAPP_HOME": str(Path("/Users/me/hostapp home").resolve())}
    assert status.enabled and status.current
    assert LaunchAgent(home=tmp_path, environ={}).status().current is False
    assert agent.disable().enabled is False


class _Registry:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def set(self, name: str, value: str) -> None:
        self.values[name] = value

    def delete(self, name: str) -> None:
        self.values.pop(name, None)


def test_windows_run_key(monkeypatch):
    monkeypatch.setattr(autostart, "launcher_command", lambda: [r"C:\Program Files\hostapp\hostapp.exe"])
    registry = _Registry()
    run = WindowsRunKey(registry, environ={"HOSTAPP_HOME": r"D:\work\my home"})
    status = run.enable()
    value = registry.values["hostapp"]
    assert value.startswith('"C:\\Program Files\\hostapp\\hostapp.exe" agent --autostart --tray --home ')
    assert value.endswith(' --home "' + str(Path(r"D:\work\my home").resolve()) + '"')
    assert status.enabled and status.current
    assert "CurrentVersion\\Run" in status.location
    assert run.disable().enabled is False
    assert registry.values == {}


def test_for_platform_picks_each_kind():
    assert isinstance(autostart.for_platform("linux"), XdgAutostart)
    assert isinstance(autostart.for_platform("darwin"), LaunchAgent)


def test_a_login_entry_runs_the_installed_launcher_not_an_interpreter_and_a_module(tmp_path: Path):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python3"
    assert autostart.launcher_command(str(python), frozen=False) == [str(python), "-m", "hostapp"]
    launcher = bin_dir / "hostapp"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    assert autostart.launcher_command(str(python), frozen=False) == [str(launcher)]
    assert autostart.launcher_command("/opt/hostapp/hostapp", frozen=True) == ["/opt/hostapp/hostapp"]
    # This installation: pip made the launcher beside the interpreter, and the entry runs it.
    here = Path(sys.executable).with_name("hostapp")
    if here.is_file():
        assert autostart.agent_command({})[0][0] == str(here)


def test_enabling_installs_the_icon_the_entry_names_in_the_hicolor_theme(tmp_path: Path, qapp):
    from PySide6.QtGui import QIcon

    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_DATA_HOME": str(tmp_path / "data")}
    xdg = XdgAutostart(environ=env)
    xdg.enable()
    icon_name = next(line.split("=", 1)[1] for line in xdg.path.read_text().splitlines() if line.startswith("Icon="))
    svg = tmp_path / "data" / "icons" / "hicolor" / "scalable" / "apps" / f"{icon_name}.svg"
    png = tmp_path / "data" / "icons" / "hicolor" / "64x64" / "apps" / f"{icon_name}.png"
    assert svg.read_bytes() == (autostart.RESOURCES / "hostapp.svg").read_bytes()
    assert png.read_bytes() == (autostart.RESOURCES / "hostapp-64.png").read_bytes()
    # An icon theme lookup by that name (Qt's own) finds it there: the user's hicolor folder
    # is merged with the theme the system describes (its index.theme).
    system = Path("/usr/share/icons")
    if not (system / "hicolor" / "index.theme").is_file():
        pytest.skip("needs the hicolor icon theme (Debian: hicolor-icon-theme)")
    paths, theme = QIcon.themeSearchPaths(), QIcon.themeName()
    try:
        QIcon.setThemeSearchPaths([str(tmp_path / "data" / "icons"), str(system)])
        QIcon.setThemeName("hicolor")
        assert not QIcon.fromTheme(icon_name).isNull()
    finally:
        QIcon.setThemeSearchPaths(paths)
        QIcon.setThemeName(theme)


def _tray_windows(home: Path) -> list[int]:
    """The window processes started with ``--tray`` on ``home``."""

    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--tray" in argv and b"agent" not in argv and f"HOSTAPP_HOME={home}".encode() in environ:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the window's process in /proc")
def test_the_agent_started_at_login_with_a_display_shows_the_tray_icon(agents):
    """`hostapp agent --autostart --tray` (what the login entries run), where the session
    has a display: the window process starts, hidden behind its tray icon where there is a
    tray, and connects to the agent; without a display, none starts."""
    import os
    import signal

    agents.env = {**agents.env, "DISPLAY": ":0"}  # Qt draws offscreen in the tests; the agent sees a display
    agents.start("--autostart", "--tray")
    def tray_connected() -> dict | None:
        status = json.loads(agents.run("agent", "status", "--json").stdout or "{}")
        return status if status.get("clients", 0) >= 1 and _tray_windows(agents.home) else None

    status = until(tray_connected, what="the tray's window process, connected to the agent", interval=0.2)
    windows = _tray_windows(agents.home)
    try:
        assert windows and status.get("clients", 0) >= 1, status
    finally:
        for pid in windows:
            os.kill(pid, signal.SIGTERM)
    assert agents.run("agent", "stop", "--yes").returncode == 0

    # No display: the agent alone.
    agents.env = {k: v for k, v in agents.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    agents.start("--autostart", "--tray")
    until(lambda: json.loads(agents.run("agent", "status", "--json").stdout or "{}").get("running"),
          what="the agent started at login", interval=0.2)
    assert not _tray_windows(agents.home)
    assert agents.run("agent", "stop", "--yes").returncode == 0
