"""A keyring that fails for a moment does not cost an operation its resumability, and one
that comes back (unlocked, its daemon restarted) is used again for later operations."""

from __future__ import annotations

import keyring.errors
import pytest

from hostapp.engine import api, handles
from hostapp.store.secrets import InMemoryKeyring, SecretStore
from tests.engine.conftest import Recorder, lab_server
from tests.engine.test_engine import finished, run_engine
from tests.support.waiting import DEADLINE, until_async

pytestmark = pytest.mark.timeout(120)


class FlakyKeyring(InMemoryKeyring):
    """Refuses the next ``failures`` writes, as a busy Secret Service daemon may."""

    def __init__(self) -> None:
        super().__init__()
        self.failures = 0
        self.writes = 0

    def set_password(self, service: str, username: str, password: str) -> None:
        self.writes += 1
        if self.failures:
            self.failures -= 1
            raise keyring.errors.PasswordSetError("the daemon did not answer in time")
        super().set_password(service, username, password)


async def handle_committed(engine, op_id: str, timeout: float = DEADLINE) -> object:
    """The operation's record once its handle is committed: its state journaled, with a
    reference to the keyring or (the keyring failing) marked not resumable. Sending the call
    journals its mechanism, not resumable, before any handle: that row is not the answer."""
    async def committed():
        await engine.journal.flush()
        record = engine.journal.get_operation(op_id)
        return record if record.mechanism and record.handle and (record.handle_ref or not record.resumable) else None

    return await until_async(committed, timeout, what=f"the handle of {op_id} to be committed", interval=0.05)


async def test_a_failed_handle_write_is_tried_again(isolated_home, lab, recorder):
    backend = FlakyKeyring()
    engine = await run_engine(isolated_home, recorder, secrets=SecretStore(isolated_home, backend=backend))
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        backend.failures = 1
        op = await engine.start_call("lab", "long_task", {"seconds": 2, "steps": 2})
        record = await handle_committed(engine, op.id)
        assert record.handle_ref and record.resumable
        assert backend.failures == 0 and backend.writes >= 2
        assert engine.keyring_problem is None and not recorder.problems
        final = await finished(engine, op.id)
        assert final.status == api.COMPLETED and engine.journal.get_operation(op.id).resumable
    finally:
        await engine.stop()


async def test_a_keyring_that_comes_back_is_used_again(isolated_home, lab, monkeypatch):
    recorder = Recorder()
    backend = InMemoryKeyring()
    engine = await run_engine(isolated_home, recorder, secrets=SecretStore(isolated_home, backend=backend))
    try:
        await engine.add_server(lab_server(lab, version="2025-11-25"))
        await engine.connected("lab")
        backend.locked = True
        first = await engine.start_call("lab", "long_task", {"seconds": 2, "steps": 2})
        record = await handle_committed(engine, first.id)
        assert not record.resumable and record.handle_ref is None
        assert engine.keyring_problem and "locked" in engine.keyring_problem
        assert recorder.problems[-1][0] == "keyring" and recorder.problems[-1][1]

        # Unlocked meanwhile: the next operation is asked about once the re-check is due.
        backend.locked = False
        monkeypatch.setattr(handles, "KEYRING_RECHECK_SECONDS", 0.0)
        second = await engine.start_call("lab", "long_task", {"seconds": 2, "steps": 2})
        record = await handle_committed(engine, second.id)
        assert record.resumable and record.handle_ref
        assert engine.keyring_problem is None
        assert recorder.problems[-1] == ("keyring", "")  # the problem is withdrawn
        for op in (first, second):
            assert (await finished(engine, op.id)).status == api.COMPLETED
    finally:
        await engine.stop()
