"""One window per home: a second launch hands its request to the first and exits.

The first window of a home holds a lock file (:class:`QLockFile`, taken over when its
holder died) and listens on a local socket beside it, both in the home's private runtime
folder (0700; the socket only for the same user). A later launch finds the lock held,
connects, sends one line of JSON (``{"show": OP or null}``), waits for ``ok`` and exits: the
first window comes forward, at that operation when one was named.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

#: How long a second launch keeps trying to reach the first (it may still be starting).
CONNECT_SECONDS = 10.0


class SingleInstance(QObject):
    """The first launch of a home listens; later ones hand over.

    Signals:
        showRequested(str): another launch asked for the window ("" or an operation id).
    """

    showRequested = Signal(str)

    def __init__(self, folder: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
        self.name = str(folder / "window.sock")
        self._lock = QLockFile(str(folder / "window.lock"))
        self._lock.setStaleLockTime(0)  # held while the window runs; stale only when its holder died
        self._server: QLocalServer | None = None

    def claim(self) -> bool:
        """Become the home's window (True), or find that another one is (False)."""
        if not self._lock.tryLock(0):
            return False
        QLocalServer.removeServer(self.name)  # left by a window that died
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            log.warning("a second launch cannot reach this window: %s", server.errorString())
        server.newConnection.connect(self._accept)
        self._server = server
        return True

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()

    def _accept(self) -> None:
        assert self._server is not None
        while (sock := self._server.nextPendingConnection()) is not None:
            sock.readyRead.connect(lambda s=sock: self._read(s))
            sock.disconnected.connect(sock.deleteLater)

    def _read(self, sock: QLocalSocket) -> None:
        if not sock.canReadLine():
            return
        line = bytes(sock.readLine().data())
        try:
            request = json.loads(line)
            op_id = request.get("show") if isinstance(request, dict) else None
        except ValueError:
            log.info("ignored a bad request from another launch")
            sock.disconnectFromServer()
            return
        sock.write(b"ok\n")
        sock.flush()
        sock.disconnectFromServer()
        self.showRequested.emit(str(op_id) if isinstance(op_id, str) else "")

    def hand_over(self, op_id: str | None = None, timeout: float = CONNECT_SECONDS) -> bool:
        """Ask the window of this home to come forward (at ``op_id``); True once it said ok."""
        deadline = time.monotonic() + timeout
        while True:
            sock = QLocalSocket()
            sock.connectToServer(self.name)
            if sock.waitForConnected(1000):
                sock.write(json.dumps({"show": op_id}).encode() + b"\n")
                sock.waitForBytesWritten(2000)
                while not sock.canReadLine() and sock.waitForReadyRead(5000):
                    pass
                answered = sock.canReadLine() and bytes(sock.readLine().data()).strip() == b"ok"
                sock.abort()
                if answered:
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.2)
