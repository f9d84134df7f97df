"""Speculative-decoding maths: the seed's figures, the closed forms and their inverses, bad input."""

from __future__ import annotations

import math

import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import (
    AcceptanceMetrics,
    Scenario,
    accept_length_from_rate,
    alpha_for_accept_length,
    break_even_accept_length,
    conditional_rates,
    cycle_ms,
    estimate,
    expected_accept_length,
    fit_from_measurements,
    needed_accept_length,
    needed_alpha,
    position_rates_from_alpha,
    rate_from_accept_length,
    speedup,
    throughput,
)

# -- the seed's account (docs/domain.md): 82 tok/s baseline, 30 ms verify, accept length 2.0 ----------


def test_seed_break_even_is_2_46():
    assert round(break_even_accept_length(baseline_tps=82, cycle_ms=30), 2) == 2.46
    assert round(Scenario.seed().break_even_accept_length, 2) == 2.46


@pytest.mark.parametrize(("target", "length", "alpha"), [(150, 4.5, 0.78), (200, 6.0, 0.83)])
def test_seed_targets_need_4_5_and_6_0(target, length, alpha):
    assert needed_accept_length(target, cycle_ms=30) == pytest.approx(length)
    assert round(alpha_for_accept_length(length), 2) == alpha
    assert round(needed_alpha(target, cycle_ms=30), 2) == alpha


def test_seed_accept_length_2_is_alpha_one_half_and_27_percent_slower():
    assert alpha_for_accept_length(2.0) == 0.5
    est = estimate(Scenario.seed(), accept_length=2.0)
    assert est.tokens_per_s == pytest.approx(66.67, abs=0.01)  # 30 ms alone; the measured 60 tok/s needs 33 ms
    fit = fit_from_measurements(82, 60, 2.0, verify_ms=30)
    assert fit.cycle_ms == pytest.approx(33.3, abs=0.05)
    assert fit.overhead_ms == pytest.approx(3.33, abs=0.01)
    assert fit.break_even_accept_length == pytest.approx(2.73, abs=0.01)
    assert 60 / 82 - 1 == pytest.approx(-0.27, abs=0.005)


def test_vllm_reported_51_78_percent_at_k4_is_accept_length_3_07():
    m = AcceptanceMetrics.from_rate(0.5178, k=4)
    assert m.accept_length == pytest.approx(3.07, abs=0.005)
    assert m.alpha == pytest.approx(0.753, abs=0.001)  # not 0.5178: vLLM's rate is not alpha
    assert expected_accept_length(m.alpha, k=4) == pytest.approx(m.accept_length)


# -- closed forms -------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 5, 10])
@pytest.mark.parametrize("alpha", [0.0, 0.3, 0.78, 0.95])
def test_bounded_accept_length_is_leviathan_eq_1_and_inverts(alpha, k):
    closed = (1 - alpha ** (k + 1)) / (1 - alpha)
    assert expected_accept_length(alpha, k=k) == pytest.approx(closed)
    assert alpha_for_accept_length(closed, k=k) == pytest.approx(alpha, abs=1e-9)


def test_unbounded_chain_and_ceiling():
    assert expected_accept_length(0.75) == pytest.approx(4.0)
    assert expected_accept_length(0.999999, k=3) == pytest.approx(4.0, abs=1e-5)  # approaches k+1
    assert alpha_for_accept_length(3.0, k=2) == 1.0
    assert expected_accept_length(1.0, k=2) == 3.0  # a finite chain admits alpha = 1
    assert alpha_for_accept_length(1.0, k=4) == 0.0


def test_cycle_throughput_speedup():
    assert cycle_ms(30, draft_ms=1.5, steps=3, overhead_ms=1) == pytest.approx(35.5)
    assert throughput(2.0, cycle_ms=25) == pytest.approx(80.0)
    assert speedup(123, baseline_tps=82) == pytest.approx(1.5)


def test_target_beyond_the_chain_has_no_alpha():
    assert needed_alpha(150, cycle_ms=30, k=2) is None  # needs 4.5 > k+1 = 3
    assert needed_alpha(20, cycle_ms=30, k=2) == 0.0  # 0.6 tokens per cycle: any drafter does it
    est = estimate(Scenario(82, 30, steps=2), accept_length=2.0, target_tps=150)
    assert est.target.alpha is None and est.target.accept_length == pytest.approx(4.5)
    assert "150 tok/s is out of reach at k = 2 draft steps of 0.00 ms, cycle 30.0 ms" in str(est)
    assert "it takes k = 4 (cycle 30.0 ms) and accept length 4.50 of at most 5" in str(est)


def test_estimate_by_alpha_equals_estimate_by_length():
    s = Scenario(82, 30, draft_ms=2, steps=4, overhead_ms=1)
    by_alpha = estimate(s, alpha=0.6, target_tps=100)
    by_length = estimate(s, accept_length=by_alpha.accept_length, target_tps=100)
    assert by_length.alpha == pytest.approx(0.6)
    assert by_length.tokens_per_s == pytest.approx(by_alpha.tokens_per_s)
    assert by_alpha.cycle_ms == 39.0


def test_estimate_renders_aligned_text_and_html():
    est = estimate(Scenario.seed(), accept_length=2.0, target_tps=150)
    lines = str(est).splitlines()
    assert lines[3] == "cycle          30.00 ms (verify 30 + overhead 0; unbounded chain, drafting counted free)"
    assert "break-even     accept length 2.46" in lines
    assert lines[-1] == ("target         150 tok/s needs accept length 4.50 (alpha 0.778, unbounded chain, "
                         "drafting counted free)")
    html = est._repr_html_()
    assert html.startswith("<table") and "Speculative decoding estimate" in html and "accept length 2.46" in html
    assert list(est.to_json()) == [
        "baseline_tps", "verify_ms", "draft_ms", "steps", "overhead_ms", "drafting_counted_free",
        "cycle_ms", "tokens_per_s", "speedup", "break_even_accept_length", "alpha", "accept_length", "target"
    ]


# -- engine metrics -----------------------------------------------------------------------------


def test_vllm_rate_round_trips():
    for k, L in [(1, 1.4), (3, 2.7), (5, 6.0), (4, 1.0)]:
        rate = rate_from_accept_length(L, k=k)
        assert accept_length_from_rate(rate, k=k) == pytest.approx(L)
        m = AcceptanceMetrics.from_rate(rate, k=k)
        assert AcceptanceMetrics.from_alpha(m.alpha, k=k).acceptance_rate == pytest.approx(rate)


def test_position_rates_sum_to_accept_length_minus_one():
    rates = position_rates_from_alpha(0.7, k=4)
    assert rates == pytest.approx((0.7, 0.49, 0.343, 0.2401))
    m = AcceptanceMetrics.from_position_rates(rates)
    assert m.accept_length == pytest.approx(1 + sum(rates))
    assert m.alpha == pytest.approx(0.7)
    assert conditional_rates(rates) == pytest.approx((0.7,) * 4)
    # iid rate formula from docs/domain.md: alpha (1 - alpha^k) / (k (1 - alpha))
    assert m.acceptance_rate == pytest.approx(0.7 * (1 - 0.7**4) / (4 * 0.3))


def test_vllm_counters():
    m = AcceptanceMetrics.from_vllm_counters(
        num_drafts=100, num_draft_tokens=300, num_accepted_tokens=150, accepted_per_position=[80, 50, 20]
    )
    assert (m.k, m.accept_length, m.acceptance_rate, m.iid) == (3, 2.5, 0.5, False)
    assert m.position_rates == (0.8, 0.5, 0.2)
    assert conditional_rates(m.position_rates) == pytest.approx((0.8, 0.625, 0.4))
    assert "vLLM acceptance rate" in str(m) and "50.00%" in str(m)


# -- bad input: InputError with a message that says why -------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: expected_accept_length(1.0), "alpha must be in [0, 1), got 1: it is the per-token acceptance"),
        (lambda: estimate(Scenario.seed(), alpha=1), "(alpha = 1 is only meaningful with a finite number of draft steps"),
        (lambda: expected_accept_length(-0.1, k=3), "alpha must be in [0, 1), got -0.1"),
        (lambda: expected_accept_length(0.5, k=0), "steps k must be a whole number of draft tokens >= 1"),
        (lambda: expected_accept_length(0.5, k=2.0), "steps k must be a whole number"),
        (lambda: alpha_for_accept_length(4.5, k=2), "accept length 4.5 is above k+1 = 3 (steps=2)"),
        (lambda: alpha_for_accept_length(0.9), "accept length must be at least 1, got 0.9"),
        (lambda: alpha_for_accept_length(math.nan), "accept length must be a finite number, got nan"),
        (lambda: cycle_ms(-30), "verify time must be greater than 0 ms, got -30"),
        (lambda: cycle_ms(30, overhead_ms=-1), "overhead cannot be negative, got -1 ms"),
        (lambda: cycle_ms(30, draft_ms=2), "a draft time of 2 ms per step needs a step count"),
        (lambda: Scenario(0, 30), "baseline throughput must be greater than 0 tok/s, got 0"),
        (lambda: Scenario(82, 30, draft_ms=-1, steps=2), "draft time per step cannot be negative"),
        (lambda: needed_accept_length(-5, cycle_ms=30), "target throughput must be greater than 0 tok/s"),
        (lambda: estimate(Scenario.seed()), "give exactly one of accept_length or alpha"),
        (lambda: estimate(Scenario.seed(), alpha=0.5, accept_length=2), "give exactly one of"),
        (lambda: fit_from_measurements(82, 0, 2.0), "speculative throughput must be greater than 0"),
        (lambda: accept_length_from_rate(1.2, k=3), "acceptance rate must be in [0, 1]"),
        (lambda: rate_from_accept_length(2.0, k=None), "engine metrics need the number of draft steps k"),
        (lambda: AcceptanceMetrics.from_position_rates([0.5, 0.6]), "must not increase along the chain"),
        (lambda: AcceptanceMetrics.from_position_rates([]), "per-position acceptance rates are empty"),
        (
            lambda: AcceptanceMetrics.from_vllm_counters(num_drafts=3, num_draft_tokens=10, num_accepted_tokens=1),
            "num_draft_tokens 10 is not a multiple of num_drafts 3",
        ),
        (
            lambda: AcceptanceMetrics.from_vllm_counters(
                num_drafts=2, num_draft_tokens=4, num_accepted_tokens=3, accepted_per_position=[2, 2]
            ),
            "accepted_per_position must have k = 2 entries summing to num_accepted_tokens 3",
        ),
    ],
)
def test_bad_input_raises_input_error(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert message in str(info.value)


def test_break_even_below_one_is_flagged():
    """Issue 24: a 1 ms verify at 82 tok/s gave break-even 0.08, printed as is."""
    low = dict(estimate(Scenario(82.0, 1.0, steps=2), accept_length=2.0).rows())["break-even"]
    assert low.startswith("accept length 0.08: below 1, so any drafter pays") and "check the verify time" in low
    assert dict(estimate(Scenario.seed(), accept_length=2.0).rows())["break-even"] == "accept length 2.46"


def test_a_scenario_at_other_steps_moves_its_growing_verify():
    """Break-even per K with a verify that grows per drafted token: the verify at K, not the one at the
    scenario's own steps (what notebook 06's chart and steps table draw)."""
    from eaglekit.core.speedup.specmath import Scenario

    s = Scenario(baseline_tps=82.0, verify_ms=30.0, draft_ms=1.67, steps=2, verify_growth_ms=8.8)
    assert s.at_steps(2) == s
    at4 = s.at_steps(4)
    assert at4.steps == 4 and at4.verify_ms == pytest.approx(30.0 + 2 * 8.8)
    assert at4.break_even_accept_length == pytest.approx((30.0 + 2 * 8.8 + 4 * 1.67) * 82.0 / 1000.0)
