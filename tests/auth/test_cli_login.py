"""``hostapp servers login NAME`` from a shell: the URL is printed, the browser comes back.

Then the ordinary commands use the sign-in the keyring holds, and the journal's SQLite
file has none of the secrets the authorization server handed out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx

HOSTAPP = [sys.executable, "-m", "hostapp"]


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*HOSTAPP, *args], capture_output=True, text=True, env=env, timeout=60, check=False)


def test_login_prints_the_address_and_the_tools_command_uses_the_sign_in(
        oauth_server, real_keyring, isolated_home: Path):
    env = {**os.environ, **real_keyring.env, "HOSTAPP_HOME": str(isolated_home)}
    assert run(["servers", "add", "protected", "--url", oauth_server.mcp_url], env).returncode == 0

    before = run(["tools", "protected"], env)
    assert before.returncode == 1
    assert "needs sign-in" in before.stderr and "hostapp servers login protected" in before.stderr

    login = subprocess.Popen([*HOSTAPP, "servers", "login", "protected"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = None
        assert login.stdout is not None
        for line in login.stdout:
            if line.strip().startswith("http"):
                url = line.strip()
                break
        assert url is not None, "no authorization URL printed"
        # The person's browser: the authorization server redirects it to the loopback listener.
        browser = threading.Thread(target=lambda: httpx.get(url, follow_redirects=True, timeout=10))
        browser.start()
        out, err = login.communicate(timeout=60)
        browser.join(10)
    finally:
        if login.poll() is None:
            login.kill()
    assert login.returncode == 0, err
    assert "signed in to protected" in out

    tools = run(["tools", "protected"], env)
    assert tools.returncode == 0, tools.stderr
    assert "whoami" in tools.stdout

    issued = oauth_server.issued()
    files = [p for p in isolated_home.rglob("*") if p.is_file()]
    assert any(p.suffix.startswith(".sqlite") or "journal" in p.name for p in files)
    for path in files:
        content = path.read_bytes()
        assert not [s for s in issued if s.encode() in content], f"a secret in {path.name}"
    for text in (before.stderr, out, err, tools.stdout, tools.stderr):
        assert not [s for s in issued if s in text]

    assert run(["servers", "logout", "protected"], env).returncode == 0
    after = run(["tools", "protected"], env)
    assert after.returncode == 1 and "needs sign-in" in after.stderr
