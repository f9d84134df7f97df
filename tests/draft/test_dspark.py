"""The DSpark drafter and eaglekit's measurement against a slow reference of DeepSpec's decoding loop
(tests/draft/dspark_reference.py): the same cycles, prompt by prompt, for vanilla, gated and rnn Markov heads, the
drafter's own embedding and lm_head or the target's, DeepSpec's label shift and SpecForge's slots, confidence cuts,
and fewer drafts than the block holds; the Markov head and the confidence cut each change the cycles."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent.parent))
import dflashfixtures as fx  # noqa: E402
from dspark_reference import ReferenceDSparkDraft, deepspec_generate  # noqa: E402

from eaglekit.analysis.acceptance.measure import measure_acceptance  # noqa: E402
from eaglekit.core.configs.block import read_block_config  # noqa: E402
from eaglekit.core.errors import ConfigError, InputError  # noqa: E402


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    return fx.world3(tmp_path_factory)


@pytest.fixture(scope="module")
def target(w):
    from eaglekit.analysis.acceptance.target import load_target_model

    return load_target_model(str(w / "target"))


def _reference(w, target, drafter: str, *, block: int, max_new: int, threshold: float = 0.0):
    draft = ReferenceDSparkDraft(w / drafter)
    return [deepspec_generate(target.model, draft, p, max_new_tokens=max_new, stop_token_ids=[fx.EOS_ID],
                              block_size=block, confidence_threshold=threshold) for p in fx.prompt_ids(w)]


def _measure(w, target, drafter: str, *, steps: int, max_new: int, threshold: float = 0.0):
    """eaglekit's measurement of ``drafter``, with DeepSpec's ``confidence_threshold``."""
    return measure_acceptance(str(w / drafter), target=target, prompts=str(w / "prompts.jsonl"),
                              max_new_tokens=max_new, steps=steps, confidence_threshold=threshold, cache=False)


# (drafter, K drafts, the block DeepSpec runs for them, budget, confidence threshold)
CASES = [("trainedsp", 4, 4, 24, 0.0), ("trainedsp", 2, 2, 11, 0.0), ("trainedsp", 4, 4, 13, 0.5),
         ("gatedsp", 5, 5, 10, 0.55), ("rnnsp", 3, 3, 12, 0.0), ("specforgesp", 3, 4, 14, 0.0)]


@pytest.mark.parametrize("drafter,steps,block,max_new,threshold", CASES)
def test_cycles_equal_the_reference_loop(w, target, drafter, steps, block, max_new, threshold):
    runs = _reference(w, target, drafter, block=block, max_new=max_new, threshold=threshold)
    r = _measure(w, target, drafter, steps=steps, max_new=max_new, threshold=threshold)
    assert r.family == "dspark" and r.steps == steps
    assert [list(c) for c in r.block_cycles] == [run.acceptance_lengths for run in runs]
    lengths = [run.acceptance_lengths for run in runs]
    pooled = sum(map(sum, lengths)) / sum(map(len, lengths))
    assert abs(r.accept_length - pooled) < 1e-9 and abs(r.accept_length_authors - pooled) < 1e-9


def test_reference_commits_the_targets_greedy_tokens(w, target):
    for p, run in zip(fx.prompt_ids(w), _reference(w, target, "trainedsp", block=4, max_new=24)):
        greedy = target.model.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                                       do_sample=False, max_new_tokens=24, pad_token_id=0)[0].tolist()
        assert run.output_ids == greedy


def test_the_ends_of_deepspecs_loop_occur(w, target):
    """The cases above reach a bonus that is a stop token and a last cycle past the budget (counted whole), and
    the drafters accept: the comparison sees multi-token cycles of every head."""
    runs = _reference(w, target, "trainedsp", block=4, max_new=24)
    assert any(run.ended == "bonus stop" for run in runs)
    assert any(sum(run.acceptance_lengths) > 24 for run in runs)
    for name, steps in (("trainedsp", 4), ("gatedsp", 5), ("rnnsp", 3)):
        r = _measure(w, target, name, steps=steps, max_new=24)
        assert r.accept_length > 1.3, name
    assert "DeepSpec's: tokens per cycle pooled over all prompts" in str(r)


def test_a_stop_token_accepted_as_a_draft_ends_the_loop_without_bonus():
    """DeepSpec's rule (verify_draft_tokens: the accepted drafts cut at the first stop token, recorded as accepted,
    no bonus), walked over hand-made matches: the stop token at offset 5 is the second draft of the cycle at 4."""
    import numpy as np

    from eaglekit.analysis.acceptance.block_dspark import walk_deepspec

    matches = np.array([1, 0, 1, 0, 3, 0, 0, 0])
    assert walk_deepspec(matches, budget=8, stop_at=None) == (2, 2, 4)
    assert walk_deepspec(matches, budget=8, stop_at=5) == (2, 2, 1)        # offsets 0, 2, then 4 -> 5 (a draft)
    assert walk_deepspec(matches, budget=8, stop_at=4) == (2, 2)           # the bonus of the cycle at 2
    assert walk_deepspec(matches, budget=8, stop_at=0) == ()               # the prefill token: no cycle
    assert walk_deepspec(matches, budget=3, stop_at=None) == (2, 2)        # the cycle at 2 runs past the budget


@pytest.mark.parametrize("part", ["markov", "confidence"])
def test_each_head_changes_the_cycles(w, target, monkeypatch, part):
    from eaglekit.analysis.draft.dspark import DSparkDrafter

    threshold = 0.5 if part == "confidence" else 0.0
    right = _measure(w, target, "trainedsp", steps=4, max_new=24, threshold=threshold)
    with monkeypatch.context() as m:
        if part == "markov":
            m.setattr(DSparkDrafter, "_bias", lambda self, prev, h, state: (torch.zeros(1), state))
        else:
            m.setattr(DSparkDrafter, "proposal_lengths",
                      lambda self, hidden, anchors, drafts: torch.full((hidden.shape[0],), hidden.shape[1]))
        wrong = _measure(w, target, "trainedsp", steps=4, max_new=24, threshold=threshold)
    assert wrong.block_cycles != right.block_cycles


def test_shapes_threshold_and_dumps_are_refused_in_one_line(w, target, tmp_path):
    from eaglekit.analysis.draft.dspark import DSparkDrafter

    assert DSparkDrafter.load(str(w / "gatedsp")).config.drafts_per_block == 5     # model. prefix
    sf = DSparkDrafter.load(str(w / "specforgesp")).config                          # SpecForge: slots 1..
    assert not sf.anchor_drafts and sf.drafts_per_block == 3
    shifted = json.loads((w / "specforgesp" / "config.json").read_text())
    shifted["dflash_config"]["shift_label"] = True
    assert read_block_config(shifted).drafts_per_block == 4
    assert "lm_head.weight" in DSparkDrafter.load(str(w / "rnnsp")).w
    cfg = fx.dspark_config()
    tensors = {**fx.random_tensors(cfg), "lm_head.weight": torch.zeros(fx.VOCAB, 16)}
    fx.save_drafter(tmp_path / "bad", cfg, tensors)
    with pytest.raises(ConfigError, match=r"lm_head\.weight is \[96, 16\] but config.json implies \[96, 32\]"):
        DSparkDrafter.load(str(tmp_path / "bad"))
    plain = fx.dspark_config(confidence=False)
    fx.save_drafter(tmp_path / "plain", plain, fx.random_tensors(plain))
    with pytest.raises(InputError, match="no confidence head"):
        DSparkDrafter.load(str(tmp_path / "plain"), confidence_threshold=0.5)
    with pytest.raises(InputError, match="measure it with --target"):
        measure_acceptance(str(w / "gatedsp"), hidden_states=str(tmp_path), cache=False)
