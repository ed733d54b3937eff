"""Skills (SEP-2640): listed without reading a file, loaded on request, refused on any mismatch.

The verification is checked on its own (hostapp.protocol.skills), then through the facade
and the command line against an in-process server offering one skill.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hostapp import cli
from hostapp.engine import api, connections
from hostapp.engine.facade import LocalEngine
from hostapp.engine.service import Engine
from hostapp.protocol import skills
from hostapp.store.journal import ServerConfig
from hostapp.store.secrets import InMemoryKeyring, SecretStore
from tests.support.memory_transport import FakeServer

pytestmark = pytest.mark.timeout(30)

SKILL_URI = "skill://pdf-processing/SKILL.md"
FORMS_URI = "skill://pdf-processing/references/FORMS.md"
SKILL_MD = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nSkill body.\n"
FORMS_MD = "Supporting content.\n"
FRONTMATTER = {"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents"}


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def listing_entry(skill_md: str = SKILL_MD) -> dict:
    return {"uri": SKILL_URI, "frontmatter": dict(FRONTMATTER), "resources": [
        {"uri": SKILL_URI, "digest": digest(skill_md), "size": len(skill_md.encode())},
        {"uri": FORMS_URI, "digest": digest(FORMS_MD), "size": len(FORMS_MD.encode())},
    ]}


# -- verification, without I/O -----------------------------------------------------------

def test_a_listing_is_parsed_with_its_files_and_a_dynamic_one_without():
    entries, cursor = skills.parse_list_result({"skills": [listing_entry()], "nextCursor": "2"})
    assert cursor == "2"
    [entry] = entries
    assert entry.name == "pdf-processing" and entry.description.startswith("Extract")
    assert [f.uri for f in entry.files or ()] == [SKILL_URI, FORMS_URI]
    assert skills.load_order(entry) == [SKILL_URI, FORMS_URI]
    dynamic = skills.parse_entry({"uri": SKILL_URI, "frontmatter": FRONTMATTER, "resources": "dynamic"})
    assert dynamic.files is None and skills.load_order(dynamic) == [SKILL_URI]


@pytest.mark.parametrize("broken", [
    {"skills": "no"},
    {"skills": [{"frontmatter": {}, "resources": []}]},
    {"skills": [{"uri": SKILL_URI, "resources": []}]},
    {"skills": [{"uri": SKILL_URI, "frontmatter": {}, "resources": [{"uri": SKILL_URI, "size": 1}]}]},
    {"skills": [{"uri": SKILL_URI, "frontmatter": {}, "resources": [
        {"uri": SKILL_URI, "size": 1, "digest": "md5:00"}]}]},
])
def test_a_malformed_listing_is_an_error(broken):
    with pytest.raises(skills.SkillListingError):
        skills.parse_list_result(broken)


def test_each_check_names_itself_when_it_fails():
    entry = skills.parse_entry(listing_entry())
    skills.verify_read(entry, SKILL_URI, SKILL_MD.encode())
    skills.verify_read(entry, FORMS_URI, FORMS_MD.encode())

    with pytest.raises(skills.SkillVerificationError) as size:
        skills.verify_read(entry, SKILL_URI, (SKILL_MD + "more").encode())
    assert size.value.check == "size" and "size check failed" in str(size.value)

    with pytest.raises(skills.SkillVerificationError) as wrong_digest:
        skills.verify_read(entry, SKILL_URI, SKILL_MD.replace("Skill body.", "Evil body!!").encode())
    assert wrong_digest.value.check == "digest"

    tampered = SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials")
    with pytest.raises(skills.SkillVerificationError) as frontmatter:
        skills.verify_read(skills.parse_entry(listing_entry(tampered)), SKILL_URI, tampered.encode())
    assert frontmatter.value.check == "frontmatter" and "Exfiltrate credentials" in str(frontmatter.value)


def test_frontmatter_is_compared_field_by_field_not_as_text():
    entry = skills.parse_entry({"uri": SKILL_URI, "frontmatter": {**FRONTMATTER, "metadata": {"a": 1}},
                                "resources": "dynamic"})
    same = ("---\ndescription: 'Extract, fill, and assemble PDF documents'\n"
            "name: pdf-processing\nmetadata:\n  a: 1\n---\n")
    skills.verify_frontmatter(entry, same.encode())
    with pytest.raises(skills.SkillVerificationError, match="metadata"):
        skills.verify_frontmatter(entry, SKILL_MD.encode())
    with pytest.raises(skills.SkillVerificationError, match="no YAML frontmatter"):
        skills.verify_frontmatter(entry, b"just text\n")


def test_a_skill_is_found_by_uri_or_unique_name():
    one = skills.parse_entry(listing_entry())
    other = skills.parse_entry({**listing_entry(), "uri": "skill://other/pdf-processing/SKILL.md"})
    assert skills.find_skill([one], "pdf-processing") is one
    assert skills.find_skill([one, other], other.uri) is other
    with pytest.raises(skills.SkillError, match="several skills"):
        skills.find_skill([one, other], "pdf-processing")
    with pytest.raises(skills.SkillError, match="no skill 'nope'"):
        skills.find_skill([one], "nope")


def test_blob_contents_are_decoded():
    import base64

    data = skills.read_contents({"contents": [{"uri": FORMS_URI, "blob": base64.b64encode(b"\x00\x01").decode()}]},
                                FORMS_URI)
    assert data == b"\x00\x01"


# -- through the facade and the command line ---------------------------------------------

def skills_server(skill_md: str = SKILL_MD, listed_md: str = SKILL_MD) -> FakeServer:
    server = FakeServer()
    files = {SKILL_URI: skill_md, FORMS_URI: FORMS_MD}
    server.methods["skills/list"] = lambda params: {"skills": [listing_entry(listed_md)]}
    server.methods["resources/read"] = lambda params: {
        "contents": [{"uri": params["uri"], "mimeType": "text/markdown", "text": files[params["uri"]]}]}
    return server


def reads(server: FakeServer) -> list[str]:
    return [m["params"]["uri"] for m in server.calls_of("resources/read")]


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch):
    def use(server: FakeServer) -> FakeServer:
        monkeypatch.setattr(connections, "make_transport", server.transport_factory)
        return server
    return use


@pytest.fixture
async def facade(isolated_home: Path):
    engine = LocalEngine(Engine(isolated_home, None, connect=False,
                                secrets=SecretStore(isolated_home, backend=InMemoryKeyring())))
    await engine.add_server(ServerConfig(name="fake", transport="stdio", command="in-memory"))
    yield engine
    await engine.stop()


async def test_listing_reads_no_file_and_loading_reads_and_verifies_every_one(facade, serve):
    server = serve(skills_server())
    [listed] = await facade.list_skills("fake")
    assert listed["name"] == "pdf-processing" and listed["uri"] == SKILL_URI
    assert reads(server) == []

    loaded = await facade.load_skill("fake", "pdf-processing")
    assert reads(server) == [SKILL_URI, FORMS_URI]
    assert loaded["instructions"] == SKILL_MD
    assert loaded["files"] == {SKILL_URI: SKILL_MD, FORMS_URI: FORMS_MD}


@pytest.mark.parametrize(("served", "listed", "check"), [
    (SKILL_MD.replace("Skill body.", "Evil body!!"), SKILL_MD, "digest"),
    (SKILL_MD + "extra\n", SKILL_MD, "size"),
    (SKILL_MD.replace("description: Extract, fill, and assemble PDF documents", "description: Exfiltrate"),
     SKILL_MD.replace("description: Extract, fill, and assemble PDF documents", "description: Exfiltrate"),
     "frontmatter"),
])
async def test_a_tampered_skill_md_is_refused_and_nothing_more_is_read(facade, serve, served, listed, check):
    server = serve(skills_server(served, listed))
    with pytest.raises(api.SkillRefused) as refused:
        await facade.load_skill("fake", "pdf-processing")
    assert refused.value.check == check and f"{check} check failed" in str(refused.value)
    assert reads(server) == [SKILL_URI]


def test_the_skills_command_lists_and_loads(serve, capsys):
    from hostapp.engine import open_engine

    async def add() -> None:
        engine = open_engine(None, connect=False)
        try:
            await engine.add_server(ServerConfig(name="fake", transport="stdio", command="in-memory"))
        finally:
            await engine.stop()

    import asyncio

    asyncio.run(add())
    server = serve(skills_server())
    assert cli.main(["skills", "fake", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "pdf-processing" and reads(server) == []

    assert cli.main(["skills", "fake", "pdf-processing"]) == 0
    out, err = capsys.readouterr()
    assert out == SKILL_MD and "2 file(s) verified" in err

    serve(skills_server(SKILL_MD + "extra\n"))
    assert cli.main(["skills", "fake", "pdf-processing"]) == 1
    assert "size check failed" in capsys.readouterr().err
