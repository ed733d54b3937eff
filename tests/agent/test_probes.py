"""Questions asked of a server while the agent runs it (``hostapp tools``, Test connection
of saved settings, the skills) go through the connection the agent holds: a stdio server
is not started a second time beside the one running a call, and the answer is what that
connection negotiated (its pinned revision). Real agent, real lab processes, real keyring."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from hostapp.agent.client import RemoteEngine
from hostapp.agent.endpoint import endpoint_path
from tests.agent.conftest import Agents
from tests.support.faults import HostCall, LabProcess, progress_of


def lab_processes(state_file: Path) -> list[int]:
    """The running lab processes serving ``state_file`` (zombies left out)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"lab" in argv and b"serve" in argv and str(state_file).encode() in argv:
            pids.append(int(entry.name))
    return pids


async def live_tool_names(agents: Agents, server: str) -> list[str]:
    engine = await RemoteEngine.connect(endpoint_path(agents.home), client="test")
    try:
        return sorted(t["name"] for t in await engine.list_tools(server))
    finally:
        await engine.close()


async def check_saved(agents: Agents, server: str) -> dict:
    engine = await RemoteEngine.connect(endpoint_path(agents.home), client="test")
    try:
        cfg = next(c for c in await engine.server_configs() if c.name == server)
        return dict(await engine.check_server(cfg))
    finally:
        await engine.close()


def test_probes_of_a_stdio_server_use_the_agents_connection_while_a_call_runs(agents: Agents):
    state = agents.home / "lab.sqlite3"
    lab = [sys.executable, "-m", "hostapp", "lab", "serve", "--stdio", "--state", str(state)]
    assert agents.run("servers", "add", "stdio-lab", "--", *lab).returncode == 0
    call = HostCall(agents.home, "call", "stdio-lab", "sleep_with_progress", "--json",
                    "--args", json.dumps({"seconds": 6, "steps": 12}), env=agents.env)
    try:
        call.wait_for(progress_of)
        tools = agents.run("tools", "stdio-lab", "--json")
        assert tools.returncode == 0, tools.stderr
        listed = sorted(t["name"] for t in json.loads(tools.stdout))
        assert listed == asyncio.run(live_tool_names(agents, "stdio-lab"))
        checked = asyncio.run(check_saved(agents, "stdio-lab"))
        assert checked["protocol_version"] == "2026-07-28" and checked["tools_count"] == len(listed)
        skills = agents.run("skills", "stdio-lab", "--json")  # the lab's own answer: its one skill
        assert skills.returncode == 0, skills.stderr
        assert [entry["name"] for entry in json.loads(skills.stdout)] == ["lab-tour"]
        # One copy of the server all along: the probes asked the one the agent runs.
        assert len(lab_processes(state)) == 1, lab_processes(state)
        assert call.wait(60) == 0, call.stderr
        assert call.events[-1]["event"] == "result", call.events
    finally:
        call.kill()


def test_tools_of_a_pinned_server_are_those_of_its_revision(agents: Agents, tmp_path: Path):
    # The first run's HTTP lab is pinned to 2025-11-25: its tools are that revision's (SSE
    # resumption, 2025 tasks), not those a 2026-07-28 negotiation would list.
    lab = LabProcess(tmp_path / "lab.sqlite3").start()
    try:
        added = agents.run("servers", "add", "lab-http", "--url", lab.url, "--protocol-version", "2025-11-25")
        assert added.returncode == 0, added.stderr
        agents.start("--idle-exit", "600")
        tools = agents.run("tools", "lab-http", "--json")
        assert tools.returncode == 0, tools.stderr
        listed = sorted(t["name"] for t in json.loads(tools.stdout))
        assert "long_sse" in listed and "long_task" in listed
        assert "long_task_ext" not in listed and "long_mrtr" not in listed
        assert listed == asyncio.run(live_tool_names(agents, "lab-http"))
        checked = asyncio.run(check_saved(agents, "lab-http"))
        assert checked["protocol_version"] == "2025-11-25"
    finally:
        lab.stop()
