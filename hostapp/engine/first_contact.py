"""After a restart, every restored operation's first word with its server comes first.

A thousand resumed operations polling every second ask more than the host can send at
once: without an order, the first polls of the last ones queue behind the second and
third polls of the first ones, and re-attaching them all takes several times longer.
:class:`FirstContactGate` holds each server's repeat polls until every operation restored
at start-up has heard from it (or a while has passed), and hands out each server's
:class:`~hostapp.engine.budget.PollBudget`, which paces the repeat polls after that.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from hostapp.engine.budget import PollBudget

log = logging.getLogger(__name__)

#: Longest a repeat request waits for restored operations' first contact (seconds).
FIRST_CONTACT_PRIORITY_SECONDS = 10.0


class AwaitsContact(Protocol):
    """An operation as the gate sees it: restored, and perhaps not heard from yet."""

    awaiting_first_contact: bool

    @property
    def id(self) -> str: ...

    @property
    def server(self) -> str: ...


class FirstContactGate:
    """Per server: the restored operations not yet heard from, an event set once there are
    none, and the poll budget.

    States per server: open (nobody awaited: repeat requests go at once) or holding (some
    restored operations are awaited; it opens when the last is heard from, or after
    FIRST_CONTACT_PRIORITY_SECONDS).
    """

    def __init__(self) -> None:
        self._awaiting: dict[str, set[str]] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._budgets: dict[str, PollBudget] = {}

    def expect(self, operation: AwaitsContact) -> None:
        """A restored operation whose first word from its server the others wait for."""
        operation.awaiting_first_contact = True
        self._awaiting.setdefault(operation.server, set()).add(operation.id)
        if operation.server not in self._done:
            self._done[operation.server] = asyncio.Event()

    def heard_from(self, operation: AwaitsContact) -> None:
        """The server said something about this operation (or it ended): it is re-attached."""
        if not operation.awaiting_first_contact:
            return
        operation.awaiting_first_contact = False
        waiting = self._awaiting.get(operation.server)
        if waiting is not None:
            waiting.discard(operation.id)
            if not waiting:
                self._done.pop(operation.server).set()
                del self._awaiting[operation.server]

    def holding(self, server: str) -> bool:
        """Whether repeat requests to ``server`` are held for restored operations' first
        contact (until the last is heard from, or the wait is given up)."""
        return server in self._done

    async def after_first_contacts(self, server: str) -> None:
        """Hold a repeat request while operations restored at start-up still wait for their
        first word from the same server. Bounded: after FIRST_CONTACT_PRIORITY_SECONDS the
        ordering is given up."""
        done = self._done.get(server)
        if done is None:
            return
        try:
            await asyncio.wait_for(done.wait(), FIRST_CONTACT_PRIORITY_SECONDS)
        except TimeoutError:
            if self._done.get(server) is done:  # a server that stays silent for some
                log.info("%s: %d restored operations not heard from yet; polling the others again",
                         server, len(self._awaiting.get(server, ())))
                self._awaiting.pop(server, None)
                self._done.pop(server).set()

    def poll_budget(self, server: str) -> PollBudget:
        """The budget the repeat polls of ``server`` share (see hostapp.engine.budget)."""
        budget = self._budgets.get(server)
        if budget is None:
            budget = self._budgets[server] = PollBudget()
        return budget
