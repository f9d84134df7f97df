"""One verdict per candidate (eaglekit.analysis.verdict.judge): read from the plan of one deployment, both readings of
the verify, the decision-changing run ranked first; it shows itself as text and as the HTML block pages open with."""

from __future__ import annotations

import pytest

from eaglekit.analysis.verdict import judge
from eaglekit.core.errors import InputError

SEED = dict(costs=[(1, 3, 30.0)], measured=[(1, 0, None, None, None, 82.0)], target="kimi-k25-int4", gpu="H20", tp=8,
            context=2048)
STRONG = {"accept_length_by_steps": [1.95, 2.85, 3.7, 4.4]}
MIDDLE = {"accept_length_by_steps": [1.8, 2.4, 2.85, 3.15]}
WEAK = {"accept_length_by_steps": [1.3, 1.4, 1.45, 1.5]}


def test_each_candidate_gets_one_verdict_with_its_k_interval_and_settings():
    v = judge({"strong": STRONG, "middle": MIDDLE, "weak": WEAK}, **SEED)
    weak = v["weak"]
    assert weak.verdict == "NO-GO" and weak.steps == 1 and weak.batch == 1 and weak.gpu == "H20"
    assert weak.tokens_per_s.high < 82 and weak.accept_length.value == pytest.approx(1.3)
    middle = v["middle"]
    assert middle.verdict == "TOO CLOSE TO CALL" and middle.tokens_per_s.low < 82 < middle.tokens_per_s.high
    text = str(v)
    assert text.startswith("Verdict per candidate (batch 1, kimi-k25-int4 on 8 x H20, context 2048")
    assert "- weak: NO-GO at k = 1, batch 1: " in text and "against 82 without speculation" in text
    html = v._repr_html_()
    assert 'class="eaglekit-verdict"' in html and "weak=NO-GO@1" in html and "<ol>" in html


def test_readings_that_disagree_make_it_too_close_and_rank_the_verify_first():
    v = judge({"strong": STRONG, "weak": WEAK}, **SEED)
    strong = v["strong"]
    readings = dict(strong.readings)
    assert readings["per-token"] != readings["per-forward"]  # this drafter pays only if the verify is per forward
    assert strong.verdict == "TOO CLOSE TO CALL"
    assert v.next_runs[0].startswith("the verify at k = 3") and strong.next_run == v.next_runs[0]
    assert "per-token: " in strong.sentence() and "per-forward: " in strong.sentence()
    assert v["weak"].next_run.startswith("none")  # a NO-GO under both readings asks for nothing


def test_gpu_and_context_say_when_they_are_assumed():
    v = judge({"weak": WEAK}, **SEED, gpu_assumed=True, context_assumed=True)
    assert "8 x H20 (assumed), context 2048 (assumed)" in v.headline()


def test_nothing_to_judge_is_an_input_error():
    with pytest.raises(InputError, match="at least one candidate"):
        judge({}, **SEED)


def test_a_block_drafter_is_judged_on_its_block_cycle(tmp_path):
    import json

    config = {"architectures": ["DFlashDraftModel"], "hidden_size": 7168, "num_attention_heads": 64,
              "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 18432, "num_hidden_layers": 2,
              "vocab_size": 163840, "block_size": 5, "num_target_layers": 61,
              "dflash_config": {"mask_token_id": 163838, "target_layer_ids": [1, 29, 57]}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    lengths = [1.95, 2.85, 3.7, 4.4]
    block = {"family": "dflash", "block_size": 5, "steps": 4, "drafter": "demo/dflash",
             "accept_length_by_steps": lengths, "accept_length_by_steps_low": [x - 0.05 for x in lengths],
             "accept_length_by_steps_high": [x + 0.05 for x in lengths]}
    v = judge({"weak": WEAK, "DFlash": block}, **SEED, block_drafters={"DFlash": path})
    d = v["DFlash"]
    assert d.block and not v["weak"].block and 1 <= d.steps <= 4
    assert d.accept_length.value == pytest.approx(lengths[d.steps - 1]) and d.accept_length.has_interval
    assert "(block cycle, verify read per-token)" in d.sentence()
