"""The headless command line, over the same engine as the window.

``hostapp`` with no arguments opens the window. The sub-commands are stable: tests and
people script against them.

    hostapp servers add NAME --url URL [--header K=V ...] [--secret-header K=V ...]
    hostapp servers add NAME --command CMD [--arg A ...] [--env K=V ...] [--secret-env K=V ...]
    hostapp servers list [--json] | hostapp servers remove NAME
    hostapp tools SERVER [--json]
    hostapp call SERVER TOOL [--args JSON] [--answers FILE] [--json]
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

from hostapp.engine.session import ClientHandlers, RequestContext
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


class ScriptedAnswers(ClientHandlers):
    """Answers elicitations from a list (``--answers FILE``) in order; declines when none is left."""

    def __init__(self, answers: list[dict[str, Any]], printer: EventPrinter):
        self.answers = list(answers)
        self.printer = printer

    async def elicit(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        mode = params.get("mode") or "form"
        answer = self.answers.pop(0) if self.answers else {"action": "decline"}
        if mode == "url":
            answer = {k: v for k, v in answer.items() if k != "content"}  # URL mode carries no content
        fields: dict[str, Any] = {"mode": mode, "message": params.get("message", "")}
        if mode == "url":
            fields["url"] = params.get("url")
        fields["answer"] = answer.get("action")
        self.printer.emit("elicitation", **fields)
        return answer

    def on_log(self, params: dict[str, Any]) -> None:
        self.printer.emit("log", level=params.get("level"), logger=params.get("logger"), data=params.get("data"))


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
    )
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
    for ref in [*(cfg.secret_headers or {}).values(), *(cfg.secret_env or {}).values()]:
        try:
            home.secrets.delete(ref)
        except Exception as exc:  # the server is gone either way; say what was left behind
            print(f"warning: could not remove a secret of {cfg.name} from the keyring: {type(exc).__name__}",
                  file=sys.stderr)
    print(f"removed {cfg.name}")
    return EXIT_OK


def _secret_store_if_needed(cfg: Any, home: Home):
    if cfg.secret_headers or cfg.secret_env:
        home.secrets.check()
        return home.secrets
    return None


async def _tools(args: argparse.Namespace, home: Home) -> int:
    from hostapp.engine.connections import open_session

    cfg = home.server(args.server)
    session, info = await open_session(cfg, secret_store=_secret_store_if_needed(cfg, home))
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


async def _call(args: argparse.Namespace, home: Home) -> int:
    from hostapp.engine.connections import open_session

    try:
        arguments = json.loads(args.args) if args.args else {}
    except ValueError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise UsageError("--args must be a JSON object")
    printer = EventPrinter(args.json)
    handlers = ScriptedAnswers(load_answers(args.answers), printer)
    cfg = home.server(args.server)
    try:
        session, info = await open_session(cfg, handlers, secret_store=_secret_store_if_needed(cfg, home))
    except (TransportError, RpcError) as exc:
        printer.emit("error", code=getattr(exc, "code", None), message=f"cannot connect to {cfg.name}: {exc}")
        return EXIT_ERROR
    try:
        printer.emit("status", status="running")
        result = await session.call_tool(
            args.tool, arguments,
            on_progress=lambda p, t, m: printer.emit("progress", progress=p, total=t, message=m))
        printer.emit("status", status="failed" if result.get("isError") else "completed")
        printer.emit("result", result=result)
        return EXIT_OK
    except RpcError as exc:
        printer.emit("status", status="failed")
        printer.emit("error", code=exc.code, message=exc.message)
        return EXIT_ERROR
    except TransportError as exc:
        printer.emit("status", status="failed")
        printer.emit("error", code=None, message=str(exc))
        return EXIT_ERROR
    finally:
        await session.close()


def cmd_tools(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_tools(args, home))


def cmd_call(args: argparse.Namespace, home: Home) -> int:
    return asyncio.run(_call(args, home))


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
    add.set_defaults(func=cmd_servers_add)
    lst = ssub.add_parser("list", help="list configured servers")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_servers_list)
    rm = ssub.add_parser("remove", help="remove a server (its history stays)")
    rm.add_argument("name")
    rm.set_defaults(func=cmd_servers_remove)

    tools = sub.add_parser("tools", help="list a server's tools")
    tools.add_argument("server")
    tools.add_argument("--json", action="store_true")
    tools.set_defaults(func=cmd_tools)

    call = sub.add_parser("call", help="call a tool and follow it to its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", help="the tool's arguments as a JSON object")
    call.add_argument("--answers", metavar="FILE", help="JSON list of elicitation answers, used in order")
    call.add_argument("--json", action="store_true", help="one JSON event per line")
    call.set_defaults(func=cmd_call)

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
    if args.command is None:
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

        if isinstance(exc, KeyringUnavailable):
            print(f"hostapp: {exc}", file=sys.stderr)
            return EXIT_ERROR
        raise
    finally:
        if home is not None:
            home.close()
