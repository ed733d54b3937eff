"""Skills a server offers (SEP-2640, extension ``io.modelcontextprotocol/skills``), without I/O.

A server that declares the extension answers ``skills/list`` with one entry per skill:
the URI of its ``SKILL.md``, the frontmatter of that file, and the files of the skill
(``resources``), each with its ``size`` in bytes and ``digest`` (``sha256:<hex>``), or
``"dynamic"`` when the server does not enumerate them. The files themselves are read
with ``resources/read``, and only when a person loads the skill: never on connection,
listing or approval.

Every file read is verified before it is used: its byte length against the entry's
``size``, its SHA-256 against the entry's ``digest``, and the YAML frontmatter of
``SKILL.md`` field by field against the entry's ``frontmatter``. Any mismatch refuses
the whole skill (:class:`SkillVerificationError`, saying which check failed).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

EXTENSION_ID = "io.modelcontextprotocol/skills"
LIST_METHOD = "skills/list"
SKILL_FILE = "SKILL.md"
DYNAMIC = "dynamic"

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_FRONTMATTER = re.compile(r"^---\r?\n(?P<yaml>[\s\S]*?)\r?\n---[ \t]*(?:\r?\n|$)")

#: The checks of a file against its entry, as named in a :class:`SkillVerificationError`.
CHECK_SIZE = "size"
CHECK_DIGEST = "digest"
CHECK_FRONTMATTER = "frontmatter"


class SkillError(ValueError):
    """A skill listing or a skill's file cannot be used."""


class SkillListingError(SkillError):
    """The server's ``skills/list`` answer is not a valid listing."""


class SkillVerificationError(SkillError):
    """A file read for a skill does not match what the listing promised; the skill is not loaded."""

    def __init__(self, check: str, uri: str, detail: str) -> None:
        self.check = check
        self.uri = uri
        self.detail = detail
        super().__init__(f"{check} check failed for {uri}: {detail}")


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill as the listing describes it."""

    uri: str
    size: int
    digest: str


@dataclass(frozen=True)
class SkillEntry:
    """One skill as ``skills/list`` describes it; ``files`` None when the server lists them ``dynamic``."""

    uri: str
    frontmatter: dict[str, Any]
    files: tuple[SkillFile, ...] | None

    @property
    def name(self) -> str:
        """The skill's name: the frontmatter's, else the folder of its ``SKILL.md``."""
        name = self.frontmatter.get("name")
        if isinstance(name, str) and name:
            return name
        return skill_name_from_uri(self.uri) or self.uri

    @property
    def description(self) -> str:
        value = self.frontmatter.get("description")
        return value if isinstance(value, str) else ""

    def file(self, uri: str) -> SkillFile | None:
        return next((f for f in self.files or () if f.uri == uri), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.description,
            "frontmatter": self.frontmatter,
            "resources": DYNAMIC if self.files is None else [
                {"uri": f.uri, "size": f.size, "digest": f.digest} for f in self.files
            ],
        }


@dataclass(frozen=True)
class LoadedSkill:
    """A skill whose every file was read and verified; ``files`` maps URI to content, SKILL.md first."""

    entry: SkillEntry
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def instructions(self) -> str:
        """The text of ``SKILL.md``."""
        return self.files[self.entry.uri].decode("utf-8", errors="replace")


def skill_name_from_uri(uri: str) -> str | None:
    """``skill://a/b/pdf-processing/SKILL.md`` -> ``pdf-processing``."""
    _, sep, rest = uri.partition("://")
    parts = [p for p in rest.split("/") if p] if sep else []
    if len(parts) >= 2 and parts[-1] == SKILL_FILE:
        return parts[-2]
    return None


def _parse_file(raw: Any, where: str) -> SkillFile:
    if not isinstance(raw, dict):
        raise SkillListingError(f"{where} is not an object")
    uri, size, digest = raw.get("uri"), raw.get("size"), raw.get("digest")
    if not isinstance(uri, str) or not uri:
        raise SkillListingError(f"{where} has no uri")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise SkillListingError(f"{where} ({uri}) has no valid size")
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise SkillListingError(f"{where} ({uri}) has no valid sha256 digest")
    return SkillFile(uri, size, digest)


def parse_entry(raw: Any, where: str = "skill entry") -> SkillEntry:
    """One entry of ``skills/list``; :class:`SkillListingError` when it is malformed."""
    if not isinstance(raw, dict):
        raise SkillListingError(f"{where} is not an object")
    uri = raw.get("uri")
    if not isinstance(uri, str) or not uri:
        raise SkillListingError(f"{where} has no uri")
    frontmatter = raw.get("frontmatter")
    if not isinstance(frontmatter, dict):
        raise SkillListingError(f"{where} ({uri}) has no frontmatter object")
    resources = raw.get("resources")
    files: tuple[SkillFile, ...] | None
    if resources == DYNAMIC:
        files = None
    elif isinstance(resources, list):
        files = tuple(_parse_file(r, f"{where} ({uri}) resources[{i}]") for i, r in enumerate(resources))
    else:
        raise SkillListingError(f"{where} ({uri}) has neither a resources list nor {DYNAMIC!r}")
    return SkillEntry(uri, dict(frontmatter), files)


def parse_list_result(result: Any) -> tuple[list[SkillEntry], str | None]:
    """A ``skills/list`` page: its entries and the cursor of the next page (None at the end)."""
    if not isinstance(result, dict) or not isinstance(result.get("skills"), list):
        raise SkillListingError("the skills/list result has no skills array")
    entries = [parse_entry(raw, f"skills[{i}]") for i, raw in enumerate(result["skills"])]
    cursor = result.get("nextCursor")
    return entries, cursor if isinstance(cursor, str) and cursor else None


def find_skill(entries: list[SkillEntry], name_or_uri: str) -> SkillEntry:
    """The entry a person named by its URI or its name; names may collide, URIs do not."""
    for entry in entries:
        if entry.uri == name_or_uri:
            return entry
    matches = [e for e in entries if e.name == name_or_uri]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise SkillError(f"several skills are named {name_or_uri!r}; name one by its URI: "
                         + ", ".join(e.uri for e in matches))
    known = ", ".join(e.name for e in entries) or "none"
    raise SkillError(f"the server lists no skill {name_or_uri!r} (it lists: {known})")


def read_contents(result: Any, uri: str) -> bytes:
    """The bytes of ``uri`` in a ``resources/read`` result (text as UTF-8, blob decoded)."""
    contents = result.get("contents") if isinstance(result, dict) else None
    if not isinstance(contents, list) or not contents:
        raise SkillError(f"reading {uri} returned no contents")
    item = next((c for c in contents if isinstance(c, dict) and c.get("uri") == uri), contents[0])
    if not isinstance(item, dict):
        raise SkillError(f"reading {uri} returned malformed contents")
    if isinstance(item.get("text"), str):
        return str(item["text"]).encode("utf-8")
    if isinstance(item.get("blob"), str):
        try:
            return base64.b64decode(item["blob"], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SkillError(f"reading {uri} returned a blob that is not base64: {exc}") from None
    raise SkillError(f"reading {uri} returned neither text nor blob")


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def verify_file(expected: SkillFile, data: bytes) -> None:
    """Raise :class:`SkillVerificationError` unless ``data`` has the listed size and digest."""
    if len(data) != expected.size:
        raise SkillVerificationError(CHECK_SIZE, expected.uri,
                                     f"the listing says {expected.size} bytes, the server sent {len(data)}")
    actual = sha256_digest(data)
    if actual != expected.digest:
        raise SkillVerificationError(CHECK_DIGEST, expected.uri,
                                     f"the listing says {expected.digest}, the content hashes to {actual}")


def parse_frontmatter(text: str) -> dict[str, Any] | None:
    """The YAML frontmatter at the start of a ``SKILL.md`` (None when there is none or it is not a mapping)."""
    import yaml  # type: ignore[import-untyped]  # PyYAML ships no type hints

    match = _FRONTMATTER.match(text.removeprefix("\ufeff"))
    if match is None:
        return None
    try:
        data = yaml.safe_load(match.group("yaml"))
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def verify_frontmatter(entry: SkillEntry, skill_md: bytes) -> None:
    """Compare the frontmatter of ``SKILL.md`` field by field with the entry's; any difference refuses it."""
    try:
        text = skill_md.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillVerificationError(CHECK_FRONTMATTER, entry.uri, "SKILL.md is not UTF-8 text") from None
    found = parse_frontmatter(text)
    if found is None:
        raise SkillVerificationError(CHECK_FRONTMATTER, entry.uri, "SKILL.md has no YAML frontmatter block")
    differing = [
        f"{key}: file={found.get(key)!r} listing={entry.frontmatter.get(key)!r}"
        for key in sorted(set(found) | set(entry.frontmatter), key=str)
        if found.get(key) != entry.frontmatter.get(key)
    ]
    if differing:
        raise SkillVerificationError(CHECK_FRONTMATTER, entry.uri,
                                     "the file's frontmatter differs from the listing's: " + "; ".join(differing))


def load_order(entry: SkillEntry) -> list[str]:
    """The URIs to read to load a skill: ``SKILL.md`` first (it is verified before anything else)."""
    rest = [f.uri for f in entry.files or () if f.uri != entry.uri]
    return [entry.uri, *rest]


def verify_read(entry: SkillEntry, uri: str, data: bytes) -> None:
    """Verify one file read while loading ``entry``: size and digest, then SKILL.md's frontmatter."""
    listed = entry.file(uri)
    if listed is not None:
        verify_file(listed, data)
    elif entry.files is not None:
        raise SkillVerificationError(CHECK_DIGEST, uri, "the listing gives no size or digest for this file")
    if uri == entry.uri:
        verify_frontmatter(entry, data)
