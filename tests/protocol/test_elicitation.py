"""Form and URL elicitation in the protocol layer: schema subset, defaults, validation, URLs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from hostapp.protocol.elicitation import (
    ElicitationContentError,
    ElicitationSchemaError,
    Field,
    Option,
    UrlElicitationError,
    build_accept,
    build_cancel,
    build_decline,
    default_content,
    describe_form_request,
    describe_url_request,
    parse_requested_schema,
    validate_content,
)

EVERYTHING_TOOL = (
    Path(__file__).resolve().parents[1]
    / "peers/node_modules/@modelcontextprotocol/server-everything/dist/tools/trigger-elicitation-request.js"
)

#: Every kind the 2025-11-25 subset defines, with the optional keywords of each.
ALL_KINDS = {
    "type": "object",
    "title": "Profile",
    "properties": {
        "name": {"type": "string", "title": "Name", "description": "Full name", "minLength": 2, "maxLength": 40},
        "email": {"type": "string", "format": "email"},
        "homepage": {"type": "string", "format": "uri"},
        "birthday": {"type": "string", "format": "date"},
        "meeting": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 0, "maximum": 150, "default": 30},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1, "default": 0.5},
        "subscribe": {"type": "boolean", "default": True},
        "colour": {"type": "string", "enum": ["red", "green"], "default": "green"},
        "hero": {
            "type": "string",
            "oneOf": [{"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}],
        },
        "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
        "instruments": {
            "type": "array",
            "items": {"type": "string", "enum": ["guitar", "piano", "drums"]},
            "minItems": 1,
            "maxItems": 2,
            "default": ["piano"],
        },
        "fish": {"type": "array",
                 "items": {"anyOf": [{"const": "f1", "title": "Tuna"}, {"const": "f2", "title": "Trout"}]}},
    },
    "required": ["name", "hero"],
}


def by_name(fields: list[Field]) -> dict[str, Field]:
    return {f.name: f for f in fields}


def valid_answer() -> dict:
    return {
        "name": "Ada Lovelace",
        "email": "ada@example.org",
        "homepage": "https://example.org/ada",
        "birthday": "1815-12-10",
        "meeting": "2026-11-22T10:00:00+01:00",
        "age": 36,
        "ratio": 0.25,
        "subscribe": False,
        "colour": "red",
        "hero": "h2",
        "pet": "p1",
        "instruments": ["guitar", "drums"],
        "fish": ["f2"],
    }


# ------------------------------------------------------------------ parsing


def test_every_kind_becomes_a_typed_field_in_schema_order():
    fields = parse_requested_schema(ALL_KINDS)
    assert [f.name for f in fields] == list(ALL_KINDS["properties"])
    kinds = {f.name: f.kind for f in fields}
    assert kinds == {
        "name": "string", "email": "string", "homepage": "string", "birthday": "string",
        "meeting": "string", "age": "integer", "ratio": "number", "subscribe": "boolean",
        "colour": "single_select", "hero": "single_select", "pet": "single_select",
        "instruments": "multi_select", "fish": "multi_select",
    }


def test_constraints_titles_and_required_are_carried():
    f = by_name(parse_requested_schema(ALL_KINDS))
    assert (f["name"].title, f["name"].description, f["name"].min_length, f["name"].max_length) == (
        "Name", "Full name", 2, 40,
    )
    assert f["name"].required and f["hero"].required and not f["email"].required
    assert [f[n].format for n in ("email", "homepage", "birthday", "meeting")] == [
        "email", "uri", "date", "date-time",
    ]
    assert (f["age"].minimum, f["age"].maximum) == (0, 150)
    assert (f["instruments"].min_items, f["instruments"].max_items) == (1, 2)
    # A field without a title is labelled by its property name.
    assert f["email"].title == "email"


def test_options_of_each_enum_style():
    f = by_name(parse_requested_schema(ALL_KINDS))
    assert f["colour"].options == (Option("red", "red"), Option("green", "green"))
    assert f["hero"].options == (Option("h1", "Superman"), Option("h2", "Wonder Woman"))
    assert f["pet"].options == (Option("p1", "Cats"), Option("p2", "Dogs"))
    assert [o.value for o in f["instruments"].options] == ["guitar", "piano", "drums"]
    assert f["fish"].options == (Option("f1", "Tuna"), Option("f2", "Trout"))


def test_defaults_are_applied_and_fields_without_one_left_out():
    fields = parse_requested_schema(ALL_KINDS)
    assert default_content(fields) == {
        "age": 30, "ratio": 0.5, "subscribe": True, "colour": "green", "instruments": ["piano"],
    }


def test_default_content_does_not_share_lists_with_the_fields():
    fields = parse_requested_schema(ALL_KINDS)
    default_content(fields)["instruments"].append("drums")
    assert by_name(fields)["instruments"].default == ["piano"]


def test_integral_float_default_of_an_integer_field_becomes_an_int():
    (field,) = parse_requested_schema({"type": "object", "properties": {"n": {"type": "integer", "default": 3.0}}})
    assert field.default == 3 and isinstance(field.default, int)


def test_schema_the_reference_server_sends_is_accepted():
    """The exact schema of server-everything's trigger-elicitation-request tool."""
    source = EVERYTHING_TOOL.read_text()
    start = source.index("requestedSchema: {") + len("requestedSchema: ")
    depth = 0
    # the schema's texts hold no braces; ``end`` is read after the loop
    for end, char in enumerate(source[start:], start):  # noqa: B007
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            break
    block = source[start : end + 1]
    as_json = re.sub(r"(\b[A-Za-z]+):", r'"\1":', block)  # quote JS object keys
    as_json = re.sub(r",(\s*[}\]])", r"\1", as_json)  # drop trailing commas
    schema = json.loads(as_json)
    fields = by_name(parse_requested_schema(schema))
    assert fields["legacyTitledEnum"].options[0] == Option("pet-1", "Cats")
    assert fields["titledMultipleSelectEnum"].default == ["fish-1"]
    assert default_content(fields.values())["integer"] == 42


def test_schema_from_the_official_python_sdk_is_accepted():
    from typing import Literal

    from mcp.server.elicitation import render_elicitation_schema
    from pydantic import BaseModel

    class Booking(BaseModel):
        guest: str
        nights: int = 1
        breakfast: bool = False
        room: Literal["single", "double"] = "double"

    fields = by_name(parse_requested_schema(render_elicitation_schema(Booking)))
    assert fields["guest"].required and fields["room"].default == "double"
    assert fields["nights"].kind == "integer"


def test_form_request_params_give_message_and_fields():
    request = describe_form_request({"message": "Who are you?", "requestedSchema": ALL_KINDS})
    assert request.message == "Who are you?"
    assert len(request.fields) == len(ALL_KINDS["properties"])
    with pytest.raises(ElicitationSchemaError):
        describe_form_request({"mode": "url", "message": "m", "url": "https://x.example"})


# ------------------------------------------------------------------ outside the subset


def with_property(prop: dict, required: list[str] | None = None) -> dict:
    schema = {"type": "object", "properties": {"field": prop}}
    if required is not None:
        schema["required"] = required
    return schema


@pytest.mark.parametrize(
    "prop, words",
    [
        ({"type": "object", "properties": {}}, "type 'object'"),
        ({"type": "array", "items": {"type": "string"}}, "multi-selects"),
        ({"type": "array", "items": {"type": "integer", "enum": ["1"]}}, "items may only be"),
        ({"type": "string", "pattern": "^a"}, '"pattern"'),
        ({"type": "string", "format": "hostname"}, "format 'hostname'"),
        ({"type": "string", "minLength": -1}, "minLength"),
        ({"type": "string", "minLength": 5, "maxLength": 2}, "greater than maxLength"),
        ({"type": "integer", "minimum": 10, "maximum": 1}, "greater than maximum"),
        ({"type": "integer", "exclusiveMinimum": 0}, '"exclusiveMinimum"'),
        ({"type": "number", "minimum": "0"}, "minimum must be a number"),
        ({"type": "string", "enum": []}, "non-empty list"),
        ({"type": "string", "enum": [1, 2]}, "list of strings"),
        ({"type": "string", "enum": ["a", "a"]}, "repeats"),
        ({"type": "string", "enum": ["a", "b"], "enumNames": ["A"]}, "one title per enum value"),
        ({"type": "string", "oneOf": [{"const": "a", "title": "A", "description": "x"}]}, '"const"'),
        ({"type": "string", "oneOf": [{"type": "string"}]}, '"const"'),
        ({"type": "string", "enum": ["a"], "minLength": 1}, '"minLength"'),
        ({"type": "string", "default": 3}, "default must be a string"),
        ({"type": "integer", "default": 1.5}, "default must be an integer"),
        ({"type": "number", "default": "3"}, "default must be a number"),
        ({"type": "boolean", "default": "yes"}, "true or false"),
        ({"type": "string", "enum": ["a"], "default": "b"}, "not one of the options"),
        ({"type": "array", "items": {"enum": ["a"]}, "default": ["z"]}, "list of the options"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, 'no "type"'),
        ({"$ref": "#/$defs/x"}, 'no "type"'),
        ("string", "must be a JSON object"),
    ],
)
def test_property_outside_the_subset_is_a_clear_error_naming_it(prop, words):
    with pytest.raises(ElicitationSchemaError) as caught:
        parse_requested_schema(with_property(prop))
    assert caught.value.property_name == "field"
    assert "'field'" in str(caught.value)
    assert words in str(caught.value)


@pytest.mark.parametrize(
    "schema, words",
    [
        ([], "JSON object"),
        ({"type": "array", "properties": {}}, '"type": "object"'),
        ({"type": "object"}, '"properties" object'),
        ({"type": "object", "properties": {}, "required": "a"}, "list of property names"),
        ({"type": "object", "properties": {}, "required": ["ghost"]}, '"ghost"'),
        ({"type": "object", "properties": {}, "$defs": {}}, '"$defs"'),
        ({"type": "object", "properties": {}, "allOf": []}, '"allOf"'),
    ],
)
def test_schema_outside_the_subset_is_a_clear_error(schema, words):
    with pytest.raises(ElicitationSchemaError, match=re.escape(words)):
        parse_requested_schema(schema)


def test_annotations_that_do_not_constrain_are_let_through():
    schema = with_property({"type": "string", "examples": ["x"], "$comment": "c"})
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    assert parse_requested_schema(schema)[0].kind == "string"


def test_parsing_does_not_modify_the_schema():
    schema = copy.deepcopy(ALL_KINDS)
    parse_requested_schema(schema)
    assert schema == ALL_KINDS


# ------------------------------------------------------------------ answers


def test_a_full_valid_answer_has_no_errors_and_is_accepted_as_is():
    fields = parse_requested_schema(ALL_KINDS)
    assert validate_content(fields, valid_answer()) == {}
    assert build_accept(fields, valid_answer()) == {"action": "accept", "content": valid_answer()}


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("name", "A", "at least 2 characters"),
        ("name", "x" * 41, "at most 40 characters"),
        ("name", 12, "must be text"),
        ("email", "not-an-address", "email address"),
        ("email", "two@at@signs", "email address"),
        ("homepage", "example.org/no-scheme", "scheme"),
        ("homepage", "https://exa mple.org", "scheme"),
        ("birthday", "10.12.1815", "YYYY-MM-DD"),
        ("birthday", "2023-02-30", "YYYY-MM-DD"),
        ("meeting", "2026-11-22T10:00:00", "time zone"),
        ("meeting", "2026-11-22T25:00:00Z", "time zone"),
        ("age", -1, "at least 0"),
        ("age", 151, "at most 150"),
        ("age", 3.5, "whole number"),
        ("age", "many", "whole number"),
        ("age", True, "whole number"),
        ("ratio", 1.5, "at most 1"),
        ("ratio", float("nan"), "must be a number"),
        ("subscribe", "yes", "true or false"),
        ("colour", "blue", "one of the options"),
        ("hero", "Superman", "one of the options"),  # the title is not the value
        ("instruments", ["guitar", "piano", "drums"], "at most 2"),
        ("instruments", ["banjo"], "from the options"),
        ("instruments", ["piano", "piano"], "at most once"),
        ("instruments", "piano", "from the options"),
    ],
)
def test_each_constraint_is_enforced_with_a_message(name, value, message):
    fields = parse_requested_schema(ALL_KINDS)
    answer = valid_answer() | {name: value}
    errors = validate_content(fields, answer)
    assert list(errors) == [name]
    assert message in errors[name]
    with pytest.raises(ElicitationContentError) as caught:
        build_accept(fields, answer)
    assert caught.value.errors == errors


def test_missing_required_fields_are_reported_and_blanks_count_as_missing():
    fields = parse_requested_schema(ALL_KINDS)
    assert validate_content(fields, {}) == {"name": "required", "hero": "required"}
    assert validate_content(fields, {"name": "   ", "hero": None}) == {"name": "required", "hero": "required"}


def test_a_required_multi_select_needs_a_choice_unless_min_items_is_zero():
    schema = {
        "type": "object",
        "properties": {
            "some": {"type": "array", "items": {"enum": ["a"]}},
            "none_ok": {"type": "array", "items": {"enum": ["a"]}, "minItems": 0},
        },
        "required": ["some", "none_ok"],
    }
    fields = parse_requested_schema(schema)
    assert validate_content(fields, {"some": [], "none_ok": []}) == {"some": "required"}
    assert build_accept(fields, {"some": ["a"], "none_ok": []})["content"] == {"some": ["a"], "none_ok": []}


def test_unknown_keys_in_an_answer_are_reported():
    fields = parse_requested_schema(ALL_KINDS)
    assert validate_content(fields, valid_answer() | {"extra": 1}) == {"extra": "not a field of this form"}


def test_accept_coerces_text_from_editors_and_leaves_blank_optionals_out():
    fields = parse_requested_schema(ALL_KINDS)
    answer = {"name": "Ada", "hero": "h1", "age": " 41 ", "ratio": "0.75", "email": "",
              "instruments": ("guitar",), "fish": []}
    result = build_accept(fields, answer)
    assert result == {
        "action": "accept",
        "content": {"name": "Ada", "hero": "h1", "age": 41, "ratio": 0.75, "instruments": ["guitar"]},
    }
    assert isinstance(result["content"]["age"], int)
    json.dumps(result)  # the answer must be sendable as it is


def test_integral_float_for_an_integer_field_is_sent_as_an_int():
    fields = parse_requested_schema(ALL_KINDS)
    content = build_accept(fields, valid_answer() | {"age": 40.0})["content"]
    assert content["age"] == 40 and isinstance(content["age"], int)


def test_date_time_accepts_utc_and_offsets():
    fields = parse_requested_schema(ALL_KINDS)
    for moment in ("2026-11-22T10:00:00Z", "2026-11-22T10:00:00.123-05:30"):
        assert validate_content(fields, valid_answer() | {"meeting": moment}) == {}


def test_decline_and_cancel_carry_no_content():
    assert build_decline() == {"action": "decline"}
    assert build_cancel() == {"action": "cancel"}


# ------------------------------------------------------------------ URL mode


def url_params(url: str, **extra) -> dict:
    return {"mode": "url", "message": "Sign in to continue", "url": url, "elicitationId": "el-1"} | extra


def test_url_request_keeps_the_full_url_and_extracts_the_domain():
    request = describe_url_request(url_params("https://auth.example.com:8443/login?state=abc#frag"))
    assert request.url == "https://auth.example.com:8443/login?state=abc#frag"
    assert request.domain == "auth.example.com"
    assert request.display_domain == "auth.example.com"
    assert not request.is_internationalized
    assert (request.message, request.elicitation_id) == ("Sign in to continue", "el-1")


def test_internationalized_domain_is_shown_with_its_punycode():
    request = describe_url_request(url_params("https://bücher.example/shop"))
    assert request.domain == "bücher.example"
    assert request.ascii_domain == "xn--bcher-kva.example"
    assert request.display_domain == "bücher.example (xn--bcher-kva.example)"


def test_look_alike_domain_in_punycode_is_revealed():
    # "аpple.com" with a Cyrillic "а", sent already encoded.  # noqa: RUF003 - the look-alike is the point
    request = describe_url_request(url_params("https://xn--pple-43d.com/"))
    assert request.is_internationalized
    assert request.domain != "apple.com"
    assert "xn--pple-43d.com" in request.display_domain


def test_plain_ascii_hosts_that_idna_would_refuse_are_kept():
    assert describe_url_request(url_params("http://build_box.lan/")).domain == "build_box.lan"
    assert describe_url_request(url_params("http://127.0.0.1:8000/x")).domain == "127.0.0.1"
    assert describe_url_request(url_params("http://[::1]:8000/x")).domain == "::1"


@pytest.mark.parametrize(
    "url, words",
    [
        ("javascript:alert(1)", "scheme javascript:"),
        ("JavaScript:alert(1)", "scheme javascript:"),
        ("file:///etc/passwd", "scheme file:"),
        ("data:text/html,<script>x</script>", "scheme data:"),
        ("ftp://example.com/x", "scheme ftp:"),
        ("//example.com/x", "scheme (none)"),
        ("https:///path-only", "no host"),
        ("https://bank.example@evil.example/", "user name"),
        ("https://user:pw@example.com/", "user name"),
        ("https://example.com/a b", "spaces or control"),
        ("https://example.com/\x07", "spaces or control"),
        ("https://example.com:99999/", "cannot be parsed"),
        ("https://xn--zz.example/", "not a valid domain"),
    ],
)
def test_unsafe_or_malformed_urls_are_refused(url, words):
    with pytest.raises(UrlElicitationError, match=re.escape(words)):
        describe_url_request(url_params(url))


@pytest.mark.parametrize("missing", ["url", "message", "elicitationId"])
def test_url_request_needs_its_fields(missing):
    params = url_params("https://example.com/")
    del params[missing]
    with pytest.raises(UrlElicitationError, match=missing):
        describe_url_request(params)


def test_form_params_are_not_a_url_request():
    with pytest.raises(UrlElicitationError, match="not a URL-mode"):
        describe_url_request({"message": "m", "requestedSchema": ALL_KINDS})


@pytest.mark.parametrize("prop", [
    {"type": "array", "items": {"type": "string", "enum": ["a"]}, "default": [["a"]]},
    {"type": "string", "enum": ["a"], "default": ["a"]},
    {"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": {"a": 1}},
])
def test_a_default_that_is_no_option_value_is_refused_whatever_its_type(prop):
    from hostapp.protocol.elicitation import ElicitationSchemaError, parse_requested_schema

    with pytest.raises(ElicitationSchemaError, match="default"):
        parse_requested_schema({"type": "object", "properties": {"p": prop}})
