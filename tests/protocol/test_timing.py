"""Time as an input: the product's waits in one place, and a scale that shrinks them together."""

from __future__ import annotations

import dataclasses

import pytest

from hostapp.mechanisms.base import SENT
from hostapp.mechanisms.http_resumption import HttpStreamResumption
from hostapp.protocol.timing import DEFAULT_TIMING, HOST_TIME_SCALE_ENV, Timing, time_scale


def test_the_environment_names_no_scale_and_the_product_keeps_its_timing():
    assert Timing.from_environment({}) == DEFAULT_TIMING == Timing()
    assert Timing.from_environment({HOST_TIME_SCALE_ENV: " "}) == DEFAULT_TIMING


def test_a_scale_shrinks_every_wait_and_cap_together():
    fast = Timing.from_environment({HOST_TIME_SCALE_ENV: "0.1"})
    for f in dataclasses.fields(Timing):
        assert getattr(fast, f.name) == pytest.approx(getattr(DEFAULT_TIMING, f.name) * 0.1), f.name
    # what the fault tests rely on: a 3 s outage at a tenth crosses the reconnect cap
    # as a 30 s one does in real time
    assert fast.reconnect_cap == pytest.approx(3.0)


@pytest.mark.parametrize("raw", ["0", "-1", "fast", "nan", "inf"])
def test_a_scale_that_is_not_a_positive_number_is_refused_naming_its_variable(raw):
    with pytest.raises(ValueError, match=HOST_TIME_SCALE_ENV):
        time_scale(HOST_TIME_SCALE_ENV, {HOST_TIME_SCALE_ENV: raw})
    with pytest.raises(ValueError):
        DEFAULT_TIMING.scaled(float(raw) if raw != "fast" else 0)


def test_a_mechanism_waits_by_the_timing_it_is_given_and_hands_it_to_what_it_adopts():
    def reconnect_delays(timing: Timing) -> list[float]:
        mech = HttpStreamResumption().use_timing(timing)
        mech.prepare({"name": "t", "arguments": {}}, now=0.0)
        assert mech.phase == SENT
        mech.on_stream_event("s:1", None, now=0.0)
        delays = []
        for attempt in range(6):
            actions = mech.on_disconnect(now=float(attempt), session_lost=False)
            delays += [a.at - attempt for a in actions if hasattr(a, "at")]
        return delays

    real, fast = reconnect_delays(DEFAULT_TIMING), reconnect_delays(DEFAULT_TIMING.scaled(0.1))
    assert real and len(real) == len(fast)
    assert max(real) <= DEFAULT_TIMING.reconnect_cap
    assert fast == pytest.approx([d * 0.1 for d in real])


def test_a_plain_request_hands_its_timing_to_the_mechanism_it_adopts():
    from hostapp.mechanisms.direct import DirectRequest

    fast = DEFAULT_TIMING.scaled(0.1)
    mech = DirectRequest().use_timing(fast)
    mech.prepare({"name": "t", "arguments": {}}, now=0.0)
    mech.on_stream_event("s:1", None, now=0.0)  # an event id: the SSE stream can be resumed
    assert mech.carrier is not None and mech.carrier.name == "http_resumption"
    assert mech.carrier.timing is fast
