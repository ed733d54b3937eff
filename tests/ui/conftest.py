"""Window tests: offscreen Qt, Qt warnings fail the test, one event loop (the app's) per test."""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest

from hostapp.app import blocking_call_executor
from hostapp.ui.event_loop import HostEventLoop

#: What QtWebEngine (the app view tests) logs about a machine without GPU or system bus.
WEB_ENGINE_NOISE = (r"^QRhiGles2: Failed", r"^Failed to create RHI", r"^QVulkanInstance: Failed",
                    r"^GBM is not supported", r"^GPUInfo not initialized")


def pytest_collection_modifyitems(config, items):
    # A Qt warning (a bad index, a missing signal, a failed connection) is a bug here.
    for item in items:
        if "tests/ui/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.qt_log_level_fail("WARNING"))
            # The offscreen platform cannot raise windows or resize to hints; that is not our bug.
            # Nor is what QtWebEngine says about the machine (no GPU, no system D-Bus).
            item.add_marker(pytest.mark.qt_log_ignore(r"^This plugin does not support", *WEB_ENGINE_NOISE))


@pytest.fixture
def qloop(qapp, request):
    """The app's event loop (qasync's, scheduling through one Qt timer) on the test's
    QApplication; run coroutines with ``qloop.run_until_complete``."""
    # As in the app: closing the last window (a prompt) must not end the event loop.
    qapp.setQuitOnLastWindowClosed(False)
    loop = HostEventLoop(qapp, already_running=False)
    executor = blocking_call_executor()
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    # A test stuck inside Qt cannot be interrupted by pytest-timeout's signal (its handler runs
    # only when Python code does): a while after the test's own timeout, say where it is and
    # end the process, so that a hang fails the test (xdist replaces the worker) instead of
    # holding the suite for good.
    marker = request.node.get_closest_marker("timeout")
    limit = float(marker.args[0]) if marker and marker.args else float(request.config.getini("timeout") or 300)
    faulthandler.dump_traceback_later(limit + 30, exit=True)
    try:
        yield loop
    finally:
        faulthandler.cancel_dump_traceback_later()
        # Objects of this test that still hold the loop (subprocess transports, timers) go now,
        # while the loop is open, not during some later test.
        gc.collect()
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(asyncio.sleep(0))
        # Do not wait for a blocking call that outlived its test (a keyring request to a daemon
        # that is gone): its thread ends on its own, and the next test gets fresh threads.
        executor.shutdown(wait=False, cancel_futures=True)
        loop.set_default_executor(None)
        asyncio.set_event_loop(None)
        loop.close()
        gc.collect()



@pytest.fixture(autouse=True)
def agent_environment(real_keyring, monkeypatch):
    """A window started on the test's home starts its agent itself (detached), as the app
    does, with this process's environment: give it the tests' keyring and this source tree.
    Agents left on a test's home are stopped after it (the root conftest)."""
    import sys

    for key, value in real_keyring.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in sys.path if p))
