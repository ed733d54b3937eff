"""Resources end to end through the command line, against servers we did not write:
server-everything (listing with templates, text and blob reads, subscriptions that push
updates) and the `mcp` SDK (a resource of HTML and terminal escapes, every byte value);
and the lab's own resource that changes, as the first run shows it."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading

import pytest

from hostapp.lab.status import STATUS_URI
from tests.support.faults import LabProcess
from tests.support.peers import (
    REPO_ROOT,
    hostapp,
)
from tests.support.sdk_client_features_server import BINARY, HOSTILE_TEXT
from tests.support.waiting import interrupted, until

DOC = "demo://resource/static/document/architecture.md"


@pytest.fixture(scope="module")
def lab_http(tmp_path_factory):
    lab = LabProcess(tmp_path_factory.mktemp("lab") / "lab.sqlite3", "--time-scale", "0.02").start()
    yield lab
    lab.stop()


@pytest.fixture
def ev_home(everything_http, isolated_home):
    added = hostapp("servers", "add", "ev", "--url", everything_http.url, home=isolated_home)
    assert added.returncode == 0, added.stderr
    return isolated_home


@pytest.fixture
def sdk_home(sdk_server, isolated_home):
    added = hostapp("servers", "add", "sdk", "--url", sdk_server.url, home=isolated_home)
    assert added.returncode == 0, added.stderr
    return isolated_home


def test_everything_lists_its_resources_and_templates_and_reads_text_and_blobs(ev_home, tmp_path):
    listing = json.loads(hostapp("resources", "ev", "--json", home=ev_home).stdout)
    assert DOC in {r["uri"] for r in listing["resources"]}
    assert "demo://resource/dynamic/blob/{resourceId}" in {t["uriTemplate"] for t in listing["templates"]}
    assert listing["subscribe"] is True
    shown = hostapp("resources", "ev", home=ev_home).stdout
    assert f"architecture.md {DOC} (text/markdown)" in shown and "template: Dynamic Blob Resource" in shown

    text = hostapp("resources", "ev", "read", DOC, home=ev_home)
    assert text.returncode == 0 and text.stdout.startswith("# Everything Server")

    blob_uri = "demo://resource/dynamic/blob/1"
    said = hostapp("resources", "ev", "read", blob_uri, home=ev_home)
    assert said.returncode == 0 and said.stdout == "" and "save it with --output" in said.stderr
    out = tmp_path / "blob.bin"
    saved = hostapp("resources", "ev", "read", blob_uri, "--output", str(out), home=ev_home)
    assert saved.returncode == 0, saved.stderr
    # the server makes the blob anew at each read (it says when): the bytes it sent, decoded
    assert out.read_bytes().startswith(b"Resource 1: This is a base64 blob") and out.stat().st_mode & 0o777 == 0o600
    [content] = json.loads(hostapp("resources", "ev", "read", blob_uri, "--json", home=ev_home).stdout)["contents"]
    assert base64.b64decode(content["blob"]).startswith(b"Resource 1: This is a base64 blob")


def test_a_watch_prints_each_update_the_server_pushes_until_ctrl_c(ev_home, agents):
    agents.start("--idle-exit", "600")
    watch = subprocess.Popen([sys.executable, "-m", "hostapp", "resources", "ev", "watch", DOC, "--json"],
                             cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HOSTAPP_HOME": str(ev_home)})
    lines: list[dict] = []

    def read() -> None:
        assert watch.stdout is not None
        for line in watch.stdout:
            lines.append(json.loads(line))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        until(lambda: lines, what="the watch to start")
        assert lines[0] == {"event": "watching", "server": "ev", "uri": DOC}
        # server-everything pushes updates of what a session subscribed to once asked to
        toggled = hostapp("call", "ev", "toggle-subscriber-updates", home=ev_home)
        assert toggled.returncode == 0, toggled.stderr
        until(lambda: len(lines) >= 2, what="an update to be printed")
        assert lines[1]["event"] == "updated" and lines[1]["uri"] == DOC and lines[1]["server"] == "ev"
    finally:
        err = interrupted(watch)
    assert watch.returncode == 130, err


def test_the_labs_status_is_listed_read_and_watched_as_it_changes(lab_http, isolated_home, agents):
    """The first run's lab-http (MCP 2025-11-25): lab://status ticks every 5 s of the lab's
    clock (0.1 s here), and each tick reaches a watch."""
    added = hostapp("servers", "add", "lab-http", "--url", lab_http.url, "--protocol-version", "2025-11-25",
                    home=isolated_home)
    assert added.returncode == 0, added.stderr
    agents.start("--idle-exit", "600")
    shown = hostapp("resources", "lab-http", home=isolated_home)
    assert shown.returncode == 0 and f"Lab status {STATUS_URI} (text/plain)" in shown.stdout, shown
    read = hostapp("resources", "lab-http", "read", STATUS_URI, home=isolated_home)
    assert read.returncode == 0 and read.stdout.startswith("hostapp lab\ntick ") and "jobs in all: " in read.stdout

    watch = subprocess.Popen([sys.executable, "-m", "hostapp", "resources", "lab-http", "watch", STATUS_URI],
                             cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "HOSTAPP_HOME": str(isolated_home)})
    lines: list[str] = []

    def collect() -> None:
        assert watch.stdout is not None
        lines.extend(line.rstrip("\n") for line in watch.stdout)

    threading.Thread(target=collect, daemon=True).start()
    try:
        until(lambda: len(lines) >= 2, what="two updates of lab://status to be printed")
    finally:
        err = interrupted(watch)
    assert watch.returncode == 130, err
    assert all(line.endswith(f" updated {STATUS_URI}") for line in lines[:2]), lines  # the "watching" line is on stderr


def test_server_text_is_printed_literally_and_binary_only_saved(sdk_home, tmp_path):
    shown = hostapp("resources", "sdk", "read", "text://hostile", home=sdk_home)
    assert shown.returncode == 0, shown.stderr
    assert "<b>bold</b> <script>alert(1)</script>" in shown.stdout  # as written, not rendered
    assert not any(c in shown.stdout for c in "\x1b\x07\r")  # no escape reaches the terminal
    assert "[31mred" in shown.stdout and "over" in shown.stdout and "written" in shown.stdout
    raw = json.loads(hostapp("resources", "sdk", "read", "text://hostile", "--json", home=sdk_home).stdout)
    assert raw["contents"][0]["text"] == HOSTILE_TEXT  # --json keeps it whole, escaped as JSON
    out = tmp_path / "text.html"
    assert hostapp("resources", "sdk", "read", "text://hostile", "--output", str(out), home=sdk_home).returncode == 0
    assert out.read_bytes().decode() == HOSTILE_TEXT  # a file asked for gets the text as sent

    said = hostapp("resources", "sdk", "read", "bin://bytes", home=sdk_home)
    assert said.returncode == 0 and said.stdout == "" and "binary" in said.stderr
    out = tmp_path / "bytes.bin"
    assert hostapp("resources", "sdk", "read", "bin://bytes", "--output", str(out), home=sdk_home).returncode == 0
    assert out.read_bytes() == BINARY


def test_what_cannot_be_done_is_said(sdk_home):
    no_uri = hostapp("resources", "sdk", "read", home=sdk_home)
    assert no_uri.returncode == 2 and "needs the resource's URI" in no_uri.stderr
    stray = hostapp("resources", "sdk", "text://hostile", home=sdk_home)
    assert stray.returncode == 2 and "choose from 'read', 'watch'" in stray.stderr
    no_subscriptions = hostapp("resources", "sdk", "watch", "text://hostile", home=sdk_home)
    assert no_subscriptions.returncode == 1
    assert "subscriptions" in no_subscriptions.stderr
    unknown = hostapp("resources", "sdk", "read", "text://nothing-here", home=sdk_home)
    assert unknown.returncode == 1 and "hostapp:" in unknown.stderr
