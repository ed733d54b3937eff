"""How a command gets the engine of its home: from the home's one owner.

One process at a time drives a home's operations: the owner, which holds the home's lock
(:mod:`hostapp.agent.lock`), usually the background agent. A command is its client, and
what is started from the command line goes on after the command ends:

* :func:`owner_engine` – commands that start or carry operations, or wait for a person
  (``call``, ``follow``, ``resume``, ``cancel``, ``servers login``): the running owner,
  or one started for the purpose, detached (``hostapp agent``; it exits by itself once idle).
* :func:`config_engine` – commands that configure or look at a server and start nothing
  (``servers add/remove/logout``, ``tools``, ``skills``): the running owner when there is
  one (it learns of the change at once); otherwise the command itself is the owner for
  the second it takes: it holds the home's lock and opens the engine in its own process,
  without connecting servers or resuming anything, rather than start an agent that would
  then sit idle for minutes.
* :func:`reading_engine` – commands that only read the journal (``ops``, ``servers list``):
  the running owner, else the journal read in this process (no lock: nothing is written).

The owner's endpoint is a Unix socket, or on Windows a loopback port with a key
(:mod:`hostapp.agent.endpoint`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from hostapp.engine import open_engine
from hostapp.engine.api import EngineApi, EngineListener, EngineTimeout

#: How long a command waits for an owner to come up (or for the home's lock).
OWNER_TIMEOUT = 30.0


def _home() -> Path:
    from hostapp.agent.commands import current_home

    return current_home()


@contextlib.asynccontextmanager
async def owner_engine(listener: EngineListener | None = None, *, verbose: bool = False) -> AsyncIterator[EngineApi]:
    """The engine of the home's owner, which is started when none runs (see the module)."""
    from hostapp.agent.client import connect_or_spawn

    remote = await connect_or_spawn(_home(), listener, client="cli", timeout=OWNER_TIMEOUT, verbose=verbose)
    try:
        yield remote
    finally:
        await remote.close()


@contextlib.asynccontextmanager
async def config_engine(listener: EngineListener | None = None) -> AsyncIterator[EngineApi]:
    """The running owner's engine, or this process's own under the home's lock."""
    from hostapp.agent.commands import agent_engine

    running = await agent_engine(listener)
    if running is not None:
        try:
            yield running
        finally:
            await running.stop()
        return
    async with _locked_engine(listener) as engine:
        yield engine


@contextlib.asynccontextmanager
async def reading_engine() -> AsyncIterator[EngineApi]:
    """The running owner's engine, or the journal read in this process."""
    from hostapp.agent.commands import agent_engine

    engine = await agent_engine()
    if engine is None:
        engine = open_engine(None, None, connect=False)
    try:
        yield engine
    finally:
        await engine.stop()


@contextlib.asynccontextmanager
async def _locked_engine(listener: EngineListener | None) -> AsyncIterator[EngineApi]:
    """An engine in this process, which owns the home while it runs: it holds the home's
    lock (waiting while an owner starts or stops; an owner that answers is used instead)."""
    from hostapp.agent.commands import agent_engine
    from hostapp.agent.lock import HomeLock

    home = _home()
    lock = HomeLock(home)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + OWNER_TIMEOUT
    while not await asyncio.to_thread(lock.acquire, 0.2):
        running = await agent_engine(listener)
        if running is not None:
            try:
                yield running
            finally:
                await running.stop()
            return
        if loop.time() >= deadline:
            owner = lock.owner()
            raise EngineTimeout(f"another process holds {home}" + (f" (pid {owner.pid})" if owner else "")
                                + f" and did not answer within {OWNER_TIMEOUT:.0f} s")
    engine = open_engine(home, listener, connect=False)
    try:
        yield engine
    finally:
        try:
            await engine.stop()
        finally:
            lock.release()
