"""``hostapp agent`` and ``hostapp autostart``: run, ask about, stop and autostart the owner.

``hostapp agent`` runs the owner of the home in the foreground (as the autostart entry and
a client that needs one start it); ``agent status`` asks the owner, never starting one;
``agent stop`` stops it cleanly after saying which operations cannot survive that.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostapp.protocol.shown_text import terminal_safe

# The rest of the agent is imported where it is used: every ``hostapp`` process builds
# this parser (a lab server on stdio, ``hostapp --help``), few of them talk to an agent.
if TYPE_CHECKING:
    from hostapp.agent.client import RemoteEngine
    from hostapp.engine import api

log = logging.getLogger(__name__)

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2

#: ``hostapp agent`` without ``--idle-exit`` takes its idle exit from this variable (so an
#: owner a client starts on demand can be given one: the test suite's exit in seconds).
IDLE_EXIT_ENV = "HOSTAPP_AGENT_IDLE_EXIT"


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    agent = sub.add_parser("agent", help="the background owner of this home (runs it, or: status, stop)")
    agent.add_argument("--autostart", action="store_true",
                       help="started at login: stay running when idle (autostart entries pass this)")
    agent.add_argument("--tray", action="store_true",
                       help="with --autostart: where the session has a display, also show hostapp's tray icon "
                            "(autostart entries pass this)")
    agent.add_argument("--home", help="own this home (sets HOSTAPP_HOME; the Windows Run key passes it)")
    agent.add_argument("--idle-exit", type=float, default=None, metavar="SECONDS",
                       help="exit after this long with nothing in flight and nobody connected "
                            f"(default: ${IDLE_EXIT_ENV}, else 180)")
    agent.set_defaults(func=cmd_agent_run)
    asub = agent.add_subparsers(dest="agent_command")
    status = asub.add_parser("status", help="whether an owner runs, and what it does (never starts one)")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_agent_status)
    stop = asub.add_parser("stop", help="stop the owner: journal flushed, stream positions kept, servers closed")
    stop.add_argument("--yes", action="store_true",
                      help="also when operations in flight cannot be resumed (without a terminal to ask, "
                           "stop refuses then, with exit status 2)")
    stop.set_defaults(func=cmd_agent_stop)

    auto = sub.add_parser("autostart", help="start the background agent at login (enable, disable, status)")
    auto.add_argument("action", choices=["enable", "disable", "status"])
    auto.add_argument("--json", action="store_true")
    auto.set_defaults(func=cmd_autostart)


def idle_exit_of(args: argparse.Namespace) -> float:
    """``--idle-exit``, else ``$HOSTAPP_AGENT_IDLE_EXIT``, else the owner's default."""
    from hostapp.agent.owner import IDLE_EXIT_SECONDS

    if args.idle_exit is not None:
        return float(args.idle_exit)
    try:
        return float(os.environ[IDLE_EXIT_ENV])
    except (KeyError, ValueError):
        return IDLE_EXIT_SECONDS


def cmd_agent_run(args: argparse.Namespace) -> int:
    from hostapp.agent.lock import HomeLock
    from hostapp.agent.owner import Owner, setup_agent_logging
    from hostapp.engine.heap import tune_garbage_collector
    from hostapp.store.paths import HOME_ENV, home_dir

    if args.home:
        os.environ[HOME_ENV] = str(Path(args.home).expanduser().resolve())
    home = home_dir()
    setup_agent_logging(home, bool(getattr(args, "verbose", False)))
    # The agent carries every operation: its heap is the one the thresholds were set for.
    log.info("garbage collector thresholds %s", tune_garbage_collector())
    idle = idle_exit_of(args)
    code = asyncio.run(Owner(home, autostart=args.autostart, idle_exit=idle, tray=args.tray).run())
    if code == 3:
        owner = HomeLock(home).owner()
        print(f"hostapp: an agent already owns {home}" + (f" (pid {owner.pid})" if owner else ""),
              file=sys.stderr)
        return EXIT_OK if args.autostart else EXIT_ERROR
    return code


def current_home() -> Path:
    """The home this process works on (``$HOSTAPP_HOME``, or the platform's data folder)."""
    from hostapp.store.paths import home_dir

    return home_dir()


async def _connect(home: Path, listener: api.EngineListener | None = None, *,
                   control: bool = False) -> RemoteEngine | None:
    """A connection to the owner of ``home``, or None when none runs. ``control``: only its
    own methods will be asked (status, stop), which every version of the wire has: an
    owner older or newer than this command is still reached, to be stopped."""
    from hostapp.agent import wire
    from hostapp.agent.client import AgentIncompatible, AgentUnavailable, RemoteEngine
    from hostapp.agent.endpoint import endpoint_path

    versions = (1, wire.VERSION) if control else (wire.CLIENT_MIN_VERSION, wire.VERSION)
    try:
        return await RemoteEngine.connect(endpoint_path(home), listener, client="cli", versions=versions)
    except AgentIncompatible:
        raise
    except AgentUnavailable:
        return None


async def agent_engine(listener: api.EngineListener | None = None) -> api.EngineApi | None:
    """The facade of the agent that owns this home, or None when none runs (never starts one)."""
    from hostapp.store.paths import home_dir

    return await _connect(home_dir(), listener)


async def cmd_agent_status(args: argparse.Namespace) -> int:
    from hostapp.engine import api
    from hostapp.store.paths import home_dir

    home = home_dir()
    engine = await _connect(home, control=True)
    if engine is None:
        status: dict[str, object] = {"running": False}
    else:
        try:
            status = dict(await engine.control.status())
        except api.EngineError:
            status = {"running": False}
        finally:
            await engine.close()
    if args.json:
        print(json.dumps(status))
    elif status.get("running"):
        since = time.strftime("%Y-%m-%d %H:%M", time.localtime(float(status["since"])))  # type: ignore[arg-type]
        print(f"running: pid {status['pid']} since {since}; {status['operations']} operation(s) in flight, "
              f"{status['clients']} client(s) connected" + (" (started at login)" if status.get("autostart") else ""))
    else:
        print("not running")
    return EXIT_OK


async def cmd_agent_stop(args: argparse.Namespace) -> int:
    from hostapp.agent.lock import HomeLock
    from hostapp.engine import api
    from hostapp.store.paths import home_dir

    home = home_dir()
    engine = await _connect(home, control=True)
    if engine is None:
        print("not running")
        return EXIT_OK
    try:
        # The owner knows what carries each operation (each view's lost_at_stop): those with
        # nothing that can resume them end now, each says why (the window's quit dialog lists
        # the same).
        lost = await engine.control.unsurvivable()
        if lost and not args.yes:
            print(f"{len(lost)} operation(s) would not survive if the agent stops now:", file=sys.stderr)
            for op in lost:  # a tool's name is a server's words
                print(terminal_safe(f"  {op['id']}  {op['server']}/{op['tool']}  {op['status']}  ({op['why']})"),
                      file=sys.stderr)
            if not sys.stdin.isatty():
                # Nobody to ask (a script, CI): refuse rather than wait for an answer.
                print("hostapp: not stopped; run 'hostapp agent stop --yes' to stop it anyway", file=sys.stderr)
                return EXIT_USAGE
            try:
                answer = input("Stop the agent anyway? [y/N] ")
            except EOFError:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("not stopped", file=sys.stderr)
                return EXIT_ERROR
        stopping = await engine.control.stop()
        ended: list[dict[str, Any]] = list(stopping.get("ended") or [])
        await asyncio.wait_for(engine.wait_closed(), 60)
    except (api.EngineError, TimeoutError) as exc:
        print(terminal_safe(f"hostapp: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    finally:
        await engine.close()
    # Stopped means the lock is free: the journal is flushed and closed by then.
    lock = HomeLock(home)
    if not await asyncio.to_thread(lock.acquire, 30.0):
        print("hostapp: the agent did not let go of the home within 30 s", file=sys.stderr)
        return EXIT_ERROR
    lock.release()
    print("stopped")
    if ended:
        print(f"{len(ended)} operation(s) could not survive the stop and ended 'unknown':", file=sys.stderr)
        for gone in ended:  # a tool's name is a server's words
            print(terminal_safe(f"  {gone['id']}  {gone['server']}/{gone['tool']}  ({gone['why']})"), file=sys.stderr)
    return EXIT_OK


def cmd_autostart(args: argparse.Namespace) -> int:
    from hostapp.agent import autostart as autostart_mod

    entry = autostart_mod.for_platform()
    status = {"enable": entry.enable, "disable": entry.disable, "status": entry.status}[args.action]()
    if args.json:
        print(json.dumps(status.to_json()))
    elif status.enabled:
        print(f"enabled: {status.location}" + ("" if status.current else " (it starts another installation or home)"))
    else:
        print(f"disabled ({status.location})")
    return EXIT_OK
