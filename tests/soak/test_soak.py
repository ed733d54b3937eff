"""Two minutes of the chaos soak, in the suite (``make soak`` runs it for ten).

Random SIGKILLs of the owner and of the lab servers, connections cut, refused and slowed
by loopback proxies, calls of all eight mechanisms in both eras started from several
``hostapp call`` processes and from a client of the agent; then everything resumed and
held against what the servers did (see :mod:`tests.soak.oracle`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.soak.driver import soak
from tests.soak.world import HANDSHAKE_TOOLS, STATELESS_TOOLS

SUITE_SECONDS = 120.0

pytestmark = pytest.mark.timeout(SUITE_SECONDS + 360)


async def test_two_minutes_of_chaos_lose_nothing_and_run_nothing_twice(tmp_path: Path, real_keyring):
    seed = int(os.environ.get("SOAK_SEED") or time.time())
    report = await soak(SUITE_SECONDS, tmp_path, dict(real_keyring.env), seed)
    print(report.render())
    assert report.ok, report.render()
    # The run really was chaotic, and covered what it claims to.
    assert report.figures["agent kills"] >= 1 and report.figures["lab kills"] >= 1, report.render()
    assert report.figures["cuts"] + report.figures["refusals"] >= 1, report.render()
    assert report.figures["operations"] >= len(HANDSHAKE_TOOLS) + len(STATELESS_TOOLS), report.render()
    completed = {m for m, counts in report.outcomes.items() if counts.get("completed")}
    assert len(completed) >= 5, report.render()
