"""The DFlash2 forward and eaglekit's measurement against a slow reference of the authors' decoding loop
(tests/draft/dflash2_reference.py): the same cycles, prompt by prompt, for a briefly trained and random drafters,
sliding windows, a causal one with a scaled embedding, fewer drafts than the block holds, and budgets that shrink
the last block; the convolutions and the selector each change the cycles, so the check can see them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent.parent))
import dflashfixtures as fx  # noqa: E402
from dflash2_reference import ReferenceDFlash2Draft  # noqa: E402
from dflash_reference import reference_generate  # noqa: E402

from eaglekit.analysis.acceptance.measure import measure_acceptance  # noqa: E402
from eaglekit.core.errors import ConfigError, InputError  # noqa: E402


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return fx.world2(tmp_path_factory)


@pytest.fixture(scope="module")
def target(w):
    from eaglekit.analysis.acceptance.target import load_target_model

    return load_target_model(str(w / "target"))


def _reference(w, target, drafter: str, *, steps: int, max_new_tokens: int):
    draft = ReferenceDFlash2Draft(w / drafter)
    return [reference_generate(target.model, draft, p, max_new_tokens=max_new_tokens, block_size=steps + 1,
                               stop_token_ids=[fx.EOS_ID]) for p in fx.prompt_ids(w)]


def _measure(w, target, drafter: str, *, steps: int, max_new: int):
    return measure_acceptance(str(w / drafter), target=target, prompts=str(w / "prompts.jsonl"),
                              max_new_tokens=max_new, steps=steps, cache=False)


CASES = [("trained2", 3, 24), ("trained2", 2, 11), ("random2", 5, 17), ("scaled2", 3, 13)]


@pytest.mark.parametrize("drafter,steps,max_new", CASES)
def test_cycles_equal_the_reference_loop(w, target, drafter, steps, max_new):
    runs = _reference(w, target, drafter, steps=steps, max_new_tokens=max_new)
    r = _measure(w, target, drafter, steps=steps, max_new=max_new)
    assert r.family == "dflash2" and r.steps == steps
    assert [list(c) for c in r.block_cycles] == [run.acceptance_lengths for run in runs]
    lengths = [run.acceptance_lengths for run in runs]
    assert r.generated_tokens == sum(map(sum, lengths))
    assert abs(r.accept_length - sum(map(sum, lengths)) / sum(map(len, lengths))) < 1e-9


def test_reference_commits_the_targets_greedy_tokens(w, target):
    for p, run in zip(fx.prompt_ids(w), _reference(w, target, "trained2", steps=3, max_new_tokens=24)):
        greedy = target.model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                       do_sample=False, max_new_tokens=24, pad_token_id=0)
        assert run.output_ids == greedy[0].tolist()


def test_trained_drafter_accepts(w, target):
    trained = _measure(w, target, "trained2", steps=3, max_new=24)
    assert trained.accept_length > 1.3 and max(max(c) for c in trained.block_cycles) >= 3


@pytest.mark.parametrize("part", ["selector", "convolutions"])
def test_each_part_changes_the_cycles(w, target, monkeypatch, part):
    """Drafting with the plain argmax (no selector) or without the convolutions gives other cycles: the reference
    comparison above would catch either being wrong."""
    from eaglekit.analysis.draft.dflash import DFlashDrafter
    from eaglekit.analysis.draft.dflash2 import DFlash2Drafter

    right = _measure(w, target, "trained2", steps=3, max_new=24)
    names = ("propose",) if part == "selector" else ("before", "after")
    with monkeypatch.context() as m:
        for name in names:
            m.setattr(DFlash2Drafter, name, getattr(DFlashDrafter, name))
        wrong = _measure(w, target, "trained2", steps=3, max_new=24)
    assert wrong.block_cycles != right.block_cycles


def test_contradictory_shapes_and_mla_are_refused(w, tmp_path):
    from eaglekit.analysis.draft.dflash2 import DFlash2Drafter

    d = DFlash2Drafter.load(str(w / "random2"))   # model. prefix, codebooks saved as .weight
    assert d.config.block_size == 6 and "candidate_selector.successor_codebook" in d.w
    cfg = fx.dflash2_config()
    tensors = fx.random_tensors(cfg)
    tensors["layers.1.mlp_conv.kernel_projection.weight"] = torch.zeros(4, fx.HIDDEN)
    fx.save_drafter(tmp_path / "bad", cfg, tensors)
    with pytest.raises(ConfigError, match=r"layers\.1\.mlp_conv\.kernel_projection\.weight is \[4, 32\] but "
                                          r"config.json implies \[16, 32\] \(2 x conv_kernel_size 2 x "
                                          r"\(hidden_size 32 / conv_group_size 8\)\)"):
        DFlash2Drafter.load(str(tmp_path / "bad"))
    mla = fx.dflash2_config(attention_mode="mla")
    fx.save_drafter(tmp_path / "mla", mla, fx.random_tensors(cfg))
    with pytest.raises(InputError, match="MLA DFlash2 drafter.*GQA DFlash2 drafters only"):
        DFlash2Drafter.load(str(tmp_path / "mla"))
