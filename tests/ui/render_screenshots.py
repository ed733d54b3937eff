"""Renders the documentation screenshots offscreen at 1280x800 against the real lab server.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/ui/render_screenshots.py docs/

writes docs/main-light.png, docs/main-dark.png and docs/result.png. A fresh temporary
HOSTAPP_HOME is used, so the first-launch path (the lab as the default server) is shown.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


async def until(predicate, timeout: float = 60.0):
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise TimeoutError("the lab did not get there in time")
        await asyncio.sleep(0.05)


def status_of(window, op_id: str) -> str | None:
    row = window.ops_model.row_of(op_id)
    return window.ops_model.operation(row).status if row is not None else None


async def scene(host, out: Path) -> None:
    from PySide6.QtWidgets import QApplication

    from hostapp.engine import api
    from hostapp.ui.theme import apply_color_scheme

    window, engine = host.window, host.api
    await host.start()
    await until(lambda: window.servers_model.rowCount() and window.servers_model.server(0).state == api.CONNECTED)
    app = QApplication.instance()

    def answer_form(prompt):
        # Leave the form open in the screenshot of the window; answered below.
        pass

    window.elicitations.promptShown.connect(answer_form)
    done = await engine.start_call("lab", "sleep_with_progress", {"seconds": 0.6, "steps": 3, "message": "brewing"})
    await until(lambda: status_of(window, done.id) == api.COMPLETED)
    form = await engine.start_call("lab", "ask_form", {"message": "Who is calling?"})
    await until(lambda: window.elicitations.prompt is not None)
    prompt = window.elicitations.prompt
    prompt.form.editor("email").setText("ada@example.com")
    prompt.accept_button.click()
    await until(lambda: status_of(window, form.id) == api.COMPLETED)
    failed = await engine.start_call("lab", "fail", {"mode": "rpc_error"})
    await until(lambda: status_of(window, failed.id) in api.TERMINAL)
    await engine.start_call("lab", "sleep_with_progress",
                            {"seconds": 120, "steps": 120, "message": "indexing the archive"})
    await engine.start_call("lab", "sleep_with_progress", {"seconds": 40, "steps": 40, "message": "uploading part"})
    waiting = await engine.start_call("lab", "ask_form", {"message": "Which colour should the report use?"})
    await until(lambda: window.elicitations.prompt is not None)
    window.elicitations.prompt.hide()  # the screenshot shows the window; the prompt has its own
    await asyncio.sleep(7)              # let the long calls make visible progress
    window.ops_table.selectRow(window.ops_model.row_of(form.id))
    await asyncio.sleep(0.5)

    apply_color_scheme(app, "light")
    sizes = window.splitter.sizes()
    window.splitter.setSizes([sizes[0], sizes[1] - 150, sizes[2] + 150])  # room for the whole result
    await asyncio.sleep(0.3)
    window.grab().save(str(out / "result.png"))
    window.splitter.setSizes(sizes)
    window.ops_table.selectRow(1)
    await asyncio.sleep(0.5)
    window.grab().save(str(out / "main-light.png"))
    apply_color_scheme(app, "dark")
    await asyncio.sleep(0.5)
    window.grab().save(str(out / "main-dark.png"))
    apply_color_scheme(app, "light")
    window.elicitations.close_all()
    del waiting
    await host.shutdown(stop_loop=False, stop_everything=True)  # its agent too


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "docs").resolve()
    out.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="hostapp-shots-"))
    os.environ["HOSTAPP_HOME"] = str(home)
    os.environ.setdefault("HOSTAPP_COLOR_SCHEME", "light")

    import qasync
    from PySide6.QtWidgets import QApplication

    from hostapp.app import HostApp, agent_link, blocking_call_executor
    from hostapp.ui.theme import apply_color_scheme

    app = QApplication([sys.argv[0]])
    app.setQuitOnLastWindowClosed(False)
    apply_color_scheme(app)
    loop = qasync.QEventLoop(app, already_running=False)
    loop.set_default_executor(blocking_call_executor())
    asyncio.set_event_loop(loop)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.support.keyring_daemon import missing_programs, private_keyring

    with contextlib.ExitStack() as stack:
        if not missing_programs():  # a working keyring, as on a desktop
            stack.enter_context(private_keyring(home / "keyring"))
        host = HostApp(home, agent_link(home))
        host.window.resize(1280, 800)
        host.window.show()
        loop.run_until_complete(scene(host, out))
    loop.close()
    print(f"wrote {out}/main-light.png, main-dark.png, result.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
