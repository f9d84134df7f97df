"""Block drafters (DFlash, DFlash2, DSpark) found on a loopback Hub by their configs, not their names, and ranked
for a target."""

from __future__ import annotations

import json

import numpy as np
import pytest

from blockfixtures import (DFLASH2_CONFIG, DFLASH_CONFIG, DSPARK_CONFIG, EAGLE3_CONFIG, TARGET_CONFIG, dflash2_shapes,
                           dflash_shapes, dspark_shapes, edited)
from hubfixtures import write_repo
from eaglekit.analysis.search import find_drafters
from eaglekit.demo.hubserver import HubServer


def _tensors(shapes):
    return {n: np.zeros(s, dtype=np.float32) for n, s in shapes.items()}


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("blockhub")
    # names that say nothing: found by config alone
    write_repo(root, "lab/plain-name-a", {"config.json": DFLASH_CONFIG, "model.safetensors": _tensors(dflash_shapes())},
               meta={"downloads": 30})
    write_repo(root, "lab/Qwen3-tiny-DFlash2", {"config.json": DFLASH2_CONFIG,
                                                "model.safetensors": _tensors(dflash2_shapes())}, meta={"downloads": 20})
    write_repo(root, "lab/spark-thing", {"config.json": DSPARK_CONFIG, "model.safetensors": _tensors(dspark_shapes())},
               meta={"downloads": 10})
    # a DFlash drafter for another target: ids past its layers, mask outside its vocabulary, wider
    wide = edited(DFLASH_CONFIG, hidden_size=64, vocab_size=4096, num_target_layers=40,
                  dflash_config__mask_token_id=4000, dflash_config__target_layer_ids=[1, 20, 35])
    write_repo(root, "big/other-dflash", {"config.json": wide}, meta={"downloads": 500})
    # named DFlash, but a plain model: excluded by its config
    write_repo(root, "fake/Llama-DFlash", {"config.json": {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                           "hidden_size": 8, "num_hidden_layers": 2, "vocab_size": 16}},
               meta={"downloads": 5})
    # a DFlash config whose mask id is outside its own vocabulary: a row with the reason
    bad = edited(DFLASH_CONFIG, dflash_config__mask_token_id=999)
    write_repo(root, "lab/broken-dflash", {"config.json": bad}, meta={"downloads": 1, "tags": ["dflash"]})
    write_repo(root, "acme/eagle3-tiny", {"config.json": EAGLE3_CONFIG}, meta={"downloads": 40, "tags": ["eagle3"]})
    write_repo(root, "qwen/tiny-target", {"config.json": TARGET_CONFIG}, meta={"downloads": 1000})
    with HubServer(root) as server:
        yield server


def test_block_drafters_found_by_config_with_family_and_block(hub):
    r = find_drafters(endpoint=hub.endpoint)
    got = {h.repo: (h.family, h.format, h.block_size) for h in r if h.problem is None}
    assert got == {"lab/plain-name-a": ("DFlash", "dflash", 8), "lab/Qwen3-tiny-DFlash2": ("DFlash2", "dflash2", 8),
                   "lab/spark-thing": ("DSpark", "dspark", 7), "big/other-dflash": ("DFlash", "dflash", 8),
                   "acme/eagle3-tiny": ("EAGLE-3", "specforge", None)}
    assert dict(r.excluded)["fake/Llama-DFlash"].startswith("config.json has architectures ['LlamaForCausalLM']")
    broken = r["lab/broken-dflash"]
    assert broken.format == "unknown" and "dflash_config.mask_token_id is 999, outside the vocabulary" in broken.problem
    assert r["lab/spark-thing"].aux_layer_ids == (1, 3) and r["lab/spark-thing"].mask_token_id == 120


def test_ranked_for_a_target_with_reasons(hub):
    r = find_drafters(target="qwen/tiny-target", endpoint=hub.endpoint)
    fitting = {h.repo for h in r.fitting}
    assert {"lab/plain-name-a", "lab/Qwen3-tiny-DFlash2", "lab/spark-thing"} <= fitting
    other = r["big/other-dflash"]
    assert other.fits_target is False
    assert other.why == ("hidden 64 != target 32; vocab 4096 != target 128; mask_token_id 4000 outside the target's "
                         "128 tokens; target_layer_ids [1, 20, 35] past the target's 6 layers")
    order = [h.repo for h in r]
    assert order.index("lab/spark-thing") < order.index("big/other-dflash")  # fitting first, despite downloads


def test_row_text_json_and_html_say_family_and_block(hub):
    r = find_drafters(target="qwen/tiny-target", endpoint=hub.endpoint)
    text = str(r)
    assert text.splitlines()[0].startswith("1 EAGLE-3 drafter and 4 block drafters (DFlash 2, DFlash2 1, DSpark 1) "
                                           "among 8 Hub models;")
    header = text.splitlines()[1].split()
    assert header[:5] == ["repo", "format", "family", "block", "target"]
    spark = next(line for line in text.splitlines() if line.startswith("lab/spark-thing"))
    assert spark.split()[1:4] == ["dspark", "DSpark", "7"]
    row = next(x for x in r.to_json()["drafters"] if x["repo"] == "lab/Qwen3-tiny-DFlash2")
    assert (row["family"], row["block_size"], row["aux_layer_ids"], row["fits_target"]) == ("DFlash2", 8, [1, 3], True)
    json.dumps(r.to_json())
    html = r._repr_html_()
    assert "<th" in html and ">family</th>" in html and ">DSpark</td>" in html
