"""The command line as a client of the home's one owner, with real processes: several
``hostapp call`` at once on a fresh home start one agent between them; killed together
with it, one ``hostapp resume --wait`` gives each operation its own result; two resumes at
once, with a window, resume each operation once and all three see every outcome; ``agent stop`` names what
cannot survive and, with nobody to ask, refuses."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hostapp.agent.client import RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from hostapp.engine.api import TERMINAL
from hostapp.lab.state import execution_count
from tests.agent.conftest import Agents
from tests.support.agents import agent_pids, kill_owner
from tests.support.faults import REPO_ROOT, HostCall, LabProcess, LoopbackProxy, progress_of
from tests.support.waiting import DEADLINE, until, until_async

OUTCOME_TIMEOUT = 120


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[LabProcess, LoopbackProxy]]:
    """The lab over HTTP (default era), behind a proxy that sees every request."""
    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    proxy = LoopbackProxy(lab.port).start()
    yield lab, proxy
    proxy.stop()
    lab.stop()


def _add_lab(agents: Agents, proxy: LoopbackProxy) -> None:
    added = agents.run("servers", "add", "lab", "--url", proxy.url())
    assert added.returncode == 0, added.stderr


def _call(agents: Agents, tool: str, args: dict[str, Any], *extra: str) -> HostCall:
    return HostCall(agents.home, "call", "lab", tool, "--json", "--args", json.dumps(args), *extra, env=agents.env)


def _started(call: HostCall) -> str:
    first = call.wait_for(lambda events: events[:1])[0]
    assert first["event"] == "started", call.events
    return str(first["operation"])


async def _wait_resumable(agents: Agents, ids: list[str], timeout: float = DEADLINE) -> None:
    """Until the owner holds a durable handle for each of ``ids`` (none would be lost by a
    stop: what a kill now leaves behind can be resumed)."""
    engine = await RemoteEngine.connect(endpoint_path(agents.home), client="test")

    async def durable() -> bool:
        return not [op for op in await engine.control.unsurvivable() if op["id"] in ids]

    try:
        await until_async(durable, timeout, what=f"a durable handle for each of {ids}", interval=0.1)
    finally:
        await engine.close()


def _kill_everything(agents: Agents, calls: list[HostCall]) -> None:
    """SIGKILL every command and the owner: nothing tidies up."""
    for call in calls:
        call.proc.kill()
    assert kill_owner(agents.home) is not None, "no owner carried the calls"
    for call in calls:
        call.kill()


def _ops(agents: Agents) -> dict[str, dict[str, Any]]:
    listed = agents.run("ops", "--json")
    assert listed.returncode == 0, listed.stderr
    return {op["id"]: op for op in json.loads(listed.stdout)}


async def test_six_calls_at_once_share_one_owner_and_one_resume_gives_each_its_own_result(agents: Agents, lab):
    lab_process, proxy = lab
    _add_lab(agents, proxy)
    assert not agent_pids(agents.home)  # configuring started no agent
    # Six commands at once on a home no agent owns yet; each call has steps of its own, so
    # a result delivered to the wrong operation shows.
    plan = [(tool, {"seconds": 8, "steps": 6 + i}) for i, tool in enumerate(["long_task_ext", "long_async"] * 3)]
    calls = [_call(agents, tool, args) for tool, args in plan]
    ids = [_started(call) for call in calls]
    await _wait_resumable(agents, ids)
    # An owner that lost the race exits at once.
    owners = await until_async(lambda: len(pids := agent_pids(agents.home)) == 1 and pids,
                               what="one agent to own the home", interval=0.1)
    # ... and it was the only one started: the commands that found no owner started one
    # between them (an owner that loses the race for the lock logs that it did).
    assert "owned already" not in (agents.home / "logs" / "agent.log").read_text()
    status = json.loads(agents.run("agent", "status", "--json").stdout)
    assert status["pid"] == owners[0] and status["operations"] == 6 and status["clients"] >= 6, status

    _kill_everything(agents, calls)
    assert all(_ops(agents)[op_id]["status"] == "running" for op_id in ids)

    resume = HostCall(agents.home, "resume", "--wait", "--json", env=agents.env)
    assert resume.wait(OUTCOME_TIMEOUT) == 0, (resume.events, resume.stderr)
    results = {e["operation"]: e["result"] for e in resume.events if e["event"] == "result"}
    assert sorted(results) == sorted(ids), resume.events
    ops = _ops(agents)
    for op_id, (tool, args) in zip(ids, plan, strict=True):
        assert ops[op_id]["status"] == "completed", ops[op_id]
        for result in (results[op_id], ops[op_id]["result"]):  # its own result, not another's
            assert result["structuredContent"]["tool"] == tool and result["structuredContent"]["steps"] == args["steps"]
    for tool in ("long_task_ext", "long_async"):
        assert execution_count(lab_process.state_file, tool) == 3  # none ran twice


def start_resumers(agents: Agents, count: int, answers: Path) -> list[HostCall]:
    """``count`` ``hostapp resume --wait`` started together (the window joins the same
    moment through this function's callers)."""
    return [HostCall(agents.home, "resume", "--wait", "--json", "--answers", str(answers), env=agents.env)
            for _ in range(count)]


#: Opens the window (main.py, offscreen) on HOSTAPP_HOME as ``hostapp`` does; once the
#: window has shown every operation named on the command line ended, it prints what it
#: showed and quits (the agent goes on).
WINDOW_DRIVER = textwrap.dedent("""
    import asyncio, json, runpy, sys
    import hostapp.app as app

    WANTED = json.loads(sys.argv[1])
    original_start = app.HostApp.start

    async def start_and_watch(self):
        await original_start(self)
        self.window.set_filter("all")
        model = self.window.ops_model
        def shown():
            rows = {{op_id: model.row_of(op_id) for op_id in WANTED}}
            return {{op_id: model.operation(row).status for op_id, row in rows.items() if row is not None}}
        while not (len(seen := shown()) == len(WANTED) and all(s in {terminal!r} for s in seen.values())):
            await asyncio.sleep(0.1)
        print("shown", json.dumps(seen), flush=True)
        self.request_quit()

    app.HostApp.start = start_and_watch
    sys.argv = ["main.py"]
    runpy.run_path({main!r}, run_name="__main__")
""")


def start_window(agents: Agents, ids: list[str], tmp_path: Path) -> subprocess.Popen[str]:
    script = tmp_path / "watch_window.py"
    script.write_text(WINDOW_DRIVER.format(main=str(REPO_ROOT / "main.py"), terminal=sorted(s.value for s in TERMINAL)))
    env = {**agents.env, "QT_QPA_PLATFORM": "offscreen", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, str(script), json.dumps(ids)], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=open(tmp_path / "window.stderr", "wb"), text=True)


async def test_two_resumes_at_once_resume_each_operation_once_and_both_see_every_outcome(agents: Agents, lab,
                                                                                       tmp_path: Path):
    lab_process, proxy = lab
    _add_lab(agents, proxy)
    plan = [("long_task_ext", {"seconds": 8, "steps": 8}), ("long_async", {"seconds": 8, "steps": 9}),
            ("long_task_ext", {"seconds": 8, "steps": 10})]
    calls = [_call(agents, tool, args) for tool, args in plan]
    # A call whose question is left open when everything is killed (MRTR keeps it).
    asking = _call(agents, "long_mrtr", {"seconds": 6, "steps": 3}, "--unanswered", "wait")
    ids = [_started(call) for call in [*calls, asking]]
    asking.wait_for(lambda events: any(e["event"] == "elicitation" and e.get("pending") for e in events))
    await _wait_resumable(agents, ids)
    _kill_everything(agents, [*calls, asking])
    sent_before = len(proxy.tool_calls("long_mrtr"))

    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"action": "accept", "content": {"proceed": True, "note": "go on"}}]))
    # Two resumes and a window at once, all clients of the one owner they find or start.
    resumers = start_resumers(agents, 2, answers)
    window = start_window(agents, ids, tmp_path)
    try:
        for resume in resumers:
            assert resume.wait(OUTCOME_TIMEOUT) == 0, (resume.events, resume.stderr)
        line = await asyncio.to_thread(window.stdout.readline)  # type: ignore[union-attr]
        assert line.startswith("shown "), (line, (tmp_path / "window.stderr").read_text()[-3000:])
        assert json.loads(line.removeprefix("shown ")) == dict.fromkeys(ids, "completed")  # the window saw them all
        assert window.wait(60) == 0
    finally:
        if window.poll() is None:
            window.kill()
            window.wait()
        window.stdout.close()  # type: ignore[union-attr]

    ops = _ops(agents)
    assert [ops[op_id]["status"] for op_id in ids] == ["completed"] * 4, ops
    for resume in resumers:  # every client sees every outcome
        assert sorted(e["operation"] for e in resume.events if e["event"] == "result") == sorted(ids), resume.events
    # Server side: each operation's work started once, and the question was answered once.
    for tool in ("long_task_ext", "long_async", "long_mrtr"):
        assert execution_count(lab_process.state_file, tool) == sum(1 for t, _ in [*plan, ("long_mrtr", {})]
                                                                     if t == tool), tool
    answered = [p for p in proxy.tool_calls("long_mrtr")[sent_before:] if "inputResponses" in p]
    assert len(answered) == 1, answered
    assert "go on" in json.dumps(ops[ids[-1]]["result"])


def test_agent_stop_names_what_cannot_survive_and_refuses_without_a_terminal(agents: Agents):
    lab = [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(agents.home / "lab.sqlite3")]
    assert agents.run("servers", "add", "stdio-lab", "--", *lab).returncode == 0
    call = HostCall(agents.home, "call", "stdio-lab", "sleep_with_progress", "--json",
                    "--args", json.dumps({"seconds": 60, "steps": 60}), env=agents.env)
    try:
        op_id = _started(call)
        call.wait_for(progress_of)
        refused = agents.run("agent", "stop")  # no terminal on stdin: nobody to ask
        assert refused.returncode == 2, (refused.stdout, refused.stderr)
        assert op_id in refused.stderr and "a plain request: nothing can resume it" in refused.stderr
        assert "--yes" in refused.stderr
        assert json.loads(agents.run("agent", "status", "--json").stdout)["running"] is True
        stopped = agents.run("agent", "stop", "--yes")
        assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
        # --yes says which operations could not survive, as the question would have.
        assert "could not survive the stop" in stopped.stderr and op_id in stopped.stderr, stopped.stderr
        assert "a plain request: nothing can resume it" in stopped.stderr
        # It let go of the home; its process ends just after.
        until(lambda: not agent_pids(agents.home), what="the agent to end after agent stop", interval=0.05)
        # The stop ended the call itself, with the reason: not 'running' until the next
        # agent finds it lost. The waiting `hostapp call` heard the outcome and returned.
        rc = call.wait(30)
        assert [e["event"] for e in call.events][-1] == "error", (rc, call.events, call.stderr)
        assert "agent was stopped" in call.events[-1]["message"]
        from hostapp.store.journal import OperationJournal
        from hostapp.store.paths import journal_path

        journal = OperationJournal(journal_path(agents.home))
        try:
            record = journal.get_operation(op_id)
        finally:
            journal.close()
        assert record is not None and record.status == "unknown"
        assert "agent was stopped" in record.error["message"] and "may or may not have run" in record.error["message"]
    finally:
        call.kill()


def test_follow_does_not_wait_on_an_operation_nobody_drives(agents: Agents):
    """An operation left unfinished in the journal by a host that was not the owner (an
    older version's command, say) is not carried by the agent: follow says so at once."""
    from hostapp.store.journal import OperationJournal, OperationRecord
    from hostapp.store.paths import journal_path

    agents.start("--idle-exit", "600")
    until(lambda: json.loads(agents.run("agent", "status", "--json").stdout).get("running"),
          what="agent status to say the agent runs", interval=0.1)
    with OperationJournal(journal_path(agents.home)) as journal:  # written behind the owner's back
        journal.create_operation_sync(OperationRecord(
            id="orphan", server="gone", method="tools/call", tool="t", params={"name": "t", "arguments": {}},
            jsonrpc_id=7, status="running"))
    followed = agents.run("follow", "orphan", timeout=60)
    assert followed.returncode == 1 and "nothing drives orphan" in followed.stderr, followed.stderr
    resumed = agents.run("resume", "--wait", timeout=60)
    assert resumed.returncode == 0 and "nothing drives orphan" in resumed.stderr, resumed.stderr


def test_a_call_outlives_its_command_killed_and_is_followed_to_its_end(agents: Agents):
    lab = [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(agents.home / "lab.sqlite3")]
    assert agents.run("servers", "add", "stdio-lab", "--", *lab).returncode == 0
    call = HostCall(agents.home, "call", "stdio-lab", "sleep_with_progress", "--json",
                    "--args", json.dumps({"seconds": 3, "steps": 30}), env=agents.env)
    op_id = _started(call)
    call.wait_for(progress_of)
    call.proc.kill()  # SIGKILL to the command alone: the agent it started lives on
    call.proc.wait()
    followed = agents.run("follow", op_id, "--json")
    assert followed.returncode == 0, (followed.stdout, followed.stderr)
    last = json.loads(followed.stdout.splitlines()[-1])
    assert last["event"] == "result" and last["result"]["structuredContent"]["steps"] == 30


def test_a_call_whose_agent_dies_says_how_to_go_on(agents: Agents, lab):
    _lab_process, proxy = lab
    _add_lab(agents, proxy)
    call = _call(agents, "long_task_ext", {"seconds": 6, "steps": 12})
    op_id = _started(call)
    call.wait_for(progress_of)
    kill_owner(agents.home)
    assert call.proc.wait(30) == 1
    assert f"'hostapp follow {op_id}' starts one and follows it" in call.stderr, call.stderr
    followed = agents.run("follow", op_id, "--json")  # a new agent resumes it
    assert followed.returncode == 0, (followed.stdout, followed.stderr)
    assert json.loads(followed.stdout.splitlines()[-1])["result"]["structuredContent"]["steps"] == 12


def test_ctrl_c_on_resume_wait_stops_following_and_the_work_goes_on(agents: Agents):
    import signal

    lab = [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(agents.home / "lab.sqlite3")]
    assert agents.run("servers", "add", "stdio-lab", "--", *lab).returncode == 0
    call = HostCall(agents.home, "call", "stdio-lab", "sleep_with_progress", "--json",
                    "--args", json.dumps({"seconds": 15, "steps": 150}), env=agents.env)
    op_id = _started(call)
    call.proc.kill()  # the command only: the agent carries the call on
    call.proc.wait()
    # Long enough that a loaded machine still starts `resume --wait` while it runs (with
    # 5 s the call had ended first: nothing to follow, the command ended 0).
    resume = HostCall(agents.home, "resume", "--wait", "--json", env=agents.env)
    resume.wait_for(lambda events: [e for e in events if e.get("operation") == op_id and e["event"] == "progress"])
    resume.proc.send_signal(signal.SIGINT)
    assert resume.wait(30) == 130
    assert "stopped following; the 1 operation(s) go on in the background" in resume.stderr, resume.stderr
    followed = agents.run("follow", op_id, "--json")
    assert followed.returncode == 0 and json.loads(followed.stdout.splitlines()[-1])["event"] == "result"
