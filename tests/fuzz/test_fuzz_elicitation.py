"""Fuzz: what a server asks the person (elicitation schemas and URLs) and the tool input
schemas the window builds forms from. Any JSON may come in; only the declared errors
may come out (ElicitationSchemaError, ElicitationContentError, UrlElicitationError), and
a form's answer is built or refused, never half-made."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hostapp.protocol import elicitation as el
from hostapp.protocol.schema_form import build_form, defaults, validate_arguments
from tests.fuzz.budget import MUTANTS, count, fuzz, time_limit
from tests.fuzz.strategies import generators, json_values

pytestmark = pytest.mark.timeout(time_limit())

DECLARED = (el.ElicitationSchemaError, el.ElicitationContentError, el.UrlElicitationError)

texts = st.text(max_size=12)
numbers = st.one_of(st.integers(-1000, 1000), st.floats(allow_nan=False, allow_infinity=False))
property_schemas = st.one_of(
    st.fixed_dictionaries({"type": st.just("string")}, optional={
        "minLength": st.integers(-1, 20), "maxLength": st.integers(-1, 20), "title": texts, "default": texts,
        "format": st.sampled_from(["email", "uri", "date", "date-time", "regex", "nope"])}),
    st.fixed_dictionaries({"type": st.sampled_from(["number", "integer"])}, optional={
        "minimum": numbers, "maximum": numbers, "default": numbers, "description": texts}),
    st.fixed_dictionaries({"type": st.just("boolean")}, optional={"default": st.booleans()}),
    st.fixed_dictionaries({"type": st.just("string"), "enum": st.lists(texts, max_size=4)},
                          optional={"enumNames": st.lists(texts, max_size=4), "default": texts}),
    st.fixed_dictionaries({"type": st.just("string"), "oneOf": st.lists(
        st.fixed_dictionaries({"const": texts, "title": texts}), max_size=3)}),
    st.fixed_dictionaries({"type": st.just("array"), "items": st.one_of(
        st.fixed_dictionaries({"type": st.just("string"), "enum": st.lists(texts, max_size=3)}),
        st.fixed_dictionaries({"anyOf": st.lists(st.fixed_dictionaries({"const": texts, "title": texts}),
                                                 max_size=3)}))},
        optional={"minItems": st.integers(-1, 4), "maxItems": st.integers(-1, 4), "default": json_values}),
)


@st.composite
def requested_schemas(draw):
    props = draw(st.dictionaries(texts, property_schemas, max_size=4))
    schema = {"type": "object", "properties": props}
    if props and draw(st.booleans()):
        schema["required"] = draw(st.lists(st.sampled_from(sorted(props)), max_size=3))
    return schema


def mutate_json(value, rnd):
    """A copy of a JSON value with one member or item replaced, removed or added."""
    value = copy.deepcopy(value)
    containers = [value]
    for _ in range(rnd.randint(1, 4)):
        target = rnd.choice(containers)
        junk = rnd.choice([None, True, 0, -1, 1e308, "", "x" * 50, [], {}, {"type": "object"}, ["a", "a"],
                           "string", "array", {"$ref": "#"}, {"$ref": "#/nope"}])
        if isinstance(target, dict) and target:
            key = rnd.choice(sorted(target, key=str))
            action = rnd.randrange(3)
            if action == 0:
                target[key] = junk
            elif action == 1:
                del target[key]
            else:
                target[rnd.choice(["type", "enum", "items", "default", "minimum", "format", "oneOf", "anyOf",
                                   "required", "properties", "$ref", "$defs", "const", "x"])] = junk
        elif isinstance(target, list) and target:
            target[rnd.randrange(len(target))] = junk
        for item in (target.values() if isinstance(target, dict) else target if isinstance(target, list) else []):
            if isinstance(item, (dict, list)):
                containers.append(item)
    return value


def check_form_schema(schema, content) -> None:
    count("elicitation.form")
    try:
        request = el.describe_form_request({"message": "m", "requestedSchema": schema})
    except el.ElicitationSchemaError:
        return
    fields = request.fields
    for answer in (el.default_content(fields), content):
        if not isinstance(answer, dict):
            continue
        errors = el.validate_content(fields, answer)
        try:
            result = el.build_accept(fields, answer)
        except el.ElicitationContentError:
            assert errors
            continue
        assert not errors and result["action"] == "accept"


@fuzz
@given(st.one_of(requested_schemas(), json_values), st.one_of(st.dictionaries(texts, json_values, max_size=4),
                                                              json_values), generators)
def test_form_elicitation_schemas_and_answers(schema, content, rnd):
    check_form_schema(schema, content)
    for _ in range(MUTANTS):
        check_form_schema(mutate_json(schema, rnd), content)


urls = st.one_of(
    st.sampled_from(["https://example.com/a?b=c", "http://user:pw@example.com", "javascript:alert(1)",
                     "https://xn--80ak6aa92e.com", "https://\u0430pple.com", "https://[::1]:99999/",
                     "https://ex ample.com",
                     "file:///etc/passwd", "https://", "https://example.com:-1", "https://exa\u200bmple.com",
                     "https://" + "a" * 300 + ".com", "HTTPS://EXAMPLE.COM", "https://%00.com"]),
    st.text(max_size=40), st.text(max_size=20).map(lambda t: "https://" + t))


@fuzz
@given(st.fixed_dictionaries({"mode": st.sampled_from(["url", "url", "form", 3]),
                              "url": st.one_of(urls, json_values),
                              "message": st.one_of(texts, json_values),
                              "elicitationId": st.one_of(texts, json_values)}),
       generators)
def test_url_elicitations(params, rnd):
    for candidate in [params, *(mutate_json(params, rnd) for _ in range(MUTANTS))]:
        count("elicitation.url")
        try:
            request = el.describe_url_request(candidate)
        except el.UrlElicitationError:
            continue
        assert request.url and request.domain and request.display_domain


@fuzz
@given(st.one_of(requested_schemas(), json_values), json_values, generators)
def test_tool_input_schemas_become_forms(schema, arguments, rnd):
    for candidate in [schema, *(mutate_json(schema, rnd) for _ in range(MUTANTS // 3))]:
        count("schema_form")
        form = build_form(candidate)
        defaults(form)
        assert all(isinstance(line, str) for line in validate_arguments(candidate, arguments))
