"""Tool ``inputSchema`` (full JSON Schema) as a tree of form nodes, and argument validation.

A tool's arguments are described by an arbitrary JSON Schema, far richer than the flat
subset elicitation allows. :func:`build_form` turns the parts a form can show into typed
nodes (strings, numbers, integers, booleans, enums, arrays, nested objects) and everything
else into ``raw_json`` nodes, where the person types JSON: unions (``anyOf``/``oneOf``),
``allOf``, ``not``, conditionals, ``patternProperties``, tuples, free-form maps, remote or
recursive ``$ref``. Two common shapes are unwrapped rather than given up on: local
``$ref`` into ``$defs`` (pydantic emits one per nested model) and "X or null"
(``Optional[X]``), which becomes a nullable X.

The form is a convenience; the schema stays the authority. :func:`validate_arguments`
checks the finished arguments against the whole schema with jsonschema, in the draft the
schema names in ``$schema`` (2020-12 when it names none, as MCP specifies), so whatever a
raw JSON node lets through is still caught, with the JSON path of each problem.

No Qt and no I/O here; the widgets live in ``hostapp.ui.forms``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import jsonschema
import referencing.exceptions
from jsonschema.validators import validator_for
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

NodeKind = Literal["object", "array", "string", "number", "integer", "boolean", "enum", "raw_json"]

#: Keywords whose meaning a form of plain widgets cannot express. A schema that uses
#: one becomes a ``raw_json`` node (after the unwrapping described in the module doc).
_UNREPRESENTABLE = (
    "anyOf", "oneOf", "allOf", "not", "if", "patternProperties", "dependentSchemas",
    "prefixItems", "contains",
)

#: Longest stretch of a value quoted back in a validation message: jsonschema repeats the
#: whole offending instance, which may be a megabyte of pasted JSON.
_MAX_MESSAGE_CHARS = 300

_BASE_URI = "urn:hostapp:tool-input-schema"


@dataclass(frozen=True, slots=True)
class EnumOption:
    """One allowed value of an ``enum`` node and the text a UI shows for it."""

    value: Any
    title: str


@dataclass(frozen=True, slots=True)
class FormNode:
    """One node of a tool-arguments form.

    Kinds: ``object`` (``properties`` are its children, in schema order), ``array``
    (``items`` is the node for each element), ``string``, ``number``, ``integer``,
    ``boolean``, ``enum`` (``options``), and ``raw_json`` (``reason`` says why; ``schema``
    is what the typed JSON must satisfy). ``path`` locates the value in the arguments:
    property names, with ``"*"`` standing for "each element" of an array.
    ``has_default`` tells a ``null`` default from no default.
    """

    kind: NodeKind
    name: str
    path: tuple[str, ...]
    title: str
    description: str | None = None
    required: bool = False
    nullable: bool = False
    has_default: bool = False
    default: Any = None
    options: tuple[EnumOption, ...] = ()
    properties: tuple[FormNode, ...] = ()
    items: FormNode | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None
    reason: str | None = None
    schema: Any = None

    @property
    def json_path(self) -> str:
        """The path in the notation :func:`validate_arguments` uses (``$.a.b[*]``)."""
        text = "$"
        for part in self.path:
            text += "[*]" if part == "*" else f".{part}"
        return text


# --------------------------------------------------------------------------- building


def build_form(input_schema: Any) -> FormNode:
    """The form tree of a tool's ``inputSchema``; the root is an ``object`` node.

    A root that is not an object schema becomes a ``raw_json`` root, so that any schema
    yields a usable form.
    """
    if not isinstance(input_schema, Mapping):
        return _raw("", (), True, input_schema, "the input schema is not a JSON object", title="Arguments")
    resource = Resource.from_contents(input_schema, default_specification=DRAFT202012)
    resolver = Registry().with_resource(_BASE_URI, resource).resolver(base_uri=_BASE_URI)
    return _Builder(resolver).node("", (), input_schema, required=True, at_root=True)


class _Builder:
    """Walks a schema, carrying the ``$ref`` resolver and the references being expanded."""

    def __init__(self, resolver: Any):
        self._resolver = resolver
        self._expanding: tuple[int, ...] = ()

    def node(
        self, name: str, path: tuple[str, ...], schema: Any, required: bool, at_root: bool = False
    ) -> FormNode:
        if schema is True or schema == {}:
            return _raw(name, path, required, schema, "any JSON value is allowed")
        if not isinstance(schema, Mapping):
            return _raw(name, path, required, schema, "the schema is not a JSON object")
        if "$ref" in schema:
            return self._reference(name, path, schema, required, at_root)
        schema, nullable = _unwrap_nullable(schema)
        if "$ref" in schema:  # Optional[Model]: anyOf [{$ref}, {type: null}]
            inner = self._reference(name, path, schema, required, at_root)
            return replace(inner, nullable=True) if inner.kind != "raw_json" else inner
        schema = _unwrap_single_all_of(schema)
        for keyword in _UNREPRESENTABLE:
            if keyword in schema:
                return _raw(name, path, required, schema, f"uses {keyword!r}")
        if "const" in schema or "enum" in schema:
            return self._enum(name, path, schema, required, nullable)
        kind = schema.get("type")
        if isinstance(kind, list):
            types = [t for t in kind if t != "null"]
            nullable = nullable or len(types) < len(kind)
            if len(types) != 1:
                return _raw(name, path, required, schema, "allows several types")
            kind = types[0]
        common = _common(name, path, schema, required, nullable)
        if kind == "object":
            return self._object(common, schema, at_root)
        if kind == "array":
            return self._array(common, schema)
        if kind == "string":
            return FormNode(
                "string", **common,
                min_length=_int_or_none(schema.get("minLength")),
                max_length=_int_or_none(schema.get("maxLength")),
                format=schema.get("format") if isinstance(schema.get("format"), str) else None,
            )
        if kind in ("number", "integer"):
            return FormNode(
                kind, **common,
                minimum=_bound(schema, "minimum"),
                maximum=_bound(schema, "maximum"),
            )
        if kind == "boolean":
            return FormNode("boolean", **common)
        if kind is None:
            return _raw(name, path, required, schema, "no type is given")
        return _raw(name, path, required, schema, f"type {kind!r} has no form field")

    def _reference(
        self, name: str, path: tuple[str, ...], schema: Mapping[str, Any], required: bool, at_root: bool
    ) -> FormNode:
        ref = schema["$ref"]
        if not isinstance(ref, str):
            return _raw(name, path, required, schema, "$ref is not a string")
        try:
            resolved = self._resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            # The exception text quotes the whole schema; the reference alone says enough.
            return _raw(name, path, required, schema, f"{ref} cannot be resolved here")
        except (AttributeError, TypeError, KeyError, ValueError):
            # referencing reads the whole schema to resolve a reference, and trips on parts
            # that are not schemas at all ("$defs": {"a": null}): found by fuzzing.
            return _raw(name, path, required, schema, f"{ref} cannot be resolved in a malformed schema")
        # Identity of the target, not the text of the reference: under another $id the
        # same text may point elsewhere, and two texts may point at one place.
        key = id(resolved.contents)
        if key in self._expanding:
            return _raw(name, path, required, schema, f"{ref} refers to itself")
        # Keywords beside $ref (2019-09 and later) annotate the target: title, default...
        target = resolved.contents
        if isinstance(target, Mapping):
            target = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        outer_resolver, outer_expanding = self._resolver, self._expanding
        self._resolver, self._expanding = resolved.resolver, (*outer_expanding, key)
        try:
            return self.node(name, path, target, required, at_root)
        finally:
            self._resolver, self._expanding = outer_resolver, outer_expanding

    def _enum(
        self, name: str, path: tuple[str, ...], schema: Mapping[str, Any], required: bool, nullable: bool
    ) -> FormNode:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(values, list) or not values:
            return _raw(name, path, required, schema, "enum is not a non-empty list")
        options = tuple(EnumOption(v, v if isinstance(v, str) else json.dumps(v)) for v in values)
        if None in values:
            nullable = True
        return FormNode("enum", **_common(name, path, schema, required, nullable), options=options)

    def _object(self, common: dict[str, Any], schema: Mapping[str, Any], at_root: bool) -> FormNode:
        properties = schema.get("properties")
        if properties is None and not at_root and schema.get("additionalProperties", True) is not False:
            return _raw(common["name"], common["path"], common["required"], schema,
                        "keys are not fixed in advance")
        if properties is None:
            properties = {}
        if not isinstance(properties, Mapping):
            return _raw(common["name"], common["path"], common["required"], schema,
                        "properties is not an object")
        required_names = schema.get("required", [])
        if not isinstance(required_names, list):
            required_names = []
        children = tuple(
            self.node(str(key), common["path"] + (str(key),), sub, key in required_names)
            for key, sub in properties.items()
        )
        return FormNode("object", **common, properties=children)

    def _array(self, common: dict[str, Any], schema: Mapping[str, Any]) -> FormNode:
        items = schema.get("items")
        if not isinstance(items, (Mapping, bool)):
            # Draft 4-7 tuple form ("items": [...]) or no items at all: positions differ.
            return _raw(common["name"], common["path"], common["required"], schema,
                        "array elements are not all of one schema")
        item = self.node("", common["path"] + ("*",), items, required=True)
        return FormNode(
            "array", **common, items=item,
            min_items=_int_or_none(schema.get("minItems")),
            max_items=_int_or_none(schema.get("maxItems")),
        )


def _common(
    name: str, path: tuple[str, ...], schema: Mapping[str, Any], required: bool, nullable: bool
) -> dict[str, Any]:
    title = schema.get("title")
    description = schema.get("description")
    return {
        "name": name,
        "path": path,
        "title": title if isinstance(title, str) and title else (name or "Value"),
        "description": description if isinstance(description, str) and description else None,
        "required": required,
        "nullable": nullable,
        "has_default": "default" in schema,
        "default": schema.get("default"),
        "schema": schema,
    }


def _raw(
    name: str, path: tuple[str, ...], required: bool, schema: Any, reason: str, title: str | None = None
) -> FormNode:
    common = _common(name, path, schema if isinstance(schema, Mapping) else {}, required, False)
    if title is not None:
        common["title"] = title
    common["schema"] = schema
    return FormNode("raw_json", **common, reason=reason)


def _unwrap_nullable(schema: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    """``{"anyOf": [X, {"type": "null"}], ...}`` → (X with the outer annotations, True)."""
    for keyword in ("anyOf", "oneOf"):
        branches = schema.get(keyword)
        if not isinstance(branches, list) or len(branches) != 2:
            continue
        others = [b for b in branches if b != {"type": "null"}]
        if len(others) != 1 or not isinstance(others[0], Mapping):
            continue
        outer = {k: v for k, v in schema.items() if k != keyword}
        return {**others[0], **outer}, True
    return schema, False


def _unwrap_single_all_of(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``{"allOf": [X], ...}`` (how older generators attach a title to a $ref) → X merged."""
    branches = schema.get("allOf")
    if (isinstance(branches, list) and len(branches) == 1 and isinstance(branches[0], Mapping)
            and "$ref" not in branches[0]):
        outer = {k: v for k, v in schema.items() if k != "allOf"}
        return {**branches[0], **outer}
    return schema


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _bound(schema: Mapping[str, Any], keyword: str) -> int | float | None:
    """An inclusive bound a widget can use; exclusive bounds are left to validation."""
    value = schema.get(keyword)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return None


# --------------------------------------------------------------------------- defaults


def defaults(tree: FormNode) -> dict[str, Any]:
    """The arguments a form starts with: every default the schema gives, nested as it nests.

    A nested object without its own default appears when something inside it has a
    default, or when it is required (as ``{}`` at least), so required structure is there.
    """
    if tree.kind != "object":
        value = _default_of(tree)
        return value if isinstance(value, dict) else {}
    return _object_defaults(tree)


_NO_VALUE = object()


def _default_of(node: FormNode) -> Any:
    if node.has_default:
        return json.loads(json.dumps(node.default))  # a private copy the form may change
    if node.kind == "object":
        inner = _object_defaults(node)
        if inner or node.required:
            return inner
    return _NO_VALUE


def _object_defaults(node: FormNode) -> dict[str, Any]:
    values = {}
    for child in node.properties:
        value = _default_of(child)
        if value is not _NO_VALUE:
            values[child.name] = value
    return values


# --------------------------------------------------------------------------- validation


def validate_arguments(input_schema: Any, args: Any) -> list[str]:
    """Every way ``args`` breaks ``input_schema``, as ``"<JSON path>: <message>"`` lines.

    Empty when the arguments are valid. The draft is the one ``$schema`` names, 2020-12
    otherwise. A schema that is itself invalid, or whose ``$ref`` cannot be resolved
    without fetching, yields one message saying so (nothing is fetched).
    """
    problems, _schema_fault = _check_arguments(input_schema, args)
    return problems


def argument_problems(input_schema: Any, args: Any) -> list[str]:
    """The problems of ``args`` alone: empty when they are valid, and also when the schema
    itself cannot be checked against (a broken schema is the server's fault, and the
    server still judges the arguments it is sent)."""
    problems, schema_fault = _check_arguments(input_schema, args)
    return [] if schema_fault else problems


def _check_arguments(input_schema: Any, args: Any) -> tuple[list[str], bool]:
    """(problems, whether they are the schema's own)."""
    if input_schema is True or input_schema == {}:
        return [], False
    if not isinstance(input_schema, Mapping):
        return ["$: the tool's input schema is not a JSON object"], True
    validator_class = validator_for(input_schema, default=jsonschema.Draft202012Validator)
    try:
        # the stubs want a dict where jsonschema takes any Mapping
        validator_class.check_schema(input_schema)  # type: ignore[arg-type]
    except jsonschema.SchemaError as exc:
        return [f"$: the tool's input schema is not valid JSON Schema ({_shorten(exc.message)})"], True
    except RecursionError:
        return ["$: the tool's input schema is nested too deeply to be checked"], True
    validator = validator_class(input_schema, format_checker=validator_class.FORMAT_CHECKER)
    try:
        errors = list(validator.iter_errors(args))
    except referencing.exceptions.Unresolvable as exc:
        ref = getattr(exc, "ref", None)
        return [f"$: the tool's input schema refers to {ref or 'a schema'} that cannot be resolved"], True
    except RecursionError:
        # {"$ref": "#"} and its kin: a schema that refers to itself without end.
        return ["$: the tool's input schema refers to itself without end"], True
    except (AttributeError, TypeError, KeyError, ValueError):
        # jsonschema and referencing trip on parts of a schema that are no schema at all
        # ("$defs": {"a": null}) when a reference makes them look (found by fuzzing).
        return ["$: the tool's input schema is malformed where a $ref points"], True
    errors.sort(key=lambda error: (error.json_path, error.message))
    return [_describe(error) for error in errors], False


def _describe(error: jsonschema.ValidationError) -> str:
    message = _shorten(error.message)
    if error.context:
        # A union failed: name the branch that came closest, which is what the person
        # most likely meant.
        closest = jsonschema.exceptions.best_match(error.context)
        if closest is not None:
            message += f" (closest: {closest.json_path}: {_shorten(closest.message)})"
    return f"{error.json_path}: {message}"


def _shorten(text: str) -> str:
    if len(text) <= _MAX_MESSAGE_CHARS:
        return text
    return text[: _MAX_MESSAGE_CHARS - 1] + "…"
