"""What the agent writes to the home is its user's alone, and keys a server URL carries
stay out of its log. A real agent, a real lab on loopback HTTP reached with an
``?api_key=`` URL, the default umask (022)."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from pathlib import Path

import pytest

from hostapp.agent import owner
from hostapp.engine import api
from hostapp.store.paths import journal_path
from tests.agent.conftest import Agents
from tests.agent.test_owner import _connect
from tests.support.faults import LabProcess

pytestmark = pytest.mark.timeout(120)

KEY = "k3y-in-the-url-0123456789"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _one_call_through_an_agent(agents: Agents, url: str, *, verbose: bool) -> str:
    """The lab's ``lab_stats`` called through a real agent that reaches the lab at ``url``,
    the agent stopped; what it logged."""
    assert agents.run("servers", "add", "lab", "--url", url).returncode == 0
    agents.start("--idle-exit", "600", verbose=verbose)
    engine = await _connect(agents.home)
    try:
        await asyncio.wait_for(engine.wait_connected("lab"), 60)
        op = await engine.start_call("lab", "lab_stats", {})
        assert (await asyncio.wait_for(engine.wait_finished(op.id), 60)).status == api.OperationStatus.COMPLETED
    finally:
        await engine.close()
    assert agents.run("agent", "stop").returncode == 0
    return (agents.home / "logs" / "agent.log").read_text()


async def test_the_home_is_private_and_url_keys_stay_out_of_the_log(agents: Agents, tmp_path: Path):
    old_umask = os.umask(0o022)
    lab = LabProcess(tmp_path / "lab.sqlite3").start(0)
    try:
        # verbose: every request logged, as httpx says it
        log = await _one_call_through_an_agent(agents, f"{lab.url}?api_key={KEY}&team=x", verbose=True)
    finally:
        lab.stop()
        os.umask(old_umask)

    home = agents.home
    assert KEY not in log
    assert "api_key=***" in log  # the requests were logged, their key was not
    assert mode(home) == 0o700 and mode(home / "logs") == 0o700
    assert mode(home / "logs" / "agent.log") == 0o600
    journal = journal_path(home)
    for part in (journal, journal.with_name(journal.name + "-wal"), journal.with_name(journal.name + "-shm")):
        if part.exists():
            assert mode(part) == 0o600, part


async def test_the_agent_logs_no_line_per_request_unless_verbose(agents: Agents, tmp_path: Path):
    """At ten thousand operations a line per poll rotated a restart's own lines out of the
    log within seconds: httpx's request lines are for ``--verbose``."""
    lab = LabProcess(tmp_path / "lab.sqlite3").start(0)
    try:
        log = await _one_call_through_an_agent(agents, lab.url, verbose=False)
    finally:
        lab.stop()
    assert "owns" in log and "HTTP Request" not in log


def test_every_file_of_the_rotating_log_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(owner, "LOG_BYTES", 50_000)
    old_umask = os.umask(0o022)
    root = logging.getLogger()
    level = root.level
    handler = owner.setup_agent_logging(tmp_path, verbose=False)
    try:
        for i in range(2_000):
            logging.getLogger("hostapp.test").warning("line %d of a log that rotates: %s", i, "x" * 60)
    finally:
        root.removeHandler(handler)
        handler.close()
        root.setLevel(level)
        os.umask(old_umask)
    files = sorted((tmp_path / "logs").iterdir())
    assert [f.name for f in files] == ["agent.log", "agent.log.1", "agent.log.2", "agent.log.3"]
    assert all(mode(f) == 0o600 for f in files), {f.name: oct(mode(f)) for f in files}
