"""A real, private Secret Service for tests: D-Bus session bus plus gnome-keyring.

Tests that need the OS keyring must not touch the person's own one, and CI has no
desktop session. :func:`start_keyring_daemon` starts a private ``dbus-daemon`` and a
``gnome-keyring-daemon`` on it whose ``login`` collection is created and unlocked with a
password given on stdin, each with its own XDG directories under a scratch directory.

:func:`private_keyring` (a context manager) also points the current process at it:
``DBUS_SESSION_BUS_ADDRESS`` and keyring's Secret Service backend. ``daemon.env`` holds
the variables a subprocess needs to use the same keyring.

Use in a conftest::

    from tests.support.keyring_daemon import private_keyring

    @pytest.fixture(scope="session")
    def real_keyring(tmp_path_factory):
        with private_keyring(tmp_path_factory.mktemp("keyring")) as daemon:
            yield daemon
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import keyring
from keyring.backends import SecretService

DEFAULT_PASSWORD = "hostapp-test-keyring"
_READY_TIMEOUT = 15.0


class KeyringDaemonError(RuntimeError):
    """The private Secret Service could not be started."""


def missing_programs() -> list[str]:
    """Programs this helper needs that are not on PATH (tests skip when any is missing)."""
    return [name for name in ("dbus-daemon", "gnome-keyring-daemon") if shutil.which(name) is None]


# A session bus of our own with no service directories: nothing can be started by bus
# activation (a second, empty gnome-keyring would otherwise race ours for the name).
_BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:tmpdir={tmpdir}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""
_SECRETS_BUS_NAME = "org.freedesktop.secrets"


# Looked up once here: the child of a fork may only call it, not load libraries.
_prctl = ctypes.CDLL(None, use_errno=True).prctl
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: get SIGTERM when the test process dies, even by SIGKILL."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class KeyringDaemon:
    """A running private session bus with a Secret Service on it."""

    bus_address: str
    password: str
    base_dir: Path
    env: dict[str, str] = field(default_factory=dict)  # for subprocesses
    processes: list[subprocess.Popen] = field(default_factory=list)

    def backend(self) -> SecretService.Keyring:
        """A keyring Secret Service backend (it reaches the bus through the environment)."""
        return SecretService.Keyring()

    def _default_collection(self, connection):
        import secretstorage

        # Not get_default_collection(): that would try to create one behind a prompt.
        return secretstorage.Collection(connection)

    def lock(self) -> None:
        """Lock the default collection (unlocking it again needs a prompt, so this is final)."""
        import secretstorage

        with closing(secretstorage.dbus_init()) as connection:
            self._default_collection(connection).lock()

    def is_locked(self) -> bool:
        import secretstorage

        with closing(secretstorage.dbus_init()) as connection:
            return self._default_collection(connection).is_locked()

    def log(self) -> str:
        """What gnome-keyring-daemon wrote to stderr, for failure messages."""
        path = self.base_dir / "gnome-keyring.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Stop gnome-keyring, then the bus (only the processes this helper started)."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()
        self.processes.clear()


def start_keyring_daemon(base_dir: Path, password: str = DEFAULT_PASSWORD) -> KeyringDaemon:
    """Start a private session bus and an unlocked gnome-keyring on it; see the module doc."""
    missing = missing_programs()
    if missing:
        raise KeyringDaemonError(f"missing programs: {', '.join(missing)} (install dbus and gnome-keyring)")
    base_dir = Path(base_dir)
    home = base_dir / "home"
    runtime = base_dir / "run"
    data = home / ".local" / "share"
    config = home / ".config"
    for directory in (home, runtime, data, config):
        directory.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    daemon_env = {
        **os.environ,
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "XDG_DATA_HOME": str(data),
        "XDG_CONFIG_HOME": str(config),
    }
    daemon_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    bus_config = base_dir / "session-bus.conf"
    # A short socket directory: unix socket paths are limited to about 100 bytes.
    bus_config.write_text(_BUS_CONFIG.format(tmpdir=tempfile.gettempdir()))

    bus = subprocess.Popen(
        ["dbus-daemon", f"--config-file={bus_config}", "--nofork", "--nopidfile", "--print-address=1"],
        env=daemon_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl call, nothing that locks
    )
    daemon = KeyringDaemon(bus_address="", password=password, base_dir=base_dir, processes=[bus])
    try:
        address = bus.stdout.readline().strip()  # printed once the bus listens
        if not address:
            raise KeyringDaemonError(f"dbus-daemon did not start (exit status {bus.wait(5)})")
        daemon.bus_address = address
        daemon_env["DBUS_SESSION_BUS_ADDRESS"] = address
        # --unlock reads the login password from stdin until EOF; with no login keyring
        # yet, it creates one protected by that password, unlocked, as the default.
        with open(base_dir / "gnome-keyring.log", "wb") as log:
            keyring_process = subprocess.Popen(
                ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
                env=daemon_env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=log,
                preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl call, nothing that locks
            )
        daemon.processes.append(keyring_process)
        keyring_process.stdin.write(password.encode())
        keyring_process.stdin.close()
        _wait_until_ready(daemon, keyring_process)
    except BaseException:
        daemon.stop()
        raise
    daemon.env = {
        "DBUS_SESSION_BUS_ADDRESS": address,
        "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
    }
    return daemon


def _wait_until_ready(daemon: KeyringDaemon, keyring_process: subprocess.Popen) -> None:
    """Poll the bus until gnome-keyring owns the Secret Service name and has unlocked its login collection."""
    from jeepney.bus_messages import message_bus
    from jeepney.io.blocking import open_dbus_connection

    deadline = time.monotonic() + _READY_TIMEOUT
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if keyring_process.poll() is not None:
            raise KeyringDaemonError(
                f"gnome-keyring-daemon exited with status {keyring_process.returncode}: {daemon.log()}"
            )
        try:
            with closing(open_dbus_connection(daemon.bus_address)) as connection:
                owned = connection.send_and_get_reply(message_bus.NameHasOwner(_SECRETS_BUS_NAME)).body[0]
                # _default_collection() raises until the login collection exists.
                if owned and not daemon._default_collection(connection).is_locked():
                    return
        except Exception as exc:  # noqa: BLE001 - any failure here means "not up yet"
            last_error = exc
        time.sleep(0.05)
    raise KeyringDaemonError(f"the Secret Service did not come up: {last_error}; {daemon.log()}")


@contextmanager
def private_keyring(base_dir: Path, password: str = DEFAULT_PASSWORD) -> Iterator[KeyringDaemon]:
    """Start a private keyring and make this process use it; undo everything on exit."""
    daemon = start_keyring_daemon(base_dir, password)
    saved_address = os.environ.get("DBUS_SESSION_BUS_ADDRESS")
    saved_backend = keyring.get_keyring()
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = daemon.bus_address
    keyring.set_keyring(daemon.backend())
    try:
        yield daemon
    finally:
        keyring.set_keyring(saved_backend)
        if saved_address is None:
            os.environ.pop("DBUS_SESSION_BUS_ADDRESS", None)
        else:
            os.environ["DBUS_SESSION_BUS_ADDRESS"] = saved_address
        daemon.stop()


def home_entries(scope: str) -> dict[str, str]:
    """Every keyring entry of one home (``SecretStore.scope``) in the current process's
    Secret Service, username -> value, read directly from the daemon."""
    import secretstorage

    from hostapp.store.secrets import keyring_service

    service = keyring_service(scope)
    with closing(secretstorage.dbus_init()) as connection:
        collection = secretstorage.get_default_collection(connection)
        return {item.get_attributes()["username"]: item.get_secret().decode()
                for item in collection.search_items({"service": service})}
