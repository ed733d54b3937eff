"""What the window and the command line say about an operation, written once.

Both clients show the same operations from the same views (:class:`~hostapp.engine.api.OperationView`),
so they use the same words for them: how long it has run (:func:`clock`) and how long it
may have left (:func:`time_left`, from :class:`ProgressEstimator`), its status
(:func:`status_word`), and whether it survives a stop of the host that carries it
(:func:`at_stop_words`: the engine decides, in the view's ``lost_at_stop``; this says it).
Plain text only: no Qt, no terminal styling; each client lays the words out its own way
(the window capitalizes a status that stands alone, :func:`capitalized`).

Below both clients, above the facade: it imports :mod:`hostapp.engine.api` and nothing else of hostapp.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from hostapp.engine.api import IN_FLIGHT, OperationStatus, OperationView

# -- durations ---------------------------------------------------------------------------


def clock(seconds: float) -> str:
    """An elapsed time as a clock: ``0:07``, ``12:34``, ``1:02:03``, ``3 d 4 h``; short
    and comparable by eye in a column."""
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def duration(seconds: float) -> str:
    """How long something took, in words: ``0.4 s``, ``12 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``."""
    seconds = max(0.0, seconds)
    if seconds < 1:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs and minutes < 10 else f"{minutes} min"
    return f"{secs} s"


def rough(seconds: float) -> str:
    """A rough figure, as an estimate or a silence is: ``45 s``, ``3 min``, ``1 h 20 min``, ``2 d 3 h``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours >= 24:
        days, hours = divmod(round(seconds / 3600), 24)
        return f"{days} d {hours} h" if hours else f"{days} d"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def time_left(seconds: float) -> str:
    """The time an operation may have left: ``~45 s left``, ``~3 min left``."""
    return f"~{rough(seconds)} left"


def ago(then: float, now: float) -> str:
    """How long ago ``then`` was (seconds since the epoch): ``just now``, ``40 s ago``,
    ``2 min ago``, ``3 h ago``, ``yesterday``, ``5 days ago``, then the date."""
    delta = now - then
    if delta < 0:
        return "in the future"  # another machine's clock, or this one's set back
    if delta < 5:
        return "just now"
    if delta < 60:
        return f"{int(delta)} s ago"
    if delta < 3600:
        return f"{int(delta // 60)} min ago"
    if delta < 86400:
        return f"{int(delta // 3600)} h ago"
    days = int(delta // 86400)
    if days == 1:
        return "yesterday"
    if days < 30:
        return f"{days} days ago"
    return time.strftime("%Y-%m-%d", time.localtime(then))


def format_rate(rate: float, total: float | None) -> str:
    """A rate in the units of the progress: steps a second (or a minute when slow), or
    percent when the total is 100."""
    unit = "%" if total == 100 else " steps"
    if rate >= 1:
        return f"{rate:.3g}{unit}/s"
    return f"{rate * 60:.3g}{unit}/min"


# -- status words ------------------------------------------------------------------------

#: The status of an operation in words.
STATUS_WORDS: dict[str, str] = {
    OperationStatus.PENDING: "starting",
    OperationStatus.RUNNING: "running",
    OperationStatus.INPUT_REQUIRED: "needs your input",
    OperationStatus.COMPLETED: "completed",
    OperationStatus.FAILED: "failed",
    OperationStatus.CANCELLED: "cancelled",
    OperationStatus.EXPIRED: "expired",
    OperationStatus.UNKNOWN: "outcome unknown",
}
#: The status of an operation in flight that no host carries now (no agent runs).
PAUSED = "paused"


def status_word(status: str, *, paused: bool = False) -> str:
    """``status`` (an :class:`~hostapp.engine.api.OperationStatus` value) in words;
    :data:`PAUSED` for one in flight while nothing carries it."""
    if paused and status in IN_FLIGHT:
        return PAUSED
    return STATUS_WORDS.get(status, status.replace("_", " "))


def operation_name(op: OperationView) -> str:
    """What an operation is called in a list: its tool, and how many calls its app view
    made (they are not rows of their own): "get-system-stats · 25 calls"."""
    name = op.tool or op.method
    if op.view_calls:
        return f"{name} · {op.view_calls} call{'' if op.view_calls == 1 else 's'}"
    return name


def capitalized(words: str) -> str:
    """Words that stand alone (a cell, a label): their first letter a capital."""
    return words[:1].upper() + words[1:]


# -- does it survive a stop --------------------------------------------------------------

#: What an operation in flight that a stop would end is said to be.
LOST_AT_STOP = "lost if hostapp stops"
#: How an operation that survives a stop is carried, by its mechanism, in plain words.
SURVIVES_BY: dict[str, str] = {
    "async_tool": "resumable (async tool)",
    "tasks_extension": "resumable (task)",
    "tasks_2025": "resumable (task)",
    "resumable_requests": "resumable (resume token)",
    "streams": "resumable (stream)",
    "resume_token": "resumable between parts",
    "mrtr": "only its question survives",
    "http_resumption": "resumable while the server keeps it",
}
#: Longer explanations of the same.
SURVIVES_BY_TIPS: dict[str, str] = {
    "async_tool": "An asynchronous tool call: hostapp made its token before sending it, so after a restart it "
                  "asks the server how the call went.",
    "tasks_extension": "The server runs it as a task: after a restart hostapp asks for the task by its id.",
    "tasks_2025": "The server runs it as a task: after a restart hostapp asks for the task by its id.",
    "resumable_requests": "The server gave a resume token: hostapp resumes the request with it, within the "
                          "time the server keeps it.",
    "streams": "The answer comes on a stream the server keeps: hostapp resumes the stream, within the time "
               "the server keeps it.",
    "resume_token": "The result comes in parts, each with a token for the next: a restart loses at most the "
                    "part under way.",
    "mrtr": "The server's question is kept: if hostapp stops, it is asked again when hostapp starts; a retry "
            "in flight is a plain request.",
    "http_resumption": "The answer streams over HTTP: hostapp picks the stream up again only while the server "
                       "keeps its events and session.",
}


def at_stop_words(op: OperationView) -> str:
    """Whether ``op`` outlives a stop of its host, in a few words: how it resumes, or
    :data:`LOST_AT_STOP`; empty once it has ended."""
    if not op.in_flight:
        return ""
    if op.lost_at_stop is not None:
        return LOST_AT_STOP
    return SURVIVES_BY.get(op.mechanism or "", "resumable")


def at_stop_why(op: OperationView) -> str:
    """The longer reason behind :func:`at_stop_words`; empty once it has ended."""
    if not op.in_flight:
        return ""
    if op.lost_at_stop is not None:
        return f"If hostapp stops now, this operation ends: {op.lost_at_stop}."
    return SURVIVES_BY_TIPS.get(op.mechanism or "", "hostapp resumes it when it starts again.")


# -- time left ---------------------------------------------------------------------------

#: The rate behind the time left is measured over the progress of the last this many
#: seconds (and at least the last two pieces of news).
RATE_WINDOW = 20.0
#: An operation is stalled once it has been silent this many times its usual gap between
#: pieces of news...
STALL_FACTOR = 3.0
#: ...and at least this many seconds.
MIN_STALL_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class Estimate:
    rate: float  # progress units per second
    seconds_left: float
    stalled: bool = False  # no news for much longer than usual: the time left grows meanwhile


@dataclass(slots=True)
class Pace:
    """How fast one operation's progress moves: the pieces of news (time, progress) of the
    last :data:`RATE_WINDOW` seconds. ``since``: when the work began at progress 0, a
    measure for as long as only one piece of news has come (None: no such measure, as
    after a pause). ``floor``: news is not dated before it (a pause ended then)."""

    since: float | None = None
    floor: float = 0.0
    news: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=256))

    def note(self, progress: float, at: float) -> None:
        """The progress was ``progress`` at ``at``."""
        at = max(at, self.floor)
        if self.news and progress <= self.news[-1][1]:
            if progress < self.news[-1][1]:  # went back (a new phase, a restarted count): a new rate
                self.news.clear()
                self.since = None
                self.news.append((at, progress))
            return
        self.news.append((at, progress))
        while len(self.news) > 2 and self.news[-1][0] - self.news[0][0] > RATE_WINDOW:
            self.news.popleft()

    def _measured(self) -> tuple[float, float, float, float, int] | None:
        """(from, progress then, to, progress then, pieces of news between) or None."""
        if len(self.news) >= 2:
            (t0, p0), (t1, p1) = self.news[0], self.news[-1]
            return t0, p0, t1, p1, len(self.news) - 1
        if self.news and self.since is not None:
            t1, p1 = self.news[-1]
            return self.since, 0.0, t1, p1, 1
        return None

    def usual_gap(self) -> float | None:
        """Seconds between two pieces of news, on average, if known."""
        measured = self._measured()
        if measured is None:
            return None
        t0, p0, t1, p1, count = measured
        return (t1 - t0) / count if t1 > t0 and p1 > p0 else None

    def estimate(self, progress: float | None, total: float | None, now: float) -> Estimate | None:
        """Rate and time left at ``now``, or None: no total, or not moving (yet)."""
        measured = self._measured()
        if measured is None or progress is None or not total or progress >= total:
            return None
        t0, p0, t1, p1, count = measured
        if t1 <= t0 or p1 <= p0:
            return None
        quiet = max(0.0, now - t1)
        if quiet <= max(MIN_STALL_SECONDS, STALL_FACTOR * (t1 - t0) / count):
            rate = (p1 - p0) / (t1 - t0)
            return Estimate(rate, max(0.0, (total - progress) / rate - quiet))
        # Stalled: measured up to now, the rate falls and the time left grows while nothing comes.
        rate = (p1 - p0) / (now - t0)
        return Estimate(rate, (total - progress) / rate, stalled=True)


class ProgressEstimator:
    """The pace of each operation seen, from its views; estimates from it.

    An operation first seen is measured from its start (its ``created_at``) until a second
    piece of news comes. A pause (a question to the person, no agent carrying the work)
    starts the measure afresh once the work goes on, so the time spent paused does not slow
    the rate. Times are the views' (``updated_at``), and ``now`` the same clock's.
    """

    def __init__(self) -> None:
        self._paces: dict[str, Pace] = {}
        self._asked: set[str] = set()  # paused by a question: their whole life is no measure of them
        self._resumed_at = 0.0  # when an agent last took the work up again after none did

    def observe(self, op: OperationView) -> None:
        if not op.in_flight:
            self._paces.pop(op.id, None)
            self._asked.discard(op.id)
            return
        if op.status == OperationStatus.INPUT_REQUIRED:
            self._paces.pop(op.id, None)  # the rate begins afresh once the answer is in
            self._asked.add(op.id)
            return
        if op.fraction is None or op.progress is None:
            return
        pace = self._paces.get(op.id)
        if pace is None:
            whole_life = op.id not in self._asked and op.created_at >= self._resumed_at and op.created_at > 0
            pace = self._paces[op.id] = Pace(since=op.created_at if whole_life else None, floor=self._resumed_at)
        pace.note(op.progress, op.updated_at)

    def resumed(self, now: float) -> None:
        """An agent carries the work again after none did: each rate is measured afresh."""
        self._paces.clear()
        self._resumed_at = now

    def estimate(self, op: OperationView, now: float | None = None) -> Estimate | None:
        """Rate and time left at ``now`` (the wall clock when None), or None: no total, not
        moving since the last pause, waiting for the person, or already ended."""
        if op.status != OperationStatus.RUNNING or op.fraction is None:
            return None
        pace = self._paces.get(op.id)
        return None if pace is None else pace.estimate(op.progress, op.total, time.time() if now is None else now)

    def usual_gap(self, op: OperationView) -> float | None:
        """Seconds between two pieces of progress news of ``op``, on average, if known."""
        pace = self._paces.get(op.id)
        return None if pace is None else pace.usual_gap()
