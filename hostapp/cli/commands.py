"""The sub-commands of ``hostapp``: one ``cmd_*`` function each, given the parsed arguments.

Each gets the engine it needs from the home's owner (:mod:`hostapp.cli.connect`), does its
work and returns the exit status. The parser that maps the command line to them is in
:mod:`hostapp.cli`; following a call's events is :mod:`hostapp.cli.follow`, letting go of it
on Ctrl+C :mod:`hostapp.cli.attach`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import difflib
import json
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hostapp.agent.client import AgentGone
from hostapp.cli import ops
from hostapp.cli.attach import INTERRUPTED, Interrupts, carried_by_owner, interrupted, say, unless_interrupted
from hostapp.cli.connect import config_engine, owner_engine, reading_engine
from hostapp.cli.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, UsageError
from hostapp.cli.follow import CallFollower, EventPrinter, emit_outcome, finished_unless_silent, unless_stalled
from hostapp.cli.text import echo, json_text, plain
from hostapp.engine import api
from hostapp.engine.api import (
    TERMINAL,
    EngineApi,
    EngineError,
    JsonObject,
    ServerUnavailable,
)
from hostapp.protocol.eras import era_of
from hostapp.protocol.jsonrpc import ProtocolError
from hostapp.protocol.resources import describe
from hostapp.protocol.roots import normalize_roots
from hostapp.protocol.schema_form import argument_problems

if TYPE_CHECKING:
    from hostapp.engine.api import ServerConfig


T = TypeVar("T")


def load_answers(path: str | None) -> list[JsonObject]:
    """The scripted answers of ``--answers FILE``: a question's ``{"action": ...}``, or a
    sampling request's ``{"reply": TEXT}`` (read as ``{"action": "accept", "reply": TEXT}``)."""
    if not path:
        return []
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read answers from {path}: {exc}") from None
    if not isinstance(data, list) or not all(
            isinstance(a, dict) and (a.get("action") in ("accept", "decline", "cancel")
                                     or (set(a) == {"reply"} and isinstance(a["reply"], str)))
            for a in data):
        raise UsageError(f"{path} must hold a JSON list of answers like "
                         '{"action":"accept","content":{...}}, {"action":"decline"} or {"reply":"TEXT"}')
    return [{"action": "accept", **a} if set(a) == {"reply"} else a for a in data]


def parse_pairs(pairs: list[str] | None, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} must look like NAME=VALUE, got {pair.split('=')[0]!r}")
        out[key] = value
    return out


# -- the engine -----------------------------------------------------------------------

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
    secret_headers = secret_values(args.secret_header, args.secret_header_stdin, args.secret_header_file,
                                   "--secret-header")
    secret_env = secret_values(args.secret_env, args.secret_env_stdin, args.secret_env_file, "--secret-env")
    if args.url and not args.url.startswith(("http://", "https://")):
        raise UsageError(f"--url must be an http:// or https:// URL, got {args.url!r}")
    async with config_engine() as engine:
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
            roots=root_folders(args.root),
            log_level=args.log_level,
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


def root_folders(paths: list[str] | None) -> list[str]:
    """The folders of ``--root`` options, absolute and resolved here (the agent's current
    folder is not the command's); a path that is not a folder is a usage error."""
    try:
        return normalize_roots(paths or [])
    except ValueError as exc:
        raise UsageError(f"--root: {exc}") from None


async def cmd_servers_update(args: argparse.Namespace) -> int:
    """Change a server's roots or log level; a live connection tells the server
    (roots/list_changed, logging/setLevel) and stays up."""
    if args.root and args.no_roots:
        raise UsageError("give the server's folders with --root DIR (repeatable), or --no-roots, not both")
    if not (args.root or args.no_roots or args.log_level):
        raise UsageError("say what changes: --root DIR (repeatable) or --no-roots, --log-level LEVEL")
    roots = [] if args.no_roots else root_folders(args.root) if args.root else None
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.name)
        if roots is not None:
            cfg.roots = roots
        if args.log_level:
            cfg.log_level = None if args.log_level == "default" else args.log_level
        await engine.update_server(cfg)
    if roots is not None:
        echo(f"{plain(cfg.name)}: " + ("roots " + ", ".join(plain(r) for r in roots) if roots else "no roots"))
    if args.log_level:
        echo(f"{plain(cfg.name)}: log level {cfg.log_level or 'the server default'}")
    return EXIT_OK


def secret_values(pairs: list[str] | None, from_stdin: list[str] | None, from_files: list[str] | None,
                  option: str) -> dict[str, str]:
    """The secret values of ``option`` (``--secret-header``, ``--secret-env``): given as
    NAME=VALUE (seen by every local user in the process list while the command runs, so
    it is said), read from a line of standard input for each ``-stdin`` NAME, or from the
    file of each ``-file`` NAME=FILE (its content without the trailing new line)."""
    values = parse_pairs(pairs, option)
    if values:
        echo(f"note: {option} values can be read by other local users while this command runs; "
             f"{option}-stdin or {option}-file keep them out of sight", file=sys.stderr)
    for name in from_stdin or []:
        line = sys.stdin.readline()
        if not line.strip():
            raise UsageError(f"{option}-stdin {name}: no value on standard input")
        values[name] = line.rstrip("\r\n")
    for name, file in parse_pairs(from_files, f"{option}-file").items():
        try:
            value = Path(file).expanduser().read_text(encoding="utf-8").rstrip("\r\n")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{option}-file {name}: cannot read {file}: {type(exc).__name__}") from None
        if not value:
            raise UsageError(f"{option}-file {name}: {file} is empty")
        values[name] = value
    return values


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
        "roots": list(cfg.roots or []),
        "log_level": cfg.log_level,
    }


def live_summary(view: api.ServerView | None) -> dict[str, Any]:
    """A server's live state as the agent sees it; nulls when no agent holds connections
    (a one-off command connects nothing just to list)."""
    if view is None:
        return {"state": None, "error": None, "stray_answers": None, "last_stray": None, "note": None}
    return {"state": str(view.state), "error": view.error, "stray_answers": view.stray_answers,
            "last_stray": view.last_stray, "note": view.note}


def stray_flag(count: int | None) -> str:
    if not count:
        return ""
    return (f"  ! {count} repl{'y' if count == 1 else 'ies'} to requests hostapp never sent: "
            "the server may be confused; calls may hang")


async def cmd_servers_list(args: argparse.Namespace) -> int:
    from hostapp.agent.client import RemoteEngine

    async with reading_engine() as engine:
        configs = await engine.server_configs()
        # Only the agent keeps servers connected: its views say how each one is doing.
        live = {v.name: v for v in await engine.servers()} if isinstance(engine, RemoteEngine) else {}
    servers = [{**server_summary(cfg), **live_summary(live.get(cfg.name))} for cfg in configs]
    if args.json:
        print(json_text(servers))
    elif not servers:
        print("no servers configured; add one with 'hostapp servers add'")
    else:
        for s in servers:
            target = s["url"] or " ".join([s["command"], *s["args"]])
            state = (s["state"] or "-").replace("_", " ")
            note = f"  ({plain(s['note'])})" if s.get("note") else ""
            echo(f"{plain(s['name']):<20} {s['transport']:<6} {state:<13} {plain(target)}{note}"
                 f"{stray_flag(s['stray_answers'])}")
    return EXIT_OK


async def cmd_servers_remove(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.name)
        # The server is gone either way; what the keyring kept is said.
        for left_behind in await engine.forget_server(cfg.name):
            echo(f"warning: {left_behind}", file=sys.stderr)
    print(f"removed {cfg.name}")
    return EXIT_OK


async def cmd_servers_login(args: argparse.Namespace) -> int:
    """Sign in to an HTTP server: print the authorization URL, wait for the browser's redirect."""
    async with owner_engine(verbose=args.verbose) as engine:
        cfg = await configured_server(engine, args.name)
        if cfg.transport != "http":
            raise UsageError(f"{cfg.name} is a stdio server; only HTTP servers sign in")
        url = await engine.begin_sign_in(cfg.name)
        if url:
            echo(f"Open this address in a browser to sign in to {cfg.name}:\n\n  {plain(url)}\n", flush=True)
            print("Waiting for the browser to come back...", file=sys.stderr, flush=True)
        await engine.finish_sign_in(cfg.name)
    print(f"signed in to {cfg.name}")
    return EXIT_OK


async def cmd_servers_logout(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.name)
        await engine.sign_out(cfg.name)
    print(f"signed out of {cfg.name}")
    return EXIT_OK


async def cmd_tools(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.server)
        tools = await engine.probe_tools(cfg.name, timeout=args.timeout)
    if args.json:
        print(json_text(tools))
    else:
        for t in tools:
            desc = str(t.get("description") or "").strip().splitlines()
            echo(f"{plain(t.get('name')):<32} {plain(desc[0]) if desc else ''}")
    return EXIT_OK


async def cmd_skills(args: argparse.Namespace) -> int:
    """List a server's skills (no file is read), or load one: every file read and verified."""
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.server)
        if args.name is None:
            skills = await engine.list_skills(cfg.name)
        else:
            skill = await engine.load_skill(cfg.name, args.name)
    if args.name is None:
        if args.json:
            print(json_text(skills))
        elif not skills:
            print(f"{cfg.name} offers no skills")
        else:
            for s in skills:
                lines = str(s["description"] or "").strip().splitlines()
                echo(f"{plain(s['name']):<32} {plain(lines[0]) if lines else ''}")
        return EXIT_OK
    if args.json:
        print(json_text(skill))
        return EXIT_OK
    echo(skill["instructions"], end="" if skill["instructions"].endswith("\n") else "\n")
    others = [plain(uri) for uri in skill["files"] if uri != skill["uri"]]
    echo(f"-- {plain(skill['name'])}: {len(skill['files'])} file(s) verified (size, digest, frontmatter)"
         + (f"; also: {', '.join(others)}" if others else ""), file=sys.stderr)
    return EXIT_OK


async def cmd_resources(args: argparse.Namespace) -> int:
    """A server's resources: listed, one read (text printed as plain text, anything to a
    file with --output), or one watched for changes until Ctrl+C."""
    if args.action is not None and not args.uri:
        raise UsageError(f"{args.action} needs the resource's URI")
    if args.output and args.action != "read":
        raise UsageError("--output goes with read")
    if args.action == "watch":
        return await watch_resource(args)
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.server)
        if args.action is None:
            listing = await engine.list_resources(cfg.name)
        else:
            read = await engine.read_resource(cfg.name, args.uri)
    if args.action is None:
        if args.json:
            print(json_text(listing))
            return EXIT_OK
        if not listing["resources"] and not listing["templates"]:
            echo(f"{plain(cfg.name)} lists no resources")
        for entry in listing["resources"]:
            echo(plain(describe(entry)))
        for entry in listing["templates"]:
            echo(plain(f"template: {describe(entry)}"))
        return EXIT_OK
    return write_contents(read["contents"], args)


def write_contents(contents: list[JsonObject], args: argparse.Namespace) -> int:
    """Print what ``resources read`` got (text as plain text; a binary content only said),
    or write it all to ``--output`` (0600, the bytes as sent)."""
    from hostapp.protocol.resources import ResourceError, blob_bytes

    if args.json:
        print(json_text({"contents": contents}))
        return EXIT_OK
    if args.output:
        try:
            data = b"".join(blob_bytes(item) for item in contents)
        except ResourceError as exc:
            raise EngineError(str(exc)) from None
        try:
            write_private_file(Path(args.output), data)
        except OSError as exc:
            raise UsageError(f"--output: cannot write {args.output}: {exc.strerror or exc}") from None
        echo(f"wrote {len(data):,} bytes to {args.output}", file=sys.stderr)
        return EXIT_OK
    for item in contents:
        if "text" in item:
            text = str(item["text"])
            echo(text, end="" if text.endswith("\n") else "\n")
        else:
            size = len(str(item.get("blob", ""))) * 3 // 4
            echo(f"{plain(item['uri'])}: binary ({plain(item.get('mimeType') or 'no type')}, about {size:,} bytes); "
                 "save it with --output FILE", file=sys.stderr)
    return EXIT_OK


def write_private_file(path: Path, data: bytes) -> None:
    """Write ``data`` readable and writable by this user only (a resource may be private)."""
    import os

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class _ResourceUpdates:
    """The listener of ``resources … watch``: the updates of one resource, in a queue."""

    def __init__(self, server: str, uri: str) -> None:
        self.server, self.uri = server, uri
        self.updates: asyncio.Queue[JsonObject] = asyncio.Queue()

    def operation_event(self, op_id: str, kind: str, data: JsonObject) -> None:
        if kind == "resource_updated" and data.get("server") == self.server and data.get("uri") == self.uri:
            self.updates.put_nowait(data)

    def operation_changed(self, op: api.OperationView) -> None: ...
    def server_changed(self, server: api.ServerView) -> None: ...
    def input_requested(self, request: api.InputRequest) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def server_removed(self, name: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


async def next_or_gone(queue: asyncio.Queue[JsonObject], engine: EngineApi) -> JsonObject | None:
    """The next item of ``queue``, or None once the agent's connection closed (it stopped)."""
    wait_closed = getattr(engine, "wait_closed", None)
    if wait_closed is None:
        return await queue.get()
    item = asyncio.ensure_future(queue.get())
    gone = asyncio.ensure_future(wait_closed())
    try:
        await asyncio.wait((item, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not item.done():
            item.cancel()
    return item.result() if item.done() and not item.cancelled() else None


def agent_stopped(what: str) -> int:
    echo(f"hostapp: the agent stopped; {what} ended", file=sys.stderr)
    return EXIT_ERROR


async def watch_resource(args: argparse.Namespace) -> int:
    """Subscribe through the agent and print a line per change until Ctrl+C (or the agent goes)."""
    import time

    listener = _ResourceUpdates(args.server, args.uri)
    async with owner_engine(listener, verbose=bool(getattr(args, "verbose", False))) as engine:
        cfg = await configured_server(engine, args.server)
        await engine.watch_resource(cfg.name, args.uri)
        try:
            if args.json:
                print(json_text({"event": "watching", "server": cfg.name, "uri": args.uri}), flush=True)
            else:
                echo(f"watching {plain(args.uri)} on {plain(cfg.name)} (Ctrl+C ends it)", file=sys.stderr, flush=True)
            while True:
                update = await next_or_gone(listener.updates, engine)
                if update is None:
                    return agent_stopped("the watch")
                at = time.strftime("%H:%M:%S")
                if args.json:
                    print(json_text({"event": "updated", "at": time.time(), **update}), flush=True)
                else:
                    echo(f"{at} updated {plain(update['uri'])}", flush=True)
        finally:
            with contextlib.suppress(EngineError, AgentGone, TimeoutError):
                await asyncio.wait_for(engine.unwatch_resource(cfg.name, args.uri), 5)


class _ServerLogLines:
    """The listener of ``logs --follow``: one server's new log messages, in a queue."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.lines: asyncio.Queue[JsonObject] = asyncio.Queue()

    def operation_event(self, op_id: str, kind: str, data: JsonObject) -> None:
        if kind == "log" and data.get("server") == self.server:
            self.lines.put_nowait({k: v for k, v in data.items() if k != "server"})

    def operation_changed(self, op: api.OperationView) -> None: ...
    def server_changed(self, server: api.ServerView) -> None: ...
    def input_requested(self, request: api.InputRequest) -> None: ...
    def input_withdrawn(self, request_id: str) -> None: ...
    def server_removed(self, name: str) -> None: ...
    def problem(self, kind: str, message: str) -> None: ...


def print_log_entry(entry: JsonObject, as_json: bool) -> None:
    import time

    from hostapp.protocol.server_log import log_line

    if as_json:
        print(json_text(entry), flush=True)
    else:
        at = entry.get("at")
        when = time.strftime("%H:%M:%S", time.localtime(at)) if isinstance(at, (int, float)) else "--:--:--"
        echo(f"{when} {plain(log_line(entry))}", flush=True)


async def cmd_logs(args: argparse.Namespace) -> int:
    """``servers log`` (alias ``logs``): what a server logged to the host, as the agent kept
    it; with --level, the server's log level set first (as ``servers update --log-level``);
    with --follow, then each new message until Ctrl+C. The agent keeps them in memory while
    it runs."""
    from hostapp.agent.commands import agent_engine

    if args.level:
        async with config_engine() as configuring:
            cfg = await configured_server(configuring, args.server)
            cfg.log_level = None if args.level == "default" else args.level
            await configuring.update_server(cfg)
        echo(f"{plain(cfg.name)}: log level {cfg.log_level or 'the server default'}", file=sys.stderr)
    listener = _ServerLogLines(args.server)
    if args.follow:
        context: contextlib.AbstractAsyncContextManager[EngineApi] = owner_engine(
            listener, verbose=bool(getattr(args, "verbose", False)))
    else:
        running = await agent_engine()
        if running is None:
            echo("no agent runs: server logs are kept by the agent while it runs (none to show); "
                 "'hostapp servers log SERVER --follow' starts it", file=sys.stderr)
            return EXIT_OK
        context = _closing(running)
    async with context as engine:
        cfg = await configured_server(engine, args.server)
        kept = await engine.server_log(cfg.name, args.limit)
        for entry in kept:
            print_log_entry(entry, args.json)
        if not args.follow:
            return EXIT_OK
        last = kept[-1]["at"] if kept else float("-inf")
        while True:
            new = await next_or_gone(listener.lines, engine)
            if new is None:
                return agent_stopped("following the log")
            if new.get("at", float("inf")) > last:  # not one printed from what was kept
                print_log_entry(new, args.json)


@contextlib.asynccontextmanager
async def _closing(engine: EngineApi) -> Any:
    try:
        yield engine
    finally:
        await engine.stop()


def following(follower: CallFollower, args: argparse.Namespace) -> contextlib.AbstractAsyncContextManager[EngineApi]:
    """The owner's engine, telling ``follower`` what happens (started when none runs)."""
    return owner_engine(follower, verbose=bool(getattr(args, "verbose", False)))


async def answer_open_questions(engine: EngineApi, follower: CallFollower) -> None:
    """Questions of the followed operations asked before this command connected (the owner
    asked them when it resumed them, say): handled as if they came now. One that also
    comes as an event is handled once."""
    for request in await engine.open_questions():
        if request.operation_id is not None and follower.follow is not None \
                and request.operation_id in follower.follow:
            follower.input_requested(request)


async def cmd_call(args: argparse.Namespace) -> int:
    try:
        arguments = json.loads(args.args) if args.args else {}
    except ValueError as exc:
        raise UsageError(f"--args is not valid JSON: {exc}") from None
    if not isinstance(arguments, dict):
        raise UsageError("--args must be a JSON object")
    printer = EventPrinter(args.json)
    follower = CallFollower(lambda _op: printer, load_answers(args.answers), args.unanswered,
                            approve_sampling=args.approve_sampling)
    follower.follow = set()
    async with following(follower, args) as engine:
        follower.engine = engine
        cfg = await configured_server(engine, args.server)
        await engine.start(resume=False, only=frozenset({cfg.name}))  # an engine of this process's own only
        try:
            await engine.wait_connected(cfg.name, timeout=args.timeout)
        except (ServerUnavailable, TimeoutError) as exc:
            printer.emit("error", code=None, message=str(exc) or f"cannot connect to {cfg.name}: timed out")
            return EXIT_ERROR
        # A typo is caught here, before the owner journals anything or tells the desktop.
        check_call(cfg.name, args.tool, arguments, await engine.list_tools(cfg.name, timeout=args.timeout))
        # From the moment the call is asked for, Ctrl+C lets go of it instead of ending the
        # command in the middle: the owner carries it either way.
        with Interrupts().catching() as interrupts:
            op = await engine.start_call(cfg.name, args.tool, arguments)
            announce(printer, op)
            heard = follower.watch(op)
            follower.status(op.id, "running")
            final = await until_the_end(
                unless_stalled(engine, op.id, finished_unless_silent(engine, op.id, heard, args.timeout),
                               follower.stalled[op.id]),
                engine, op, follower, printer, interrupts, args.cancel_on_interrupt)
            if isinstance(final, int):
                return final
        if final is None:
            printer.emit("error", code=None, message=f"{cfg.name} did not answer the call to {args.tool} "
                                                     f"within {args.timeout:g} s; the call is cancelled")
            with contextlib.suppress(EngineError, TimeoutError):
                await asyncio.wait_for(engine.cancel(op.id), 5.0)
            return EXIT_ERROR
        return emit_outcome(printer, final)


def check_call(server: str, tool: str, arguments: JsonObject, tools: list[JsonObject]) -> None:
    """Refuse, as a usage mistake, a call to a tool ``server`` does not list or with arguments
    its ``inputSchema`` rejects. An empty list says nothing (a server whose ``tools/list``
    failed still takes the call, and answers it)."""
    if not tools:
        return
    by_name = {str(t["name"]): t for t in tools if isinstance(t.get("name"), str)}
    if tool not in by_name:
        close = difflib.get_close_matches(tool, list(by_name), n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        raise UsageError(f"{server} has no tool named {tool!r}; {hint}'hostapp tools {server}' lists its "
                         f"{len(by_name)} tool(s)")
    problems = argument_problems(by_name[tool].get("inputSchema", {}), arguments)
    if problems:
        raise UsageError(f"--args do not fit the input schema of {server}/{tool}; nothing was started:\n"
                         + "\n".join(f"  {p}" for p in problems)
                         + f"\n('hostapp tools {server} --json' shows the schema)")


async def until_the_end(waiting: Awaitable[T], engine: EngineApi, op: api.OperationView, follower: CallFollower,
                        printer: EventPrinter, interrupts: Interrupts, cancel_on_interrupt: bool) -> T | int:
    """What ``waiting`` gives (``op``'s end, or None when the server stayed silent), or the
    command's exit status when it let go of ``op``: Ctrl+C (detached, or cancelled), or the
    agent gone."""
    try:
        final = await unless_interrupted(waiting, interrupts)
    except AgentGone:
        return owner_gone(op)
    if final is INTERRUPTED:
        if follower.follow is not None:
            follower.follow.discard(op.id)
        printer.let_go()
        return await interrupted(engine, op, interrupts, cancel_on_interrupt=cancel_on_interrupt,
                                 emit_final=lambda ended: emit_outcome(printer, ended))
    return final


def owner_gone(op: api.OperationView) -> int:
    """The agent ended (stopped, or killed) while this command followed ``op``."""
    say(f"hostapp: the agent stopped while following operation {op.id}; if it can be resumed it goes on "
        f"when an agent runs again: 'hostapp follow {op.id}' starts one and follows it")
    return EXIT_ERROR


def announce(printer: EventPrinter, op: api.OperationView) -> None:
    """The operation's id, first: on stderr for a person (stdout stays the call's own
    output), as a first ``started`` event line with ``--json``."""
    if printer.as_json:
        printer.emit("started", operation=op.id, server=op.server, tool=op.tool)
    else:
        say(f"operation {op.id} started on {op.server}/{op.tool}")


async def cmd_follow(args: argparse.Namespace) -> int:
    """Follow an operation already started (by ``call``, the window, anyone) to its end,
    printing what ``call`` prints, with its exit statuses."""
    printer = EventPrinter(args.json)
    follower = CallFollower(lambda _op: printer, load_answers(args.answers), args.unanswered,
                            approve_sampling=args.approve_sampling)
    follower.follow = set()
    async with following(follower, args) as engine:
        follower.engine = engine
        op = await engine.operation(args.op)
        if op is None:
            raise UsageError(f"no operation {args.op!r}; 'hostapp ops' lists them")
        if op.status in TERMINAL:
            return emit_outcome(printer, op)
        _carried, orphans = await carried_by_owner(engine, [op])
        if orphans:
            say(f"hostapp: nothing drives {op.id} ({op.status} in the journal, not carried by the agent); "
                f"not waiting for it")
            return EXIT_ERROR
        with Interrupts().catching() as interrupts:
            follower.watch(op)
            if not args.json:
                say(f"following operation {op.id} on {op.server}/{op.tool}")
            printer.known(op)  # its line counts the operation's time, not this command's
            follower.status(op.id, "running" if op.status == api.OperationStatus.PENDING else op.status, op.message)
            follower.operation_changed(op)  # where it has got to
            await answer_open_questions(engine, follower)
            final = await until_the_end(unless_stalled(engine, op.id, engine.wait_finished(op.id),
                                                       follower.stalled[op.id]),
                                        engine, op, follower, printer, interrupts, args.cancel_on_interrupt)
            if isinstance(final, int):
                return final
        return emit_outcome(printer, final)


async def cmd_resume(args: argparse.Namespace) -> int:
    """Ask the owner to resume what the journal holds unfinished, and follow it. The owner
    resumes everything when it takes the home (this command starts it when none runs), and
    drives what it resumed alone: two of these at once each follow, neither resumes twice."""
    printers: dict[str | None, EventPrinter] = {}

    def printer_for(op_id: str | None) -> EventPrinter:
        if op_id not in printers:
            printers[op_id] = EventPrinter(args.json, operation_id=op_id, live=args.wait)
        return printers[op_id]

    follower = CallFollower(printer_for, load_answers(args.answers), args.unanswered,
                            approve_sampling=args.approve_sampling)
    follower.follow = set()
    async with following(follower, args) as engine:
        follower.engine = engine
        await engine.start(resume=True)  # an engine of this process's own only: the owner resumed at its start
        unfinished, orphans = await carried_by_owner(engine, await engine.unfinished_operations())
        for op_id in orphans:
            say(f"hostapp: nothing drives {op_id} (unfinished in the journal, not carried by the agent); "
                "not waiting for it")
        for op in unfinished:  # what the journal holds was shown before the restart: only news is printed
            follower.seen(op)
            follower.watch(op)
        if not unfinished:
            if not args.json:
                print("nothing to resume")
            return EXIT_OK
        await answer_open_questions(engine, follower)
        ids = [op.id for op in unfinished]
        if not args.wait:
            await asyncio.sleep(args.settle)
            for op in await engine.operations(statuses=None, limit=len(ids) + 50):
                if op.id in ids:
                    printer_for(op.id).emit("status", status=op.status)
            return EXIT_OK
        with Interrupts().catching() as interrupts:
            outcome = await unless_interrupted(_each_outcome(engine, ids, printer_for, follower), interrupts)
        if outcome is INTERRUPTED:
            for printer in printers.values():
                printer.let_go()
            say(f"hostapp: stopped following; the {len(ids)} operation(s) go on in the background "
                "('hostapp ops' lists them, 'hostapp follow OP' follows one)")
            return EXIT_INTERRUPTED
        return int(outcome)


async def _each_outcome(engine: EngineApi, ids: list[str], printer_for: Any, follower: CallFollower) -> int:
    """Each operation's outcome as it ends (or once it stalls); the worst exit status."""
    async def ended(op_id: str) -> api.OperationView:
        live = await engine.operation(op_id)  # the journal's view does not say whether it stalled
        if live is not None:
            follower.watch(live)
        return await unless_stalled(engine, op_id, engine.wait_finished(op_id), follower.stalled[op_id])

    codes = [EXIT_OK]
    for next_end in asyncio.as_completed([ended(op_id) for op_id in ids]):
        final = await next_end
        codes.append(emit_outcome(printer_for(final.id), final))
    return max(codes)


async def cmd_ops(args: argparse.Namespace) -> int:
    statuses, servers = ops.parse_statuses(args.status), set(args.server or []) or None
    async with reading_engine() as engine:
        if args.json:
            rows = await ops.matching_rows(engine, statuses, servers, args.limit, with_view_calls=args.all,
                                           view_of=args.view_of)
        else:
            views = await ops.matching_operations(engine, statuses, servers, args.limit, with_view_calls=args.all,
                                                  view_of=args.view_of)
            paused = await ops.paused_ids(engine, views)
    if args.json:
        print(json_text(rows))
    else:
        ops.print_table(views, filtered=bool(statuses or servers or args.view_of), paused=paused,
                        with_view_calls=args.all or args.view_of is not None)
    return EXIT_OK


async def cmd_cancel(args: argparse.Namespace) -> int:
    printer = EventPrinter(False, operation_id=args.op, live=False)
    follower = CallFollower(lambda _op: printer, [])
    follower.follow = {args.op}
    async with following(follower, args) as engine:
        follower.engine = engine
        op = await engine.operation(args.op)
        if op is None:
            raise UsageError(f"no operation {args.op!r}; 'hostapp ops' lists them")
        if op.status in TERMINAL:
            print(f"{args.op} already ended: {op.status}")
            return EXIT_OK
        await engine.start(resume=True, only=frozenset({op.server}))  # an engine of this process's own only
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


# -- the model that answers sampling requests ------------------------------------------------

async def cmd_model_set(args: argparse.Namespace) -> int:
    if args.api_key_stdin and args.no_api_key:
        raise UsageError("--api-key-stdin and --no-api-key contradict each other")
    key: str | None = None
    if args.api_key_stdin:
        key = sys.stdin.readline().rstrip("\r\n")
        if not key:
            raise UsageError("--api-key-stdin: no API key on standard input")
    elif args.no_api_key:
        key = ""
    async with config_engine() as engine:
        settings = await engine.set_model(args.base_url, list(args.model), key)
    _print_model(settings)
    return EXIT_OK


async def cmd_model_show(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        settings = await engine.model_settings()
    if args.json:
        print(json_text(settings))
    else:
        _print_model(settings)
    return EXIT_OK


async def cmd_model_clear(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        await engine.clear_model()
    print("no model: servers' sampling requests are answered by you alone")
    return EXIT_OK


async def cmd_model_policy(args: argparse.Namespace) -> int:
    async with config_engine() as engine:
        cfg = await configured_server(engine, args.server)
        await engine.set_sampling_policy(cfg.name, args.policy)
    print(f"{cfg.name}: " + ("the model answers its sampling requests without asking" if args.policy == "auto"
                             else "each sampling request is shown to you"))
    return EXIT_OK


def _print_model(settings: JsonObject) -> None:
    if not settings.get("base_url"):
        print("no model is configured ('hostapp model set --base-url URL --model NAME')")
        return
    limits = settings.get("limits") or {}
    echo(f"endpoint: {plain(settings['base_url'])}/chat/completions")
    echo(f"models:   {', '.join(plain(m) for m in settings.get('models') or [])}")
    print(f"API key:  {'kept in the OS keyring' if settings.get('api_key') else 'none'}")
    print(f"limits:   {limits.get('max_tokens')} tokens a reply, {limits.get('max_chars')} characters a request, "
          f"{limits.get('per_minute')} requests a minute per server")
    auto = settings.get("auto_approve") or []
    echo(f"answers without asking for: {', '.join(plain(s) for s in auto) if auto else 'no server'}")
