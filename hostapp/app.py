"""The composition root of the desktop app: the window, a client of its home's agent, on one qasync loop.

``python main.py`` and ``hostapp`` without arguments come here. Start-up follows the
qasync pattern: one qasync event loop over the QApplication (:class:`~hostapp.ui.event_loop.HostEventLoop`,
which schedules callbacks from one Qt timer), ``run_forever``,
and both ``sys.excepthook`` and the loop's exception handler installed so that an error
in a slot or a task is logged and shown instead of killing the window. Quitting leaves
the agent and its work running, unless the person chose to stop everything; then the loop ends.

On the first launch with an empty home the built-in lab server is configured (on stdio,
and the same process over HTTP), so a newcomer can start a long call at once and watch it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import logging.handlers
import signal
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostapp.engine.heap import CLIENT_GC_THRESHOLDS, GC_THRESHOLDS, tune_garbage_collector

if TYPE_CHECKING:
    from hostapp.engine.api import EngineApi
    from hostapp.store.journal import ServerConfig
    from hostapp.ui.lifecycle import AutostartControl

log = logging.getLogger("hostapp.app")

#: Names of the embedded default servers: the lab on stdio, and the same lab over HTTP.
LAB_SERVER_NAME = "lab"
LAB_HTTP_SERVER_NAME = "lab-http"
#: QSettings key remembering that the default server was offered once.
FIRST_RUN_KEY = "app/default_server_configured"


def lab_command() -> tuple[str, list[str]]:
    """How to start the built-in lab server on stdio from this very installation."""
    if getattr(sys, "frozen", False):  # a PyInstaller bundle: the executable is hostapp itself
        return sys.executable, ["lab", "serve", "--stdio"]
    return sys.executable, ["-m", "hostapp", "lab", "serve", "--stdio"]


def lab_server_config(home: Path, http_port: int | None = None) -> ServerConfig:
    """The built-in lab server of ``home``, on stdio. Its state file is named on its
    command line: a stdio server inherits only a minimal environment (not
    ``HOSTAPP_HOME``), and without it every home's lab would share one state file in the
    platform's data folder. With ``http_port`` the same process also listens there."""
    from hostapp.store.journal import ServerConfig

    command, args = lab_command()
    state = Path(home).resolve() / "lab" / "lab.sqlite3"
    http = ["--http", str(http_port)] if http_port is not None else []
    return ServerConfig(name=LAB_SERVER_NAME, transport="stdio", command=command,
                        args=[*args, *http, "--state", str(state)])


def lab_server_configs(home: Path) -> list[ServerConfig]:
    """What the first run configures: the lab on stdio (MCP 2026-07-28, negotiated), and
    the same lab process over Streamable HTTP on a loopback port chosen now, pinned to
    MCP 2025-11-25. Between them every long tool of the lab runs by its own mechanism
    and survives a host kill (each entry lists only the tools that do there); the HTTP
    port also serves the pages of the lab's URL questions."""
    import socket

    from hostapp.store.journal import ServerConfig

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return [lab_server_config(home, port),
            ServerConfig(name=LAB_HTTP_SERVER_NAME, transport="http", url=f"http://127.0.0.1:{port}/mcp",
                         protocol_version="2025-11-25")]


def blocking_call_executor() -> ThreadPoolExecutor:
    """Threads for the blocking calls the engine hands off (keyring, DNS): plain Python threads.

    qasync's default executor runs them on QThreads, which abort the process if one is still
    busy when Qt goes away; Python threads just finish their call.
    """
    return ThreadPoolExecutor(max_workers=8, thread_name_prefix="hostapp-blocking")


def setup_logging(home: Path, verbose: bool = False) -> None:
    from hostapp.protocol.shown_text import RedactUrlSecrets
    from hostapp.store.paths import log_dir, private_file

    handler = logging.handlers.RotatingFileHandler(private_file(log_dir(home) / "hostapp.log"), maxBytes=2_000_000,
                                                   backupCount=3, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(RedactUrlSecrets())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)


class HostApp:
    """Owns the window of one HOSTAPP_HOME, a client of its engine through ``api``.

    States: built → started (connected, window filled) → stopped.
    """

    def __init__(self, home: Path, api: EngineApi, *, autostart: AutostartControl | None = None,
                 show_operation: str | None = None) -> None:
        """``api``: the engine's facade. In the app it is the link to the background agent
        that owns ``home`` (:func:`agent_link`): the agent carries the work, and goes on
        after the window quits; ✕ hides the window to the tray and Quit asks while
        operations run (:mod:`hostapp.ui.lifecycle`). ``show_operation``: the operation
        selected once the rows are read."""
        from PySide6.QtCore import QSettings

        from hostapp.engine.api import ForwardingEngine
        from hostapp.ui.adapter import EngineSignals
        from hostapp.ui.agent_link import AgentLink
        from hostapp.ui.lifecycle import WindowLifecycle
        from hostapp.ui.main_window import MainWindow

        # The operations' heap is the engine's: here unless the facade forwards to an engine
        # in another process (the agent's).
        tune_garbage_collector(CLIENT_GC_THRESHOLDS if isinstance(api, ForwardingEngine) else GC_THRESHOLDS)
        self.home = Path(home)
        self.settings = QSettings(str(self.home / "hostapp.ini"), QSettings.Format.IniFormat)
        self.signals = EngineSignals()
        self.api = api
        api.listener = self.signals  # type: ignore[attr-defined]  # every facade tells one listener
        # The window is a client of the engine: it sees the facade only.
        self.window = MainWindow(api, self.signals, self.settings, self.home)
        self.show_operation = show_operation
        self.lifecycle = WindowLifecycle(self.window, api, self.settings, autostart=autostart)
        self.window.quitRequested.connect(self.lifecycle.request_quit)
        self.lifecycle.quitConfirmed.connect(lambda stop_everything: self.request_quit(stop_everything))
        if isinstance(api, AgentLink):
            api.on_change = self.lifecycle.agent_changed
        self.started = False
        self.stopped = asyncio.Event()
        self._stopping: asyncio.Task | None = None
        self.exit_code = 0
        self.stop_loop_on_quit = True  # the loop is the app's (a test keeps its own running)

    async def start(self) -> None:
        """Show the engine's operations, start it (the agent link connects, starting the
        agent when none runs), show the questions it has open, then its servers.

        The rows come first: an engine that starts in this process (a bench's) reads the
        keyring and connects for a while with many operations, and until then the window
        shows each as the journal left it.
        """
        try:
            await self.window.load_operations()
            if self.show_operation:
                await self.lifecycle.show_operation(self.show_operation)
            await self.api.start()
            for question in await self.api.open_questions():  # asked before the window came
                self.signals.input_requested(question)
        except Exception as exc:
            log.exception("the engine could not start")
            self.window.show_error(f"hostapp could not open its journal in {self.home}: {exc}")
            return
        self.started = True
        if not self.settings.value(FIRST_RUN_KEY, False, type=bool):
            if not await self.api.servers():
                for cfg in lab_server_configs(self.home):
                    await self.api.add_server(cfg)
            self.settings.setValue(FIRST_RUN_KEY, True)
            self.settings.sync()
        await self.window.load_servers()

    def request_quit(self, stop_everything: bool = False) -> None:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.shutdown(stop_loop=self.stop_loop_on_quit,
                                                                 stop_everything=stop_everything))

    async def shutdown(self, *, stop_loop: bool = True, stop_everything: bool = False) -> None:
        """Leave the engine (the agent's work goes on), save the window, end the loop.
        ``stop_everything``: the agent stops too (its journal flushed, its servers closed)."""
        self.lifecycle.quitting = True
        try:
            stop_owner = getattr(self.api, "stop_owner", None)
            if stop_everything and stop_owner is not None:
                await stop_owner()
            await self.api.stop()
        except Exception:
            log.exception("stopping the engine failed")
            self.exit_code = 1
        finally:
            self.signals.flush()
            self.window.close_for_good()
            self.stopped.set()
            if stop_loop:
                asyncio.get_running_loop().stop()


class LoginEntry:
    """The window's "Start hostapp at login": this platform's autostart entry."""

    def status(self) -> tuple[bool, str]:
        from hostapp.agent.autostart import for_platform

        state = for_platform().status()
        return state.enabled, state.location

    def set_enabled(self, enabled: bool) -> tuple[bool, str]:
        from hostapp.agent.autostart import for_platform

        entry = for_platform()
        state = entry.enable() if enabled else entry.disable()
        return state.enabled, state.location


def window_folder(home: Path) -> Path:
    """Where the home's window listens for later launches: beside the agent's socket."""
    from hostapp.agent.endpoint import endpoint_path

    path = endpoint_path(home)
    # The agent's folder under the home; for a socket moved to the temporary folder (a
    # home whose path is too long), a folder of its own beside it.
    return path.parent if path.parent.name == "agent" else path.parent / path.stem


def agent_link(home: Path) -> EngineApi:
    """The window's facade: the agent that owns ``home``, started when none runs, and
    started again should it die while the window is open."""
    from hostapp.agent.client import connect_or_spawn
    from hostapp.ui.agent_link import AgentLink

    return AgentLink(lambda since: connect_or_spawn(home, client="window", since=since))


def install_error_handlers(loop: asyncio.AbstractEventLoop, host_ref: list[HostApp]) -> None:
    """Uncaught errors in Qt slots and asyncio tasks are logged and shown, not fatal."""

    def show(text: str) -> None:
        if host_ref:
            host_ref[0].window.show_error(f"Internal error: {text} (details in the log)")

    def excepthook(exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            if host_ref:
                host_ref[0].request_quit()
            return
        log.error("uncaught exception:\n%s", "".join(traceback.format_exception(exc_type, exc, tb)))
        show(f"{exc_type.__name__}: {exc}")

    def loop_handler(the_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if exc is not None:
            log.error("unhandled error in the event loop: %s", context.get("message"), exc_info=exc)
            show(f"{type(exc).__name__}: {exc}")
        else:
            log.error("event loop: %s", context.get("message"))

    sys.excepthook = excepthook
    loop.set_exception_handler(loop_handler)


def main(argv: list[str] | None = None) -> int:
    """Open the window; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="hostapp", description="The hostapp window.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail")
    parser.add_argument("--show-operation", metavar="OP", help="open the window at this operation")
    parser.add_argument("--tray", action="store_true",
                        help="start with the tray icon only, the window hidden until it is asked for (at login)")
    args, qt_args = parser.parse_known_args(list(sys.argv[1:] if argv is None else argv))

    from PySide6.QtWidgets import QApplication

    from hostapp.store.paths import home_dir
    from hostapp.ui.apps import prepare_process
    from hostapp.ui.event_loop import HostEventLoop
    from hostapp.ui.main_window import app_icon
    from hostapp.ui.single_instance import SingleInstance
    from hostapp.ui.theme import apply_color_scheme

    home = home_dir()
    setup_logging(home, args.verbose)
    prepare_process()  # what tools' app views (QtWebEngine) need before the QApplication exists
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0], *qt_args])
    app.setApplicationName("hostapp")
    app.setOrganizationName("hostapp")
    app.setApplicationDisplayName("hostapp")
    app.setDesktopFileName("io.github.hostapp.hostapp")
    app.setWindowIcon(app_icon())
    app.setQuitOnLastWindowClosed(False)  # quitting goes through HostApp.shutdown
    apply_color_scheme(app)
    # One window per home: a later launch brings it forward and ends here.
    instance = SingleInstance(window_folder(home))
    if not instance.claim():
        if args.tray:
            return 0  # a window runs already: its tray icon is there
        if instance.hand_over(args.show_operation):
            log.info("another window of %s runs: brought it forward", home)
            return 0
        print(f"hostapp: a window of {home} runs but does not answer", file=sys.stderr)
        return 1

    loop = HostEventLoop(app)
    loop.set_default_executor(blocking_call_executor())
    asyncio.set_event_loop(loop)
    host_ref: list[HostApp] = []
    install_error_handlers(loop, host_ref)
    host = HostApp(home, agent_link(home), autostart=LoginEntry(), show_operation=args.show_operation)
    host_ref.append(host)
    lifecycle = host.lifecycle
    instance.showRequested.connect(lambda op_id: lifecycle.bring_forward(op_id or None))
    app.aboutToQuit.connect(host.signals.flush)
    # Ctrl+C in the terminal quits like the Quit action (connections closed, journal flushed).
    signal.signal(signal.SIGINT, lambda *_: loop.call_soon_threadsafe(host.request_quit))
    if not (args.tray and host.window.tray is not None):
        host.window.show()  # without a system tray, the window itself
    loop.call_soon(lambda: asyncio.ensure_future(host.start()))
    try:
        loop.run_forever()
    finally:
        instance.release()
        loop.close()
    return host.exit_code
