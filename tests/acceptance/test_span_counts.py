"""How the cycles of a span of training text are counted (pure, no model): the greedy count and its sampling
counterpart agree on certain acceptances, a span cut where the text departs adds no cut last cycle, and one
that starts right after a departure leaves its first cycle out."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from eaglekit.analysis.acceptance.measure import SampleStats, counted_cycles, cycle_counts, expected_counts


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
