"""MCP Apps in the window: a tool's interactive view, in a sandbox, beside its result.

- :mod:`hostapp.ui.apps.sandbox` renders a view with QtWebEngine (PySide6-Addons, the
  optional extra ``apps``): its own off-the-record profile, a network filter, no
  navigation, one bridge;
- :mod:`hostapp.ui.apps.bridge` speaks the view's protocol (Qt-free): every message
  checked, tool calls through the engine after the person's consent;
- :mod:`hostapp.ui.apps.pane` is the details pane's "App view" tab.

See ``docs/mcp-apps.md``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The start of what the window says when a view cannot be rendered (QtWebEngine is missing).
MISSING_MESSAGE = "This tool has an interactive view, but the component that renders it is not installed"


def source_checkout(package_dir: Path | None = None) -> Path | None:
    """The clone hostapp runs from (an editable install), or None for an installed copy."""
    root = (package_dir or Path(__file__).resolve().parents[2]).parent
    return root if (root / "pyproject.toml").is_file() and (root / "hostapp").is_dir() else None


def install_hint(package_dir: Path | None = None, python: str | None = None) -> str:
    """How to add the view renderer (the extra ``apps``: PySide6-Addons) to the hostapp that
    runs now: from its clone, or into the interpreter it is installed in."""
    if getattr(sys, "frozen", False):
        return "this build of hostapp has no view renderer; install a build that includes it"
    clone = source_checkout(package_dir)
    if clone is not None:
        return f"in {clone}, run 'make apps' (it runs .venv/bin/pip install -e '.[apps]')"
    return f"run {python or sys.executable} -m pip install 'hostapp[apps]'"


def missing_message() -> str:
    return f"{MISSING_MESSAGE}: {install_hint()}, then restart hostapp."


def unavailable_reason() -> str | None:
    """None when views can be rendered here, else why not, for a person."""
    try:
        import PySide6.QtWebChannel
        import PySide6.QtWebEngineCore
        import PySide6.QtWebEngineWidgets  # noqa: F401
    except ImportError:
        return missing_message()
    return None


def prepare_process() -> None:
    """Before the QApplication exists: what QtWebEngine needs to start in this process."""
    # WebRTC is taken away from every view (hostapp.ui.apps.sandbox.NO_WEBRTC); should a
    # view find it all the same, it gets no UDP of its own (no STUN, no TURN over UDP).
    flags = os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", "")
    if "--force-webrtc-ip-handling-policy" not in flags:
        os.environ["QTWEBENGINE_CHROMIUM_FLAGS"] = (
            flags + " --force-webrtc-ip-handling-policy=disable_non_proxied_udp").strip()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Chromium refuses to start its own process sandbox as root (a container, a CI
        # runner). Only then is it turned off; a view is still held by everything else
        # (an opaque-origin sandboxed frame, its content policy, the network filter, the
        # navigation rule, its own off-the-record profile, the checked bridge).
        flags = os.environ.get("QTWEBENGINE_CHROMIUM_FLAGS", "")
        if "--no-sandbox" not in flags.split():
            os.environ["QTWEBENGINE_CHROMIUM_FLAGS"] = (flags + " --no-sandbox").strip()
    try:
        from PySide6.QtCore import QCoreApplication, Qt
    except ImportError:
        return
    if QCoreApplication.instance() is None:
        # QtWebEngine shares OpenGL contexts with the window; set before the application exists.
        QCoreApplication.setAttribute(Qt.ApplicationAttribute.AA_ShareOpenGLContexts)
