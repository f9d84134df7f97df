"""How the cycles of training text are counted (pure, no model): the greedy count and its sampling counterpart
agree on certain acceptances; a request the text covers is --target's cycle simulation, one with departures is
completed with the conditional acceptances, and short spans still give an accept length with an interval; no
per-step note from a handful of positions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eaglekit.analysis.acceptance.measure import (SampleStats, counted_cycles, cycle_counts, expected_counts,
                                                  simulate_cycles)
from eaglekit.analysis.acceptance.span_estimate import COMPLETED, CYCLES, Request, estimate_requests


def _stats(matches, *, open_end=False, open_start=False, steps=3):
    z = np.zeros(steps, np.int64)
    return SampleStats(np.asarray(matches), len(matches), z, z, open_end=open_end, open_start=open_start)


@pytest.mark.parametrize("open_end, open_start", list(itertools.product([False, True], repeat=2)))
def test_expected_counts_equal_the_greedy_count_on_certain_acceptances(open_end, open_start):
    rng = np.random.default_rng(3)
    for _ in range(30):
        steps = int(rng.integers(1, 5))
        G = int(rng.integers(0, 20))
        m = rng.integers(0, steps + 2, G)
        accept = np.array([[1.0 if m[i] >= j else 0.0 for i in range(G)] for j in range(1, steps + 1)]).reshape(steps, G)
        s = _stats(m, open_end=open_end, open_start=open_start, steps=steps)
        assert expected_counts(accept, G, steps, open_end=open_end, open_start=open_start) == \
            pytest.approx(cycle_counts(s, steps))


def test_a_cut_span_counts_whole_cycles_only():
    # every draft accepted, K = 3: cycles of 4 tokens; a span of 10 cut by a departure counts the cycles at
    # offsets 0 and 4 (4 + 3 <= 10), not a capped one at 8: accept length 4, where capping gave 10 / 3
    full = [9] * 10
    assert cycle_counts(_stats(full, open_end=True), 3) == (8, 2)
    assert cycle_counts(_stats(full), 3) == (10, 3)
    assert counted_cycles(_stats(full, open_end=True), 3) == [3, 3]
    # a departure right before: the first cycle is left out
    assert cycle_counts(_stats(full, open_end=True, open_start=True), 3) == (4, 1)
    assert cycle_counts(_stats([9, 9], open_end=True), 3) == (0, 0)     # shorter than K: no cycle counted


# -- the accept length of requests whose text the spans cover in part --------------------------------------------


def _span(matches, base, steps, *, open_end=False, open_start=False):
    """A span's counts as count_drafts gives them: step j compared at offset n where n + j <= G."""
    G = len(matches)
    cond, acc = np.zeros(steps, np.int64), np.zeros(steps, np.int64)
    for n, m in enumerate(matches):
        for j in range(1, steps + 1):
            if n + j <= G and m >= j - 1:
                cond[j - 1] += 1
                acc[j - 1] += m >= j
    return SampleStats(np.asarray(matches), G, cond, acc, open_end=open_end, open_start=open_start, base=base)


def test_a_request_the_text_covers_is_the_cycle_simulation():
    rng = np.random.default_rng(5)
    for _ in range(20):
        steps, G = int(rng.integers(1, 6)), int(rng.integers(1, 40))
        m = np.minimum(rng.integers(0, steps + 1, G), G - np.arange(G))
        reqs = [Request(0, 10, 10 + G, (_span(m, 9, steps),)), Request(1, 10, 10 + G, (_span(m[::-1].copy() * 0, 9, steps),))]
        e = estimate_requests(reqs, steps)
        cycles = simulate_cycles(m, G, steps) + G
        assert e.interval.value == pytest.approx(2 * G / cycles) and e.estimator == CYCLES
        assert e.request_counts[0] == (G, simulate_cycles(m, G, steps))


def test_a_departure_is_completed_with_the_conditional_acceptances():
    """Every draft accepted wherever the text shows one (a_j = 1): the request of 10 tokens at K = 3 takes
    ceil(10 / 4) = 3 cycles whatever the departures in it; with every draft rejected, 10 cycles."""
    for m, want in ((9, 10 / 3), (0, 1.0)):
        spans = (_span([min(m, 3)] * 3, 9, 3, open_end=True), _span([min(m, 3)] * 2, 15, 3, open_start=True))
        reqs = [Request(s, 10, 20, spans) for s in range(3)]
        e = estimate_requests(reqs, 3)
        assert e.interval.value == pytest.approx(want) and e.estimator == COMPLETED


def test_short_spans_still_give_an_accept_length_with_an_interval():
    """Spans of 1-3 tokens after departures (round 4 counted no cycle: accept_length null)."""
    rng = np.random.default_rng(0)
    reqs = []
    for s in range(12):
        spans = tuple(_span(list(rng.integers(0, 3, int(rng.integers(1, 4)))), 9 + 6 * k, 4, open_end=True,
                            open_start=k > 0) for k in range(6))
        reqs.append(Request(s, 10, 46, spans))
    e = estimate_requests(reqs, 4)
    assert 1.0 < e.interval.value < 5.0 and e.interval.has_interval and e.interval.low < e.interval.high
    assert all(i.has_interval for i in e.by_steps) and 0.3 < e.completed_share < 1


def test_no_collapse_note_from_a_handful_of_positions():
    """Two positions at step 4 on a dump of dataset text read 'collapses at step 4' where greedy text accepts 0.83
    there: a step compared at fewer than COLLAPSE_MIN_POSITIONS positions is not called a collapse."""
    from eaglekit.analysis.acceptance.notes import COLLAPSE_MIN_POSITIONS, collapse_note, collapse_step

    rates = [0.75, 0.78, 0.84, 0.0]
    assert collapse_step(rates) == 4
    assert collapse_step(rates, counts=[200, 150, 110, 2]) is None
    assert collapse_note(rates, counts=[200, 150, 110, 2]) is None
    assert collapse_step(rates, counts=[200, 150, 110, COLLAPSE_MIN_POSITIONS]) == 4


def test_one_sample_of_several_turns_resamples_its_turns():
    spans = (_span([2, 1, 0, 3, 2, 1, 0, 0], 9, 3), _span([1, 0, 2, 1, 0], 29, 3))
    reqs = [Request(0, 10, 18, spans[:1]), Request(0, 30, 35, spans[1:])]
    e = estimate_requests(reqs, 3)
    assert e.interval.method == "bootstrap over 2 requests, 95%" and e.interval.has_interval
    one = estimate_requests(reqs[:1], 3)
    assert not one.interval.has_interval and "no interval" in one.interval.method
