"""eaglekit inspect on block drafters: the tensors listed and the verdicts (family, block, layers read, no
embedding or lm_head of its own, shapes against the config)."""

from __future__ import annotations

import json

import pytest

from blockfixtures import DFLASH_CONFIG, block_ckpts, dflash_shapes, edited, write_checkpoint  # noqa: F401
from eaglekit.analysis.inspection import inspect_block
from eaglekit.cli import main
from eaglekit.io.reader import read_inventory


def _inspect(folder):
    return inspect_block(read_inventory(str(folder), progress=False))


def test_eagle3_and_plain_checkpoints_get_no_block_verdicts(block_ckpts):
    assert _inspect(block_ckpts["eagle3"]) is None and _inspect(block_ckpts["target"]) is None


def test_dflash_verdicts(block_ckpts):
    r = _inspect(block_ckpts["dflash"])
    assert r.consistent and r.headline.endswith("DFlash block drafter, block 8 (7 drafts per block), reads target "
                                                "layers [1, 3]")
    assert r.verdict("block").text.startswith("block_size 8: the anchor (last committed token) plus mask slots")
    layers = r.verdict("target layers").text
    assert layers.startswith("dflash_config.target_layer_ids [1, 3]: outputs of those target layers, "
                             "output_hidden_states [2, 4] (id + 1")
    assert r.verdict("embedding").severity == "ok" and "no embed_tokens and no lm_head" in r.verdict("embedding").text
    assert r.verdict("shapes").text == "all 25 tensors the config implies are present with its shapes"


def test_dflash2_and_dspark_verdicts(block_ckpts):
    d2 = _inspect(block_ckpts["dflash2"])
    assert d2.verdict("block").text.startswith("dflash_config.block_size 8")
    assert d2.verdict("embedding").text.startswith("carries embed_tokens.weight [128, 32]: DFlash2 checkpoints may")
    assert d2.verdict("dflash2").text == ("candidate selector: rank 8, top-4; dynamic convolutions: kernel 2, group 8")
    assert "sliding window 64" in d2.verdict("attention").text and d2.consistent
    ds = _inspect(block_ckpts["dspark"])
    assert ds.config.drafts_per_block == 7 and "the anchor slot drafts too" in ds.verdict("block").text
    assert ds.verdict("dspark").text == "Markov head rank 8 (gated); confidence head reading the Markov state"
    assert "lm_head.weight [128, 32]" in ds.verdict("embedding").text and ds.consistent


def test_a_body_that_contradicts_its_config_is_an_error_verdict(tmp_path):
    folder = write_checkpoint(tmp_path / "bad", edited(DFLASH_CONFIG, head_dim=16, num_attention_heads=2),
                              dflash_shapes())
    r = _inspect(folder)
    shapes = r.verdict("shapes")
    assert not r.consistent and shapes.severity == "error"
    # q_proj and o_proj keep their shape (2 x 16 = 4 x 8); k/v_proj and the q/k norms do not, in both layers
    assert shapes.text == ("17 of 25 tensors as the config implies; 8 of another shape "
                           "(layers.0.self_attn.k_proj.weight [16, 32] != [32, 32])")
    assert r.shapes.mismatched[2].name == "layers.0.self_attn.q_norm.weight"


def test_cli_text_json_and_html(capsys, block_ckpts):
    assert main(["inspect", str(block_ckpts["dspark"])]) == 0
    out = capsys.readouterr().out
    assert "DSpark block drafter, block 7" in out.splitlines()[0]
    assert "markov_head.gate_proj.weight" in out and "confidence_head.proj.weight" in out  # the listing follows
    assert main(["inspect", str(block_ckpts["dflash"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["tensors"]) == 25 and data["block_drafter"]["family"] == "DFlash"
    assert data["block_drafter"]["config"]["hidden_state_indices"] == [2, 4]
    assert data["block_drafter"]["shapes"]["consistent"] is True
    assert {v["topic"] for v in data["block_drafter"]["verdicts"]} >= {"family", "block", "target layers", "shapes"}
    html = _inspect(block_ckpts["dflash"])._repr_html_()
    assert "Block drafter" in html and "fc.weight" in html


def test_cli_bad_config_is_one_line(tmp_path, capsys):
    folder = write_checkpoint(tmp_path / "bad", edited(DFLASH_CONFIG, dflash_config__mask_token_id=500),
                              dflash_shapes())
    assert main(["inspect", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dflash_config.mask_token_id is 500, outside the vocabulary" in err
