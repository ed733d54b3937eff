"""The soak's verdict: the host's journal held against what the lab servers did.

Read after every process is stopped: the home's journal (``operations``) and each lab's
state file (``jobs``: one row per unit of work with its outcome and the progress token
``op-<operation id>`` the host sent; ``executions``: how many times each piece of work
really started). The checks:

* **Nothing ran twice.** No execution counted twice, no operation with two jobs, and no
  more starts of a tool on a lab than operations of it there.
* **The server's outcome.** A completed operation has the result of its job (the job
  completed, with the same structured content); a failed one a job that failed, or none
  (a call that never ran). ``unknown`` is right where the server produced no outcome or
  the operation held no handle to find it by (no mechanism state journaled: a plain
  request, or a task whose id never arrived); an operation that held a handle and ends
  unknown while its job ended is wrong, unless the outcome was lost on the way (below).
* **Lost on the way.** A server that hands an outcome out only once (a resume token spent
  on its final result, a resumable request's or a draft stream's response) counts it as
  delivered once it has written it to the connection. If that connection is then cut, or
  the agent reading it killed, nobody has the outcome any more: the host asks again, is
  refused or finds nothing, and ``unknown`` is the truth, not a fault of the host. The
  oracle accepts it only with the evidence: the lab's own record that the outcome went
  out (the token spent; the stream closed with every message delivered), and a break of
  that lab's connections (a cut, a refusal, the lab or the agent killed) after the job
  ended and before the host gave the operation up), or the outcome written while no agent
  ran at all (between a kill and the next start: a request of the killed agent was still
  open on the lab, which answered a reader that was gone). A response the host received
  and dropped with no break in between is still wrong.
* **Nobody's row.** Nothing is left pending, running or waiting after the drain.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hostapp.lab.state import LabState
from tests.support.faults import journal_rows

TERMINAL_OK = {"completed", "failed", "unknown"}


@dataclass
class Report:
    figures: dict[str, Any] = field(default_factory=dict)
    outcomes: dict[str, collections.Counter[str]] = field(default_factory=dict)  # mechanism -> status counts
    wrong: list[str] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    disagree: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.twice or self.stuck or self.disagree)

    def render(self) -> str:
        lines = ["soak figures:"]
        lines += [f"  {name}: {value}" for name, value in self.figures.items()]
        lines.append("outcomes by mechanism:")
        for mechanism, counts in sorted(self.outcomes.items()):
            lines.append(f"  {mechanism:20} " + ", ".join(f"{s} {n}" for s, n in sorted(counts.items())))
        for title, items in (("WRONG OUTCOMES", self.wrong), ("RAN TWICE", self.twice),
                             ("LEFT IN FLIGHT", self.stuck), ("CLIENTS SAW ANOTHER OUTCOME", self.disagree),
                             ("notes", self.notes)):
            if items:
                lines.append(f"{title}:")
                lines += [f"  {item}" for item in items]
        lines.append("verdict: " + ("every check passed" if self.ok else "FAILED"))
        return "\n".join(lines)


def _structured(result: Any) -> Any:
    return result.get("structuredContent") if isinstance(result, dict) else None


def check_run(home: Path, labs: list[Any], cli_outcomes: list[tuple[str, str, dict[str, Any], str, Any]],
              client_seen: dict[str, tuple[str, Any]],
              breaks: Sequence[tuple[float, str | None]] = (),
              agent_gone: Sequence[tuple[float, float]] = ()) -> Report:
    """``cli_outcomes``: (server, tool, arguments, last status, result) of each ``hostapp call``
    that printed an outcome; ``client_seen``: operation id -> (status, result) of the last
    terminal change the soak's own client heard of; ``breaks``: (time, lab name or None for
    every lab) of each cut, refusal or kill that broke connections; ``agent_gone``: (kill,
    next start) of each time no agent ran."""
    report = Report()
    rows = journal_rows(home)
    _check_clients(report, rows, cli_outcomes, client_seen)
    states = {lab.name: LabState(lab.process.state_file) for lab in labs}
    try:
        jobs_by_token: dict[tuple[str, str], list[Any]] = collections.defaultdict(list)
        for name, state in states.items():
            for job in state.jobs():
                jobs_by_token[(name, str(job.progress_token))].append(job)
            for tool, key, count in state.duplicate_executions():
                report.twice.append(f"{name}: the work of {tool} {key[:12]}… started {count} times")
        ops_per_tool: collections.Counter[tuple[str, str]] = collections.Counter()
        for row in rows:
            ops_per_tool[(row["server"], row["tool"])] += 1
            jobs = jobs_by_token.get((row["server"], f"op-{row['id']}"), [])
            lost = _lost_on_the_way(states.get(row["server"]), jobs, row, breaks, agent_gone)
            _check_operation(report, row, jobs, lost)
        for name, state in states.items():
            for tool, started in state.execution_counts().items():
                if started > ops_per_tool[(name, tool)]:
                    report.twice.append(f"{name}: {tool} started {started} times for "
                                        f"{ops_per_tool[(name, tool)]} operations")
    finally:
        for state in states.values():
            state.close()
    report.figures["operations"] = len(rows)
    statuses = collections.Counter(r["status"] for r in rows)
    report.figures["outcomes"] = ", ".join(f"{s} {n}" for s, n in sorted(statuses.items()))
    return report


def outcome_handed_out(state: LabState, job: Any) -> bool:
    """Does the lab count the job's outcome as delivered (so it will not give it again)?"""
    if job.mechanism == "resume_token":
        return bool(job.extra.get("delivered"))
    stream = state.stream(job.out_stream) if job.out_stream else None
    # The response closes its stream: closed, with every message delivered, it went out.
    return stream is not None and bool(stream["closed"]) and not state.messages_after(stream["id"],
                                                                                        stream["delivered_seq"])


def _lost_on_the_way(state: LabState | None, jobs: list[Any], row: dict[str, Any],
                     breaks: Sequence[tuple[float, str | None]],
                     agent_gone: Sequence[tuple[float, float]] = ()) -> str | None:
    """Why an unknown outcome is the truth, if the evidence shows the lab wrote the outcome
    to a connection that then broke (see the module's docstring); else None."""
    if state is None or len(jobs) != 1 or jobs[0].status not in ("completed", "failed") \
            or row["status"] != "unknown" or not outcome_handed_out(state, jobs[0]):
        return None
    job = jobs[0]
    # The job's last change is its end (or the handing out itself): the outcome was
    # written after it, and lost before the host gave up.
    ended = row["finished_at"] or row["updated_at"]
    for killed, back in agent_gone:
        if killed <= job.updated_at <= back:
            return (f"the server's job {job.status} and handed its outcome out while no agent ran "
                    f"({job.updated_at - killed:.1f} s after a kill, "
                    f"{back - job.updated_at:.1f} s before the next start)")
    when = [t for t, lab in breaks if lab in (None, row["server"]) and job.updated_at <= t <= ended]
    if not when:
        return None
    return (f"the server's job {job.status} and counts its outcome as delivered; {len(when)} break(s) of "
            f"the connections within {ended - job.updated_at:.1f} s after it")


def _check_operation(report: Report, row: dict[str, Any], jobs: list[Any], lost: str | None = None) -> None:
    op = f"{row['id']} ({row['server']}/{row['tool']}, {row['mechanism']})"
    status = row["status"]
    report.outcomes.setdefault(row["mechanism"] or "none", collections.Counter())[status] += 1
    if len(jobs) > 1:
        report.twice.append(f"{op}: {len(jobs)} jobs on the server for one operation")
    job = jobs[0] if jobs else None
    result = json.loads(row["result"]) if row["result"] else None
    # The mechanism's state is journaled with the handle, before anything depends on it
    # (the keyring reference itself is gone once the operation ended): an empty state means
    # no handle ever reached the host (a plain request, or a task whose id never arrived).
    had_handle = bool(row["handle"]) or row["handle_ref"] is not None
    if status not in TERMINAL_OK:
        if status in ("pending", "running", "input_required"):
            report.stuck.append(f"{op}: left {status}")
        else:
            report.wrong.append(f"{op}: ended {status}, which nobody asked for")
        return
    if status == "completed":
        if job is None:
            # A long_mrtr runs inline, without a job: its result names the tool and the answer.
            structured = _structured(result) or {}
            if row["tool"] != "long_mrtr" or structured.get("tool") != "long_mrtr":
                report.wrong.append(f"{op}: completed, but the server has no job for it")
        elif job.status != "completed":
            report.wrong.append(f"{op}: completed, but its job on the server is {job.status}")
        elif _structured(job.result) != _structured(result):
            report.wrong.append(f"{op}: completed with {_structured(result)}, the server's result is "
                                f"{_structured(job.result)}")
    elif status == "failed":
        if job is not None and job.status == "completed":
            report.wrong.append(f"{op}: failed ({row['error']}), but its job on the server completed")
    elif status == "unknown":
        if lost is not None:
            report.notes.append(f"{op}: unknown, the outcome lost on the way: {lost} (error: {row['error']})")
        elif job is not None and job.status in ("completed", "failed") and had_handle:
            report.wrong.append(f"{op}: unknown although it held a handle and the server's job {job.status} "
                                f"(error: {row['error']})")
        elif job is not None and job.status in ("completed", "failed"):
            report.notes.append(f"{op}: unknown with no handle yet; the server's job {job.status}")


def _check_clients(report: Report, rows: list[dict[str, Any]],
                   cli_outcomes: list[tuple[str, str, dict[str, Any], str, Any]],
                   client_seen: dict[str, tuple[str, Any]]) -> None:
    """What each client was told is what the journal holds."""
    by_call: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for row in rows:
        arguments = (json.loads(row["params"]) or {}).get("arguments")
        by_call[json.dumps([row["server"], row["tool"], arguments], sort_keys=True)].append(row)
    matched = 0
    for server, tool, arguments, status, result in cli_outcomes:
        candidates = by_call.get(json.dumps([server, tool, arguments], sort_keys=True), [])
        if len(candidates) != 1:
            continue  # the same arguments twice (seldom): the command's operation is not known
        row = candidates[0]
        matched += 1
        if row["status"] != status or _structured(json.loads(row["result"]) if row["result"] else None) \
                != _structured(result):
            report.disagree.append(f"hostapp call {server} {tool} printed {status} {_structured(result)}, "
                                   f"the journal holds {row['id']} {row['status']}")
    report.figures["command lines that printed an outcome (checked)"] = f"{len(cli_outcomes)} ({matched})"
    journal = {row["id"]: row for row in rows}
    for op_id, (status, result) in client_seen.items():
        row = journal.get(op_id)
        if row is None or row["status"] != status or \
                _structured(json.loads(row["result"]) if row["result"] else None) != _structured(result):
            report.disagree.append(f"the soak's client saw {op_id} end {status}, the journal holds "
                                   f"{row['status'] if row else 'nothing'}")
    report.figures["terminal changes the soak's client saw"] = len(client_seen)
