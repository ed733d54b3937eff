"""The headless command line, over the same engine as the window.

``hostapp`` with no arguments opens the window. The sub-commands are stable: tests and
people script against them.

    hostapp servers add NAME --url URL [--header K=V ...] [--secret-header K=V ...]
    hostapp servers add NAME [--env K=V ...] [--secret-env K=V ...] -- CMD [ARG ...]
    hostapp servers add NAME --command CMD [--arg=A ...] [--env K=V ...] [--secret-env K=V ...]
    hostapp servers add NAME --url URL --grant GRANT --client-id ID [--client-secret-stdin |
        --private-key PEM_FILE | --assertion-file FILE] [--scope S] [--dpop]
    hostapp servers list [--json] | hostapp servers remove NAME
    hostapp servers login NAME | hostapp servers logout NAME
    hostapp tools SERVER [--timeout S] [--json]
    hostapp skills SERVER [--json] | hostapp skills SERVER NAME [--json]
    hostapp call SERVER TOOL [--args JSON] [--answers FILE] [--unanswered decline|wait] [--timeout S] [--json]
    hostapp ops [--json] | hostapp resume [--wait] [--answers FILE] [--json] | hostapp cancel OP [--timeout S]
    hostapp conformance-client URL
    hostapp lab serve (--http PORT | --stdio) [...]

With ``--json`` a call prints one JSON object per line: progress, status, elicitation and
log events, then a last ``result`` or ``error`` line. Exit status 0 on a result (an
``isError`` result too), 1 on an error, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hostapp.agent.commands import add_parsers as add_agent_parsers
from hostapp.agent.commands import agent_engine
from hostapp.engine import api, open_engine
from hostapp.engine.api import (
    TERMINAL,
    EngineApi,
    EngineError,
    EngineListener,
    InputRequest,
    JsonObject,
    OperationView,
    ServerUnavailable,
    ServerView,
    SignInRequired,
)
from hostapp.protocol.elicitation import (
    ElicitationContentError,
    ElicitationSchemaError,
    build_accept,
    describe_form_request,
)
from hostapp.protocol.eras import era_of
from hostapp.protocol.jsonrpc import ProtocolError
from hostapp.protocol.tool_results import content_blocks, text_of

if TYPE_CHECKING:
    from hostapp.engine.api import ServerConfig

log = logging.getLogger("hostapp")

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl+C


class UsageError(Exception):
    """A command line or configuration mistake the person can fix."""


# -- output ---------------------------------------------------------------------------

class EventPrinter:
    """Prints call events as JSON lines (``--json``) or as short human lines."""

    def __init__(self, as_json: bool, stream: TextIO | None = None, operation_id: str | None = None):
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


def render_result_text(result: JsonObject) -> str:
    """A CallToolResult as plain text for a terminal (whatever shape the server gave it)."""
    lines: list[str] = []
    if not isinstance(result, dict):
        return json.dumps(result, ensure_ascii=False)
    if result.get("isError") is True:
        lines.append("the tool reported an error:")
    for block in content_blocks(result):
        kind = block.get("type")
        if kind == "text":
            lines.append(text_of(block.get("text", "")))
        elif kind in ("image", "audio"):
            data = block.get("data")
            size = len(data) * 3 // 4 if isinstance(data, str) else 0
            lines.append(f"<{kind} {text_of(block.get('mimeType', '?'))}, {size} bytes>")
        elif kind == "resource_link":
            lines.append(f"<resource link {text_of(block.get('uri'))}>")
        elif kind == "resource":
            res = block.get("resource")
            res = res if isinstance(res, dict) else {}
            lines.append(text_of(res["text"]) if "text" in res else f"<resource {text_of(res.get('uri'))}>")
        else:
            lines.append(json.dumps(block, ensure_ascii=False))
    if result.get("structuredContent") is not None and not lines:
        lines.append(json.dumps(result["structuredContent"], ensure_ascii=False, indent=2))
    return "\n".join(lines)


SERVERS_ADD_EPILOG = """\
a stdio server: everything after -- is its command and its arguments, as typed in a
shell (arguments that begin with - too):

  hostapp servers add local -- npx -y @modelcontextprotocol/server-everything
"""

#: How long a command waits for a server's answer by default: the handshake, the tool list,
#: the first sign of a call (its result, progress, a status, a question).
DEFAULT_TIMEOUT = 30.0

TIMEOUT_HELP = ("how long to wait for each answer of the server, in seconds (default %(default)g): "
                "the initialize handshake, the tool list")
CALL_TIMEOUT_HELP = (TIMEOUT_HELP + ", the call's first sign of life (its result, progress, a status or a "
                     "question); a call that shows one is followed to its end")

UNANSWERED_HELP = ("a question with no scripted answer left: decline it (the default), or wait: "
                   "leave it open, to be answered later by 'hostapp resume --answers' or in the window")


def load_answers(path: str | None) -> list[JsonObject]:
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


# -- the engine -----------------------------------------------------------------------

@contextlib.asynccontextmanager
async def opened_engine(listener: EngineListener | None = None, *, connect: bool = False) -> AsyncIterator[EngineApi]:
    """The engine of this HOSTAPP_HOME for one command: the background agent's, when one
    owns the home (the command is its client, and what it starts goes on after it), or
    else an engine in this process, stopped (journal closed) at the command's end."""
    engine = await agent_engine(listener)
    if engine is None:
        engine = open_engine(None, listener, connect=connect)
    try:
        yield engine
    finally:
        await engine.stop()


async def configured_server(engine: EngineApi, name: str) -> ServerConfig:
    cfg = await engine.server_config(name)
    if cfg is None:
        known = ", ".join(s.name for s in await engine.server_configs()) or "none"
        raise UsageError(f"no server named {name!r} (configured: {known}); add one with 'hostapp servers add'")
    return cfg


# -- commands -------------------------------------------------------------------------

async def cmd_servers_add(args: argparse.Namespace) -> int:
    command, command_args = args.command, list(args.arg or [])
    if args.command_line is not None:  # everything after "--": the command and its arguments
        if args.command or args.arg:
            raise UsageError("give the stdio command either after -- or with --command/--arg, not both")
        if not args.command_line:
            raise UsageError("give the stdio server's command after --")
        command, *command_args = args.command_line
    if bool(args.url) == bool(command):
        raise UsageError("give exactly one of --url URL (Streamable HTTP) or the stdio command after -- "
                         "(or --command CMD)")
    secret_headers = parse_pairs(args.secret_header, "--secret-header")
    secret_env = parse_pairs(args.secret_env, "--secret-env")
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UsageError(f"--url must be an http:// or https:// URL, got {args.url!r}")
    async with opened_engine() as engine:
        if await engine.server_config(args.name) is not None:
            raise UsageError(f"a server named {args.name!r} already exists; remove it first")
        cfg = api.ServerConfig(
            name=args.name,
            transport="http" if args.url else "stdio",
            url=args.url,
            headers=parse_pairs(args.header, "--header"),
            command=command,
            args=command_args,
            env=parse_pairs(args.env, "--env"),
            protocol_version=args.protocol_version,
        )
        if args.protocol_version:
            try:
                era_of(args.protocol_version)
            except ProtocolError as exc:
                raise UsageError(str(exc)) from None
        cfg.auth, credentials = sign_in_options(args)
        # The secret values go to the keyring; the journal keeps references to them.
        try:
            await engine.add_server(cfg, {"headers": secret_headers, "env": secret_env, "credentials": credentials})
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    print(f"added {cfg.name} ({cfg.transport}: {cfg.url or cfg.command})")
    return EXIT_OK


def sign_in_options(args: argparse.Namespace) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The sign-in settings (``ServerConfig.auth``, nothing secret) and the credentials for the
    keyring that ``servers add``'s options give. A client secret is read from stdin, never
    from the command line; a private key's PEM file is read once and kept in the keyring."""
    settings: dict[str, Any] = {}
    credentials: dict[str, str] = {}
    if args.grant:
        settings["grant"] = args.grant
    if args.client_id:
        settings["client_id"] = args.client_id
    if args.scope:
        settings["scope"] = args.scope
    if args.dpop:
        settings["dpop"] = True
    if args.assertion_file:
        # Read at every use (the workload's platform rotates it): the path is kept, not the token.
        settings["assertion_file"] = str(Path(args.assertion_file).expanduser().resolve())
        settings.setdefault("grant", "jwt_bearer")
    if args.client_secret_stdin:
        secret = sys.stdin.readline().rstrip("\r\n")
        if not secret:
            raise UsageError("--client-secret-stdin: no client secret on standard input")
        credentials["client_secret"] = secret
    if args.private_key:
        try:
            pem = Path(args.private_key).expanduser().read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--private-key: cannot read {args.private_key}: {exc}") from None
        if "PRIVATE KEY-----" not in pem:
            raise UsageError(f"--private-key: {args.private_key} is not a PEM private key")
        credentials["private_key"] = pem
        settings.setdefault("client_auth", "private_key_jwt")
    if (settings or credentials) and not args.url:
        raise UsageError("sign-in options are for HTTP servers (--url)")
    if credentials and not settings.get("client_id"):
        raise UsageError("a client secret or private key needs --client-id")
    return (settings or None), credentials


def server_summary(cfg: ServerConfig) -> dict[str, Any]:
    return {
        "name": cfg.name,
        "transport": cfg.transport,
        "url": cfg.url,
        "command": cfg.command,
        "args": list(cfg.args or []),
        "headers": sorted([*(cfg.headers or {}), *(cfg.secret_headers or {})]),
        "env": sorted([*(cfg.env or {}), *(cfg.secret_env or {})]),
        "auth": cfg.auth,
    }


async def cmd_servers_list(args: argparse.Namespace) -> int:
    async with opened_engine() as engine:
        servers = [server_summary(s) for s in await engine.server_configs()]
    if args.json:
        print(json.dumps(servers, ensure_ascii=False))
    elif not servers:
        print("no servers configured; add one with 'hostapp servers add'")
    else:
        for s in servers:
            target = s["url"] or " ".join([s["command"], *s["args"]])
            print(f"{s['name']:<20} {s['transport']:<6} {target}")
    return EXIT_OK


async def cmd_servers_remove(args: argparse.Namespace) -> int:
    async with opened_engine() as engine:
        cfg = await configured_server(engine, args.name)
        # The server is gone either way; what the keyring kept is said.
        for left_behind in await engine.forget_server(cfg.name):
            print(f"warning: {left_behind}", file=sys.stderr)
    print(f"removed {cfg.name}")
    return EXIT_OK


async def cmd_servers_login(args: argparse.Namespace) -> int:
    """Sign in to an HTTP server: print the authorization URL, wait for the browser's redirect."""
    async with opened_engine() as engine:
        cfg = await configured_server(engine, args.name)
        if cfg.transport != "http":
            raise UsageError(f"{cfg.name} is a stdio server; only HTTP servers sign in")
        url = await engine.begin_sign_in(cfg.name)
        if url:
            print(f"Open this address in a browser to sign in to {cfg.name}:\n\n  {url}\n", flush=True)
            print("Waiting for the browser to come back...", file=sys.stderr, flush=True)
        await engine.finish_sign_in(cfg.name)
    print(f"signed in to {cfg.name}")
    return EXIT_OK


async def cmd_servers_logout(args: argparse.Namespace) -> int:
    async with opened_engine() as engine:
        cfg = await configured_server(engine, args.name)
        await engine.sign_out(cfg.name)
    print(f"signed out of {cfg.name}")
    return EXIT_OK


async def cmd_tools(args: argparse.Namespace) -> int:
    async with opened_engine() as engine:
        cfg = await configured_server(engine, args.server)
        tools = await engine.probe_tools(cfg.name, timeout=args.timeout)
    if args.json:
        print(json.dumps(tools, ensure_ascii=False))
    else:
        for t in tools:
            desc = (t.get("description") or "").strip().splitlines()
            print(f"{t.get('name'):<32} {desc[0] if desc else ''}")
    return EXIT_OK


async def cmd_skills(args: argparse.Namespace) -> int:
    """List a server's skills (no file is read), or load one: every file read and verified."""
    async with opened_engine() as engine:
        cfg = await configured_server(engine, args.server)
        if args.name is None:
            skills = await engine.list_skills(cfg.name)
        else:
            skill = await engine.load_skill(cfg.name, args.name)
    if args.name is None:
        if args.json:
            print(json.dumps(skills, ensure_ascii=False))
        elif not skills:
            print(f"{cfg.name} offers no skills")
        else:
            for s in skills:
                print(f"{s['name']:<32} {s['description'].strip().splitlines()[0] if s['description'].strip() else ''}")
        return EXIT_OK
    if args.json:
        print(json.dumps(skill, ensure_ascii=False))
        return EXIT_OK
    print(skill["instructions"], end="" if skill["instructions"].endswith("\n") else "\n")
    others = [uri for uri in skill["files"] if uri != skill["uri"]]
    print(f"-- {skill['name']}: {len(skill['files'])} file(s) verified (size, digest, frontmatter)"
          + (f"; also: {', '.join(others)}" if others else ""), file=sys.stderr)
    return EXIT_OK


class CallFollower:
    """Engine listener for the CLI: prints the events of the operations it follows and
    answers their questions from the scripted answers."""

    def __init__(self, printer_for: Callable[[str | None], EventPrinter], answers: list[JsonObject],
                 unanswered: str = "decline"):
        self.printer_for = printer_for
        self.answers = list(answers)
        #: What to do with a question when no scripted answer is left: "decline" it, or
        #: "wait": leave it open (answered later by ``hostapp resume --answers`` or the window).
        self.unanswered = unanswered
        self.engine: EngineApi | None = None
        self.follow: set[str] | None = None  # None: every operation
        self._last: dict[str, tuple[float | None, float | None, str | None]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._statuses: dict[str | None, tuple[str, str | None]] = {}  # the last status line printed, per op
        #: Per watched operation: set once the server showed a sign of working on it.
        self.heard: dict[str, asyncio.Event] = {}

    def watch(self, op: OperationView) -> asyncio.Event:
        """Follow ``op``; the event is set on the server's first sign of life for it."""
        if self.follow is not None:
            self.follow.add(op.id)
        heard = self.heard.setdefault(op.id, asyncio.Event())
        self._note(op)
        return heard

    def _note(self, op: OperationView) -> None:
        # "pending" and "running" (and their messages) are the host's own doing: the request went out.
        if op.id in self.heard and (op.progress is not None or op.needs_input
                                    or op.status not in ("pending", "running")):
            self.heard[op.id].set()

    def _follows(self, op_id: str | None) -> bool:
        return op_id is not None and (self.follow is None or op_id in self.follow)

    def seen(self, op: OperationView) -> None:
        """What ``op`` showed before: only news about it is printed."""
        self._last[op.id] = (op.progress, op.total, op.message)

    def operation_changed(self, op: OperationView) -> None:
        if not self._follows(op.id):
            return
        self._note(op)
        key = (op.progress, op.total, op.message)
        if op.progress is not None and self._last.get(op.id) != key and op.status not in TERMINAL:
            self._last[op.id] = key
            self.printer_for(op.id).emit("progress", progress=op.progress, total=op.total, message=op.message)

    def operation_event(self, op_id: str, kind: str, data: JsonObject) -> None:
        if op_id in self.heard and not (kind == "status" and data.get("to") in ("pending", "running")):
            self.heard[op_id].set()
        if kind == "status" and self._follows(op_id) and data.get("to") not in TERMINAL:
            self.status(op_id, str(data.get("to")), data.get("message"))
        elif kind == "log" and (self.follow is None or len(self.follow) == 1):
            op = next(iter(self.follow)) if self.follow else None
            self.printer_for(op).emit("log", level=data.get("level"), logger=data.get("logger"), data=data.get("data"))

    def status(self, op_id: str | None, status: str, message: str | None = None) -> None:
        """Print a status line, unless it only repeats the last one of the operation (the
        command's own "running" and the engine's, for one)."""
        last = self._statuses.get(op_id)
        if last is not None and last[0] == status and (not message or message == last[1]):
            return
        self._statuses[op_id] = (status, message or None)
        fields = {"status": status}
        if message:
            fields["message"] = message
        self.printer_for(op_id).emit("status", **fields)

    def server_changed(self, server: ServerView) -> None:
        pass

    def input_requested(self, request: InputRequest) -> None:
        if request.operation_id is not None and not self._follows(request.operation_id):
            return
        if request.operation_id in self.heard:
            self.heard[request.operation_id].set()
        fields: dict[str, Any] = {"mode": request.mode, "message": request.message}
        if request.mode == "url":
            fields["url"] = request.params.get("url")
        if not self.answers and self.unanswered == "wait":
            self.printer_for(request.operation_id).emit("elicitation", **fields, answer=None, pending=True)
            return  # the question stays open in the journal
        answer = self.answers.pop(0) if self.answers else {"action": "decline"}
        if request.mode == "url":
            answer = {k: v for k, v in answer.items() if k != "content"}  # URL mode carries no content
        elif answer.get("action") == "accept":
            checked = self._checked(request, answer)
            if checked is None and self.unanswered == "wait":
                self.printer_for(request.operation_id).emit("elicitation", **fields, answer=None, pending=True)
                return  # the question stays open, for a better answer
            answer = checked or {"action": "decline"}
        fields["answer"] = answer.get("action")
        self.printer_for(request.operation_id).emit("elicitation", **fields)
        assert self.engine is not None
        # Listener calls return at once; the answer goes to the engine as its own request.
        task = asyncio.ensure_future(self.engine.answer_input(request.id, answer))
        self._answering.add(task)
        task.add_done_callback(self._answering.discard)

    def input_withdrawn(self, request_id: str) -> None:
        pass

    @staticmethod
    def _checked(request: InputRequest, answer: JsonObject) -> JsonObject | None:
        """A scripted form answer checked against the form as the window checks it (and its
        values coerced the same way), or None, said on stderr, when it does not fit."""
        try:
            form = describe_form_request(request.params)
            content = answer.get("content")
            return build_accept(form.fields, content if isinstance(content, dict) else {})
        except ElicitationContentError as exc:
            problems = "; ".join(f"{name}: {message}" for name, message in exc.errors.items())
            print(f"hostapp: the answer to {request.server}'s question does not fit its form ({problems}); "
                  "it is not sent", file=sys.stderr)
        except ElicitationSchemaError as exc:
            print(f"hostapp: {request.server} asks with a form that cannot be filled ({exc}); "
                  "the answer is not sent", file=sys.stderr)
        return None

    def problem(self, kind: str, message: str) -> None:
        print(f"hostapp: {message}", file=sys.stderr)


def emit_outcome(printer: EventPrinter, op: OperationView) -> int:
    """The last lines of a followed operation; the exit status it deserves."""
    printer.emit("status", status=op.status)
    if op.result is not None:
        printer.emit("result", result=op.result)
        return EXIT_OK
    error = op.error or {}
    printer.emit("error", code=error.get("code"), message=error.get("message") or op.status)
    return EXIT_ERROR


def following(follower: CallFollower) -> contextlib.AbstractAsyncContextManager[EngineApi]:
    """An engine that connects servers and tells ``follower`` what happens."""
    return opened_engine(follower, connect=True)


async def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.args) if args.args else {}
    except ValueError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise UsageError("--args must be a JSON object")
    printer = EventPrinter(args.json)
    follower = CallFollower(lambda _op: printer, load_answers(args.answers), args.unanswered)
    follower.follow = set()
    async with following(follower) as engine:
        follower.engine = engine
        cfg = await configured_server(engine, args.server)
        await engine.start(resume=False, only=frozenset({cfg.name}))
        try:
            await engine.wait_connected(cfg.name, timeout=args.timeout)
        except (ServerUnavailable, TimeoutError) as exc:
            printer.emit("error", code=None, message=str(exc) or f"cannot connect to {cfg.name}: timed out")
            return EXIT_ERROR
        op = await engine.start_call(cfg.name, args.tool, arguments)
        heard = follower.watch(op)
        follower.status(op.id, "running")
        final = await finished_unless_silent(engine, op.id, heard, args.timeout)
        if final is None:
            printer.emit("error", code=None, message=f"{cfg.name} did not answer the call to {args.tool} "
                                                     f"within {args.timeout:g} s; the call is cancelled")
            with contextlib.suppress(EngineError, TimeoutError):
                await asyncio.wait_for(engine.cancel(op.id), 5.0)
            return EXIT_ERROR
        return emit_outcome(printer, final)


async def finished_unless_silent(engine: EngineApi, op_id: str, heard: asyncio.Event,
                                 timeout: float) -> OperationView | None:
    """The operation once it ended; None if the server showed no sign of working on it
    (``heard``) within ``timeout`` seconds. After a sign it is followed to its end."""
    finished = asyncio.ensure_future(engine.wait_finished(op_id))
    signed = asyncio.ensure_future(heard.wait())
    try:
        await asyncio.wait({finished, signed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        signed.cancel()
    if not finished.done() and not heard.is_set():
        finished.cancel()
        return None
    return await finished


async def cmd_resume(args: argparse.Namespace) -> int:
    printers: dict[str | None, EventPrinter] = {}

    def printer_for(op_id: str | None) -> EventPrinter:
        if op_id not in printers:
            printers[op_id] = EventPrinter(args.json, operation_id=op_id)
        return printers[op_id]

    follower = CallFollower(printer_for, load_answers(args.answers), args.unanswered)
    async with following(follower) as engine:
        follower.engine = engine
        before = await engine.unfinished_operations()
        unfinished = [op.id for op in before]
        for op in before:  # what the journal holds was shown before the restart: only news is printed
            follower.seen(op)
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


async def cmd_ops(args: argparse.Namespace) -> int:
    async with opened_engine() as engine:
        rows = await engine.operation_rows(limit=args.limit)
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        return EXIT_OK
    if not rows:
        print("no operations yet")
    for r in rows:
        pct = f"{100 * r['progress'] / r['total']:5.1f}%" if r["progress"] is not None and r["total"] else (
            f"{r['progress']:g}" if r["progress"] is not None else "-")
        print(f"{r['id']}  {r['server']:<14} {r['tool']!s:<24} {r['mechanism']!s:<18} {r['status']:<14} {pct}")
    return EXIT_OK


async def cmd_cancel(args: argparse.Namespace) -> int:
    printer = EventPrinter(False, operation_id=args.op)
    follower = CallFollower(lambda _op: printer, [])
    follower.follow = {args.op}
    async with following(follower) as engine:
        follower.engine = engine
        op = await engine.operation(args.op)
        if op is None:
            raise UsageError(f"no operation {args.op!r}; 'hostapp ops' lists them")
        if op.status in TERMINAL:
            print(f"{args.op} already ended: {op.status}")
            return EXIT_OK
        await engine.start(resume=True, only=frozenset({op.server}))
        await engine.cancel(args.op)
        try:
            final = await asyncio.wait_for(engine.wait_finished(args.op), args.timeout)
        except TimeoutError:
            raise api.EngineTimeout(f"{args.op} did not end within {args.timeout:g} s of the cancel request; "
                                    f"'hostapp ops' shows its status") from None
        print(f"{args.op}: {final.status}")
        return EXIT_OK if final.status in TERMINAL else EXIT_ERROR


def cmd_conformance(args: argparse.Namespace) -> int:
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
    add = ssub.add_parser("add", help="add a server", epilog=SERVERS_ADD_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("name")
    add.add_argument("--url", help="Streamable HTTP endpoint")
    add.add_argument("--header", action="append", metavar="K=V", help="HTTP header (stored in the journal)")
    add.add_argument("--secret-header", action="append", metavar="K=V", help="HTTP header kept in the OS keyring")
    add.add_argument("--command", help="stdio server command (or give it after --, with its arguments)")
    add.add_argument("--arg", action="append", metavar="A",
                     help="an argument of the command (repeatable; one that begins with - as --arg=-y)")
    add.add_argument("--env", action="append", metavar="K=V", help="environment variable for the command")
    add.add_argument("--secret-env", action="append", metavar="K=V", help="environment variable kept in the keyring")
    add.add_argument("--protocol-version", metavar="REV",
                     help="use this protocol revision instead of negotiating the newest (e.g. 2025-11-25)")
    add.add_argument("--grant", choices=("authorization_code", "client_credentials", "jwt_bearer"),
                     help="how the server signs in (default: a person in the browser, authorization_code)")
    add.add_argument("--client-id", metavar="ID", help="this host's OAuth client id at the authorization server")
    add.add_argument("--client-secret-stdin", action="store_true",
                     help="read the client secret from standard input (kept in the OS keyring)")
    add.add_argument("--private-key", metavar="PEM_FILE",
                     help="sign client assertions with this private key (private_key_jwt); imported into the keyring")
    add.add_argument("--assertion-file", metavar="FILE",
                     help="a file holding the workload's identity JWT, read at each sign-in (jwt_bearer)")
    add.add_argument("--scope", help="the OAuth scope to ask for")
    add.add_argument("--dpop", action="store_true", help="ask for DPoP-bound tokens (RFC 9449)")
    add.set_defaults(func=cmd_servers_add, command_line=None)
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
    tools.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help=TIMEOUT_HELP)
    tools.set_defaults(func=cmd_tools)

    skills = sub.add_parser("skills", help="list a server's skills, or load one (verified) and print it")
    skills.add_argument("server")
    skills.add_argument("name", nargs="?", help="the skill to load (its name or URI)")
    skills.add_argument("--json", action="store_true")
    skills.set_defaults(func=cmd_skills)

    call = sub.add_parser("call", help="call a tool and follow it to its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", help="the tool's arguments as a JSON object")
    call.add_argument("--answers", metavar="FILE", help="JSON list of elicitation answers, used in order")
    call.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    call.add_argument("--json", action="store_true", help="one JSON event per line")
    call.add_argument("--timeout", "--connect-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                      help=CALL_TIMEOUT_HELP)
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
    cancel.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help="how long to wait for the operation to end, in seconds (default %(default)g)")
    cancel.set_defaults(func=cmd_cancel)

    conf = sub.add_parser("conformance-client", help="client for the official MCP conformance suite")
    conf.add_argument("url")
    conf.set_defaults(func=cmd_conformance)

    add_agent_parsers(sub)  # hostapp agent [status|stop], hostapp autostart

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


def split_command_line(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``servers add NAME ... -- CMD ARG ...``: the options, and the stdio command after the
    first ``--`` kept whole (argparse would take its arguments that begin with - as options)."""
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    if not any(argv[i:i + 2] == ["servers", "add"] for i in range(cut)):
        return argv, None  # another command's "--" is argparse's
    return argv[:cut], argv[cut + 1:]


def main(argv: list[str] | None = None) -> int:
    """The ``hostapp`` command; ends quietly when its output is closed (``hostapp ops | head``)
    or on Ctrl+C (one line on stderr, exit status 130)."""
    try:
        status = run(argv)
        sys.stdout.flush()  # a closed pipe shows here rather than as a complaint at exit
        return status
    except BrokenPipeError:
        # Python's recipe (signal module docs, "Note on SIGPIPE"): whatever is still
        # buffered for the closed pipe goes nowhere, so that the exit flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("hostapp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        from hostapp.app import main as gui_main

        return gui_main([])
    if argv[0] == "lab":
        return cmd_lab(argv[1:])
    parser = build_parser()
    argv, command_line = split_command_line(argv)
    args = parser.parse_args(argv)
    if command_line is not None:
        args.command_line = command_line
    setup_logging(args.verbose)
    # Not args.command: `servers add --command CMD` shares that name (None with --url).
    if getattr(args, "func", None) is None:
        from hostapp.app import main as gui_main

        return gui_main([])
    try:
        outcome = args.func(args)
        return asyncio.run(outcome) if inspect.iscoroutine(outcome) else outcome
    except UsageError as exc:
        print(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SignInRequired as exc:
        print(f"hostapp: {exc}; run 'hostapp servers login {exc.server_name}'", file=sys.stderr)
        return EXIT_ERROR
    except (EngineError, TimeoutError) as exc:
        print(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_ERROR
