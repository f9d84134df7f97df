"""The one interval record, the bootstrap over requests, and the GO / NO-GO / TOO CLOSE TO CALL verdict."""

from __future__ import annotations

import numpy as np
import pytest

from eaglekit.core.errors import InputError
from eaglekit.core.uncertainty import Interval, bootstrap_ratio, verdict


def test_verdict_reads_the_whole_interval():
    assert verdict(Interval(3.8, 3.7, 3.9), 3.59) == "GO"
    assert verdict(Interval(3.2, 3.1, 3.3), 3.59) == "NO-GO"
    assert verdict(Interval(3.58, 3.41, 3.72), 3.59) == "TOO CLOSE TO CALL"
    assert verdict(Interval(1.94, 1.80, 2.05), 1.88) == "TOO CLOSE TO CALL"
    # without an interval only a margin can say it is too close
    assert verdict(Interval(2.735), 2.733, margin=0.01) == "TOO CLOSE TO CALL"
    assert verdict(Interval(2.9), 2.733, margin=0.01) == "GO"
    with pytest.raises(InputError):
        verdict(Interval(1.0, 0.9, 1.1), float("nan"))


def test_interval_renders_one_way():
    i = Interval(3.5812, 3.4101, 3.7199, "bootstrap over 48 requests, 95%")
    assert i.text() == "3.58 (3.41-3.72)"
    assert i.fields("accept_length", 3) == {"accept_length": 3.581, "accept_length_low": 3.41,
                                            "accept_length_high": 3.72}
    assert Interval(2.0).text() == "2.00" and Interval(float("nan")).fields("x")["x"] is None
    assert i.scaled(2).text() == "7.16 (6.82-7.44)"


def test_bootstrap_ratio_is_pooled_seeded_and_covers_the_truth():
    rng = np.random.default_rng(1)
    cycles = rng.integers(5, 15, size=200)
    tokens = np.array([rng.binomial(4 * c, 0.7) + c for c in cycles])   # ~ 3.8 tokens a cycle
    a = bootstrap_ratio(tokens, cycles, seed=3)
    assert a.value == pytest.approx(tokens.sum() / cycles.sum())
    assert a.low < a.value < a.high and a.high - a.low < 0.2
    assert a == bootstrap_ratio(tokens, cycles, seed=3)        # reproducible
    assert "200 requests, 95%" in a.method
    one = bootstrap_ratio([10], [4])
    assert one.value == 2.5 and not one.has_interval
    with pytest.raises(InputError):
        bootstrap_ratio([1, 2], [0, 0])
    with pytest.raises(InputError):
        bootstrap_ratio([1, 2], [1])


def test_identical_requests_have_no_spread():
    a = bootstrap_ratio([8] * 10, [2] * 10)
    assert a.low == a.value == a.high == 4.0


def test_a_close_call_is_printed_with_the_digits_that_show_it():
    from eaglekit.core.uncertainty import digits_for

    close = Interval(1.9204, 1.8931, 1.9402)       # page 00's scratch drafter at K = 1, break-even 1.8948
    assert verdict(close, 1.8948) == "TOO CLOSE TO CALL"
    assert digits_for(close, 1.8948) == 3          # "1.89-1.94 against 1.89" does not show the straddle
    assert close.text(3) == "1.920 (1.893-1.940)"
    assert digits_for(Interval(1.97, 1.96, 1.99), 1.88) == 2


def test_a_paired_difference_is_narrower_than_the_two_intervals_side_by_side():
    """Two drafters on the same prompts: the prompts' own spread (some are easy for both) cancels."""
    from eaglekit.core.uncertainty import bootstrap_difference, bootstrap_ratio

    easy_hard = [(40, 10), (40, 20), (40, 8), (40, 25), (40, 12), (40, 18)] * 4
    better = [(t, max(c - 1, 1)) for t, c in easy_hard]
    d = bootstrap_difference(easy_hard, better)
    a, b = bootstrap_ratio(*zip(*easy_hard)), bootstrap_ratio(*zip(*better))
    assert d.value == pytest.approx(b.value - a.value)
    assert d.low > 0 and verdict(d, 0.0) == "GO"  # a small, consistent gain is told apart from nothing
    assert a.high > b.low  # though the two intervals overlap
    assert "paired bootstrap over 24 prompts" in d.method
    same = bootstrap_difference(easy_hard, easy_hard)
    assert same.value == 0 and same.low == same.high == 0
    with pytest.raises(InputError, match="the same prompts on both sides"):
        bootstrap_difference(easy_hard, better[:-1])
    assert not bootstrap_difference([(4, 2)], [(6, 2)]).has_interval
    for bad in ([(4, float("nan")), (4, 2)], [(4, -1), (4, 2)], [(float("inf"), 2), (4, 2)]):
        with pytest.raises(InputError, match="finite number >= 0"):
            bootstrap_difference(bad, [(4, 2), (4, 2)])
