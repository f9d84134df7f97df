"""Coverage of the target's tokens by a draft vocabulary, and SpecForge's top-N map, against hand counts."""

from __future__ import annotations

import numpy as np
import pytest

from eaglekit.analysis.acceptance.coverage import write_vocab_map
from eaglekit.core.tokens.coverage import coverage, recommend_map
from eaglekit.core.errors import InputError
from eaglekit.core.tokens.vocab import build_vocab_map, check_vocab_map, target_ids


def specforge_rule(seqs, n, vocab):
    """SpecForge's process_token_dict_to_mappings, restated: Counter, top-up from range(n), most_common, sort."""
    from collections import Counter

    counts = Counter()
    for s in seqs:
        counts.update(np.asarray(s).tolist())
    for t in range(n):
        if len(counts) >= n:
            break
        counts.setdefault(t, 0)
    used = sorted(k for k, _ in counts.most_common(n))
    return np.array([u - i for i, u in enumerate(used)]), np.array([i in used for i in range(vocab)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_recommended_map_is_specforge_rule(seed):
    rng = np.random.default_rng(seed)
    seqs = [rng.zipf(1.5, size=int(rng.integers(5, 40))) % 50 for _ in range(8)]
    d2t, t2d = recommend_map(seqs, 12, 50)
    ref_d2t, ref_t2d = specforge_rule(seqs, 12, 50)
    assert np.array_equal(d2t, ref_d2t) and np.array_equal(t2d, ref_t2d)
    assert check_vocab_map(d2t, t2d, vocab_size=50, draft_vocab_size=12).valid


def test_few_seen_tokens_are_topped_up_from_zero():
    d2t, _ = recommend_map([np.array([7, 7, 9])], 4, 20)
    assert target_ids(d2t).tolist() == [0, 1, 7, 9]


def test_coverage_overall_and_by_position_by_hand():
    d2t, _ = build_vocab_map([1, 2, 3], 10)
    seqs = [np.array([1, 5, 2]), np.array([5, 5])]
    c = coverage(d2t, seqs, vocab_size=10)
    assert c.tokens == 5 and c.coverage == pytest.approx(2 / 5)
    assert c.by_position == (0.5, 0.0, 1.0)
    assert c.recommended_coverage == pytest.approx(1.0)       # 5, 1, 2 are the top three
    assert c.tokens_added == (5,) and c.tokens_dropped == (3,)
    assert c.top_missing == ((5, 3),)
    assert "caps per-step acceptance" in str(c) and c.to_json()["acceptance_cap"] == pytest.approx(0.4)


def test_traffic_outside_the_vocabulary_is_refused():
    d2t, _ = build_vocab_map([1, 2], 10)
    with pytest.raises(InputError, match="outside the target vocabulary"):
        coverage(d2t, [np.array([1, 12])], vocab_size=10)


def test_maps_written_for_export_and_for_specforge(tmp_path):
    import torch
    from safetensors.numpy import load_file

    d2t, t2d = build_vocab_map([1, 4, 6], 8)
    st = write_vocab_map(tmp_path / "map.safetensors", d2t, t2d)
    got = load_file(str(st))
    assert np.array_equal(got["d2t"], d2t) and np.array_equal(got["t2d"], t2d) and got["d2t"].dtype == np.int64
    pt = write_vocab_map(tmp_path / "map.pt", d2t, t2d)
    got = torch.load(str(pt), weights_only=True)
    assert got["d2t"].tolist() == d2t.tolist() and got["t2d"].dtype == torch.bool
    with pytest.raises(InputError, match="only to a new file"):
        write_vocab_map(st, d2t, t2d)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(InputError, match="model folder"):
        write_vocab_map(tmp_path / "model" / "map.safetensors", d2t, t2d)
    with pytest.raises(InputError, match=".safetensors"):
        write_vocab_map(tmp_path / "map.bin", d2t, t2d)


def test_rows_that_take_a_new_token_are_told_from_rows_only_shifted():
    # current map: target ids 1..8; the traffic wants 0 instead of 8: one token in, one out, and every row
    # after id 0 moves down one place (the map is sorted by target id) while keeping its token
    d2t, _ = build_vocab_map(list(range(1, 9)), 20)
    seqs = [np.array([0, 0, 1, 2, 3, 4, 5, 6, 7])]
    c = coverage(d2t, seqs, vocab_size=20)
    assert c.tokens_added == (0,) and c.tokens_dropped == (8,)
    assert c.rows_changed == 1 and c.rows_shifted == 7
    text = str(c)
    assert "rows that take a new token  1 of 8 (1 tokens in, 1 out)" in text
    assert "rows only shifted" in text and "7 of 8" in text
    j = c.to_json()
    assert (j["rows_changed"], j["rows_shifted"], j["recommended_coverage_in_sample"]) == (1, 7, True)


def test_recommended_coverage_says_in_sample_and_the_cap_names_its_steps():
    d2t, _ = build_vocab_map([1, 2, 3], 10)
    c = coverage(d2t, [np.array([1, 5, 2])], vocab_size=10, steps=3)
    assert "in-sample" in c.summary and "in-sample" in str(c)
    assert "with K = 3 draft steps per cycle" in c.cap_sentence and "K = 5" not in str(c)
    assert c.to_json()["steps"] == 3
    with pytest.raises(InputError, match="steps must be a positive integer"):
        coverage(d2t, [np.array([1])], vocab_size=10, steps=0)


def test_vocab_coverage_cli_takes_steps(capsys, tmp_path):
    from eaglekit.cli import main

    with pytest.raises(SystemExit) as exit_:   # refused while the flags are parsed, before any work
        main(["vocab-coverage", str(tmp_path), "--hidden-states", str(tmp_path), "--steps", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a number of draft steps from 1 to 64" in err
    code = main(["vocab-coverage", str(tmp_path), "--hidden-states", str(tmp_path), "--steps", "3", "--json"])
    assert code == 2 and "steps" not in capsys.readouterr().err   # 3 is taken; the empty folder is what fails
