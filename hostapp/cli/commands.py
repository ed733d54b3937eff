"""The sub-commands of ``hostapp``: one ``cmd_*`` function each, given the parsed arguments.

Each opens the engine it needs (:func:`opened_engine`), does its work and returns the exit
status. The parser that maps the command line to them is in :mod:`hostapp.cli`; following
a call's events is :mod:`hostapp.cli.follow`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hostapp.agent.commands import agent_engine
from hostapp.cli.exits import EXIT_ERROR, EXIT_OK, UsageError
from hostapp.cli.follow import CallFollower, EventPrinter, emit_outcome, finished_unless_silent
from hostapp.engine import api, open_engine
from hostapp.engine.api import (
    TERMINAL,
    EngineApi,
    EngineError,
    EngineListener,
    JsonObject,
    ServerUnavailable,
)
from hostapp.protocol.eras import era_of
from hostapp.protocol.jsonrpc import ProtocolError

if TYPE_CHECKING:
    from hostapp.engine.api import ServerConfig


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


def live_summary(view: api.ServerView | None) -> dict[str, Any]:
    """A server's live state as the agent sees it; nulls when no agent holds connections
    (a one-off command connects nothing just to list)."""
    if view is None:
        return {"state": None, "error": None, "stray_answers": None, "last_stray": None}
    return {"state": str(view.state), "error": view.error, "stray_answers": view.stray_answers,
            "last_stray": view.last_stray}


def stray_flag(count: int | None) -> str:
    if not count:
        return ""
    return (f"  ! {count} repl{'y' if count == 1 else 'ies'} to requests hostapp never sent: "
            "the server may be confused; calls may hang")


async def cmd_servers_list(args: argparse.Namespace) -> int:
    from hostapp.agent.client import RemoteEngine

    async with opened_engine() as engine:
        configs = await engine.server_configs()
        # Only the agent keeps servers connected: its views say how each one is doing.
        live = {v.name: v for v in await engine.servers()} if isinstance(engine, RemoteEngine) else {}
    servers = [{**server_summary(cfg), **live_summary(live.get(cfg.name))} for cfg in configs]
    if args.json:
        print(json.dumps(servers, ensure_ascii=False))
    elif not servers:
        print("no servers configured; add one with 'hostapp servers add'")
    else:
        for s in servers:
            target = s["url"] or " ".join([s["command"], *s["args"]])
            state = (s["state"] or "-").replace("_", " ")
            print(f"{s['name']:<20} {s['transport']:<6} {state:<13} {target}{stray_flag(s['stray_answers'])}")
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
