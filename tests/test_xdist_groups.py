"""The suite's workers keep an ``xdist_group`` on one worker.

The conformance modules start the runs of all their cases in one module fixture, so their
cases must run on one worker (``@pytest.mark.xdist_group`` with ``--dist loadgroup``, as
``make test`` runs). pytest-xdist groups a test by appending ``@group`` to its node id;
when the installed pytest and pytest-xdist disagree on how a node id is changed (pytest
9.2 no longer reads the attribute xdist 3.8 writes: see the pin in pyproject.toml), the
suffix is missing, nothing is grouped, and every worker ran every conformance run: a
third of the suite's CPU, silently. This test fails instead.
"""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("grouping-check")
def test_a_test_of_an_xdist_group_carries_its_group_to_the_scheduler(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not on an xdist worker with --dist loadgroup (make test runs it so)")
    assert request.node.nodeid.endswith("@grouping-check"), (
        f"--dist loadgroup did not group {request.node.nodeid!r}: this pytest-xdist cannot change "
        "this pytest's node ids, and grouped tests spread over every worker")
