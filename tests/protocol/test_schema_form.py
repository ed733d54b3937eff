"""Tool input schemas as form trees, their defaults, and argument validation."""

from __future__ import annotations

import copy
from typing import Literal

import pytest
from pydantic import BaseModel

from hostapp.protocol.schema_form import EnumOption, FormNode, build_form, defaults, validate_arguments

SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "title": "Query", "description": "What to look for",
                  "minLength": 1, "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
        "threshold": {"type": "number", "minimum": 0, "exclusiveMaximum": 1},
        "exact": {"type": "boolean", "default": False},
        "sort": {"enum": ["asc", "desc"], "default": "desc"},
        "level": {"enum": [1, 2, 3]},
        "kind": {"const": "search"},
        "since": {"type": "string", "format": "date-time"},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
        "filters": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "value": {"type": "string", "default": "*"}},
                "required": ["field"],
            },
        },
        "paging": {
            "type": "object",
            "properties": {"page": {"type": "integer", "default": 1}, "size": {"type": "integer"}},
        },
        "owner": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "target": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "meta": {"type": "object", "additionalProperties": {"type": "string"}},
        "labels": {"type": "object", "properties": {}, "patternProperties": {"^x-": {"type": "string"}}},
        "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]},
        "anything": {},
        "either": {"type": ["string", "integer"]},
        "note": {"type": ["string", "null"]},
    },
    "required": ["query", "owner"],
}


def children(node: FormNode) -> dict[str, FormNode]:
    return {child.name: child for child in node.properties}


# ------------------------------------------------------------------ tree


def test_root_is_an_object_with_children_in_schema_order():
    tree = build_form(SCHEMA)
    assert tree.kind == "object" and tree.path == () and tree.json_path == "$"
    assert [c.name for c in tree.properties] == list(SCHEMA["properties"])


def test_primitive_nodes_carry_their_constraints():
    nodes = children(build_form(SCHEMA))
    query = nodes["query"]
    assert (query.kind, query.title, query.description, query.required) == ("string", "Query", "What to look for", True)
    assert (query.min_length, query.max_length) == (1, 200)
    assert (nodes["limit"].kind, nodes["limit"].minimum, nodes["limit"].maximum) == ("integer", 1, 100)
    # An exclusive bound is not a widget limit; validation enforces it.
    assert (nodes["threshold"].kind, nodes["threshold"].minimum, nodes["threshold"].maximum) == ("number", 0, None)
    assert nodes["exact"].kind == "boolean"
    assert nodes["since"].format == "date-time"
    assert nodes["query"].title == "Query" and nodes["limit"].title == "limit"


def test_enums_and_const_become_options():
    nodes = children(build_form(SCHEMA))
    assert nodes["sort"].options == (EnumOption("asc", "asc"), EnumOption("desc", "desc"))
    assert nodes["level"].kind == "enum" and nodes["level"].options[2] == EnumOption(3, "3")
    assert nodes["kind"].options == (EnumOption("search", "search"),)


def test_arrays_of_primitives_and_of_objects():
    nodes = children(build_form(SCHEMA))
    tags = nodes["tags"]
    assert (tags.kind, tags.items.kind, tags.min_items, tags.max_items) == ("array", "string", 1, 5)
    assert tags.items.json_path == "$.tags[*]"
    filters = nodes["filters"]
    assert filters.items.kind == "object"
    inner = children(filters.items)
    assert inner["field"].required and not inner["value"].required
    assert inner["value"].json_path == "$.filters[*].value"


def test_nested_objects():
    nodes = children(build_form(SCHEMA))
    assert nodes["paging"].kind == "object"
    assert [c.name for c in nodes["paging"].properties] == ["page", "size"]
    assert children(nodes["owner"])["id"].path == ("owner", "id")


@pytest.mark.parametrize(
    "name, reason",
    [
        ("target", "'oneOf'"),
        ("meta", "keys are not fixed"),
        ("labels", "'patternProperties'"),
        ("pair", "'prefixItems'"),
        ("anything", "any JSON value"),
        ("either", "several types"),
    ],
)
def test_what_a_form_cannot_show_falls_back_to_raw_json(name, reason):
    node = children(build_form(SCHEMA))[name]
    assert node.kind == "raw_json"
    assert reason in node.reason
    assert node.schema == SCHEMA["properties"][name]


def test_type_with_null_is_a_nullable_field():
    note = children(build_form(SCHEMA))["note"]
    assert (note.kind, note.nullable) == ("string", True)


def test_non_object_root_is_one_raw_json_node():
    assert build_form({"type": "string"}).kind == "string"  # shown as one field
    root = build_form(["not", "a", "schema"])
    assert root.kind == "raw_json" and root.title == "Arguments"


def test_root_without_properties_is_a_form_with_no_fields():
    tree = build_form({"type": "object"})
    assert tree.kind == "object" and tree.properties == ()
    assert defaults(tree) == {}


def test_building_does_not_modify_the_schema():
    schema = copy.deepcopy(SCHEMA)
    build_form(schema)
    assert schema == SCHEMA


# ------------------------------------------------------------------ $ref and generated schemas


class Address(BaseModel):
    street: str
    postcode: int = 10115


class Folder(BaseModel):
    name: str
    subfolders: list[Folder] = []


class Order(BaseModel):
    item: str
    quantity: int = 1
    gift_note: str | None = None
    ship_to: Address
    bill_to: Address | None = None
    speed: Literal["standard", "express"] = "standard"
    reference: int | str = 0
    folder: Folder | None = None


def test_pydantic_schema_with_defs_refs_and_optionals():
    tree = build_form(Order.model_json_schema())
    nodes = children(tree)
    assert nodes["gift_note"].kind == "string" and nodes["gift_note"].nullable
    assert nodes["ship_to"].kind == "object" and nodes["ship_to"].required
    assert [c.name for c in nodes["ship_to"].properties] == ["street", "postcode"]
    assert nodes["bill_to"].kind == "object" and nodes["bill_to"].nullable
    assert nodes["speed"].kind == "enum"
    assert nodes["reference"].kind == "raw_json"


def test_recursive_reference_stops_at_raw_json():
    folder = children(build_form(Order.model_json_schema()))["folder"]
    assert folder.kind == "object"
    subfolder = children(folder)["subfolders"].items
    assert subfolder.kind == "raw_json" and "refers to itself" in subfolder.reason


def test_remote_and_dangling_references_are_raw_json_and_nothing_is_fetched():
    tree = build_form({
        "type": "object",
        "properties": {
            "remote": {"$ref": "https://example.invalid/schema.json"},
            "dangling": {"$ref": "#/$defs/Missing"},
        },
    })
    nodes = children(tree)
    assert nodes["remote"].kind == "raw_json" and "cannot be resolved" in nodes["remote"].reason
    assert nodes["dangling"].kind == "raw_json"


def test_annotations_beside_a_ref_win_over_the_target():
    tree = build_form({
        "$defs": {"Count": {"type": "integer", "title": "Count"}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/Count", "title": "How many", "default": 2}},
    })
    n = tree.properties[0]
    assert (n.kind, n.title, n.default) == ("integer", "How many", 2)


def test_tool_schema_of_the_official_sdk_server():
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("forms")

    @server.tool()
    def book(guest: str, nights: int = 1, address: Address | None = None) -> str:
        return guest

    tool = server._tool_manager.list_tools()[0]
    nodes = children(build_form(tool.parameters))
    assert nodes["guest"].required and nodes["nights"].default == 1
    assert nodes["address"].kind == "object"


# ------------------------------------------------------------------ defaults


def test_defaults_nest_and_include_required_objects():
    assert defaults(build_form(SCHEMA)) == {
        "limit": 10,
        "exact": False,
        "sort": "desc",
        "paging": {"page": 1},
        "owner": {},
    }


def test_defaults_are_copies():
    tree = build_form({"type": "object", "properties": {"tags": {"type": "array", "default": ["a"]}}})
    defaults(tree)["tags"].append("b")
    assert defaults(tree) == {"tags": ["a"]}


def test_null_default_is_kept():
    tree = build_form(Order.model_json_schema())
    assert defaults(tree)["gift_note"] is None
    assert defaults(tree)["ship_to"] == {"postcode": 10115}


# ------------------------------------------------------------------ validation


def valid_args() -> dict:
    return {"query": "cats", "owner": {"id": "u1"}, "threshold": 0.5, "target": 3, "meta": {"a": "b"}}


def test_valid_arguments_have_no_messages():
    assert validate_arguments(SCHEMA, valid_args()) == []


def test_messages_name_the_json_path_of_each_problem():
    args = valid_args() | {"limit": 0, "threshold": 1, "tags": [], "filters": [{"value": 3}], "owner": {}}
    messages = validate_arguments(SCHEMA, args)
    assert "$.limit: 0 is less than the minimum of 1" in messages
    assert "$.threshold: 1 is greater than or equal to the maximum of 1" in messages
    assert any(m.startswith("$.tags: [] should be non-empty") for m in messages)
    assert "$.filters[0]: 'field' is a required property" in messages
    assert "$.filters[0].value: 3 is not of type 'string'" in messages
    assert "$.owner: 'id' is a required property" in messages


def test_missing_required_argument_is_reported_at_the_root():
    assert validate_arguments(SCHEMA, {"owner": {"id": "x"}}) == ["$: 'query' is a required property"]


def test_union_failures_name_the_closest_branch():
    (message,) = validate_arguments(SCHEMA, valid_args() | {"target": [1]})
    assert message.startswith("$.target: [1] is not valid under any of the given schemas")
    assert "closest" in message


def test_draft_named_in_schema_is_honoured():
    # Draft 4: exclusiveMinimum is a boolean beside minimum; in 2020-12 that schema is invalid.
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0, "exclusiveMinimum": True}},
    }
    assert validate_arguments(draft4, {"n": 0}) == ["$.n: 0 is less than or equal to the minimum of 0"]
    assert validate_arguments(draft4, {"n": 1}) == []
    without = {k: v for k, v in draft4.items() if k != "$schema"}
    (message,) = validate_arguments(without, {"n": 0})
    assert "not valid JSON Schema" in message


def test_default_draft_is_2020_12():
    # prefixItems exists only since 2020-12; an older draft would ignore it.
    schema = {"type": "object", "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}}}
    assert validate_arguments(schema, {"pair": [1]}) == ["$.pair[0]: 1 is not of type 'string'"]


def test_unresolvable_reference_is_one_clear_message_without_fetching():
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.invalid/a.json"}}}
    assert validate_arguments(schema, {"a": 1}) == [
        "$: the tool's input schema refers to https://example.invalid/a.json that cannot be resolved"
    ]


def test_huge_values_are_not_repeated_in_full():
    (message,) = validate_arguments(SCHEMA, valid_args() | {"query": 7 * [list(range(1000))]})
    assert len(message) < 400 and message.endswith("…")


def test_empty_schema_accepts_anything():
    assert validate_arguments({}, {"x": 1}) == []


def test_a_schema_that_refers_to_itself_without_end_is_reported_not_raised():
    from hostapp.protocol.schema_form import validate_arguments

    [message] = validate_arguments({"$ref": "#"}, 1)
    assert "refers to itself" in message


def test_a_reference_into_a_malformed_schema_gives_a_raw_field_and_a_message():
    from hostapp.protocol.schema_form import build_form, validate_arguments

    schema = {"type": "object", "properties": {"a": {"$ref": "other"}}, "$defs": {"y": None}}
    form = build_form(schema)
    assert form.properties[0].kind == "raw_json"
    assert all(isinstance(m, str) for m in validate_arguments(schema, {"a": 1}))


def test_argument_problems_are_the_arguments_own_not_a_broken_schema():
    from hostapp.protocol.schema_form import argument_problems

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    assert argument_problems(schema, {"n": 1}) == []
    assert argument_problems(schema, {"n": "x"}) == ["$.n: 'x' is not of type 'integer'"]
    # The server's schema is broken: the server judges the arguments itself.
    assert argument_problems({"type": "no-such-type"}, {"n": 1}) == []
    assert argument_problems({"$ref": "https://example.com/s.json"}, {}) == []
    assert validate_arguments({"type": "no-such-type"}, {"n": 1}) != []
