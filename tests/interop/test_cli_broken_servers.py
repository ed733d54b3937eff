"""`hostapp` against broken and hostile servers, and in hostile surroundings: a server
command whose arguments look like options, servers that never answer, answers that do
not fit the form, a closed pipe, Ctrl+C. Real processes throughout: the command line,
the lab server, and a stdio server that never answers (tests/support/silent_server.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.peers import hostapp

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def lab_command(home: Path) -> list[str]:
    return [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(home / "lab.sqlite3")]


# -- the server command after "--" -------------------------------------------------------

def test_servers_add_takes_the_command_and_its_dash_arguments_after_double_dash(isolated_home):
    added = hostapp("servers", "add", "lab", "--", *lab_command(isolated_home), home=isolated_home)
    assert added.returncode == 0, added.stderr
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert [server["command"], *server["args"]] == lab_command(isolated_home)
    tools = hostapp("tools", "lab", "--json", home=isolated_home)
    assert tools.returncode == 0, tools.stderr
    assert "sleep_with_progress" in {t["name"] for t in json.loads(tools.stdout)}


def test_servers_add_arg_with_equals_sign_keeps_working(isolated_home):
    command, *args = lab_command(isolated_home)
    argv = ["servers", "add", "lab", "--command", command, *(f"--arg={a}" for a in args)]
    assert hostapp(*argv, home=isolated_home).returncode == 0
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert server["args"] == args


def test_servers_add_refuses_a_command_given_twice_or_not_at_all(isolated_home):
    both = hostapp("servers", "add", "x", "--command", "npx", "--", "npx", "-y", home=isolated_home)
    assert both.returncode == 2 and "not both" in both.stderr
    empty = hostapp("servers", "add", "x", "--", home=isolated_home)
    assert empty.returncode == 2 and "after --" in empty.stderr


def test_servers_add_help_shows_the_double_dash_form(isolated_home):
    helped = hostapp("servers", "add", "--help", home=isolated_home)
    assert "hostapp servers add local -- npx -y @modelcontextprotocol/server-everything" in helped.stdout


def test_readme_stdio_example_is_accepted(isolated_home):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    [example] = [line for line in readme.splitlines() if line.startswith("hostapp servers add local ")]
    added = hostapp(*example.split()[1:], home=isolated_home)
    assert added.returncode == 0, added.stderr
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert [server["command"], *server["args"]] == ["npx", "-y", "@modelcontextprotocol/server-everything"]
