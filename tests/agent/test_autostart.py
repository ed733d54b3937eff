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
from tests.support.waiting import until

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
    subprocess.run(["gio", "launch", str(entry)], check=True, env=env, timeout=30)

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
        *autostart.self_command(),
        "agent",
        "--autostart",
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
    assert xdg.status().command == (*autostart.self_command(), "agent", "--autostart")


def test_launch_agent_plist(tmp_path: Path):
    agent = LaunchAgent(home=tmp_path, environ={"HOSTAPP_HOME": "/Users/me/hostapp home"})
    assert agent.status().enabled is False
    status = agent.enable()
    assert agent.path == tmp_path / "Library" / "LaunchAgents" / "io.github.hostapp.hostapp.plist"
    spec = plistlib.loads(agent.path.read_bytes())
    assert spec["Label"] == "io.github.hostapp.hostapp"
    assert spec["ProgramArguments"] == [*autostart.self_command(), "agent", "--autostart"]
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
    monkeypatch.setattr(autostart, "self_command", lambda: [r"C:\Program Files\hostapp\hostapp.exe"])
    registry = _Registry()
    run = WindowsRunKey(registry, environ={"HOSTAPP_HOME": r"D:\work\my home"})
    status = run.enable()
    value = registry.values["hostapp"]
    assert value.startswith('"C:\\Program Files\\hostapp\\hostapp.exe" agent --autostart --home ')
    assert value.endswith(' --home "' + str(Path(r"D:\work\my home").resolve()) + '"')
    assert status.enabled and status.current
    assert "CurrentVersion\\Run" in status.location
    assert run.disable().enabled is False
    assert registry.values == {}


def test_for_platform_picks_each_kind():
    assert isinstance(autostart.for_platform("linux"), XdgAutostart)
    assert isinstance(autostart.for_platform("darwin"), LaunchAgent)
