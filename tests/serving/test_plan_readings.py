"""The plan on the seed's rows under both readings of its verify, and the checks issue 39 asked of the fit."""

from __future__ import annotations

import math

import pytest

import eaglekit
from eaglekit.core.serving.costmodel import CostModel, Point, calibrate, shape_from_config, split_verify
from eaglekit.core.serving.cyclefit import RUN_NOISE
from eaglekit.core.serving.published import published

SEED = [(1, 0, None, None, None, 82.0), (1, 2, 1, 3, 2.0, 60.0)]


def test_without_a_measured_verify_the_overhead_off_its_prior_is_warned():
    p = eaglekit.plan(measured=SEED, target="kimi-k25-int4", tp=8, batches=(1,), extrapolate=True)
    assert p.model.ms(1, 3) == pytest.approx(15.08, abs=0.01)  # the verify from the decode alone
    assert p.fit.value[2] == pytest.approx(12.89, abs=0.01)  # so the cycle's rest lands in the overhead
    warn = [w for w in p.warnings if w.startswith("fitted-term-off-prior")]
    assert warn and "per-cycle overhead fitted to 12.9 ms" in warn[0] and "--costs" in warn[0]
    assert p.fit.set_by(2) == "fitted" and p.fit.set_by(0) == "fitted"  # moved from the prior: labelled fitted
    assert "(prior)" not in p._draft_words().split(";")[0]


def test_with_the_measured_verify_both_readings_are_priced():
    k3 = eaglekit.plan(None, measured=SEED, costs=[(1, 3, 30.0)], target="kimi-k25-int4", tp=8,
                       batches=(1,), extrapolate=True)
    assert k3.split == 0.0 and [r for r, _ in k3.readings] == ["per-token", "per-forward"]
    tok, fwd = (p for _, p in k3.readings)
    assert tok.plans[0].options[3].verify.ms == pytest.approx(38.86, abs=0.01)
    assert fwd.plans[0].options[3].verify.ms == pytest.approx(31.4, abs=0.1)
    for p in (tok, fwd):  # both go through the measured verify
        assert p.plans[0].options[2].verify.ms == 30.0 and p.plans[0].options[2].measured
    assert not [w for w in k3.warnings if w.startswith("fitted-term-off-prior")]
    text = str(k3)
    assert "verify read per-token" in text and "verify read per-forward" in text and "bench_speculative.py" in text
    j = k3.to_json()
    assert j["verify_split"]["reading"] == "per-token" and len(j["verify_readings"]) == 2
    # the public K2 drafter's 3.2 at k = 3: the readings disagree, and the headline says so
    acc = eaglekit.core.serving.plan.Acceptance((0.7, 0.6, 0.5), "typed", ((3, 3.2),))
    p = eaglekit.plan(acc, measured=SEED, costs=[(1, 3, 30.0)], target="kimi-k25-int4", tp=8, batches=(1,))
    tok3, fwd3 = (q.plans[0].options[3] for _, q in p.readings)
    assert tok3.tokens_per_s < 82.0 < fwd3.tokens_per_s  # slower per-token, faster per-forward
    for r, q in p.readings:
        assert f"verify read {r}" in str(p) and q.plans[0].verdict in str(p)
    fixed = eaglekit.plan(acc, measured=SEED, costs=[(1, 3, 30.0)], target="kimi-k25-int4", tp=8, batches=(1,),
                          verify_split="per-forward")
    assert fixed.split == 1.0 and fixed.split_source == "given"


def test_verifies_at_two_token_counts_set_the_split():
    base = CostModel(shape_from_config(published("kimi-k25-int4")[1]), None, 8, 4096)
    truth = split_verify(calibrate(base, [Point(1, 1, 12.2), Point(1, 3, 30.0)]), 1.0)
    costs = [(1, 1, 12.2), (1, 3, 30.0), (1, 4, truth.ms(1, 4))]
    p = eaglekit.plan((0.7, 0.6, 0.5), costs=costs, target="kimi-k25-int4", tp=8, batches=(1,))
    assert p.split_source.startswith("set by") and p.readings == ()  # measured, not open


def test_a_verify_costs_no_more_than_a_decode_of_as_many_requests():
    m = CostModel(shape_from_config(published("qwen3-30b-a3b")[1]), eaglekit.core.serving.costmodel.gpu("H100-SXM"),
                  2, 1024, fixed_ms=2.0, mem=1.0, compute=40.0, combine="sum", kind="fitted",
                  misfit=((1, 10.0), (64, 0.0)))  # a batch-1 decode measured 10 ms above the terms
    for n in (4, 16, 60):
        assert m.ms(1, n) <= m.ms(n, 1) + 1e-9
    assert m.terms_ms(1, 60) + 10.0 > m.ms(60, 1) == pytest.approx(m.ms(1, 60))  # the cap binds for 60 tokens


def test_a_topk_one_entry_of_trees_is_kept_and_a_row_off_the_fit_is_named():
    rows = [(1, 0, None, None, None, 100.0), (4, 0, None, None, None, 360.0),
            (1, 2, 1, 3, 2.2, 150.0), (1, 3, 1, 4, 2.5, 155.0), (4, 3, 1, 4, 2.5, 520.0),
            (4, 2, 1, 3, 2.2, 240.0)]  # the last is 46%+ off what the others fit
    p = eaglekit.plan(measured=rows, target="llama-3.1-8b", gpu="H100-SXM", batches=(1, 4),
                      trees={"trees": [{"steps": 3, "topk": 1, "draft_tokens": 4, "accept_length": 2.6},
                                       {"steps": 3, "topk": 2, "draft_tokens": 6, "accept_length": 2.8}]})
    assert {(t.steps, t.topk) for t in p.trees} == {(3, 1), (3, 2)}
    assert any(t.topk == 1 for t in p.plans[0].trees)
    off = [w for w in p.warnings if w.startswith("row-off-the-fit")]
    assert len(off) == 1 and "batch 4" in off[0] and "steps 2" in off[0]
    cell = p.plans[1].options[2]  # measured: its own value, the run-to-run spread
    assert cell.measured and cell.tokens_per_s == pytest.approx(240.0)
    assert math.log(cell.tps.high / cell.tps.low) == pytest.approx(2 * 1.96 * RUN_NOISE, rel=1e-6)


def test_the_verdict_line_reads_the_challenger_and_no_run_says_what_narrows_it():
    p = eaglekit.plan((0.5, 0.4), target="kimi-k25-int4", gpu="H20", tp=8, batches=(1,))
    assert p.plans[0].best.steps == 0
    ch = p.plans[0].challenger
    assert ch.steps > 0 and f"gives {ch.gain.text(2)}x no speculation" in p.headline()
    assert "1.00 (1.00-1.00)x" not in p.headline()
    assert p.no_run_interval and "--calibrate 1,1,MS" in p.no_run_interval and "one speculative run" in p.no_run_interval


def test_a_verify_ms_column_is_a_measured_verify(tmp_path):
    runs = tmp_path / "seed.csv"
    runs.write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s,verify_ms\n1,0,,,,82,\n"
                    "1,2,1,3,2.0,60,30\n")
    p = eaglekit.plan(measured=str(runs), target="kimi-k25-int4", tp=8, batches=(1,), extrapolate=True)
    q = eaglekit.plan(measured=SEED, costs=[(1, 3, 30.0)], target="kimi-k25-int4", tp=8, batches=(1,),
                      extrapolate=True)
    assert p.measured == q.measured and p.plans[0].options[3].tokens_per_s == pytest.approx(
        q.plans[0].options[3].tokens_per_s)
    assert not [w for w in p.warnings if w.startswith("fitted-term-off-prior")]
    bad = tmp_path / "bad.csv"
    bad.write_text("batch,steps,topk,draft_tokens,accept_length,tokens_per_s,verify_ms\n1,2,1,3,2.0,60,-1\n")
    with pytest.raises(eaglekit.core.errors.InputError, match="verify_ms"):
        eaglekit.plan(measured=str(bad), target="kimi-k25-int4", tp=8, batches=(1,))
