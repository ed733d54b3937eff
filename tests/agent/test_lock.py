"""The home's owner lock: one holder at a time, and a killed holder leaves nothing stale."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from hostapp.agent.lock import HomeLock


def test_one_holder_at_a_time(tmp_path: Path):
    first, second = HomeLock(tmp_path), HomeLock(tmp_path)
    assert first.acquire()
    assert first.held
    assert not second.acquire(wait=0.2)
    owner = second.owner()
    assert owner is not None and owner.pid == os.getpid()
    first.release()
    assert first.owner() is None  # a clean release leaves no owner behind
    assert second.acquire()
    second.release()


def test_a_killed_owner_leaves_the_lock_free(tmp_path: Path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from hostapp.agent.lock import HomeLock
                lock = HomeLock({str(tmp_path)!r})
                assert lock.acquire()
                print("held", flush=True)
                time.sleep(60)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        mine = HomeLock(tmp_path)
        assert not mine.acquire()
        assert mine.owner() is not None and mine.owner().pid == holder.pid
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        # The kernel released the dead owner's lock; its note is still there but says nothing.
        assert mine.acquire(wait=5)
        assert mine.owner().pid == os.getpid()
        mine.release()
    finally:
        holder.kill()
        holder.wait()


def test_acquire_waits_for_a_release(tmp_path: Path):
    import threading

    first, second = HomeLock(tmp_path), HomeLock(tmp_path)
    assert first.acquire()
    timer = threading.Timer(0.3, first.release)
    timer.start()
    started = time.monotonic()
    assert second.acquire(wait=10)
    assert time.monotonic() - started < 9
    second.release()
