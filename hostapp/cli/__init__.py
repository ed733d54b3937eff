"""The headless command line, over the same engine as the window.

``hostapp`` with no arguments opens the window. The sub-commands are stable: tests and
people script against them.

    hostapp servers add NAME --url URL [--header K=V ...] [--secret-header K=V ...]
    hostapp servers add NAME [--env K=V ...] [--secret-env K=V ...] -- CMD [ARG ...]
    hostapp servers add NAME --command CMD [--arg=A ...] [--env K=V ...] [--secret-env K=V ...]
    hostapp servers add NAME --url URL --grant GRANT --client-id ID [--client-secret-stdin |
        --private-key PEM_FILE | --assertion-file FILE] [--scope S] [--dpop]
    hostapp servers add NAME ... [--root DIR ...]
    hostapp servers update NAME [--root DIR ... | --no-roots] [--log-level L|default]
    hostapp servers log SERVER [--level L|default] [--follow] [--limit N] [--json]   (also: hostapp logs ...)
    hostapp servers list [--json] | hostapp servers remove NAME
    hostapp servers login NAME | hostapp servers logout NAME
    hostapp tools SERVER [--timeout S] [--json]
    hostapp skills SERVER [--json] | hostapp skills SERVER NAME [--json]
    hostapp resources SERVER [--json] | hostapp resources SERVER read URI [--output FILE] [--json]
    hostapp resources SERVER watch URI [--json]
    hostapp call SERVER TOOL [--args JSON] [--answers FILE] [--unanswered decline|wait] [--approve-sampling]
        [--timeout S] [--json]
    hostapp follow OP [--json] | hostapp ops [--status S[,S...]] [--server NAME] [--limit N] [--json]
    hostapp resume [--wait] [--answers FILE] [--json] | hostapp cancel OP [--timeout S]
    hostapp model set --base-url URL --model NAME [--model NAME ...] [--api-key-stdin] | hostapp model show [--json]
    hostapp model clear | hostapp model policy SERVER ask|auto
    hostapp agent [status|stop] | hostapp autostart enable|disable|status
    hostapp conformance-client URL
    hostapp lab serve (--http PORT | --stdio) [...]

With ``--json`` a call prints one JSON object per line: a first ``started`` line with the
operation's id, then progress, status, elicitation, sampling and log events, then a last ``result``
or ``error`` line. Exit status 0 on a result (an ``isError`` result too), 1 on an error, 2
on bad usage, 130 when Ctrl+C let go of the call (it goes on in the background) or
cancelled it.

The commands are clients of the home's owner, the background agent (``hostapp agent``),
started when a command needs it (:mod:`hostapp.cli.connect`): calls outlive the command.

The package: this module parses the command line (:func:`build_parser`) and runs it
(:func:`main`); the sub-commands are in :mod:`hostapp.cli.commands` (imported when one
runs: ``hostapp --help`` and a lab server on stdio load none of the engine, the agent's
client or the journal), the following of a call's events in :mod:`hostapp.cli.follow`
(shown to a person by :mod:`hostapp.cli.progress`: a live line per operation on a
terminal), Ctrl+C while following in :mod:`hostapp.cli.attach`, ``hostapp ops`` in
:mod:`hostapp.cli.ops` (its table drawn by :mod:`hostapp.cli.table`), the exit statuses in
:mod:`hostapp.cli.exits`.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from hostapp.agent.commands import add_parsers as add_agent_parsers
from hostapp.cli.exits import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError
from hostapp.cli.text import echo

log = logging.getLogger("hostapp")


def _command(name: str) -> Callable[[argparse.Namespace], Any]:
    """``hostapp.cli.commands.<name>``, imported when the command runs."""
    def run_command(args: argparse.Namespace) -> Any:
        return getattr(importlib.import_module("hostapp.cli.commands"), name)(args)
    run_command.__name__ = name
    return run_command


def __getattr__(name: str) -> Any:
    # The follower's classes, for their users, without importing them with the parser.
    if name in ("CallFollower", "EventPrinter", "render_result_text"):
        return getattr(importlib.import_module("hostapp.cli.follow"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "EXIT_ERROR", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "CallFollower", "EventPrinter", "UsageError",
    "build_parser", "main", "render_result_text", "run",
]

SERVERS_ADD_EPILOG = """\
a stdio server: everything after -- is its command and its arguments, as typed in a
shell (arguments that begin with - too):

  hostapp servers add local -- npx -y @modelcontextprotocol/server-everything

secret values: a command line can be read by every local user while the command runs, so
give secrets on standard input (one line each: the headers in the order given, then the
environment variables, then the client secret) or in a file:

  printf '%s\\n' "$TOKEN" | hostapp servers add api --url https://api.example/mcp \\
      --secret-header-stdin Authorization
"""

#: How long a command waits for a server's answer by default: the handshake, the tool list,
#: the first sign of a call (its result, progress, a status, a question).
DEFAULT_TIMEOUT = 30.0

TIMEOUT_HELP = ("how long to wait for each answer of the server, in seconds (default %(default)g): "
                "the initialize handshake, the tool list")
CALL_TIMEOUT_HELP = (TIMEOUT_HELP + ", the call's first sign of life (its result, progress, a status or a "
                     "question); a call that shows one is followed to its end")

CANCEL_ON_INTERRUPT_HELP = ("Ctrl+C cancels the operation (by default it lets go of it: the operation goes on in "
                            "the background, and a second Ctrl+C within 2 s cancels it)")

RESOURCES_EPILOG = """\
  hostapp resources ev                               the resources and templates of ev
  hostapp resources ev read demo://resource/static/document/architecture.md
  hostapp resources ev read demo://resource/dynamic/blob/1 --output blob.bin
  hostapp resources ev watch demo://resource/dynamic/text/1   (Ctrl+C ends it)
"""

ROOT_HELP = ("a folder the server is told it may work in (an MCP root; repeatable): sent as a file:// URI "
             "when the server asks (roots/list)")

#: The MCP log levels, least severe first (hostapp.store.server_config.LOG_LEVELS, not
#: imported: the parser loads no engine module).
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_LEVEL_HELP = "the least severe log messages the server is asked to send (logging/setLevel)"

LOG_HELP = "what a server logged to the host (kept by the agent while it runs)"

UNANSWERED_HELP = ("a question with no scripted answer left: decline it (the default), or wait: "
                   "leave it open, to be answered later by 'hostapp resume --answers' or in the window")

ANSWERS_HELP = ('JSON list of answers, used in order: {"action":"accept","content":{...}} or {"action":"decline"} '
                'for a question, {"reply":"TEXT"} for a sampling request')

APPROVE_SAMPLING_HELP = ("let the configured model ('hostapp model set') answer the sampling requests of the "
                         "operations followed, without asking")


# -- parser ---------------------------------------------------------------------------

def _log_arguments(log: argparse.ArgumentParser) -> None:
    """``servers log`` and its alias ``logs``: what a server logged, its level set first."""
    log.add_argument("server")
    log.add_argument("--level", choices=(*LOG_LEVELS, "default"), metavar="L",
                     help=LOG_LEVEL_HELP + ", set before printing as 'servers update --log-level' does (one of "
                     + ", ".join(LOG_LEVELS) + "; default: leave it to the server)")
    log.add_argument("--follow", "-f", action="store_true", help="then print each new message until Ctrl+C")
    log.add_argument("--limit", type=int, default=200, metavar="N", help="the last N messages (default %(default)s)")
    log.add_argument("--json", action="store_true", help="one JSON object per message")
    log.set_defaults(func=_command("cmd_logs"))


def _add_secret_options(parser: argparse.ArgumentParser, option: str, what: str) -> None:
    """``--secret-OPTION K=V``, ``--secret-OPTION-stdin K`` and ``--secret-OPTION-file K=FILE``:
    one value kept in the OS keyring, given three ways (the first is visible to other local
    users while the command runs, so its help points to the other two)."""
    parser.add_argument(f"--secret-{option}", action="append", metavar="K=V",
                        help=f"{what} kept in the OS keyring (its value is visible to other local users "
                             "while the command runs: prefer the two options below)")
    parser.add_argument(f"--secret-{option}-stdin", action="append", metavar="K",
                        help=f"{what} kept in the OS keyring, its value read from a line of standard input")
    parser.add_argument(f"--secret-{option}-file", action="append", metavar="K=FILE",
                        help=f"{what} kept in the OS keyring, its value read from FILE")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hostapp", description="A desktop host for MCP servers. "
                                     "Without a command, opens the window.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debugging detail to stderr")
    parser.add_argument("--show-operation", metavar="OP", help="open the window at this operation")
    parser.add_argument("--tray", action="store_true",
                        help="start with the tray icon only, the window hidden until it is asked for (at login)")
    sub = parser.add_subparsers(dest="command")

    servers = sub.add_parser("servers", help="configure MCP servers")
    ssub = servers.add_subparsers(dest="servers_command", required=True)
    add = ssub.add_parser("add", help="add a server", epilog=SERVERS_ADD_EPILOG,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    add.add_argument("name")
    add.add_argument("--url", help="Streamable HTTP endpoint")
    add.add_argument("--header", action="append", metavar="K=V", help="HTTP header (stored in the journal)")
    _add_secret_options(add, "header", "HTTP header")
    add.add_argument("--command", help="stdio server command (or give it after --, with its arguments)")
    add.add_argument("--arg", action="append", metavar="A",
                     help="an argument of the command (repeatable; one that begins with - as --arg=-y)")
    add.add_argument("--env", action="append", metavar="K=V", help="environment variable for the command")
    _add_secret_options(add, "env", "environment variable of the command")
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
    add.add_argument("--root", action="append", metavar="DIR", help=ROOT_HELP)
    add.add_argument("--log-level", choices=LOG_LEVELS, help=LOG_LEVEL_HELP)
    add.set_defaults(func=_command("cmd_servers_add"), command_line=None)
    update = ssub.add_parser("update", help="change a server's roots or log level (its connection stays up)")
    update.add_argument("name")
    update.add_argument("--root", action="append", metavar="DIR",
                        help="the folders the server is given, in place of those it had (repeatable)")
    update.add_argument("--no-roots", action="store_true", help="give the server no folders")
    update.add_argument("--log-level", choices=(*LOG_LEVELS, "default"),
                        help=LOG_LEVEL_HELP + "; default: leave it to the server (from its next connection)")
    update.set_defaults(func=_command("cmd_servers_update"))
    lst = ssub.add_parser("list", help="list configured servers")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=_command("cmd_servers_list"))
    rm = ssub.add_parser("remove", help="remove a server (its history stays)")
    rm.add_argument("name")
    rm.set_defaults(func=_command("cmd_servers_remove"))
    login = ssub.add_parser("login", help="sign in to an HTTP server that asks for it (OAuth)")
    login.add_argument("name")
    login.set_defaults(func=_command("cmd_servers_login"))
    logout = ssub.add_parser("logout", help="sign out: remove the server's tokens from the keyring")
    logout.add_argument("name")
    logout.set_defaults(func=_command("cmd_servers_logout"))
    _log_arguments(ssub.add_parser("log", help=LOG_HELP))

    tools = sub.add_parser("tools", help="list a server's tools")
    tools.add_argument("server")
    tools.add_argument("--json", action="store_true")
    tools.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S", help=TIMEOUT_HELP)
    tools.set_defaults(func=_command("cmd_tools"))

    skills = sub.add_parser("skills", help="list a server's skills, or load one (verified) and print it")
    skills.add_argument("server")
    skills.add_argument("name", nargs="?", help="the skill to load (its name or URI)")
    skills.add_argument("--json", action="store_true")
    skills.set_defaults(func=_command("cmd_skills"))

    resources = sub.add_parser("resources", help="list a server's resources, read one, or watch one for changes",
                               epilog=RESOURCES_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    resources.add_argument("server")
    resources.add_argument("action", nargs="?", choices=("read", "watch"),
                           help="read URI (print it, or save it with --output), or watch URI (print each change "
                                "until Ctrl+C); without: list the resources and templates")
    resources.add_argument("uri", nargs="?")
    resources.add_argument("--output", metavar="FILE", help="with read: write the contents to FILE (a binary "
                                                           "resource is written only this way)")
    resources.add_argument("--json", action="store_true")
    resources.set_defaults(func=_command("cmd_resources"))

    _log_arguments(sub.add_parser("logs", help="the same as 'hostapp servers log'"))

    call = sub.add_parser("call", help="call a tool and follow it to its result")
    call.add_argument("server")
    call.add_argument("tool")
    call.add_argument("--args", help="the tool's arguments as a JSON object")
    call.add_argument("--answers", metavar="FILE", help=ANSWERS_HELP)
    call.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    call.add_argument("--approve-sampling", action="store_true", help=APPROVE_SAMPLING_HELP)
    call.add_argument("--json", action="store_true", help="one JSON event per line")
    call.add_argument("--timeout", "--connect-timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                      help=CALL_TIMEOUT_HELP)
    call.add_argument("--cancel-on-interrupt", action="store_true", help=CANCEL_ON_INTERRUPT_HELP)
    call.set_defaults(func=_command("cmd_call"))

    follow = sub.add_parser("follow", help="follow an operation already started to its end (as call does)")
    follow.add_argument("op", help="the operation's id (call prints it first; 'hostapp ops' lists them)")
    follow.add_argument("--json", action="store_true", help="one JSON event per line")
    follow.add_argument("--answers", metavar="FILE", help=ANSWERS_HELP)
    follow.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    follow.add_argument("--approve-sampling", action="store_true", help=APPROVE_SAMPLING_HELP)
    follow.add_argument("--cancel-on-interrupt", action="store_true", help=CANCEL_ON_INTERRUPT_HELP)
    follow.set_defaults(func=_command("cmd_follow"))

    ops = sub.add_parser("ops", help="the operations journal")
    ops.add_argument("--json", action="store_true")
    ops.add_argument("--limit", type=int, default=200, metavar="N",
                     help="at most N operations, those in flight first, then the newest (default %(default)s)")
    ops.add_argument("--status", action="append", metavar="S",
                     help="only operations with this status (repeatable, or a comma list): running, "
                          "input_required (needs-input), completed, failed, cancelled, expired, unknown, "
                          "pending; in-flight, finished")
    ops.add_argument("--server", action="append", metavar="NAME", help="only operations on this server (repeatable)")
    ops.add_argument("--all", action="store_true",
                     help="also the calls that app views made (hidden by default; the VIEW OF column names "
                          "the operation whose view made each)")
    ops.add_argument("--view-of", metavar="OP",
                     help="only the calls that the app view of operation OP made (its row counts them)")
    ops.set_defaults(func=_command("cmd_ops"))

    resume = sub.add_parser("resume", help="resume and poll every unfinished operation")
    resume.add_argument("--wait", action="store_true", help="follow each until it ends")
    resume.add_argument("--json", action="store_true")
    resume.add_argument("--answers", metavar="FILE", help=ANSWERS_HELP)
    resume.add_argument("--unanswered", choices=("decline", "wait"), default="decline", help=UNANSWERED_HELP)
    resume.add_argument("--approve-sampling", action="store_true", help=APPROVE_SAMPLING_HELP)
    resume.add_argument("--settle", type=float, default=2.0, help=argparse.SUPPRESS)
    resume.set_defaults(func=_command("cmd_resume"))

    cancel = sub.add_parser("cancel", help="cancel an operation")
    cancel.add_argument("op")
    cancel.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help="how long to wait for the operation to end, in seconds (default %(default)g)")
    cancel.set_defaults(func=_command("cmd_cancel"))

    model = sub.add_parser("model", help="the language model that answers servers' sampling requests")
    msub = model.add_subparsers(dest="model_command", required=True)
    mset = msub.add_parser("set", help="set the OpenAI-compatible chat-completions endpoint")
    mset.add_argument("--base-url", required=True, metavar="URL",
                      help="the API's base URL, e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1")
    mset.add_argument("--model", action="append", required=True, metavar="NAME",
                      help="a model name (repeatable: the first is the default, a server's hints choose among them)")
    mset.add_argument("--api-key-stdin", action="store_true",
                      help="read the API key from a line of standard input (kept in the OS keyring)")
    mset.add_argument("--no-api-key", action="store_true", help="remove a kept API key (a local model needs none)")
    mset.set_defaults(func=_command("cmd_model_set"))
    mshow = msub.add_parser("show", help="the endpoint, the models, the limits and the servers approved")
    mshow.add_argument("--json", action="store_true")
    mshow.set_defaults(func=_command("cmd_model_show"))
    mclear = msub.add_parser("clear", help="forget the endpoint and its API key")
    mclear.set_defaults(func=_command("cmd_model_clear"))
    mpolicy = msub.add_parser("policy", help="ask for each sampling request of a server (ask, the default), or "
                                             "let the model answer them (auto)")
    mpolicy.add_argument("server")
    mpolicy.add_argument("policy", choices=("ask", "auto"))
    mpolicy.set_defaults(func=_command("cmd_model_policy"))

    conf = sub.add_parser("conformance-client", help="client for the official MCP conformance suite")
    conf.add_argument("url")
    conf.set_defaults(func=_command("cmd_conformance"))

    add_agent_parsers(sub)  # hostapp agent [status|stop], hostapp autostart

    lab = sub.add_parser("lab", help="the built-in lab server (run 'hostapp lab serve --help')", add_help=False)
    lab.add_argument("lab_args", nargs=argparse.REMAINDER)
    lab.set_defaults(func=None)
    return parser


def setup_logging(verbose: bool) -> None:
    from hostapp.protocol.shown_text import RedactUrlSecrets

    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactUrlSecrets())
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
        from hostapp.lab.server import main as lab_main

        return lab_main(argv[1:])
    parser = build_parser()
    argv, command_line = split_command_line(argv)
    args = parser.parse_args(argv)
    if command_line is not None:
        args.command_line = command_line
    setup_logging(args.verbose)
    # Not args.command: `servers add --command CMD` shares that name (None with --url).
    if getattr(args, "func", None) is None:
        from hostapp.app import main as gui_main

        return gui_main([*(["--show-operation", args.show_operation] if args.show_operation else []),
                         *(["--tray"] if args.tray else [])])
    try:
        outcome = args.func(args)
        return asyncio.run(outcome) if inspect.iscoroutine(outcome) else outcome
    except UsageError as exc:
        echo(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        from hostapp.engine.api import EngineError, SignInRequired

        # What an error says may be a server's words: through the one sanitizer.
        if isinstance(exc, SignInRequired):
            echo(f"hostapp: {exc}; run 'hostapp servers login {exc.server_name}'", file=sys.stderr)
            return EXIT_ERROR
        if not isinstance(exc, (EngineError, TimeoutError)):
            raise
        echo(f"hostapp: {exc}", file=sys.stderr)
        return EXIT_ERROR
