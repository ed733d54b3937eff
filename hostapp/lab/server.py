"""Command line of the lab server: ``python -m hostapp.lab serve [--http PORT] [--stdio]``.

``main(argv)`` is what ``hostapp lab serve`` delegates to. Over HTTP the lab prints
``lab listening on http://HOST:PORT/mcp`` on stderr once it accepts connections (PORT 0
picks a free port). With both, one process serves its stdio client and HTTP clients
from the same state: the window's first run configures the lab so, a stdio server that
hostapp starts and stops, reached over HTTP too (``hostapp.app.lab_server_configs``). A
stdio lab without ``--http`` opens a listener on a free port the first time a URL
question needs a page to point at. State lives in ``$HOSTAPP_HOME/lab/lab.sqlite3``
unless ``--state`` names a file; unfinished work in it is continued at start-up.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import socket
import sys
import time
from pathlib import Path

import platformdirs

from hostapp.lab.core import Faults, LabCore
from hostapp.lab.state import LabState, StateInUse
from hostapp.protocol.timing import LAB_TIME_SCALE_ENV, time_scale

#: Closed streams stay replayable this long (across restarts), then go at the next start.
STREAM_RETENTION_SECONDS = 24 * 3600
#: Set (not "0"): the lab starts with --forget-sessions.
FORGET_SESSIONS_ENV = "HOSTAPP_LAB_FORGET_SESSIONS"


def default_state_file() -> Path:
    home = os.environ.get("HOSTAPP_HOME")
    base = Path(home) if home else Path(platformdirs.user_data_dir("hostapp"))
    return base / "lab" / "lab.sqlite3"


def _positive(text: str) -> float:
    try:
        return time_scale("--time-scale", {"--time-scale": text})
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hostapp lab", description="hostapp's reference MCP server")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve MCP over HTTP or stdio")
    serve.add_argument("--http", type=int, metavar="PORT",
                       help="Streamable HTTP on PORT (0 = any free port); with --stdio as well, both "
                            "doors lead to the same lab")
    serve.add_argument("--stdio", action="store_true", help="newline-delimited JSON on stdin/stdout")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--state", type=Path, help="state file (default $HOSTAPP_HOME/lab/lab.sqlite3)")
    serve.add_argument("--drop-after", type=int, metavar="N",
                       help="close every SSE connection after N events (the stream stays resumable)")
    serve.add_argument("--exit-after", type=int, metavar="N", help="exit the process after N events")
    serve.add_argument("--refuse-for", type=float, default=0.0, metavar="SECONDS",
                       help="answer 503 to every HTTP request for SECONDS after start")
    serve.add_argument("--forget-sessions", action="store_true",
                       default=os.environ.get(FORGET_SESSIONS_ENV, "") not in ("", "0"),
                       help="forget every HTTP session at start-up, as a server that keeps them in memory "
                            f"does when it restarts (also ${FORGET_SESSIONS_ENV}=1)")
    serve.add_argument("--log-level", default="WARNING", help="lab log level on stderr")
    serve.add_argument("--time-scale", type=_positive, metavar="FACTOR",
                       help="run the lab's clock at FACTOR times real time: tools' seconds and the retry, poll "
                            f"and resume intervals it announces (default ${LAB_TIME_SCALE_ENV}, else 1)")
    return parser


#: How long a lab that serves stdio and HTTP waits for its port to come free: the lab
#: it replaces (its host was killed, so its stdin ended) may still be on its way out.
BIND_PATIENCE_SECONDS = 10.0


async def bind_socket(host: str, port: int, patience: float = 0.0) -> socket.socket:
    """A listening-ready TCP socket on ``host:port``; a port in use is tried again for
    ``patience`` seconds before the OSError is raised."""
    deadline = time.monotonic() + patience
    while True:
        # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on connections whose
        # socket says it is TCP, and accepted ones inherit the listening socket's protocol.
        # Without it every answer written in two parts (headers, then body) waited for the
        # client's delayed ACK: 40 ms per request on loopback.
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return sock
        except OSError:
            sock.close()
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.2)


async def serve_http(core: LabCore, host: str, port: int, *, patience: float = 0.0,
                     started: asyncio.Event | None = None) -> None:
    """Serve Streamable HTTP (and the consent pages) until cancelled; ``started`` is set
    once connections are accepted."""
    import uvicorn

    from hostapp.lab.http import build_app

    sock = await bind_socket(host, port, patience)
    actual_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    core.base_url = f"http://{shown_host}:{actual_port}"
    loopback = host in ("127.0.0.1", "localhost", "::1")
    config = uvicorn.Config(build_app(core, loopback_only=loopback), log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=1, access_log=False)
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if server.started:
        print(f"lab listening on {core.base_url}/mcp", file=sys.stderr, flush=True)
        if started is not None:
            started.set()
    try:
        await serving
    except asyncio.CancelledError:
        server.should_exit = True
        await asyncio.shield(serving)
        raise


async def serve_stdio_and_http(core: LabCore, host: str, port: int | None) -> None:
    """Serve stdio until stdin ends, with an HTTP listener beside it in the same process:
    on ``port`` when one is named (the same jobs, sessions and streams, reached by HTTP;
    if the port stays taken the lab serves stdio alone and says so), else on a free port
    opened when a URL question first needs a page to point at."""
    from hostapp.lab.stdio import serve_stdio

    listener: asyncio.Task[None] | None = None

    async def open_listener(port: int, patience: float) -> None:
        nonlocal listener
        started = asyncio.Event()
        listener = asyncio.create_task(serve_http(core, host, port, patience=patience, started=started))
        waiting = asyncio.create_task(started.wait())
        await asyncio.wait({listener, waiting}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if listener.done():
            error = listener.exception()
            listener = None
            print(f"lab could not listen on {host}:{port}: {error}; serving stdio only",
                  file=sys.stderr, flush=True)
            core.open_consent_listener = lambda: open_listener(0, 0.0)

    if port is not None:
        await open_listener(port, BIND_PATIENCE_SECONDS)
    else:
        core.open_consent_listener = lambda: open_listener(0, 0.0)
    try:
        await serve_stdio(core)
    finally:
        if listener is not None:
            listener.cancel()
            await asyncio.gather(listener, return_exceptions=True)


async def run(args: argparse.Namespace) -> int:
    try:
        # One process per state file. A stdio lab being replaced (its host was killed, so
        # its stdin ended) may still be on its way out: that one is waited for.
        state = LabState(args.state or default_state_file(), serving=True,
                         lock_wait=BIND_PATIENCE_SECONDS if args.stdio else 0.0)
    except StateInUse as exc:
        print(f"lab: {exc}", file=sys.stderr, flush=True)
        return 3
    state.prune(time.time() - STREAM_RETENTION_SECONDS)
    if args.forget_sessions:
        forgotten = state.forget_sessions()
        if forgotten:
            logging.getLogger("hostapp.lab").info("forgot %d HTTP sessions of the previous run", forgotten)
    scale = args.time_scale if args.time_scale is not None else time_scale(LAB_TIME_SCALE_ENV)
    core = LabCore(state, Faults(args.drop_after, args.exit_after, args.refuse_for), time_scale=scale)
    resumed = core.resume_jobs()
    if resumed:
        logging.getLogger("hostapp.lab").info("continuing %d unfinished jobs", resumed)
    try:
        if args.stdio:
            await serve_stdio_and_http(core, args.host, args.http)
        else:
            await serve_http(core, args.host, args.http)
    finally:
        await core.shutdown()
        state.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.stdio and args.http is None:
        parser.error("serve needs --http PORT, --stdio, or both")
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        return asyncio.run(run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
