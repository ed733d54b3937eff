"""One operation's view and the progress taken into it (hostapp.engine.progress_intake),
with a real mechanism and a real journal row's view: progress only rises, the mechanism
keeps what was taken, a snapshot is made only when asked, a status message moves the bar."""

from __future__ import annotations

from hostapp.engine import api
from hostapp.engine.operation import operation_view
from hostapp.engine.progress_intake import ProgressIntake
from hostapp.mechanisms.direct import DirectRequest
from hostapp.store.journal import OperationRecord
from hostapp.store.status import OperationStatus


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _intake(progress: float | None = None, total: float | None = None
            ) -> tuple[ProgressIntake, DirectRequest, _Clock, list[None]]:
    record = OperationRecord("op-1", "srv", "tools/call", {"arguments": {}}, status=OperationStatus.RUNNING,
                             progress=progress, total=total, created_at=1.0, updated_at=2.0)
    mech, clock, told = DirectRequest(), _Clock(), []
    intake = ProgressIntake(operation_view(record), mechanism=mech, clock=clock, progressed=lambda: told.append(None))
    return intake, mech, clock, told


def test_progress_only_rises_and_the_mechanism_keeps_what_was_taken():
    intake, mech, clock, told = _intake()
    intake.on_progress(3, 10, "three")
    clock.now = 101.0
    intake.on_progress(3, 10, "three again")  # not beyond the step shown: dropped
    intake.on_progress(2, 10, "two")
    view = intake.view
    assert (view.progress, view.total, view.message, view.updated_at) == (3, 10, "three", 100.0)
    assert mech.progress_high == 3 and len(told) == 1
    intake.on_progress(7, None, None)  # no total, no message: the last ones stay
    assert (intake.view.progress, intake.view.total, intake.view.message) == (7, 10, "three")
    assert mech.progress_high == 7 and len(told) == 2


def test_steps_are_told_once_until_the_view_is_read_again():
    """The engine is told at the first step since the view was read (it then publishes,
    reading the view); the steps after it are set in place without a word, and the next
    step after a read is told again."""
    intake, mech, _clock, told = _intake()
    for step in range(1, 1001):
        intake.on_progress(step, 1000, None)
    assert len(told) == 1 and mech.progress_high == 1000
    assert intake.view.progress == 1000  # what the publisher reads: the last step
    intake.on_progress(1001, None, None)
    intake.on_progress(1002, None, None)
    assert len(told) == 2 and intake.view.progress == 1002


def test_a_restored_operation_drops_steps_below_the_journaled_one():
    """A stream replayed from its first event after a restart reports its steps again."""
    intake, mech, _clock, told = _intake(progress=40, total=100)
    intake.on_progress(10, 100, None)
    intake.step(39, 100, "replayed")
    assert intake.view.progress == 40 and told == [] and mech.progress_high is None
    intake.step(41, 100, "new")
    assert intake.view.progress == 41 and intake.view.message == "new" and len(told) == 1


def test_the_view_is_one_snapshot_until_progress_moves():
    intake, _mech, _clock, _told = _intake()
    first = intake.view
    assert intake.view is first  # nothing moved: the same snapshot
    intake.on_progress(1, None, None)
    intake.on_progress(2, None, None)
    second = intake.view
    assert second is not first and second.progress == 2 and first.progress is None
    assert intake.view is second


def test_a_changed_view_keeps_the_progress_taken_and_replaces_the_fields_named():
    intake, _mech, _clock, _told = _intake()
    intake.on_progress(5, 10, "half")
    view = intake.change(status=OperationStatus.INPUT_REQUIRED, needs_input=True)
    assert (view.status, view.progress, view.message) == (OperationStatus.INPUT_REQUIRED, 5, "half")
    assert intake.view is view


def test_an_ended_operation_takes_no_progress():
    intake, mech, _clock, told = _intake()
    intake.change(status=api.COMPLETED)
    intake.on_progress(1, None, None)
    assert intake.done and intake.view.progress is None and told == [] and mech.progress_high is None


def test_a_status_message_stating_a_step_moves_the_bar_on_its_own_scale_only():
    intake, _mech, _clock, _told = _intake()
    intake.step_in_message("crunch 3/12")
    assert (intake.view.progress, intake.view.total) == (3, 12)
    intake.step_in_message("40%")  # another scale than the one shown: not mixed in
    assert (intake.view.progress, intake.view.total) == (3, 12)
    intake.step_in_message("nothing to say")
    intake.step_in_message("5 of 12")
    assert (intake.view.progress, intake.view.total, intake.view.message) == (5, 12, "5 of 12")
