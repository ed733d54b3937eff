"""Elicitation requests as data: form fields from a ``requestedSchema``, and URL requests.

A server asks the person for input with ``elicitation/create``. In form mode it sends a
``requestedSchema``: a flat object whose properties are drawn from a small, closed subset
of JSON Schema (``PrimitiveSchemaDefinition`` in the 2025-11-25 schema). This module turns
that schema into a list of typed :class:`Field` values a UI can render, applies defaults,
validates and coerces an answer, and builds the ``ElicitResult`` to send back. In URL mode
it checks the URL and pulls out the domain the person must be shown before anything opens.

The subset check is a whitelist: a keyword the subset does not define is an error naming
the property, because a form that silently ignores a constraint would send the server
answers it promised to reject. Keywords that only annotate (``$comment``, ``examples``...)
are let through.

No Qt and no I/O here; the widgets live in ``hostapp.ui.forms``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, TypeGuard
from urllib.parse import urlsplit

import idna
import jsonschema

FieldKind = Literal["string", "number", "integer", "boolean", "single_select", "multi_select"]
StringFormat = Literal["email", "uri", "date", "date-time"]

STRING_FORMATS: frozenset[str] = frozenset({"email", "uri", "date", "date-time"})

# Keywords that describe a property without constraining its value; a server may send
# them (pydantic and zod emit some) and the form can ignore them safely.
_ANNOTATION_KEYWORDS = frozenset({"$comment", "examples", "deprecated", "readOnly", "writeOnly"})
_COMMON_KEYWORDS = frozenset({"type", "title", "description", "default"}) | _ANNOTATION_KEYWORDS
_TOP_LEVEL_KEYWORDS = frozenset(
    {"type", "properties", "required", "$schema", "title", "description", "additionalProperties"}
) | _ANNOTATION_KEYWORDS

# Allowed keywords per shape of property, beyond the common ones.
_STRING_KEYWORDS = _COMMON_KEYWORDS | {"minLength", "maxLength", "format"}
_NUMBER_KEYWORDS = _COMMON_KEYWORDS | {"minimum", "maximum"}
_BOOLEAN_KEYWORDS = _COMMON_KEYWORDS
_ENUM_KEYWORDS = _COMMON_KEYWORDS | {"enum", "enumNames"}
_ONE_OF_KEYWORDS = _COMMON_KEYWORDS | {"oneOf"}
_ARRAY_KEYWORDS = _COMMON_KEYWORDS | {"items", "minItems", "maxItems"}


class ElicitationSchemaError(ValueError):
    """A ``requestedSchema`` outside the subset MCP allows for form elicitation.

    ``property_name`` names the offending property (``None`` for the schema as a whole).
    """

    def __init__(self, message: str, property_name: str | None = None):
        super().__init__(message)
        self.property_name = property_name


class ElicitationContentError(ValueError):
    """An answer that does not satisfy its form; ``errors`` maps field name to message."""

    def __init__(self, errors: Mapping[str, str]):
        self.errors = dict(errors)
        summary = "; ".join(f"{name}: {message}" for name, message in self.errors.items())
        super().__init__(f"the answer does not fit the form: {summary}")


class UrlElicitationError(ValueError):
    """A URL-mode elicitation the host refuses to show (bad params or an unsafe URL)."""


@dataclass(frozen=True, slots=True)
class Option:
    """One choice of a select field: the ``value`` sent back and the ``title`` shown."""

    value: str
    title: str


@dataclass(frozen=True, slots=True)
class Field:
    """One form field, typed by ``kind``; constraints that do not apply to it are ``None``.

    ``default`` is already checked against the kind (a list of values for multi-select).
    ``title`` falls back to the property name so a UI always has a label.
    """

    name: str
    kind: FieldKind
    title: str
    description: str | None = None
    required: bool = False
    default: Any = None
    options: tuple[Option, ...] = ()
    min_length: int | None = None
    max_length: int | None = None
    format: StringFormat | None = None
    minimum: int | float | None = None
    maximum: int | float | None = None
    min_items: int | None = None
    max_items: int | None = None


@dataclass(frozen=True, slots=True)
class FormElicitation:
    """A form-mode ``elicitation/create``: the server's message and the fields it asks for."""

    message: str
    fields: tuple[Field, ...]


@dataclass(frozen=True, slots=True)
class UrlElicitation:
    """A URL-mode ``elicitation/create`` made ready for a consent prompt.

    ``domain`` is the host as a person reads it (Unicode); ``ascii_domain`` is its punycode
    form. When the two differ, :attr:`display_domain` shows both, so that a look-alike
    (``аpple.com`` with a Cyrillic ``а``) cannot pass for the real one.
    """  # noqa: RUF002 - the look-alike letter is the example

    url: str
    domain: str
    ascii_domain: str
    message: str
    elicitation_id: str

    @property
    def is_internationalized(self) -> bool:
        return self.domain != self.ascii_domain

    @property
    def display_domain(self) -> str:
        if self.is_internationalized:
            return f"{self.domain} ({self.ascii_domain})"
        return self.domain


# --------------------------------------------------------------------------- parsing


def parse_requested_schema(schema: Any) -> list[Field]:
    """Turn a form-mode ``requestedSchema`` into fields, in the server's property order.

    Raises :class:`ElicitationSchemaError` for anything outside the allowed subset.
    """
    if not isinstance(schema, Mapping):
        raise ElicitationSchemaError("requestedSchema must be a JSON object")
    unknown = sorted(set(schema) - _TOP_LEVEL_KEYWORDS)
    if unknown:
        raise ElicitationSchemaError(
            f"requestedSchema uses {_quoted(unknown)}, which form elicitation does not allow"
        )
    if schema.get("type") != "object":
        raise ElicitationSchemaError('requestedSchema must have "type": "object"')
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise ElicitationSchemaError('requestedSchema must have a "properties" object')
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise ElicitationSchemaError('"required" must be a list of property names')
    missing = [name for name in required if name not in properties]
    if missing:
        raise ElicitationSchemaError(
            f'"required" names {_quoted(missing)}, which is not among the properties',
            property_name=missing[0],
        )
    return [
        _parse_property(str(name), prop, name in required) for name, prop in properties.items()
    ]


def _parse_property(name: str, prop: Any, required: bool) -> Field:
    if not isinstance(prop, Mapping):
        raise ElicitationSchemaError(f"property {name!r} must be a JSON object", name)
    kind = prop.get("type")
    if kind == "string":
        if "enum" in prop:
            return _parse_enum(name, prop, required)
        if "oneOf" in prop:
            return _parse_one_of(name, prop, required)
        return _parse_string(name, prop, required)
    if kind in ("number", "integer"):
        return _parse_number(name, prop, required, kind)
    if kind == "boolean":
        _check_keywords(name, prop, _BOOLEAN_KEYWORDS)
        default = prop.get("default")
        if default is not None and not isinstance(default, bool):
            raise ElicitationSchemaError(f"property {name!r}: default must be true or false", name)
        return Field(name, "boolean", **_texts(name, prop), required=required, default=default)
    if kind == "array":
        return _parse_multi_select(name, prop, required)
    if "type" not in prop:
        raise ElicitationSchemaError(f"property {name!r} has no \"type\"", name)
    raise ElicitationSchemaError(
        f"property {name!r} has type {kind!r}; form elicitation allows only string, number, "
        "integer, boolean and arrays of enum values",
        name,
    )


def _parse_string(name: str, prop: Mapping[str, Any], required: bool) -> Field:
    _check_keywords(name, prop, _STRING_KEYWORDS)
    min_length = _non_negative_int(name, prop, "minLength")
    max_length = _non_negative_int(name, prop, "maxLength")
    if min_length is not None and max_length is not None and min_length > max_length:
        raise ElicitationSchemaError(f"property {name!r}: minLength is greater than maxLength", name)
    fmt = prop.get("format")
    if fmt is not None and fmt not in STRING_FORMATS:
        raise ElicitationSchemaError(
            f"property {name!r} has format {fmt!r}; allowed are email, uri, date and date-time", name
        )
    default = prop.get("default")
    if default is not None and not isinstance(default, str):
        raise ElicitationSchemaError(f"property {name!r}: default must be a string", name)
    return Field(
        name, "string", **_texts(name, prop), required=required, default=default,
        min_length=min_length, max_length=max_length, format=fmt,
    )


def _parse_number(name: str, prop: Mapping[str, Any], required: bool, kind: Literal["number", "integer"]) -> Field:
    _check_keywords(name, prop, _NUMBER_KEYWORDS)
    minimum = _number(name, prop, "minimum")
    maximum = _number(name, prop, "maximum")
    if minimum is not None and maximum is not None and minimum > maximum:
        raise ElicitationSchemaError(f"property {name!r}: minimum is greater than maximum", name)
    default = prop.get("default")
    if default is not None:
        coerced = _as_number(default, kind) if not isinstance(default, str) else None
        if coerced is None:
            article = "an" if kind == "integer" else "a"
            raise ElicitationSchemaError(f"property {name!r}: default must be {article} {kind}", name)
        default = coerced
    return Field(
        name, kind, **_texts(name, prop), required=required, default=default,
        minimum=minimum, maximum=maximum,
    )


def _parse_enum(name: str, prop: Mapping[str, Any], required: bool) -> Field:
    """Untitled single select (``enum``) or the legacy titled one (``enum`` + ``enumNames``)."""
    _check_keywords(name, prop, _ENUM_KEYWORDS)
    values = _string_list(name, prop.get("enum"), "enum")
    titles = prop.get("enumNames")
    if titles is None:
        titles = values
    else:
        titles = _string_list(name, titles, "enumNames")
        if len(titles) != len(values):
            raise ElicitationSchemaError(
                f"property {name!r}: enumNames must have one title per enum value", name
            )
    options = tuple(Option(value, title) for value, title in zip(values, titles, strict=True))
    return _single_select(name, prop, required, options)


def _parse_one_of(name: str, prop: Mapping[str, Any], required: bool) -> Field:
    """Titled single select: ``oneOf: [{const, title}, ...]``."""
    _check_keywords(name, prop, _ONE_OF_KEYWORDS)
    options = _titled_options(name, prop.get("oneOf"), "oneOf")
    return _single_select(name, prop, required, options)


def _single_select(
    name: str, prop: Mapping[str, Any], required: bool, options: tuple[Option, ...]
) -> Field:
    default = prop.get("default")
    # Option values are strings: anything else (a list, an object) is no option, and is not
    # looked up in the set of them (unhashable: found by fuzzing).
    if default is not None and not (isinstance(default, str) and default in {option.value for option in options}):
        raise ElicitationSchemaError(f"property {name!r}: default {default!r} is not one of the options", name)
    return Field(name, "single_select", **_texts(name, prop), required=required, default=default,
                 options=options)


def _parse_multi_select(name: str, prop: Mapping[str, Any], required: bool) -> Field:
    """Untitled (``items.enum``) or titled (``items.anyOf``) multi select."""
    _check_keywords(name, prop, _ARRAY_KEYWORDS)
    items = prop.get("items")
    if not isinstance(items, Mapping):
        raise ElicitationSchemaError(f"property {name!r}: an array needs an \"items\" object", name)
    if "enum" in items:
        unknown = sorted(set(items) - {"type", "enum"})
        if unknown or items.get("type", "string") != "string":
            raise ElicitationSchemaError(
                f'property {name!r}: items may only be {{"type": "string", "enum": [...]}}', name
            )
        options = tuple(Option(v, v) for v in _string_list(name, items["enum"], "items.enum"))
    elif "anyOf" in items:
        if set(items) - {"anyOf"}:
            raise ElicitationSchemaError(f'property {name!r}: items may only be {{"anyOf": [...]}}', name)
        options = _titled_options(name, items["anyOf"], "items.anyOf")
    else:
        raise ElicitationSchemaError(
            f"property {name!r}: arrays are allowed only as multi-selects (items.enum or items.anyOf)",
            name,
        )
    min_items = _non_negative_int(name, prop, "minItems")
    max_items = _non_negative_int(name, prop, "maxItems")
    if min_items is not None and max_items is not None and min_items > max_items:
        raise ElicitationSchemaError(f"property {name!r}: minItems is greater than maxItems", name)
    default = prop.get("default")
    if default is not None:
        allowed = {option.value for option in options}
        if not isinstance(default, list) or not all(isinstance(v, str) and v in allowed for v in default):
            raise ElicitationSchemaError(
                f"property {name!r}: default must be a list of the options' values", name
            )
    return Field(
        name, "multi_select", **_texts(name, prop), required=required, default=default,
        options=options, min_items=min_items, max_items=max_items,
    )


def _check_keywords(name: str, prop: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = sorted(set(prop) - allowed)
    if unknown:
        raise ElicitationSchemaError(
            f"property {name!r} uses {_quoted(unknown)}, which form elicitation does not allow "
            f"for this kind of field",
            name,
        )


def _texts(name: str, prop: Mapping[str, Any]) -> dict[str, Any]:
    title = prop.get("title")
    description = prop.get("description")
    if title is not None and not isinstance(title, str):
        raise ElicitationSchemaError(f"property {name!r}: title must be a string", name)
    if description is not None and not isinstance(description, str):
        raise ElicitationSchemaError(f"property {name!r}: description must be a string", name)
    return {"title": title or name, "description": description or None}


def _string_list(name: str, values: Any, keyword: str) -> list[str]:
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ElicitationSchemaError(f"property {name!r}: {keyword} must be a non-empty list of strings", name)
    if len(set(values)) != len(values):
        raise ElicitationSchemaError(f"property {name!r}: {keyword} repeats a value", name)
    return values


def _titled_options(name: str, entries: Any, keyword: str) -> tuple[Option, ...]:
    if not isinstance(entries, list) or not entries:
        raise ElicitationSchemaError(f"property {name!r}: {keyword} must be a non-empty list", name)
    options = []
    for entry in entries:
        if (
            not isinstance(entry, Mapping)
            or set(entry) - {"const", "title"}
            or not isinstance(entry.get("const"), str)
            or not isinstance(entry.get("title", ""), str)
        ):
            raise ElicitationSchemaError(
                f'property {name!r}: each {keyword} entry must be {{"const": "<value>", "title": "<label>"}}',
                name,
            )
        options.append(Option(entry["const"], entry.get("title") or entry["const"]))
    if len({option.value for option in options}) != len(options):
        raise ElicitationSchemaError(f"property {name!r}: {keyword} repeats a value", name)
    return tuple(options)


def _non_negative_int(name: str, prop: Mapping[str, Any], keyword: str) -> int | None:
    value = prop.get(keyword)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ElicitationSchemaError(f"property {name!r}: {keyword} must be a non-negative integer", name)
    return value


def _number(name: str, prop: Mapping[str, Any], keyword: str) -> int | float | None:
    value = prop.get(keyword)
    if value is None:
        return None
    if not _is_number(value):
        raise ElicitationSchemaError(f"property {name!r}: {keyword} must be a number", name)
    return value


def _quoted(names: Iterable[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _is_number(value: Any) -> TypeGuard[int | float]:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _as_number(value: Any, kind: str) -> int | float | None:
    """``value`` as the JSON number ``kind`` wants, or ``None`` if it is not one.

    Accepts numeric text, since line edits and spin boxes hand over strings.
    """
    if isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                return None
    if not _is_number(value):
        return None
    if kind == "integer" and isinstance(value, float):
        return int(value) if value.is_integer() else None
    return value


def describe_form_request(params: Mapping[str, Any]) -> FormElicitation:
    """Read the params of a form-mode ``elicitation/create`` (``mode`` absent or ``"form"``)."""
    if params.get("mode", "form") != "form":
        raise ElicitationSchemaError(f"not a form-mode elicitation (mode {params.get('mode')!r})")
    message = params.get("message")
    if not isinstance(message, str):
        raise ElicitationSchemaError("elicitation/create needs a string \"message\"")
    return FormElicitation(message, tuple(parse_requested_schema(params.get("requestedSchema"))))


# --------------------------------------------------------------------------- answers


def default_content(fields: Iterable[Field]) -> dict[str, Any]:
    """The content a form starts with: every field's default, fields without one left out."""
    return {
        f.name: (list(f.default) if isinstance(f.default, list) else f.default)
        for f in fields
        if f.default is not None
    }


def _email_is_valid(instance: object) -> bool:
    # One "@" with text on each side and no spaces: deliberately loose, since only the
    # server can tell whether an address is real.
    return not isinstance(instance, str) or re.fullmatch(r"[^@\s]+@[^@\s]+", instance) is not None


def _uri_is_valid(instance: object) -> bool:
    """An absolute URI (RFC 3986: a scheme, then ``:``), without spaces or control characters."""
    if not isinstance(instance, str):
        return True
    if re.search(r"[\s\x00-\x1f\x7f]", instance):
        return False
    return re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", instance) is not None and len(instance.split(":", 1)[1]) > 0


_RFC3339_DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})"
)


def _date_time_is_valid(instance: object) -> bool:
    """RFC 3339 ``date-time``: date, time and a mandatory offset, and a real calendar moment."""
    if not isinstance(instance, str):
        return True
    if not _RFC3339_DATE_TIME.fullmatch(instance):
        return False
    try:
        datetime.fromisoformat(instance.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def _date_is_valid(instance: object) -> bool:
    if not isinstance(instance, str):
        return True
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", instance):
        return False
    try:
        date.fromisoformat(instance)
    except ValueError:
        return False
    return True


def _format_checker() -> jsonschema.FormatChecker:
    """jsonschema's checker for the four formats, filled in where its optional extras are missing.

    jsonschema checks ``uri`` and ``date-time`` only when ``rfc3987``/``rfc3339-validator``
    are installed; without them it would accept anything, so stdlib checks stand in.
    ``email`` and ``date`` are tightened too: jsonschema only looks for an ``@``.
    """
    checker = jsonschema.FormatChecker(formats=())
    checker.checks("email")(_email_is_valid)
    checker.checks("date")(_date_is_valid)
    library = jsonschema.FormatChecker()
    for fmt, fallback in (("uri", _uri_is_valid), ("date-time", _date_time_is_valid)):
        if fmt in library.checkers:
            checker.checkers[fmt] = library.checkers[fmt]
        else:
            checker.checks(fmt)(fallback)
    return checker


FORMAT_CHECKER = _format_checker()

_FORMAT_MESSAGES = {
    "email": "enter an email address (name@example.com)",
    "uri": "enter a full address with its scheme (https://...)",
    "date": "enter a date as YYYY-MM-DD",
    "date-time": "enter a date and time as YYYY-MM-DDTHH:MM:SS with a time zone (Z or +01:00)",
}


def _is_blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value.strip() == "") or value == []


def _field_error(f: Field, value: Any) -> str | None:
    """Why ``value`` does not fit ``f`` (``value`` is present and not blank), or ``None``."""
    if f.kind == "string":
        if not isinstance(value, str):
            return "must be text"
        if f.min_length is not None and len(value) < f.min_length:
            return f"must be at least {f.min_length} characters long"
        if f.max_length is not None and len(value) > f.max_length:
            return f"must be at most {f.max_length} characters long"
        if f.format is not None and not FORMAT_CHECKER.conforms(value, f.format):
            return _FORMAT_MESSAGES[f.format]
        return None
    if f.kind in ("number", "integer"):
        number = _as_number(value, f.kind)
        if number is None:
            return "must be a whole number" if f.kind == "integer" else "must be a number"
        if f.minimum is not None and number < f.minimum:
            return f"must be at least {f.minimum}"
        if f.maximum is not None and number > f.maximum:
            return f"must be at most {f.maximum}"
        return None
    if f.kind == "boolean":
        return None if isinstance(value, bool) else "must be true or false"
    allowed = {option.value for option in f.options}
    if f.kind == "single_select":
        return None if isinstance(value, str) and value in allowed else "choose one of the options"
    # multi_select
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v in allowed for v in value):
        return "choose from the options"
    if len(set(value)) != len(value):
        return "choose each option at most once"
    if f.min_items is not None and len(value) < f.min_items:
        return f"choose at least {f.min_items}"
    if f.max_items is not None and len(value) > f.max_items:
        return f"choose at most {f.max_items}"
    return None


def validate_content(fields: Iterable[Field], content: Mapping[str, Any]) -> dict[str, str]:
    """Field name → message for each problem in ``content``; ``{}`` when it fits the form.

    A blank value (``None``, empty or whitespace-only text, an empty selection) counts as
    not given: an error for a required field, fine for an optional one. A key that is not
    a field is reported under its own name.
    """
    fields = list(fields)
    errors: dict[str, str] = {}
    for f in fields:
        value = content.get(f.name)
        if _is_blank(value) and not (f.kind == "multi_select" and value == [] and f.min_items == 0):
            if f.required:
                errors[f.name] = "required"
            continue
        problem = _field_error(f, value)
        if problem is not None:
            errors[f.name] = problem
    known = {f.name for f in fields}
    for name in content:
        if name not in known:
            errors[name] = "not a field of this form"
    return errors


def _coerce(f: Field, value: Any) -> Any:
    if f.kind in ("number", "integer"):
        return _as_number(value, f.kind)
    if f.kind == "multi_select":
        return list(value)
    return value


def build_accept(fields: Iterable[Field], content: Mapping[str, Any]) -> dict[str, Any]:
    """The ``ElicitResult`` for an accepted form: validated, coerced, blanks left out.

    Raises :class:`ElicitationContentError` when ``content`` does not fit the form.
    """
    fields = list(fields)
    errors = validate_content(fields, content)
    if errors:
        raise ElicitationContentError(errors)
    answer: dict[str, Any] = {}
    for f in fields:
        value = content.get(f.name)
        if _is_blank(value) and not (f.kind == "multi_select" and value == [] and f.min_items == 0):
            continue
        answer[f.name] = _coerce(f, value)
    return {"action": "accept", "content": answer}


def build_decline() -> dict[str, Any]:
    """The ``ElicitResult`` for a person who said no."""
    return {"action": "decline"}


def build_cancel() -> dict[str, Any]:
    """The ``ElicitResult`` for a prompt dismissed without a choice."""
    return {"action": "cancel"}


# --------------------------------------------------------------------------- URL mode

_SAFE_SCHEMES = frozenset({"http", "https"})


def describe_url_request(params: Mapping[str, Any]) -> UrlElicitation:
    """Check a URL-mode ``elicitation/create`` and extract what the consent prompt shows.

    Only ``http`` and ``https`` URLs with a host are accepted; ``javascript:``, ``file:``,
    ``data:`` and the rest are refused, as are URLs with credentials before the host
    (``https://bank.example@evil.example/`` reads like the bank but goes to ``evil``) and
    URLs with spaces or control characters. Nothing is fetched.
    """
    if params.get("mode") != "url":
        raise UrlElicitationError(f"not a URL-mode elicitation (mode {params.get('mode')!r})")
    for key in ("url", "message", "elicitationId"):
        if not isinstance(params.get(key), str):
            raise UrlElicitationError(f"URL-mode elicitation needs a string {key!r}")
    url: str = params["url"]
    if re.search(r"[\s\x00-\x1f\x7f]", url):
        raise UrlElicitationError("the URL contains spaces or control characters")
    try:
        parts = urlsplit(url)
        host = parts.hostname
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError as exc:
        raise UrlElicitationError(f"the URL cannot be parsed: {exc}") from None
    if parts.scheme.lower() not in _SAFE_SCHEMES:
        raise UrlElicitationError(
            f"the URL scheme {parts.scheme + ':' if parts.scheme else '(none)'} is not allowed; "
            "only http and https URLs can be opened"
        )
    if not host:
        raise UrlElicitationError("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise UrlElicitationError(
            "the URL carries a user name before its host, which can disguise where it leads"
        )
    domain, ascii_domain = _domain_forms(host)
    return UrlElicitation(
        url=url,
        domain=domain,
        ascii_domain=ascii_domain,
        message=params["message"],
        elicitation_id=params["elicitationId"],
    )


def _domain_forms(host: str) -> tuple[str, str]:
    """(Unicode form, ASCII/punycode form) of a host; IP literals are returned as they are."""
    host = host.rstrip(".")
    if re.fullmatch(r"[0-9.]+", host) or ":" in host:  # IPv4 or IPv6 literal
        return host, host
    if host.isascii() and not any(label.startswith("xn--") for label in host.split(".")):
        # Plain ASCII names need no IDNA round trip, and IDNA 2008 would refuse names
        # that resolve fine on intranets (underscores, "--" in third position).
        return host, host
    try:
        ascii_domain = idna.encode(host, uts46=True).decode("ascii")
        domain = idna.decode(ascii_domain)
    except idna.IDNAError as exc:
        raise UrlElicitationError(f"the URL's host is not a valid domain name: {exc}") from None
    return domain, ascii_domain
