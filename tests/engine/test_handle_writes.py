"""Handles that many operations commit at once reach the keyring in a few batched writes,
and every one of them still resumes its operation after a restart."""

from __future__ import annotations

import asyncio

import pytest

from hostapp.engine import api
from hostapp.store.secrets import SHARD_KIND, SecretStore
from tests.engine.conftest import lab_server
from tests.engine.test_engine import finished, run_engine
from tests.engine.test_keyring_recovery import handle_committed
from tests.support.keyring_daemon import home_entries
from tests.support.waiting import until_async

pytestmark = pytest.mark.timeout(180)

COUNT = 40


class CountingStore(SecretStore):
    """The real store, counting the handle batches it is asked to write."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.batches: list[tuple[int, int]] = []

    def write_batch(self, kind, values, deletes=()):
        if kind == "handle":
            self.batches.append((len(values), len(deletes)))
        return super().write_batch(kind, values, deletes)


def _keyring_entries(store: SecretStore) -> list[str]:
    return list(home_entries(store.scope))


async def test_many_commits_at_once_are_a_few_keyring_writes(isolated_home, lab, recorder, real_keyring):
    store = CountingStore(isolated_home)
    engine = await run_engine(isolated_home, recorder, secrets=store)
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        ops = await asyncio.gather(*(engine.start_call("lab", "long_task", {"seconds": 8, "steps": 8})
                                     for _ in range(COUNT)))
        records = await asyncio.gather(*(handle_committed(engine, op.id) for op in ops))
        assert all(r.handle_ref and r.resumable for r in records)
        written = sum(values for values, _ in store.batches)
        assert written >= COUNT
        # Commits that arrive while the keyring writes earlier ones wait and go together.
        assert len(store.batches) < written / 2, store.batches
        names = _keyring_entries(store)
        assert names and all(name.startswith(SHARD_KIND + ":") for name in names)
        assert len(names) <= 2
    finally:
        await engine.stop()

    # Every one resumes from what the keyring holds, and ends once.
    again = await run_engine(isolated_home, recorder, secrets=SecretStore(isolated_home))
    try:
        finals = await asyncio.gather(*(finished(again, op.id, timeout=120) for op in ops))
        assert all(f.status == api.COMPLETED for f in finals), [(f.status, f.message) for f in finals]
        await again.journal.flush()
        # Finished operations' handles leave the keyring.
        await until_async(lambda: _keyring_entries(again.secrets) == [],
                          what="the finished operations' handles to leave the keyring", interval=0.1)
    finally:
        await again.stop()
