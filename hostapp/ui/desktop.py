"""Handing an address to the person's browser, and learning whether that worked.

On Linux and the other freedesktop systems Qt hands an address to ``xdg-open`` and
reports success as soon as ``xdg-open`` has started, even when it then finds no browser
and exits with an error: a prompt would close as if the page had opened. So there
``xdg-open`` is run here and its exit status waited for, a little: an error within
:data:`VERDICT_SECONDS` is a failure, with its own words; still running then (a browser
that stays in the foreground) or a clean exit is success. Elsewhere (Windows, macOS,
no ``xdg-open``) Qt's answer is the answer.
"""

from __future__ import annotations

import shutil
import sys

import shiboken6
from PySide6.QtCore import QObject, QProcess, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices

#: How long ``xdg-open`` is given to fail before the address counts as opened.
VERDICT_SECONDS = 3.0

#: Launchers still running after their verdict: kept, so that Qt does not end them.
_running: set[QProcess] = set()


class UrlOpener(QObject):
    """Opens one address. Signals: ``opened()`` once it was handed over, ``failed(str)``
    with why not, in plain words; exactly one of them, once."""

    opened = Signal()
    failed = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._decided = False

    def open(self, url: str) -> None:
        launcher = shutil.which("xdg-open") if sys.platform not in ("win32", "darwin") else None
        if launcher is None:
            if QDesktopServices.openUrl(QUrl(url)):
                self._decide(None)
            else:
                self._decide("this desktop has no way to open web addresses")
            return
        process = QProcess()
        process.setProgram(launcher)
        process.setArguments([url])
        process.setProcessChannelMode(QProcess.ProcessChannelMode.MergedChannels)
        _running.add(process)

        def finished(code: int, _status: QProcess.ExitStatus) -> None:
            said = bytes(process.readAll().data()).decode(errors="replace").strip().splitlines()
            _running.discard(process)
            process.deleteLater()
            if code == 0:
                self._decide(None)
            else:
                self._decide(f"xdg-open found no browser: {said[-1]}" if said else f"xdg-open failed ({code})")

        def not_started(error: QProcess.ProcessError) -> None:
            if error == QProcess.ProcessError.FailedToStart:
                _running.discard(process)
                process.deleteLater()
                self._decide("xdg-open could not be started")

        process.finished.connect(finished)
        process.errorOccurred.connect(not_started)
        process.start()
        verdict = QTimer(self)  # goes with this opener: no verdict for an opener already gone
        verdict.setSingleShot(True)
        verdict.timeout.connect(lambda: self._decide(None))
        verdict.start(int(VERDICT_SECONDS * 1000))

    def _decide(self, problem: str | None) -> None:
        if self._decided or not shiboken6.isValid(self):  # decided, or its prompt closed meanwhile
            return
        self._decided = True
        if problem is None:
            self.opened.emit()
        else:
            self.failed.emit(problem)
