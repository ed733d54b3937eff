"""The soak's oracle on an outcome lost on the way: a real lab state file, the journal's row
as the oracle reads it, and the breaks the chaos made."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hostapp.lab.state import JobRow, LabState
from tests.soak.oracle import Report, _check_operation, _lost_on_the_way

T = 1_800_000_000.0
RESULT = {"content": [], "structuredContent": {"progress": 8, "total": 8}}


def job(mechanism: str, *, out_stream: str | None = None, extra: dict[str, Any] | None = None) -> JobRow:
    return JobRow("k-" + mechanism, "long_" + mechanism, mechanism, {}, T - 10, 8.0, 8, 8, "completed", "done",
                  RESULT, None, out_stream, None, "op-1", 7, None, None, T - 10, T, extra or {})


def row(**changes: Any) -> dict[str, Any]:
    return {"id": "1", "server": "lab", "tool": "long_resumable", "mechanism": "resumable_requests",
            "status": "unknown", "result": None, "handle": '{"mechanism": "resumable_requests"}', "handle_ref": None,
            "error": '{"message": "the server reports that the request completed ..."}',
            "updated_at": T + 5, "finished_at": T + 5, **changes}


@pytest.fixture
def lab(tmp_path: Path):
    state = LabState(tmp_path / "lab.sqlite3")
    yield state
    state.close()


def response_stream(lab: LabState, *, delivered: bool) -> str:
    lab.add_stream("s1", "resumable", None)
    lab.append("s1", {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 8}})
    seq = lab.append("s1", {"jsonrpc": "2.0", "id": 7, "result": RESULT}, close=True)
    lab.mark_delivered("s1", seq if delivered else seq - 1)
    return "s1"


def test_a_response_the_lab_wrote_before_a_break_is_an_honest_unknown(lab):
    jobs = [job("resumable", out_stream=response_stream(lab, delivered=True))]
    assert _lost_on_the_way(lab, jobs, row(), [(T + 2, "lab")])
    assert _lost_on_the_way(lab, jobs, row(), [(T + 2, None)])  # the agent killed
    report = Report()
    _check_operation(report, row(), jobs, _lost_on_the_way(lab, jobs, row(), [(T + 2, "lab")]))
    assert not report.wrong and "lost on the way" in report.notes[0]


@pytest.mark.parametrize("breaks", [[], [(T - 1, "lab")], [(T + 6, "lab")], [(T + 2, "other-lab")]],
                         ids=["no break", "before the job ended", "after the host gave up", "another lab"])
def test_without_a_break_between_the_job_and_the_host_giving_up_it_is_wrong(lab, breaks):
    jobs = [job("resumable", out_stream=response_stream(lab, delivered=True))]
    lost = _lost_on_the_way(lab, jobs, row(), breaks)
    assert lost is None
    report = Report()
    _check_operation(report, row(), jobs, lost)
    assert report.wrong and not report.notes


def test_a_response_the_lab_still_holds_is_wrong_to_give_up(lab):
    jobs = [job("resumable", out_stream=response_stream(lab, delivered=False))]
    assert _lost_on_the_way(lab, jobs, row(), [(T + 2, "lab")]) is None


def test_a_spent_resume_token_counts_as_handed_out(lab):
    spent = [job("resume_token", extra={"delivered": True})]
    assert _lost_on_the_way(lab, spent, row(tool="long_resume_token"), [(T + 2, "lab")])
    assert _lost_on_the_way(lab, [job("resume_token")], row(tool="long_resume_token"), [(T + 2, "lab")]) is None


def test_only_an_unknown_outcome_is_excused(lab):
    jobs = [job("resumable", out_stream=response_stream(lab, delivered=True))]
    assert _lost_on_the_way(lab, jobs, row(status="failed"), [(T + 2, "lab")]) is None


def test_an_outcome_handed_out_while_no_agent_ran_is_an_honest_unknown(lab):
    # Soak run of 2026-11-23 (operation 60984009f736): the agent was killed with a resume
    # call open; the lab finished the work 1.7 s later and answered that call, spending the
    # token; the next agent, started 1.1 s after that, was refused the token. No break
    # fell between the job's end and the host giving up, yet nobody could read the outcome.
    spent = [job("resume_token", extra={"delivered": True})]  # handed out at T
    gone = [(T - 1.7, T + 1.1)]
    assert _lost_on_the_way(lab, spent, row(tool="long_resume_token"), [(T - 1.7, None)], gone)
    # An agent ran when it was handed out: its loss is the host's.
    assert _lost_on_the_way(lab, spent, row(tool="long_resume_token"), [(T - 5, None)], [(T - 5, T - 2)]) is None
