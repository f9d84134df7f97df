"""Issue 46 section 3: a straight line through two short verifies is not carried to a 60-token tree. A verify of
n tokens at batch b costs at most a decode at batch b x n plus the excess the measured verifies show, and the
plan says where it priced a verify past the token counts measured."""

from __future__ import annotations

import pytest

import eaglekit
from eaglekit.core.serving.costmodel import CostModel, Point, fit_model

TREE = {"steps": 6, "topk": 10, "draft_tokens": 60, "accept_length": 4.5}
# the forwards: a decode and a 3-token verify at batch 1, and a decode at batch 64
COSTS = [(1, 1, 12.2), (1, 3, 30.0), (64, 1, 27.0)]


@pytest.mark.parametrize("target", [None, "kimi-k25-int4"])
def test_a_60_token_tree_verify_is_priced_within_the_decode_bound_and_warned(target):
    p = eaglekit.plan((0.8, 0.7, 0.6), costs=COSTS, target=target, tp=8, batches=(1, 64), trees=[TREE])
    m = p.model
    assert m.per_token_ms > 5 and m.verify_tokens_measured == 3   # the line: several ms per verified token
    line = m.terms_ms(1, 60)                                       # what carrying it to 60 tokens would price
    assert line > 500                                              # the 530 ms (docs: "over 500 ms")
    bound = m.ms(60, 1) + m.excess_ms(3)
    assert bound < 60                                              # a decode of 60 requests + the measured excess
    tree = p.plans[0].trees[0]
    assert tree.verified_tokens == 60 and tree.verify.ms <= bound + 1e-9
    assert tree.verify.ms == pytest.approx(44, abs=1)              # docs/serving-plan.md: "about 44 ms"
    assert p.plans[0].options[2].verify.ms == pytest.approx(30.0)  # the measured verify stays as measured
    (note,) = [n for n in p.notes if n.startswith("verify extrapolated")]
    assert "up to 3 tokens" in note and "60" in note and "not carried" in note
    assert "verify extrapolated" in str(p) and note in p.to_json()["notes"]


def test_the_bound_holds_at_every_batch_and_width_and_is_exact_up_to_the_measured_verify():
    model = fit_model(CostModel(None, None), [Point(*c) for c in COSTS])
    for b in (1, 2, 8, 64):
        for n in (2, 3, 4, 9, 16, 60):
            ms = model.ms(b, n)
            assert ms <= model.ms(min(b * n, 1 << 20), 1) + model.excess_ms(min(n, 3)) + 1e-9
            assert ms <= model.terms_ms(b, n) + 1e-9
    assert model.ms(1, 3) == pytest.approx(30.0, rel=1e-6)
    assert not model.extrapolated_excess(3) and model.extrapolated_excess(4)


def test_without_a_measured_verify_nothing_is_extrapolated_or_warned():
    p = eaglekit.plan((0.8, 0.7, 0.6), costs=[(1, 1, 12.2), (64, 1, 27.0)], batches=(1,), trees=[TREE])
    assert p.model.per_token_ms == 0 and not [n for n in p.notes if n.startswith("verify extrapolated")]
