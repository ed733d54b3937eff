"""The official MCP conformance suite's client scenarios, run against the host's client.

Every client scenario that is neither under ``auth/`` nor an ``[extension]`` runs once at
2025-11-25 (initialize handshake) and once at 2026-07-28 (stateless, per-request
``_meta``) where the suite applies it, against ``python -m hostapp conformance-client``.
The list is checked in so that collection needs no Node; a separate test fails when
the installed suite's list differs, so a new scenario cannot be skipped silently.

The suite starts a Node process and a Python client per scenario (a second or two
each), so the selected scenarios run two at a time in threads, started by the first
test that needs a result.
"""

from __future__ import annotations

import sys

import pytest

from tests.support.conformance import (
    SPEC_VERSIONS,
    ConformanceSuiteMissing,
    list_client_scenarios,
    require_suite,
    scenario_runs_started,
)

CLIENT_SCENARIOS: dict[str, list[str]] = {
    "2025-11-25": [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "json-schema-2020-12-preservation",
    ],
    "2026-07-28": [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "http-invalid-tool-headers",
        "json-schema-ref-no-deref",
        "json-schema-2020-12-preservation",
    ],
}

#: The ``[extension]`` client scenarios outside ``auth/`` (the skills extension, SEP-2640):
#: on no revision's timeline, so run at the suite's choice of revision.
EXTENSION_SCENARIOS = [
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
]

CASES: list[tuple[str | None, str]] = [
    (version, scenario) for version in SPEC_VERSIONS for scenario in CLIENT_SCENARIOS[version]
] + [(None, scenario) for scenario in EXTENSION_SCENARIOS]

CLIENT_COMMAND = [sys.executable, "-m", "hostapp", "conformance-client"]


def _require_suite_or_fail() -> None:
    try:
        require_suite()
    except ConformanceSuiteMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.mark.parametrize("spec_version", SPEC_VERSIONS)
def test_checked_in_scenario_list_matches_the_installed_suite(spec_version: str) -> None:
    _require_suite_or_fail()
    assert list_client_scenarios(spec_version) == CLIENT_SCENARIOS[spec_version], (
        "the installed conformance suite lists other client scenarios than CLIENT_SCENARIOS; "
        "update the list (and the README's conformance table)"
    )


def test_checked_in_extension_scenario_list_matches_the_installed_suite() -> None:
    _require_suite_or_fail()
    assert list_client_scenarios(None, extension=True) == EXTENSION_SCENARIOS, (
        "the installed conformance suite lists other extension client scenarios than EXTENSION_SCENARIOS; "
        "update the list (and the README's conformance table)"
    )


@pytest.fixture(scope="module")
def scenario_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """Futures of the runs of every selected (spec_version, scenario), started together."""
    try:
        require_suite()
    except ConformanceSuiteMissing as exc:
        yield exc
        return
    selected = [
        (item.callspec.params["spec_version"], item.callspec.params["scenario"])
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_client_scenario" and hasattr(item, "callspec")
    ]
    # The runs outlive any one test's isolated home, so they get one of their own.
    client_env = {"HOSTAPP_HOME": str(tmp_path_factory.mktemp("conformance-home"))}
    # Longest first: sse-retry waits out its retry interval, so it should not be last.
    selected.sort(key=lambda case: case[1] != "sse-retry")
    with scenario_runs_started(
        selected,
        CLIENT_COMMAND,
        lambda spec_version, scenario: tmp_path_factory.mktemp(f"conformance-{spec_version}-{scenario}"),
        extra_env=client_env,
    ) as runs:
        yield runs


# The runs of every selected case start together, in one process (the module's fixture):
# the cases stay on one xdist worker, or each worker would run them all.
@pytest.mark.xdist_group("conformance-client")
@pytest.mark.parametrize(("spec_version", "scenario"), CASES, ids=[f"{v or 'extension'}-{s}" for v, s in CASES])
def test_client_scenario(spec_version: str | None, scenario: str, scenario_runs) -> None:
    if isinstance(scenario_runs, ConformanceSuiteMissing):
        pytest.fail(str(scenario_runs), pytrace=False)
    run = scenario_runs[(spec_version, scenario)].result()
    if not run.passed():
        pytest.fail(run.failure_report(), pytrace=False)


def test_a_consenting_person_keeps_every_default_and_fills_what_is_required() -> None:
    from hostapp.conformance import prefilled_answer

    answer = prefilled_answer(
        {
            "message": "Your details",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "status": {"type": "string", "enum": ["active", "inactive"], "default": "inactive"},
                    "verified": {"type": "boolean", "default": False},
                    "confirmed": {"type": "boolean"},
                    "city": {"type": "string"},
                    "nickname": {"type": "string", "minLength": 1},
                },
                "required": ["nickname"],
            },
        }
    )
    assert answer == {
        "action": "accept",
        "content": {
            "name": "John Doe",
            "age": 30,
            "score": 95.5,
            "status": "inactive",
            "verified": False,
            "confirmed": True,
            "nickname": "value",
        },
    }
