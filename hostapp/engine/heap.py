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

#: The collector's thresholds for the app's processes (CPython's are 700, 10, 10).
GC_THRESHOLDS = (10_000, 50, 20)


def tune_garbage_collector() -> tuple[int, int, int]:
    """Set :data:`GC_THRESHOLDS` for this process; returns them."""
    gc.set_threshold(*GC_THRESHOLDS)
    return GC_THRESHOLDS
