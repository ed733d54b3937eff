"""How long the protocol's waits last: time as an input, beside the clock.

Both halves of a conversation wait on the clock: the host between polls, before a
reconnect, before it asks a busy server again; the lab between the steps of its work and
in the hints it gives (``retry``, ``pollInterval``, a stream's resume interval). Every such
wait is read from a :class:`Timing` handed to the part that waits, instead of a module
constant, so that the product's defaults live in one place and a test can run the same
code, with real processes and real faults, ten times faster: ``Timing().scaled(0.1)``
shortens every wait and cap together, so a 3 s outage still crosses the reconnect cap as a
30 s one does at the defaults.

A process takes its scale from the environment (:func:`time_scale`): ``HOSTAPP_TIME_SCALE``
for the host (the agent and every command), ``HOSTAPP_LAB_TIME_SCALE`` (or ``--time-scale``)
for the lab. Unset, both are 1: the product's own timing.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

#: Environment variables of a process's time scale (a positive number; 1 when unset).
HOST_TIME_SCALE_ENV = "HOSTAPP_TIME_SCALE"
LAB_TIME_SCALE_ENV = "HOSTAPP_LAB_TIME_SCALE"


@dataclass(frozen=True)
class Timing:
    """The host's waits, in seconds. The defaults are the product's."""

    #: A poll when the server names no interval (tasks, async tools, a stream's state).
    poll: float = 2.0
    #: The ceiling of the back-off between failed polls.
    poll_backoff_cap: float = 60.0
    #: The first wait before reconnecting a lost connection, and the doubling's start.
    reconnect_base: float = 0.5
    #: The ceiling of the back-off between failed reconnects (a server, an SSE stream).
    reconnect_cap: float = 30.0
    #: Before reconnecting an SSE stream whose server sent no ``retry``.
    sse_retry: float = 1.0
    #: How often a stream's newest event id is committed while events come.
    commit_every: float = 30.0
    #: How long after a break an SSE stream's reconnections may go on failing (refused, or
    #: given up by the transport) before its operation ends unknown: a duration, whatever
    #: number of attempts the back-off fitted in.
    resume_budget: float = 90.0
    #: Between attempts to resume a draft stream whose server asks for no minimum.
    stream_retry: float = 1.0
    #: Before asking again a server that said it is busy (HTTP 408, 429), or a status
    #: request whose answer did not come (``poll_answer``).
    busy_retry: float = 2.0
    #: How long a request that only asks how operations are doing (``tasks/get``,
    #: ``tools/async/status``, ``requests/getStatus``, ``tasks/list``) waits for its answer
    #: once it went out. One that never comes (kept by a proxy, a stalled connection) is
    #: given up and asked again, instead of holding its operation for good.
    poll_answer: float = 60.0
    #: A resumed SSE stream's allowed silence before it counts as dead (doubled, up to
    #: ``reconnect_cap``, after each silence).
    resumed_silence: float = 2.0
    #: A gap between events after which a live stream's next silence is allowed longer.
    live_event_gap: float = 1.0

    def scaled(self, factor: float) -> Timing:
        """Every wait multiplied by ``factor`` (a positive number)."""
        if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 0):
            raise ValueError(f"a time scale must be a positive number, not {factor!r}")
        return Timing(**{f.name: getattr(self, f.name) * factor for f in dataclasses.fields(self)})

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Timing:
        """The product's timing at the scale ``HOSTAPP_TIME_SCALE`` names (1 when unset)."""
        scale = time_scale(HOST_TIME_SCALE_ENV, environ)
        return cls() if scale == 1 else cls().scaled(scale)


#: The product's timing.
DEFAULT_TIMING = Timing()


def time_scale(variable: str, environ: Mapping[str, str] | None = None) -> float:
    """The time scale an environment variable names: 1 when unset or empty. A value that
    is not a positive number is refused, saying which variable holds it."""
    raw = (os.environ if environ is None else environ).get(variable, "").strip()
    if not raw:
        return 1.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{variable} must be a positive number (a time scale, 1 for real time), not {raw!r}")
    return value
