"""The draft vocabulary on your traffic: how many target tokens it can propose, and a better map.

An EAGLE-3 drafter proposes only the N target tokens of its draft vocabulary (d2t, :mod:`eaglekit.core.tokens.vocab`).
On traffic whose next token is outside it, no draft can be accepted: the share of the target's output
tokens inside the draft vocabulary (the *coverage*) caps step-1 acceptance, exactly, and each later step's
too (a chain continues only through covered tokens). The vocabulary was chosen from the trainer's traffic
(SpecForge ``specforge/data/preprocessing.py`` ``generate_vocab_mapping_file``: the N most frequent
target ids among the assistant tokens, ``loss_mask == 1``, sorted by id; fewer than N seen tokens are
topped up with the ids ``0, 1, ...`` not seen); a new target version's traffic may need other tokens.

Pure: token-id arrays and a d2t in, :class:`Coverage` out. :func:`recommend_map` applies SpecForge's rule
to the given traffic (ties broken by first appearance, as ``Counter.most_common`` does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, kv_html, kv_text, text_table
from eaglekit.core.tokens.vocab import build_vocab_map, compare_vocab_maps, target_ids

#: How a full-vocabulary drafter's map reads (draft_vocab_size = vocab_size, no d2t/t2d).
FULL_VOCABULARY = ("full vocabulary: no d2t/t2d, every target token can be drafted (coverage is complete on any "
                   "traffic; the recommended map is the full vocabulary too, nothing to change)")


def reduced_vocabulary(draft_vocab_size: int, vocab_size: int) -> str:
    """How a reduced draft vocabulary reads, in words."""
    return f"reduced: {draft_vocab_size:,} of {vocab_size:,} target tokens through d2t/t2d"


#: Positions shown by the by-position table (all are in ``by_position``).
SHOWN_POSITIONS = 32


def _ids(s: Any) -> np.ndarray:
    """One sequence of token ids as a flat int64 array; anything that is not a dense array of whole
    numbers (a sparse tensor, floats, objects) is one :class:`InputError`."""
    if hasattr(s, "layout") and str(getattr(s, "layout", "torch.strided")) != "torch.strided":
        raise InputError(f"traffic holds a {str(s.layout).replace('torch.', '')} tensor of token ids; give dense "
                         "arrays of whole numbers.")
    try:
        a = np.asarray(s)
    except (TypeError, ValueError, RuntimeError) as e:
        raise InputError(f"traffic holds something that is not an array of token ids ({type(s).__name__}).") from e
    if a.size and a.dtype.kind not in "iu":
        raise InputError(f"traffic holds {a.dtype} values; token ids are whole numbers.")
    return a.astype(np.int64, copy=False).ravel()


def _concat(sequences: Sequence[np.ndarray]) -> np.ndarray:
    parts = [_ids(s) for s in sequences]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)  # (total,)


def token_counts(sequences: Sequence[np.ndarray], vocab_size: int) -> np.ndarray:
    """How often each target id occurs in ``sequences`` (int64 [vocab_size])."""
    flat = _concat(sequences)
    if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
        raise InputError(f"traffic holds token id {int(flat.max() if flat.max() >= vocab_size else flat.min())}, "
                         f"outside the target vocabulary 0..{vocab_size - 1}.")
    return np.bincount(flat, minlength=vocab_size).astype(np.int64)


def recommend_map(sequences: Sequence[np.ndarray], draft_vocab_size: int, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """SpecForge's rule on ``sequences``: the ``draft_vocab_size`` most frequent ids (ties: first seen),
    topped up with unseen ids from 0, sorted; returned as ``(d2t, t2d)``."""
    if not 0 < draft_vocab_size <= vocab_size:
        raise InputError(f"draft vocabulary size must be in 1..{vocab_size}, got {draft_vocab_size}.")
    flat = _concat(sequences)
    counts = token_counts(sequences, vocab_size)
    first = np.full(vocab_size, flat.size, np.int64)
    if flat.size:
        uniq, idx = np.unique(flat, return_index=True)
        first[uniq] = idx
    seen = np.flatnonzero(counts)
    order = seen[np.lexsort((first[seen], -counts[seen]))]       # by count desc, then first appearance
    chosen = list(order[:draft_vocab_size])
    if len(chosen) < draft_vocab_size:
        have = set(int(i) for i in chosen)
        chosen += [i for i in range(vocab_size) if i not in have][:draft_vocab_size - len(chosen)]
    return build_vocab_map(np.asarray(chosen, np.int64), vocab_size)


def covered_share(d2t, sequences: Sequence[np.ndarray], vocab_size: int) -> tuple[float | None, tuple[float | None, ...], int]:
    """(overall coverage, coverage at each position of the sequences, tokens counted)."""
    in_vocab = np.zeros(vocab_size, bool)
    ids = target_ids(d2t)
    in_vocab[ids[(ids >= 0) & (ids < vocab_size)]] = True
    seqs = [_ids(s) for s in sequences]
    lengths = np.fromiter((s.size for s in seqs), np.int64, count=len(seqs))
    total = int(lengths.sum())
    flat = np.concatenate(seqs) if seqs else np.zeros(0, np.int64)                  # (total,)
    # each token's output position, from the ragged lengths: memory O(total), never prompts x longest
    starts = np.repeat(np.cumsum(lengths) - lengths, lengths)                        # (total,)
    position = np.arange(total, dtype=np.int64) - starts
    longest = int(lengths.max()) if lengths.size else 0
    hits = in_vocab[flat]
    overall = float(np.count_nonzero(hits) / total) if total else None
    n = np.bincount(position, minlength=longest)                                     # (positions,)
    h = np.bincount(position, weights=hits, minlength=longest)
    by_pos = [float(a / c) if c else None for a, c in zip(h.tolist(), n.tolist())]
    return overall, tuple(by_pos), int(total)


@dataclass(frozen=True)
class Coverage:
    """The draft vocabulary's coverage of the target's tokens on some traffic, and the recommended map.

    ``coverage``: share of target tokens the current map contains; ``by_position[i]``: the same at output
    position i; ``recommended_*``: SpecForge's top-N rule on this traffic, measured on the same traffic it was
    chosen from (in-sample: an upper bound for new traffic); ``rows_changed``: lm_head rows that take a token
    the current map lacks (one per token in, ``tokens_added``: their rows come from the target's lm_head in
    ``eaglekit export --vocab-map``); ``rows_shifted``: rows that keep a token the current map has, at
    another row (a map is sorted by target id, so one token in or out moves the rows after it)."""

    drafter: str
    traffic: str
    draft_vocab_size: int
    vocab_size: int
    tokens: int
    coverage: float | None
    by_position: tuple[float | None, ...]
    recommended_coverage: float | None
    recommended_by_position: tuple[float | None, ...]
    rows_changed: int
    tokens_added: tuple[int, ...]
    tokens_dropped: tuple[int, ...]
    top_missing: tuple[tuple[int, int], ...]
    recommended_d2t: np.ndarray = field(repr=False, compare=False)
    recommended_t2d: np.ndarray = field(repr=False, compare=False)
    steps: int = 5
    notes: tuple[str, ...] = field(default_factory=tuple)
    rows_shifted: int = 0
    vocabulary: str = ""

    @property
    def full_vocabulary(self) -> bool:
        """Whether the drafter drafts over the whole target vocabulary (no d2t/t2d needed): coverage is then
        complete on any traffic and the recommended map is the full vocabulary too."""
        return self.draft_vocab_size == self.vocab_size

    @property
    def acceptance_cap(self) -> float | None:
        """Step-1 acceptance can be at most the coverage (a draft equals the target's token only when that
        token is in the draft vocabulary)."""
        return self.coverage

    @property
    def cap_sentence(self) -> str:
        if self.coverage is None:
            return "no tokens counted"
        c, k = self.coverage, self.steps
        bound = (1 - c ** (k + 1)) / (1 - c) if c < 1 else k + 1
        return (f"coverage {c:.1%} caps per-step acceptance: at most {c:.1%} of step-1 drafts can be accepted; "
                f"were misses independent, the accept length with K = {k} draft steps per cycle could not exceed "
                f"{bound:.2f}")

    @property
    def summary(self) -> str:
        if self.coverage is None or self.recommended_coverage is None:
            return f"draft vocabulary coverage on {self.traffic}: no tokens"
        return (f"draft vocabulary covers {self.coverage:.1%} of {self.tokens:,} target tokens on {self.traffic}; "
                f"the recommended map, chosen from this same traffic, would cover {self.recommended_coverage:.1%} of it "
                f"(in-sample; {self.rows_changed} rows take a new token)")

    def to_json(self) -> dict[str, Any]:
        return {"drafter": self.drafter, "traffic": self.traffic, "draft_vocab_size": self.draft_vocab_size,
                "vocab_size": self.vocab_size, "tokens": self.tokens, "coverage": self.coverage,
                "coverage_by_position": list(self.by_position), "recommended_coverage": self.recommended_coverage,
                "recommended_coverage_by_position": list(self.recommended_by_position),
                "recommended_coverage_in_sample": True,
                "rows_changed": self.rows_changed, "rows_shifted": self.rows_shifted,
                "tokens_added": list(self.tokens_added),
                "tokens_dropped": list(self.tokens_dropped),
                "top_missing": [{"id": i, "count": n} for i, n in self.top_missing],
                "acceptance_cap": self.acceptance_cap, "steps": self.steps, "note": self.cap_sentence,
                "notes": list(self.notes), "full_vocabulary": self.full_vocabulary,
                "vocabulary": self.vocabulary_words}

    @property
    def vocabulary_words(self) -> str:
        """Which kind of draft vocabulary was measured, in words."""
        if self.vocabulary:
            return self.vocabulary
        if self.full_vocabulary:
            return FULL_VOCABULARY
        return reduced_vocabulary(self.draft_vocab_size, self.vocab_size)

    def _pairs(self) -> list[tuple[str, Any]]:
        pct = lambda x: "-" if x is None else f"{x:.1%}"
        return [("drafter", self.drafter), ("traffic", f"{self.traffic} ({self.tokens:,} target tokens)"),
                ("draft vocabulary", f"{self.draft_vocab_size:,} of {self.vocab_size:,} target tokens"),
                ("vocabulary map", self.vocabulary_words),
                ("coverage (current map)", pct(self.coverage)),
                ("coverage (recommended map)", f"{pct(self.recommended_coverage)} in-sample (the map is chosen from "
                                               "this traffic; expect less on new traffic)"),
                ("rows that take a new token", f"{self.rows_changed} of {self.draft_vocab_size} "
                                               f"({len(self.tokens_added)} tokens in, {len(self.tokens_dropped)} out)"),
                ("rows only shifted", f"{self.rows_shifted} of {self.draft_vocab_size} (same token, another row: "
                                      "the map is sorted by target id)"),
                ("most frequent missing ids", ", ".join(f"{i} ({n}x)" for i, n in self.top_missing[:10]) or "-"),
                ("cap", self.cap_sentence), *(("note", n) for n in self.notes if n != self.vocabulary_words)]

    def _rows(self) -> list[list[str]]:
        pct = lambda x: "-" if x is None else f"{x:.1%}"
        n = min(len(self.by_position), SHOWN_POSITIONS)
        return [[str(i), pct(self.by_position[i]), pct(self.recommended_by_position[i])] for i in range(n)]

    def __str__(self) -> str:
        return (kv_text(self._pairs(), title=self.summary) + "\n\n"
                + text_table(["output position", "current map", "recommended map"], self._rows(),
                             align=["right"] * 3))

    def _repr_html_(self) -> str:
        return ("<div>" + kv_html(self._pairs(), caption=self.summary)
                + html_table(["output position", "current map", "recommended map"], self._rows(),
                             align=["right"] * 3) + "</div>")


def check_steps(steps: object) -> None:
    """Draft steps per cycle: a positive integer (the cap on the accept length assumes that many)."""
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise InputError(f"steps must be a positive integer (draft steps per cycle), got {steps!r}.")


def coverage(d2t, sequences: Sequence[np.ndarray], *, vocab_size: int, drafter: str = "drafter",
             traffic: str = "traffic", steps: int = 5, notes: Sequence[str] = (), vocabulary: str = "") -> Coverage:
    """The current map's coverage of ``sequences`` (target output tokens, one array per prompt) against the
    map SpecForge's rule would build from them (same draft vocabulary size). ``d2t`` None: a full-vocabulary
    drafter (no d2t/t2d, draft id i = target id i over the whole vocabulary). ``vocabulary``: which kind
    of map was read, in words (default: said from the sizes)."""
    if d2t is None:
        d2t = np.zeros(vocab_size, np.int64)
    d2t = np.asarray(d2t, np.int64)
    n = int(d2t.shape[0])
    rec_d2t, rec_t2d = recommend_map(sequences, n, vocab_size)
    cov, by_pos, total = covered_share(d2t, sequences, vocab_size)
    rcov, rby_pos, _ = covered_share(rec_d2t, sequences, vocab_size)
    cur, rec = set(target_ids(d2t).tolist()), set(target_ids(rec_d2t).tolist())
    counts = token_counts(sequences, vocab_size)
    missing = [i for i in np.argsort(-counts, kind="stable") if counts[i] and int(i) not in cur]
    check_steps(steps)
    moved = compare_vocab_maps(d2t, rec_d2t).rows_remapped          # rows whose target id differs
    added = tuple(sorted(rec - cur))
    return Coverage(drafter=drafter, traffic=traffic, draft_vocab_size=n, vocab_size=vocab_size, tokens=total,
                    coverage=cov, by_position=by_pos, recommended_coverage=rcov, recommended_by_position=rby_pos,
                    rows_changed=len(added), tokens_added=added, tokens_dropped=tuple(sorted(cur - rec)),
                    top_missing=tuple((int(i), int(counts[i])) for i in missing[:20]),
                    recommended_d2t=rec_d2t, recommended_t2d=rec_t2d, steps=steps, notes=tuple(notes),
                    rows_shifted=moved - len(added), vocabulary=vocabulary)
