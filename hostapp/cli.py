"""The headless command line, over the same engine as the window.

``hostapp`` with no arguments opens the window. The sub-commands are stable: tests and
people script against them.

    hostapp servers add NAME --url URL [--header K=V ...] [--secret-header K=V ...]
    hostapp servers add NAME --command CMD [--arg A ...] [--env K=V ...] [--secret-env K=V ...]
    hostapp servers list [--json] | hostapp servers remove NAME
    hostapp servers login NAME | hostapp servers logout NAME
    hostapp tools SERVER [--json]
    hostapp call SERVER TOOL [--args JSON] [--answers FILE] [--unanswered decline|wait] [--json]
    hostapp ops [--json] | hostapp resume [--wait] [--answers FILE] [--json] | hostapp cancel OP
    hostapp conformance-client URL
    hostapp lab serve (--http PORT | --stdio) [...]

With ``--json`` a call prints one JSON object per line: progress, status, elicitation and
log events, then a last ``result`` or ``error`` line. Exit status 0 on a result (an
``isError`` result too), 1 on an error, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable

from hostapp.protocol.jsonrpc import RpcError
from hostapp.transport.base import TransportError

log = logging.getLogger("hostapp")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A command line or configuration mistake the person can fix."""


# -- output ---------------------------------------------------------------------------

class EventPrinter:
    """Prints call events as JSON lines (``--json``) or as short human lines."""

    def __init__(self, as_json: bool, stream=None, operation_id: str | None = None):
        self.as_json = as_json
        self.stream = stream or sys.stdout
        self.operation_id = operation_id

    def emit(self, event: str, **fields: Any) -> None:
        if self.as_json:
            obj: dict[str, Any] = {"event": event}
            if self.operation_id is not None:
                obj["operation"] = self.operation_id
            obj.update(fields)
            self.stream.write(json.dumps(obj, ensure_ascii=False) + "\n")
        else:
            self.stream.write(self._human(event, fields) + "\n")
        self.stream.flush()

    def _human(self, event: str, f: dict[str, Any]) -> str:
        prefix = f"[{self.operation_id}] " if self.operation_id else ""
        if event == "progress":
            total = f.get("total")
            amount = f"{100 * f['progress'] / total:5.1f}%" if total else f"{f['progress']:g}"
            return f"{prefix}progress {amount}" + (f" {f['message']}" if f.get("message") else "")
        if event == "status":
            return f"{prefix}status: {f['status']}" + (f" ({f['message']})" if f.get("message") else "")
        if event == "elicitation":
            where = f" {f['url']}" if f.get("url") else ""
            return f"{prefix}the server asks ({f['mode']}): {f.get('message', '')}{where} -> {f.get('answer')}"
        if event == "log":
            return f"{prefix}log [{f.get('level', 'info')}] {f.get('data')}"
        if event == "result":
            return prefix + render_result_text(f["result"])
        if event == "error":
            return f"{prefix}error {f.get('code')}: {f.get('message')}"
        return f"{prefix}{event}: {json.dumps(f, ensure_ascii=False)}"


def render_result_text(result: dict[str, Any]) -> str:
    """A CallToolResult as plain text for a terminal."""
    lines: list[str] = []
    if result.get("isError"):
        lines.append("the tool reported an error:")
    for block in result.get("content") or []:
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind in ("image", "audio"):
            lines.append(f"<{kind} {block.get('mimeType', '?')}, {len(block.get('data', '')) * 3 // 4} bytes>")
        elif kind == "resource_link":
            lines.append(f"<resource link {block.get('uri')}>")
        elif kind == "resource":
            res = block.get("resource") or {}
            lines.append(res.get("text") if "text" in res else f"<resource {res.get('uri')}>")
        else:
            lines.append(json.dumps(block, ensure_ascii=False))
    if result.get("structuredContent") is not None and not lines:
        lines.append(json.dumps(result["structuredContent"], ensure_ascii=False, indent=2))
    return "\n".join(lines)


UNANSWERED_HELP = ("a question with no scripted answer left: decline it (the default), or wait: "
                   "leave it open, to be answered later by 'hostapp resume --answers' or in the window")


def load_answers(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read answers from {path}: {exc}") from None
    if not isinstance(data, list) or not all(isinstance(a, dict) and a.get("action") in ("accept", "decline", "cancel")
                                            for a in data):
        raise UsageError(f"{path} must hold a JSON list of answers like "
                         '{"action":"accept","content":{...}} or {"action":"decline"}')
    return data


def parse_pairs(pairs: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must look like NAME=VALUE, got {pair.split('=')[0]!r}")
        out[key] = value
    return out


# -- state ----------------------------------------------------------------------------

class Home:
    """The state of one HOSTAPP_HOME, opened lazily: the journal and the secret store."""

    def __init__(self) -> None:
        from hostapp.store.paths import home_dir

        self.path = home_dir()
        self._journal = None
        self._secrets = None

    @property
    def journal(self):
        if self._journal is None:
            from hostapp.store.journal import OperationJournal
            from hostapp.store.paths import journal_path

            self._journal = OperationJournal(journal_path(self.path))
        return self._journal

    @property
    def secrets(self):
        if self._secrets is None:
            from hostapp.store.secrets import SecretStore

            self._secrets = SecretStore(self.path)
        return self._secrets

    def server(self, name: str):
        cfg = self.journal.get_server(name)
        if cfg is None:
            known = ", ".join(s.name for s in self.journal.list_servers()) or "none"
            raise UsageError(f"no server named {name!r} (configured: {known}); add one with 'hostapp servers add'")
        return cfg

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()


# -- commands -------------------------------------------------------------------------

def cmd_servers_add(args: argparse.Namespace, home: Home) -> int:
    from hostapp.store.journal import ServerConfig

    if bool(args.url) == bool(args.command):
        raise UsageError("give exactly one of --url URL (Streamable HTTP) or --command CMD (stdio)")
    secret_headers = parse_pairs(args.secret_header, "--secret-header")
    secret_env = parse_pairs(args.secret_env, "--secret-env")
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UsageError(f"--url must be an http:// or https:// URL, got {args.url!r}")
    if home.journal.get_server(args.name) is not None:
        raise UsageError(f"a server named {args.name!r} already exists; remove it first")
    refs: dict[str, dict[str, str]] = {"headers": {}, "env": {}}
    if secret_headers or secret_env:
        home.secrets.check()
        refs["headers"] = {k: home.secrets.put("header", v) for k, v in secret_headers.items()}
        refs["env"] = {k: home.secrets.put("env", v) for k, v in secret_env.items()}
    cfg = ServerConfig(
        name=args.name,
        transport="http" if args.url else "stdio",
        url=args.url,
        headers=parse_pairs(args.header, "--header"),
        secret_headers=refs["headers"],
        command=args.command,
        args=list(args.arg or []),
        env=parse_pairs(args.env, "--env"),
        secret_env=refs["env"],
        protocol_version=args.protocol_version,
    )
    if args.protocol_version:
        from hostapp.protocol.eras import era_of
        from hostapp.protocol.jsonrpc import ProtocolError

        try:
            era_of(args.protocol_version)
        except ProtocolError as exc:
            raise UsageError(str(exc)) from None
    home.journal.add_server(cfg)
    print(f"added {cfg.name} ({cfg.transport}: {cfg.url or cfg.command})")
    return EXIT_OK


def server_summary(cfg: Any) -> dict[str, Any]:
    return {
        "name": cfg.name,
        "transport": cfg.transport,
        "url": cfg.url,
        "command": cfg.command,
        "args": list(cfg.args or []),
        "headers": sorted([*(cfg.headers or {}), *(cfg.secret_headers or {})]),
        "env": sorted([*(cfg.env or {}), *(cfg.secret_env or {})]),
    }


def cmd_servers_list(args: argparse.Namespace, home: Home) -> int:
    servers = [server_summary(s) for s in home.journal.list_servers()]
    if args.json:
        print(json.dumps(servers, ensure_ascii=False))
    elif not servers:
        print("no servers configured; add one with 'hostapp servers add'")
    else:
        for s in servers:
            target = s["url"] or " ".join([s["command"], *s["args"]])
            print(f"{s['name']:<20} {s['transport']:<6} {target}")
    return EXIT_OK


def cmd_servers_remove(args: argparse.Namespace, home: Home) -> int:
    cfg = home.server(args.name)
    home.journal.remove_server(cfg.name)
    if cfg.transport == "http":
        from hostapp.auth import TokenStore

        try:  # a removed server keeps no sign-in behind
            TokenStore(home.secrets).forget(cfg.name)
        except Exception as exc:
            print(f"warning: could not remove the sign-in of {cfg.name} from the keyring: {type(exc).__name__}",
                  file=sys.stderr)
    for ref in [*(cfg.secret_headers or {}).values(), *(cfg.secret_env or {}).values()]:
        try:
            home.secrets.delete(ref)
        except Exception as exc:  # the server is gone either way; say what was left behind
            print(f"warning: could not remove a secret of {cfg.name} from the keyring: {type(exc).__name__}",
                  file=sys.stderr)
    print(f"removed {cfg.name}")
    return EXIT_OK


def cmd_servers_login(args: argparse.Namespace, home: Home) -> int:
    """Sign in to an HTTP server: print the authorization URL, wait for the browser's redirect."""
    from hostapp.auth import LoopbackRedirectListener, TokenStore, login

    cfg = home.server(args.name)
    if cfg.transport != "http":
        raise UsageError(f"{cfg.name} is a stdio server; only HTTP servers sign in")
    home.secrets.check()

    def show(url: str) -> None:
        print(f"Open this address in a browser to sign in to {cfg.name}:\n\n  {url}\n", flush=True)
        print("Waiting for the browser to come back...", file=sys.stderr, flush=True)

    listener = LoopbackRedirectListener(open_url=show)
    asyncio.run(login(cfg.name, cfg.url, TokenStore(home.secrets), listener))
    print(f"signed in to {cfg.name}")
    return EXIT_OK


def cmd_servers_logout(args: argparse.Namespace, home: Home) -> int:
    from hostapp.auth import TokenStore, logout

    cfg = home.server(args.name)
    asyncio.run(logout(cfg.name, TokenStore(home.secrets)))
    print(f"signed out of {cfg.name}")
    return EXIT_OK


def _secret_store_if_needed(cfg: Any, home: Home):
    if cfg.secret_headers or cfg.secret_env:
        home.secrets.check()
        return home.secrets
    return None


async def _tools(args: argparse.Namespace, home: Home) -> int:
    from hostapp.engine.connections import open_session

    cfg = home.server(args.server)
    from hostapp.mechanisms import client_capabilities

    # The same capabilities as a call: some servers list task tools only to clients that declare tasks.
    session, info = await open_session(cfg, secret_store=_secret_store_if_needed(cfg, home),
                                       capabilities=client_capabilities)
    try:
        tools = await session.list_tools()
    finally:
        await session.close()
    if args.json:
        print(json.dumps(tools, ensure_ascii=False))
    else:
        for t in tools:
            desc = (t.get("description") or "").strip().splitlines()
            print(f"{t.get('name'):<32} {desc[0] if desc else ''}")
    return EXIT_OK


class CallFollower:
    """Engine listener for the CLI: prints the events of the operations it follows and
    answers their questions from the scripted answers."""

    def __init__(self, printer_for: Callable[[str], EventPrinter], answers: list[dict[str, Any]],
                 unanswered: str = "decline"):
        self.printer_for = printer_for
        self.answers = list(answers)
        #: What to do with a question when no scripted answer is left: "decline" it, or
        #: "wait": leave it open (answered later by ``hostapp resume --answers`` or the window).
        self.unanswered = unanswered
        self.engine: Any = None
        self.follow: set[str] | None = None  # None: every operation
        self._last: dict[str, tuple] = {}

    def _follows(self, op_id: str | None) -> bool:
        return op_id is not None and (self.follow is None or op_id in self.follow)

    def operation_changed(self, op: Any) -> None:
        if not self._follows(op.id):
            return
        key = (op.progress, op.total, op.message)
        if op.progress is not None and self._last.get(op.id) != key and op.status not in TERMINAL_STATUSES:
            self._last[op.id] = key
            self.printer_for(op.id).emit("progress", progress=op.progress, total=op.total, message=op.message)

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None:
        if kind == "status" and self._follows(op_id) and data.get("to") not in TERMINAL_STATUSES:
            fields = {"status": data.get("to")}
            if data.get("message"):
                fields["message"] = data["message"]
            self.printer_for(op_id).emit("status", **fields)
        elif kind == "log" and (self.follow is None or len(self.follow) == 1):
            op = next(iter(self.follow)) if self.follow else None
            self.printer_for(op).emit("log", level=data.get("level"), logger=data.get("logger"), data=data.get("data"))

    def server_changed(self, server: Any) -> None:
        pass

    def input_requested(self, request: Any) -> None:
        if request.operation_id is not None and not self._follows(request.operation_id):
            return
        fields: dict[str, Any] = {"mode": request.mode, "message": request.message}
        if request.mode == "url":
            fields["url"] = request.params.get("url")
        if not self.answers and self.unanswered == "wait":
            self.printer_for(request.operation_id).emit("elicitation", **fields, answer=None, pending=True)
            return  # the question stays open in the journal
        answer = self.answers.pop(0) if self.answers else {"action": "decline"}
        if request.mode == "url":
            answer = {k: v for k, v in answer.items() if k != "content"}  # URL mode carries no content
        fields["answer"] = answer.get("action")
        self.printer_for(request.operation_id).emit("elicitation", **fields)
        self.engine.answer_input(request.id, answer)

    def input_withdrawn(self, request_id: str) -> None:
        pass

    def problem(self, kind: str, message: str) -> None:
        print(f"hostapp: {message}", file=sys.stderr)


TERMINAL_STATUSES = {"completed", "failed", "cancelled", "expired", "unknown"}


def emit_outcome(printer: EventPrinter, op: Any) -> int:
    """The last lines of a followed operation; the exit status it deserves."""
    printer.emit("status", status=op.status)
    if op.result is not None:
        printer.emit("result", result=op.result)
        return EXIT_OK
    error = op.error or {}
    printer.emit("error", code=error.get("code"), message=error.get("message") or op.status)
    return EXIT_ERROR


def _engine(home: Home, follower: CallFollower):
    from hostapp.engine.service import Engine

    engine = Engine(home.path, follower, journal=home.journal)
    follower.engine = engine
    return engine


async def _call(args: argparse.Namespace, home: Home) -> int:
    try:
        arguments = json.loads(args.args) if args.args else {}
    except ValueError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise UsageError("--args must be a JSON object")
    printer = EventPrinter(args.json)
    follower = CallFollower(lambda _op: printer, load_answers(args.answers), args.unanswered)
    follower.follow = set()
    cfg = home.server(args.server)
    engine = _engine(home, follower)
    try:
        await engine.start(resume=False, only={cfg.name})
        try:
            await engine.connected(cfg.name, timeout=args.connect_timeout)
        except (TransportError, asyncio.TimeoutError) as exc:
            printer.emit("error", code=None, message=str(exc) or f"cannot connect to {cfg.name}: timed out")
            return EXIT_ERROR
        op = await engine.start_call(cfg.name, args.tool, arguments)
        follower.follow.add(op.id)
        printer.emit("status", status="running")
        final = await engine.wait_finished(op.id)
        return emit_outcome(printer, final)
    finally:
        await engine.stop()


async def _resume(args: argparse.Namespace, home: Home) -> int:
    printers: dict[str | None, EventPrinter] = {}

    def printer_for(op_id: str | None) -> EventPrinter:
        if op_id not in printers:
            printers[op_id] = EventPrinter(args.json, operation_id=op_id)
        return printers[op_id]

    follower = CallFollower(printer_for, load_answers(args.answers), args.unanswered)
    engine = _engine(home, follower)
    records = home.journal.unfinished_operations()
    unfinished = [r.id for r in records]
    for r in records:  # what the journal holds was shown before the restart: only news is printed
        follower._last[r.id] = (r.progress, r.total, r.message)
    try:
        await engine.start(resume=True)
        if not unfinished:
            if not args.json:
                print("nothing to resume")
            return EXIT_OK
        if not args.wait:
            await asyncio.sleep(args.settle)
            for op in await engine.operations(statuses=None, limit=len(unfinished) + 50):
                if op.id in unfinished:
                    printer_for(op.id).emit("status", status=op.status)
            return EXIT_OK
        codes = []
        for op_id in unfinished:
            final = await engine.wait_finished(op_id)
            codes.append(emit_outcome(printer_for(op_id), final))
        return max(codes, default=EXIT_OK)
    finally:
        await engine.stop()


def cmd_ops(args: argparse.Namespace, home: Home) -> int:
    records = home.journal.list_operations(limit=args.limit)
    rows = [{"id": r.id, "server": r.server, "tool": r.tool, "mechanism": r.mechanism, "status": r.status,
             "progress": r.progress, "total": r.total, "message": r.message, "created_at": r.created_at,
             "result": r.result, "error": r.error} for r in records]
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("no operations yet")
    for r in rows:
        pct = f"{100 * r['progress'] / r['total']:5.1f}%" if r["progress"] is not None and r["total"] else (
            f"{r['progress']:g}" if r["progress"] is not None else "-")
        print(f"{r['id']}  {r['server']:<14} {str(r['tool']):<24} {str(r['mechanism']):<18} {r['status']:<14} {pct}")
    return EXIT_OK


async def _cancel(args: argparse.Namespace, home: Home) -> int:
    record = home.journal.get_operation(args.op)
    if record is None:
        raise UsageError(f"no operation {args.op!r}; 'hostapp ops' lists them")
    if record.status in TERMINAL_STATUSES:
        print(f"{args.op} already ended: {record.status}")
        return EXIT_OK
    printer = EventPrinter(False, operation_id=args.op)
    follower = CallFollower(lambda _op: printer, [])
    follower.follow = {args.op}
    engine = _engine(home, follower)
    try:
        await engine.start(resume=True, only={record.server})
        await engine.cancel(args.op)
        final = await asyncio.wait_for(engine.wait_finished(args.op), args.timeout)
        print(f"{args.op}: {final.status}")
        return EXIT_OK if final.status in TERMINAL_STATUSES else EXIT_ERROR
    finally:
        await engine.stop()


def cmd_tools(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_tools(args, home))


def cmd_call(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_call(args, home))


def cmd_resume(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_resume(args, home))


def cmd_cancel(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_cancel(args, home))


def cmd_conformance(args: argparse.Namespace, home: Home | None) -> int:
    from hostapp.conformance import main as conformance_main

    return conformance_main([args.url])


def cmd_lab(argv: list[str]) -> int:
    from hostapp.lab.server import main as lab_main

    return lab_main(argv)


# -- parser ---------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hostapp", description="A desktop host for MCP servers. "
                                     "Without a command, opens the window.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail to stderr")
    sub = parser.add_subparsers(dest="command")

    servers = sub.add_parser("servers", help="configure MCP servers")
    ssub = servers.add_subparsers(dest="servers_command", required=True)
    add = ssub.add_parser("add", help="add a server")
    add.add_argument("name")
    add.add_argument("--url", help="Streamable HTTP endpoint")
    add.add_argument("--header", action="append", metavar="K=V", help="HTTP header (stored in the journal)")
    add.add_argument("--secret-header", action="append", metavar="K=V", help="HTTP header kept in the OS keyring")
    add.add_argument("--command", help="stdio server command")
    add.add_argument("--arg", action="append", metavar="A", help="an argument of the command (repeatable)")
    add.add_argument("--env", action="append", metavar="K=V", help="environment variable for the command")
    add.add_argument("--secret-env", action="append", metavar="K=V", help="environment variable kept in the keyring")
    add.add_argument("--protocol-version", metavar="REV",
                     help="use this protocol revision instead of negotiating the newest (e.g. 2025-11-25)")
    add.set_defaults(func=cmd_servers_add)
    lst = ssub.add_parser("list", help="list configured servers")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_servers_list)
    rm = ssub.add_parser("remove", help="remove a server (its history stays)")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_servers_remove)
    login = ssub.add_parser("login", help="sign in to an HTTP server that asks for it (OAuth)")
    login.add_argument("name")
    login.set_defaults(func=cmd_servers_login)
    logout = ssub.add_parser("logout", help="sign out: remove the server's tokens from the keyring")
    logout.add_argument("name")
    logout.set_defaults(func=cmd_servers_logout)

    tools = sub.add_parser("tools", help="list a server's tools")
    tools.add_argument("server")
    tools.add_argument("--json", action="store_true")
    tools.set_defaults(func=cmd_tools)

    call = sub.add_parser("call", help="call a tool and follow it to its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", help="the tool's arguments as a JSON object")
    call.add_argument("--answers", metavar="FILE", help="JSON list of elicitation answers, used in order")
    call.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    call.add_argument("--json", action="store_true", help="one JSON event per line")
    call.add_argument("--connect-timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    call.set_defaults(func=cmd_call)

    ops = sub.add_parser("ops", help="the operations journal")
    ops.add_argument("--json", action="store_true")
    ops.add_argument("--limit", type=int, default=200)
    ops.set_defaults(func=cmd_ops)

    resume = sub.add_parser("resume", help="resume and poll every unfinished operation")
    resume.add_argument("--wait", action="store_true", help="follow each until it ends")
    resume.add_argument("--json", action="store_true")
    resume.add_argument("--answers", metavar="FILE", help="JSON list of elicitation answers, used in order")
    resume.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    resume.add_argument("--settle", type=float, default=2.0, help=argparse.SUPPRESS)
    resume.set_defaults(func=cmd_resume)

    cancel = sub.add_parser("cancel", help="cancel an operation")
    cancel.add_argument("op")
    cancel.add_argument("--timeout", type=float, default=60.0, help=argparse.SUPPRESS)
    cancel.set_defaults(func=cmd_cancel)

    conf = sub.add_parser("conformance-client", help="client for the official MCP conformance suite")
    conf.add_argument("url")
    conf.set_defaults(func=cmd_conformance, needs_home=False)

    lab = sub.add_parser("lab", help="the built-in lab server (run 'hostapp lab serve --help')", add_help=False)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER)
    lab.set_defaults(func=None)
    return parser


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    # httpcore's debug lines quote whole request and response headers (session ids,
    # secret header values); they stay out of the log even when verbose.
    logging.getLogger("httpcore").setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        from hostapp.app import main as gui_main

        return gui_main([])
    if argv[0] == "lab":
        return cmd_lab(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(args.verbose)
    # Not args.command: `servers add --command CMD` shares that name (None with --url).
    if getattr(args, "func", None) is None:
        from hostapp.app import main as gui_main

        return gui_main([])
    home = None
    try:
        if getattr(args, "needs_home", True):
            home = Home()
        return args.func(args, home)
    except UsageError as exc:
        print(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (TransportError, RpcError) as exc:
        print(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from hostapp.store.secrets import KeyringUnavailable

        from hostapp.auth import AuthorizationError, SignInRequired

        if isinstance(exc, KeyringUnavailable):
            print(f"hostapp: {exc}", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, SignInRequired):
            print(f"hostapp: {exc}; run 'hostapp servers login {exc.server_name}'", file=sys.stderr)
            return EXIT_ERROR
        if isinstance(exc, (AuthorizationError, TimeoutError)):
            print(f"hostapp: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise
    finally:
        if home is not None:
            home.close()
