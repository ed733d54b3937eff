"""The agent's Unix socket is trusted only when it is this user's own.

A home deep enough that ``<home>/agent/agent.sock`` cannot be a Unix socket's path puts the
socket in a per-user folder elsewhere. When that folder is in the shared temporary
directory, another local user can make it first and listen there: the client must send
nothing to such a listener (``add_server`` carries secret header values). These tests run
a real listener as another user (``nobody``), which needs root; and check that the
fallback goes to ``$XDG_RUNTIME_DIR`` where it is set, with a real agent.
"""

from __future__ import annotations

import os
import pwd
import select
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hostapp.agent.client import AgentRefused, RemoteEngine, connect_or_spawn
from hostapp.agent.endpoint import endpoint_path
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect

#: Binds a Unix socket as root, hands the socket (and, when asked, its folder) to another
#: user, listens as that user, and reports every connection and how many bytes it got.
#: The peer credentials a client sees are those of the process that called listen().
_LISTENER = r"""
import os, select, socket, sys
path, uid, give_folder = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.bind(path)
os.chown(path, uid, uid)
if give_folder:
    os.chown(os.path.dirname(path), uid, uid)
os.setgid(uid)
os.setuid(uid)
sock.listen(8)
print("listening", flush=True)
got = []
while True:
    ready, _, _ = select.select([sock, sys.stdin], [], [])
    if sock not in ready:
        break  # told to stop, and no connection waits
    conn, _ = sock.accept()
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    got.append(len(data))
print("connections", len(got), "bytes", sum(got), flush=True)
"""


def _nobody() -> int:
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("a listener of another user needs root on Linux")
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no user 'nobody' to listen as")


@pytest.fixture
def shared_tmp():
    """A shared temporary directory of the test's own (mode 1777, as /tmp is), at a short
    path: the per-user folder and socket the agent puts in it must fit a Unix socket's path
    however deep pytest's own temporary folders are numbered."""
    folder = Path(tempfile.mkdtemp(prefix="hs-", dir="/tmp"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _deep_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_tmp: Path) -> Path:
    """A home whose socket path is too long, and ``shared_tmp`` as the temporary directory."""
    home = tmp_path / ("h" * 60) / ("o" * 60)
    home.mkdir(parents=True)
    monkeypatch.setenv("HOSTAPP_HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(shared_tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    return home


class _Squatter:
    """A listener of another user at ``path``."""

    def __init__(self, path: Path, uid: int, *, give_folder: bool) -> None:
        argv = [sys.executable, "-c", _LISTENER, str(path), str(uid), "1" if give_folder else "0"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "listening"

    def report(self) -> tuple[int, int]:
        """(connections, bytes received), once the listener is told to stop."""
        out, _ = self.proc.communicate("", timeout=60)
        words = out.split()
        return int(words[1]), int(words[3])


@pytest.fixture
def squatters():
    made: list[_Squatter] = []

    def make(path: Path, uid: int, *, give_folder: bool) -> _Squatter:
        made.append(_Squatter(path, uid, give_folder=give_folder))
        return made[-1]

    yield make
    for squatter in made:
        if squatter.proc.poll() is None:
            squatter.proc.kill()
            squatter.proc.wait()


async def test_a_socket_folder_another_user_made_first_is_refused_and_sent_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squatters, shared_tmp: Path):
    nobody = _nobody()
    home = _deep_home(tmp_path, monkeypatch, shared_tmp)
    path = endpoint_path(home)
    assert path.parent == shared_tmp / f"hostapp-{os.getuid()}"
    path.parent.mkdir(mode=0o700)
    squatter = squatters(path, nobody, give_folder=True)

    with pytest.raises(AgentRefused, match="belongs to another user"):
        await RemoteEngine.connect(path, client="test")
    # Starting an agent would not help (it cannot listen there): the client says so at once.
    with pytest.raises(AgentRefused, match="belongs to another user"):
        await connect_or_spawn(home, client="test", timeout=60)
    assert squatter.report() == (0, 0)


async def test_a_listener_of_another_user_in_a_private_folder_is_refused_before_hello(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, squatters, shared_tmp: Path):
    nobody = _nobody()
    home = _deep_home(tmp_path, monkeypatch, shared_tmp)
    path = endpoint_path(home)
    path.parent.mkdir(mode=0o700)  # this user's own, as the agent makes it
    squatter = squatters(path, nobody, give_folder=False)

    with pytest.raises(AgentRefused, match=f"runs as another user \\(uid {nobody}\\)"):
        await RemoteEngine.connect(path, client="test")
    assert squatter.report() == (1, 0)  # it was reached, and told nothing


async def test_a_socket_folder_open_to_others_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_tmp: Path):
    home = _deep_home(tmp_path, monkeypatch, shared_tmp)
    path = endpoint_path(home)
    path.parent.mkdir()
    os.chmod(path.parent, 0o755)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(path))
        listener.listen(1)
        with pytest.raises(AgentRefused, match="mode 0755"):
            await RemoteEngine.connect(path, client="test")
        assert select.select([listener], [], [], 0)[0] == []  # no connection waits to be accepted
    finally:
        listener.close()
    path.unlink()
    os.rmdir(path.parent)
    os.symlink(tmp_path, path.parent)
    with pytest.raises(AgentRefused, match="link"):
        await RemoteEngine.connect(path, client="test")


async def test_a_deep_home_puts_its_socket_in_the_users_runtime_folder(
        agents: Agents, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_tmp: Path):
    home = tmp_path / ("h" * 60) / ("o" * 60)
    home.mkdir(parents=True)
    runtime = shared_tmp / "run"  # a short path, as the system's /run/user/<uid> is
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("HOSTAPP_HOME", str(home))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    agents.home = home
    agents.env.update(HOSTAPP_HOME=str(home), XDG_RUNTIME_DIR=str(runtime))

    path = endpoint_path(home)
    assert path.parent == runtime / "hostapp"
    owner = agents.start("--idle-exit", "600")
    engine = await _connect(home)
    try:
        assert engine.agent["pid"] == owner.pid
        assert path.is_socket() and (path.parent.stat().st_mode & 0o777) == 0o700
    finally:
        await engine.close()

    # A runtime folder that is not the user's own alone is not used.
    os.chmod(runtime, 0o755)
    assert endpoint_path(home).parent == Path(tempfile.gettempdir()) / f"hostapp-{os.getuid()}"
