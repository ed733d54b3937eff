"""The regression guard still works: ``python -m bench.compare REF`` checks REF out, runs
every case on both trees in alternation and reports their ratios (tiny floods: the
numbers mean nothing, that each case measured both commits does)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_compare_measures_both_commits_in_every_case(tmp_path: Path) -> None:
    output = tmp_path / "compare.json"
    proc = subprocess.run([sys.executable, "-m", "bench.compare", "HEAD", "--count", "300", "--rounds", "2",
                           "--lag-operations", "100", "--lag-seconds", "1", "--json", str(output)],
                          cwd=REPO, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(output.read_text())
    assert set(report["rounds"]) == {"intake", "agent", "cli", "rows", "lag"}
    for case, rounds in report["rounds"].items():
        assert len(rounds) == 2, case
        # (a lag may be 0 ms; a rate never is)
        assert all(r["floor"] > 0 and r["head"] >= 0 and r["ref"] >= 0 for r in rounds), case
        assert case == "lag" or all(r["head"] > 0 and r["ref"] > 0 for r in rounds), case
    assert all(len(report["call_seconds"][side]) == 2 for side in ("head", "ref"))
    for case in ("intake", "agent", "cli", "rows", "lag"):
        assert f"| {case} |" in proc.stdout
    # The worktree of REF is gone again.
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    assert str(output.parent) not in worktrees and "bench-compare-" not in worktrees
