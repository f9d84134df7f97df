"""`eaglekit inspect` gives the same tensor list wherever the checkpoint lives, reading headers only."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eaglekit.core.errors import AuthError, NotFoundError, OfflineError, RangeNotSupportedError, LocationError
from eaglekit.io.reader import read_inventory

REPO = "demo-aqmed/Kimi-K2-Instruct-eagle3"


def inspect_json(location, *extra, env=None):
    r = subprocess.run([sys.executable, "-m", "eaglekit", "inspect", str(location), "--json", *extra],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_same_tensors_local_hub_http_ssh(demo, hub, sshd, tmp_path):
    local = inspect_json(demo.drafter("k2"))
    hub_out = inspect_json(f"hf://{REPO}", "--endpoint", hub.endpoint)
    http_out = inspect_json(f"{hub.endpoint}/files/{REPO}/model.safetensors")
    home = sshd.make_home(tmp_path / "home")
    env = {**os.environ, "HOME": str(home)}
    ssh_out = inspect_json(f"ssh://{sshd.alias}{demo.drafter('k2')}", env=env)
    scp_out = inspect_json(f"{sshd.user}@{sshd.alias}:{demo.drafter('k2')}/model.safetensors", env=env)
    for other in (hub_out, http_out, ssh_out, scp_out):
        assert other["tensors"] == local["tensors"]
        assert other["parameters"] == local["parameters"] and other["total_bytes"] == local["total_bytes"]
        assert other["metadata"] == local["metadata"]
    assert local["tensors"][0] == {"name": "d2t", "dtype": "I64", "shape": [2000], "nbytes": 16000,
                                   "file": "model.safetensors"}
    assert {"source", "files", "tensors", "parameters", "total_bytes", "metadata"} == set(local)
    assert set(local["files"][0]) == {"path", "size", "header_bytes"}


def test_hub_single_file_requests(demo, hub):
    hub.clear_log()
    inv = read_inventory(f"hf://{REPO}", endpoint=hub.endpoint)
    resolve = [r for r in hub.log if "/resolve/" in r.path and r.path.endswith(".safetensors")]
    assert len(resolve) == 1 and resolve[0].range == "bytes=0-65535"
    assert resolve[0].bytes_sent == min(65536, inv.files[0].size)
    assert inv.config["architectures"] == ["LlamaForCausalLMEagle3"]


def test_hub_sharded_one_request_per_shard(demo, hub):
    hub.clear_log()
    inv = read_inventory(f"hf://{REPO}-sharded", endpoint=hub.endpoint)
    resolve = [r for r in hub.log if "/resolve/" in r.path and r.path.endswith(".safetensors")]
    probe, shards = resolve[0], resolve[1:]  # model.safetensors is probed first: a 404 here
    assert probe.path.endswith("/model.safetensors") and probe.status == 404
    assert len(inv.files) == 3 and len(shards) == 3
    assert sorted(r.path.rsplit("/", 1)[1] for r in shards) == [f.path for f in inv.files]
    assert inv.names == read_inventory(demo.drafter("k2")).names


def test_large_header_takes_a_second_request(tmp_path, hub):
    import numpy as np
    from safetensors.numpy import save_file

    from eaglekit.demo.hubserver import HubServer

    repo = tmp_path / "org" / "big"
    repo.mkdir(parents=True)
    save_file({f"layer.{i:05d}.weight": np.zeros(1, np.float32) for i in range(1500)},
              str(repo / "model.safetensors"))
    with HubServer(tmp_path) as server:
        inv = read_inventory("hf://org/big", endpoint=server.endpoint)
        reads = [r for r in server.log if r.path.endswith(".safetensors")]
    assert len(inv) == 1500 and len(reads) == 2
    assert reads[1].range.startswith("bytes=65536-")


@pytest.mark.parametrize("location, err, fragment", [
    ("hf://nobody/nothing", NotFoundError, "repo not found"),
    (f"hf://{REPO}@v9", NotFoundError, "revision not found"),
    (f"hf://{REPO}/nope.safetensors", NotFoundError, "not found"),
])
def test_hub_not_found(hub, location, err, fragment):
    with pytest.raises(err) as e:
        read_inventory(location, endpoint=hub.endpoint)
    assert fragment in str(e.value)


@pytest.fixture
def gated_hub(tmp_path, demo):
    import shutil

    from eaglekit.demo.hubserver import HubServer

    repo = tmp_path / "org" / "gated"
    shutil.copytree(demo.drafter("k2"), repo)
    (repo / ".hub.json").write_text(json.dumps({"gated": "manual"}))
    with HubServer(tmp_path, tokens={"hf_good"}) as server:
        yield server


def test_gated_without_token(gated_hub):
    with pytest.raises(AuthError, match="gated") as e:
        read_inventory("hf://org/gated", endpoint=gated_hub.endpoint, token=False)
    assert "HF_TOKEN" in str(e.value)


def test_gated_with_wrong_token_never_shows_it(gated_hub):
    with pytest.raises(AuthError) as e:
        read_inventory("hf://org/gated", endpoint=gated_hub.endpoint, token="hf_wrong_secret")
    assert "hf_wrong_secret" not in str(e.value) and "hf_wrong_secret" not in repr(e.value.__cause__)


def test_gated_with_token(gated_hub):
    assert len(read_inventory("hf://org/gated", endpoint=gated_hub.endpoint, token="hf_good")) == 15


def test_offline_mode(hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(OfflineError, match="HF_HUB_OFFLINE"):
        read_inventory(f"hf://{REPO}", endpoint=hub.endpoint)


def test_server_ignoring_range_is_refused(demo, tmp_path):
    from eaglekit.demo.hubserver import HubServer

    with HubServer(demo.hub_root) as server:
        server.ignore_range = True
        with pytest.raises(RangeNotSupportedError, match="refuses to download"):
            read_inventory(f"{server.endpoint}/files/{REPO}/model.safetensors")
        with pytest.raises(RangeNotSupportedError):
            read_inventory(f"hf://{REPO}", endpoint=server.endpoint)
        big = (demo.drafter("k2") / "model.safetensors").stat().st_size
        # the client hung up before reading the body: the server's writes stopped once the socket buffers filled
        assert all(r.bytes_sent < big / 2 for r in server.log)


def test_connection_refused():
    with pytest.raises(LocationError, match="Cannot reach http://127.0.0.1:9"):
        read_inventory("http://127.0.0.1:9/m/model.safetensors")


def test_http_not_found_and_html(hub, tmp_path):
    with pytest.raises(NotFoundError):
        read_inventory(f"{hub.endpoint}/files/{REPO}/missing.safetensors")


def test_cli_errors_are_one_line(hub):
    for location in ("hf://nobody/nothing", "/definitely/not/here", "http://127.0.0.1:9/x.safetensors"):
        r = subprocess.run([sys.executable, "-m", "eaglekit", "inspect", location, "--endpoint", hub.endpoint],
                           capture_output=True, text=True)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and location.split("/")[-1] in r.stderr


def test_ssh_errors(demo, sshd, tmp_path, monkeypatch):
    from eaglekit.core.errors import HostKeyError

    monkeypatch.setenv("HOME", str(sshd.make_home(tmp_path / "h1", known_hosts="")))
    with pytest.raises(HostKeyError, match="ssh-keyscan"):
        read_inventory(f"ssh://{sshd.alias}{demo.drafter('k2')}")
    monkeypatch.setenv("HOME", str(sshd.make_home(tmp_path / "h2")))
    with pytest.raises(NotFoundError):
        read_inventory(f"ssh://{sshd.alias}/no/such/folder/model.safetensors")


def test_hf_endpoint_and_hf_token_from_the_environment(gated_hub):
    """The CLI takes the endpoint from HF_ENDPOINT and the token from HF_TOKEN, and never prints it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=gated_hub.endpoint, HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(gated_hub.root) + "-home")
    out = inspect_json("hf://org/gated", env={**env, "HF_TOKEN": "hf_good"})
    assert len(out["tensors"]) == 15
    r = subprocess.run([sys.executable, "-m", "eaglekit", "inspect", "hf://org/gated"], capture_output=True,
                       text=True, env={**env, "HF_TOKEN": "hf_bad_secret"})
    assert r.returncode == 2 and "gated" in r.stderr
    assert "hf_bad_secret" not in r.stderr + r.stdout


def test_a_bare_owner_name_that_is_no_local_folder_hints_at_hf(capsys, tmp_path, monkeypatch):
    from eaglekit.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "AQ-MedAI/Kimi-K2-Instruct-eagle3"]) == 2
    err = capsys.readouterr().err
    assert "no such file or folder. For the Hub repo AQ-MedAI/Kimi-K2-Instruct-eagle3, write " \
           "hf://AQ-MedAI/Kimi-K2-Instruct-eagle3." in err
    assert main(["inspect", "./nope/x"]) == 2
    assert "hf://" not in capsys.readouterr().err
