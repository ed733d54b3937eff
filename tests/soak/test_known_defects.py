"""Defects the chaos soak found, each reduced to its smallest reproduction and kept as a
strict expected failure: the day one is fixed, its test passes, pytest reports it, and
the mark goes (with its entry in ``test_soak.KNOWN_DEFECTS`` where there is one)."""

from __future__ import annotations

import pytest

from hostapp.mechanisms.actions import Deliver
from hostapp.mechanisms.direct import DirectRequest
from tests.mechanisms.mechanism_driver import CALL, restart

T0 = 1_800_000_000.0
#: A slice of ``long_resume_token``: a partial result that says the work goes on.
PARTIAL = {"content": [{"type": "text", "text": "5/22 steps done"}], "structuredContent": {"progress": 5, "total": 22},
           "_meta": {"nextResumeToken": "RT-2"}}


@pytest.mark.xfail(strict=True, reason="a restored carrier no longer watches for offers: after a host restart "
                                       "a partial result offering a resume token is delivered as the outcome")
def test_a_resume_token_offered_after_a_restart_is_taken_up_not_delivered():
    """Soak run of 2026-11-23, operation af48281cadcd (hs/long_resume_token): the first
    slice's SSE stream had an event id (carried by SSE resumption) when the agent was
    SIGKILLed; the next agent resumed the stream by Last-Event-ID, the replay brought the
    slice's partial result with ``_meta.nextResumeToken``, and the operation ended
    ``completed`` with ``{"progress": 5, "total": 22}`` while the lab went on to finish
    the work (22 of 22 steps) and never sent its real result to anyone.

    Live, :class:`DirectRequest` hands such a result to the resume-token mechanism; but
    the journal names the carrier (``http_resumption``), so a restart restores the
    carrier alone, and its ``on_result`` delivers whatever arrives."""
    m = DirectRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_stream_event("ev-1", 500, now=T0)
    assert m.state()["mechanism"] == "http_resumption"
    live = m.on_result(dict(PARTIAL), now=T0 + 1)
    assert not any(isinstance(a, Deliver) for a in live)  # live, the offer is taken up

    m = DirectRequest()
    m.prepare(dict(CALL), now=T0)
    m.on_stream_event("ev-1", 500, now=T0)
    restored = restart(m)  # the host was killed here
    after = restored.on_result(dict(PARTIAL), now=T0 + 5)
    assert not any(isinstance(a, Deliver) for a in after), after
