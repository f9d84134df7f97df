"""Coverage and the recommended map for a full-vocabulary drafter (no d2t/t2d) and a reduced one, each saying
which it is."""

from __future__ import annotations

import numpy as np
from mlafixtures import DRAFT, VOCAB, mla_config, write_drafter

from eaglekit.analysis.acceptance.coverage import drafter_map
from eaglekit.core.tokens.coverage import FULL_VOCABULARY, coverage


def test_full_vocabulary_drafter_covers_everything_and_says_so(tmp_path):
    folder = write_drafter(tmp_path / "full", mla_config(draft_vocab=VOCAB), seed=1)
    d2t, vocab, _, notes = drafter_map(folder)
    assert vocab == VOCAB and d2t.shape == (VOCAB,) and not d2t.any()  # the identity map
    assert FULL_VOCABULARY in notes
    traffic = [np.array([5, 90, 95, 3]), np.array([0, 64])]
    c = coverage(d2t, traffic, vocab_size=vocab, notes=notes)
    assert c.full_vocabulary and c.coverage == 1.0 and c.recommended_coverage == 1.0 and c.rows_changed == 0
    assert c.vocabulary_words.startswith("full vocabulary: no d2t/t2d") and str(c).count("full vocabulary: no") == 1
    assert c.to_json()["full_vocabulary"] is True
    # No d2t at all (d2t None) reads the same way.
    assert coverage(None, traffic, vocab_size=vocab).coverage == 1.0


def test_reduced_drafter_says_it_reads_its_map(tmp_path):
    folder = write_drafter(tmp_path / "reduced", mla_config(), seed=2)
    d2t, vocab, _, notes = drafter_map(folder)
    assert d2t.shape == (DRAFT,) and f"reduced: {DRAFT:,} of {VOCAB:,} target tokens through d2t/t2d" in notes
    ids = d2t + np.arange(DRAFT)
    outside = np.setdiff1d(np.arange(VOCAB), ids)[:3]
    c = coverage(d2t, [np.concatenate([ids[:3], outside])], vocab_size=vocab)
    assert not c.full_vocabulary and c.coverage == 0.5 and c.recommended_coverage == 1.0
    assert c.vocabulary_words == f"reduced: {DRAFT:,} of {VOCAB:,} target tokens through d2t/t2d"
    assert c.to_json()["vocabulary"] == c.vocabulary_words
