"""Noticing an operation that stalled: no sign of life for longer than its server's own
hints allow, or input required with no question asked.

A call may otherwise wait for ever: a task that says ``input_required`` but whose question
never comes, or a server that stops answering the polls it asked for. Per operation in
flight, a :class:`_Watch` holds a deadline derived from the mechanism's hints
(:meth:`~hostapp.mechanisms.base.Mechanism.life_expected_within`: so many poll intervals,
as the back-off stretches them), re-armed by every sign of life: an answer to any of its
requests, progress, a stream event, a question shown, a change of status. When the
deadline passes the host first *checks*, by the mechanism's own means
(:meth:`~hostapp.mechanisms.base.Mechanism.check_alive`: a poll now, the result asked for
again), never by sending the call again; only when as long again passes with nothing
new is the operation marked stalled: ``OperationView.stalled`` says why, the timeline
gets a ``stalled`` event, and a command following it (``hostapp call``, ``follow``,
``resume --wait``) returns with its own exit status instead of waiting for ever. The
operation goes on as before, and its next sign of life clears the mark.

Input nobody was asked for: the operation's status is ``input_required`` while no
question of it waits for the person. That is measured from the status change (or the
last moment a question was open), with the same allowance, or ``LIVENESS_INTERVALS``
default polls when the mechanism gave no hint; answers to polls do not re-arm it (a
server that keeps saying "input required" without asking is the case in point).

Silence is not counted while the host itself is why nothing is heard: the server's
connection is down (the supervisor reconnects; the window shows the server offline), or
the operation's polls wait their turn (the server's poll budget, which stretches the
polls of thousands of operations well beyond their hinted interval, or the first
contacts after a start).

Cost on the hot path: a sign of life sets a flag on its watch; the timer, one per
watched operation, looks at it when it fires. An operation the host holds is parked with
its server's others under one timer (:class:`_Parked`) until the host lets them go: at ten
thousand operations after a restart, thousands wait for their first contact or for the
poll budget at once, and a timer each, re-armed at every allowance until their turn came,
was 190,000 timers a minute in the loop's heap.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from hostapp.engine import api
from hostapp.engine.api import EVENT_STALL_ENDED, EVENT_STALLED
from hostapp.mechanisms.actions import Action
from hostapp.mechanisms.base import LIVENESS_INTERVALS, Mechanism
from hostapp.protocol.timing import Timing
from hostapp.store.status import OperationStatus

if TYPE_CHECKING:
    from hostapp.engine.budget import PollBudget
    from hostapp.engine.questions import QuestionDesk
    from hostapp.engine.supervisor import ServerConnection
    from hostapp.store.journal import OperationJournal


class ChangesView(Protocol):
    """How a watch changes what the person is shown (the runner's progress intake)."""

    def change(self, **fields: Any) -> api.OperationView: ...


class OperationRunner(Protocol):
    """What a watch needs of an operation's runner (``hostapp.engine.runner``)."""

    mech: Mechanism

    @property
    def view(self) -> api.OperationView: ...

    @property
    def progress(self) -> ChangesView: ...

    @property
    def id(self) -> str: ...

    @property
    def server(self) -> str: ...

    @property
    def ending(self) -> bool: ...

    awaiting_first_contact: bool

    def feed_soon(self, produce: Callable[[], list[Action]]) -> None: ...


class EngineContext(Protocol):
    """What the watches need of the engine (``hostapp.engine.context``)."""

    clock: Callable[[], float]
    timing: Timing
    stopping: bool
    questions: QuestionDesk
    listener: api.EngineListener

    @property
    def journal(self) -> OperationJournal: ...

    def connection(self, server: str) -> ServerConnection: ...

    def poll_budget(self, server: str) -> PollBudget: ...

    def holding_repeat_requests(self, server: str) -> bool: ...

    def operation_event(self, op_id: str, kind: str, data: dict[str, Any]) -> None: ...

log = logging.getLogger(__name__)



SILENT, UNASKED = "silent", "unasked"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


class _Watch:
    __slots__ = ("checked", "fresh", "input_began", "input_since", "last_life", "parked", "runner", "stalled",
                 "timer")

    def __init__(self, runner: OperationRunner, now: float) -> None:
        self.runner = runner
        self.last_life = now
        self.fresh = False            # a sign of life came since the timer last looked
        self.input_since: float | None = None  # input_required with no question open, since
        self.input_began: float | None = None  # ... since first (what a person is told)
        self.checked: set[str] = set()  # the conditions checked on since they began
        self.stalled: str | None = None  # the condition it is stalled by
        self.timer: asyncio.TimerHandle | None = None
        self.parked = False  # held by the host, under its server's timer (no timer of its own)


class _Parked:
    """The watches of one server's operations that the host holds (its connection is down,
    their polls wait their turn, their first contact has not come), under one timer: it
    lets go of each when the host does, and re-arms its own timer then."""

    __slots__ = ("period", "timer", "watches")

    def __init__(self, period: float) -> None:
        self.watches: dict[str, _Watch] = {}
        self.period = period
        self.timer: asyncio.TimerHandle | None = None


class LivenessWatches:
    """The watches of one engine's operations in flight."""

    def __init__(self, context: EngineContext) -> None:
        self._context = context
        self._watches: dict[str, _Watch] = {}
        self._parked: dict[str, _Parked] = {}  # by server

    # -- what the context tells ----------------------------------------------------------

    def alive(self, runner: OperationRunner) -> None:
        """A sign of life (the hot path: progress, stream events, answers): a watched
        operation's watch is told; nothing else is looked at (its view is not made)."""
        watch = self._watches.get(runner.id)
        if watch is None:
            return
        watch.fresh = True
        if watch.stalled == SILENT:
            self._unstall(watch)
        elif watch.timer is None and watch.stalled is None and not watch.parked:
            self._arm(watch)

    def sent(self, runner: OperationRunner) -> None:
        """It sent a request (the host's own doing, no sign of life): watched from now on,
        if its server gave a hint by now."""
        if runner.id not in self._watches:
            self._start(runner)

    def changed(self, runner: OperationRunner) -> None:
        """Its status may have changed: a sign of life, and the start or end of a wait for
        input."""
        if runner.ending:
            return
        watch = self._watches.get(runner.id)
        if watch is None:
            self._start(runner)
            return
        self.alive(runner)
        if runner.view.status == OperationStatus.INPUT_REQUIRED:
            if watch.input_since is None:
                watch.input_since = watch.input_began = self._context.clock()
                self._arm(watch)
        else:
            self._input_over(watch)

    def asked(self, runner: OperationRunner) -> None:
        """A question of the operation is shown to the person."""
        watch = self._watches.get(runner.id)
        if watch is not None:
            watch.fresh = True
            if watch.input_since is not None:
                watch.input_since = watch.input_began = self._context.clock()
            self._input_over(watch, still_waiting=True)

    def forget(self, runner: OperationRunner) -> None:
        watch = self._watches.pop(runner.id, None)
        if watch is None:
            return
        if watch.timer is not None:
            watch.timer.cancel()
        if watch.parked:
            self._unpark(watch)

    def close(self) -> None:
        for watch in self._watches.values():
            if watch.timer is not None:
                watch.timer.cancel()
        for parked in self._parked.values():
            if parked.timer is not None:
                parked.timer.cancel()
        self._watches.clear()
        self._parked.clear()

    # -- the watch ---------------------------------------------------------------------

    def _start(self, runner: OperationRunner) -> None:
        marked = runner.view.stalled  # found stalled by an earlier agent (the journal says so)
        if runner.ending or (marked is None and runner.mech.life_expected_within() is None
                             and runner.view.status != OperationStatus.INPUT_REQUIRED):
            return  # no hint to hold it to (yet): a plain request may run silent
        watch = self._watches[runner.id] = _Watch(runner, self._context.clock())
        if runner.view.status == OperationStatus.INPUT_REQUIRED:
            watch.input_since = watch.input_began = watch.last_life
        if marked is not None:
            # Stalled it stays, until its next sign of life (or question) clears the mark.
            watch.stalled = UNASKED if runner.view.status == OperationStatus.INPUT_REQUIRED else SILENT
            return
        self._arm(watch)

    def _input_over(self, watch: _Watch, *, still_waiting: bool = False) -> None:
        if not still_waiting:
            watch.input_since = watch.input_began = None
        watch.checked.discard(UNASKED)
        if watch.stalled == UNASKED:
            self._unstall(watch)

    def _allowance(self, watch: _Watch) -> float | None:
        hinted = watch.runner.mech.life_expected_within()
        if hinted is None and watch.input_since is not None:
            return LIVENESS_INTERVALS * self._context.timing.poll
        return hinted

    def _arm(self, watch: _Watch) -> None:
        if watch.timer is not None:
            watch.timer.cancel()
            watch.timer = None
        if watch.parked:
            return  # its server's timer arms it when the host lets go of it
        allowance = self._allowance(watch)
        if allowance is not None and watch.stalled is None:
            watch.timer = asyncio.get_running_loop().call_later(allowance, self._look, watch)

    def _look(self, watch: _Watch) -> None:
        """The timer: wait on after a sign of life; else check on the operation, or (checked
        already) mark it stalled."""
        watch.timer = None
        runner, ctx = watch.runner, self._context
        if runner.ending or ctx.stopping or self._watches.get(runner.id) is not watch:
            return
        allowance = self._allowance(watch)
        if allowance is None:
            return
        if watch.stalled is not None:
            return  # until a sign of life (or the end of the wait for input) clears it
        if self._host_holds_it(runner):
            self._park(watch, allowance)  # silence is not counted until the host lets go
            return
        now = ctx.clock()
        if watch.fresh:
            self._silent_since(watch, now)
        if watch.input_since is not None and ctx.questions.asks(runner.id):
            watch.input_since = watch.input_began = now  # a question is open: the person is asked
        silent_for = now - watch.last_life
        unasked_for = now - watch.input_since if watch.input_since is not None else 0.0
        if silent_for < allowance and unasked_for < allowance:
            due = allowance - max(silent_for, unasked_for)
            watch.timer = asyncio.get_running_loop().call_later(max(due, 0.01), self._look, watch)
            return
        condition = UNASKED if unasked_for >= allowance else SILENT
        unasked_since = watch.input_began if watch.input_began is not None else now
        why = self._why(condition, silent_for, now - unasked_since, allowance)
        if condition not in watch.checked:
            watch.checked.add(condition)
            if condition == UNASKED:
                watch.input_since = now  # as long again after the check
            log.info("operation %s: %s; checking on it", runner.id, why)
            runner.feed_soon(lambda: runner.mech.check_alive(now=ctx.clock()))
            self._arm(watch)
            return
        self._stall(watch, condition, f"{why}; hostapp checked on it and keeps waiting, without sending the "
                                      f"call again")

    @staticmethod
    def _silent_since(watch: _Watch, now: float) -> None:
        """Its silence counts from ``now`` (a sign of life came, or the host let go of it),
        and a check on its silence, if one was made, is over."""
        watch.fresh, watch.last_life = False, now
        watch.checked.discard(SILENT)

    def _host_holds_it(self, runner: OperationRunner) -> bool:
        """Whether the host itself is why nothing is heard: the server's connection is
        down (the supervisor reconnects, the window shows the server offline), or the
        operation's polls wait their turn (the server's poll budget; after a start, its
        own first contact, or the other restored operations' first contacts, which every
        repeat poll of that server waits for): silence then says nothing about the server."""
        return self._host_holds_server(runner.server) or runner.awaiting_first_contact

    def _host_holds_server(self, server: str) -> bool:
        """The host holds every operation of ``server`` (see :meth:`_host_holds_it`)."""
        ctx = self._context
        return (not ctx.connection(server).is_ready or ctx.poll_budget(server).waiting > 0
                or ctx.holding_repeat_requests(server))

    def _park(self, watch: _Watch, period: float) -> None:
        server = watch.runner.server
        parked = self._parked.get(server)
        if parked is None:
            parked = self._parked[server] = _Parked(period)
        parked.period = min(parked.period, period)
        parked.watches[watch.runner.id] = watch
        watch.parked = True
        if parked.timer is None:
            parked.timer = asyncio.get_running_loop().call_later(parked.period, self._look_parked, server)

    def _unpark(self, watch: _Watch) -> None:
        watch.parked = False
        parked = self._parked.get(watch.runner.server)
        if parked is None:
            return
        parked.watches.pop(watch.runner.id, None)
        if not parked.watches:
            if parked.timer is not None:
                parked.timer.cancel()
            del self._parked[watch.runner.server]

    def _look_parked(self, server: str) -> None:
        """The server's timer: while the host holds all its operations, wait on (one look,
        not one per operation); else let go of each the host no longer holds. Its silence
        counts from now, as if a sign of life had just come."""
        parked = self._parked.get(server)
        if parked is None:
            return
        parked.timer = None
        if self._context.stopping:
            return
        if not self._host_holds_server(server):
            now = self._context.clock()
            for op_id, watch in list(parked.watches.items()):
                if self._watches.get(op_id) is not watch or watch.runner.ending:
                    del parked.watches[op_id]
                elif not watch.runner.awaiting_first_contact:
                    del parked.watches[op_id]
                    watch.parked = False
                    self._silent_since(watch, now)
                    self._arm(watch)
        if not parked.watches:
            del self._parked[server]
            return
        parked.timer = asyncio.get_running_loop().call_later(parked.period, self._look_parked, server)

    @staticmethod
    def _why(condition: str, silent_for: float, unasked_for: float, allowance: float) -> str:
        if condition == UNASKED:
            return (f"the server has said for {_seconds(unasked_for)} that it needs input, but asked no "
                    f"question hostapp could show")
        return (f"no sign of life from the server for {_seconds(silent_for)}, longer than its own hints allow "
                f"({_seconds(allowance)})")

    def _stall(self, watch: _Watch, condition: str, message: str) -> None:
        runner, ctx = watch.runner, self._context
        log.warning("operation %s stalled: %s", runner.id, message)
        watch.stalled = condition
        runner.progress.change(stalled=message)
        self._journal_mark(runner, message)
        data = {"message": message}
        ctx.journal.append_event(runner.id, EVENT_STALLED, data)
        ctx.operation_event(runner.id, EVENT_STALLED, data)
        ctx.listener.operation_changed(runner.view)

    def _journal_mark(self, runner: OperationRunner, message: str | None) -> None:
        """Keep the mark in the journal, for an agent started after this one."""
        written = self._context.journal.update_operation(runner.id, stalled=message)

        def failed(done: asyncio.Future[Any]) -> None:
            if not done.cancelled() and done.exception() is not None:
                log.info("operation %s: could not journal its stalled mark: %s", runner.id, done.exception())

        written.add_done_callback(failed)

    def _unstall(self, watch: _Watch) -> None:
        runner, ctx = watch.runner, self._context
        watch.stalled = None
        watch.fresh, watch.last_life = False, ctx.clock()
        watch.checked.clear()
        if runner.ending:
            return
        runner.progress.change(stalled=None)
        self._journal_mark(runner, None)
        data = {"message": "the server showed a sign of life again"}
        ctx.journal.append_event(runner.id, EVENT_STALL_ENDED, data)
        ctx.operation_event(runner.id, EVENT_STALL_ENDED, data)
        ctx.listener.operation_changed(runner.view)
        self._arm(watch)
