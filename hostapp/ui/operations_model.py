"""The operations table: in-flight operations first, then history paged from the journal.

Shape follows qutebrowser's downloads model: the engine (through
:class:`~hostapp.ui.adapter.EngineSignals`) pushes batches of changed operations, and this
thin model maps them to row signals. In-flight operations are few and all kept; finished
ones can number in the hundreds of thousands, so they are read a page at a time from the
journal as the view scrolls (``canFetchMore``/``fetchMore``), never all at once, by key
(the last row's ``(created_at, id)``: the same cost at any depth), and at most
:data:`HISTORY_KEPT` of them are held: the rows far above are let go as the view goes down,
and read again (:meth:`OperationTableModel.fetch_newer_page`) as it comes back up.

The calls an MCP App view made (``OperationView.view_of``: a monitor polls every few
seconds) are not rows: the list and its count are of top-level operations, and the
details of the view's operation list its view's calls.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QIcon
from PySide6.QtWidgets import QApplication, QStyle

from hostapp.engine import api
from hostapp.engine.api import OperationView
from hostapp.presentation import (
    STALL_FACTOR,
    Estimate,
    ProgressEstimator,
    at_stop_why,
    at_stop_words,
    capitalized,
    clock,
    operation_name,
    rough,
    status_word,
)
from hostapp.ui.flat_table_model import TOP_LEVEL, FlatTableModel
from hostapp.ui.result_view import plain_tooltip

log = logging.getLogger(__name__)

#: How many finished operations one journal read brings.
PAGE_SIZE = 200
#: How many finished operations the model holds at most: scrolled further, it lets go of
#: the rows at the other end (off screen) and reads them again when they are scrolled back
#: to, so a history of a million rows costs the memory of these.
HISTORY_KEPT = 10 * PAGE_SIZE

#: The role that carries the whole :class:`OperationView` of a row (for the delegate and the details).
OperationRole = Qt.ItemDataRole.UserRole + 1

#: The role of a row's :class:`Estimate` (rate and time left), None without a total.
EstimateRole = Qt.ItemDataRole.UserRole + 3
#: The role of a cell's value for sorting (numbers for progress and elapsed time).
SortRole = Qt.ItemDataRole.UserRole + 2

#: Every role some cell answers (data() returns at once for the others).
_ROLES_ANSWERED = frozenset({
    OperationRole, EstimateRole, SortRole, Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole,
    Qt.ItemDataRole.AccessibleTextRole, Qt.ItemDataRole.DecorationRole, Qt.ItemDataRole.FontRole,
    Qt.ItemDataRole.TextAlignmentRole})
_RIGHT_ALIGNED = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
#: The icon of each status that has one (from the style's own).
_STATUS_PIXMAPS: dict[str, QStyle.StandardPixmap] = {
    api.OperationStatus.INPUT_REQUIRED: QStyle.StandardPixmap.SP_MessageBoxQuestion,
    api.OperationStatus.FAILED: QStyle.StandardPixmap.SP_MessageBoxCritical,
    api.OperationStatus.UNKNOWN: QStyle.StandardPixmap.SP_MessageBoxWarning,
    api.OperationStatus.EXPIRED: QStyle.StandardPixmap.SP_MessageBoxWarning,
    api.OperationStatus.COMPLETED: QStyle.StandardPixmap.SP_DialogApplyButton,
    api.OperationStatus.CANCELLED: QStyle.StandardPixmap.SP_DialogCancelButton,
}

TOOL, SERVER, PROGRESS, MESSAGE, STATUS, ELAPSED, SURVIVES = range(7)
#: The message of a call whose server needs the person to sign in first.
WAITING_FOR_SIGN_IN = "waiting for sign-in"
HEADERS = ("Tool", "Server", "Progress", "Latest message", "Status", "Elapsed", "If hostapp stops")

#: Filter name -> (label, statuses it shows; None = all).
FILTERS: dict[str, tuple[str, frozenset[str] | None]] = {
    "all": ("All", None),
    "in_flight": ("In flight", api.IN_FLIGHT),
    "needs_input": ("Needs input", frozenset({api.OperationStatus.INPUT_REQUIRED})),
    "finished": ("Finished", frozenset({api.OperationStatus.COMPLETED, api.OperationStatus.CANCELLED})),
    "failed": ("Failed", frozenset({api.OperationStatus.FAILED, api.OperationStatus.EXPIRED,
                                    api.OperationStatus.UNKNOWN})),
}


class OperationSource(Protocol):
    """Where the model reads operations: the engine's facade (``EngineApi`` has these)."""

    def operations(self, statuses: set[str] | None = None, limit: int = 200,
                   offset: int = 0, before: tuple[float, str] | None = None,
                   after: tuple[float, str] | None = None, top_level: bool = False,
                   view_of: str | None = None) -> Awaitable[list[OperationView]]: ...

    def count_operations(self, statuses: set[str] | None = None, top_level: bool = False,
                         view_of: str | None = None) -> Awaitable[int]: ...


def status_text(op: OperationView) -> str:
    """The status in words (whether it would survive a stop is its own column)."""
    return capitalized(status_word(op.status))


def shown_fraction(op: OperationView) -> float | None:
    """The share of the bar to fill: a completed call is whole (its server may not have
    reported the last step); a failed or cancelled one shows how far it got, if known."""
    if op.status == api.OperationStatus.COMPLETED:
        return 1.0
    return op.fraction


#: Seconds without any news from the server after which a working call says so.
QUIET_AFTER = 60.0


def quiet_for(op: OperationView, now: float | None = None, usual_gap: float | None = None) -> float | None:
    """How long a running call has been silent, once that is :data:`QUIET_AFTER` or more
    and, for a call whose progress comes every ``usual_gap`` seconds, well past the next
    news it was due (else None)."""
    if op.status != api.OperationStatus.RUNNING or not op.updated_at:
        return None
    quiet = (now if now is not None else time.time()) - op.updated_at
    due = max(QUIET_AFTER, STALL_FACTOR * usual_gap) if usual_gap is not None else QUIET_AFTER
    return quiet if quiet >= due else None


def elapsed_of(op: OperationView, now: float | None = None) -> float:
    end = op.ended_at if op.ended_at is not None else (now if now is not None else time.time())
    return max(0.0, end - op.created_at) if op.created_at else 0.0


class _Keys:
    """Keys that order rows: each batch taken below every key given so far, or above."""

    __slots__ = ("_high", "_low")

    def __init__(self) -> None:
        self._low = 0
        self._high = 0

    def below(self, n: int) -> range:
        self._low -= n
        return range(self._low, self._low + n)

    def above(self, n: int) -> range:
        self._high += n
        return range(self._high - n + 1, self._high + 1)


class _Section:
    """One section of the rows (in flight, or finished) in order, with a key per row that
    grows down the section: an operation's place is found by bisecting the keys, and rows
    put at either end, or taken out anywhere, leave the other rows' keys as they are. (A
    map of rows had to be made again after each such change: quadratic when thousands of
    calls start or end together.)"""

    __slots__ = ("_key_of", "_keys", "_source", "ops")

    def __init__(self, source: _Keys, ops: Iterable[OperationView] = ()) -> None:
        self._source = source
        self.ops: list[OperationView] = []
        self._keys: list[int] = []
        self._key_of: dict[str, int] = {}
        self.put_last(list(ops))

    def __len__(self) -> int:
        return len(self.ops)

    def __contains__(self, op_id: str) -> bool:
        return op_id in self._key_of

    def position(self, op_id: str) -> int | None:
        key = self._key_of.get(op_id)
        return None if key is None else bisect.bisect_left(self._keys, key)

    def put_first(self, ops: list[OperationView]) -> None:
        keys = self._source.below(len(ops))
        self.ops[:0] = ops
        self._keys[:0] = keys
        self._key_of.update(zip((op.id for op in ops), keys, strict=True))

    def put_last(self, ops: list[OperationView]) -> None:
        keys = self._source.above(len(ops))
        self.ops.extend(ops)
        self._keys.extend(keys)
        self._key_of.update(zip((op.id for op in ops), keys, strict=True))

    def replace(self, position: int, op: OperationView) -> None:
        """The operation at ``position`` changed (same id, same place)."""
        self.ops[position] = op

    def take(self, position: int) -> OperationView:
        op = self.ops.pop(position)
        del self._keys[position]
        del self._key_of[op.id]
        return op

    def take_first(self, n: int) -> None:
        self._forget(self.ops[:n])
        del self.ops[:n], self._keys[:n]

    def take_last(self, n: int) -> None:
        if n > 0:  # (a slice from -0 is the whole list)
            self._forget(self.ops[-n:])
            del self.ops[-n:], self._keys[-n:]

    def _forget(self, ops: list[OperationView]) -> None:
        key_of = self._key_of
        for op in ops:
            del key_of[op.id]


async def _no_rows() -> list[OperationView]:
    return []


class OperationTableModel(FlatTableModel):
    """Rows: in-flight operations (newest first), then finished ones (journal order, paged).

    Signals:
        loadingChanged(bool): a journal read started or ended.
        totalChanged(int): how many operations the current filter matches in the journal.
    """

    loadingChanged = Signal(bool)
    totalChanged = Signal(int)
    #: Time passed: the elapsed times and indeterminate bars of the rows in flight moved.
    #: A view repaints the rows it shows (:meth:`refresh_live_rows`); no row's data changed.
    liveCellsAged = Signal()
    #: The finished rows from first to last are about to be let go (before the rows'
    #: removal is announced: a view's current row among them would be moved by Qt to a
    #: neighbour, and the view would scroll there).
    lettingGo = Signal(int, int)

    headers = HEADERS

    def __init__(self, source: OperationSource, parent=None) -> None:
        super().__init__(parent)
        self._source = source
        self._filter = "all"
        self._keys = _Keys()
        self._live = _Section(self._keys)
        self._history = _Section(self._keys)
        self._history_exhausted = True
        # Finished rows newer than the first one held were let go (read again by key).
        self._history_cut_above = False
        self._by_key = True  # False with an agent too old to read by key: by offset, all kept
        # False with an agent too old to filter by top_level: a view's calls are rows then.
        self._top_level = True
        #: The model's rows on screen now (set by the view's pane): never let go.
        self.rows_on_screen: Callable[[], Iterable[int]] = lambda: ()
        #: Whether a change that leaves a row's status and end as they were (progress, a
        #: message) must be told whatever row it is: True while the view's proxy sorts by
        #: or searches in what such a change moves (set by the pane). When False, only the
        #: rows on screen are told; the others show their latest when painted.
        self.every_change_told: Callable[[], bool] = lambda: True
        self._loading = False
        self._generation = 0  # a reload makes older page reads stale
        # While the journal is read, the changes that arrive (the newest of each operation):
        # applied again over what the read brings, which may be older than they are.
        self._arrived: dict[str, OperationView] | None = None
        self._total = 0
        self._tasks: set[asyncio.Task] = set()
        # Servers that need the person to sign in: their calls in flight wait for it.
        self._awaiting_sign_in: frozenset[str] = frozenset()
        self._paused: str | None = None  # why no agent carries the work now, if none does
        #: Whether the journal was read once: until then an empty table means "not read yet".
        self.loaded = False
        self._icons_of: QStyle | None = None  # the style the icons below were made by
        self._icons: dict[QStyle.StandardPixmap, QIcon] = {}
        self.estimator = ProgressEstimator()
        # Elapsed times and indeterminate bars move without any engine event: the views
        # repaint the rows they show (a dataChanged over every row in flight made the
        # filter proxy run its Python filterAcceptsRow on each, 5 times a second).
        self._tick = QTimer(self)
        self._tick.setInterval(200)
        self._tick.timeout.connect(self._refresh_live_cells)

    # -- reading ------------------------------------------------------------------------

    @property
    def filter_name(self) -> str:
        return self._filter

    def _statuses(self, within: frozenset[str]) -> set[str]:
        wanted = FILTERS[self._filter][1]
        return set(within if wanted is None else within & wanted)

    def matches(self, op: OperationView) -> bool:
        """Whether ``op`` is a row under the current filter (a call an app view made is not)."""
        if op.view_of is not None and self._top_level:
            return False
        wanted = FILTERS[self._filter][1]
        return wanted is None or op.status in wanted

    async def _operations(self, statuses: set[str], **page: Any) -> list[OperationView]:
        """A page of the top-level operations (of every one, from an agent too old to tell)."""
        if self._top_level:
            try:
                return await self._source.operations(statuses, top_level=True, **page)
            except api.EngineError:
                log.info("the agent lists no top-level operations: a view's calls are rows too")
                self._top_level = False
        return await self._source.operations(statuses, **page)

    async def _count(self, statuses: set[str]) -> int:
        if self._top_level:
            return await self._source.count_operations(statuses, top_level=True)
        return await self._source.count_operations(statuses)

    async def reload(self, filter_name: str | None = None) -> None:
        """Read the in-flight operations and the first page of history for a filter."""
        if filter_name is not None:
            if filter_name not in FILTERS:
                raise ValueError(f"unknown filter {filter_name!r}")
            self._filter = filter_name
        self._generation += 1
        generation = self._generation
        self._set_loading(True)
        self._arrived = {}
        try:
            live_statuses = self._statuses(api.IN_FLIGHT)
            done_statuses = self._statuses(api.TERMINAL)
            # Asked together: an agent still resuming what it found at its start serves these
            # reads from its journal, but each answer waits for a turn of its busy event loop;
            # one after the other, the window waited for three.
            live, history, total = await asyncio.gather(
                self._operations(live_statuses, limit=10_000) if live_statuses else _no_rows(),
                self._operations(done_statuses, limit=PAGE_SIZE) if done_statuses else _no_rows(),
                self._count(self._statuses(api.IN_FLIGHT | api.TERMINAL)))
        except BaseException:
            if generation == self._generation:
                self._arrived = None
            raise
        finally:
            if generation == self._generation:
                self._set_loading(False)
        if generation != self._generation:
            return
        self.beginResetModel()
        self._live = _Section(self._keys, sorted(
            (op for op in live if op.status in api.IN_FLIGHT and self.matches(op)), key=lambda o: -o.created_at))
        self._history = _Section(self._keys, (op for op in history if op.id not in self._live and self.matches(op)))
        self._history_exhausted = len(history) < PAGE_SIZE or not done_statuses
        self._history_cut_above = False
        self.loaded = True
        self.endResetModel()
        self._set_total(total)
        arrived, self._arrived = self._arrived or {}, None
        for op in arrived.values():
            self._set_total(self._total + self._apply_one(op))
        self._update_tick()

    def canFetchMore(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> bool:
        return not parent.isValid() and not self._history_exhausted and not self._loading

    def fetchMore(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> None:
        if not self.canFetchMore(parent):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a bare model check): nothing can be read now
        self._set_loading(True)
        task = loop.create_task(self.fetch_next_page())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        hurry = getattr(loop, "hurry", None)  # the window's loop: the read goes before the repaint
        if hurry is not None:
            hurry()

    @property
    def history_cut_above(self) -> bool:
        """Whether newer finished rows than the first one held were let go."""
        return self._history_cut_above

    async def _read_page(self, older: bool) -> list[OperationView] | None:
        """The next page below (``older``) or above the finished rows held; None when the
        read failed or was overtaken by a reload."""
        generation = self._generation
        statuses = self._statuses(api.TERMINAL)
        self._set_loading(True)
        try:
            if not self._history:
                page = await self._operations(statuses, limit=PAGE_SIZE) if older else []
            elif self._by_key:
                edge = self._history.ops[-1] if older else self._history.ops[0]
                key = (edge.created_at, edge.id)
                try:
                    page = await self._operations(statuses, limit=PAGE_SIZE, before=key if older else None,
                                                  after=None if older else key)
                except api.EngineError:
                    if not older or self._history_cut_above:
                        raise
                    # An agent older than reading by key: by offset, every row kept.
                    log.info("the agent reads no page by key: paging the history by offset")
                    self._by_key = False
                    page = await self._operations(statuses, limit=PAGE_SIZE, offset=len(self._history))
            else:
                page = await self._operations(statuses, limit=PAGE_SIZE, offset=len(self._history))
        except Exception:
            log.exception("reading a page of operations failed")
            if generation == self._generation:
                if older:
                    self._history_exhausted = True
                else:
                    self._history_cut_above = False
            return None
        finally:
            if generation == self._generation:
                self._set_loading(False)
        return page if generation == self._generation else None

    async def fetch_next_page(self) -> int:
        """Append the next page of finished operations; returns how many rows were added.
        Past :data:`HISTORY_KEPT`, the rows at the top of the history are let go."""
        page = await self._read_page(older=True)
        if page is None:
            return 0
        if len(page) < PAGE_SIZE:
            self._history_exhausted = True
        fresh = self._unknown(page)
        if fresh:
            first = self.rowCount()
            self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
            self._history.put_last(fresh)
            self.endInsertRows()
            if self._by_key:
                self._let_go(above=True)
        return len(fresh)

    async def fetch_newer_page(self) -> int:
        """Read again the page of finished operations just above those held (let go as
        the view went down); past :data:`HISTORY_KEPT`, the rows at the bottom are let go.
        Returns how many rows were added."""
        if not self._history_cut_above or self._loading:
            return 0
        page = await self._read_page(older=False)
        if page is None:
            return 0
        if len(page) < PAGE_SIZE:
            self._history_cut_above = False
        fresh = self._unknown(page)
        if fresh:
            first = len(self._live)
            self.beginInsertRows(QModelIndex(), first, first + len(fresh) - 1)
            self._history.put_first(fresh)
            self.endInsertRows()
            self._let_go(above=False)
        return len(fresh)

    def _let_go(self, *, above: bool) -> None:
        """Hold at most :data:`HISTORY_KEPT` finished rows: let go of the excess at the
        top (``above``) or at the bottom, unless one of them is on screen."""
        excess = len(self._history) - HISTORY_KEPT
        if excess <= 0:
            return
        live = len(self._live)
        first = live if above else live + len(self._history) - excess
        last = first + excess - 1
        if any(first <= row <= last for row in self.rows_on_screen()):
            return
        self.lettingGo.emit(first, last)
        self.beginRemoveRows(QModelIndex(), first, last)
        if above:
            self._history.take_first(excess)
            self._history_cut_above = True
        else:
            self._history.take_last(excess)
            self._history_exhausted = False
        self.endRemoveRows()

    def _set_loading(self, loading: bool) -> None:
        if loading != self._loading:
            self._loading = loading
            self.loadingChanged.emit(loading)

    def _set_total(self, total: int) -> None:
        if total != self._total:
            self._total = total
            self.totalChanged.emit(total)

    @property
    def total(self) -> int:
        return self._total

    # -- live changes -------------------------------------------------------------------

    def apply_changes(self, ops: list[OperationView]) -> None:
        """Fold a batch of changed operations into the rows: the calls new to the window
        at once at the top, a signal per other row touched."""
        added = 0
        arrived = self._arrived
        # At 10,000 calls stepping once a second, a row told per change cost the window a
        # third of its time (the proxy runs its Python filter on each); most are off screen.
        quiet: set[str] | None = None if self.every_change_told() else set()
        # Thousands of calls starting (or told by an agent that restarts) were inserted a
        # row at a time, each through the proxy and the view.
        starting: dict[str, OperationView] = {}
        if len(ops) > 1:
            ops = list({op.id: op for op in ops}.values())  # (the latest of each, once)
        for op in ops:
            self.estimator.observe(op)
            added += self._apply_one(op, quiet, starting)
            if arrived is not None:
                arrived[op.id] = op
        if starting:
            self.beginInsertRows(QModelIndex(), 0, len(starting) - 1)
            self._live.put_first(list(starting.values())[::-1])  # as if each came first in turn
            self.endInsertRows()
        if added:
            self._set_total(self._total + added)
        if quiet:
            self._tell_on_screen(quiet)
        self._update_tick()

    def _tell_on_screen(self, changed: set[str]) -> None:
        """Of the operations ``changed`` quietly, tell those whose rows are on screen (one
        dataChanged per run of adjacent rows)."""
        self._tell_runs(sorted(row for row in set(self.rows_on_screen())
                               if (op := self.operation(row)) is not None and op.id in changed), 0, SURVIVES)

    def _apply_one(self, op: OperationView, quiet: set[str] | None = None,
                   starting: dict[str, OperationView] | None = None) -> int:
        """Fold one change in; returns by how much the rows matching the filter grew. With
        ``quiet``, a change that leaves the row's status and end as they were is added
        there instead of told; with ``starting``, a new row in flight is put there for the
        caller to insert."""
        row = self.row_of(op.id)
        if row is None:
            if not self.matches(op):
                return 0
            if op.in_flight and starting is not None:
                starting[op.id] = op
            elif op.in_flight:
                self._insert_first(op, live=True)
            elif not self._history_cut_above:
                self._insert_first(op, live=False)
            # (else it belongs among the rows let go above: read with them when scrolled to)
            return 1
        was_live = row < len(self._live)
        if not self.matches(op):
            self._remove(row)
            return -1
        if was_live and not op.in_flight and self._history_cut_above:
            self._remove(row)  # its place is among the finished rows let go above
            return 0
        if was_live == op.in_flight:
            section, position = self._section(row), self._list_pos(row)
            before = section.ops[position]
            section.replace(position, op)
            if quiet is not None and before.status == op.status and before.ended_at == op.ended_at:
                quiet.add(op.id)
            else:
                self.emit_row_changed(row)
            return 0
        # It crossed between in flight and finished: move it to the head of its section, as
        # a move (not a removal and an insertion), so that the selection and every other
        # persistent index stay on this operation.
        self._move(row, op)
        return 0

    def _move(self, row: int, op: OperationView) -> None:
        # The destination in the numbering before the move: the head of the live rows, or
        # the head of the history (just after the last live row).
        dest = 0 if op.in_flight else len(self._live)
        moving = dest not in (row, row + 1)
        if moving:
            self.beginMoveRows(QModelIndex(), row, row, QModelIndex(), dest)
        self._section(row).take(self._list_pos(row))
        (self._live if op.in_flight else self._history).put_first([op])
        if moving:
            self.endMoveRows()
        self.emit_row_changed(self.row_of(op.id) or 0)

    def _section(self, row: int) -> _Section:
        return self._live if row < len(self._live) else self._history

    def _list_pos(self, row: int) -> int:
        return row if row < len(self._live) else row - len(self._live)

    def _insert_first(self, op: OperationView, *, live: bool) -> None:
        """A new row at the head of its section."""
        row = 0 if live else len(self._live)
        self.beginInsertRows(QModelIndex(), row, row)
        (self._live if live else self._history).put_first([op])
        self.endInsertRows()

    def _remove(self, row: int) -> None:
        self.beginRemoveRows(QModelIndex(), row, row)
        self._section(row).take(self._list_pos(row))
        self.endRemoveRows()

    def _update_tick(self) -> None:
        if self._live and not self._tick.isActive():
            self._tick.start()
        elif not self._live and self._tick.isActive():
            self._tick.stop()

    def _refresh_live_cells(self) -> None:
        if self._live:
            self.liveCellsAged.emit()

    def refresh_live_rows(self, rows: Iterable[int]) -> None:
        """The cells that move with time (progress to the last column) of those ``rows``
        that are in flight may show something new: one dataChanged per run of adjacent rows."""
        self._tell_runs(sorted({row for row in rows if 0 <= row < len(self._live)}), PROGRESS, SURVIVES)

    def _tell_runs(self, rows: list[int], first_column: int, last_column: int) -> None:
        """dataChanged over those columns of ``rows`` (sorted), once per run of adjacent rows."""
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i] != rows[i - 1] + 1:
                if rows:
                    self.dataChanged.emit(self.index(rows[start], first_column), self.index(rows[i - 1], last_column))
                start = i

    # -- lookup -------------------------------------------------------------------------

    def row_of(self, op_id: str) -> int | None:
        row = self._live.position(op_id)
        if row is not None:
            return row
        row = self._history.position(op_id)
        return None if row is None else len(self._live) + row

    def _unknown(self, ops: list[OperationView]) -> list[OperationView]:
        """Those of ``ops`` that are not rows (a page read may bring rows held already)."""
        return [op for op in ops if op.id not in self._live and op.id not in self._history]

    def operation(self, row: int) -> OperationView | None:
        live = len(self._live)
        if 0 <= row < live:
            return self._live.ops[row]
        if 0 <= row - live < len(self._history):
            return self._history.ops[row - live]
        return None

    @property
    def live_count(self) -> int:
        return len(self._live)

    # -- the table ------------------------------------------------------------------------

    def row_count(self) -> int:
        return self.rowCount()

    # rowCount and data are asked hundreds of times a repaint (the filter proxy asks the
    # rows again for each cell it maps): each Python call saved counts. A repaint of the
    # table as the window shows it at 1200 x 800 took 4.7-4.9 ms, most of it here
    # (3.2-3.5 ms since; `python -m bench.window_probe repaint`).
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = TOP_LEVEL) -> int:
        return 0 if parent.isValid() else len(self._live.ops) + len(self._history.ops)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role not in _ROLES_ANSWERED or not index.isValid():
            return None  # (the roles a delegate asks for that no cell answers: most calls)
        op = self.operation(index.row())
        if op is None:
            return None
        col = index.column()
        if role == OperationRole:
            return op
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(op, col)
        if role == EstimateRole:
            return self.estimate(op)
        if role == SortRole:
            return self._sort_key(op, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            if col == SURVIVES and op.in_flight:
                return plain_tooltip(at_stop_why(op))
            if col == MESSAGE and op.in_flight and op.stalled:
                return plain_tooltip(f"Stalled: {op.stalled}")
            if col == MESSAGE and op.message:
                return plain_tooltip(op.message)
            if col == STATUS and self._paused is not None and op.in_flight:
                return plain_tooltip(f"Paused: {self._paused}. It goes on when the agent runs again "
                                     "if it can be resumed.")
            if col == STATUS and op.error:
                return plain_tooltip(str(op.error.get("message") or ""))
            return None
        if role == Qt.ItemDataRole.AccessibleTextRole:
            return self.accessible_text(col, self._display(op, col))
        if role == Qt.ItemDataRole.DecorationRole and col == STATUS:
            return self._status_icon(op)
        if role == Qt.ItemDataRole.FontRole and col == STATUS and op.needs_input:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.TextAlignmentRole and col == ELAPSED:
            return _RIGHT_ALIGNED
        return None

    def estimate(self, op: OperationView, now: float | None = None) -> Estimate | None:
        """Rate and time left at ``now`` (the wall clock when None); none while the work is
        paused (no agent carries it)."""
        return None if self._paused is not None and op.in_flight else self.estimator.estimate(op, now)

    def shown_status(self, op: OperationView) -> str:
        """The status in words as the window shows it: "Paused" while no agent carries
        the work (why: in the status cell's tooltip); "Stalled" while the engine finds it
        stalled (why: in the message)."""
        if self._paused is None and op.in_flight and op.stalled:
            return "Stalled"
        return capitalized(status_word(op.status, paused=self._paused is not None))

    def set_paused(self, why: str | None) -> None:
        """No agent carries the work (``why``, a few words: "agent stopped"), or one does
        again (None). Meanwhile the operations in flight say they are paused, with no
        time left, rather than running."""
        if why != self._paused:
            if why is None:
                self.estimator.resumed(time.time())  # the time paused is no measure of the rate
            self._paused = why
            self.emit_all_changed()

    def set_awaiting_sign_in(self, servers: Iterable[str]) -> None:
        """Name the servers that need sign-in; their operations in flight say they wait for it."""
        awaiting = frozenset(servers)
        if awaiting != self._awaiting_sign_in:
            self._awaiting_sign_in = awaiting
            if self.rowCount():
                self.dataChanged.emit(self.index(0, MESSAGE), self.index(self.rowCount() - 1, MESSAGE))

    def _display(self, op: OperationView, col: int) -> str:
        if col == TOOL:
            return operation_name(op)
        if col == SERVER:
            return op.server
        if col == PROGRESS:
            fraction = shown_fraction(op)
            if fraction is not None:
                return f"{fraction * 100:.0f}%"
            return "" if op.progress is None else f"{op.progress:g}"
        if col == MESSAGE:
            if op.in_flight and op.server in self._awaiting_sign_in:
                return WAITING_FOR_SIGN_IN
            if op.in_flight and op.stalled:
                return f"Stalled: {op.stalled}"
            text = (op.message or "").replace("\n", " ")
            quiet = quiet_for(op, usual_gap=self.estimator.usual_gap(op))
            if quiet is not None:
                text += (" · " if text else "") + f"no news for {rough(quiet)}"
            return text
        if col == STATUS:
            return self.shown_status(op)
        if col == ELAPSED:
            return clock(elapsed_of(op))
        if col == SURVIVES:
            return at_stop_words(op)
        return ""

    def _sort_key(self, op: OperationView, col: int) -> Any:
        if col == PROGRESS:
            fraction = shown_fraction(op)
            return -1.0 if fraction is None else fraction
        if col == ELAPSED:
            return elapsed_of(op)
        return self._display(op, col).lower()

    def _status_icon(self, op: OperationView) -> QIcon | None:
        """The status's icon from the style (made once per style: ``standardIcon`` took 64 us,
        for every finished row painted)."""
        pixmap = _STATUS_PIXMAPS.get(op.status)
        style = QApplication.style()
        if pixmap is None or style is None:
            return None
        if self._icons_of is not style:
            self._icons_of, self._icons = style, {}
        icon = self._icons.get(pixmap)
        if icon is None:
            icon = self._icons[pixmap] = style.standardIcon(pixmap)
        return icon
