"""Suite-wide settings: no test touches the real home folder or needs a screen."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agents import Agents, agent_processes, agents_fixture
from tests.support.keyring_daemon import KeyringDaemon, missing_programs, private_keyring
from tests.support.peers import start_everything_http, start_sdk_client_features_server

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# An agent that a command starts on demand (every `hostapp call` in a test starts one) exits
# a few seconds after its last client instead of minutes; what is left at a test's end is
# stopped by stop_agents_left.
os.environ.setdefault("HOSTAPP_AGENT_IDLE_EXIT", "3")
# A suite started in the background by a shell without job control (`make test &` in a
# script, `nohup`) inherits SIGINT ignored, and so would every command a test starts: the
# tests that press Ctrl+C on a command (a resource watch, a log follow) waited for ever on
# one that never heard it. The commands start as from a terminal's foreground: Python's
# own handler here means the default disposition in every process started from here.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Each test gets its own HOSTAPP_HOME (state, journal, logs and keyring scope)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOSTAPP_HOME", str(home))
    return home


def _agents_left(root: Path) -> list[tuple[int, str]]:
    """``hostapp agent`` processes whose home lies under ``root``."""
    # With the separator: the homes of pytest-1 are not those of pytest-10 (a second pytest
    # session on the machine, whose agents this one must leave alone).
    prefix = bytes(root).rstrip(os.sep.encode()) + os.sep.encode()
    return [(pid, argv) for pid, argv, home in agent_processes()
            if home is not None and os.fsencode(home).startswith(prefix)]


@pytest.fixture(scope="session")
def real_keyring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KeyringDaemon]:
    """The OS keyring of the tests: gnome-keyring on a private D-Bus session bus, one per
    pytest process (each xdist worker has its own), shared by its tests: every home is a
    scope of its own in it. This process uses it too while it runs; ``daemon.env`` is what a
    subprocess needs to use it (no person's keyring is touched)."""
    missing = missing_programs()
    if missing:
        pytest.fail(f"the tests need {', '.join(missing)} for a private keyring (Debian: dbus, gnome-keyring; "
                    "`make sysdeps` installs them)", pytrace=False)
    with private_keyring(tmp_path_factory.mktemp("keyring")) as daemon:
        yield daemon


@pytest.fixture(scope="session")
def keyring_env(real_keyring: KeyringDaemon) -> dict[str, str]:
    """Environment for host processes that use the tests' private keyring (what resumes an
    operation after a restart is kept there)."""
    return dict(real_keyring.env)


@pytest.fixture
def agents(isolated_home: Path, real_keyring: KeyringDaemon) -> Iterator[Agents]:
    """Owner processes of the test's home, always stopped whatever the test did to them."""
    yield from agents_fixture(isolated_home, real_keyring)


@pytest.fixture(autouse=True)
def stop_agents_left(tmp_path_factory: pytest.TempPathFactory):
    """After each test, agents still running on a home of the tests are stopped (asked with
    SIGTERM, as a logout would; killed after 10 s): the next test starts from nothing, and
    none stays for the session's check."""
    yield
    if not Path("/proc").is_dir():
        return
    left = [pid for pid, _ in _agents_left(tmp_path_factory.getbasetemp().resolve())]
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while left and time.monotonic() < deadline:
        left = [pid for pid in left if _alive(pid)]
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Still running (a zombie waiting for its parent, a test's Popen, counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="session", autouse=True)
def no_agent_left_behind(tmp_path_factory: pytest.TempPathFactory):
    """The suite leaves no background agent running: one still alive at the end fails the run."""
    yield
    if not Path("/proc").is_dir():
        return
    root = tmp_path_factory.getbasetemp().resolve()
    left = _agents_left(root)
    for pid, _ in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    assert not left, f"background agents left running by the tests: {left}"


# Third-party peers shared by a test module's tests (one process per module that asks).
@pytest.fixture(scope="module")
def everything_http():
    """server-everything over Streamable HTTP."""
    peer = start_everything_http()
    yield peer
    peer.stop()


@pytest.fixture(scope="module")
def sdk_server():
    """The `mcp` SDK's server of roots, resources and logs (tests/support/sdk_client_features_server.py)."""
    peer = start_sdk_client_features_server()
    yield peer
    peer.stop()
