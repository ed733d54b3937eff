"""What both clients say about an operation (hostapp/presentation.py): durations at their
boundaries, status words, whether it survives a stop, and the time left from its pace."""

from __future__ import annotations

import pytest

from hostapp.engine.api import IN_FLIGHT, OperationStatus, OperationView
from hostapp.presentation import (
    LOST_AT_STOP,
    PAUSED,
    STATUS_WORDS,
    Pace,
    ProgressEstimator,
    ago,
    at_stop_why,
    at_stop_words,
    capitalized,
    clock,
    duration,
    rough,
    status_word,
    time_left,
)

NOW = 1_800_000_000.0


def view(status: str = OperationStatus.RUNNING, **kw) -> OperationView:
    return OperationView(id=kw.pop("id", "op1"), server="lab", tool="long_sse", method="tools/call", arguments={},
                         status=status, **kw)


# -- durations ----------------------------------------------------------------------------

def test_an_elapsed_time_reads_as_a_clock_up_to_days():
    assert [clock(s) for s in (-5, 0, 7, 59, 60, 754, 3599, 3600, 3723, 86399, 86400, 3 * 86400 + 4 * 3600)] == [
        "0:00", "0:00", "0:07", "0:59", "1:00", "12:34", "59:59", "1:00:00", "1:02:03", "23:59:59", "1 d 0 h",
        "3 d 4 h"]


def test_a_rough_figure_turns_into_minutes_at_a_minute_and_into_days_at_a_day():
    assert [rough(s) for s in (-3, 0, 0.4, 59, 59.4, 59.6, 60, 89, 90, 3540, 3599, 3600, 4800, 7200)] == [
        "0 s", "0 s", "0 s", "59 s", "59 s", "1 min", "1 min", "1 min", "2 min", "59 min", "1 h", "1 h",
        "1 h 20 min", "2 h"]
    assert [rough(s) for s in (86399, 86400, 90000, 2 * 86400 + 3 * 3600)] == ["1 d", "1 d", "1 d 1 h", "2 d 3 h"]
    assert time_left(45) == "~45 s left" and time_left(185) == "~3 min left"


def test_a_duration_keeps_seconds_under_ten_minutes_and_ago_says_when():
    assert [duration(s) for s in (0.4, 12, 59.9, 60, 185, 600, 605, 1800, 3600, 7800, 86400, 3 * 86400 + 4 * 3600)] == [
        "0.4 s", "12 s", "59 s", "1 min", "3 min 5 s", "10 min", "10 min", "30 min", "1 h", "2 h 10 min", "1 d",
        "3 d 4 h"]
    assert [ago(NOW - s, NOW) for s in (-1, 2, 5, 42, 60, 125, 3 * 3600 + 5, 36 * 3600, 5 * 86400)] == [
        "in the future", "just now", "5 s ago", "42 s ago", "1 min ago", "2 min ago", "3 h ago", "yesterday",
        "5 days ago"]


# -- status words -------------------------------------------------------------------------

def test_every_status_has_its_words_and_paused_is_said_of_work_in_flight_only():
    assert set(STATUS_WORDS) == set(OperationStatus)
    assert status_word(OperationStatus.UNKNOWN) == "outcome unknown"
    assert status_word(OperationStatus.INPUT_REQUIRED) == "needs your input"
    assert capitalized(status_word(OperationStatus.PENDING)) == "Starting"
    for status in OperationStatus:
        assert status_word(status, paused=True) == (PAUSED if status in IN_FLIGHT else STATUS_WORDS[status])
    assert status_word("some_new_status") == "some new status"


# -- does it survive a stop ----------------------------------------------------------------

def test_whether_it_survives_a_stop_is_what_the_view_says():
    lost = view(mechanism="direct", lost_at_stop="a plain request: nothing can resume it")
    assert at_stop_words(lost) == LOST_AT_STOP and not lost.survives_stop
    assert at_stop_why(lost) == "If hostapp stops now, this operation ends: a plain request: nothing can resume it."
    unsent = view(OperationStatus.PENDING, lost_at_stop="not sent yet: it would end without running")
    assert at_stop_words(unsent) == LOST_AT_STOP
    task = view(mechanism="tasks_extension")
    assert at_stop_words(task) == "resumable (task)" and task.survives_stop
    assert "asks for the task by its id" in at_stop_why(task)
    assert at_stop_words(view(mechanism="a_future_mechanism")) == "resumable"
    ended = view(OperationStatus.COMPLETED, mechanism="direct", lost_at_stop="a plain request: nothing can resume it")
    assert at_stop_words(ended) == at_stop_why(ended) == "" and not ended.survives_stop


# -- the time left --------------------------------------------------------------------------

def test_the_time_left_counts_down_between_news_and_grows_once_news_is_overdue():
    pace = Pace(since=0.0)
    pace.note(10, 2.0)
    pace.note(30, 6.0)  # 20 in 4 s: 70 to go take 14 s
    assert pace.estimate(30, 100, 6.0).seconds_left == pytest.approx(14.0)
    assert pace.estimate(30, 100, 10.0).seconds_left == pytest.approx(10.0)
    at_the_edge = pace.estimate(30, 100, 18.0)  # 12 s quiet: three usual gaps, not yet stalled
    assert at_the_edge.seconds_left == pytest.approx(2.0) and not at_the_edge.stalled
    stalled = pace.estimate(30, 100, 30.0)
    assert stalled.stalled and stalled.seconds_left == pytest.approx(70 / (20 / 28))
    assert pace.estimate(30, 100, 60.0).seconds_left > stalled.seconds_left
    assert pace.usual_gap() == pytest.approx(4.0)


def test_no_estimate_without_a_total_or_a_rate():
    pace = Pace(since=0.0)
    assert pace.estimate(None, 100, 5.0) is None  # no progress yet
    pace.note(0, 1.0)
    assert pace.estimate(0, 100, 5.0) is None     # progress, but none made: a zero rate
    pace.note(0, 3.0)
    assert pace.estimate(0, 100, 5.0) is None and pace.usual_gap() is None
    pace.note(5, 4.0)
    assert pace.estimate(5, None, 5.0) is None    # unknown total
    assert pace.estimate(5, 0, 5.0) is None
    assert pace.estimate(100, 100, 5.0) is None   # done
    assert pace.estimate(5, 100, 5.0) is not None


def test_one_piece_of_news_is_measured_from_the_start_only_when_the_start_is_a_measure():
    from_start = Pace(since=100.0)
    from_start.note(1, 112.0)
    assert from_start.estimate(1, 10, 120.0).seconds_left == pytest.approx(100.0)  # 1 in 12 s, 8 s ago
    after_a_pause = Pace()
    after_a_pause.note(1, 112.0)
    assert after_a_pause.estimate(1, 10, 120.0) is None
    at_once = Pace(since=112.0)
    at_once.note(1, 112.0)  # no time between the start and the news: no rate
    assert at_once.estimate(1, 10, 120.0) is None


def test_a_count_that_goes_back_starts_a_new_rate_and_old_news_leaves_the_window():
    pace = Pace(since=0.0)
    for t, p in ((1, 10), (2, 20), (3, 30)):
        pace.note(p, t)
    pace.note(5, 4.0)  # a new phase
    assert pace.estimate(5, 100, 4.0) is None
    pace.note(10, 5.0)
    assert pace.estimate(10, 100, 5.0).rate == pytest.approx(5.0)
    slow = Pace()
    for t in range(0, 100, 10):  # 1 a second for 90 s, then 1 in 10 s lately
        slow.note(float(t), float(t))
    slow.note(91.0, 100.0)
    slow.note(92.0, 110.0)
    assert slow.estimate(92, 200, 110.0).rate == pytest.approx(1 / 10)  # the recent rate, not the life's


def test_the_estimator_starts_afresh_after_a_question_or_an_agent_that_came_back():
    estimator = ProgressEstimator()
    estimator.observe(view(progress=0, total=10, created_at=NOW, updated_at=NOW))
    estimator.observe(view(progress=5, total=10, created_at=NOW, updated_at=NOW + 10))
    assert estimator.estimate(view(progress=5, total=10, created_at=NOW, updated_at=NOW + 10),
                              now=NOW + 10).seconds_left == pytest.approx(10)
    estimator.observe(view(OperationStatus.INPUT_REQUIRED, progress=5, total=10, created_at=NOW, updated_at=NOW + 12))
    answered = view(progress=5, total=10, created_at=NOW, updated_at=NOW + 200)
    estimator.observe(answered)
    assert estimator.estimate(answered, now=NOW + 201) is None
    moved = view(progress=6, total=10, created_at=NOW, updated_at=NOW + 202)
    estimator.observe(moved)
    assert estimator.estimate(moved, now=NOW + 202).seconds_left == pytest.approx(8)

    estimator.resumed(NOW + 300)  # no agent carried the work for a while
    estimator.observe(moved)
    assert estimator.estimate(moved, now=NOW + 300) is None
    again = view(progress=7, total=10, created_at=NOW, updated_at=NOW + 302)
    estimator.observe(again)
    assert estimator.estimate(again, now=NOW + 302).seconds_left == pytest.approx(6)
    estimator.observe(view(OperationStatus.COMPLETED, progress=10, total=10, created_at=NOW, updated_at=NOW + 310))
    assert estimator.usual_gap(again) is None  # forgotten once it ended
