"""`hostapp ops`: a header, times as people read them, progress as a percentage, status
words, columns that stay aligned within the terminal's width, and filters by status and
server (the JSON honours them and is otherwise the journal's rows as before)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hostapp.cli import text
from hostapp.cli.exits import UsageError
from hostapp.cli.ops import HEADERS, parse_statuses, table_lines
from hostapp.engine.api import OperationView
from hostapp.presentation import ago, duration
from hostapp.store.journal import OperationJournal, OperationRecord
from hostapp.store.paths import journal_path
from tests.support.peers import hostapp

NOW = 1_800_000_000.0


def op(id_: str, status: str, age: float, took: float | None = None, **kw) -> OperationView:
    created = NOW - age
    return OperationView(id=id_, server=kw.pop("server", "lab"), tool=kw.pop("tool", "long_sse"),
                         method="tools/call", arguments={}, status=status, created_at=created,
                         ended_at=None if took is None else created + took, **kw)


def test_relative_times_and_durations_read_as_words():
    assert [ago(NOW - s, NOW) for s in (2, 42, 125, 3 * 3600 + 5, 36 * 3600, 5 * 86400)] == [
        "just now", "42 s ago", "2 min ago", "3 h ago", "yesterday", "5 days ago"]
    assert ago(NOW - 40 * 86400, NOW).count("-") == 2  # a date, past a month
    assert [duration(s) for s in (0.4, 12, 185, 1800, 7800, 3 * 86400 + 4 * 3600)] == [
        "0.4 s", "12 s", "3 min 5 s", "30 min", "2 h 10 min", "3 d 4 h"]


def test_the_table_has_a_header_words_percentages_and_aligned_columns():
    ops = [
        op("a1b2c3d4e5f6", "running", age=130, progress=3, total=12, message="step 3/12", mechanism="direct",
           lost_at_stop="a plain request: nothing can resume it"),
        op("0123456789ab", "input_required", age=40, progress=1, total=2, message="waiting for your answer",
           mechanism="tasks_extension"),
        op("ffffeeeedddd", "completed", age=3 * 3600, took=95, progress=10, total=10, tool="sleep_with_progress"),
        op("999988887777", "failed", age=86400 * 2, took=0.5, error={"code": -1, "message": "boom\nat line 2"}),
        op("555544443333", "unknown", age=7, took=4, server="remote-server"),
        op("111122223333", "cancelled", age=600, took=61, progress=4),
    ]
    lines = table_lines(ops, NOW, cells=200)
    assert lines[0].split() == " ".join(HEADERS).split()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert rows["a1b2c3d4e5f6"].split("  ")[:1] == ["a1b2c3d4e5f6"]
    for needle, row in [("2 min ago", "a1b2c3d4e5f6"), ("2 min 10 s", "a1b2c3d4e5f6"), ("running", "a1b2c3d4e5f6"),
                        ("25%", "a1b2c3d4e5f6"), ("needs your input", "0123456789ab"), ("50%", "0123456789ab"),
                        ("3 h ago", "ffffeeeedddd"), ("1 min 35 s", "ffffeeeedddd"), ("100%", "ffffeeeedddd"),
                        ("failed", "999988887777"), ("2 days ago", "999988887777"), ("boom at line 2", "999988887777"),
                        ("outcome unknown", "555544443333"), ("cancelled", "111122223333"), ("—", "111122223333"),
                        # whether it survives a stop, as the window says it
                        ("lost if hostapp stops", "a1b2c3d4e5f6"), ("resumable (task)", "0123456789ab")]:
        assert needle in rows[row], (needle, rows[row])
    # Aligned: every column begins where its header does.
    for header in ("STARTED", "SERVER", "TOOL", "STATUS", "MESSAGE"):
        column = lines[0].index(header)
        assert all(line[column - 2:column] == "  " and line[column] != " " for line in lines[1:]
                   if len(line) > column), header
    column = lines[0].index("IF STOPPED")  # said of the two in flight only
    assert [line[column:column + 1].strip() != "" for line in lines[1:]] == [True, True, False, False, False, False]
    assert "input_required" not in "\n".join(lines)


def test_a_long_message_is_cut_with_an_ellipsis_and_no_line_is_wider_than_the_terminal():
    long_message = "a message from the server that goes on and on " * 4
    ops = [op("a1b2c3d4e5f6", "running", age=5, message=long_message), op("0123456789ab", "completed", age=9, took=1)]
    for cells in (120, 80, 60, 40):
        lines = table_lines(ops, NOW, cells)
        assert all(text.width(line) <= cells for line in lines), (cells, lines)
        assert all(line.split()[0] in ("ID", "a1b2c3d4e5f6", "0123456789ab") for line in lines)  # the id, whole
    assert table_lines(ops, NOW, 120)[1].endswith("…")
    assert "STATUS" in table_lines(ops, NOW, 40)[0]  # narrow: the message goes first, the status stays


def test_status_filters_take_words_comma_lists_and_say_what_is_wrong():
    assert parse_statuses(None) is None
    assert parse_statuses(["running,needs-input", "failed"]) == {"running", "input_required", "failed"}
    assert parse_statuses(["needs your input", "Unknown"]) == {"input_required", "unknown"}
    assert parse_statuses(["input_required"]) == {"input_required"}
    with pytest.raises(UsageError, match=r"no status 'done'.*completed"):
        parse_statuses(["done"])


# -- the command, on a real journal ----------------------------------------------------------

def add_lab(home: Path, name: str) -> None:
    added = hostapp("servers", "add", name, "--", sys.executable, "-m", "hostapp", "lab", "serve", "--stdio",
                    "--state", str(home / f"{name}.sqlite3"), home=home)
    assert added.returncode == 0, added.stderr


def test_ops_prints_a_table_and_filters_by_status_and_server(isolated_home):
    home = isolated_home
    add_lab(home, "lab")
    add_lab(home, "other")
    assert hostapp("call", "lab", "sleep_with_progress", "--args", '{"seconds": 0, "steps": 1}',
                   home=home).returncode == 0
    assert hostapp("call", "other", "fail", "--args", '{"mode": "rpc_error"}', home=home).returncode == 1
    assert hostapp("call", "other", "sleep_with_progress", "--args", '{"seconds": 0, "steps": 2}',
                   home=home).returncode == 0

    table = hostapp("ops", home=home, env={"COLUMNS": "150"}).stdout.splitlines()
    assert table[0].split() == " ".join(HEADERS).split()
    assert len(table) == 4 and all("just now" in line or " s ago" in line for line in table[1:])
    assert all(line.rstrip().endswith(("steps in 0 s", "(JSON-RPC error)")) for line in table[1:]), table

    def listed(*argv: str) -> list[tuple[str, str]]:
        proc = hostapp("ops", "--json", *argv, home=home)
        assert proc.returncode == 0, proc.stderr
        return sorted((row["server"], row["status"]) for row in json.loads(proc.stdout))

    assert listed() == [("lab", "completed"), ("other", "completed"), ("other", "failed")]
    assert listed("--status", "failed") == [("other", "failed")]
    assert listed("--server", "lab") == [("lab", "completed")]
    assert listed("--status", "completed,failed", "--server", "other") == [("other", "completed"), ("other", "failed")]
    assert listed("--status", "running") == []
    failed = hostapp("ops", "--status", "failed", home=home, env={"COLUMNS": "150"}).stdout.splitlines()
    assert len(failed) == 2 and " other " in failed[1] and " failed " in failed[1]
    assert hostapp("ops", "--server", "nowhere", home=home).stdout == "no operations match\n"
    # The JSON rows keep every field of before.
    [row] = json.loads(hostapp("ops", "--json", "--status", "failed", home=home).stdout)
    assert list(row) == ["id", "server", "tool", "mechanism", "status", "progress", "total", "message",
                         "created_at", "result", "error", "view_of"]
    bad = hostapp("ops", "--status", "done", home=home)
    assert bad.returncode == 2 and "no status 'done'" in bad.stderr


def test_ops_hides_the_calls_an_app_view_made_but_with_all(isolated_home):
    # A journal as the engine leaves it after a view polled twice: the view's operation,
    # and each poll journaled with view_of.
    with OperationJournal(journal_path(isolated_home)) as journal:
        journal.create_operation_sync(OperationRecord("viewop000001", "monitor", "tools/call",
                                                      {"name": "get-system-info"}, tool="get-system-info",
                                                      created_at=NOW - 60))
        journal.finish_operation_sync("viewop000001", "completed", result={"content": []})
        for n in range(2):
            poll = f"poll00000000{n}"
            journal.create_operation_sync(OperationRecord(poll, "monitor", "tools/call",
                                                          {"name": "poll-system-stats"}, tool="poll-system-stats",
                                                          created_at=NOW - 50 + n, view_of="viewop000001"))
            journal.finish_operation_sync(poll, "completed", result={"content": []})

    shown = hostapp("ops", home=isolated_home, env={"COLUMNS": "150"})
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == " ".join(HEADERS).split() and [line.split()[0] for line in lines[1:]] == ["viewop000001"]
    assert "get-system-info · 2 calls" in lines[1]  # counted on the view's own row
    everything = hostapp("ops", "--all", home=isolated_home, env={"COLUMNS": "200"}).stdout.splitlines()
    assert everything[0].split()[-2:] == ["VIEW", "OF"]
    column = everything[0].index("VIEW OF")
    rows = {line.split()[0]: line[column:].strip() for line in everything[1:]}
    assert rows == {"poll000000001": "viewop000001", "poll000000000": "viewop000001", "viewop000001": ""}

    def ids(*argv: str) -> list[str]:
        return [row["id"] for row in json.loads(hostapp("ops", "--json", *argv, home=isolated_home).stdout)]

    assert ids() == ["viewop000001"]
    assert sorted(ids("--all")) == ["poll000000000", "poll000000001", "viewop000001"]
    assert ids("--all", "--status", "completed", "--server", "monitor")[0] == "poll000000001"
    # Filtered: one view's calls alone, in the table and as JSON.
    assert sorted(ids("--view-of", "viewop000001")) == ["poll000000000", "poll000000001"]
    assert ids("--view-of", "other") == []
    one_view = hostapp("ops", "--view-of", "viewop000001", home=isolated_home, env={"COLUMNS": "200"})
    assert [line.split()[0] for line in one_view.stdout.splitlines()[1:]] == ["poll000000001", "poll000000000"]
    assert "no operations match" in hostapp("ops", "--view-of", "other", home=isolated_home).stdout


def test_a_completed_call_reads_whole_even_when_its_last_step_was_not_reported():
    lines = table_lines([op("ffffeeeedddd", "completed", age=60, took=30, progress=29, total=30)], NOW, cells=200)
    assert "100%" in lines[1] and "96%" not in lines[1]
