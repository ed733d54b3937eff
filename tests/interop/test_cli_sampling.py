"""Sampling from the command line against server-everything (npm) over Streamable HTTP:
it lists its sampling tool only to a client that declares sampling; a scripted reply
goes back to it; with a model configured and ``--approve-sampling`` the model's reply
does, the API key going out as a bearer token only and staying out of the home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.model_endpoint import ModelEndpoint
from tests.support.peers import REPO_ROOT, events, hostapp, require_everything

API_KEY = "sk-cli-test-4e8d2b7a9c1f"


@pytest.fixture
def home(isolated_home: Path, everything_http) -> Path:
    require_everything()
    added = hostapp("servers", "add", "ev", "--url", everything_http.url, home=isolated_home)
    assert added.returncode == 0, added.stderr
    return isolated_home


@pytest.fixture
def model(tmp_path: Path) -> Iterator[ModelEndpoint]:
    endpoint = ModelEndpoint(tmp_path / "model-requests.jsonl", key=API_KEY).start()
    yield endpoint
    endpoint.stop()


def sample(home: Path, *extra: str, answers: list | None = None,
           env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, list]:
    argv = ["call", "ev", "trigger-sampling-request", "--json", "--args", json.dumps({"prompt": "two words"}),
            *extra]
    if answers is not None:
        path = home.parent / "answers.json"
        path.write_text(json.dumps(answers))
        argv += ["--answers", str(path)]
    proc = hostapp(*argv, home=home, env=env)
    return proc, events(proc)


def test_the_sampling_tool_is_listed_once_sampling_is_declared(home):
    tools = hostapp("tools", "ev", "--json", home=home)
    assert tools.returncode == 0, tools.stderr
    names = {t["name"] for t in json.loads(tools.stdout)}
    # (its -async sibling needs task-augmented sampling requests, tasks.requests.sampling)
    assert "trigger-sampling-request" in names


def test_a_scripted_reply_goes_back_to_the_server(home):
    proc, evs = sample(home, answers=[{"reply": "Hello there"}])
    assert proc.returncode == 0, proc.stderr
    asked = [e for e in evs if e["event"] == "sampling"]
    assert [e["answer"] for e in asked] == ["reply"] and "two words" in asked[0]["message"]
    text = evs[-1]["result"]["content"][0]["text"]
    sent = json.loads(text.split("\n", 1)[1])  # the server quotes the CreateMessageResult it got
    assert sent["content"] == {"type": "text", "text": "Hello there"} and sent["role"] == "assistant"


def test_without_an_answer_the_request_is_declined(home):
    proc, evs = sample(home)
    assert [e["answer"] for e in evs if e["event"] == "sampling"] == ["decline"]
    # The server's tool fails on the refusal (error -1): the call ends with that error.
    assert evs[-1]["event"] in ("error", "result"), proc.stderr
    assert "declined" in json.dumps(evs[-1]), evs[-1]


def test_the_configured_model_answers_with_approve_sampling(home, model, keyring_env):
    set_model = subprocess.run(
        [sys.executable, "-m", "hostapp", "model", "set", "--base-url", model.base_url, "--model", "test-model",
         "--api-key-stdin"], input=API_KEY + "\n", capture_output=True, text=True, cwd=REPO_ROOT, timeout=60,
        env={**os.environ, "HOSTAPP_HOME": str(home), **keyring_env})
    assert set_model.returncode == 0, set_model.stderr
    assert "kept in the OS keyring" in set_model.stdout and API_KEY not in set_model.stdout
    shown = json.loads(hostapp("model", "show", "--json", home=home, env=keyring_env).stdout)
    assert shown["base_url"] == model.base_url and shown["api_key"] is True and API_KEY not in json.dumps(shown)

    proc, evs = sample(home, "--approve-sampling", env=keyring_env)
    assert proc.returncode == 0, proc.stderr
    assert [(e["answer"], e["model"]) for e in evs if e["event"] == "sampling"] == [("model", "test-model")]
    sent = json.loads(evs[-1]["result"]["content"][0]["text"].split("\n", 1)[1])
    assert sent["content"]["text"] == "model reply to: Resource trigger-sampling-request context: two words"
    assert sent["model"] == "test-model"
    [request] = model.requests()
    assert request["authorization"] == f"Bearer {API_KEY}"
    assert request["body"]["messages"][0] == {"role": "system", "content": "You are a helpful test server."}
    leaked = [p for p in home.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]
    assert not leaked and API_KEY not in proc.stderr + proc.stdout

    # Set to "auto", the server's requests are answered by the model without asking anyone.
    policy = hostapp("model", "policy", "ev", "auto", home=home, env=keyring_env)
    assert policy.returncode == 0 and "without asking" in policy.stdout, policy.stderr
    proc, evs = sample(home, env=keyring_env)
    assert proc.returncode == 0, proc.stderr
    assert [e for e in evs if e["event"] == "sampling"] == []  # nobody was asked
    assert "model reply to: " in evs[-1]["result"]["content"][0]["text"] and len(model.requests()) == 2
    unknown = hostapp("model", "policy", "nosuch", "auto", home=home, env=keyring_env)
    assert unknown.returncode != 0 and "nosuch" in unknown.stderr

    cleared = hostapp("model", "clear", home=home, env=keyring_env)
    assert cleared.returncode == 0, cleared.stderr
    assert json.loads(hostapp("model", "show", "--json", home=home, env=keyring_env).stdout)["api_key"] is False


def test_requests_sent_as_tasks_are_answered_through_the_task(home):
    """2025-11-25 task-augmented requests: server-everything lists its -async tools once
    hostapp declares tasks.requests, sends the question and the sampling request as tasks,
    polls tasks/get and fetches the answers with tasks/result."""
    tools = {t["name"] for t in json.loads(hostapp("tools", "ev", "--json", home=home).stdout)}
    assert {"trigger-sampling-request-async", "trigger-elicitation-request-async"} <= tools

    proc, evs = call_ev(home, "trigger-sampling-request-async", {"prompt": "as a task"},
                        [{"reply": "Answered through the task"}])
    assert proc.returncode == 0, proc.stderr
    assert [e["answer"] for e in evs if e["event"] == "sampling"] == ["reply"]
    text = evs[-1]["result"]["content"][0]["text"]
    assert text.startswith("[COMPLETED]") and "Answered through the task" in text, text
    assert "io.modelcontextprotocol/related-task" in text  # tasks/result tagged its answer with the task

    proc, evs = call_ev(home, "trigger-elicitation-request-async", {},
                        [{"action": "accept", "content": {"name": "Ada"}}])
    assert proc.returncode == 0, proc.stderr
    assert [e["answer"] for e in evs if e["event"] == "elicitation"] == ["accept"]
    assert "- Name: Ada" in json.dumps(evs[-1]["result"]), evs[-1]


def call_ev(home: Path, tool: str, args: dict, answers: list) -> tuple[subprocess.CompletedProcess, list]:
    path = home.parent / "answers.json"
    path.write_text(json.dumps(answers))
    proc = hostapp("call", "ev", tool, "--json", "--args", json.dumps(args), "--answers", str(path), home=home)
    return proc, events(proc)
