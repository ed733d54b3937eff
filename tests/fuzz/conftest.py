"""The fuzz targets: Hypothesis-generated and mutated input for the parsers and the
session, which may raise only their declared errors, in bounded time and memory.

Memory: each target's growth of the resident size is checked (a leak or an unbounded
buffer shows as growth over the run), and the run's peak is printed with the counts.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.fuzz.budget import COUNTS, EXAMPLES

#: A target may not grow the process's resident size by more than this over its run.
MAX_GROWTH_BYTES = 200 * 1024 * 1024


def _status(field: str) -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@pytest.fixture(autouse=True)
def quiet_logs():
    """Bad input is logged by design (a warning per message); pytest keeps every record of
    a test in memory, which over 10,000 inputs is the largest memory of the run."""
    logger = logging.getLogger("hostapp")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


#: The peak resident size during each target (its high-water mark, reset before it ran).
PEAKS: dict[str, int] = {}


def _reset_high_water_mark() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


@pytest.fixture(autouse=True)
def bounded_memory(request):
    before = _status("VmRSS")
    _reset_high_water_mark()
    yield
    after = _status("VmRSS")
    PEAKS[request.node.name] = _status("VmHWM")
    if before and after:
        assert after - before < MAX_GROWTH_BYTES, f"resident size grew by {(after - before) >> 20} MiB"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not COUNTS:
        return
    write = terminalreporter.write_line
    write(f"fuzz: HOSTAPP_FUZZ_EXAMPLES={EXAMPLES}; inputs run per target:")
    for target, n in sorted(COUNTS.items()):
        write(f"  {target}: {n}")
    write(f"  total: {sum(COUNTS.values())}")
    write("peak resident size of the process while each target ran:")
    for name, peak in PEAKS.items():
        write(f"  {name}: {peak >> 20} MiB")
