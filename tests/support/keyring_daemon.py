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

import os
import shutil
import signal
import subprocess
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


@dataclass
class KeyringDaemon:
    """A running private session bus with a Secret Service on it."""

    bus_address: str
    password: str
    base_dir: Path
    env: dict[str, str] = field(default_factory=dict)  # for subprocesses
    _bus_pid: int = 0
    _keyring_process: subprocess.Popen | None = None

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

    def stop(self) -> None:
        """Stop gnome-keyring and the bus (only the processes this helper started)."""
        process = self._keyring_process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._keyring_process = None
        if self._bus_pid:
            try:
                os.kill(self._bus_pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            self._bus_pid = 0


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

    # --fork: the bus daemonises itself and prints its address and pid once it listens.
    bus = subprocess.run(
        ["dbus-daemon", "--session", "--fork", "--nopidfile", "--print-address=1", "--print-pid=1"],
        env=daemon_env,
        capture_output=True,
        text=True,
        timeout=_READY_TIMEOUT,
        check=False,
    )
    lines = bus.stdout.split()
    if bus.returncode != 0 or len(lines) < 2:
        raise KeyringDaemonError(f"dbus-daemon did not start: {bus.stderr.strip() or bus.stdout.strip()}")
    address, bus_pid = lines[0], int(lines[1])
    daemon = KeyringDaemon(bus_address=address, password=password, base_dir=base_dir, _bus_pid=bus_pid)
    daemon_env["DBUS_SESSION_BUS_ADDRESS"] = address
    try:
        # --unlock reads the login password from stdin until EOF; with no login keyring
        # yet, it creates one protected by that password, unlocked, as the default.
        process = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            env=daemon_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        daemon._keyring_process = process
        process.stdin.write(password.encode())
        process.stdin.close()
        _wait_until_ready(daemon, address)
    except BaseException:
        daemon.stop()
        raise
    daemon.env = {
        "DBUS_SESSION_BUS_ADDRESS": address,
        "PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring",
    }
    return daemon


def _wait_until_ready(daemon: KeyringDaemon, address: str) -> None:
    """Poll the bus until the default collection exists and is unlocked."""
    import secretstorage
    from jeepney.io.blocking import open_dbus_connection

    deadline = time.monotonic() + _READY_TIMEOUT
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        process = daemon._keyring_process
        if process is not None and process.poll() is not None:
            raise KeyringDaemonError(f"gnome-keyring-daemon exited with status {process.returncode}")
        try:
            with closing(open_dbus_connection(address)) as connection:
                # _default_collection() raises until the login collection exists.
                available = secretstorage.check_service_availability(connection)
                if available and not daemon._default_collection(connection).is_locked():
                    return
        except Exception as exc:  # noqa: BLE001 - any failure here means "not up yet"
            last_error = exc
        time.sleep(0.05)
    raise KeyringDaemonError(f"the Secret Service did not come up: {last_error}")


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
