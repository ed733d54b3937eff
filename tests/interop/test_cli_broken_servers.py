"""`hostapp` against broken and hostile servers, and in hostile surroundings: a server
command whose arguments look like options, servers that never answer, answers that do
not fit the form, a closed pipe, Ctrl+C. Real processes throughout: the command line,
the lab server, and a stdio server that never answers (tests/support/silent_server.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.peers import REPO_ROOT, events, hostapp
from tests.support.waiting import DEADLINE

SUPPORT = Path(__file__).resolve().parents[1] / "support"


def lab_command(home: Path) -> list[str]:
    return [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(home / "lab.sqlite3")]


# -- the server command after "--" -------------------------------------------------------

def test_servers_add_takes_the_command_and_its_dash_arguments_after_double_dash(isolated_home):
    added = hostapp("servers", "add", "lab", "--", *lab_command(isolated_home), home=isolated_home)
    assert added.returncode == 0, added.stderr
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert [server["command"], *server["args"]] == lab_command(isolated_home)
    tools = hostapp("tools", "lab", "--json", home=isolated_home)
    assert tools.returncode == 0, tools.stderr
    assert "sleep_with_progress" in {t["name"] for t in json.loads(tools.stdout)}


def test_servers_add_arg_with_equals_sign_keeps_working(isolated_home):
    command, *args = lab_command(isolated_home)
    argv = ["servers", "add", "lab", "--command", command, *(f"--arg={a}" for a in args)]
    assert hostapp(*argv, home=isolated_home).returncode == 0
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert server["args"] == args


def test_servers_add_refuses_a_command_given_twice_or_not_at_all(isolated_home):
    both = hostapp("servers", "add", "x", "--command", "npx", "--", "npx", "-y", home=isolated_home)
    assert both.returncode == 2 and "not both" in both.stderr
    empty = hostapp("servers", "add", "x", "--", home=isolated_home)
    assert empty.returncode == 2 and "after --" in empty.stderr


def test_servers_add_help_shows_the_double_dash_form(isolated_home):
    helped = hostapp("servers", "add", "--help", home=isolated_home)
    assert "hostapp servers add local -- npx -y @modelcontextprotocol/server-everything" in helped.stdout


def test_readme_stdio_example_is_accepted(isolated_home):
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    [example] = [line for line in readme.splitlines() if line.startswith("hostapp servers add local ")]
    added = hostapp(*example.split()[1:], home=isolated_home)
    assert added.returncode == 0, added.stderr
    [server] = json.loads(hostapp("servers", "list", "--json", home=isolated_home).stdout)
    assert [server["command"], *server["args"]] == ["npx", "-y", "@modelcontextprotocol/server-everything"]


# -- servers that never answer: every wait has a limit that says what did not answer ---------

def silent_server(home: Path, name: str, *answers: str) -> None:
    """A stdio server that answers only ``answers`` (methods), configured as ``name``."""
    added = hostapp("servers", "add", name, "--", sys.executable, str(SUPPORT / "silent_server.py"), *answers,
                    home=home)
    assert added.returncode == 0, added.stderr


def timed(*argv: str, home: Path):
    started = time.monotonic()
    proc = hostapp(*argv, home=home, timeout=60)
    return proc, time.monotonic() - started


def test_tools_gives_up_on_a_server_that_never_answers_the_handshake(isolated_home):
    silent_server(isolated_home, "hang")
    proc, took = timed("tools", "hang", "--timeout", "2", home=isolated_home)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "hang did not answer the initialize handshake within 2 s" in proc.stderr
    assert "Traceback" not in proc.stderr and took < 20


def test_tools_gives_up_on_a_server_that_never_answers_the_tool_list(isolated_home):
    silent_server(isolated_home, "mute", "initialize")
    proc, _took = timed("tools", "mute", "--timeout", "2", home=isolated_home)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert "mute did not answer the tool list (tools/list) within 2 s" in proc.stderr


def test_every_server_command_has_a_default_time_limit(isolated_home):
    for command in (["tools"], ["call"]):
        helped = hostapp(*command, "--help", home=isolated_home).stdout
        assert "--timeout" in helped and "default 30" in helped, helped


def test_call_gives_up_on_a_server_that_never_answers_the_handshake(isolated_home):
    silent_server(isolated_home, "hang")
    proc, took = timed("call", "hang", "hang", "--timeout", "2", "--json", home=isolated_home)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    last = events(proc)[-1]
    assert last["event"] == "error"
    assert last["message"] == "hang did not answer the initialize handshake within 2 s"
    assert took < 20


def test_call_gives_up_on_a_call_that_is_never_answered_and_cancels_it(isolated_home):
    silent_server(isolated_home, "mute", "initialize", "tools/list")
    proc, took = timed("call", "mute", "hang", "--timeout", "2", "--json", home=isolated_home)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    last = events(proc)[-1]
    assert last["event"] == "error" and "mute did not answer the call to hang within 2 s" in last["message"]
    assert took < 20
    ops = json.loads(hostapp("ops", "--json", home=isolated_home).stdout)
    assert [(o["tool"], o["status"]) for o in ops] == [("hang", "cancelled")]


def test_call_that_shows_progress_is_followed_past_the_time_limit(isolated_home):
    added = hostapp("servers", "add", "lab", "--", *lab_command(isolated_home), home=isolated_home)
    assert added.returncode == 0, added.stderr
    proc = hostapp("call", "lab", "sleep_with_progress", "--args", '{"seconds": 3, "steps": 3}',
                   "--timeout", "2", "--json", home=isolated_home)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert events(proc)[-1]["event"] == "result"


# -- scripted answers are checked against the form before they are sent ----------------------

def lab_home(home: Path) -> Path:
    added = hostapp("servers", "add", "lab", "--", *lab_command(home), home=home)
    assert added.returncode == 0, added.stderr
    return home


def answers_file(home: Path, *answers: dict) -> str:
    path = home / "answers.json"
    path.write_text(json.dumps(list(answers)))
    return str(path)


def test_call_declines_instead_of_sending_an_answer_that_does_not_fit_the_form(isolated_home):
    home = lab_home(isolated_home)
    bad = {"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "age": 200}}
    proc = hostapp("call", "lab", "ask_form", "--answers", answers_file(home, bad), "--json", home=home)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    evs = events(proc)
    assert [e["answer"] for e in evs if e["event"] == "elicitation"] == ["decline"]
    assert evs[-1]["result"]["structuredContent"] == {"action": "decline", "content": None}
    assert "age: must be at most 150" in proc.stderr


def test_call_sends_a_fitting_answer_coerced_as_the_window_does(isolated_home):
    home = lab_home(isolated_home)
    good = {"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "age": "42"}}
    proc = hostapp("call", "lab", "ask_form", "--answers", answers_file(home, good), "--json", home=home)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    sent = events(proc)[-1]["result"]["structuredContent"]
    assert sent["action"] == "accept" and sent["content"]["age"] == 42


def test_call_leaves_the_question_open_on_a_bad_answer_with_unanswered_wait(isolated_home):
    home = lab_home(isolated_home)
    bad = {"action": "accept", "content": {"name": "Ada"}}  # the e-mail is required
    proc = subprocess.Popen([sys.executable, "-m", "hostapp", "call", "lab", "ask_form", "--json",
                             "--answers", answers_file(home, bad), "--unanswered", "wait"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "HOSTAPP_HOME": str(home)})
    try:
        asked = next_event(proc, "elicitation")
        assert asked["answer"] is None and asked["pending"] is True
        ops = json.loads(hostapp("ops", "--json", home=home).stdout)
        assert [o["status"] for o in ops] == ["input_required"]
    finally:
        proc.kill()
        _out, err = proc.communicate(timeout=DEADLINE)
    assert "email: required" in err


def next_event(proc: subprocess.Popen, kind: str, timeout: float = 60) -> dict:
    """The next JSON event line of ``kind`` a running `hostapp call --json` prints."""
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line, f"hostapp ended (exit {proc.poll()}) before a {kind} event"
        event = json.loads(line)
        if event["event"] == kind:
            return event
    raise AssertionError(f"no {kind} event within {timeout} s")


# -- each status line once -------------------------------------------------------------------

def test_call_prints_its_first_running_status_once(isolated_home):
    home = lab_home(isolated_home)
    argv = ["call", "lab", "sleep_with_progress", "--args", '{"seconds": 0.3, "steps": 2}']
    human = hostapp(*argv, home=home)
    assert human.returncode == 0, human.stderr
    assert [line for line in human.stdout.splitlines() if line.startswith("status:")] == [
        "status: running", "status: completed"]
    as_json = hostapp(*argv, "--json", home=home)
    assert as_json.returncode == 0, as_json.stderr
    assert [e["status"] for e in events(as_json) if e["event"] == "status"] == ["running", "completed"]


def test_call_still_prints_running_again_after_a_question(isolated_home):
    home = lab_home(isolated_home)
    proc = hostapp("call", "lab", "ask_form", "--answers", answers_file(home, {"action": "decline"}), "--json",
                   home=home)
    assert [e["status"] for e in events(proc) if e["event"] == "status"] == [
        "running", "input_required", "running", "completed"]


# -- a closed pipe, Ctrl+C: quiet ends with the usual exit statuses --------------------------

def into_closed_pipe(*argv: str, home: Path) -> subprocess.CompletedProcess:
    """Run hostapp with its stdout a real pipe whose reader is gone (``hostapp ops | head``
    once head has had its fill)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "hostapp", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, cwd=REPO_ROOT, timeout=60, env={**os.environ, "HOSTAPP_HOME": str(home)})
    finally:
        os.close(write_end)


def test_output_into_a_closed_pipe_ends_quietly(isolated_home):
    home = lab_home(isolated_home)
    for argv in (["ops"], ["servers", "list"]):  # small outputs: the pipe breaks when Python flushes at exit
        proc = into_closed_pipe(*argv, home=home)
        assert (proc.returncode, proc.stderr) == (1, ""), (argv, proc.stderr)
    assert hostapp("call", "lab", "sleep_with_progress", "--args", '{"seconds": 0, "steps": 1}',
                   home=home).returncode == 0
    for argv in (["ops"], ["ops", "--json"]):  # a print in the command itself breaks
        proc = into_closed_pipe(*argv, home=home)
        assert (proc.returncode, proc.stderr) == (1, ""), (argv, proc.stderr)


def interrupted_call(home: Path, whole_group: bool, *extra: str, seconds: float = 5, again_after: float | None = None
                     ) -> tuple[int, str, str]:
    """Ctrl+C to a `hostapp call` that is following a long call: SIGINT to the process, or
    (as a terminal sends it) to its whole process group, the stdio server among it;
    ``again_after``: a second Ctrl+C that many seconds after the first."""
    proc = subprocess.Popen([sys.executable, "-m", "hostapp", "call", "lab", "sleep_with_progress", "--json",
                             "--args", json.dumps({"seconds": seconds, "steps": int(seconds * 10)}), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
                            env={**os.environ, "HOSTAPP_HOME": str(home)}, start_new_session=True)
    seen = []  # the lines read before Ctrl+C
    try:
        assert proc.stdout is not None
        while not seen or json.loads(seen[-1])["event"] != "progress":
            seen.append(proc.stdout.readline())
            assert seen[-1], f"hostapp ended (exit {proc.poll()}) before a progress event"
        for pause in [0.0] if again_after is None else [0.0, again_after]:
            time.sleep(pause)
            if whole_group:
                os.killpg(proc.pid, signal.SIGINT)
            else:
                proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, "".join(seen) + out, err


def started_id(out: str) -> str:
    first = json.loads(out.splitlines()[0])
    assert first["event"] == "started", out  # the operation's id comes first
    return first["operation"]


def test_ctrl_c_detaches_a_call_which_goes_on_and_can_be_followed(isolated_home):
    home = lab_home(isolated_home)
    for whole_group in (False, True):
        status, out, err = interrupted_call(home, whole_group)
        assert status == 130, (whole_group, out, err)
        op_id = started_id(out)
        assert f"detached; operation {op_id} (lab/sleep_with_progress) goes on in the background" in err, err
        assert f"hostapp follow {op_id}" in err and f"hostapp cancel {op_id}" in err, err
        assert "Traceback" not in err, err
        assert all(json.loads(line)["event"] in ("started", "progress", "status") for line in out.splitlines()), out
        # The call went on in the agent (a Ctrl+C to the terminal's group does not reach it):
        # following it shows its end as the call would have, with the call's exit status.
        followed = hostapp("follow", op_id, "--json", home=home)
        assert followed.returncode == 0, (followed.stdout, followed.stderr)
        lines = events(followed)
        assert lines[-1]["event"] == "result" and [e["status"] for e in lines if e["event"] == "status"][-1] \
            == "completed", lines
        assert [o["status"] for o in json.loads(hostapp("ops", "--json", home=home).stdout)
                if o["id"] == op_id] == ["completed"]


def test_a_second_ctrl_c_or_cancel_on_interrupt_cancels_the_call(isolated_home):
    home = lab_home(isolated_home)
    twice = interrupted_call(home, True, seconds=60, again_after=0.5)
    once = interrupted_call(home, False, "--cancel-on-interrupt", seconds=60)
    for status, out, err in (twice, once):
        assert status == 130, (out, err)
        op_id = started_id(out)
        assert f"cancelling operation {op_id}" in err and "Traceback" not in err, err
        statuses = [e["status"] for e in map(json.loads, out.splitlines()) if e["event"] == "status"]
        assert statuses[-1] == "cancelled", out
        assert [o["status"] for o in json.loads(hostapp("ops", "--json", home=home).stdout)
                if o["id"] == op_id] == ["cancelled"]
    assert "detached" in twice[2] and "detached" not in once[2]


def test_follow_of_an_ended_or_unknown_operation(isolated_home):
    home = lab_home(isolated_home)
    done = hostapp("call", "lab", "sleep_with_progress", "--args", '{"seconds": 0, "steps": 1}', home=home)
    assert done.returncode == 0, done.stderr
    [announced] = [line for line in done.stderr.splitlines() if line.startswith("operation ")]
    assert announced.endswith(" started on lab/sleep_with_progress"), done.stderr
    op_id = announced.split()[1]
    human = hostapp("follow", op_id, home=home)
    assert human.returncode == 0 and human.stdout.splitlines()[0] == "status: completed", human.stdout
    missing = hostapp("follow", "nope", home=home)
    assert missing.returncode == 2 and "no operation 'nope'" in missing.stderr
