"""Two minutes of the chaos soak, in the suite (``make soak`` runs it for ten).

Random SIGKILLs of the owner and of the lab servers, connections cut, refused and slowed
by loopback proxies, calls of all eight mechanisms in both eras started from several
``hostapp call`` processes and from a client of the agent; then everything resumed and
held against what the servers did (see :mod:`tests.soak.oracle`).

A double run, a client told another outcome than the journal's, an operation left in
flight after the drain, or a wrong outcome of a kind not listed in :data:`KNOWN_DEFECTS`
(none is today) fails the test. The known defects (found by this
soak, not yet fixed) are reported as an expected failure with every operation named, so
that the suite stays usable while they are open; ``make soak`` counts them as failures.
Remove an entry once its defect is fixed."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.soak.driver import soak
from tests.soak.world import HANDSHAKE_TOOLS, STATELESS_TOOLS

SUITE_SECONDS = 120.0

#: Wrong outcomes this soak finds today (README, "Reliability"), by a piece of their text.
#: Most it found before were outcomes the lab lost: it had written the answer into a
#: connection that was then cut (or whose reader was killed) and counted it as delivered,
#: so a draft stream ended without the response, a spent resume token was refused, or
#: ``requests/resume`` answered "already delivered". The host now ends those unknown,
#: saying so, and the oracle accepts that as the truth when the lab's records and the
#: chaos's breaks show the outcome was lost on the way (``oracle.py``); they are not listed.
KNOWN_DEFECTS: tuple[str, ...] = (
    # None open. Fixed: a draft stream's response that came on the resumed stream under
    # the call's JSON-RPC id was ignored, and notifications/stream/end ended the operation
    # unknown (test_soak_findings.py).
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(SUITE_SECONDS + 360)]


async def test_two_minutes_of_chaos_lose_nothing_and_run_nothing_twice(tmp_path: Path, real_keyring):
    seed = int(os.environ.get("SOAK_SEED") or time.time())
    report = await soak(SUITE_SECONDS, tmp_path, dict(real_keyring.env), seed)
    print(report.render())
    unexplained = [w for w in report.wrong if not any(known in w for known in KNOWN_DEFECTS)]
    assert not (unexplained or report.twice or report.disagree), report.render()
    # The run really was chaotic, and covered what it claims to.
    assert report.figures["agent kills"] >= 1 and report.figures["lab kills"] >= 1, report.render()
    assert report.figures["cuts"] + report.figures["refusals"] >= 1, report.render()
    assert report.figures["operations"] >= len(HANDSHAKE_TOOLS) + len(STATELESS_TOOLS), report.render()
    completed = {m for m, counts in report.outcomes.items() if counts.get("completed")}
    assert len(completed) >= 5, report.render()
    # Nothing left in flight after the drain. Seen before: a 2025 task left input_required
    # (the person's answer lost to a refused connection, now sent again:
    # test_soak_findings.py) and a draft stream left running (its response ignored on the
    # resumed stream, now delivered). A resumed SSE stream given up ends unknown
    # (tests/engine/test_stream_given_up.py).
    assert not report.stuck, report.render()
    if report.wrong:  # only known defects reach this line
        pytest.xfail("known defects: " + "; ".join(report.wrong))
