"""The Monte Carlo draft-verify loop agrees with the closed forms within its statistical error."""

from __future__ import annotations

import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.speedup.simulate import simulate
from eaglekit.core.speedup.specmath import AcceptanceMetrics, alpha_for_accept_length, expected_accept_length


@pytest.mark.parametrize(
    ("alpha", "k"), [(0.5, None), (0.78, None), (0.3, 1), (0.5, 2), (0.7, 4), (0.83, 6), (0.9, 10), (1.0, 3)]
)
def test_simulated_accept_length_matches_leviathan_within_4_standard_errors(alpha, k):
    sim = simulate(alpha, k=k, cycles=200_000, seed=1)
    closed = expected_accept_length(alpha, k=k)
    if alpha == 1.0:
        assert sim.mean_accept_length == closed == k + 1 and sim.stderr == 0
    else:
        assert abs(sim.mean_accept_length - closed) < 4 * sim.stderr
        assert sim.stderr < 0.02 * closed  # the check has teeth: the error bar is narrow


def test_simulation_can_tell_a_wrong_formula_apart():
    sim = simulate(0.7, k=4, cycles=200_000, seed=2)
    wrong = 1 / (1 - 0.7)  # the unbounded formula applied to a 4-step chain
    assert abs(sim.mean_accept_length - wrong) > 20 * sim.stderr


def test_seeded_and_reproducible():
    assert simulate(0.6, k=3, seed=7) == simulate(0.6, k=3, seed=7)
    assert simulate(0.6, k=3, seed=7) != simulate(0.6, k=3, seed=8)


def test_vllm_counters_round_trip_through_the_conversions():
    sim = simulate(0.7, k=4, cycles=200_000, seed=3)
    assert sim.num_accepted_tokens == sum(sim.accepted_per_position)
    m = sim.metrics()
    assert m.accept_length == pytest.approx(sim.mean_accept_length)  # 1 + accepted / num_drafts
    assert m.acceptance_rate == pytest.approx(sim.num_accepted_tokens / (4 * sim.cycles))
    assert m.alpha == pytest.approx(0.7, abs=0.005)
    assert m.position_rates == pytest.approx([0.7, 0.49, 0.343, 0.2401], abs=0.005)
    # the same drafter described by vLLM's single rate gives the same alpha and accept length
    again = AcceptanceMetrics.from_rate(m.acceptance_rate, k=4)
    assert again.alpha == pytest.approx(m.alpha) and again.accept_length == pytest.approx(m.accept_length)


def test_decaying_drafter_differs_from_iid_alpha_of_its_first_position():
    cond = (0.8, 0.7, 0.6, 0.5)
    sim = simulate(conditional_rates=cond, cycles=200_000, seed=4)
    exact = 1 + 0.8 + 0.8 * 0.7 + 0.8 * 0.7 * 0.6 + 0.8 * 0.7 * 0.6 * 0.5
    assert abs(sim.mean_accept_length - exact) < 4 * sim.stderr
    m = sim.metrics()
    assert not m.iid
    assert [round(r, 2) for r in m.position_rates] == [0.8, 0.56, 0.34, 0.17]
    assert m.alpha == pytest.approx(alpha_for_accept_length(exact, k=4), abs=0.005)
    assert m.alpha < 0.8  # the i.i.d. alpha is an average, not the first position's rate


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"alpha": 1.0}, "alpha must be in [0, 1), got 1"),
        ({"alpha": 0.5, "conditional_rates": [0.5]}, "give exactly one of alpha or conditional_rates"),
        ({"conditional_rates": [0.5, 1.5]}, "conditional rates must be one probability in [0, 1] per position"),
        ({"conditional_rates": [0.5, 0.5], "k": 3}, "k = 3 does not match 2 conditional rates"),
        ({"alpha": 0.5, "cycles": 1}, "cycles must be a whole number >= 2, got 1"),
    ],
)
def test_bad_input(kwargs, message):
    with pytest.raises(InputError) as info:
        simulate(**kwargs)
    assert message in str(info.value)


def test_unbounded_chain_has_no_vllm_metrics():
    with pytest.raises(InputError, match="an unbounded chain has no vLLM acceptance rate"):
        simulate(0.5, cycles=100).metrics()
