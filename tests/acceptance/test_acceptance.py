"""The accept-length measurement: the cycle simulation against hand counts, and the trained demo world
(trained drafter well above 1, random about 1, d2t and aux convention matter, dumps == --target)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from eaglekit.analysis.acceptance.measure import SampleStats, measure_acceptance, simulate_cycles, summarise
from eaglekit.analysis.draft import DraftModel
from eaglekit.analysis.acceptance.target import dump_hidden_states, load_target_model
from eaglekit.core.errors import InputError, NotFoundError, VocabMapError


# -- the convention, by hand ---------------------------------------------------------------------------
def test_simulation_counts_cycles_by_hand():
    # 10 tokens after prefill; matches at each continuation offset
    m = np.array([2, 0, 0, 3, 1, 5, 5, 5, 5, 5])
    # K = 3: offset 0 accepts 2 (+1) -> 3; offset 3 accepts 3 (+1) -> 7; offset 7 accepts 3, capped at 3 left
    assert simulate_cycles(m, 10, 3) == 3
    # K = 1: 0 -> 2 -> 3 -> 4 -> 6 -> 8 -> 10
    assert simulate_cycles(m, 10, 1) == 6
    assert simulate_cycles(np.zeros(7, int), 7, 5) == 7          # nothing accepted: accept length 1
    assert simulate_cycles(np.full(12, 9), 12, 5) == 2           # everything accepted: K + 1 per cycle


def test_summary_follows_the_definitions():
    s = SampleStats(np.array([2, 0, 0, 3, 1, 5, 5, 5, 5, 5]), 10, np.array([10, 6, 4]), np.array([6, 4, 3]))
    out = summarise([s, s], steps=3)
    assert out["generated_tokens"] == 20 and out["cycles"] == 6
    assert out["accept_length"] == pytest.approx(20 / 6)
    assert out["accept_length_by_steps"][0] == pytest.approx(20 / 12)
    assert out["per_step_acceptance"] == pytest.approx((0.6, 4 / 6, 0.75))
    # averaging (m + 1) over every position instead of simulating cycles is another figure: cycles skip
    # the positions inside accepted runs (here the long runs start right after a cycle lands on a miss)
    assert np.mean(np.minimum(s.matches, 3) + 1) != pytest.approx(out["accept_length"])


# -- the trained world ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def k2(trained):
    return load_target_model(trained.target("k2"))


@pytest.fixture(scope="module")
def k2_result(trained, k2):
    return measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=32,
                              steps=4, progress=False)


def test_trained_drafter_accepts_and_random_does_not(trained, k2, k2_result):
    r = k2_result
    assert r.accept_length > 2.5, r
    assert r.generated_tokens == 12 * 31 and r.prompts == 12
    assert r.accept_length == pytest.approx(r.generated_tokens / r.cycles)
    assert r.accept_length_by_steps[-1] == pytest.approx(r.accept_length)
    assert list(r.accept_length_by_steps) == sorted(r.accept_length_by_steps)
    assert all(1 <= a <= k + 2 for k, a in enumerate(r.accept_length_by_steps))
    rnd = measure_acceptance(trained.drafter("random"), target=k2, prompts=trained.prompts("k2"),
                             max_new_tokens=32, steps=4, progress=False)
    assert 1.0 <= rnd.accept_length < 1.15


def test_zeroing_d2t_lowers_it(trained, k2, k2_result):
    model = DraftModel.load(trained.drafter("k2"), embed=k2.embedding())
    model.draft_to_target = torch.arange(model.lm_head.shape[0])   # d2t all zero: row i = target token i
    r = measure_acceptance(model, target=k2, prompts=trained.prompts("k2"), max_new_tokens=32, steps=4,
                           progress=False)
    assert r.accept_length < k2_result.accept_length - 1


def test_aux_convention_changes_it(trained, k2, k2_result):
    by = k2_result.accept_length_by_convention
    assert k2_result.aux_convention == "outputs" and k2_result.aux_indices == (1, 2, 3)
    assert by["inputs"] is not None and by["inputs"] != by["outputs"]
    wrong = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=32,
                               steps=4, aux_convention="inputs", progress=False)
    assert wrong.accept_length == pytest.approx(by["inputs"])
    # one K for both readings (issue 39): at the trained depth, whatever K the measurement ran to
    assert k2_result.by_convention_at(3)["inputs"] == pytest.approx(wrong.accept_length_by_steps[2])
    assert k2_result.by_convention_at(3)["outputs"] == pytest.approx(k2_result.accept_length_by_steps[2])
    assert k2_result.by_convention_at(4) == by
    assert "K = 3: " in str(k2_result) and "(outputs vs inputs, by K:" in str(k2_result)
    with pytest.raises(InputError, match="measured up to K = 4"):
        k2_result.by_convention_at(5)
    # the speculators copy names the same tensors as inputs ids [1, 2, 3]: same figures as the SpecForge one
    spec = measure_acceptance(trained.drafter("k2-speculators"), target=k2, prompts=trained.prompts("k2"),
                              max_new_tokens=32, steps=4, progress=False)
    assert spec.aux_convention == "inputs" and spec.accept_length == pytest.approx(k2_result.accept_length)


def test_dumps_give_the_same_figures(trained, k2, k2_result, tmp_path):
    dump = dump_hidden_states(k2, trained.prompts("k2"), tmp_path / "dump", layers=[0, 1, 2, 3], max_new_tokens=32,
                              dtype="float32", progress=False)
    assert dump.manifest.layers == (0, 1, 2, 3) and len(dump) == 12
    r = measure_acceptance(trained.drafter("k2"), hidden_states=dump.path, steps=4,
                           embeddings=trained.target("k2"), progress=False)
    assert r.source == "hidden-states"
    for key in ("generated_tokens", "cycles", "accept_length", "per_step_acceptance", "accept_length_by_steps",
                "accept_length_by_convention"):
        assert r.to_json()[key] == k2_result.to_json()[key], key
    # the dump's target is a local folder: its embedding is found without --embeddings
    again = measure_acceptance(trained.drafter("k2"), hidden_states=dump.path, steps=4, progress=False)
    assert again.accept_length == r.accept_length
    # a dump from other layers than the drafter reads
    other = dump_hidden_states(k2, trained.prompts("k2"), tmp_path / "other", layers=[0, 4], max_new_tokens=8,
                               dtype="bfloat16", progress=False)
    with pytest.raises(InputError, match="dump is from other layers"):
        measure_acceptance(trained.drafter("k2"), hidden_states=other.path, steps=2, progress=False)


def test_new_target_version_and_warm_start(trained):
    k25 = load_target_model(trained.target("k25"))
    kw = dict(target=k25, prompts=trained.prompts("k25"), max_new_tokens=32, steps=4, progress=False)
    old = measure_acceptance(trained.drafter("k2"), **kw)
    warm = measure_acceptance(trained.drafter("k25-warm"), **kw)
    assert warm.accept_length > old.accept_length + 0.5


def test_sampling_adds_expected_acceptance(trained, k2):
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.prompts("k2"), max_new_tokens=16,
                           steps=3, temperature=0.8, progress=False)
    assert r.expected_acceptance is not None and len(r.expected_acceptance) == 3
    assert all(e is None or 0 <= e <= 1 for e in r.expected_acceptance)
    assert 1 <= r.expected_accept_length <= 4
    d = r.to_json()
    assert d["temperature"] == 0.8 and d["expected_acceptance"] == list(r.expected_acceptance)
    assert d["expected_accept_length"] == r.expected_accept_length


def test_chat_and_text_prompts(trained, k2, tmp_path):
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=trained.root / "prompts-chat.jsonl",
                           max_new_tokens=8, steps=2, progress=False)
    assert r.chat_template_sha256 and len(r.chat_template_sha256) == 64 and r.prompts == 3
    text = tmp_path / "text.jsonl"
    text.write_text('{"text": "t5 t17 t40 t2"}\n')
    r = measure_acceptance(trained.drafter("k2"), target=k2, prompts=text, max_new_tokens=8, steps=2, progress=False)
    assert r.prompts == 1 and r.generated_tokens == 7 and r.chat_template_sha256 is None


def test_result_renders_and_feeds_the_calculator(k2_result):
    text, html = str(k2_result), k2_result._repr_html_()
    assert "accept length" in text and "P(accept j | 1..j-1)" in text and "<table" in html
    e = k2_result.speedup(baseline_tps=82, verify_ms=30, draft_ms=1)
    assert e.accept_length == k2_result.accept_length and e.cycle_ms == 34
    assert k2_result.go_no_go(baseline_tps=82, verify_ms=30, draft_ms=1).startswith("GO: measured accept length")
    assert k2_result.go_no_go(baseline_tps=200, verify_ms=30).startswith("NO-GO")
    json.dumps(k2_result.to_json())


def test_figures(k2_result):
    from eaglekit.view.acceptance_figures import accept_length_vs_steps, per_prompt_spread, per_step_acceptance

    fig = accept_length_vs_steps({"k2": k2_result})
    assert list(fig.data[1].y) == list(k2_result.accept_length_by_steps)
    assert len(per_step_acceptance(k2_result).data) == 1
    assert len(per_prompt_spread(k2_result).data[0].y) == 12


# -- bad input -----------------------------------------------------------------------------------------
def test_bad_inputs(trained, k2, tmp_path):
    d = trained.drafter("k2")
    with pytest.raises(NotFoundError, match="no such target model folder"):
        measure_acceptance(d, target=str(tmp_path / "missing"), prompts=trained.prompts("k2"), progress=False)
    with pytest.raises(InputError, match="exceed .* context of 8192"):
        measure_acceptance(d, target=k2, prompts=trained.prompts("k2"), max_new_tokens=8190, progress=False)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input_ids": [1, 2]}\n{"text": 3}\n')
    with pytest.raises(InputError, match=r"bad.jsonl line 2: text must be"):
        measure_acceptance(d, target=k2, prompts=bad, progress=False)
    with pytest.raises(InputError, match="exactly one of target"):
        measure_acceptance(d, progress=False)


def test_mismatched_drafters(trained, k2, tmp_path):
    from safetensors.torch import save_file

    from test_draft_model import make_drafter

    # a drafter for another target: target hidden size 24, not 64
    cfg, t = make_drafter()
    folder = tmp_path / "hidden"
    folder.mkdir()
    save_file({k: v.contiguous() for k, v in t.items()}, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InputError, match="hidden-size mismatch: the drafter reads target hidden states of size 24"):
        measure_acceptance(folder, target=k2, prompts=trained.prompts("k2"), progress=False)
    # the right shapes, another vocabulary
    cfg = json.loads((trained.drafter("k2") / "config.json").read_text())
    cfg["vocab_size"] = 200
    folder = tmp_path / "vocab"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "model.safetensors").write_bytes((trained.drafter("k2") / "model.safetensors").read_bytes())
    with pytest.raises(VocabMapError, match="(?i)vocabulary"):
        measure_acceptance(folder, target=k2, prompts=trained.prompts("k2"), progress=False)


def test_conclusions_carry_the_measurement(demo, k2_result):
    from eaglekit.analysis.acceptance.conclusion import conclude_acceptance
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.analysis.investigation import conclude
    from eaglekit.core.serving.account import Account

    c = conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), account=Account.seed(),
                 measured={"the K2 drafter": k2_result})
    (line,) = [s for s in c.sentences if s.startswith("Measured offline")]
    assert f"the K2 drafter reaches accept length {k2_result.accept_length:.2f}" in line and "break-even" in line
    story = conclude_acceptance(own=k2_result, new_target=k2_result, scratch=k2_result, warm=k2_result,
                                baseline_tps=82, verify_ms=30, draft_ms=1.67)
    assert story.verdict == "go" and f"{k2_result.accept_length:.2f}" in story.sentences[0]
    assert any("(inputs instead of outputs, as trained)" in s for s in story.sentences)


def test_page_00_judges_the_measurement_on_the_bottom_lines_cycle(demo, k2_result):
    """Issue 30: page 00's conclusion judged drafter A on a constant 30 ms verify ("35.0 ms per cycle") while its
    bottom line used the verify growing with K (43.8 ms at K = 3): one cycle model on the page. Every verdict says
    GO / NO-GO / TOO CLOSE TO CALL with the accept length's interval."""
    import re

    from eaglekit.analysis.acceptance.conclusion import conclude_acceptance
    from eaglekit.analysis.compat.pair import compat
    from eaglekit.analysis.investigation import conclude
    from eaglekit.core.serving.account import Account

    account = Account.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, verify_grows_for=("kimi-k25-int4",),
                                          tp=8)
    c = conclude(compat(demo.drafter("k2"), demo.drafter("k25-finetuned")), account=account,
                 measured={"the K2 drafter": k2_result})
    (line,) = [s for s in c.sentences if s.startswith("Measured offline")]
    cycle = account.growing_scenario.at_steps(k2_result.steps)
    assert f"{cycle.cycle_ms:.1f} ms per cycle" in line and f"break-even {cycle.break_even_accept_length:.2f}" in line
    assert k2_result.interval.text() in line and "bootstrap over 12 prompts" in line
    assert re.search(r"In this deployment's cycle: (GO|NO-GO|TOO CLOSE TO CALL): ", line)
    story = conclude_acceptance(own=k2_result, new_target=k2_result, scratch=k2_result, warm=k2_result,
                                scenario=account.growing_scenario)
    judged = " ".join(story.sentences)
    assert f"{cycle.cycle_ms:.1f} ms per cycle (K = {k2_result.steps}" in judged
    assert k2_result.interval.text() in judged


def test_remote_drafter_through_the_hub(trained, k2, k2_result, tmp_path):
    """The drafter's weights come through the kit's reader: an hf:// repo on the loopback Hub gives the
    same figures as the local folder."""
    import shutil

    from eaglekit.demo.hubserver import HubServer

    shutil.copytree(trained.drafter("k2"), tmp_path / "hub" / "demo-lab" / "tiny-eagle3")
    with HubServer(tmp_path / "hub") as server:
        r = measure_acceptance("hf://demo-lab/tiny-eagle3", target=k2, prompts=trained.prompts("k2"),
                               max_new_tokens=32, steps=4, endpoint=server.endpoint, progress=False)
    assert r.accept_length == k2_result.accept_length and r.drafter == "hf://demo-lab/tiny-eagle3"


def test_a_gain_between_two_results_on_the_same_prompts_is_paired(k2_result):
    from dataclasses import replace

    from eaglekit.analysis.acceptance.measure import accept_length_gain
    from eaglekit.core.uncertainty import verdict

    none = accept_length_gain(k2_result, k2_result)
    assert none.value == 0 and verdict(none, 0.0) == "TOO CLOSE TO CALL"
    fewer_cycles = replace(k2_result, prompt_counts=tuple((t, max(c - 1, 1)) for t, c in k2_result.prompt_counts))
    gain = accept_length_gain(k2_result, fewer_cycles)
    assert gain.low > 0 and verdict(gain, 0.0) == "GO" and "paired bootstrap" in gain.method
    with pytest.raises(InputError, match="same prompts at the same K"):
        accept_length_gain(k2_result, replace(k2_result, prompt_counts=k2_result.prompt_counts[:-1]))
    with pytest.raises(InputError, match="no per-prompt counts"):
        accept_length_gain(replace(k2_result, prompt_counts=()), k2_result)
