"""`hostapp call` end to end against real servers we did not write, on loopback.

server-everything (npm) in Streamable HTTP and stdio modes, and the official `mcp` SDK
server in its 2026-07-28 mode with a tool that asks by MRTR.
"""

from __future__ import annotations

import json

import pytest

from tests.support.peers import (
    EVERYTHING,
    NODE,
    events,
    hostapp,
    require_everything,
    start_sdk_mrtr_server,
)


@pytest.fixture(params=["http", "stdio"])
def everything(request, isolated_home, everything_http):
    """A HOSTAPP_HOME with server-everything configured over one transport."""
    require_everything()
    if request.param == "http":
        added = hostapp("servers", "add", "ev", "--url", everything_http.url, home=isolated_home)
    else:
        added = hostapp("servers", "add", "ev", "--command", str(NODE), "--arg", str(EVERYTHING), "--arg", "stdio",
                        home=isolated_home)
    assert added.returncode == 0, added.stderr
    return isolated_home


def call(home, tool, args=None, answers=None, tmp=None):
    argv = ["call", "ev", tool, "--json"]
    if args is not None:
        argv += ["--args", json.dumps(args)]
    if answers is not None:
        path = home / "answers.json"
        path.write_text(json.dumps(answers))
        argv += ["--answers", str(path)]
    proc = hostapp(*argv, home=home)
    return proc, events(proc)


def test_long_running_operation_shows_every_progress_step(everything):
    proc, evs = call(everything, "trigger-long-running-operation", {"duration": 2, "steps": 4})
    assert proc.returncode == 0, proc.stderr
    progress = [e for e in evs if e["event"] == "progress"]
    assert [(e["progress"], e["total"]) for e in progress] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert evs[-1]["event"] == "result"
    assert "Long running operation completed" in evs[-1]["result"]["content"][0]["text"]
    ops = json.loads(hostapp("ops", "--json", home=everything).stdout)
    assert [(o["tool"], o["status"]) for o in ops] == [("trigger-long-running-operation", "completed")]


def test_form_elicitation_answered_from_answers_file(everything):
    answer = {"action": "accept", "content": {"name": "Ada Lovelace", "check": True, "integer": 42}}
    proc, evs = call(everything, "trigger-elicitation-request", answers=[answer])
    assert proc.returncode == 0, proc.stderr
    asked = [e for e in evs if e["event"] == "elicitation"]
    assert len(asked) == 1 and asked[0]["mode"] == "form" and asked[0]["answer"] == "accept"
    text = json.dumps(evs[-1]["result"])
    assert "Ada Lovelace" in text


def test_form_elicitation_declined_when_no_answer_is_left(everything):
    proc, evs = call(everything, "trigger-elicitation-request", answers=[])
    assert proc.returncode == 0, proc.stderr
    assert [e["answer"] for e in evs if e["event"] == "elicitation"] == ["decline"]
    assert "decline" in json.dumps(evs[-1]["result"]).lower()


def test_url_elicitation_in_band(everything):
    url = "https://example.com/consent?x=1"
    proc, evs = call(everything, "trigger-url-elicitation", {"url": url, "message": "Please sign the form"},
                     answers=[{"action": "accept"}])
    assert proc.returncode == 0, proc.stderr
    asked = [e for e in evs if e["event"] == "elicitation"]
    assert asked and asked[0]["mode"] == "url" and asked[0]["url"] == url
    assert evs[-1]["event"] == "result"


def test_url_elicitation_required_error_then_retry(everything):
    url = "https://example.com/authorize"
    proc, evs = call(everything, "trigger-url-elicitation",
                     {"url": url, "message": "Authorize first", "errorPath": True},
                     answers=[{"action": "accept"}, {"action": "accept"}])
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    asked = [e for e in evs if e["event"] == "elicitation"]
    # First the prerequisite the -32042 error names, then (the call retried) the tool's own URL.
    assert [(e["mode"], e["url"]) for e in asked] == [("url", "https://modelcontextprotocol.io"), ("url", url)]
    assert evs[-1]["event"] == "result"
    assert "completed the URL elicitation" in evs[-1]["result"]["content"][0]["text"]


def test_url_elicitation_required_declined_ends_in_error(everything):
    proc, evs = call(everything, "trigger-url-elicitation",
                     {"url": "https://example.com/authorize", "message": "Authorize first", "errorPath": True},
                     answers=[{"action": "decline"}])
    assert proc.returncode == 1
    assert evs[-1]["event"] == "error" and evs[-1]["code"] == -32042


def test_structured_content(everything):
    proc, evs = call(everything, "get-structured-content", {"location": "New York"})
    assert proc.returncode == 0, proc.stderr
    result = evs[-1]["result"]
    assert isinstance(result.get("structuredContent"), dict) and result["structuredContent"]


def test_unknown_tool_or_wrong_arguments_are_refused_before_anything_starts(everything):
    """A real third-party server's tool list and input schemas are the reference: a name it
    does not list, or arguments its schema rejects, end the command with exit 2 and a clear
    message, and no operation is started (nothing on stdout, nothing journaled)."""
    proc, evs = call(everything, "no-such-tool", {})
    assert proc.returncode == 2, proc.stderr
    assert evs == [] and "ev has no tool named 'no-such-tool'" in proc.stderr
    proc, evs = call(everything, "trigger-long-running-operation", {"duration": "long"})
    assert proc.returncode == 2, proc.stderr
    assert evs == [] and "$.duration" in proc.stderr and "nothing was started" in proc.stderr
    listed = hostapp("ops", "--json", home=everything)
    assert all(row["tool"] not in ("no-such-tool",) for row in json.loads(listed.stdout))


@pytest.fixture
def sdk_mrtr(isolated_home):
    peer = start_sdk_mrtr_server()
    added = hostapp("servers", "add", "ev", "--url", peer.url, home=isolated_home)
    assert added.returncode == 0, added.stderr
    yield isolated_home
    peer.stop()


def test_official_sdk_server_asks_by_mrtr_in_2026_07_28(sdk_mrtr):
    answer = {"action": "accept", "content": {"confirm": True, "note": "ship it"}}
    proc, evs = call(sdk_mrtr, "confirm_action", {"action": "deploy"}, answers=[answer])
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert [e["answer"] for e in evs if e["event"] == "elicitation"] == ["accept"]
    text = evs[-1]["result"]["content"][0]["text"]
    # The retried request carried the answer and the unchanged requestState.
    assert "deploy: accept" in text and "ship it" in text and "state=asked:deploy" in text
