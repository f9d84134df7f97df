"""The loopback servers answer small requests without stalls and scan a repo once, not per request."""

from __future__ import annotations

import os
import socket

import httpx
import numpy as np
from safetensors.numpy import save_file

from eaglekit.demo import hubserver
from eaglekit.demo.fileserver import FileServer
from eaglekit.demo.hubserver import HubServer


def test_connections_set_tcp_nodelay(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"x" * 10)
    seen = []
    with FileServer(tmp_path) as server:
        original = server.handler.setup

        def setup(handler):
            original(handler)
            seen.append(handler.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))

        server.handler.setup = setup
        try:
            assert httpx.get(f"{server.endpoint}/files/f.bin").content == b"x" * 10
        finally:
            del server.handler.setup
    assert seen and all(seen)


def test_repo_scanned_once_and_rescanned_when_a_file_changes(tmp_path, monkeypatch):
    repo = tmp_path / "org" / "m"
    repo.mkdir(parents=True)
    save_file({"w": np.zeros(4, np.float32)}, str(repo / "model.safetensors"))
    (repo / "config.json").write_text('{"a": 1}')
    os.utime(repo, (1e9, 1e9))  # an old folder mtime: adding a file below must change it, at any clock granularity
    scans = []
    real = hubserver._load_repo
    monkeypatch.setattr(hubserver, "_load_repo", lambda *a: scans.append(a) or real(*a))
    with HubServer(tmp_path) as server, httpx.Client() as client:
        url = f"{server.endpoint}/org/m/resolve/main/config.json"
        for _ in range(5):
            assert client.get(url).json() == {"a": 1}
        assert len(scans) == 1
        sha = client.get(f"{server.endpoint}/api/models/org/m").json()["sha"]
        (repo / "config.json").write_text('{"a": 22}')  # a new size: noticed whatever the mtime granularity
        assert client.get(url).json() == {"a": 22}
        assert client.get(f"{server.endpoint}/api/models/org/m").json()["sha"] != sha
        (repo / "extra.txt").write_text("new")
        assert client.get(f"{server.endpoint}/org/m/resolve/main/extra.txt").text == "new"
        assert len(scans) == 3
