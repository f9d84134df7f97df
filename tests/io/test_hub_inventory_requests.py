"""Hub inventory in the fewest round trips, counted on the loopback Hub against huggingface_hub itself.

A single-file repo costs two requests (the header's first 64 KiB and config.json) sent at once; a
sharded one a 404 probe of model.safetensors beside config.json, the index, then the shards in
parallel. Never more requests than ``huggingface_hub.get_safetensors_metadata`` for the same repo.
"""

from __future__ import annotations

import threading

import pytest

from eaglekit.io.reader import read_inventory

REPO = "demo-aqmed/Kimi-K2-Instruct-eagle3"


def _hf_requests(hub, repo: str) -> int:
    from huggingface_hub import HfApi

    hub.clear_log()
    HfApi(endpoint=hub.endpoint).get_safetensors_metadata(repo)
    return len(hub.log)


def test_single_file_repo_two_requests_no_listing(demo, hub):
    hub.clear_log()
    inv = read_inventory(f"hf://{REPO}", endpoint=hub.endpoint)
    log = hub.log
    assert sorted(r.path.rsplit("/", 1)[1] for r in log) == ["config.json", "model.safetensors"]
    assert not any("/tree/" in r.path for r in log)
    assert inv.config is not None and len(inv) > 0
    assert len(log) <= _hf_requests(hub, REPO)


def test_sharded_repo_requests(demo, hub):
    hub.clear_log()
    inv = read_inventory(f"hf://{REPO}-sharded", endpoint=hub.endpoint)
    names = [r.path.rsplit("/", 1)[1] for r in hub.log]
    shards = sorted(f.path for f in inv.files)
    assert sorted(names) == sorted(["model.safetensors", "config.json", "model.safetensors.index.json", *shards])
    assert not any("/tree/" in r.path for r in hub.log)
    assert len(names) <= _hf_requests(hub, f"{REPO}-sharded")


def test_header_and_config_are_in_flight_together(demo, hub, monkeypatch):
    """The header request is held by the server until config.json's request has arrived: a client that
    waited for one answer before sending the other would never get past the first."""
    config_seen, header_saw_config = threading.Event(), []
    original = type(hub)._take_fault

    def hold(self, path):
        if path.endswith("/config.json"):
            config_seen.set()
        elif path.endswith("/model.safetensors"):
            header_saw_config.append(config_seen.wait(timeout=10))
        return original(self, path)

    monkeypatch.setattr(hub, "_take_fault", hold.__get__(hub))
    read_inventory(f"hf://{REPO}", endpoint=hub.endpoint)
    assert header_saw_config == [True]


def test_repo_without_safetensors_falls_back_to_the_listing(tmp_path):
    from eaglekit.core.errors import NotFoundError
    from eaglekit.demo.hubserver import HubServer

    (tmp_path / "org" / "bin").mkdir(parents=True)
    (tmp_path / "org" / "bin" / "pytorch_model.bin").write_bytes(b"PK\x03\x04")
    (tmp_path / "org" / "odd").mkdir(parents=True)
    from safetensors.numpy import save_file
    import numpy as np

    save_file({"w": np.zeros(3, np.float32)}, str(tmp_path / "org" / "odd" / "weights.safetensors"))
    with HubServer(tmp_path) as server:
        with pytest.raises(NotFoundError, match="no safetensors files here"):
            read_inventory("hf://org/bin", endpoint=server.endpoint)
        assert read_inventory("hf://org/odd", endpoint=server.endpoint).names == ("w",)
        with pytest.raises(NotFoundError, match="repo not found"):
            read_inventory("hf://org/missing", endpoint=server.endpoint)


def test_missing_small_file_keeps_the_connection(tmp_path, monkeypatch):
    """A 404 for config.json is drained, so its keep-alive connection is reused, not reopened per call."""
    import numpy as np
    from safetensors.numpy import save_file

    from eaglekit.demo import fileserver
    from eaglekit.demo.hubserver import HubServer

    (tmp_path / "org" / "noconfig").mkdir(parents=True)
    save_file({"w": np.zeros(3, np.float32)}, str(tmp_path / "org" / "noconfig" / "model.safetensors"))
    accepted = []
    original = fileserver._HTTPServer.process_request
    monkeypatch.setattr(fileserver._HTTPServer, "process_request",
                        lambda self, request, address: accepted.append(address) or original(self, request, address))
    with HubServer(tmp_path) as server:
        for _ in range(5):
            assert read_inventory("hf://org/noconfig", endpoint=server.endpoint).config is None
    # config.json and the header are fetched side by side, so a call holds at most two connections at once
    # (one or two, with the scheduling); a 404 left undrained would cost a new connection on every call.
    assert 1 <= len(accepted) <= 2, accepted
