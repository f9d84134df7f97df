"""The location grammar: one parser for the library, notebooks and CLI."""

from __future__ import annotations

import re

import pytest

from eaglekit.core.errors import LocationError
from eaglekit.io.location import parse_location


@pytest.mark.parametrize("text, kind, folder, filename", [
    ("hf://org/repo", "hub", "", None),
    ("hf://org/repo@v1.0/sub/dir", "hub", "sub/dir", None),
    ("hf://org/repo/model.safetensors", "hub", "", "model.safetensors"),
    ("hf://org/repo@abc123/x/model.safetensors.index.json", "hub", "x", "model.safetensors.index.json"),
    ("https://example.org/m/model.safetensors", "http", "https://example.org/m", "model.safetensors"),
    ("http://127.0.0.1:8000/files/k2/", "http", "http://127.0.0.1:8000/files/k2", None),
    ("ssh://alice@gpu1:2222/data/k2/model.safetensors", "ssh", "/data/k2", "model.safetensors"),
    ("ssh://gpu1/data/k2", "ssh", "/data/k2", None),
    ("alice@gpu1:/data/k2", "ssh", "/data/k2", None),
    ("gpu1:/data/k2/config.json", "ssh", "/data/k2", "config.json"),
])
def test_parse(text, kind, folder, filename):
    loc = parse_location(text)
    assert (loc.kind, loc.folder, loc.filename) == (kind, folder, filename)


def test_hub_fields():
    loc = parse_location("hf://org/repo@refs/pr/1")
    assert loc.repo_id == "org/repo" and loc.revision == "refs/pr/1" and loc.folder == ""
    loc = parse_location("hf://org/repo@main")
    assert loc.revision == "main"


def test_ssh_fields():
    loc = parse_location("ssh://alice@gpu1:2222/data/k2")
    assert (loc.user, loc.host, loc.port) == ("alice", "gpu1", 2222)
    loc = parse_location("bob@10.0.0.1:/m")
    assert (loc.user, loc.host, loc.port) == ("bob", "10.0.0.1", None)


def test_local(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"")
    loc = parse_location(str(f))
    assert (loc.kind, loc.folder, loc.filename) == ("local", str(tmp_path), "model.safetensors")
    loc = parse_location(str(tmp_path))
    assert (loc.kind, loc.folder, loc.filename) == ("local", str(tmp_path), None)


@pytest.mark.parametrize("text, fragment", [
    ("", "Empty location"),
    ("hf://just-a-name", "expected hf://OWNER/REPO"),
    ("ssh://host", "expected ssh://[user@]host[:port]/abs/path"),
    ("ssh://host:notaport/x", "the port is not a number"),
    ("https:///nohost", "no host"),
])
def test_malformed(text, fragment):
    with pytest.raises(LocationError) as e:
        parse_location(text)
    assert fragment in str(e.value)


@pytest.mark.parametrize("text, fragment", [
    ("ftp://x/y", "Unsupported location scheme ftp://"),
    ("s3://bucket/key", "Unsupported location scheme s3://"),
    ("http://[::1", "Malformed URL"),
    ("http://host:99x/m.safetensors", "Malformed URL"),
])
def test_unsupported_or_broken_urls(text, fragment):
    with pytest.raises(LocationError, match=re.escape(fragment)):
        parse_location(text)


def test_credentials_never_shown():
    loc = parse_location("https://u:hf_SECRET@example.org/m/model.safetensors?X-Amz-Signature=abc")
    assert "hf_SECRET" not in loc.raw and loc.raw == "https://example.org/m/model.safetensors"
    assert loc.query == "?X-Amz-Signature=abc" and loc.filename == "model.safetensors"


def test_credentials_not_in_errors():
    from eaglekit.io.reader import read_inventory

    with pytest.raises(LocationError) as e:
        read_inventory("http://u:hf_SECRET@127.0.0.1:9/x.safetensors")
    assert "hf_SECRET" not in str(e.value)
