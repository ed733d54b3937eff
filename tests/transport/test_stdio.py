"""StdioTransport against a real child process (tests/support/stdio_echo_server.py)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from hostapp.protocol.jsonrpc import Notification, ProtocolError, Request, Response
from hostapp.transport.base import ServerExited, TransportError
from hostapp.transport.stdio import StdioTransport, child_environment
from tests.support.hostile_server import stdio_command

ECHO = str(Path(__file__).resolve().parents[1] / "support" / "stdio_echo_server.py")


def echo_transport(*extra: str, **kwargs) -> StdioTransport:
    return StdioTransport(sys.executable, [ECHO, *extra], **kwargs)


async def test_request_and_answer_round_trip(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "ping", {"text": "héllo"}))
        await transport.send(Notification("notifications/initialized"))
        await transport.send(Request(2, "tools/list"))
        await listener.wait_for(lambda: listener.has_response(2))
        assert listener.messages == [
            Response(1, {"method": "ping", "params": {"text": "héllo"}}),
            Response(2, {"method": "tools/list", "params": {}}),
        ]
    finally:
        await transport.close()
    assert listener.closed == [None]
    assert transport.returncode is not None


async def test_malformed_line_is_reported_and_the_connection_stays_usable(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "malformed"))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, raw)] = listener.invalid
        assert isinstance(error, ProtocolError)
        assert raw.strip() == b"this is not json"
        await transport.send(Request(2, "ping"))
        await listener.wait_for(lambda: listener.has_response(2))
    finally:
        await transport.close()


async def test_oversized_line_is_skipped_not_fatal(listener):
    transport = echo_transport(max_message_bytes=64 * 1024)
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "oversized", {"size": 300_000}))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, _raw)] = listener.invalid
        assert "size limit" in str(error)
        # The answer after the oversized line arrived whole, and nothing else was made of it.
        assert listener.messages == [Response(1, {"method": "oversized", "params": {"size": 300_000}})]
        await transport.send(Request(2, "ping"))
        await listener.wait_for(lambda: listener.has_response(2))
    finally:
        await transport.close()


async def test_default_limit_accepts_lines_far_beyond_asyncio_default(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "oversized", {"size": 1_000_000}))
        await listener.wait_for(lambda: listener.has_response(1))
        assert listener.invalid == []
        notification = listener.messages[0]
        assert isinstance(notification, Notification) and len(notification.params["data"]) == 1_000_000
    finally:
        await transport.close()


async def test_stderr_lines_go_to_on_log(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "log", {"lines": ["first", "second"]}))
        await listener.wait_for(lambda: "second" in listener.logs)
        assert listener.logs[0] == "echo server ready"
        assert listener.logs[-2:] == ["first", "second"]
    finally:
        await transport.close()


async def test_exit_mid_call_reports_server_exited_with_stderr_tail(listener):
    transport = echo_transport()
    await transport.connect(listener)
    await transport.send(Request(1, "die", {"code": 3}))
    await listener.wait_for(lambda: listener.closed)
    [error] = listener.closed
    assert isinstance(error, ServerExited)
    assert error.returncode == 3
    assert "exited with code 3" in str(error)
    assert "fatal: the database is locked" in str(error)
    assert not listener.has_response(1)
    with pytest.raises(ServerExited):
        await transport.send(Request(2, "ping"))
    await transport.close()  # harmless after the process ended
    assert listener.closed == [error]


async def test_close_kills_a_server_that_ignores_eof_and_sigterm(listener):
    transport = echo_transport("--stubborn", shutdown_timeout=0.3)
    await transport.connect(listener)
    await transport.send(Request(1, "ping"))
    await listener.wait_for(lambda: listener.has_response(1))
    pid = transport.pid
    await transport.close()
    assert transport.returncode == -9  # SIGKILL was needed
    assert listener.closed == [None]
    # reaped: no zombie left with that pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_missing_command_is_a_clear_transport_error(listener):
    transport = StdioTransport("no-such-mcp-server-command")
    with pytest.raises(TransportError, match="cannot start server: no such command 'no-such-mcp-server-command'"):
        await transport.connect(listener)


async def test_environment_is_minimal_plus_configured(monkeypatch, listener):
    monkeypatch.setenv("HOSTAPP_TEST_SECRET", "must-not-leak")
    env = child_environment({"SERVER_OPTION": "1"})
    assert env["SERVER_OPTION"] == "1"
    assert env["PATH"] == os.environ["PATH"]
    assert "HOSTAPP_TEST_SECRET" not in env
    transport = StdioTransport(sys.executable, ["-c", "import os,sys; print(sorted(os.environ), file=sys.stderr)"],
                               env={"SERVER_OPTION": "1"})
    await transport.connect(listener)
    await listener.wait_for(lambda: listener.closed)
    assert "SERVER_OPTION" in listener.logs[0] and "HOSTAPP_TEST_SECRET" not in listener.logs[0]
    # exiting with code 0 on its own is still an unexpected end of the connection
    assert isinstance(listener.closed[0], ServerExited) and listener.closed[0].returncode == 0


async def test_concurrent_sends_do_not_interleave(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        big = "y" * 200_000
        await asyncio.gather(*(transport.send(Request(i, "ping", {"data": big})) for i in range(1, 21)))
        await listener.wait_for(lambda: len(listener.messages) == 20)
        assert listener.invalid == []
    finally:
        await transport.close()


async def test_last_line_without_newline_before_exit_is_delivered(listener):
    script = 'import sys; sys.stdout.write(\'{"jsonrpc":"2.0","method":"notifications/message","params":{}}\')'
    transport = StdioTransport(sys.executable, ["-c", script])
    await transport.connect(listener)
    await listener.wait_for(lambda: listener.closed)
    assert listener.messages == [Notification("notifications/message", {})]
    await transport.close()


async def test_json_nested_too_deeply_is_reported_and_the_answer_after_it_arrives(listener):
    transport = echo_transport()
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "deep", {"depth": 100_000}))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, _raw)] = listener.invalid
        assert isinstance(error, ProtocolError) and "nested too deeply" in str(error)
        await transport.send(Request(2, "ping"))
        await listener.wait_for(lambda: listener.has_response(2))
    finally:
        await transport.close()


async def test_a_long_line_under_the_limit_arrives_whole_across_reads(listener):
    transport = echo_transport(max_message_bytes=2 * 1024 * 1024)
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "oversized", {"size": 1_500_000}))  # several reads of the pipe
        await listener.wait_for(lambda: listener.has_response(1))
        assert listener.invalid == []
        [notification, _answer] = listener.messages
        assert len(notification.params["data"]) == 1_500_000
    finally:
        await transport.close()


async def test_text_on_stdout_is_named_for_what_it_is_and_quoted_escaped(listener):
    command = stdio_command()
    transport = StdioTransport(command[0], command[1:])
    await transport.connect(listener)
    try:
        await transport.send(Request(1, "tools/call", {"name": "not_json"}))
        await listener.wait_for(lambda: listener.has_response(1))
        [(error, _raw)] = listener.invalid
        text = str(error)
        assert isinstance(error, ProtocolError)
        assert "wrote a line to its stdout that is not a JSON-RPC message" in text
        quoted = text.split("It begins: ")[1]
        assert quoted.startswith("Traceback (most recent call last): \\x1b[31mboom")
        assert "\x1b" not in text and quoted.endswith("…") and len(quoted) <= 81
    finally:
        await transport.close()
