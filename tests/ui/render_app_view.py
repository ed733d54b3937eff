"""Renders docs/mcp-app.png: the system monitor's app view (server-system-monitor from
tests/peers) in the window, after a few polls. Run on an X display with a window manager:

    DISPLAY=:97 .venv/bin/python tests/ui/render_app_view.py docs/mcp-app.png

A fresh temporary HOSTAPP_HOME is used; the view's tool calls are allowed up front, so the
screen shows the view, not the question.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path


async def scene(host, out: Path) -> None:
    from tests.engine.test_app_resources import monitor_config
    from tests.ui.test_window import until

    window, engine = host.window, host.api
    await host.start()
    await engine.add_server(monitor_config())
    await engine.wait_connected("monitor", 30)
    op = await engine.start_call("monitor", "get-system-info", {})
    await engine.wait_finished(op.id)
    window.details.app_views.consent.grant("monitor", "poll-system-stats")
    await until(lambda: window.ops_model.row_of(op.id) is not None, 30)
    window.ops_table.selectRow(window.ops_model.row_of(op.id))
    await until(lambda: window.details.app_views.bridge is not None
                and len(window.details.app_views.bridge.tool_replies) >= 5, 90, "five polls")
    window.splitter.setSizes([80, 150, 520])  # room for the view
    await asyncio.sleep(1.0)
    window.ops_table.selectRow(window.ops_model.row_of(op.id))
    await asyncio.sleep(1.5)
    subprocess.run(["import", "-window", "root", str(out)], check=True)


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/mcp-app.png").resolve()
    home = Path(tempfile.mkdtemp(prefix="hostapp-appview-"))
    os.environ["HOSTAPP_HOME"] = str(home)
    from hostapp.ui.apps import prepare_process

    prepare_process()
    from PySide6.QtWidgets import QApplication

    from hostapp.app import HostApp, agent_link, blocking_call_executor
    from hostapp.ui.event_loop import HostEventLoop

    app = QApplication([sys.argv[0]])
    app.setQuitOnLastWindowClosed(False)
    loop = HostEventLoop(app, already_running=False)
    loop.set_default_executor(blocking_call_executor())
    asyncio.set_event_loop(loop)
    host = HostApp(home, agent_link(home))
    host.window.resize(1280, 800)
    host.window.move(0, 0)
    host.window.show()
    try:
        loop.run_until_complete(scene(host, out))
    finally:
        loop.run_until_complete(host.shutdown(stop_loop=False, stop_everything=True))  # its agent too
    print(out)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    raise SystemExit(main())
