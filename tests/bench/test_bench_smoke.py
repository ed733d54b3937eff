"""The benchmarks still work: ``python -m bench --smoke`` runs every section, tiny, and
writes a JSON report with each of them. Its numbers are not checked (they mean nothing
at this size); that every section ran and measured something is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTIONS = {"intake", "journal", "window", "startup", "resume"}


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_smoke_run_reports_every_section(tmp_path: Path) -> None:
    output = tmp_path / "smoke.json"
    proc = subprocess.run([sys.executable, "-m", "bench", "--smoke", "--output", str(output)], cwd=REPO,
                          capture_output=True, text=True, timeout=220,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert output.exists(), f"no report written:\n{proc.stdout}\n{proc.stderr[-3000:]}"
    report = json.loads(output.read_text())
    assert report["smoke"] is True
    assert set(report["sections"]) == SECTIONS
    assert report["failed"] == [], f"sections that broke: {report['failed']}\n{proc.stderr[-3000:]}"
    for name, rows in report["sections"].items():
        assert rows, f"section {name} has no rows"
        measured = [r for r in rows if not r["name"].startswith("skipped")]
        assert all(r["value"] >= 0 for r in measured), name
    # Progress intake: every client got every notification, through the engine too.
    intake = report["raw"]["intake_http"]
    count = report["sizes"]["notifications"]
    assert {c: intake[c]["received"] for c in ("floor", "sdk", "hostapp")} == dict.fromkeys(
        ("floor", "sdk", "hostapp"), count)
    assert intake["hostapp"]["status"] == "completed" and intake["hostapp"]["journaled_progress"] == count
    # ... and through the agent: its client saw the operation end with every notification counted.
    assert intake["agent"]["status"] == "completed" and intake["agent"]["received"] == count
    assert report["raw"]["window"]["agent_load"]["table_rows"] >= report["sizes"]["window_operations"]
    # Resume: a second restart on the home the first one left finds every operation again.
    resume = report["raw"].get("resume_20")
    if resume is not None:  # (not there when no keyring could be started)
        again = resume["measure_again"]
        assert again["ended_without_contact"] == 0 and again["all_attached_s"] is not None, again
        through = resume["through_agent"]
        assert through["listed"] == through["operations"] and through["all_attached_s"] is not None, through
        # The window as the agent's client listed every unfinished operation after one more restart.
        listed = resume["list_through_agent"]
        assert listed["listed"] == listed["operations"] > 0 and listed["shown_s"] is not None, listed
        # The floor: a bare client asked the server about every one of them and had its answers.
        floor = resume["floor"]
        assert floor["failed"] == 0 and floor["answered"] == floor["requests_for"] == floor["operations"] > 0, floor
        assert floor["watched_answered_s"] is not None and floor["server_cpu_s"] is not None, floor
    assert "| intake |" in proc.stdout  # the table
    assert proc.returncode == 0, proc.stderr[-3000:]
