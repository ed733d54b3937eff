"""The cyclic garbage collector of a process that holds thousands of operations: the
agent, which carries them, and the window, which shows them.

CPython collects its young generation every 700 net allocations and the whole heap every
100 young collections. With thousands of operations in flight the heap holds millions of
objects, and at the defaults a full collection (0.5 s with 10,000 operations: a frozen
window, a stalled agent) ran about once a second while they were resumed: 13 of the 32 s
it took, measured in the window when it still carried the engine itself. A young
generation of 10,000 objects (a few ms to collect) promotes far fewer short-lived ones
(requests, responses, tasks) to the older generations. Measured: bench/RESULTS.md.
"""

from __future__ import annotations

import gc

#: The collector's thresholds for a process that carries the operations: the agent, or a
#: window with the engine in its own process (CPython's are 700, 10, 10).
GC_THRESHOLDS = (10_000, 50, 20)

#: The window's as the agent's client: its heap is mostly the views it shows, each replaced
#: within a second at 10,000 calls stepping once a second. A young generation of 10,000
#: objects was then 26,000 views and tuples scattered in the heap: 15-37 ms to collect, a
#: frame missed four times in ten seconds. Young collections of 1,000 (0.7 ms at the
#: median, 5 ms at most) and middle ones every 100 of them (14 ms) keep the window's
#: event-loop lag under a frame: p99 8.4-9.5 ms and max 13-14 ms, against 11.5-12.6 and
#: 24-38 ms with the thresholds above (bench/RESULTS.md).
CLIENT_GC_THRESHOLDS = (1_000, 100, 20)


def tune_garbage_collector(thresholds: tuple[int, int, int] = GC_THRESHOLDS) -> tuple[int, int, int]:
    """Set ``thresholds`` for this process; returns them."""
    gc.set_threshold(*thresholds)
    return thresholds
