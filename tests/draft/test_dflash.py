"""The DFlash forward and eaglekit's measurement against a slow reference of the authors' decoding loop
(tests/draft/dflash_reference.py): the same cycles, prompt by prompt, for trained and random drafters, several
block sizes, fewer drafts than the block holds, and budgets that shrink the last block."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent.parent))
import dflashfixtures as fx  # noqa: E402
from dflash_reference import ReferenceDraft, reference_generate  # noqa: E402

from eaglekit.analysis.acceptance.measure import measure_acceptance  # noqa: E402
from eaglekit.core.errors import ConfigError  # noqa: E402


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return fx.world(tmp_path_factory)


@pytest.fixture(scope="module")
def target(w):
    from eaglekit.analysis.acceptance.target import load_target_model

    return load_target_model(str(w / "target"))


def _reference(w, target, drafter: str, *, steps: int, max_new_tokens: int):
    draft = ReferenceDraft(w / drafter)
    return [reference_generate(target.model, draft, p, max_new_tokens=max_new_tokens, block_size=steps + 1,
                               stop_token_ids=[fx.EOS_ID]) for p in fx.prompt_ids(w)]


CASES = [("trained", 3, 24), ("trained", 2, 11), ("trained", 1, 9), ("random", 3, 13), ("random6", 5, 17),
         ("random6", 3, 10)]


@pytest.mark.parametrize("drafter,steps,max_new", CASES)
def test_cycles_equal_the_reference_loop(w, target, drafter, steps, max_new):
    runs = _reference(w, target, drafter, steps=steps, max_new_tokens=max_new)
    r = measure_acceptance(str(w / drafter), target=target, prompts=str(w / "prompts.jsonl"),
                           max_new_tokens=max_new, steps=steps, cache=False)
    assert r.family == "dflash" and r.steps == steps
    assert [list(c) for c in r.block_cycles] == [run.acceptance_lengths for run in runs]
    lengths = [run.acceptance_lengths for run in runs]
    pooled = sum(map(sum, lengths)) / sum(map(len, lengths))
    authors = sum(sum(x) / len(x) for x in lengths if x) / sum(1 for x in lengths if x)
    assert abs(r.accept_length - pooled) < 1e-9
    assert abs(r.accept_length_authors - authors) < 1e-9
    assert r.generated_tokens == sum(map(sum, lengths))


def test_a_shrunk_last_block_and_a_stop_token_occur(w, target):
    """The cases above reach both ends of the authors' loop: a budget cut and an EOS cut."""
    runs = _reference(w, target, "trained", steps=3, max_new_tokens=24)
    ends = [run.output_ids[-1] for run in runs]
    assert fx.EOS_ID in ends
    assert any(len(run.output_ids) == len(p) + 24 for run, p in zip(runs, fx.prompt_ids(w)))


def test_trained_drafter_accepts_and_random_does_not(w, target):
    kw = dict(target=target, prompts=str(w / "prompts.jsonl"), max_new_tokens=24, cache=False)
    trained = measure_acceptance(str(w / "trained"), **kw)
    random = measure_acceptance(str(w / "random"), **kw)
    assert trained.steps == 3  # block_size - 1 by default
    assert trained.accept_length > 1.3 and trained.accept_length_authors > 1.4
    assert random.accept_length < 1.1
    assert len(trained.accept_length_by_steps) == 3 and trained.accept_length_interval.has_interval
    assert trained.per_step_acceptance[0] > 0.2


@pytest.mark.parametrize("max_new", [24, 11])
def test_reference_commits_the_targets_greedy_tokens(w, target, max_new):
    for p, run in zip(fx.prompt_ids(w), _reference(w, target, "trained", steps=3, max_new_tokens=max_new)):
        greedy = target.model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                       do_sample=False, max_new_tokens=max_new, pad_token_id=0)
        assert run.output_ids == greedy[0].tolist()


def test_model_prefix_and_shape_errors(w, tmp_path):
    from eaglekit.analysis.draft.dflash import DFlashDrafter

    d = DFlashDrafter.load(str(w / "random6"))   # saved with a model. prefix
    assert d.config.block_size == 6 and "fc.weight" in d.w
    cfg = fx.drafter_config(block_size=4)
    tensors = fx.random_tensors(cfg)
    tensors["layers.1.self_attn.k_proj.weight"] = torch.zeros(8, fx.HIDDEN)
    fx.save_drafter(tmp_path / "bad", cfg, tensors)
    with pytest.raises(ConfigError, match=r"layers\.1\.self_attn\.k_proj\.weight is \[8, 32\] but config.json "
                                          r"implies \[16, 32\] \(num_key_value_heads=2 x head_dim=8"):
        DFlashDrafter.load(str(tmp_path / "bad"))
    del tensors["layers.1.self_attn.k_proj.weight"]
    fx.save_drafter(tmp_path / "short", cfg, tensors)
    with pytest.raises(ConfigError, match=r"lacks layers\.1\.self_attn\.k_proj\.weight"):
        DFlashDrafter.load(str(tmp_path / "short"))


def test_block_attention_sees_the_whole_block_unless_causal(w):
    """Bidirectional: a later mask slot changes slot 1's output; with is_causal it cannot."""
    from eaglekit.analysis.draft.dflash import DFlashDrafter
    from eaglekit.core.configs.block import read_block_config

    cfg = fx.drafter_config(block_size=4)
    t = fx.random_tensors(cfg)
    feats = torch.randn(5, 2 * fx.HIDDEN)
    noise = torch.randn(1, 4, fx.HIDDEN)
    other = noise.clone()
    other[0, 3] += 1.0
    for causal in (False, True):
        d = DFlashDrafter(read_block_config({**cfg, "is_causal": causal}), t, source="x")
        ctx = d.context(feats)
        a, b = d.forward(ctx, noise, torch.tensor([5])), d.forward(ctx, other, torch.tensor([5]))
        assert torch.allclose(a[0, 1], b[0, 1]) == causal


def test_the_shrunk_last_block_changes_cycles_and_matches_the_reference(w, target, tmp_path, monkeypatch):
    """Prompts and budgets where the authors' newer loop (the last block shrinks to fit the budget) and a full last
    block give different cycles: eaglekit follows the reference, and the check could tell them apart."""
    import numpy as np

    import eaglekit.analysis.acceptance.block as block

    prompts = [fx.train_prompts()[i] for i in (4, 12, 13)]
    path = fx.write_prompts(tmp_path / "p.jsonl", prompts)
    draft = ReferenceDraft(w / "trained")
    for max_new in (4, 8):
        runs = [reference_generate(target.model, draft, p, max_new_tokens=max_new, block_size=4,
                                   stop_token_ids=[fx.EOS_ID]) for p in prompts]
        kw = dict(target=target, prompts=str(path), max_new_tokens=max_new, steps=3, cache=False)
        r = measure_acceptance(str(w / "trained"), **kw)
        assert [list(c) for c in r.block_cycles] == [run.acceptance_lengths for run in runs]
        with monkeypatch.context() as m:
            m.setattr(block, "block_sizes", lambda g, budget, k: np.full(g, k + 1))
            full = measure_acceptance(str(w / "trained"), **kw)
        assert full.block_cycles != r.block_cycles
