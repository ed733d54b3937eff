"""Fuzz: a tool result as the CLI and the window read it (``hostapp.cli.render_result_text``,
``hostapp.ui.result_view.result_as_text``). A server decides the shape of its result, so
any JSON object must give text, never an exception.

(Both once raised on a ``content`` that is not a list of objects, a string or a list of
numbers, or on a block whose ``data`` or ``resource`` has another type; they read it
through ``hostapp.protocol.tool_results`` now.)
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.budget import count, fuzz, time_limit
from tests.fuzz.strategies import json_values

pytestmark = pytest.mark.timeout(time_limit())

blocks = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "audio", "resource", "resource_link", "x"])},
                          optional={"text": json_values, "data": json_values, "mimeType": json_values,
                                    "resource": json_values, "uri": json_values}),
    json_values)
results = st.one_of(
    st.fixed_dictionaries({}, optional={"content": st.one_of(st.lists(blocks, max_size=4), json_values),
                                        "isError": json_values, "structuredContent": json_values}),
    st.dictionaries(st.text(max_size=8), json_values, max_size=4))


@fuzz
@given(results)
def test_the_cli_renders_any_result(result):
    from hostapp.cli import render_result_text

    count("cli.render_result_text")
    assert isinstance(render_result_text(result), str)


@fuzz
@given(results, st.one_of(st.none(), st.dictionaries(st.sampled_from(["code", "message"]), json_values)))
def test_the_window_copies_any_result(result, error):
    from hostapp.ui.result_view import result_as_text

    count("ui.result_as_text")
    assert isinstance(result_as_text(result, error), str)
