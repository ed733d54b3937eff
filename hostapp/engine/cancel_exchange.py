"""A cancel asked for, and the server's answer to it.

Cancelling an operation is an exchange with its server where the mechanism sends a cancel
request (``tasks/cancel``, an extension's cancel method): the person who asked waits for
the answer, at most :data:`~hostapp.engine.operation.CANCEL_ANSWER_SECONDS`, and a refusal
is shown, not swallowed (the operation goes on, and says so). Where the mechanism only
notifies (``notifications/cancelled``), or the cancel ends the operation at once, nobody
waits. :class:`CancelExchange` keeps that exchange for one operation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from hostapp.engine.operation import CANCEL_ANSWER_SECONDS
from hostapp.mechanisms import actions as A
from hostapp.protocol.jsonrpc import RpcError

log = logging.getLogger(__name__)


class CancelPort(Protocol):
    """What a cancel exchange uses of its operation."""

    @property
    def id(self) -> str: ...

    @property
    def done(self) -> bool: ...

    async def feed(self, produce: Callable[[], list[A.Action]]) -> None:
        """Run one mechanism hook and carry out the actions it returns."""
        ...

    async def show_cancel_refused(self, message: str, data: dict[str, Any]) -> None:
        """Journal and show that the server did not cancel (its status goes on unchanged)."""
        ...


class CancelExchange:
    """The cancel of one operation: the method of its cancel request, once one was sent,
    and the future its asker waits on until the server answers."""

    def __init__(self, port: CancelPort):
        self._port = port
        self._method: str | None = None
        self._answer: asyncio.Future[None] | None = None

    async def cancel(self, produce: Callable[[], list[A.Action]]) -> None:
        """Feed the mechanism's cancel (``produce``), and wait (at most
        CANCEL_ANSWER_SECONDS) for the server's answer to the cancel request, if the
        mechanism sends one. RpcError when the server refused it."""
        answer: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._answer = answer

        def cancelling() -> list[A.Action]:
            actions = produce()
            for action in actions:
                if isinstance(action, A.SendRequest):
                    self._method = action.method
            return actions

        await self._port.feed(cancelling)
        if self._method is None or self._port.done:
            self.answered(None)  # a notification, or ended at once: nothing to wait for
        try:
            await asyncio.wait_for(asyncio.shield(answer), CANCEL_ANSWER_SECONDS)
        except TimeoutError:
            log.info("operation %s: no answer to its cancel yet", self._port.id)
        finally:
            if self._answer is answer:
                self._answer = None  # a later answer is still shown, to nobody waiting

    def is_cancel_request(self, method: str) -> bool:
        """Is ``method`` (a request of the operation other than its call) the cancel's?"""
        return method == self._method

    def answered(self, error: RpcError | None) -> None:
        """The server answered the cancel (``error``: it refused), or nothing is left to
        wait for (the operation ended): whoever waits is let go."""
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done():
            if error is None:
                answer.set_result(None)
            else:
                answer.set_exception(error)

    async def refused(self, exc: RpcError) -> None:
        """The server answered the cancel with an error: shown and journaled, not swallowed."""
        await self._port.show_cancel_refused(f"the server did not cancel it: {exc.message}",
                                             {"code": exc.code, "message": exc.message})
        self.answered(exc)
