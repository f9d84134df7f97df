"""eaglekit check and compat on block drafters (DFlash, DFlash2, DSpark): against a target, per engine release, and
every self-contradicting checkpoint one line on stderr with exit 2."""

from __future__ import annotations

import json

import pytest

from blockfixtures import (block_ckpts, write_checkpoint, write_dflash, write_dflash2, write_dspark,  # noqa: F401
                           write_target, DFLASH_CONFIG, dflash_shapes, edited)
from eaglekit.analysis.compat.check import check
from eaglekit.analysis.compat.pair import compat
from eaglekit.cli import main
from eaglekit.core.configs.block import read_block_config
from eaglekit.core.configs.block_engines import BLOCK_ENGINES, block_engine, release_verdict
from eaglekit.core.errors import ConfigError


def _one(report, check_name, severity=None):
    found = [f for f in report.findings if f.check == check_name and (severity is None or f.severity == severity)]
    assert found, f"no {check_name} finding ({severity}) in {[(f.check, f.severity) for f in report.findings]}"
    return found[0]


@pytest.mark.parametrize("kind, family, drafts", [("dflash", "DFlash", 7), ("dflash2", "DFlash2", 7),
                                                  ("dspark", "DSpark", 7)])
def test_each_family_is_ready_for_its_target(block_ckpts, kind, family, drafts):
    r = check(str(block_ckpts[kind]), target=str(block_ckpts["target"]))
    assert r.ready and r.exit_code == 0, str(r)
    assert r.config.family_name == family and r.config.drafts_per_block == drafts
    assert "reads target layer outputs [1, 3] = output_hidden_states [2, 4]" in _one(r, "family").message
    assert _one(r, "mask token", "ok").message.startswith("mask_token_id 120 is inside" if kind == "dspark"
                                                          else "dflash_config.mask_token_id 120 is inside")
    assert _one(r, "fc width", "ok").message == "fc.weight reads 2 x 32 = 64 features."
    assert _one(r, "hidden size", "ok")
    assert [v for _, _, v, _ in r.verdicts] == ["READY", "READY"]
    data = r.to_json()
    assert data["config"]["family"] == kind and data["config"]["hidden_state_indices"] == [2, 4]
    json.dumps(data)
    assert "Pre-serving checks" in r._repr_html_()


def test_embedding_copies_are_noted(block_ckpts):
    assert "no embed_tokens and no lm_head" in _one(check(str(block_ckpts["dflash"])), "embedding", "ok").message
    d2 = _one(check(str(block_ckpts["dflash2"])), "embedding", "info").message
    assert d2.startswith("carries embed_tokens.weight") and "vLLM skips" in d2


def test_serving_flags(block_ckpts):
    r = check(str(block_ckpts["dflash"]))
    launch = {f.engine: f.message for f in r.by_check("launch")}
    assert ("--speculative-algorithm DFLASH --speculative-draft-model-path DRAFTER --speculative-num-draft-tokens 8"
            in launch["sglang"])
    assert ('--speculative-config \'{"method": "dflash", "model": "DRAFTER", "num_speculative_tokens": 7}\''
            in launch["vllm"])
    spark = {f.engine: f.message for f in check(str(block_ckpts["dspark"])).by_check("launch")}
    assert '"method": "dspark"' in spark["vllm"] and '"num_speculative_tokens": 7' in spark["vllm"]
    assert "not established" in spark["sglang"]


def test_mask_outside_target_vocabulary_and_layers_past_target(tmp_path, block_ckpts):
    small = write_target(tmp_path / "small", vocab_size=100, num_hidden_layers=3)
    r = check(str(block_ckpts["dflash"]), target=str(small))
    assert not r.ready and r.exit_code == 4
    assert _one(r, "mask token", "error").message.startswith(
        "dflash_config.mask_token_id 120 is outside the target's vocabulary (vocab_size 100: ids 0..99)")
    assert _one(r, "target layers", "error").message.startswith(
        "dflash_config.target_layer_ids [1, 3] names layer 3, past the target's 3 layers")


def test_last_layer_id_and_trained_layer_count_are_flagged(tmp_path, block_ckpts):
    four = write_target(tmp_path / "four", num_hidden_layers=4)
    r = check(str(block_ckpts["dflash"]), target=str(four))
    assert r.ready  # warnings only
    warnings = [f.message for f in r.by_check("target layers") if f.severity == "warning"]
    assert any(m.startswith("id 3 is the target's last layer: HF's last hidden state") for m in warnings)
    assert any(m.startswith("num_target_layers 6: the drafter was trained for a target of 6 layers") for m in warnings)


def test_hidden_size_must_be_the_targets(tmp_path, block_ckpts):
    wide = write_target(tmp_path / "wide", hidden_size=48)
    r = check(str(block_ckpts["dspark"]), target=str(wide))
    assert _one(r, "hidden size", "error").message.startswith("hidden_size 32 != the target's 48")
    assert _one(r, "fc width", "error").message.startswith("fc.weight reads 64 = 2 x 32 features, but 2 target layers")


def test_vocabulary_sized_tensors_must_fit(tmp_path, block_ckpts):
    other = write_target(tmp_path / "other", vocab_size=256)
    assert _one(check(str(block_ckpts["dflash2"]), target=str(other)), "vocabulary", "error").message.startswith(
        "vocab_size 128 != the target's 256: the candidate selector's codebooks")
    assert _one(check(str(block_ckpts["dflash"]), target=str(other)), "vocabulary", "warning")


def test_engine_releases(block_ckpts):
    old = check(str(block_ckpts["dflash2"]), engine="sglang==0.5.18")
    assert not old.ready and old.exit_code == 4
    assert _one(old, "engine", "error").message.startswith("SGLang 0.5.18 does not load DFlash2 drafters")
    early = check(str(block_ckpts["dflash2"]), engine="vllm==0.27.1")
    assert early.ready and _one(early, "engine", "warning").message.startswith(
        "vLLM 0.27.1 predates 0.28.0, the first release reported to load it")
    assert [v for _, _, v, _ in early.verdicts] == ["NOT READY"]
    now = check(str(block_ckpts["dflash2"]), engine="vllm==0.28.0")
    assert [v for _, _, v, _ in now.verdicts] == ["READY"]
    # unknown first releases are said to be unknown, never invented
    assert block_engine("sglang", "dflash").releases == "first release not established"
    assert "not verified" in block_engine("vllm", "dflash2").releases
    assert all(not s.verified for s in BLOCK_ENGINES)
    assert release_verdict(block_engine("vllm", "dflash"), "0.19.0") is None


def test_specforge_dspark_architecture_is_not_sglangs(tmp_path):
    folder = write_dspark(tmp_path / "sf", architectures=["DSparkDraftModel"])
    r = check(str(folder), engine="sglang")
    assert _one(r, "architecture", "error").message == ("SGLang loads DSpark drafters as Qwen3DSparkModel, not "
                                                        "DSparkDraftModel.")


# -- bad checkpoints: one line, exit 2, naming the key or the tensor ----------------------------------------------

@pytest.mark.parametrize("changes, shapes, expected", [
    ({"dflash_config__mask_token_id": 999}, None,
     "dflash_config.mask_token_id is 999, outside the vocabulary (vocab_size 128: ids 0..127)"),
    ({"num_target_layers": 3}, None, "dflash_config.target_layer_ids names layer 3, past the target's 3 layers"),
    ({"intermediate_size": 96}, None,
     "layers.0.mlp.gate_proj.weight is [64, 32], but its config.json needs [96, 32] (intermediate_size 96, "
     "hidden_size 32)"),
    ({"dflash_config__target_layer_ids": [1, 3, 5]}, None,
     "fc.weight is [32, 64], but its config.json needs [32, 96] (hidden_size 32 x (3 target_layer_ids x target "
     "hidden 32))"),
    ({}, dict(dflash_shapes(layers=3)), "layers.2.input_layernorm.weight belongs to a layer past num_hidden_layers 2"),
    ({}, {k: v for k, v in dflash_shapes().items() if k != "hidden_norm.weight"},
     "hidden_norm.weight is missing, but its config.json needs it (hidden_size 32)"),
])
def test_bad_checkpoint_is_one_line_and_exit_2(tmp_path, capsys, block_ckpts, changes, shapes, expected):
    folder = write_checkpoint(tmp_path / "bad", edited(DFLASH_CONFIG, **changes), shapes or dflash_shapes())
    assert main(["check", str(folder), "--target", str(block_ckpts["target"])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("eaglekit check: error: ") and expected in err
    with pytest.raises(ConfigError, match="bad"):
        compat(str(folder), str(block_ckpts["dflash"]))


def test_cli_check_exit_codes_and_json(capsys, tmp_path, block_ckpts):
    assert main(["check", str(block_ckpts["dflash"]), "--target", str(block_ckpts["target"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ready"] and data["config"]["block_size"] == 8
    small = write_target(tmp_path / "small", vocab_size=100)
    assert main(["check", str(block_ckpts["dflash"]), "--target", str(small)]) == 4
    assert "NOT READY" in capsys.readouterr().out.splitlines()[0]


def test_block_drafter_is_not_a_target(capsys, block_ckpts):
    assert main(["check", str(block_ckpts["dflash"]), "--target", str(block_ckpts["dflash2"])]) == 2
    assert "not a target model config" in capsys.readouterr().err


# -- compat --------------------------------------------------------------------------------------------------------

def test_same_block_drafter_is_compatible(block_ckpts):
    r = compat(str(block_ckpts["dflash"]), str(block_ckpts["dflash"]), target=str(block_ckpts["target"]))
    assert r.verdict == "compatible" and r.exit_code == 0
    assert {t.status for t in r.tensors} == {"match"}
    assert r.takes() == ("fc", "norms", "mlp", "attention")
    assert all(c.ok for c in r.target_checks) and "no vocabulary map" in str(r)


def test_other_layer_ids_and_block_size(tmp_path, block_ckpts):
    other = write_dflash(tmp_path / "ids", dflash_config__target_layer_ids=[0, 2], block_size=16)
    r = compat(str(block_ckpts["dflash"]), str(other))
    assert r.verdict == "incompatible" and r.exit_code == 4
    assert r.reasons[0].startswith("they read other target layers: ")
    assert any(w.startswith("block_size 8 in ") and "16" in w for w in r.warnings)
    fc = next(p for p in r.warm_start if p.family == "fc")
    assert fc.take == "take" and "fine-tune on the new features" in fc.why
    assert {d.path: d.cls for d in r.config_diff}["dflash_config.target_layer_ids"] == "behaviour"


def test_two_block_families_share_the_backbone(block_ckpts):
    r = compat(str(block_ckpts["dflash"]), str(block_ckpts["dflash2"]))
    assert r.verdict == "incompatible"
    assert "different families" in r.reasons[0] and "the candidate selector and the convolutions" in r.reasons[0]
    takes = {p.family: p.take for p in r.warm_start}
    assert takes["attention"] == takes["mlp"] == takes["fc"] == "take"
    assert takes["selector"] == takes["convolutions"] == "cannot"
    emb = next(t for t in r.tensors if t.name == "embed_tokens.weight")
    assert emb.status == "expected-absent"


def test_eagle3_against_block_takes_little(block_ckpts):
    r = compat(str(block_ckpts["eagle3"]), str(block_ckpts["dflash"]))
    assert r.verdict == "incompatible" and r.exit_code == 4
    assert "different families. A warm start of" in r.reasons[0] and "takes little" in r.reasons[0]
    parts = {p.family: p for p in r.warm_start}
    assert parts["attention"].take == "take" and parts["attention"].tensors == ("layers.0.self_attn.o_proj.weight",)
    assert parts["mlp"].take == "take" and parts["fc"].take == "cannot" and "another meaning" in parts["fc"].why
    assert r.config_diff.differences[0].path == "family"
    reverse = compat(str(block_ckpts["dspark"]), str(block_ckpts["eagle3"]))
    assert {p.family: p.take for p in reverse.warm_start}["lm_head / embedding"] == "cannot"
    assert "compat" in reverse._repr_html_()


def test_compat_against_a_target_that_does_not_fit(tmp_path, block_ckpts):
    small = write_target(tmp_path / "small", num_hidden_layers=3)
    r = compat(str(block_ckpts["dflash"]), str(block_ckpts["dflash"]), target=str(small))
    assert r.verdict == "incompatible"
    assert any("highest target layer id (3) does not fit the target (2)" in x for x in r.reasons)


def test_cli_compat_exit_codes(capsys, block_ckpts):
    assert main(["compat", str(block_ckpts["dflash"]), str(block_ckpts["dflash"])]) == 0
    assert main(["compat", str(block_ckpts["eagle3"]), str(block_ckpts["dspark"]), "--json"]) == 4
    out = capsys.readouterr().out
    data = json.loads(out[out.index("{"):])
    assert data["verdict"] == "incompatible" and data["warm_start"][2]["family"] == "fc"


def test_read_block_config_layer_ids_are_outputs():
    cfg = read_block_config(DFLASH_CONFIG)
    assert cfg.hidden_state_indices() == (2, 4) and cfg.key("block_size") == "block_size"
    assert read_block_config(edited(DFLASH_CONFIG, block_size=4)).drafts_per_block == 3
