"""eaglekit.hubserver driven by the real huggingface_hub client (HfApi, hf_hub_download, HfFileSystem),
always with an explicit endpoint: the client reads HF_ENDPOINT once, at import time."""

from __future__ import annotations

import hashlib
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hubfixtures import (  # noqa: F401 (pytest fixtures)
    DRAFTER_CONFIG,
    LAST_MODIFIED,
    SHARDS,
    SINGLE_TENSORS,
    TOKEN,
    hf_cache,
    hub_root,
    hub_server,
)

from eaglekit.core.errors import InputError
from eaglekit.demo.hubserver import HubServer

SINGLE = "acme/eagle3-single"


@pytest.fixture
def api(hub_server):
    from huggingface_hub import HfApi

    return HfApi(endpoint=hub_server.endpoint, token=False)


@pytest.fixture
def fs(hub_server):
    from huggingface_hub import HfFileSystem

    return HfFileSystem(endpoint=hub_server.endpoint, token=False, skip_instance_cache=True)


def _requests(server, prefix: str) -> list:
    return [r for r in server.log if r.path.startswith(prefix)]


# -- model_info and list_models -------------------------------------------------------------------


def test_model_info_default_answer(api, hub_root):
    info = api.model_info(SINGLE)
    assert re.fullmatch(r"[0-9a-f]{40}", info.sha)
    assert (info.id, info.author, info.downloads, info.likes) == (SINGLE, "acme", 120, 7)
    assert info.tags == ["eagle3", "speculative-decoding"]
    assert (info.pipeline_tag, info.library_name, info.private, info.gated) == (
        "text-generation", "transformers", False, False)
    assert info.card_data.base_model == "acme/target-model"
    assert info.last_modified.strftime("%Y-%m-%dT%H:%M:%S.000Z") == LAST_MODIFIED
    assert [s.rfilename for s in info.siblings] == ["README.md", "config.json", "model.safetensors"]  # no .hub.json
    # config is the Hub's summary of config.json, not the whole file
    assert info.config == {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
                           "quantization_config": {"quant_method": "fp8"}}
    assert info.safetensors.parameters == {"F32": 48, "I64": 6, "BOOL": 16}
    assert info.safetensors.total == 70 == sum(math.prod(a.shape) for a in SINGLE_TENSORS.values())


def test_model_info_expand_returns_only_what_was_asked(api, hub_server):
    info = api.model_info(SINGLE, expand=["config", "safetensors"])
    assert info.config["model_type"] == "llama"
    assert info.safetensors.total == 70
    assert (info.sha, info.siblings, info.downloads) == (None, None, None)
    assert hub_server.log[-1].query == "expand=config&expand=safetensors"


def test_model_info_files_metadata_gives_sizes_blob_ids_and_lfs(api, hub_root):
    siblings = {s.rfilename: s for s in api.model_info(SINGLE, files_metadata=True).siblings}
    config_bytes = (hub_root / SINGLE / "config.json").read_bytes()
    weights = (hub_root / SINGLE / "model.safetensors").read_bytes()
    assert siblings["config.json"].size == len(config_bytes)
    assert siblings["config.json"].blob_id == hashlib.sha1(b"blob %d\0" % len(config_bytes) + config_bytes).hexdigest()
    assert siblings["config.json"].lfs is None
    assert siblings["model.safetensors"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
    assert siblings["model.safetensors"].lfs.size == len(weights)


def test_full_config_serves_the_whole_file(hub_root):
    from huggingface_hub import HfApi

    with HubServer(hub_root, full_config=True) as server:
        assert HfApi(endpoint=server.endpoint, token=False).model_info(SINGLE).config == DRAFTER_CONFIG


def test_revision_main_and_sha_resolve_others_do_not(api):
    from huggingface_hub.errors import RevisionNotFoundError

    sha = api.model_info(SINGLE).sha
    assert api.model_info(SINGLE, revision=sha).sha == sha
    with pytest.raises(RevisionNotFoundError, match="Invalid rev id: v1.0"):
        api.model_info(SINGLE, revision="v1.0")


def test_list_models_follows_link_pages(api, hub_server):
    ids = [m.id for m in api.list_models()]
    assert ids == ["acme/eagle3-gated", "acme/eagle3-sharded", "acme/eagle3-single",
                   "acme/filler-0", "acme/filler-1", "acme/filler-2", "other/nested"]  # not the private one
    pages = _requests(hub_server, "/api/models")
    assert len(pages) == 3  # page_size=3
    assert [r.query.count("cursor=") for r in pages] == [0, 1, 1]


def test_list_models_search_author_limit_and_sort(api, hub_server):
    assert [m.id for m in api.list_models(search="EAGLE3-S")] == ["acme/eagle3-sharded", "acme/eagle3-single"]
    assert {m.id for m in api.list_models(author="other")} == {"other/nested"}
    hub_server.clear_log()
    assert len(list(api.list_models(limit=2))) == 2
    assert len(hub_server.log) == 1
    by_downloads = [m.id for m in api.list_models(author="acme", sort="downloads")]
    assert by_downloads[:3] == ["acme/eagle3-single", "acme/eagle3-sharded", "acme/eagle3-gated"]


def test_list_models_expand_and_private_with_token(hub_server):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=hub_server.endpoint, token=TOKEN)
    models = {m.id: m for m in api.list_models(search="eagle3", expand=["safetensors", "config", "private"])}
    assert models["acme/eagle3-private"].private is True
    assert models["acme/eagle3-sharded"].safetensors.parameters == {"F32": 6, "F16": 4}
    assert models[SINGLE].config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert models[SINGLE].downloads is None  # not asked for


# -- files ----------------------------------------------------------------------------------------


def test_hf_hub_download_into_a_temporary_cache(hub_server, hub_root, tmp_path):
    from huggingface_hub import hf_hub_download

    path = hf_hub_download(SINGLE, "config.json", endpoint=hub_server.endpoint, cache_dir=tmp_path, token=False)
    assert Path(path).read_bytes() == (hub_root / SINGLE / "config.json").read_bytes()
    assert Path(path).is_relative_to(tmp_path)
    head, get = _requests(hub_server, f"/{SINGLE}/resolve/")
    assert (head.method, head.bytes_sent, get.method, get.status) == ("HEAD", 0, "GET", 200)
    assert get.bytes_sent == len(Path(path).read_bytes())


def test_get_safetensors_metadata_single_file(api):
    meta = api.get_safetensors_metadata(SINGLE)
    assert meta.sharded is False
    tensors = meta.files_metadata["model.safetensors"].tensors
    assert {k: (t.dtype, t.shape) for k, t in tensors.items()} == {
        "fc.weight": ("F32", [4, 12]), "d2t": ("I64", [6]), "t2d": ("BOOL", [16])}


def test_get_safetensors_metadata_sharded(api, hf_cache):
    meta = api.get_safetensors_metadata("acme/eagle3-sharded")
    assert meta.sharded is True
    assert meta.weight_map == {"fc.weight": "model-00001-of-00002.safetensors",
                               "norm.weight": "model-00002-of-00002.safetensors"}
    assert set(meta.files_metadata) == set(SHARDS)
    assert meta.parameter_count == {"F32": 6, "F16": 4}
    assert any(hf_cache.rglob("model.safetensors.index.json"))  # the index went to the temporary cache


def test_hffilesystem_ls_info_and_ranged_read(fs, hub_server, hub_root):
    assert fs.ls(SINGLE, detail=False) == [f"{SINGLE}/README.md", f"{SINGLE}/config.json", f"{SINGLE}/model.safetensors"]
    weights = (hub_root / SINGLE / "model.safetensors").read_bytes()
    info = fs.info(f"{SINGLE}/model.safetensors")
    assert (info["type"], info["size"]) == ("file", len(weights))
    assert fs.info("other/nested/docs")["type"] == "directory"
    assert fs.ls("other/nested/docs", detail=False) == ["other/nested/docs/a.txt", "other/nested/docs/deep"]
    hub_server.clear_log()
    with fs.open(f"{SINGLE}/model.safetensors", "rb", block_size=64) as f:
        f.seek(100)
        assert f.read(10) == weights[100:110]
    (read,) = _requests(hub_server, f"/{SINGLE}/resolve/")
    start, end = map(int, read.range.removeprefix("bytes=").split("-"))
    assert read.status == 206 and start <= 100 and end >= 109
    assert read.bytes_sent == end - start + 1  # exactly the range, not the file


def test_list_repo_tree_flat_recursive_and_paginated(api, hub_server):
    from huggingface_hub.hf_api import RepoFile, RepoFolder

    flat = list(api.list_repo_tree("other/nested"))
    assert [(type(e), e.path) for e in flat] == [(RepoFile, "README.md"), (RepoFolder, "docs")]
    hub_server.clear_log()
    every = [e.path for e in api.list_repo_tree("other/nested", recursive=True)]
    assert every == ["README.md", "docs", "docs/a.txt", "docs/deep", "docs/deep/b.txt"]  # hidden names left out
    assert len(hub_server.log) == 2  # 5 entries, 3 per page
    assert [e.path for e in api.list_repo_tree("other/nested", "docs/deep")] == ["docs/deep/b.txt"]


def test_get_paths_info(api, hub_root):
    info = {e.path: e for e in api.get_paths_info(SINGLE, ["config.json", "model.safetensors", "missing.txt"])}
    assert set(info) == {"config.json", "model.safetensors"}  # missing paths are left out, as on the Hub
    assert info["config.json"].lfs is None
    weights = (hub_root / SINGLE / "model.safetensors").read_bytes()
    assert info["model.safetensors"].lfs.sha256 == hashlib.sha256(weights).hexdigest()
    (folder,) = api.get_paths_info("other/nested", "docs")
    assert type(folder).__name__ == "RepoFolder"


# -- errors ---------------------------------------------------------------------------------------


def test_missing_repo_is_401_anonymous_and_404_with_a_token(api, hub_server):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    with pytest.raises(RepositoryNotFoundError) as anonymous:
        api.model_info("acme/nope")
    with pytest.raises(RepositoryNotFoundError) as authenticated:
        HfApi(endpoint=hub_server.endpoint, token=TOKEN).model_info("acme/nope")
    assert (anonymous.value.response.status_code, authenticated.value.response.status_code) == (401, 404)
    assert anonymous.value.response.headers["X-Error-Code"] == "RepoNotFound"


def test_private_repo_needs_an_accepted_token(api, hub_server):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError

    with pytest.raises(RepositoryNotFoundError):
        api.model_info("acme/eagle3-private")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=hub_server.endpoint, token="hf_wrong").model_info("acme/eagle3-private")
    assert HfApi(endpoint=hub_server.endpoint, token=TOKEN).model_info("acme/eagle3-private").private is True


def test_missing_file_is_entry_not_found(hub_server, tmp_path):
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    with pytest.raises(EntryNotFoundError, match=r"Entry Not Found for url: .*/resolve/main/nope.json"):
        hf_hub_download(SINGLE, "nope.json", endpoint=hub_server.endpoint, cache_dir=tmp_path, token=False)
    assert hub_server.log[-1].status == 404


@pytest.mark.parametrize(("token", "status"), [(False, 401), ("hf_wrong", 403)])
def test_gated_files_need_an_accepted_token(hub_server, tmp_path, token, status):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import GatedRepoError

    gated = "acme/eagle3-gated"
    assert HfApi(endpoint=hub_server.endpoint, token=token).model_info(gated).gated == "manual"  # metadata is public
    with pytest.raises(GatedRepoError, match=f"Access to model {gated} is restricted") as caught:
        hf_hub_download(gated, "config.json", endpoint=hub_server.endpoint, cache_dir=tmp_path, token=token)
    assert caught.value.response.status_code == status
    path = hf_hub_download(gated, "config.json", endpoint=hub_server.endpoint, cache_dir=tmp_path, token=TOKEN)
    assert Path(path).is_file()


def test_inject_429_reaches_the_client_with_retry_after(api, hub_server):
    from huggingface_hub.errors import HfHubHTTPError

    hub_server.inject(f"/api/models/{SINGLE}", 429, {"Retry-After": "17"})
    with pytest.raises(HfHubHTTPError, match="429 Too Many Requests") as caught:
        api.model_info(SINGLE)
    assert caught.value.response.headers["Retry-After"] == "17"
    assert api.model_info(SINGLE).id == SINGLE  # times=1: served again


def test_ignore_range_serves_the_whole_file_to_a_ranged_read(fs, hub_server, hub_root):
    hub_server.ignore_range = True
    with fs.open(f"{SINGLE}/model.safetensors", "rb", block_size=16) as f:
        f.read(4)
    (read,) = _requests(hub_server, f"/{SINGLE}/resolve/")
    assert read.range is not None and read.status == 200
    assert read.bytes_sent == (hub_root / SINGLE / "model.safetensors").stat().st_size


def test_tokens_are_logged_as_present_never_as_values(hub_server):
    from huggingface_hub import HfApi

    HfApi(endpoint=hub_server.endpoint, token=TOKEN).model_info(SINGLE)
    assert hub_server.log[-1].auth is True
    assert TOKEN not in repr(hub_server.log)


def test_plain_files_mode_is_on_the_same_server(hub_server, hub_root):
    import urllib.request

    url = f"{hub_server.endpoint}/files/{SINGLE}/model.safetensors"
    with urllib.request.urlopen(urllib.request.Request(url, headers={"Range": "bytes=0-7"})) as response:
        assert response.status == 206
        assert response.read() == (hub_root / SINGLE / "model.safetensors").read_bytes()[:8]


def test_constructor_rejects_a_bad_page_size(hub_root):
    with pytest.raises(InputError, match="page_size must be at least 1, got 0"):
        HubServer(hub_root, page_size=0)


def test_serve_hub_cli_prints_the_endpoint_and_stops_on_ctrl_c(hub_root):
    import json
    import urllib.request

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "eaglekit", "serve-hub", str(hub_root), "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first, second = proc.stdout.readline(), proc.stdout.readline()
        endpoint = re.search(r"http://127\.0\.0\.1:\d+", first)[0]
        assert "Serving 8 repos" in first  # the private one is counted too
        assert second.strip() == f"export HF_ENDPOINT={endpoint}"
        with urllib.request.urlopen(f"{endpoint}/api/models/{SINGLE}") as response:
            assert json.load(response)["id"] == SINGLE
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0, proc.stderr.read()
