"""``hostapp ops``: the operations journal as a table a person reads, or as JSON, with
filters by status and by server.

The table shows when each operation started ("2 min ago"), how long it ran, its progress
as a percentage, its status in words ("needs your input"), whether it would survive a stop
of the agent ("lost if hostapp stops", "resumable (task)") and its latest message, in the
window's words (:mod:`hostapp.presentation`); the JSON is the journal's rows as before,
only the filters applied.

The calls an MCP App view made (a monitor's polls, every few seconds) are left out, as in
the window's list, and counted on the view's own row ("get-system-stats · 25 calls");
``--all`` lists them too, each naming its view's operation (VIEW OF), and ``--view-of OP``
lists only those of one view.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Iterable
from typing import TextIO

from hostapp.cli import text
from hostapp.cli.exits import UsageError
from hostapp.cli.table import render_table
from hostapp.engine.api import IN_FLIGHT, TERMINAL, EngineApi, JsonObject, OperationStatus, OperationView
from hostapp.presentation import PAUSED, STATUS_WORDS, ago, at_stop_words, duration, operation_name, status_word

#: What ``--status`` accepts besides the journal's own values and the words above.
STATUS_ALIASES: dict[str, frozenset[str]] = {
    "needs-input": frozenset({OperationStatus.INPUT_REQUIRED}),
    "input": frozenset({OperationStatus.INPUT_REQUIRED}),
    "in-flight": frozenset(IN_FLIGHT),
    "finished": frozenset(TERMINAL),
}

HEADERS = ("ID", "STARTED", "DURATION", "SERVER", "TOOL", "STATUS", "PROGRESS", "IF STOPPED", "MESSAGE")
#: With ``--all``: the operation whose app view made the call (empty for a call of its own).
VIEW_OF = "VIEW OF"
MESSAGE = HEADERS.index("MESSAGE")
RIGHT = frozenset({HEADERS.index("DURATION"), HEADERS.index("PROGRESS")})
#: Never cut: what a person types next (the id) and reads first (the status, the progress).
KEEP = frozenset({HEADERS.index("ID"), HEADERS.index("STATUS"), HEADERS.index("PROGRESS")})
#: Left out, in this order, when a terminal is too narrow for every column.
DROP = tuple(HEADERS.index(h) for h in ("IF STOPPED", "MESSAGE", "DURATION", "SERVER", "STARTED"))
NO_PROGRESS = "—"


def _key(word: str) -> str:
    return "-".join(word.strip().lower().replace("_", " ").split())


def parse_statuses(values: Iterable[str] | None) -> set[str] | None:
    """``--status`` values (each may be a comma list) as journal statuses; None: all."""
    known: dict[str, frozenset[str]] = {_key(s): frozenset({s}) for s in OperationStatus}
    known.update({_key(word): frozenset({s}) for s, word in STATUS_WORDS.items()})
    known.update(STATUS_ALIASES)
    wanted: set[str] = set()
    for value in values or []:
        for word in value.split(","):
            if not word.strip():
                continue
            statuses = known.get(_key(word))
            if statuses is None:
                choices = ", ".join([*(str(s) for s in OperationStatus), *STATUS_ALIASES])
                raise UsageError(f"--status: no status {word.strip()!r}; choose from {choices}")
            wanted |= statuses
    return wanted or None


async def matching_operations(engine: EngineApi, statuses: set[str] | None, servers: set[str] | None,
                              limit: int, with_view_calls: bool = False,
                              view_of: str | None = None) -> list[OperationView]:
    """Up to ``limit`` operations of those statuses on those servers, in the journal's
    order (those in flight first, then the newest); the calls app views made only
    ``with_view_calls``, or only those the view of ``view_of`` made."""
    found: list[OperationView] = []
    page, offset = max(limit, 200), 0
    while len(found) < limit:
        views = await engine.operations(statuses=statuses, limit=page, offset=offset,
                                        top_level=not with_view_calls and view_of is None, view_of=view_of)
        found += [v for v in views if not servers or v.server in servers]
        if len(views) < page:
            break
        offset += page
    return found[:limit]


async def matching_rows(engine: EngineApi, statuses: set[str] | None, servers: set[str] | None,
                        limit: int, with_view_calls: bool = False, view_of: str | None = None) -> list[JsonObject]:
    """``--json``: the journal's rows as ever (``operation_rows``), only those that match
    (the calls app views made only ``with_view_calls``, or those of ``view_of``)."""
    if not statuses and not servers and with_view_calls and view_of is None:
        return await engine.operation_rows(limit=limit)
    asked = limit
    while True:
        rows = await engine.operation_rows(limit=asked)
        found = [r for r in rows if (not statuses or r["status"] in statuses)
                 and (not servers or r["server"] in servers)
                 and (r.get("view_of") == view_of if view_of is not None
                      else with_view_calls or r.get("view_of") is None)]
        if len(found) >= limit or len(rows) < asked:
            return found[:limit]
        asked *= 4


async def paused_ids(engine: EngineApi, ops: list[OperationView]) -> set[str]:
    """The operations of ``ops`` in flight in the journal that nobody carries now: all of
    them when no agent runs (the journal was read in this process), else those the agent
    does not carry."""
    from hostapp.agent.client import RemoteEngine
    from hostapp.cli.attach import carried_by_owner

    in_flight = [op for op in ops if op.status in IN_FLIGHT]
    if not in_flight:
        return set()
    if not isinstance(engine, RemoteEngine):
        return {op.id for op in in_flight}
    _carried, orphans = await carried_by_owner(engine, in_flight)
    return set(orphans)


def progress_text(op: OperationView) -> str:
    """A completed call is whole (its server may not have reported the last step, as the
    window shows it too); otherwise how far it got, if known."""
    if op.status == OperationStatus.COMPLETED:
        return "100%"
    fraction = op.fraction
    return NO_PROGRESS if fraction is None else f"{int(fraction * 100)}%"


def message_of(op: OperationView) -> str:
    """The latest message; for an operation that failed or ended unknown, its reason."""
    if op.status in TERMINAL and op.error and op.error.get("message"):
        return text.plain(op.error["message"])
    return text.plain(op.message or "")


def row_of(op: OperationView, now: float, paused: bool = False, with_view_of: bool = False) -> list[str]:
    end = op.ended_at if op.ended_at is not None else now
    started = ago(op.created_at, now) if op.created_at else "?"
    took = duration(end - op.created_at) if op.created_at else "?"
    row = [op.id, started, took, text.plain(op.server), text.plain(operation_name(op)),
           text.plain(status_word(op.status, paused=paused)), progress_text(op), at_stop_words(op), message_of(op)]
    return [*row, op.view_of or ""] if with_view_of else row


def table_lines(ops: list[OperationView], now: float, cells: int | None,
                paused: frozenset[str] | set[str] = frozenset(), with_view_calls: bool = False) -> list[str]:
    headers = (*HEADERS, VIEW_OF) if with_view_calls else HEADERS
    keep = KEEP | {len(HEADERS)} if with_view_calls else KEEP
    return render_table(headers, [row_of(op, now, op.id in paused, with_view_calls) for op in ops], cells,
                        right=RIGHT, shrink_first=MESSAGE, keep=keep, drop=DROP)


def print_table(ops: list[OperationView], filtered: bool, stream: TextIO | None = None,
                now: float | None = None, paused: frozenset[str] | set[str] = frozenset(),
                with_view_calls: bool = False) -> None:
    """The table, as wide as the terminal (or ``COLUMNS``, or 160 columns into a pipe);
    ``with_view_calls`` (``--all``): a last column names the operation whose view made a call."""
    stream = stream or sys.stdout
    if not ops:
        print("no operations match" if filtered else "no operations yet", file=stream)
        return
    cells = shutil.get_terminal_size((160, 24)).columns - 1
    for line in table_lines(ops, time.time() if now is None else now, cells, paused, with_view_calls):
        print(line, file=stream)
    if paused:
        print(f"\n{PAUSED}: no agent carries {'it' if len(paused) == 1 else 'them'} now; "
              "'hostapp resume' takes up again what can be resumed", file=stream)
