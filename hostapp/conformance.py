"""The client command for the official MCP conformance suite (@modelcontextprotocol/conformance).

``hostapp conformance-client URL`` is what the suite runs in client mode: it starts a
scripted server for one scenario, appends that server's URL to the command and names
the scenario in ``MCP_CONFORMANCE_SCENARIO`` (with scenario data, such as the tool calls
to make, as JSON in ``MCP_CONFORMANCE_CONTEXT`` and the revision to speak in
``MCP_CONFORMANCE_PROTOCOL_VERSION``). The suite then judges what went over the wire.

Each scenario here only decides *what* to ask, the way a person at the host would;
every byte is carried by the host's own client layers (:class:`ClientSession` over
:class:`StreamableHttpTransport`), so the suite checks the code the application runs.
The revision is pinned to the one the suite asks for: a scenario server of the
handshake era does not understand ``server/discover``, and the suite expects the
client to take the era from the revision it was given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from hostapp import CLIENT_NAME
from hostapp.engine.session import ClientHandlers, ClientSession, RequestContext
from hostapp.engine.skills import list_skills, load_skill
from hostapp.protocol.elicitation import (
    build_accept,
    build_decline,
    default_content,
    describe_form_request,
)
from hostapp.protocol.skills import SkillVerificationError
from hostapp.transport.http import StreamableHttpTransport

SCENARIO_ENV = "MCP_CONFORMANCE_SCENARIO"
CONTEXT_ENV = "MCP_CONFORMANCE_CONTEXT"
PROTOCOL_VERSION_ENV = "MCP_CONFORMANCE_PROTOCOL_VERSION"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class ScenarioFailed(Exception):
    """The scenario's server did not offer what the scenario needs (a tool, a prompt...)."""


class ConsentingHandlers(ClientHandlers):
    """Answers server requests the way a person who agrees to everything would.

    A form is accepted as the host pre-fills it: every field that has a ``default`` keeps
    it (SEP-1034), other required fields get a plain value of their type and checkboxes
    are ticked. URL elicitation is declined: nothing is opened without a person to consent.
    """

    def __init__(self) -> None:
        super().__init__()
        self._before_elicit_answer: Callable[[dict], Awaitable[None]] | None = None

    def set_before_elicit_answer(self, hook: Callable[[dict], Awaitable[None]] | None) -> None:
        """Run ``hook`` (with the request's params) before answering each elicitation."""
        self._before_elicit_answer = hook

    async def elicit(self, params: dict, ctx: RequestContext) -> dict:
        if self._before_elicit_answer is not None:
            await self._before_elicit_answer(params)
        if params.get("mode") == "url":
            return build_decline()
        return prefilled_answer(params)

    async def create_message(self, params: dict, ctx: RequestContext) -> dict:
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "ok"},
            "model": CLIENT_NAME,
            "stopReason": "endTurn",
        }

    async def list_roots(self, ctx: RequestContext) -> dict:
        return {"roots": []}


def _plain_value(schema: dict) -> Any:
    """A value of a JSON Schema's type, for a field a person would have to fill in."""
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if not isinstance(kind, str):
        return None
    return {"string": "value", "integer": 1, "number": 1, "boolean": True, "object": {}, "array": []}.get(kind)


def prefilled_answer(params: dict) -> dict:
    """The ``ElicitResult`` of a form accepted as the host pre-fills it.

    Fields keep their defaults (SEP-1034: the client applies them before answering);
    required fields without one get a plain value of their type; checkboxes are ticked.
    """
    form = describe_form_request(params)
    content = default_content(form.fields)
    for f in form.fields:
        if f.name in content:
            continue
        if f.kind == "boolean":
            content[f.name] = True
        elif f.required and f.kind == "multi_select":
            content[f.name] = [f.options[0].value] if f.options else []
        elif f.required:
            content[f.name] = f.options[0].value if f.options else _plain_value({"type": f.kind})
    return build_accept(form.fields, content)


def sample_arguments(input_schema: dict) -> dict:
    """Arguments for a tool the scenario wants called without saying with what."""
    return {
        name: _plain_value(prop)
        for name, prop in (input_schema.get("properties") or {}).items()
        if name in set(input_schema.get("required") or [])
    }


def _tool(tools: list[dict], name: str) -> dict:
    for tool in tools:
        if tool.get("name") == name:
            return tool
    raise ScenarioFailed(f"the server does not list the tool {name!r} (it lists {[t.get('name') for t in tools]})")


async def _call_listed_tools(session: ClientSession) -> None:
    """List the tools and call each one the client kept, with arguments from its schema."""
    for tool in await session.list_tools():
        await session.call_tool(tool["name"], sample_arguments(tool.get("inputSchema") or {}))


# --- scenarios -------------------------------------------------------------------------
# Each takes the connected session, the handlers it was built with and the context.


async def _initialize(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # The handshake itself is what the scenario checks; listing tools shows it is usable.
    await session.list_tools()


async def _tools_call(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    _tool(await session.list_tools(), "add_numbers")
    await session.call_tool("add_numbers", {"a": 2, "b": 3})


async def _elicitation_defaults(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    _tool(await session.list_tools(), "test_client_elicitation_defaults")
    await session.call_tool("test_client_elicitation_defaults", {})


async def _sse_retry(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # The server closes the call's SSE stream after its priming event; the transport
    # must reconnect by GET with Last-Event-ID after `retry` ms and get the answer there.
    _tool(await session.list_tools(), "test_reconnection")
    await session.call_tool("test_reconnection", {})


async def _json_schema_preservation(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # The server diffs the schema it gets back against the one it sent: the client
    # must keep every JSON Schema 2020-12 keyword of a tool's inputSchema as it came.
    focal = _tool(await session.list_tools(), "json_schema_2020_12_tool")
    await session.call_tool("json_schema_echo", {"schema": focal["inputSchema"]})


async def _list_tools_only(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    await session.list_tools()


async def _request_state(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    tools = await session.list_tools()
    for name in ("test_mrtr_echo_state", "test_mrtr_unrelated", "test_mrtr_no_state", "test_mrtr_no_result_type"):
        _tool(tools, name)

    unrelated_called = False

    async def call_unrelated_tool_while_asked(params: dict) -> None:
        # While one call waits for input, another request must carry nothing of its
        # requestState or inputResponses.
        nonlocal unrelated_called
        if not unrelated_called:
            unrelated_called = True
            await session.call_tool("test_mrtr_unrelated", {})

    handlers.set_before_elicit_answer(call_unrelated_tool_while_asked)
    await session.call_tool("test_mrtr_echo_state", {})
    handlers.set_before_elicit_answer(None)
    await session.call_tool("test_mrtr_no_state", {})
    await session.call_tool("test_mrtr_no_result_type", {})


async def _standard_headers(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    await _call_listed_tools(session)
    resources = await session.request("resources/list", {})
    for resource in resources.get("resources", []):
        await session.request("resources/read", {"uri": resource["uri"]})
    prompts = await session.request("prompts/list", {})
    for prompt in prompts.get("prompts", []):
        await session.request("prompts/get", {"name": prompt["name"], "arguments": {}})


async def _custom_headers(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # Listing first tells the session which parameters the tools mirror into headers.
    tools = await session.list_tools()
    calls = context.get("toolCalls") or []
    if not calls:
        raise ScenarioFailed(f"{CONTEXT_ENV} names no toolCalls")
    for call in calls:
        _tool(tools, call["name"])
        await session.call_tool(call["name"], call.get("arguments") or {})


async def _invalid_tool_headers(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # The client layers must leave out tools whose x-mcp-header annotations are invalid;
    # every tool they keep is called, so a kept invalid one shows up on the server's side.
    await _call_listed_tools(session)


async def _skills_listed_only(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # Listing is all a person does until they load a skill: no file may be read before that.
    entries = await list_skills(session)
    print(f"skills listed: {', '.join(e.name for e in entries) or 'none'}", file=sys.stderr)


async def _skills_load_first(session: ClientSession, handlers: ConsentingHandlers, context: dict) -> None:
    # A person loads the first listed skill; its SKILL.md has been tampered with, so the
    # host must refuse it after reading that file and read nothing more.
    entries = await list_skills(session)
    if not entries:
        raise ScenarioFailed("the server lists no skill to load")
    try:
        loaded = await load_skill(session, entries[0])
    except SkillVerificationError as exc:
        print(f"skill {entries[0].name} refused: {exc}", file=sys.stderr)
        return
    print(f"skill {loaded.entry.name} loaded ({len(loaded.files)} files verified)", file=sys.stderr)


Scenario = Callable[[ClientSession, ConsentingHandlers, dict], Awaitable[None]]

SCENARIOS: dict[str, Scenario] = {
    "initialize": _initialize,
    "tools_call": _tools_call,
    "elicitation-sep1034-client-defaults": _elicitation_defaults,
    "sse-retry": _sse_retry,
    "json-schema-2020-12-preservation": _json_schema_preservation,
    "json-schema-ref-no-deref": _list_tools_only,
    "request-metadata": _list_tools_only,
    "sep-2322-client-request-state": _request_state,
    "http-standard-headers": _standard_headers,
    "http-custom-headers": _custom_headers,
    "http-invalid-tool-headers": _invalid_tool_headers,
    "sep-2640-client-no-prefetch": _skills_listed_only,
    "sep-2640-client-verify-digest": _skills_load_first,
    "sep-2640-client-verify-size": _skills_load_first,
    "sep-2640-client-verify-frontmatter": _skills_load_first,
}

#: Transport settings a scenario's server needs. The sse-retry server hands its pending
#: tools/call answer to whichever GET stream opens next, with or without Last-Event-ID;
#: the standalone GET stream, opened in the background after initialization, can reach
#: it just after the call and take the answer, and then the reconnection the scenario
#: measures never happens. Without the standalone stream only the resumption GETs remain.
TRANSPORT_OPTIONS: dict[str, dict[str, Any]] = {
    "sse-retry": {"standalone_stream": False},
}


async def run_scenario(url: str, scenario: str, context: dict, protocol_version: str | None = None) -> int:
    """Play ``scenario`` against the suite's server at ``url``; the exit code of the command."""
    if scenario.startswith("auth/"):
        from hostapp.conformance_auth import run_auth_scenario

        return await run_auth_scenario(url, scenario, context, protocol_version)
    play = SCENARIOS.get(scenario)
    if play is None:
        print(f"unknown conformance scenario {scenario!r}; known: {', '.join(sorted(SCENARIOS))}", file=sys.stderr)
        return EXIT_USAGE
    handlers = ConsentingHandlers()
    transport = StreamableHttpTransport(url, **TRANSPORT_OPTIONS.get(scenario, {}))
    session = ClientSession(transport, handlers)
    try:
        info = await session.connect(protocol_version)
        print(f"connected: {info.protocol_version} ({info.era})", file=sys.stderr)
        await play(session, handlers, context)
    except Exception as exc:  # noqa: BLE001 - the command's whole job is to report what went wrong
        print(f"scenario {scenario} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        try:
            await session.close()
        except Exception as exc:  # noqa: BLE001 - the scenario's outcome is already decided
            print(f"closing the session failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    print(f"scenario {scenario} done", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """``conformance-client URL``: the scenario comes from the environment the suite sets."""
    parser = argparse.ArgumentParser(
        prog="hostapp conformance-client",
        description=f"Client for the MCP conformance suite; reads {SCENARIO_ENV} and {CONTEXT_ENV}.",
    )
    parser.add_argument("url", help="the scenario server's MCP endpoint (appended by the suite)")
    args = parser.parse_args(argv)
    scenario = os.environ.get(SCENARIO_ENV)
    if not scenario:
        parser.error(f"{SCENARIO_ENV} is not set; run this command from the conformance suite")
    try:
        context = json.loads(os.environ.get(CONTEXT_ENV) or "{}")
    except json.JSONDecodeError as exc:
        parser.error(f"{CONTEXT_ENV} is not JSON: {exc}")
    version = os.environ.get(PROTOCOL_VERSION_ENV) or None
    return asyncio.run(run_scenario(args.url, scenario, context, version))


if __name__ == "__main__":
    sys.exit(main())
