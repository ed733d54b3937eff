"""The PyInstaller bundle: build it from packaging/hostapp.spec and start it once.

The one-folder build takes about half a minute here, so the test runs whenever
PyInstaller is installed (the ``packaging`` extra); HOSTAPP_BUNDLE_TEST=0 skips it,
HOSTAPP_BUNDLE_TEST=1 makes a missing PyInstaller a failure instead of a skip.
The bundle is started the way a person would: its command line (add a server, list
them) and its window (offscreen), which on a fresh home configures the built-in lab
server as the bundle's own executable, which then starts and answers.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WANTED = os.environ.get("HOSTAPP_BUNDLE_TEST")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(WANTED == "0", reason="HOSTAPP_BUNDLE_TEST=0"),
    pytest.mark.skipif(WANTED != "1" and importlib.util.find_spec("PyInstaller") is None,
                       reason="PyInstaller is not installed (pip install '.[packaging]')"),
]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    """The bundle's executable, built into a temporary directory."""
    out = tmp_path_factory.mktemp("bundle")
    build = subprocess.run(
        [sys.executable, "-m", "PyInstaller", "--noconfirm", "--distpath", str(out / "dist"),
         "--workpath", str(out / "work"), str(ROOT / "packaging" / "hostapp.spec")],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=540)
    assert build.returncode == 0, build.stderr[-4000:]
    executable = out / "dist" / "hostapp" / ("hostapp.exe" if sys.platform == "win32" else "hostapp")
    assert executable.is_file()
    return executable


def run_bundle(executable: Path, home: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HOSTAPP_HOME=str(home), QT_QPA_PLATFORM="offscreen",
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    return subprocess.run([str(executable), *argv], check=False, env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_bundle_command_line_runs(bundle, tmp_path):
    home = tmp_path / "home"
    added = run_bundle(bundle, home, "servers", "add", "remote", "--url", "http://127.0.0.1:9/mcp")
    assert added.returncode == 0, added.stderr
    listed = run_bundle(bundle, home, "servers", "list")
    assert listed.returncode == 0, listed.stderr
    assert "remote" in listed.stdout and "http://127.0.0.1:9/mcp" in listed.stdout


def test_bundle_window_starts_and_quits_and_its_lab_runs(bundle, tmp_path):
    home = tmp_path / "home"
    env = dict(os.environ, HOSTAPP_HOME=str(home), QT_QPA_PLATFORM="offscreen",
               PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
    window = subprocess.Popen([str(bundle), "--verbose"], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The first start configures the lab server and writes the window's settings.
        deadline = time.monotonic() + 60
        while not (home / "hostapp.ini").is_file():
            assert window.poll() is None, window.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the window did not start"
            time.sleep(0.2)
        time.sleep(1.0)  # let it connect the lab before quitting
        window.send_signal(signal.SIGINT)   # quits like the Quit action
        _, stderr = window.communicate(timeout=30)
    finally:
        if window.poll() is None:
            window.kill()
            window.communicate()
    assert window.returncode == 0, stderr[-3000:]
    assert "Traceback" not in (home / "logs" / "hostapp.log").read_text(errors="replace")
    listed = run_bundle(bundle, home, "servers", "list")
    assert f"{bundle} lab serve --stdio" in listed.stdout, listed.stdout
    # The configured lab is the bundle itself: it starts and lists its tools.
    tools = run_bundle(bundle, home, "tools", "lab")
    assert tools.returncode == 0, tools.stderr
    assert "sleep_with_progress" in tools.stdout
