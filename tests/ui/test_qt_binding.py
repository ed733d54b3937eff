"""The Qt binding itself: a regression guard for a PySide6 release that broke the app.

PySide6-Essentials 6.12.0 drops one reference to ``True`` on every ``Signal.emit()`` from
Python 3.11; the process aborts ("bool_dealloc") after a few thousand emits, which the
window reaches within seconds under load. pyproject.toml keeps the binding below it.
"""

import sys

from PySide6.QtCore import QObject, Signal


class Emitter(QObject):
    ping = Signal()


def test_emitting_a_signal_leaves_reference_counts_alone(qapp):
    emitter = Emitter()
    received = []
    emitter.ping.connect(lambda: received.append(1))
    before = sys.getrefcount(True)
    for _ in range(1000):
        emitter.ping.emit()
    after = sys.getrefcount(True)
    assert len(received) == 1000
    assert abs(after - before) < 50, f"True lost {before - after} references over 1000 emits"
