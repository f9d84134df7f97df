"""The trained world's DFlash drafter (``drafters/k25-dflash``): a DFlash config and checkpoint the kit's loader and
``eaglekit check`` accept against the K2.5 target, trained on the K2.5 drafters' samples, and accepting drafts."""

from __future__ import annotations

import json

import pytest


def test_k25_dflash_is_a_dflash_drafter_for_the_k25_target(trained):
    from safetensors import safe_open

    from eaglekit.analysis.draft.dflash import DFlashDrafter
    from eaglekit.core.configs.block import block_family, read_block_config

    folder = trained.drafter("k25-dflash")
    raw = json.loads((folder / "config.json").read_text())
    assert raw["architectures"] == ["DFlashDraftModel"] and block_family(raw) == "dflash"
    cfg = read_block_config(raw)
    assert cfg.block_size == 5 and cfg.drafts_per_block == 4  # K = 1..4, the pages' K
    assert cfg.target_layer_ids == (0, 1, 2) and cfg.target_layer_ids_given  # the EAGLE-3 drafters' aux layers
    mask = trained.manifest["dflash"]["mask_token_id"]
    assert cfg.mask_token_id == mask
    # a token neither language's grammar produces (the demo has no reserved token)
    assert mask not in trained.manifest["common_k2"] and mask not in trained.manifest["common_k25"]
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert not [n for n in names if "embed_tokens" in n or "lm_head" in n]  # drafts through the target's
    model = DFlashDrafter.load(folder)
    assert model.config.num_hidden_layers == 1 and "fc.weight" in model.w
    assert "k25-dflash" in trained.manifest["drafters"]


def test_eaglekit_check_accepts_it_against_k25_and_refuses_a_target_it_cannot_read(trained, capsys):
    from eaglekit.analysis.compat.check import check, check_block_drafter
    from eaglekit.cli import main
    from eaglekit.core.errors import ConfigError
    from eaglekit.io.reader import open_checkpoint

    report = check(trained.drafter("k25-dflash"), target=trained.target("k25"))
    assert report.ready, str(report)
    text = str(report)
    assert text.startswith("k25-dflash for target k25: READY for SGLang; READY for vLLM"), text
    assert "DFlash block drafter (DFlashDraftModel): block 5 (anchor + mask slots), 4 drafts per cycle" in text
    assert "reads target layer outputs [0, 1, 2] = output_hidden_states [1, 2, 3]" in text
    assert main(["check", str(trained.drafter("k25-dflash")), "--target", str(trained.target("k25"))]) == 0
    assert "READY for SGLang; READY for vLLM" in capsys.readouterr().out
    # the same drafter against a 2-layer target: NOT READY; with a shape its config does not imply: refused
    target = json.loads((trained.target("k25") / "config.json").read_text())
    with open_checkpoint(trained.drafter("k25-dflash")) as ck:
        short = check_block_drafter(ck.inventory, ck.inventory.config, target={**target, "num_hidden_layers": 2},
                                    name="k25-dflash", target_name="short")
        with pytest.raises(ConfigError, match=r"layers\.0\.mlp\.gate_proj\.weight is \[192, 64\], but its config"):
            check_block_drafter(ck.inventory, {**ck.inventory.config, "intermediate_size": 100}, name="k25-dflash")
    assert not short.ready and "names layer 2, past the target's 2 layers" in str(short)


def test_it_accepts_drafts_on_the_demo(trained):
    """Measured as every page measures the demo (48 prompts, K up to 4): well above 1 at K = 4, interval and all."""
    from eaglekit.demo.candidates import K25_CANDIDATES, measure_demo

    assert K25_CANDIDATES["DFlash"] == "k25-dflash"
    r = measure_demo(trained, "k25-dflash", "k25", progress=False)
    assert r.family == "dflash" and r.block_size == 5 and r.steps == 4 and r.prompts == 48
    iv = r.interval_at(4)
    assert iv.value > 1.5 and iv.low > 1.5, iv.text()
    assert list(r.accept_length_by_steps) == sorted(r.accept_length_by_steps)  # more drafts, more accepted


def test_training_is_seeded_and_moves_the_weights(trained):
    """Two short runs from the same seed give the same tensors, unlike the initial ones (the world's drafter is
    this function's output at its default steps)."""
    import numpy as np
    import torch

    from eaglekit.analysis.acceptance.target import load_target_model
    from eaglekit.demo.dflash import _init, train_dflash
    from eaglekit.core.configs.block import read_block_config

    raw = json.loads((trained.drafter("k25-dflash") / "config.json").read_text())
    target = load_target_model(trained.target("k25")).model
    data = np.array([json.loads(line)["input_ids"] for line in trained.prompts("k25").read_text().splitlines()][:2])
    a = train_dflash(target, data, raw, steps=2)
    b = train_dflash(target, data, raw, steps=2)
    init = _init(read_block_config(raw), 11)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a["fc.weight"], init["fc.weight"].detach())


@pytest.mark.parametrize("forward_ms", [-1.0, float("nan"), "1"])
def test_block_scenario_refuses_a_forward_time_that_is_not_one(forward_ms):
    from eaglekit.core.errors import InputError
    from eaglekit.core.serving.block import block_scenario
    from eaglekit.core.speedup.specmath import Scenario

    with pytest.raises(InputError):
        block_scenario(Scenario(82.0, 30.0, 1.67, 2), forward_ms)


def test_a_block_cycle_pays_one_forward_whatever_k():
    from eaglekit.core.serving.block import block_scenario
    from eaglekit.core.speedup.specmath import Scenario

    chain = Scenario(82.0, 30.0, draft_ms=1.67, steps=2, verify_growth_ms=8.86)
    block = block_scenario(chain)
    for k in (1, 2, 3, 4):
        assert abs(block.at_steps(k).cycle_ms - (chain.verify_at(k) + 1.67)) < 1e-9
        assert abs(chain.at_steps(k).cycle_ms - block.at_steps(k).cycle_ms - (k - 1) * 1.67) < 1e-9
    assert block_scenario(chain, 0.5).at_steps(3).cycle_ms == pytest.approx(chain.verify_at(3) + 0.5)
