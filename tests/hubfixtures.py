"""Hub-shaped folders for tests of eaglekit.hubserver and of the Hub and HTTP readers.

A plain module, not a conftest: import what you need, fixtures included, into your test module::

    from hubfixtures import TOKEN, build_hub_root, hub_root, hub_server, hf_cache, write_repo  # noqa: F401

- :func:`write_repo` writes one ``ROOT/OWNER/REPO`` (bytes as is, str as UTF-8, dict as JSON, a
  mapping of numpy arrays as a safetensors file) with an optional ``.hub.json``.
- :func:`build_hub_root` writes the fixed repos listed in :data:`REPOS` (single-file, sharded, gated,
  private, nested folders, and filler repos so that listings span several pages).
- Fixtures: ``hub_root`` (built once per module), ``hub_server`` (a fresh HubServer over it with
  ``page_size=3`` and ``tokens={TOKEN}``), ``hf_cache`` (a temporary Hub cache: the client's
  import-time ``HF_HUB_CACHE`` is patched, so nothing is written under ~/.cache).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import pytest

TOKEN = "hf_fixture_token"
LAST_MODIFIED = "2025-01-02T03:04:05.000Z"

#: The tensors of acme/eagle3-single's model.safetensors: 48 F32 + 6 I64 + 16 BOOL = 70 parameters.
SINGLE_TENSORS = {
    "fc.weight": np.arange(48, dtype=np.float32).reshape(4, 12),
    "d2t": np.array([0, 1, 1, 2, 3, 5], dtype=np.int64),
    "t2d": np.arange(16) % 2 == 0,
}
#: The two shards of acme/eagle3-sharded: 6 F32 + 4 F16 parameters.
SHARDS = {
    "model-00001-of-00002.safetensors": {"fc.weight": np.ones((2, 3), dtype=np.float32)},
    "model-00002-of-00002.safetensors": {"norm.weight": np.ones(4, dtype=np.float16)},
}
DRAFTER_CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "model_type": "llama",
    "hidden_size": 12,
    "draft_vocab_size": 6,
    "vocab_size": 16,
    "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
}
DRAFTER_META = {
    "tags": ["eagle3", "speculative-decoding"],
    "downloads": 120,
    "likes": 7,
    "pipeline_tag": "text-generation",
    "library_name": "transformers",
    "cardData": {"base_model": "acme/target-model"},
    "lastModified": LAST_MODIFIED,
}
#: Every repo build_hub_root writes; the private one is listed only with TOKEN.
REPOS = (
    "acme/eagle3-gated", "acme/eagle3-private", "acme/eagle3-sharded", "acme/eagle3-single",
    "acme/filler-0", "acme/filler-1", "acme/filler-2", "other/nested",
)


def safetensors_bytes(tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> bytes:
    from safetensors.numpy import save

    return save(dict(tensors), metadata=dict(metadata) if metadata else None)


def write_repo(root: Path, repo_id: str, files: Mapping[str, object], *, meta: Mapping | None = None) -> Path:
    """Write ``root/repo_id``; ``files`` maps a path in the repo to bytes, str, a JSON dict, or (for
    ``*.safetensors``) a mapping of numpy arrays. ``meta`` becomes ``.hub.json``."""
    folder = Path(root) / repo_id
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".safetensors") and isinstance(content, Mapping):
            content = safetensors_bytes(content)
        elif isinstance(content, dict):
            content = json.dumps(content, indent=2)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    if meta is not None:
        (folder / ".hub.json").write_text(json.dumps(meta))
    return folder


def build_hub_root(root: Path) -> Path:
    """Write the repos of :data:`REPOS` under ``root`` and return it."""
    root = Path(root)
    write_repo(root, "acme/eagle3-single", {
        "config.json": DRAFTER_CONFIG, "model.safetensors": SINGLE_TENSORS, "README.md": "# single\n",
    }, meta=DRAFTER_META)
    index = {"metadata": {"total_size": 32},
             "weight_map": {name: shard for shard, tensors in SHARDS.items() for name in tensors}}
    write_repo(root, "acme/eagle3-sharded", {"config.json": DRAFTER_CONFIG, **SHARDS,
                                             "model.safetensors.index.json": index},
               meta={**DRAFTER_META, "downloads": 50})
    write_repo(root, "acme/eagle3-gated", {"config.json": DRAFTER_CONFIG, "model.safetensors": SINGLE_TENSORS},
               meta={"gated": "manual", "downloads": 10})
    write_repo(root, "acme/eagle3-private", {"config.json": DRAFTER_CONFIG}, meta={"private": True})
    for i in range(3):
        write_repo(root, f"acme/filler-{i}", {"README.md": f"filler {i}\n"}, meta={"downloads": i})
    write_repo(root, "other/nested", {
        "README.md": "nested\n", "docs/a.txt": "a\n", "docs/deep/b.txt": "b\n",
        ".gitattributes": "*.safetensors filter=lfs\n", ".cache/secret.txt": "not part of the repo\n",
    })
    return root


@pytest.fixture(scope="module")
def hub_root(tmp_path_factory) -> Path:
    return build_hub_root(tmp_path_factory.mktemp("hubroot"))


@pytest.fixture
def hub_server(hub_root) -> Iterator:
    from eaglekit.demo.hubserver import HubServer

    with HubServer(hub_root, tokens={TOKEN}, page_size=3) as server:
        yield server


@pytest.fixture
def hf_cache(tmp_path, monkeypatch) -> Path:
    """A temporary Hub cache folder, also set as the client's default (read at import time)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache
