"""``eaglekit acceptance`` on DFlash drafters: --json, a hidden-state dump giving the same figures as the target,
the result cache, and one-line errors (exit 2) for checkpoints that contradict themselves or the target."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent))
import dflashfixtures as fx  # noqa: E402
from clirun import one_line_error as _error, run as _run  # noqa: E402

from eaglekit.analysis.acceptance.measure import measure_acceptance  # noqa: E402
from eaglekit.core.errors import InputError  # noqa: E402


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return fx.world(tmp_path_factory)


def test_cli_json_and_dump_give_the_same_figures(capsys, w, tmp_path):
    d, t, p = str(w / "trained"), str(w / "target"), str(w / "prompts.jsonl")
    code, out, _ = _run(capsys, "acceptance", d, "--target", t, "--prompts", p, "--max-new-tokens", "20", "--json",
                        "--no-cache")
    assert code == 0
    direct = json.loads(out)
    assert direct["family"] == "dflash" and direct["block_size"] == 4 and direct["steps"] == 3
    assert direct["aux_hidden_state_indices"] == [1, 3]
    assert direct["accept_length"] == pytest.approx(direct["generated_tokens"] / direct["cycles"])
    assert direct["accept_length"] > 1.2 and direct["accept_length_authors"] > 1.2
    assert direct["accept_length_low"] <= direct["accept_length"] <= direct["accept_length_high"]
    assert any("dflash_generate" in n for n in direct["notes"])
    dump = tmp_path / "dump"
    code, _, _ = _run(capsys, "dump-hidden", "--target", t, "--prompts", p, "--out", str(dump), "--for-drafter", d,
                      "--max-new-tokens", "20", "--dtype", "float32")
    assert code == 0
    assert json.loads((dump / "manifest.json").read_text())["layers"] == [1, 3]
    code, out, _ = _run(capsys, "acceptance", d, "--hidden-states", str(dump), "--embeddings", t,
                        "--max-new-tokens", "20", "--json", "--no-cache")
    assert code == 0
    dumped = json.loads(out)
    assert dumped["source"] == "hidden-states"
    for key in ("accept_length", "accept_length_authors", "accept_length_by_steps", "per_step_acceptance",
                "generated_tokens", "cycles", "per_prompt_accept_length"):
        assert dumped[key] == direct[key], key


def test_steps_run_smaller_blocks(capsys, w):
    code, out, _ = _run(capsys, "acceptance", str(w / "trained"), "--target", str(w / "target"), "--prompts",
                        str(w / "prompts.jsonl"), "--max-new-tokens", "20", "--steps", "2", "--json", "--no-cache")
    two = json.loads(out)
    assert code == 0 and two["steps"] == 2 and len(two["accept_length_by_steps"]) == 2
    assert "from 1 to block_size - 1 = 3" in _error(capsys, "acceptance", str(w / "trained"), "--target", str(w / "target"),
                                     "--prompts", str(w / "prompts.jsonl"), "--steps", "4")


def test_a_repeat_is_read_from_the_cache(w, tmp_path):
    kw = dict(target=str(w / "target"), prompts=str(w / "prompts.jsonl"), max_new_tokens=12,
              cache_dir=tmp_path / "cache")
    first = measure_acceptance(str(w / "trained"), **kw)
    again = measure_acceptance(str(w / "trained"), **kw)
    assert first.cached is None and again.cached is not None
    assert again.family == "dflash" and again.accept_length == first.accept_length
    assert again.accept_length_authors == first.accept_length_authors and again.block_cycles == first.block_cycles


def _bad(tmp_path, name, *, tensors=None, **cfg_changes):
    cfg = fx.drafter_config(block_size=4, **cfg_changes)
    return str(fx.save_drafter(tmp_path / name, cfg, tensors or fx.random_tensors(fx.drafter_config(block_size=4))))


def test_bad_checkpoints_fail_in_one_line(capsys, w, tmp_path):
    t, p = str(w / "target"), str(w / "prompts.jsonl")
    mask = fx.drafter_config()
    mask["dflash_config"]["mask_token_id"] = 500
    fx.save_drafter(tmp_path / "mask", mask, fx.random_tensors(fx.drafter_config()))
    line = _error(capsys, "acceptance", str(tmp_path / "mask"), "--target", t, "--prompts", p)
    assert "dflash_config.mask_token_id" in line and "500" in line and "vocab" in line
    # the config's own num_target_layers (9) allows layer 5; the target (4 layers) does not
    far = _bad(tmp_path, "far", target_layer_ids=(0, 5), num_target_layers=9)
    line = _error(capsys, "acceptance", far, "--target", t, "--prompts", p)
    assert "dflash_config.target_layer_ids names layer 5" in line and "4 layers" in line
    line = _error(capsys, "dump-hidden", "--target", t, "--prompts", p, "--out", str(tmp_path / "d"),
                  "--for-drafter", far)
    assert "target_layer_ids names layer 5" in line
    body = _bad(tmp_path, "body", intermediate_size=48)
    line = _error(capsys, "acceptance", body, "--target", t, "--prompts", p)
    assert "layers.0.mlp.gate_proj.weight is [64, 32]" in line and "intermediate_size=48" in line


@pytest.mark.parametrize("family,config,steps,note", [
    ("dflash2", fx.dflash2_config, 3, "dflash_generate"),
    ("dspark", fx.dspark_config, 4, "generate_decoding_sample"),   # DeepSpec's label shift: every slot drafts
])
def test_dflash2_and_dspark_are_measured_with_their_authors_loops(capsys, w, tmp_path, family, config, steps, note):
    t, p = str(w / "target"), str(w / "prompts.jsonl")
    cfg = config(block_size=4)
    d = str(fx.save_drafter(tmp_path / family, cfg, fx.random_tensors(cfg, seed=2)))
    code, out, _ = _run(capsys, "acceptance", d, "--target", t, "--prompts", p, "--max-new-tokens", "12", "--json",
                        "--no-cache")
    assert code == 0
    result = json.loads(out)
    assert result["family"] == family and result["block_size"] == 4 and result["steps"] == steps
    assert result["accept_length"] == pytest.approx(result["generated_tokens"] / result["cycles"])
    assert any(note in n for n in result["notes"])


def test_a_confidence_threshold_is_for_dspark_only(capsys, w):
    line = _error(capsys, "acceptance", str(w / "trained"), "--target", str(w / "target"), "--prompts",
                  str(w / "prompts.jsonl"), "--confidence-threshold", "0.5")
    assert "DFlash drafter: a confidence_threshold cuts DSpark proposals only" in line


def test_an_incomplete_dflash2_fails_in_one_line(capsys, w, tmp_path):
    line = _error(capsys, "acceptance", _bad(tmp_path, "dflash2-bare", architectures=["DFlash2DraftModel"]),
                  "--target", str(w / "target"), "--prompts", str(w / "prompts.jsonl"))
    assert "dflash_config.conv_kernel_size is missing" in line


def test_temperature_is_refused_with_the_reason(w):
    with pytest.raises(InputError, match="rejection sampling"):
        measure_acceptance(str(w / "trained"), target=str(w / "target"), prompts=str(w / "prompts.jsonl"),
                           temperature=0.7, cache=False)
