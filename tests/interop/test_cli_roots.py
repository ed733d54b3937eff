"""Roots end to end: the folders given with ``--root`` reach real servers we did not write
(server-everything's ``get-roots-list``, the `mcp` SDK's ``list_roots``), and a change
made while the agent holds the connection is told to the server on it."""

from __future__ import annotations

import json

import pytest

from tests.support.peers import (
    events,
    hostapp,
)
from tests.support.waiting import until


def result_text(home, server, tool):
    proc = hostapp("call", server, tool, "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    last = events(proc)[-1]
    assert last["event"] == "result", last
    return "\n".join(c.get("text", "") for c in last["result"]["content"])


def test_everything_lists_get_roots_list_and_is_told_of_a_change_on_the_live_connection(
        everything_http, isolated_home, tmp_path, agents):
    first, second = tmp_path / "my project", tmp_path / "naïve#2"
    first.mkdir()
    second.mkdir()
    added = hostapp("servers", "add", "ev", "--url", everything_http.url, "--root", str(first), home=isolated_home)
    assert added.returncode == 0, added.stderr
    listed = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert listed[0]["roots"] == [str(first)]
    agents.start("--idle-exit", "600")
    tools = json.loads(hostapp("tools", "ev", "--json", home=isolated_home).stdout)
    assert "get-roots-list" in {t["name"] for t in tools}  # shown only to a client that declares roots
    text = result_text(isolated_home, "ev", "get-roots-list")
    assert "(1 total)" in text and f"URI: {first.as_uri()}" in text and "my project" in text

    # The same connection (the agent keeps it): the server hears roots/list_changed and
    # asks again; its tool shows what it cached from that answer.
    updated = hostapp("servers", "update", "ev", "--root", str(second), "--root", str(first), home=isolated_home)
    assert updated.returncode == 0, updated.stderr
    until(lambda: f"URI: {second.as_uri()}" in result_text(isolated_home, "ev", "get-roots-list"),
          what="server-everything to hold the new roots")
    text = result_text(isolated_home, "ev", "get-roots-list")
    assert "(2 total)" in text and text.index(second.as_uri()) < text.index(first.as_uri())

    cleared = hostapp("servers", "update", "ev", "--no-roots", home=isolated_home)
    assert cleared.returncode == 0, cleared.stderr
    until(lambda: "no roots are currently configured" in result_text(isolated_home, "ev", "get-roots-list"),
          what="server-everything to hold no roots")


@pytest.mark.parametrize("era, pin", [("handshake", ["--protocol-version", "2025-11-25"]), ("stateless", [])])
def test_the_sdk_server_asks_for_the_roots_and_gets_them_encoded(sdk_server, isolated_home, tmp_path, era, pin):
    folder = tmp_path / "with space & 100%"
    folder.mkdir()
    added = hostapp("servers", "add", "sdk", "--url", sdk_server.url, "--root", str(folder), *pin, home=isolated_home)
    assert added.returncode == 0, added.stderr
    assert result_text(isolated_home, "sdk", "client_roots") == f"{era}: with space & 100% <{folder.as_uri()}>"
    assert "%20" in folder.as_uri() and "%25" in folder.as_uri()


def test_a_root_that_is_not_a_folder_is_refused_and_nothing_is_saved(isolated_home, tmp_path):
    missing = tmp_path / "missing"
    added = hostapp("servers", "add", "x", "--url", "http://127.0.0.1:9/mcp", "--root", str(missing),
                    home=isolated_home)
    assert added.returncode == 2 and "--root" in added.stderr and "does not exist" in added.stderr
    assert json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout) == []
    both = hostapp("servers", "update", "x", home=isolated_home)
    assert both.returncode == 2 and "--no-roots" in both.stderr
