"""One operation's committed handle (hostapp.engine.committed_handle) on the real keyring
(the suite's private gnome-keyring, through the engine's HandleKeeper): the order of a
commit, no write for an unchanged value, the old entry deleted, the positions kept at a
quit. The whole path through restarts is in tests/engine/test_positions.py and
tests/engine/test_keyring_recovery.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostapp.engine.committed_handle import CommittedHandle
from hostapp.engine.handles import HandleKeeper, unwrap_secret
from hostapp.store.secrets import SecretStore

pytestmark = pytest.mark.timeout(60)

SESSION = ("sid-1", "2025-11-25")


class _Journal:
    """Where the journal points, and what the keyring held under each reference then."""

    def __init__(self, keeper: HandleKeeper):
        self.keeper = keeper
        self.points: list[tuple[str | None, bool]] = []
        self.held: list[dict[str, str]] = []

    async def point_at(self, ref: str | None, resumable: bool) -> None:
        self.points.append((ref, resumable))
        refs = [r for r, _ in self.points if r is not None]
        self.held.append(await self.keeper.call(self.keeper.secrets.get_many, refs))


async def _keeper(home: Path) -> HandleKeeper:
    keeper = HandleKeeper(home, SecretStore(home), lambda kind, message: None)
    await keeper.check_keyring()
    assert keeper.keyring_problem is None
    return keeper


async def test_a_new_secret_is_written_before_the_journal_points_at_it_and_the_old_deleted_after(
        isolated_home, real_keyring):
    keeper = await _keeper(isolated_home)
    journal = _Journal(keeper)
    handle = CommittedHandle(keeper, ref=None, committed_secret=None, lives_in=lambda: SESSION)
    try:
        await handle.commit("token-1", False, journal.point_at)
        first = handle.ref
        assert first is not None and journal.points == [(first, True)]  # kept now: resumable
        assert unwrap_secret(journal.held[0][first]) == ("token-1", SESSION)

        await handle.commit("token-1", True, journal.point_at)  # the same value: no new entry
        assert handle.ref == first and journal.points[-1] == (first, True)

        await handle.commit("token-2", True, journal.point_at)
        second = handle.ref
        assert second not in (None, first)
        # While the journal is pointed at the new entry, the old one still holds its value
        # (a crash there leaves a stale entry, never a journal pointing at nothing).
        assert unwrap_secret(journal.held[-1][second]) == ("token-2", SESSION) and first in journal.held[-1]
        assert await keeper.call(keeper.secrets.get_many, [first]) == {}  # deleted after

        await handle.commit(None, True, journal.point_at)  # the mechanism keeps no secret any more
        assert handle.ref is None and journal.points[-1] == (None, True)
        assert await keeper.call(keeper.secrets.get_many, [second]) == {}
    finally:
        await keeper.close()


async def test_the_position_kept_at_a_quit_is_only_what_is_beyond_the_commit(isolated_home, real_keyring):
    keeper = await _keeper(isolated_home)
    journal = _Journal(keeper)
    handle = CommittedHandle(keeper, ref=None, committed_secret=None, lives_in=lambda: SESSION)
    try:
        assert handle.newer_position("event-9") is None  # nothing committed: nothing to extend
        await handle.commit("event-3", False, journal.point_at)
        assert handle.newer_position("event-3") is None and handle.newer_position(None) is None
        assert handle.newer_position("event-9") == [handle.ref, "event-9"]
        ref = handle.ref
        await handle.delete()  # the operation ended
        assert ref is not None and await keeper.call(keeper.secrets.get_many, [ref]) == {}
    finally:
        await keeper.close()


async def test_a_restored_handle_whose_value_is_unknown_is_written_at_its_next_commit(isolated_home, real_keyring):
    """Restored from a position kept at the last quit, the keyring does not hold what the
    operation resumed from: the next commit writes it even when it equals the secret."""
    keeper = await _keeper(isolated_home)
    journal = _Journal(keeper)
    try:
        ref = await keeper.put_handle("an older value")
        handle = CommittedHandle(keeper, ref=ref, committed_secret=None, lives_in=lambda: SESSION)
        await handle.commit("event-5", True, journal.point_at)
        assert handle.ref not in (None, ref)
        assert unwrap_secret(journal.held[-1][handle.ref]) == ("event-5", SESSION)
    finally:
        await keeper.close()
