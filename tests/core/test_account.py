"""The throughput account: the seed's figures in both models, the difference between them explained,
targets priced at the deployment's steps with what would reach them, or that nothing can."""

from __future__ import annotations

import pytest

from eaglekit.core.serving.account import Account
from eaglekit.core.speedup.specmath import reach
from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import Scenario, estimate, expected_accept_length


def test_seed_account_reproduces_both_sets_of_figures():
    a = Account.seed()
    assert (a.steps, a.verify_ms, a.baseline_tps, a.spec_tps, a.accept_length) == (2, 30.0, 82.0, 60.0, 2.0)
    assert a.cycle_ms == pytest.approx(100 / 3)  # 2.0 tokens / 60 tok/s
    assert a.draft_ms == pytest.approx(5 / 3)  # the 3.3 ms beyond verify, over 2 steps
    assert round(a.break_even, 2) == 2.73 and round(a.verify_only_break_even, 2) == 2.46
    assert [round(x, 2) for x in a.verify_only_needs(150)] == [4.5, 0.78]
    assert [round(x, 2) for x in a.verify_only_needs(200)] == [6.0, 0.83]
    assert a.ceiling_tps == pytest.approx(90.0)
    # the measured scenario gives back the measured throughput
    assert estimate(a.scenario, accept_length=2.0).tokens_per_s == pytest.approx(60.0)


def test_seed_sentences_state_steps_draft_cost_and_the_difference():
    text = " ".join(Account.seed().sentences())
    assert "k = 2 draft steps" in text and "2 steps of 1.67 ms" in text
    assert "33.3 ms per draft-verify cycle: the 30 ms verify plus 3.3 ms of drafting" in text
    assert "break-even 2.46; 150 tok/s needs 4.5 (78% per-token acceptance), 200 tok/s needs 6.0 (83%" in text
    assert "150 tok/s is out of reach at k = 2" in text and "No draft cost fixes that at k = 2" in text
    assert "Accept length 3.2 needs at least 3 draft steps; there it gives 91 tok/s at k = 3 (cycle 35.0 ms" in text
    assert "gives 96 tok/s at k = 2" not in text  # 3.2 tokens per 33.3 ms cycle: impossible at k = 2


def test_seed_targets_priced_again_with_a_verify_that_grows_with_k():
    """The constant-verify "k = 5 reaches 150 tok/s" sentence, recomputed for K2.5's INT4 experts and K2's FP8:
    the verify of k drafts from a cost model calibrated to the 12.2 ms decode and the 30 ms verify at k = 2."""
    a = Account.seed()
    assert [g.label for g in a.growing] == ["K2.5, INT4 experts", "K2, FP8"]
    for g in a.growing:
        assert g.verify_ms[1] == 30.0 and all(b > a_ for a_, b in zip(g.verify_ms, g.verify_ms[1:]))
        assert g.cycle_ms(5) > a.verify_ms + 5 * a.draft_ms + 15  # far from the constant-verify 38.3 ms
        assert g.steps_for(150) is None and g.steps_for(200) is None  # out of reach at every k up to 8
        assert g.steps_for(70) is not None
        assert g.tokens_per_s(3.2, 3) < a.baseline_tps  # the public K2 drafter's 3.2 no longer pays at k = 3
    text = " ".join(a.sentences())
    assert "with the verify held at 30 ms whatever it verifies, it takes k = 5 (cycle 38.3 ms)" in text
    assert "With a verify that grows with k (K2.5, INT4 experts on TP 8" in text and "(K2, FP8 on TP 8:" in text
    assert "150 tok/s (k = 5 with the verify held constant) and 200 tok/s (k = 8 with the verify held constant) are " \
           "out of reach at every k up to 8" in text
    assert "accept length 3.2 gives 73 tok/s at k = 3 (11% slower than 82 tok/s)" in text
    # the plan's model of the same two forwards on the seed's 8 GPUs, its per-token line carried (the reading the
    # account prices): the same verify at every k; the plan's own bound holds it lower past the measured k = 2
    from dataclasses import replace

    from eaglekit.core.serving.costmodel import CostModel, Point, calibrate, shape_from_config
    from eaglekit.core.serving.published import published
    model = calibrate(CostModel(shape_from_config(published("kimi-k25-int4")[1]), None, 8, 4096),
                      [Point(1, 1, 1000 / 82), Point(1, 3, 30.0)])
    carried = replace(model, carry_excess=True)
    assert a.growing[0].verify_ms == pytest.approx([carried.ms(1, k + 1) for k in range(1, 9)], rel=1e-9)
    assert all(model.ms(1, k + 1) < v for k, v in enumerate(a.growing[0].verify_ms[2:], 3))
    j = a.to_json()["growing_verify"]
    assert j[0]["targets"][0] == {"tokens_per_s": 150.0, "steps": None, "constant_verify_steps": 5}
    plain = Account.from_measurements(82, 60, 2.0, verify_ms=30, steps=2, targets=(150,))
    assert plain.fork is None
    assert plain.growing == () and "grows with k" not in str(plain)


def test_reach_at_the_steps_solves_draft_cost_and_steps():
    ok = reach(80, verify_ms=30, steps=2, draft_ms=1)
    assert ok.reachable and ok.accept_length == pytest.approx(2.56)
    assert expected_accept_length(ok.alpha, k=2) == pytest.approx(2.56)
    r = reach(95, verify_ms=30, steps=2, draft_ms=5 / 3)  # needs 3.17 > 3 at k = 2
    assert not r.reachable
    assert r.max_draft_ms == pytest.approx((3000 / 95 - 30) / 2)  # 0.79 ms per step would do
    assert 95 * (30 + 2 * r.max_draft_ms) / 1000 == pytest.approx(3.0)
    m = r.min_steps
    assert 95 * (30 + m * 5 / 3) / 1000 <= m + 1 and 95 * (30 + (m - 1) * 5 / 3) / 1000 > m
    assert "a draft step would have to cost at most 0.79 ms" in r.sentence()


def test_reach_says_when_nothing_can():
    r = reach(700, verify_ms=30, steps=2, draft_ms=2)  # each 2 ms step is worth 1.4 tokens at 700 tok/s
    assert not r.reachable and r.max_draft_ms is None and r.min_steps is None
    assert "No draft cost fixes that at k = 2" in r.sentence()
    assert "No number of steps reaches it at 2.00 ms per step" in r.sentence()
    assert reach(20, verify_ms=30, steps=2).sentence().startswith("20 tok/s is reached by any drafter")


def test_bad_measurements_say_what_to_check():
    with pytest.raises(InputError, match="shorter than the 30 ms verify alone"):
        Account.from_measurements(82, 90, 2.0, verify_ms=30, steps=2)
    with pytest.raises(InputError, match="needs the deployment's draft steps"):
        Account.from_measurements(82, 60, 2.0, verify_ms=30, steps=None)
    with pytest.raises(InputError, match="above k\\+1"):
        Account.from_measurements(82, 60, 3.5, verify_ms=30, steps=2)


def test_given_draft_cost_leaves_the_rest_as_overhead():
    a = Account.from_measurements(82, 60, 2.0, verify_ms=30, steps=2, draft_ms=1.0)
    assert a.overhead_ms == pytest.approx(100 / 3 - 32)
    assert a.cycle_ms == pytest.approx(100 / 3)
    assert isinstance(a.scenario, Scenario) and "overhead" in a.measured_sentence()


def test_renders_as_text_and_html():
    a = Account.seed()
    assert str(a).startswith("Verdict: accept length 3.2 at k = 3, the fewest steps that allow it")  # the verdict first
    assert "\nThroughput account\n- Measured:" in str(a)
    html = a._repr_html_()
    assert html.startswith("<table") and "why two figures" in html and "2.73" in html


def test_a_growing_verify_reaches_past_the_deployments_steps_and_projections():
    """The verify table covers the measured k + 1 and every projection's k: no IndexError at k = 10."""
    a = Account.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, expected=(10.5,),
                                  verify_grows_for=("kimi-k2-fp8",), tp=8)
    grow = a.growing[0]
    assert len(grow.verify_ms) >= 10 and "accept length 10.5 gives" in grow.sentence()
    assert grow.slope_ms > 0


def test_the_seed_s_fork_is_priced_under_both_readings_of_its_verify():
    """The 30 ms verify at k = 2 holds more than bytes and FLOPs explain: per verified token, 3.2 at k = 3 is 11%
    slower; per verify forward it is faster. One decode and one verify go through both readings: TOO CLOSE TO
    CALL, and the measurement that settles it is named."""
    a = Account.seed()
    f = a.fork
    assert f.per_token.reading == "per-token" and f.per_forward.reading == "per-forward"
    for g in (f.per_token, f.per_forward):  # both go through the measured decode and verify
        assert g.verify_ms[1] == 30.0
    assert f.per_token.verify_ms[2] == pytest.approx(38.86, abs=0.01)
    assert f.per_forward.verify_ms[2] == pytest.approx(31.4, abs=0.1)
    r = {row["accept_length"]: row for row in f.rows()}
    assert round(r[3.2]["per_token_tokens_per_s"]) == 73 and r[3.2]["per_token_verdict"] == "NO-GO"
    assert round(r[3.2]["per_forward_tokens_per_s"]) == 88 and r[3.2]["per_forward_verdict"] == "GO"
    assert r[3.2]["verdict"] == "TOO CLOSE TO CALL"
    # break-even at k = 3 under each reading
    assert f.per_token.break_even(3) == pytest.approx(3.60, abs=0.005)
    assert f.per_forward.break_even(3) == pytest.approx(2.99, abs=0.01)
    text = " ".join(a.sentences())
    assert "73 tok/s per-token (-11%, NO-GO) and 88 tok/s per-forward (+7%, GO): TOO CLOSE TO CALL" in text
    assert "bench_speculative.py" in text and "--steps 3 --topk 1 --num_draft_tokens 4" in text
    assert "vllm bench latency" in text and '"num_speculative_tokens": 3' in text
    assert "CUDA graphs for the verify" in text and "PCIe all-reduce" in text
    assert "If per-token: break-even at k = 3 is 3.60" in text and "fix the verify first" in text
    assert "If per-forward: break-even at k = 3 is 2.99" in text
    j = a.to_json()["verify_readings"]
    assert j["rows"][0]["verdict"] == "TOO CLOSE TO CALL" and j["verify_ms_at_next_k"]["steps"] == 3


def test_a_fraction_of_the_split_lies_between_its_ends():
    ends = [Account.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, verify_grows_for=("kimi-k25-int4",),
                                      tp=8, verify_split=s).growing[0].verify_ms[4] for s in ("per-token", 0.5,
                                                                                               "per-forward")]
    assert ends[0] > ends[1] > ends[2]
    with pytest.raises(InputError, match="verify split"):
        Account.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, verify_grows_for=("kimi-k25-int4",),
                                  tp=8, verify_split="per-cycle")


def test_a_1t_target_on_one_gpu_is_refused():
    with pytest.raises(InputError, match="594 GB of weights.*TP 1.*at least 4"):
        Account.from_measurements(82.0, 60.0, 2.0, verify_ms=30.0, steps=2, verify_grows_for=("kimi-k25-int4",))
