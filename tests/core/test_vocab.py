"""eaglekit.vocab: every d2t/t2d rule (docs/domain.md), overlap and rows remapped, row alignment."""

import numpy as np
import pytest

from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.tokens.vocab import (RULES, VocabMap, align_rows, build_vocab_map, check_vocab_map, compare_vocab_maps,
                            require_valid, target_ids)

V = 20  # a toy target vocabulary


def _map(targets, vocab=V):
    return build_vocab_map(targets, vocab)


def test_build_vocab_map_gives_offsets_and_a_mask():
    d2t, t2d = _map([9, 1, 4, 15])
    assert d2t.dtype == np.int64 and t2d.dtype == np.bool_
    assert d2t.tolist() == [1, 3, 7, 12]  # target i + d2t[i] = 1, 4, 9, 15
    assert target_ids(d2t).tolist() == [1, 4, 9, 15]
    assert np.flatnonzero(t2d).tolist() == [1, 4, 9, 15] and t2d.shape == (V,)
    check = check_vocab_map(d2t, t2d, vocab_size=V, draft_vocab_size=4)
    assert check.valid and check.problems == () and not check.identity
    assert require_valid(check) is check


def test_build_vocab_map_refuses_bad_ids():
    with pytest.raises(InputError, match="target ids must be distinct; 1 repeat"):
        build_vocab_map([1, 1, 2], V)
    with pytest.raises(InputError, match=r"target ids must lie in 0..19, got 1..20"):
        build_vocab_map([1, 20], V)
    with pytest.raises(InputError, match="vocab_size must be a positive integer"):
        build_vocab_map([1], 0)


# Each case breaks one rule; the check must name exactly that rule with its own message.
def _case(rule):
    d2t, t2d = _map([1, 4, 9, 15])
    kw = {"vocab_size": V, "draft_vocab_size": 4}
    if rule == "d2t-present":
        d2t = None
    elif rule == "t2d-present":
        t2d = None
    elif rule == "d2t-dtype":
        d2t = d2t.astype(np.int32)
    elif rule == "t2d-dtype":
        t2d = t2d.astype(np.uint8)
    elif rule == "d2t-1d":
        d2t = d2t.reshape(2, 2)
    elif rule == "t2d-1d":
        t2d = t2d.reshape(4, 5)
    elif rule == "d2t-length":
        kw["draft_vocab_size"] = 5
    elif rule == "t2d-length":
        kw["vocab_size"] = 21
        t2d = np.concatenate([t2d, [False]])[:V]  # length 20 while the config says 21
    elif rule == "t2d-count":
        t2d = t2d.copy()
        t2d[0] = True
    elif rule == "targets-nonnegative":
        d2t = np.array([-1, 3, 7, 12], dtype=np.int64)
        t2d = np.zeros(V, bool)
        t2d[[4, 9, 15, 19]] = True
    elif rule == "targets-in-range":
        d2t = np.array([1, 3, 7, 17], dtype=np.int64)  # last target 20 == V
        t2d = np.zeros(V, bool)
        t2d[[1, 4, 9, 19]] = True
    elif rule == "targets-increasing":
        d2t = np.array([1, 3, 2, 12], dtype=np.int64)  # targets 1, 4, 4, 15
        t2d = np.zeros(V, bool)
        t2d[[1, 4, 5, 15]] = True
    elif rule == "t2d-matches-d2t":
        t2d = t2d.copy()
        t2d[9], t2d[10] = False, True
    elif rule == "identity-needs-full-vocab":
        d2t = np.zeros(4, dtype=np.int64)
        t2d = np.zeros(V, bool)
        t2d[:4] = True
    return d2t, t2d, kw


MESSAGES = {
    "d2t-present": "A: d2t is missing: an EAGLE-3 checkpoint with a reduced draft vocabulary stores d2t "
                   "(int64 [draft_vocab_size]) beside lm_head.weight",
    "t2d-present": "A: t2d is missing: an EAGLE-3 checkpoint stores t2d (bool [vocab_size]) beside d2t",
    "d2t-dtype": "A: d2t dtype must be int64 (safetensors I64), got int32",
    "t2d-dtype": "A: t2d dtype must be bool (safetensors BOOL), got uint8",
    "d2t-1d": "A: d2t must be 1-D [draft_vocab_size], got shape [2, 2]",
    "t2d-1d": "A: t2d must be 1-D [vocab_size], got shape [4, 5]",
    "d2t-length": "A: len(d2t) must equal draft_vocab_size 5, got 4",
    "t2d-length": "A: len(t2d) must equal vocab_size 21, got 20",
    "t2d-count": "A: t2d.sum() must equal len(d2t) = 4, got 5 tokens marked",
    "targets-nonnegative": "A: target ids i + d2t[i] must be >= 0; 1 rows are negative (first: row 0 -> -1)",
    "targets-in-range": "A: target ids i + d2t[i] must be < vocab_size 20; 1 rows exceed it (first: row 3 -> 20)",
    "targets-increasing": "A: target ids i + d2t[i] must be strictly increasing; 1 rows are not "
                          "(first: row 2 -> 4 after 4)",
    "t2d-matches-d2t": "A: nonzero(t2d) must equal d2t + arange(N); 1 rows differ (first: row 2: t2d marks 10, "
                       "d2t gives 9)",
    "identity-needs-full-vocab": "A: an all-zero d2t means identity (draft id == target id), valid only when "
                                 "draft_vocab_size == vocab_size; got 4 != 20",
}


@pytest.mark.parametrize("rule", RULES)
def test_each_rule_has_its_own_message(rule):
    d2t, t2d, kw = _case(rule)
    check = check_vocab_map(d2t, t2d, **kw)
    assert not check.valid
    assert check.rules == (rule,), check.problems
    assert check.problems == (MESSAGES[rule],)
    with pytest.raises(VocabMapError, match="^Vocabulary map A is invalid: "):
        require_valid(check)


def test_messages_are_distinct_and_cover_every_rule():
    assert set(MESSAGES) == set(RULES)
    assert len(set(MESSAGES.values())) == len(RULES)


def test_identity_map_is_valid_when_draft_vocab_is_the_full_vocab():
    d2t, t2d = np.zeros(V, dtype=np.int64), np.ones(V, dtype=bool)
    check = check_vocab_map(d2t, t2d, vocab_size=V, draft_vocab_size=V)
    assert check.valid and check.identity


def test_a_wrong_dtype_does_not_hide_broken_values():
    d2t = np.array([1, 3, 2, 12], dtype=np.int32)
    check = check_vocab_map(d2t, None, vocab_size=V, name="K2")
    assert check.rules == ("t2d-present", "d2t-dtype", "targets-increasing")
    assert all(p.startswith("K2: ") for p in check.problems)


def test_require_valid_lists_every_problem():
    with pytest.raises(VocabMapError) as e:
        require_valid(check_vocab_map(None, None, name="B"))
    assert str(e.value).startswith("Vocabulary map B is invalid: d2t is missing")
    assert "; t2d is missing" in str(e.value)


def test_compare_hand_built_pair():
    # A: tokens 1, 4, 9, 15, 18 ; B: tokens 1, 5, 9, 16 (a fine-tune regenerated the vocabulary)
    a, _ = _map([1, 4, 9, 15, 18])
    b, _ = _map([1, 5, 9, 16])
    c = compare_vocab_maps(a, b, a_name="K2", b_name="K2.5")
    assert c.equal is False
    assert c.overlap == 2  # tokens 1 and 9
    assert c.overlap_fraction == 2 / 4 and c.fraction_of_a == 2 / 5 and c.fraction_of_b == 2 / 4
    assert c.rows_compared == 4
    assert c.rows_remapped == 2  # rows 1 (4 vs 5) and 3 (15 vs 16)
    assert (c.only_in_a, c.only_in_b) == (3, 2)
    assert c.summary == ("vocabulary maps differ: 2 shared target tokens (50.0% of the smaller vocabulary); "
                         "2 of 4 lm_head rows point at different tokens")
    assert c.to_json()["rows_remapped"] == 2
    assert "lm_head rows remapped  2 of 4" in str(c)


def test_a_shift_remaps_every_row_while_overlap_stays_high():
    a, _ = _map(list(range(0, 10)))
    b, _ = _map(list(range(1, 11)))
    c = compare_vocab_maps(a, b)
    assert c.overlap == 9 and c.rows_remapped == 10


def test_equal_maps():
    a, _ = _map([1, 4, 9])
    c = compare_vocab_maps(a, a.copy())
    assert c.equal and c.overlap == 3 and c.rows_remapped == 0 and c.overlap_fraction == 1.0
    assert c.summary == "vocabulary maps equal (3 draft tokens)"


def test_align_rows_pairs_rows_by_target_token():
    a, _ = _map([1, 4, 9, 15, 18])
    b, _ = _map([1, 5, 9, 16, 18, 19])
    rows_a, rows_b = align_rows(a, b)
    assert rows_a.tolist() == [0, 2, 4] and rows_b.tolist() == [0, 2, 4]
    ta, tb = target_ids(a), target_ids(b)
    assert (ta[rows_a] == tb[rows_b]).all()
    assert ta[rows_a].tolist() == [1, 9, 18]  # sorted by target id


def test_align_rows_on_random_maps_matches_a_dictionary():
    rng = np.random.default_rng(0)
    ids_a = rng.choice(1000, 300, replace=False)
    ids_b = rng.choice(1000, 250, replace=False)
    a, _ = _map(ids_a, 1000)
    b, _ = _map(ids_b, 1000)
    rows_a, rows_b = align_rows(a, b)
    pos_b = {t: i for i, t in enumerate(target_ids(b).tolist())}
    expected = [(i, pos_b[t]) for i, t in enumerate(target_ids(a).tolist()) if t in pos_b]
    assert list(zip(rows_a.tolist(), rows_b.tolist())) == expected
    assert compare_vocab_maps(a, b).overlap == len(expected)


def test_vocab_map_record():
    m = VocabMap.from_targets([3, 7], 10)
    assert m.targets.tolist() == [3, 7]
    assert m.check(vocab_size=10, draft_vocab_size=2).valid
    with pytest.raises(VocabMapError, match="d2t is missing"):
        VocabMap(None, None).targets


def test_target_ids_refuses_non_integer_d2t():
    with pytest.raises(VocabMapError, match="d2t must be a 1-D integer array"):
        target_ids(np.zeros(3, dtype=np.float32))
