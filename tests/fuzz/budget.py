"""How hard the fuzz targets try: ``HOSTAPP_FUZZ_EXAMPLES`` Hypothesis examples per target
(a short run by default, for the normal suite; ``make fuzz`` sets it for >= 100,000
inputs in all). Where a target takes bytes, each example is a seed that the target runs
together with MUTANTS cheap mutants of it.

Every target counts the inputs it really ran (:func:`count`); the fuzz conftest prints
the counts and the process's peak memory at the end of the run.
"""

from __future__ import annotations

import collections
import os
from datetime import timedelta

from hypothesis import HealthCheck, settings

EXAMPLES = int(os.environ.get("HOSTAPP_FUZZ_EXAMPLES", "25"))
#: Byte-level mutants run per example, beside the example itself (strategies.mutants).
MUTANTS = 15

#: Inputs run per target, by target name.
COUNTS: collections.Counter[str] = collections.Counter()

#: One input that takes longer than this is a hang (Hypothesis reports it as a failure
#: with the input); a test as a whole is stopped by pytest-timeout.
PER_INPUT = timedelta(seconds=2)

fuzz = settings(
    max_examples=EXAMPLES,
    deadline=PER_INPUT,
    database=None,  # no .hypothesis folder in the tree; a failure prints its input
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


def count(target: str) -> None:
    COUNTS[target] += 1


def time_limit(per_example_ms: float = 250.0) -> float:
    """pytest-timeout for one target: generous for its examples, never unbounded."""
    return 60 + EXAMPLES * per_example_ms / 1000
