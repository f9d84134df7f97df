"""The demo Hub serves the trained world's current files, also after that world was trained again."""

from __future__ import annotations

import json


def test_a_retrained_world_is_what_the_hub_serves(tmp_path_factory, trained):
    from eaglekit.demo.world import TRAINED_HUB_REPOS, build_demo

    ws = build_demo(tmp_path_factory.mktemp("hubdemo") / "ws", trained=trained.root)
    repo, src = next(iter(TRAINED_HUB_REPOS.items()))
    served, own = ws.hub_root / repo / "model.safetensors", trained.root / src / "model.safetensors"
    assert served.read_bytes() == own.read_bytes()
    # as after `build_trained_demo` built the world again: the workspace's record of it is another build, and the
    # Hub's copy is an old file
    manifest = json.loads((ws.root / "manifest.json").read_text())
    (ws.root / "manifest.json").write_text(json.dumps({**manifest, "trained": {**manifest["trained"], "build": "old"}}))
    served.unlink()
    served.write_bytes(b"an old build's weights")
    again = build_demo(ws.root)
    assert served.read_bytes() == own.read_bytes()
    assert again.manifest["trained"]["build"] == trained.manifest.get("build")
