"""The config diff on block drafters: their keys known and classified, spellings across DFlash and DFlash2 files
not counted as differences, and a diff across families that says so first."""

from __future__ import annotations

import json

import pytest

from blockfixtures import DFLASH2_CONFIG, DFLASH_CONFIG, DSPARK_CONFIG, EAGLE3_CONFIG, TARGET_CONFIG, edited
from eaglekit.core.configs.config import load_config_bytes, normalize_target
from eaglekit.core.configs.diff import diff_configs
from eaglekit.core.errors import ConfigError


def _rows(diff):
    return {d.path: (d.cls, d.reason) for d in diff}


def test_block_keys_classified_with_what_they_change():
    b = edited(DFLASH_CONFIG, block_size=16, num_target_layers=40, dflash_config__mask_token_id=5,
               dflash_config__target_layer_ids=[0, 2])
    rows = _rows(diff_configs(DFLASH_CONFIG, b))
    assert rows["block_size"][0] == "behaviour" and "drafts per cycle and the verify width" in rows["block_size"][1]
    assert rows["dflash_config.target_layer_ids"] == ("behaviour", (
        "which target features the drafter reads (layer outputs, hidden_states[id + 1]): same shapes, other hidden "
        "states; retraining"))
    assert rows["dflash_config.mask_token_id"][0] == "behaviour" and "retraining" in rows["dflash_config.mask_token_id"][1]
    assert rows["num_target_layers"][0] == "behaviour"
    assert "not a key eaglekit knows" not in " ".join(r for _, r in rows.values())


def test_more_target_layers_is_a_shape_change():
    rows = _rows(diff_configs(DFLASH_CONFIG, edited(DFLASH_CONFIG, dflash_config__target_layer_ids=[1, 3, 5])))
    assert rows["dflash_config.target_layer_ids"][0] == "shape"
    assert "fc.weight's input width" in rows["dflash_config.target_layer_ids"][1]


def test_dflash2_and_dspark_keys():
    rows = _rows(diff_configs(DFLASH2_CONFIG, edited(DFLASH2_CONFIG, dflash_config__selector_rank=16,
                                                     dflash_config__conv_kernel_size=3, dflash_config__selector_top_k=8,
                                                     dflash_config__attention_mode="mla")))
    assert {p: c for p, (c, _) in rows.items()} == {
        "dflash_config.selector_rank": "shape", "dflash_config.conv_kernel_size": "shape",
        "dflash_config.attention_mode": "shape", "dflash_config.selector_top_k": "behaviour"}
    rows = _rows(diff_configs(DSPARK_CONFIG, edited(DSPARK_CONFIG, markov_rank=0, enable_confidence_head=False,
                                                    markov_head_type="rnn")))
    assert rows["markov_rank"][0] == rows["markov_head_type"][0] == rows["enable_confidence_head"][0] == "shape"


def test_same_value_spelled_at_top_level_or_nested_is_metadata():
    nested = edited(DFLASH_CONFIG, dflash_config__block_size=8)
    del nested["block_size"]
    diff = diff_configs(DFLASH_CONFIG, nested)
    assert {d.cls for d in diff} == {"metadata"} and len(diff) == 2
    assert all(d.reason.startswith("same effective block_size in both (8)") for d in diff)


def test_dspark_aliases_are_metadata():
    rows = _rows(diff_configs(DSPARK_CONFIG, edited(DSPARK_CONFIG, architectures=["DSparkDraftModel"])))
    assert rows["architectures"] == ("metadata", "aliases of the same drafter architecture")


def test_eagle3_against_block_says_different_families_first():
    diff = diff_configs(EAGLE3_CONFIG, DFLASH_CONFIG, a_name="eagle", b_name="dflash")
    first = diff.differences[0]
    assert (first.path, first.a, first.b, first.cls) == ("family", "EAGLE-3", "DFlash", "shape")
    assert "different families: no key below means the same thing on both sides" in first.reason
    assert (diff.a_format, diff.b_format) == ("specforge", "dflash") and diff.cross_format
    assert "Config diff eagle (specforge) vs dflash (dflash)" in str(diff) and "family" in diff._repr_html_()


def test_two_block_families_share_the_backbone():
    first = diff_configs(DFLASH_CONFIG, DSPARK_CONFIG).differences[0]
    assert (first.path, first.a, first.b) == ("family", "DFlash", "DSpark")
    assert "they share the DFlash backbone" in first.reason


def test_eagle3_diffs_unchanged_by_block_tables():
    """block_size means nothing to an EAGLE-3 drafter: still an unknown key there."""
    rows = _rows(diff_configs(EAGLE3_CONFIG, {**EAGLE3_CONFIG, "block_size": 8}))
    assert rows["block_size"][1].startswith("not a key eaglekit knows")


def test_block_config_is_refused_where_eagle3_is_needed_and_as_target():
    with pytest.raises(ConfigError, match="is a DFlash2 block drafter's config, not an EAGLE-3 one: eaglekit search, "
                                          "inspect, diff, compat and check read block drafters"):
        load_config_bytes(b'{"architectures": ["DFlash2DraftModel"], "dflash_config": {}}', kind="drafter")
    with pytest.raises(ConfigError, match="is a block drafter's config .* not a target model config"):
        load_config_bytes(json.dumps(DFLASH_CONFIG).encode(), kind="target")
    assert normalize_target(TARGET_CONFIG).num_hidden_layers == 6
