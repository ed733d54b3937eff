"""Fault tests: every resume mechanism against every fault, with real processes on loopback.

The host is the real ``hostapp`` command line in its own process and HOSTAPP_HOME; the
server is the lab, server-everything (npm), or fastmcp with its tasks extension, each
behind a :class:`~tests.support.faults.LoopbackProxy`. The faults:

* ``host_kill``: ``hostapp call`` is SIGKILLed after its first progress (or status) lines,
  then ``hostapp resume --wait`` carries the operation to its end;
* ``server_restart``: the server is SIGKILLed and started again on the same port (the lab
  with the same state file; the peers keep their tasks and streams in memory only);
* ``drop``: every connection is cut mid-stream;
* ``outage``: the network is gone (connections refused) and comes back. The long outage
  runs for a handshake-era mechanism (SSE resumption), a stateless-era one (tasks) and a
  polling one (async tools); the others get a short one, to keep the suite short.

The host waits by the product's timing at a tenth (``conftest.TIME_SCALE``): back-off caps,
default polls and retries ten times shorter, so the long outage of 3 s crosses the
reconnect cap as 30 s do in real time, and a short one of 1.5 s stands for 15 s. The slow
tier runs the long outages once more in real time (30 s, ``-outage_real_time``).

After each: exactly one operation in ``hostapp ops``, in the outcome the mechanism can
honestly give (``completed`` where it survives the fault, ``unknown`` where the protocol
offers no way back: never a silent re-run), the tool's work started exactly once (counted
by the server, or on the wire for peers that keep no count), progress never decreasing
across both host processes, at most one result, and none of the handles that went over
the wire in any file of HOSTAPP_HOME (journal, its WAL, logs, the command's stderr).
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hostapp.lab.state import execution_count
from hostapp.store.status import TERMINAL
from tests.faults.conftest import TIME_SCALE, scaled_env
from tests.support.faults import (
    REPO_ROOT,
    HostCall,
    LabProcess,
    LoopbackProxy,
    hostapp_env,
    issued_handles,
    journal_rows,
    ops_of,
    progress_of,
    run_hostapp,
)
from tests.support.model_endpoint import ModelEndpoint
from tests.support.peers import EVERYTHING, NODE, Peer, require_everything
from tests.support.waiting import until

pytestmark = pytest.mark.timeout(360)

FASTMCP_SERVER = Path(__file__).with_name("fastmcp_tasks_server.py")
SDK_MRTR_SERVER = Path(__file__).parents[1] / "support" / "sdk_mrtr_server.py"

#: Long enough that a fault lands mid-call, short enough for the suite.
LAB_ARGS = {"seconds": 3, "steps": 6}
MRTR_ARGS = {"seconds": 12, "steps": 6}
ACCEPT_MRTR = {"action": "accept", "content": {"proceed": True, "note": "go on"}}
ACCEPT_RESEARCH = {"action": "accept", "content": {"interpretation": "technical"}}
#: The long and the short outage in real time; the host at TIME_SCALE sees them scaled.
LONG_OUTAGE_SECONDS = 30.0
SHORT_OUTAGE_SECONDS = 15.0
#: How long a host process may take to reach the outcome after the fault before the test
#: calls it hung (the tools take 3 s; a loaded machine takes many times longer to restart a
#: server or a host); after a real-time long outage a reconnect may wait up to the 30 s
#: backoff cap on top. A deadline, not a budget: a healthy run ends in seconds.
OUTCOME_TIMEOUT = 120
#: A question the server sent just as the host was killed, before the host could keep it
#: in its journal, is lost with the host; server-everything then waits this long (the
#: TypeScript SDK's request timeout) and goes on with a default answer.
QUESTION_LOST_IN_KILL_SECONDS = 60


# -- servers under test ---------------------------------------------------------------------

class Served:
    """A server process behind a proxy. ``executions(tool)`` counts how many times the
    tool's work started; ``restart()`` SIGKILLs the process and starts it on the same port."""

    proxy: LoopbackProxy

    def executions(self, tool: str) -> int:
        return len(self.proxy.fresh_tool_calls(tool))

    def restart(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.proxy.stop()


class LabServed(Served):
    """The lab, forgetting its HTTP sessions when it restarts (as real servers do).
    ``handshake_only`` hides its stateless era, so the host runs the 2025-11-25 handshake
    (SSE resumption, 2025 tasks, resumable requests)."""

    def __init__(self, tmp: Path, handshake_only: bool):
        # As unforgiving as a real server: a restart forgets the HTTP sessions.
        self.lab = LabProcess(tmp / "lab.sqlite3", "--forget-sessions").start()
        self.proxy = LoopbackProxy(self.lab.port, handshake_only=handshake_only).start()

    def executions(self, tool: str) -> int:
        return execution_count(self.lab.state_file, tool)

    def restart(self) -> None:
        self.lab.restart()

    def stop(self) -> None:
        super().stop()
        self.lab.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PeerServed(Served):
    """A peer started from an argv on a fixed port (so a restart keeps the address)."""

    def __init__(self, argv: Callable[[int], list[str]], env: Callable[[int], dict[str, str]] = lambda _p: {}):
        self.argv, self.env = argv, env
        self.port = _free_port()
        self.peer = Peer(argv(self.port), self.port, env=env(self.port))
        self.proxy = LoopbackProxy(self.port).start()

    def restart(self) -> None:
        self.peer.proc.kill()
        self.peer.proc.wait()
        deadline = time.monotonic() + 20
        while True:
            try:
                self.peer = Peer(self.argv(self.port), self.port, env=self.env(self.port))
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self) -> None:
        super().stop()
        self.peer.stop()


class FastmcpServed(PeerServed):
    def __init__(self, tmp: Path):
        self.count_file = tmp / "fastmcp-executions.txt"
        super().__init__(lambda port: [sys.executable, str(FASTMCP_SERVER), str(port), str(self.count_file)])

    def executions(self, tool: str) -> int:
        return len(self.count_file.read_text().splitlines()) if self.count_file.exists() else 0


def start_server(kind: str, tmp: Path) -> Served:
    if kind == "lab":
        return LabServed(tmp, handshake_only=False)
    if kind == "lab_handshake":
        return LabServed(tmp, handshake_only=True)
    if kind == "everything":
        require_everything()
        return PeerServed(lambda port: [str(NODE), str(EVERYTHING), "streamableHttp"],
                          lambda port: {"PORT": str(port)})
    if kind == "fastmcp":
        return FastmcpServed(tmp)
    if kind == "mcp_sdk":  # request state sealed under a key of its process only
        return PeerServed(lambda port: [sys.executable, str(SDK_MRTR_SERVER), str(port)])
    if kind == "mcp_sdk_shared_key":  # ... or under a key kept across restarts
        key = secrets.token_hex(32)
        return PeerServed(lambda port: [sys.executable, str(SDK_MRTR_SERVER), str(port), key])
    raise ValueError(kind)


# -- the table ------------------------------------------------------------------------------

FAULTS = ("host_kill", "server_restart", "drop", "outage")
COMPLETED, UNKNOWN, FAILED = "completed", "unknown", "failed"


@dataclass(frozen=True)
class Case:
    """One mechanism on one server: the call, and the outcome each fault must end in."""

    mechanism: str
    server: str
    tool: str
    args: dict[str, Any]
    answers: list[dict[str, Any]] = field(default_factory=list)
    #: fault -> acceptable final statuses; a fault not listed must end ``completed``.
    outcomes: dict[str, frozenset[str]] = field(default_factory=dict)
    long_outage: bool = False
    #: fault -> why the host fails it today (a strict xfail: it must fail, and say why).
    known_failures: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.mechanism}-{self.server}"

    def expected(self, fault: str) -> frozenset[str]:
        return self.outcomes.get(fault, frozenset({COMPLETED}))


LOST = frozenset({UNKNOWN})
#: A peer that keeps tasks in memory forgets them when it restarts: the host must say the
#: outcome is unknown (or the peer's error), never run the tool again.
FORGOTTEN = frozenset({UNKNOWN, FAILED})

CASES = [
    # The lab forgets its HTTP sessions when it restarts, as real servers do: the SSE
    # stream of a forgotten session cannot be resumed, and the outcome is unknown.
    Case("http_resumption", "lab_handshake", "long_sse", LAB_ARGS, long_outage=True,
         outcomes={"server_restart": LOST}),
    Case("tasks_2025", "lab_handshake", "long_task", LAB_ARGS),
    Case("resumable_requests", "lab_handshake", "long_resumable", LAB_ARGS),
    Case("tasks_extension", "lab", "long_task_ext", LAB_ARGS, long_outage=True),
    # MRTR carries only a pending question across a break; answered at once here, every
    # fault lands on a request in flight, whose outcome cannot be known. The question left
    # open across a fault: test_mrtr_question_left_open_is_answered_after_a_restart.
    # Its steps are slower than the others': each fault must land while the request is in
    # flight, and a host kill waits first until the journal holds the progress printed (one
    # `hostapp ops` a check); at 0.5 s a step that wait could outlast the whole call.
    Case("mrtr", "lab", "long_mrtr", MRTR_ARGS, [ACCEPT_MRTR],
         outcomes={f: LOST for f in FAULTS}),
    # Resume tokens and streams are drafts of no era; the handshake era lets the plain
    # request adopt them (see the stateless-era case below).
    Case("resume_token", "lab_handshake", "long_resume_token", LAB_ARGS),
    Case("streams", "lab_handshake", "long_stream", LAB_ARGS),
    Case("async_tool", "lab", "long_async", LAB_ARGS, long_outage=True),
    # Real peers. server-everything keeps sessions, event history and tasks in memory, and
    # binds a task to the session that created it: a restarted host adopts that session.
    Case("http_resumption", "everything", "trigger-long-running-operation", {"duration": 3, "steps": 6},
         outcomes={"server_restart": LOST}),
    Case("tasks_2025", "everything", "simulate-research-query", {"topic": "fault tolerance", "ambiguous": True},
         # Its tasks are bound to the session that created them: across the outage the
         # supervisor keeps that session (it pings it until the network is back), and a
         # restarted host adopts it (the session id is kept with the task id).
         [ACCEPT_RESEARCH], outcomes={"server_restart": FORGOTTEN}),
    # fastmcp-tasks on its memory:// backend.
    Case("tasks_extension", "fastmcp", "slow_count", {"seconds": 3, "steps": 6},
         outcomes={"server_restart": FORGOTTEN}),
]
#: The stateless era: a plain request under the tasks extension adopts a resume token the
#: server offers instead of a task (once it took the first slice for the whole result).
STATELESS_RESUME_TOKEN = Case("resume_token", "lab", "long_resume_token", LAB_ARGS)


def _table():
    for case in CASES:
        for fault in FAULTS:
            marks = [pytest.mark.xfail(strict=True, reason=case.known_failures[fault])] \
                if fault in case.known_failures else []
            yield pytest.param(case, fault, case.server, TIME_SCALE, id=f"{case.id}-{fault}", marks=marks)
            if fault == "outage" and case.long_outage:
                yield pytest.param(case, fault, case.server, 1.0, id=f"{case.id}-{fault}_real_time",
                                   marks=[*marks, pytest.mark.slow])
    yield pytest.param(STATELESS_RESUME_TOKEN, "drop", "lab", TIME_SCALE, id="resume_token-lab_stateless-drop")


#: What the server sends when it hands over the mechanism's handle. A fault before it
#: lands on a request still in flight, whose outcome is honestly unknown.
HANDLE_MARKERS = {
    "tasks_2025": b'"taskId"',
    "tasks_extension": b'"resultType":"task"',
    "async_tool": b'"operation"',
    "streams": b"notifications/stream/create",
    "resumable_requests": b"notifications/requests/resumePolicy",
    "resume_token": b"nextResumeToken",
}
def _handle_committed(home: Path, mechanism: str) -> bool:
    """The journal holds the operation's handle, under ``mechanism``: what a restarted host
    resumes from (its secret in the keyring, where there is one)."""
    return any(row["mechanism"] == mechanism and row["handle"].get("phase") in ("held", "awaiting_input")
               for row in journal_rows(home))


def _wait_started(call: HostCall, served: Served, mechanism: str, home: Path, timeout: float = 60) -> None:
    """Wait until the call is well under way: its handle issued and committed to the
    journal, or for mechanisms without one (SSE resumption, MRTR) two progress lines."""
    marker = HANDLE_MARKERS.get(mechanism)

    def under_way() -> bool:
        if call.proc.poll() is not None:
            raise AssertionError(f"the call ended before the fault: {call.events}\n{call.stderr}")
        if marker is None:
            return len(progress_of(call.events)) >= 2
        return marker in served.proxy.server_bytes.replace(b" ", b"") and _handle_committed(home, mechanism)

    until(under_way, timeout, what=f"the call to get under way; events={call.events}")


def _wait_journal_caught_up(call: HostCall, home: Path) -> None:
    """Wait until the journal holds the last progress the call printed. Progress is
    journaled in batches, so a SIGKILL inside a batch window loses the newest step and
    the restarted host shows the one before it; the kill comes after the window, so the
    check that progress never decreases is about the operation, not about batching."""
    def caught_up() -> bool:
        shown = _progress_values(call.events)
        rows = journal_rows(home)
        held = rows[0]["progress"] if rows else None
        return (not shown or (held is not None and held >= shown[-1])) and _progress_values(call.events) == shown

    until(caught_up, 30, what="the journal to hold the progress the call printed")


def _progress_values(events: list[dict[str, Any]]) -> list[float]:
    return [e["progress"] for e in progress_of(events)]


def _assert_no_handle_in(home: Path, handles: set[str]) -> None:
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        leaked = [h for h in handles if h.encode() in data]
        assert not leaked, f"{len(leaked)} server-issued handle(s) found in {path.relative_to(home)}"


@pytest.fixture
def served(request, tmp_path: Path):
    server = start_server(request.param, tmp_path)
    yield server
    server.stop()


def _configure(home: Path, server: Served, env: dict[str, str]) -> str | None:
    """Add the server; with a keyring, also a secret header (its value is checked like the
    handles). Returns that value."""
    argv = ["servers", "add", "srv", "--url", server.proxy.url()]
    secret = None
    if env.get("PYTHON_KEYRING_BACKEND", "").endswith("SecretService.Keyring"):
        secret = secrets.token_urlsafe(24)
        argv += ["--secret-header", f"X-Fault-Test-Key={secret}"]
    added = run_hostapp(home, *argv, env=env)
    assert added.returncode == 0, added.stderr
    return secret


@pytest.fixture
def keyring_home(tmp_path: Path, keyring_env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    home = tmp_path / "home"
    home.mkdir()
    return home, scaled_env(keyring_env)


@pytest.mark.parametrize("case,fault,served,scale", list(_table()), indirect=["served"])
def test_outcome_delivered_exactly_once(case: Case, fault: str, served: Served, scale: float, keyring_home) -> None:
    home, env = keyring_home
    env = scaled_env(env, scale)
    header_secret = _configure(home, served, env)
    assert header_secret is not None
    argv = ["-v", "call", "srv", case.tool, "--json", "--args", json.dumps(case.args)]
    if case.answers:
        answers = home.parent / "answers.json"
        answers.write_text(json.dumps(case.answers * 2))  # a replayed question may be asked again
        argv += ["--answers", str(answers)]
    call = HostCall(home, *argv, env=env)
    _wait_started(call, served, case.mechanism, home)

    runs = [call]
    if fault == "host_kill":
        _wait_journal_caught_up(call, home)
        call.kill()
        resume_argv = ["-v", "resume", "--wait", "--json"]
        if case.answers:
            resume_argv += ["--answers", str(home.parent / "answers.json")]
        resume = HostCall(home, *resume_argv, env=env)
        runs.append(resume)
        resume.wait(OUTCOME_TIMEOUT + (QUESTION_LOST_IN_KILL_SECONDS if case.answers else 0))
    else:
        if fault == "server_restart":
            served.restart()
        elif fault == "drop":
            assert served.proxy.drop_connections() > 0, "nothing was connected to drop"
        else:
            served.proxy.outage((LONG_OUTAGE_SECONDS if case.long_outage else SHORT_OUTAGE_SECONDS) * scale)
        call.wait(OUTCOME_TIMEOUT + (30 * scale if case.long_outage and fault == "outage" else 0))

    events = [e for run in runs for e in run.events]
    ops = ops_of(home, env)
    assert len(ops) == 1, ops
    op = ops[0]
    detail = f"operation={op}\nevents={events}\nstderr:\n" + "\n".join(r.stderr for r in runs)
    assert op["tool"] == case.tool
    assert op["status"] in case.expected(fault), detail
    if op["status"] == COMPLETED:
        assert op["mechanism"] == case.mechanism, detail
        assert op["result"] and not op["result"].get("isError"), detail
    results = [e for e in events if e.get("event") == "result"]
    assert len(results) == (1 if op["status"] == COMPLETED else 0), detail
    assert served.executions(case.tool) == 1, detail
    values = _progress_values(events)
    assert values == sorted(values), f"progress went backwards: {values}"
    assert any(r.headers.get("x-fault-test-key") == header_secret for r in served.proxy.requests)
    handles = issued_handles(served.proxy)
    if op["status"] == COMPLETED:  # a completed operation was carried by a handle
        assert handles, "no handle went over the wire: the secret check would prove nothing"
    _assert_no_handle_in(home, handles | {header_secret})


@pytest.mark.parametrize("served,tool", [pytest.param("lab", "long_task_ext", id="tasks_extension"),
                                         pytest.param("lab", "long_async", id="async_tool")],
                         indirect=["served"])
def test_without_keyring_a_killed_call_ends_unknown_not_rerun(served: Served, tool: str, tmp_path: Path,
                                                             no_keyring_env: dict[str, str]) -> None:
    """No keyring: the handle cannot be kept anywhere, so after the host is killed the
    operation cannot be resumed; it must end as unknown, and the tool must not run again."""
    home = tmp_path / "home"
    home.mkdir()
    _configure(home, served, no_keyring_env)
    call = HostCall(home, "-v", "call", "srv", tool, "--json", "--args", json.dumps(LAB_ARGS), env=no_keyring_env)
    _wait_started(call, served, {"long_task_ext": "tasks_extension", "long_async": "async_tool"}[tool], home)
    call.kill()
    resume = HostCall(home, "-v", "resume", "--wait", "--json", env=no_keyring_env)
    resume.wait(120)
    ops = ops_of(home, no_keyring_env)
    detail = f"ops={ops}\nevents={call.events + resume.events}\nstderr:\n{call.stderr}\n{resume.stderr}"
    assert [o["status"] for o in ops] == [UNKNOWN], detail
    assert "keyring" in ops[0]["error"]["message"], detail  # the reason, not a symptom
    assert not [e for e in call.events + resume.events if e.get("event") == "result"], detail
    assert served.executions(tool) == 1, detail
    _assert_no_handle_in(home, issued_handles(served.proxy))


def _killed_with_its_question_open(home: Path, env: dict[str, str], served: Served, tool: str,
                                   args: dict[str, Any], asked: str = "elicitation") -> HostCall:
    """``hostapp call`` of ``tool`` on ``served``, killed (with the agent) while the
    server's question (``asked``: "elicitation", or "sampling" for a sampling request)
    waits for the person."""
    _configure(home, served, env)
    call = HostCall(home, "-v", "call", "srv", tool, "--json", "--args", json.dumps(args),
                    "--unanswered", "wait", env=env)
    call.wait_for(lambda events: any(e.get("event") == asked and e.get("pending") for e in events))
    # The question is kept before the host goes: in the mechanism's state (a multi
    # round-trip request's pending question), or beside a task's (the kept question).
    until(lambda: any(row["status"] == "input_required"
                      and (row.get("open_question") or row["handle"].get("phase") == "awaiting_input")
                      for row in journal_rows(home)), what="the open question in the journal")
    call.kill()
    return call


def _resumed_answering(home: Path, env: dict[str, str], answer: dict[str, Any]) -> HostCall:
    """``hostapp resume --wait`` with ``answer`` for the question, run to its end."""
    answers = home.parent / "answers.json"
    answers.write_text(json.dumps([answer]))
    resume = HostCall(home, "-v", "resume", "--wait", "--json", "--answers", str(answers), env=env)
    resume.wait(OUTCOME_TIMEOUT)
    # On a busy machine the stall watch (its allowance a few of the scaled polls) may call
    # the answered operation stalled before the server's answer comes, and the command lets
    # go of it (exit 3); the agent carries it on, and its outcome is the journal's.
    until(lambda: all(row["status"] in TERMINAL for row in journal_rows(home)), timeout=OUTCOME_TIMEOUT,
          what="every operation's outcome in the journal")
    return resume


CONFIRM = {"action": "accept", "content": {"confirm": True}}


MODEL_KEY = "sk-fault-test-5b9e1d3c7a2f"


@pytest.mark.parametrize("served,tool,mechanism", [
    # The task's server sends its sampling request once, on tasks/result: the host keeps it.
    pytest.param("lab_handshake", "long_task", "tasks_2025", id="tasks_2025"),
    # The task shows it in tasks/get's inputRequests: the host asks it again from there.
    pytest.param("lab", "long_task_ext", "tasks_extension", id="tasks_extension"),
], indirect=["served"])
def test_sampling_request_left_open_is_asked_again_and_answered_once(served: Served, tool: str, mechanism: str,
                                                                     keyring_home, tmp_path: Path) -> None:
    """A sampling request waits for the person when the host is killed; the restarted
    host asks again, the configured model (a real endpoint process) answers it once
    (``--approve-sampling``), the task completes with the model's text, and the key went
    out as a bearer token only."""
    home, env = keyring_home
    model = ModelEndpoint(tmp_path / "model-requests.jsonl", key=MODEL_KEY).start()
    try:
        configured = subprocess.run(
            [sys.executable, "-m", "hostapp", "model", "set", "--base-url", model.base_url, "--model", "m-small",
             "--api-key-stdin"], input=MODEL_KEY + "\n", capture_output=True, text=True, timeout=60,
            cwd=REPO_ROOT, env=hostapp_env(home, env))
        assert configured.returncode == 0, configured.stderr
        call = _killed_with_its_question_open(home, env, served, tool, {**LAB_ARGS, "sample": True}, "sampling")
        assert model.requests() == []  # nobody has answered yet
        resume = HostCall(home, "-v", "resume", "--wait", "--json", "--approve-sampling", env=env)
        resume.wait(OUTCOME_TIMEOUT)
        requests = model.requests()
    finally:
        model.stop()
    ops = ops_of(home, env)
    detail = f"ops={ops}\nevents={call.events + resume.events}\nstderr:\n{call.stderr}\n{resume.stderr}"
    assert len(ops) == 1 and ops[0]["mechanism"] == mechanism and ops[0]["status"] == COMPLETED, detail
    assert [e.get("answer") for e in resume.events if e.get("event") == "sampling"] == ["model"], detail
    assert len(requests) == 1 and requests[0]["authorization"] == f"Bearer {MODEL_KEY}", detail
    assert "model reply to: long_" in json.dumps(ops[0]["result"]), detail  # the task got the model's text
    assert served.executions(tool) == 1, detail
    leaked = [p for p in home.rglob("*") if p.is_file() and MODEL_KEY.encode() in p.read_bytes()]
    assert not leaked and MODEL_KEY not in call.stderr + resume.stderr, leaked


@pytest.mark.parametrize("fault", ["host_kill", "host_kill_and_server_restart"])
# (server, tool, its arguments, the answer, the outcome when the server restarted too)
@pytest.mark.parametrize("served,tool,args,answer,after_server_restart", [
    pytest.param("lab", "long_mrtr", LAB_ARGS, ACCEPT_MRTR, COMPLETED, id="lab"),
    # The SDK seals the state under a key of its process: the restarted server says the
    # state is invalid (-32602), and the call ends failed with that reason, not re-run.
    pytest.param("mcp_sdk", "confirm_action", {"action": "deploy"}, CONFIRM, FAILED, id="mcp_sdk"),
    pytest.param("mcp_sdk_shared_key", "confirm_action", {"action": "deploy"}, CONFIRM, COMPLETED,
                 id="mcp_sdk_shared_key"),
], indirect=["served"])
def test_mrtr_question_left_open_is_answered_after_a_restart(served: Served, tool: str, args: dict[str, Any],
                                                             answer: dict[str, Any], after_server_restart: str,
                                                             fault: str, keyring_home) -> None:
    """MRTR carries a pending question across a break: the host is killed while the
    question waits for its answer (and the server restarted meanwhile, which MRTR does not
    mind when it can open the request state it sealed before); the restarted host asks
    again, and the answered call completes once, or ends failed with the server's reason."""
    home, env = keyring_home
    call = _killed_with_its_question_open(home, env, served, tool, args)
    if fault == "host_kill_and_server_restart":
        served.restart()
    resume = _resumed_answering(home, env, answer)

    ops = ops_of(home, env)
    detail = f"ops={ops}\nevents={call.events + resume.events}\nstderr:\n{call.stderr}\n{resume.stderr}"
    assert len(ops) == 1 and ops[0]["mechanism"] == "mrtr", detail
    asked = [e for e in resume.events if e.get("event") == "elicitation"]
    assert [e.get("answer") for e in asked] == ["accept"], detail
    assert served.executions(tool) == 1, detail
    if fault == "host_kill_and_server_restart" and after_server_restart == FAILED:
        assert ops[0]["status"] == FAILED and ops[0]["error"]["code"] == -32602, detail
        assert [e for e in resume.events if e.get("event") == "error"], detail
    else:
        assert ops[0]["status"] == COMPLETED, detail
        assert len([e for e in resume.events if e.get("event") == "result"]) == 1, detail
        assert "accept" in json.dumps(ops[0]["result"]), detail  # the server acted on the answer
    _assert_no_handle_in(home, issued_handles(served.proxy))


@pytest.mark.parametrize("served,tool,args,answer", [
    # server-everything asks once, on the tasks/result stream, and waits 60 s (the SDK's
    # request timeout) before it goes on with a default interpretation.
    pytest.param("everything", "simulate-research-query", {"topic": "fault tolerance", "ambiguous": True},
                 ACCEPT_RESEARCH, id="everything"),
    # The lab asks again on each tasks/result: the question kept by the host gives way to it.
    pytest.param("lab_handshake", "long_task", {**LAB_ARGS, "ask": True},
                 {"action": "accept", "content": {"proceed": True}}, id="lab"),
], indirect=["served"])
def test_task_question_left_open_is_asked_again_after_a_restart(served: Served, tool: str, args: dict[str, Any],
                                                                answer: dict[str, Any], keyring_home) -> None:
    """A 2025-11-25 task's server sends its question once and waits for the answer. The
    host is killed while the question waits for the person; the restarted host asks the
    person again, sends the answer under the question's id in the task's session, and
    the task completes with that answer, run once, asked once after the restart."""
    home, env = keyring_home
    call = _killed_with_its_question_open(home, env, served, tool, args)
    kept = ops_of(home, env)
    assert [o["status"] for o in kept] == ["input_required"], kept
    resume = _resumed_answering(home, env, answer)

    ops = ops_of(home, env)
    detail = f"ops={ops}\nevents={call.events + resume.events}\nstderr:\n{call.stderr}\n{resume.stderr}"
    assert len(ops) == 1 and ops[0]["mechanism"] == "tasks_2025", detail
    assert ops[0]["status"] == COMPLETED, detail
    answered = [e.get("answer") for e in resume.events if e.get("event") == "elicitation" and e.get("answer")]
    assert answered == ["accept"], detail
    assert len([e for e in resume.events if e.get("event") == "result"]) == 1, detail
    assert served.executions(tool) == 1, detail
    text = json.dumps(ops[0]["result"])
    if tool == "simulate-research-query":  # the server acted on the person's answer, not on its default
        assert "(technical)" in text and "default" not in text, detail
    _assert_no_handle_in(home, issued_handles(served.proxy))
