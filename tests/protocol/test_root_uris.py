"""Roots as the configuration keeps them and as ``roots/list`` answers them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from hostapp.protocol.roots import normalize_root, normalize_roots, roots_result


def path_of(uri: str) -> Path:
    parsed = urlparse(uri)
    assert parsed.scheme == "file" and parsed.netloc == ""
    return Path(unquote(parsed.path))


def test_a_folder_is_kept_absolute_and_resolved(tmp_path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    assert normalize_root("link") == str(real)
    assert normalize_root("./real/../real") == str(real)
    assert normalize_roots(["real", str(real), "link"]) == [str(real)]  # each folder once
    monkeypatch.setenv("HOME", str(tmp_path))
    assert normalize_root("~/real") == str(real)


@pytest.mark.parametrize("bad, why", [("", "empty"), ("missing", "does not exist"), ("file.txt", "not a folder")])
def test_what_is_not_a_folder_is_refused_in_plain_words(tmp_path, bad, why):
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match=why):
        normalize_root(bad, base=tmp_path)


def test_the_answer_gives_encoded_file_uris_that_name_the_folders(tmp_path):
    names = ["plain", "with space", "per%cent", "hash#and?query", "naïve ünïcode", "семья"]
    folders = []
    for name in names:
        folder = tmp_path / name
        folder.mkdir()
        folders.append(str(folder))
    roots = roots_result(folders)["roots"]
    assert [r["name"] for r in roots] == names
    for root, folder in zip(roots, folders, strict=True):
        uri = root["uri"]
        assert uri.startswith("file:///")
        assert " " not in uri and "#" not in uri.removeprefix("file://") and "?" not in uri
        assert uri.isascii()
        assert path_of(uri) == Path(folder)  # decodes back to the very folder


def test_a_folder_gone_since_is_left_out_of_the_answer(tmp_path):
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    kept.mkdir()
    assert roots_result([str(kept), str(gone), "relative"]) == {
        "roots": [{"uri": kept.as_uri(), "name": "kept"}]}
