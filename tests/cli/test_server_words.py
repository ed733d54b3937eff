"""Every line the command line prints from a server goes through one sanitizer, and JSON
output escapes what could drive a terminal. The server is real (tests/support/
hostile_server.py --evil-text on stdio): its tool's name and description and its error
messages carry an OSC 52 clipboard write, an OSC 8 link, a carriage return, an 8-bit CSI
and a bidi override."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hostapp.cli.text import json_text, terminal_safe
from tests.support.hostile_server import EVIL, stdio_command

pytestmark = pytest.mark.timeout(120)

#: What must never reach a terminal raw.
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOSTAPP_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "hostapp", *args], capture_output=True, text=True, env=env,
                          timeout=90)


def assert_inert(text: str) -> None:
    assert not [c for c in RAW if c in text], repr(text)


def test_tools_skills_and_errors_print_server_words_inert(isolated_home: Path):
    assert run(isolated_home, "servers", "add", "hostile", "--", *stdio_command(evil_text=True)).returncode == 0

    tools = run(isolated_home, "tools", "hostile")
    assert tools.returncode == 0, tools.stderr
    assert_inert(tools.stdout + tools.stderr)
    assert "invoice-<U+202E>fdp.exe" in tools.stdout  # there, and visibly not what it pretends

    listed = run(isolated_home, "tools", "hostile", "--json")
    assert_inert(listed.stdout)
    [evil] = [t for t in json.loads(listed.stdout) if t["name"].startswith("evil")]
    assert evil["description"] == EVIL  # escaped, not lost

    for args in (["skills", "hostile"], ["skills", "hostile", "some-skill"]):
        failed = run(isolated_home, *args)
        assert failed.returncode != 0
        assert failed.stderr.startswith("hostapp: ") and "OVERWRITTEN" in failed.stderr, failed.stderr
        assert_inert(failed.stdout + failed.stderr)


def test_the_sanitizer_and_the_json_escapes():
    assert terminal_safe("a\u202eb\x1b[2Jc\nd\te") == "a<U+202E>b\ufffd[2Jc\nd\te"
    text = json_text({"k": EVIL + "\x7f\u2066\ud800"})
    assert_inert(text)
    assert "\x7f" not in text and "\u2066" not in text
    assert json.loads(text) == {"k": EVIL + "\x7f\u2066\ud800"}
