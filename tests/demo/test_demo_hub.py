"""The demo Hub's search shelf: valid checkpoints at 1/16 scale, sparse on disk, rebuilt only when stale."""

from __future__ import annotations

import json

import pytest

from eaglekit.core.configs.config import normalize_config
from eaglekit.demo.shelf import SHELF_VERSION, _MARKER, build_demo_hub_repos, serve_demo_hub, write_sparse_safetensors
from eaglekit.core.errors import HeaderError
from eaglekit.io.reader import read_inventory
from eaglekit.core.tokens.vocab import check_vocab_map

SPARSE = ["demo-nvidia/Llama-3.3-70B-Instruct-Eagle3", "demo-AngelSlim/Qwen3-8B_eagle3",
          "demo-RedHatAI/Qwen3-8B-speculator.eagle3", "demo-lightseekorg/kimi-k2-eagle3-mla"]


@pytest.mark.parametrize("repo", SPARSE)
def test_sparse_drafters_are_valid_and_match_their_config(demo, repo):
    folder = demo.hub_root / repo
    cfg = normalize_config(json.loads((folder / "config.json").read_text()))
    inv = read_inventory(folder, progress=False)
    assert inv["fc.weight"].shape == (cfg.hidden_size, 3 * cfg.target_hidden_size)
    assert inv["lm_head.weight"].shape == (cfg.draft_vocab_size, cfg.hidden_size)
    assert inv["t2d"].shape == (cfg.vocab_size,) and inv["d2t"].shape == (cfg.draft_vocab_size,)
    import torch
    from safetensors.torch import load_file

    tensors = load_file(str(folder / "model.safetensors"))
    check = check_vocab_map(tensors["d2t"].numpy(), tensors["t2d"].numpy(), vocab_size=cfg.vocab_size,
                            draft_vocab_size=cfg.draft_vocab_size)
    assert check.valid, check
    norm = next(k for k in tensors if k.endswith("input_layernorm.weight"))
    assert tensors[norm].tolist() == [1.0] * cfg.hidden_size
    assert not tensors["fc.weight"].any() and tensors["fc.weight"].dtype == torch.bfloat16  # the hole reads as zeros


def test_speculators_layout_renamed(demo):
    inv = read_inventory(demo.hub_root / "demo-RedHatAI/Qwen3-8B-speculator.eagle3", progress=False)
    assert "layers.0.self_attn.q_proj.weight" in inv and "midlayer.self_attn.q_proj.weight" not in inv


def test_hard_links_share_weights(demo):
    k2 = demo.drafter("k2") / "model.safetensors"
    assert (demo.hub_root / "demo-someone/draft-head-v2/model.safetensors").samefile(k2)


def test_sparse_writer_tiles_exactly(tmp_path):
    path = tmp_path / "x.safetensors"
    write_sparse_safetensors(path, {"a.weight": [3, 5], "norm.weight": [4]}, {"d2t": ("I64", b"\0" * 16)},
                             metadata={"format": "pt"})
    inv = read_inventory(path, progress=False)
    assert [(t.name, t.dtype, t.shape) for t in inv] == [("a.weight", "BF16", (3, 5)), ("d2t", "I64", (2,)),
                                                        ("norm.weight", "BF16", (4,))]
    assert path.stat().st_size == 8 + int.from_bytes(path.read_bytes()[:8], "little") + 30 + 8 + 16
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(HeaderError):
        read_inventory(path, progress=False)


def test_idempotent_and_versioned(demo, tmp_path):
    hub, root = tmp_path / "hub", demo.root
    repos = build_demo_hub_repos(hub, root)
    assert len(repos) == 15 and json.loads((hub / _MARKER).read_text())["version"] == SHELF_VERSION
    stamp = (hub / repos[0] / "config.json").stat().st_mtime_ns
    assert build_demo_hub_repos(hub, root) == repos
    assert (hub / repos[0] / "config.json").stat().st_mtime_ns == stamp  # kept, not rewritten
    (hub / _MARKER).write_text(json.dumps({"version": 0}))
    build_demo_hub_repos(hub, root)
    assert json.loads((hub / _MARKER).read_text())["version"] == SHELF_VERSION


def test_own_repos_get_stats(demo):
    meta = json.loads((demo.hub_root / "demo-aqmed/Kimi-K2-Instruct-eagle3/.hub.json").read_text())
    assert (meta["downloads"], meta["likes"]) == (5210, 61) and "eaglekit-demo" in meta["tags"]


def test_serve_demo_hub(demo):
    server = serve_demo_hub(demo, page_size=3)
    try:
        assert server.page_size == 3 and server.endpoint.startswith("http://127.0.0.1:")
    finally:
        server.stop()
