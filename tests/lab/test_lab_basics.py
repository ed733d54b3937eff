"""The lab over HTTP: both eras' basics, the plain tools, elicitation and failures."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from hostapp.lab.server import FORGET_SESSIONS_ENV
from hostapp.lab.state import LabState, execution_counts

from .conftest import ACCEPT, STATELESS, McpClient, wait_until
from .test_lab_stdio import StdioPeer


def test_initialize_opens_a_session_and_declares_every_mechanism(lab):
    client = McpClient(lab.url)
    result = client.initialize()
    assert result["protocolVersion"] == "2025-11-25"
    caps = result["capabilities"]
    assert caps["tasks"]["requests"]["tools"]["call"] == {}
    assert "io.modelcontextprotocol/tasks" in caps["extensions"]
    assert "resumableRequests" in caps and "streams" in caps and "logging" in caps
    assert client.session_id


@pytest.mark.parametrize("offered, accepted", [("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
                                               ("1999-01-01", "2025-11-25")])
def test_initialize_accepts_known_versions_and_counter_offers_unknown_ones(lab, offered, accepted):
    client = McpClient(lab.url, version=offered)
    assert client.initialize()["protocolVersion"] == accepted


def test_session_rules(lab, client):
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    assert client.post(ping).json()["result"] == {}
    no_session = httpx.post(lab.url, json=ping, headers={"Accept": ACCEPT})
    assert no_session.status_code == 400
    unknown = httpx.post(lab.url, json=ping, headers={"Accept": ACCEPT, "Mcp-Session-Id": "nope"})
    assert unknown.status_code == 404
    wrong_version = httpx.post(lab.url, json=ping, headers={**client.headers(), "MCP-Protocol-Version": "2025-06-18"})
    assert wrong_version.status_code == 400
    assert httpx.delete(lab.url, headers=client.headers()).status_code == 204
    assert client.post(ping).status_code == 404


def test_stateless_discover_and_tools_list(stateless):
    discover = stateless.request("server/discover").result
    assert STATELESS in discover["supportedVersions"] and "2025-11-25" in discover["supportedVersions"]
    assert discover["resultType"] == "complete"
    tools = stateless.request("tools/list").result
    assert tools["resultType"] == "complete"
    by_name = {t["name"]: t for t in tools["tools"]}
    assert set(by_name) == {"sleep_with_progress", "ask_form", "ask_url", "ask_model", "fail", "long_task_ext",
                            "long_mrtr", "long_resume_token", "long_async", "lab_stats", "show_card"}
    assert by_name["long_async"]["invocationMode"] == "async"
    assert all(t["description"] and t["inputSchema"]["type"] == "object" for t in tools["tools"])


#: The long tools each revision and transport offers: those whose mechanism exists there
#: and carries the call across a break (elsewhere it would be a plain request).
LONG_TOOLS_OFFERED = {
    ("2025-11-25", "http"): {"long_sse", "long_task", "long_resume_token", "long_stream", "long_resumable",
                             "long_async"},
    ("2025-06-18", "http"): {"long_sse", "long_resume_token", "long_stream", "long_resumable", "long_async"},
    (STATELESS, "http"): {"long_task_ext", "long_mrtr", "long_resume_token", "long_async"},
    ("2025-11-25", "stdio"): {"long_task", "long_resume_token", "long_resumable", "long_async"},
    (STATELESS, "stdio"): {"long_task_ext", "long_mrtr", "long_resume_token", "long_async"},
}


@pytest.mark.parametrize(("version", "transport"), list(LONG_TOOLS_OFFERED))
def test_each_revision_and_transport_lists_the_long_tools_that_run_there(start_lab, version, transport):
    if transport == "http":
        client = McpClient(start_lab().url, stateless=version == STATELESS, version=version)
        if version != STATELESS:
            client.initialize()
        tools = client.request("tools/list").result["tools"]
        client.close()
    else:
        peer = StdioPeer(start_lab(stdio=True))
        if version == STATELESS:
            meta = {"io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": {}}
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
        else:
            peer.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            peer.until_response(0)
            peer.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        tools = peer.until_response(1)[1]["result"]["tools"]
    assert {t["name"] for t in tools if t["name"].startswith("long_")} == LONG_TOOLS_OFFERED[(version, transport)]
    assert {"sleep_with_progress", "ask_form", "ask_url", "fail", "lab_stats"} <= {t["name"] for t in tools}


def test_a_tool_not_offered_says_where_it_runs(stateless):
    error = stateless.call("long_task", {"seconds": 0, "steps": 1}).error
    assert error["code"] == -32601
    assert "only MCP 2025-11-25 has" in error["message"] and "pinned to 2025-11-25" in error["message"]


def test_stateless_version_and_header_checks(lab, stateless):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": stateless.params({"_meta": {"io.modelcontextprotocol/protocolVersion": "2030-01-01"}})}
    r = httpx.post(lab.url, json=body, headers={"Accept": ACCEPT})
    assert r.status_code == 400 and r.json()["error"]["code"] == -32022
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": stateless.params({})}
    r = httpx.post(lab.url, json=body, headers={**stateless.headers("tools/list"), "Mcp-Method": "tools/call"})
    assert r.status_code == 400


@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_sleep_with_progress(lab, era):
    client = McpClient(lab.url, stateless=era == "stateless")
    if era == "handshake":
        client.initialize()
    exchange = client.call("sleep_with_progress", {"seconds": 0.4, "steps": 4, "message": "zzz"}, progress="tok")
    assert [p["progress"] for p in exchange.progress] == [1, 2, 3, 4]
    assert all(p["progressToken"] == "tok" and p["total"] == 4 and p["message"] == "zzz" for p in exchange.progress)
    assert exchange.result["structuredContent"]["steps"] == 4
    assert exchange.retry_ms is not None
    if era == "handshake":
        assert len(set(exchange.event_ids)) == len(exchange.event_ids) == 6  # priming + 4 progress + answer
    else:
        assert exchange.result["resultType"] == "complete"


def test_logging_follows_the_session_level(client):
    assert "result" in client.post({"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel",
                                    "params": {"level": "info"}}).json()
    exchange = client.call("sleep_with_progress", {"seconds": 0, "steps": 1})
    assert exchange.notifications("notifications/message")[0]["level"] == "info"


ANSWER = {"name": "Grace", "email": "grace@example.org", "homepage": "https://example.org",
          "birthday": "1906-12-09", "meeting": "2026-01-01T10:00:00Z", "height": 1.6, "age": 85,
          "subscribe": False, "color": "blue", "size": "m", "toppings": ["basil"], "extras": ["cutlery"]}


def test_ask_form_handshake(client):
    asked = []

    def answer(request):
        asked.append(request)
        return {"action": "accept", "content": ANSWER}

    exchange = client.call("ask_form", {"message": "Who are you?"}, on_request=answer)
    assert exchange.result["structuredContent"] == {"action": "accept", "content": ANSWER}
    request = asked[0]
    assert request["method"] == "elicitation/create"
    schema = request["params"]["requestedSchema"]["properties"]
    assert request["params"]["message"] == "Who are you?"
    assert {schema[k].get("format") for k in ("email", "homepage", "birthday", "meeting")} == \
        {"email", "uri", "date", "date-time"}
    assert schema["age"]["type"] == "integer" and schema["height"]["type"] == "number"
    assert schema["subscribe"]["type"] == "boolean" and "enum" in schema["color"]
    assert "oneOf" in schema["size"] and "enum" in schema["toppings"]["items"]
    assert "anyOf" in schema["extras"]["items"]


def test_ask_form_stateless_by_input_required(stateless):
    first = stateless.call("ask_form").result
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["form"]["method"] == "elicitation/create"
    second = stateless.call("ask_form", extra={"inputResponses": {"form": {"action": "accept", "content": ANSWER}},
                                               **({"requestState": first["requestState"]}
                                                  if "requestState" in first else {})}).result
    assert second["resultType"] == "complete"
    assert second["structuredContent"]["content"] == ANSWER


def test_ask_url_handshake(client):
    def consent(request):
        params = request["params"]
        assert params["mode"] == "url" and params["elicitationId"]
        assert httpx.get(params["url"]).status_code == 200  # the person opens the page
        return {"action": "accept"}

    exchange = client.call("ask_url", {"wait_seconds": 10}, on_request=consent)
    assert exchange.result["structuredContent"] == {"action": "accept", "visited": True}
    assert len(exchange.notifications("notifications/elicitation/complete")) == 1


@pytest.mark.parametrize("era", ["handshake", "stateless"])
def test_ask_url_required_error_then_retry(lab, era):
    client = McpClient(lab.url, stateless=era == "stateless")
    if era == "handshake":
        client.initialize()
    error = client.call("ask_url", {"required_error": True}).error
    assert error["code"] == -32042
    elicitation = error["data"]["elicitations"][0]
    assert elicitation["mode"] == "url"
    assert httpx.get(elicitation["url"]).status_code == 200
    retry = client.call("ask_url", {"required_error": True}).result
    assert retry["structuredContent"]["elicitationId"] == elicitation["elicitationId"]


def test_fail_modes(lab, client, state_file):
    tool_error = client.call("fail", {"mode": "tool_error"}).result
    assert tool_error["isError"] is True
    rpc_error = client.call("fail", {"mode": "rpc_error"}).error
    assert rpc_error["code"] == -32603
    with pytest.raises(httpx.HTTPError):
        client.call("fail", {"mode": "crash"})
    assert lab.wait_exit() == 70
    assert execution_counts(state_file)["fail"] == 3


def test_unknown_tool_and_bad_arguments(client):
    assert client.call("no_such_tool").error["code"] == -32602
    assert client.call("sleep_with_progress", {"steps": 0}).error["code"] == -32602


def test_lab_stats_counts_real_starts(client, state_file):
    client.call("sleep_with_progress", {"seconds": 0, "steps": 1})
    client.call("sleep_with_progress", {"seconds": 0, "steps": 1})
    stats = client.call("lab_stats").result["structuredContent"]
    assert stats["executions"]["sleep_with_progress"] == 2
    assert stats["duplicates"] == []
    assert execution_counts(state_file)["sleep_with_progress"] == 2


def test_refuse_for_answers_503_for_a_while(start_lab):
    # Long enough that a loaded machine still asks within it; the wait after is a deadline.
    lab = start_lab("--refuse-for", "4")
    client = McpClient(lab.url, stateless=True)
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": client.params({})}
    assert client.post(discover).status_code == 503
    wait_until(lambda: client.post(discover).status_code == 200, what="the lab to stop refusing")


def test_stateless_requests_need_their_routing_headers(lab, stateless):
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": stateless.params({"name": "lab_stats", "arguments": {}})}
    headers = stateless.headers("tools/call", call["params"])
    assert httpx.post(lab.url, json=call, headers=headers).status_code == 200
    del headers["Mcp-Name"]
    missing = httpx.post(lab.url, json=call, headers=headers)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32020
    no_meta = {"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}}
    r = httpx.post(lab.url, json=no_meta, headers=stateless.headers("tools/list"))
    assert r.status_code == 400 and r.json()["error"]["code"] == -32602
    init = {"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": stateless.params({})}
    r = httpx.post(lab.url, json=init, headers=stateless.headers("initialize"))
    assert r.status_code == 404 and r.json()["error"]["code"] == -32601


def test_stateless_results_name_the_server(stateless):
    result = stateless.call("lab_stats").result
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "hostapp-lab"


def test_foreign_host_or_origin_is_refused(lab, client):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert httpx.post(lab.url, json=ping, headers={**client.headers(), "Host": "evil.example"}).status_code == 403
    assert httpx.post(lab.url, json=ping, headers={**client.headers(),
                                                   "Origin": "http://evil.example"}).status_code == 403
    assert httpx.post(lab.url, json=ping, headers={**client.headers(),
                                                   "Origin": f"http://localhost:{lab.port}"}).status_code == 200


def test_an_opaque_origin_is_refused_like_a_foreign_one(lab, client):
    """A sandboxed frame or a file: page sends ``Origin: null``; its simple request (text/plain,
    no preflight) must not reach the lab, a cancellation of a call in flight least of all."""
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    for origin in ("null", "NULL"):
        simple = {**client.headers(), "Origin": origin, "Content-Type": "text/plain"}
        refused = httpx.post(lab.url, content=json.dumps(cancel), headers=simple)
        assert refused.status_code == 403, origin
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert httpx.post(lab.url, json=ping, headers={**client.headers(), "Origin": "null"}).status_code == 403
    assert httpx.post(lab.url, json=ping, headers=client.headers()).status_code == 200  # no Origin: not a page


def test_stateless_era_drops_handshake_methods_and_v1_tasks(lab, stateless):
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": stateless.params({})}
    r = httpx.post(lab.url, json=ping, headers=stateless.headers("ping"))
    assert r.status_code == 404 and r.json()["error"]["code"] == -32601
    assert "tasks" not in stateless.request("server/discover").result["capabilities"]
    assert stateless.request("tasks/get", {"taskId": "x"}).error["code"] == -32021


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_a_time_scale_runs_the_labs_clock_and_its_hints_faster(start_lab, state_file, how, monkeypatch):
    """At a tenth of real time a tool's seconds, the ``retry`` it primes a stream with and
    a task's poll interval are a tenth; the result still names the seconds asked for."""
    if how == "flag":
        lab = start_lab("--time-scale", "0.1")
    else:
        monkeypatch.setenv("HOSTAPP_LAB_TIME_SCALE", "0.1")
        lab = start_lab()
    client = McpClient(lab.url)
    client.initialize()
    exchange = client.call("sleep_with_progress", {"seconds": 20, "steps": 4}, progress="tok")
    assert exchange.retry_ms == 50  # 500 ms in real time
    assert exchange.result["structuredContent"]["seconds"] == 20
    assert [p["progress"] for p in exchange.progress] == [1, 2, 3, 4]
    [job] = [j for j in LabState(state_file).jobs() if j.tool == "sleep_with_progress"]
    assert job.seconds == pytest.approx(2.0)  # what the work really took
    task = client.call("long_task", {"seconds": 3, "steps": 3}, extra={"task": {}}).result["task"]
    assert task["pollInterval"] == 30  # a tenth of the work, at a tenth of real time


def test_a_time_scale_that_is_not_a_positive_number_is_refused(state_file):
    proc = subprocess.run([sys.executable, "-m", "hostapp.lab", "serve", "--http", "0", "--state", str(state_file),
                           "--time-scale", "0"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--time-scale must be a positive number" in proc.stderr


def test_the_lab_offers_a_skill_and_an_app_view_that_hostapps_checks_accept(lab, client):
    """A first run can try Skills and MCP Apps on the lab: its skill passes every check of
    a load (size, digest, frontmatter), its view is a valid app view that reaches no
    origin, and the tool that shows it answers with what the view draws."""
    from hostapp.protocol import skills
    from hostapp.protocol.apps import parse_view_resource, tool_ui

    caps = client.initialize()["capabilities"]
    assert skills.EXTENSION_ID in caps["extensions"]
    [entry] = skills.parse_list_result(client.request("skills/list").response["result"])[0]
    assert entry.name == "lab-tour" and entry.description
    for uri in skills.load_order(entry):
        data = skills.read_contents(client.request("resources/read", {"uri": uri}).response["result"], uri)
        skills.verify_read(entry, uri, data)  # raises on any mismatch
    missing = client.request("resources/read", {"uri": "skill://nothing/SKILL.md"}).response
    assert missing["error"]["code"] == -32002

    tools = {t["name"]: t for t in client.request("tools/list").response["result"]["tools"]}
    ui = tool_ui(tools["show_card"])
    assert ui.resource_uri == "ui://lab/card.html" and ui.model_visible
    view = parse_view_resource(client.request("resources/read", {"uri": ui.resource_uri}).response["result"],
                               ui.resource_uri)
    assert "ui/initialize" in view.html
    assert view.csp.network == () and view.csp.to_json() == {}  # no origin: no network
    result = client.call("show_card", {"title": "Hi", "text": "there"}).response["result"]
    assert result["structuredContent"] == {"title": "Hi", "text": "there"}
    assert result["content"][0]["text"] == "Hi: there"


@pytest.mark.parametrize("mode", ["kept", "flag", "env"])
def test_a_restart_forgets_the_http_sessions_only_when_asked(start_lab, mode):
    # By default the lab keeps its sessions in its state file; --forget-sessions (or the
    # environment variable) makes a restart forget them, as a server that keeps them in
    # memory does: the old session id draws 404, and a new initialize works.
    lab = start_lab(*(["--forget-sessions"] if mode == "flag" else []),
                    env={FORGET_SESSIONS_ENV: "1"} if mode == "env" else None)
    client = McpClient(lab.url)
    try:
        client.initialize()
        assert "result" in client.request("ping").response
        lab.restart()
        answer = client.post({"jsonrpc": "2.0", "id": 99, "method": "ping"})
        if mode == "kept":
            assert answer.status_code == 200
        else:
            assert answer.status_code == 404
            client.session_id = None
            client.initialize()
            assert "result" in client.request("ping").response
    finally:
        client.close()


def test_a_second_lab_on_one_state_file_is_refused(start_lab, state_file):
    # A second copy of a server on the same state would take over the first one's jobs:
    # the lab holds an OS lock on its state, and a second process says so and exits.
    first = start_lab()
    client = McpClient(first.url)
    try:
        client.initialize()
        second = subprocess.run([sys.executable, "-m", "hostapp.lab", "serve", "--http", "0",
                                 "--state", str(state_file)],
                                capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert second.returncode == 3, second.stderr
        assert "another lab process" in second.stderr and str(state_file) in second.stderr
        assert "result" in client.request("ping").response  # the first one serves on
        first.restart()  # killed: the kernel let go of its lock, and the next one starts
        client.session_id = None
        client.initialize()
        assert "result" in client.request("ping").response
    finally:
        client.close()


@pytest.mark.parametrize("tool", ["long_sse", "long_resumable", "long_async", "long_stream", "sleep_with_progress"])
def test_ask_is_refused_where_the_mechanism_cannot_carry_a_question(client, tool):
    # Such a call would wait for ever for an answer to a question nobody could be asked:
    # refused before any work starts, and nothing ran (the lab may be shared: nothing more ran).
    def executions() -> int:
        return client.call("lab_stats", {}).response["result"]["structuredContent"]["executions"].get(tool, 0)

    before = executions()
    answer = client.call(tool, {"seconds": 0.2, "steps": 2, "ask": True})
    assert answer.response["error"]["code"] == -32602
    assert "cannot ask a question" in answer.response["error"]["message"]
    assert "long_task" in answer.response["error"]["message"]
    assert executions() == before
