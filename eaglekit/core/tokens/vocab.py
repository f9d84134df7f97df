"""The draft vocabulary map (d2t, t2d): validate it by value, compare two, align lm_head rows by token.

An EAGLE-3 drafter predicts over N draft tokens (N = draft_vocab_size, usually 32000): the N most
frequent training tokens, sorted by target id. Two buffers map them back (docs/check-and-export.md, "The
vocabulary map"; built in SafeAILab/EAGLE eagle/traineagle3/cnets.py and SpecForge
specforge/data/preprocessing.py):

* ``d2t`` int64 [N] holds OFFSETS: draft id i is target id ``i + d2t[i]`` (see :func:`target_ids`);
* ``t2d`` bool [vocab_size] marks the target tokens that are in the draft vocabulary.

Consistency (SpecForge specforge/core/compact_teacher.py): ``nonzero(t2d) == d2t + arange(N)``,
``t2d.sum() == N``, ``len(t2d) == vocab_size``; derived: targets strictly increasing, >= 0,
< vocab_size. An all-zero d2t means identity and is valid only when N == vocab_size.

Two drafters with equal shapes can map lm_head row i to different target tokens (fine-tuning on new
data regenerates d2t; SpecForge PR 534 added --vocab-mapping-path for this). :func:`compare_vocab_maps`
counts that, and :func:`align_rows` pairs rows by target token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eaglekit.core.errors import InputError, VocabMapError
from eaglekit.core.render import html_table, kv_text

#: Rule ids, in the order checks run; each problem message states its rule.
RULES = (
    "d2t-present", "t2d-present", "d2t-dtype", "t2d-dtype", "d2t-1d", "t2d-1d", "d2t-length", "t2d-length",
    "t2d-count", "targets-nonnegative", "targets-in-range", "targets-increasing", "t2d-matches-d2t",
    "identity-needs-full-vocab",
)


def target_ids(d2t) -> np.ndarray:
    """The target token id of every draft row: ``arange(N) + d2t`` (int64, shape [N])."""
    d2t = np.asarray(d2t)
    if d2t.ndim != 1 or not np.issubdtype(d2t.dtype, np.integer):
        raise VocabMapError(f"d2t must be a 1-D integer array to map draft ids to target ids, "
                            f"got {d2t.dtype} of shape {list(d2t.shape)}.")
    return np.arange(d2t.shape[0], dtype=np.int64) + d2t.astype(np.int64)  # (N,)


@dataclass(frozen=True)
class VocabCheck:
    """The outcome of :func:`check_vocab_map`: ``problems`` are distinct messages, ``rules`` the ids
    of the rules they break (same order). ``identity`` is True for an all-zero d2t."""

    name: str
    valid: bool
    problems: tuple[str, ...]
    rules: tuple[str, ...]
    draft_vocab_size: int | None  # len(d2t) when present
    vocab_size: int | None  # len(t2d) when present
    identity: bool = False

    def to_json(self) -> dict:
        return {"name": self.name, "valid": self.valid, "problems": list(self.problems), "rules": list(self.rules),
                "draft_vocab_size": self.draft_vocab_size, "vocab_size": self.vocab_size, "identity": self.identity}

    def _pairs(self) -> list[tuple[str, object]]:
        return [("valid", self.valid), ("len(d2t)", self.draft_vocab_size), ("len(t2d)", self.vocab_size),
                ("identity", self.identity), *(("problem", p) for p in self.problems)]

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=f"Vocabulary map {self.name}: {'valid' if self.valid else 'INVALID'}")

    def _repr_html_(self) -> str:
        return html_table(["field", "value"], self._pairs(),
                          caption=f"Vocabulary map {self.name}: {'valid' if self.valid else 'INVALID'}")


def check_vocab_map(d2t, t2d, *, vocab_size: int | None = None, draft_vocab_size: int | None = None,
                    name: str = "A") -> VocabCheck:
    """Check a (d2t, t2d) pair against every rule in :data:`RULES`; None means the buffer is missing.

    ``vocab_size`` and ``draft_vocab_size`` come from the config when known. Value rules run when the
    dtypes allow reading values (any integer d2t; a bool or 0/1 integer t2d), so a wrong dtype does
    not hide a broken map.
    """
    found: list[tuple[str, str]] = []

    def fail(rule: str, message: str) -> None:
        found.append((rule, f"{name}: {message}"))

    d2t = None if d2t is None else np.asarray(d2t)
    t2d = None if t2d is None else np.asarray(t2d)
    if d2t is None:
        fail("d2t-present", "d2t is missing: an EAGLE-3 checkpoint with a reduced draft vocabulary stores "
                            "d2t (int64 [draft_vocab_size]) beside lm_head.weight")
    if t2d is None:
        fail("t2d-present", "t2d is missing: an EAGLE-3 checkpoint stores t2d (bool [vocab_size]) beside d2t")
    d2t_ok = d2t is not None and d2t.ndim == 1 and np.issubdtype(d2t.dtype, np.integer)
    t2d_ok = t2d is not None and t2d.ndim == 1 and (
        t2d.dtype == np.bool_ or (np.issubdtype(t2d.dtype, np.integer) and bool(np.isin(t2d, (0, 1)).all())))
    if d2t is not None:
        if d2t.dtype != np.int64:
            fail("d2t-dtype", f"d2t dtype must be int64 (safetensors I64), got {d2t.dtype}")
        if d2t.ndim != 1:
            fail("d2t-1d", f"d2t must be 1-D [draft_vocab_size], got shape {list(d2t.shape)}")
        elif draft_vocab_size is not None and d2t.shape[0] != draft_vocab_size:
            fail("d2t-length", f"len(d2t) must equal draft_vocab_size {draft_vocab_size}, got {d2t.shape[0]}")
    if t2d is not None:
        if t2d.dtype != np.bool_:
            fail("t2d-dtype", f"t2d dtype must be bool (safetensors BOOL), got {t2d.dtype}")
        if t2d.ndim != 1:
            fail("t2d-1d", f"t2d must be 1-D [vocab_size], got shape {list(t2d.shape)}")
        elif vocab_size is not None and t2d.shape[0] != vocab_size:
            fail("t2d-length", f"len(t2d) must equal vocab_size {vocab_size}, got {t2d.shape[0]}")
    identity = bool(d2t_ok and d2t.size and not d2t.any())
    if d2t_ok:
        n = d2t.shape[0]
        vocab = vocab_size if vocab_size is not None else (t2d.shape[0] if t2d_ok else None)
        targets = target_ids(d2t)
        in_range = True
        bad = np.flatnonzero(targets < 0)
        if bad.size:
            in_range = False
            fail("targets-nonnegative", f"target ids i + d2t[i] must be >= 0; {bad.size} rows are negative "
                                        f"(first: row {bad[0]} -> {targets[bad[0]]})")
        if vocab is not None:
            bad = np.flatnonzero(targets >= vocab)
            if bad.size:
                in_range = False
                fail("targets-in-range", f"target ids i + d2t[i] must be < vocab_size {vocab}; {bad.size} rows "
                                         f"exceed it (first: row {bad[0]} -> {targets[bad[0]]})")
        bad = np.flatnonzero(np.diff(targets) <= 0) + 1
        increasing = not bad.size
        if bad.size:
            fail("targets-increasing", f"target ids i + d2t[i] must be strictly increasing; {bad.size} rows "
                                       f"are not (first: row {bad[0]} -> {targets[bad[0]]} after "
                                       f"{targets[bad[0] - 1]})")
        if t2d_ok:
            marked = np.flatnonzero(t2d)
            if marked.size != n:
                fail("t2d-count", f"t2d.sum() must equal len(d2t) = {n}, got {marked.size} tokens marked")
            elif in_range and increasing:  # otherwise the rules above already explain the mismatch
                bad = np.flatnonzero(marked != targets)
                if bad.size:
                    fail("t2d-matches-d2t", f"nonzero(t2d) must equal d2t + arange(N); {bad.size} rows differ "
                                            f"(first: row {bad[0]}: t2d marks {marked[bad[0]]}, d2t gives "
                                            f"{targets[bad[0]]})")
        if identity and vocab is not None and n != vocab:
            fail("identity-needs-full-vocab", f"an all-zero d2t means identity (draft id == target id), valid "
                                              f"only when draft_vocab_size == vocab_size; got {n} != {vocab}")
    elif t2d_ok and draft_vocab_size is not None and int(np.count_nonzero(t2d)) != draft_vocab_size:
        fail("t2d-count", f"t2d.sum() must equal draft_vocab_size {draft_vocab_size}, "
                          f"got {int(np.count_nonzero(t2d))} tokens marked")
    return VocabCheck(
        name=name, valid=not found, problems=tuple(m for _, m in found), rules=tuple(r for r, _ in found),
        draft_vocab_size=int(d2t.shape[0]) if d2t is not None and d2t.ndim == 1 else None,
        vocab_size=int(t2d.shape[0]) if t2d is not None and t2d.ndim == 1 else None, identity=identity,
    )


def require_valid(check: VocabCheck) -> VocabCheck:
    """Return ``check`` when valid; otherwise raise :class:`VocabMapError` listing every problem."""
    if not check.valid:
        raise VocabMapError(f"Vocabulary map {check.name} is invalid: " + "; ".join(
            p.removeprefix(f"{check.name}: ") for p in check.problems) + ".")
    return check


@dataclass(frozen=True)
class VocabComparison:
    """Two draft vocabularies side by side.

    ``overlap`` counts target ids in both; ``overlap_fraction`` is overlap / min(Na, Nb) (1.0 when the
    smaller vocabulary is inside the larger), ``fraction_of_a`` / ``fraction_of_b`` divide by each side.
    ``rows_remapped`` counts lm_head rows i < min(Na, Nb) whose target token differs, i.e. rows whose
    weights would predict the wrong token if copied by position.
    """

    a_name: str
    b_name: str
    size_a: int
    size_b: int
    equal: bool
    overlap: int
    overlap_fraction: float
    fraction_of_a: float
    fraction_of_b: float
    rows_compared: int
    rows_remapped: int

    @property
    def only_in_a(self) -> int:
        return self.size_a - self.overlap

    @property
    def only_in_b(self) -> int:
        return self.size_b - self.overlap

    def to_json(self) -> dict:
        return {"equal": self.equal, "overlap": self.overlap, "overlap_fraction": self.overlap_fraction,
                "fraction_of_a": self.fraction_of_a, "fraction_of_b": self.fraction_of_b,
                "size_a": self.size_a, "size_b": self.size_b, "rows_compared": self.rows_compared,
                "rows_remapped": self.rows_remapped}

    @property
    def summary(self) -> str:
        if self.equal:
            return f"vocabulary maps equal ({self.size_a} draft tokens)"
        return (f"vocabulary maps differ: {self.overlap} shared target tokens ({self.overlap_fraction:.1%} of the "
                f"smaller vocabulary); {self.rows_remapped} of {self.rows_compared} lm_head rows point at "
                f"different tokens")

    def _pairs(self) -> list[tuple[str, object]]:
        return [("equal", self.equal), (f"draft tokens {self.a_name}", self.size_a),
                (f"draft tokens {self.b_name}", self.size_b),
                ("shared target tokens", f"{self.overlap} ({self.overlap_fraction:.2%} of the smaller)"),
                (f"only in {self.a_name}", self.only_in_a), (f"only in {self.b_name}", self.only_in_b),
                ("lm_head rows remapped", f"{self.rows_remapped} of {self.rows_compared}")]

    def __str__(self) -> str:
        return kv_text(self._pairs(), title=self.summary)

    def _repr_html_(self) -> str:
        return html_table(["field", "value"], self._pairs(), caption=self.summary)


def compare_vocab_maps(d2t_a, d2t_b, *, a_name: str = "A", b_name: str = "B") -> VocabComparison:
    """Compare two d2t buffers by the target tokens their rows mean (see :class:`VocabComparison`)."""
    ta, tb = target_ids(d2t_a), target_ids(d2t_b)
    na, nb = ta.shape[0], tb.shape[0]
    overlap = int(np.intersect1d(ta, tb).size)
    rows = min(na, nb)
    remapped = int(np.count_nonzero(ta[:rows] != tb[:rows]))
    return VocabComparison(
        a_name=a_name, b_name=b_name, size_a=int(na), size_b=int(nb),
        equal=bool(na == nb and np.array_equal(ta, tb)), overlap=overlap,
        overlap_fraction=overlap / rows if rows else 0.0, fraction_of_a=overlap / na if na else 0.0,
        fraction_of_b=overlap / nb if nb else 0.0, rows_compared=int(rows), rows_remapped=remapped,
    )


def align_rows(d2t_a, d2t_b) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(rows_a, rows_b)`` pairing lm_head rows that predict the same target token.

    ``target_ids(d2t_a)[rows_a] == target_ids(d2t_b)[rows_b]``, over the shared tokens, sorted by
    target id. A repeated target id (an invalid map) pairs its first row only.
    """
    _, rows_a, rows_b = np.intersect1d(target_ids(d2t_a), target_ids(d2t_b), return_indices=True)
    return rows_a.astype(np.int64), rows_b.astype(np.int64)  # (K,), (K,)


def build_vocab_map(target_ids_, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Build a valid ``(d2t int64 [N], t2d bool [vocab_size])`` from the target ids of a draft
    vocabulary (any order; sorted here, as EAGLE and SpecForge do)."""
    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise InputError(f"vocab_size must be a positive integer, got {vocab_size!r}.")
    ids = np.asarray(target_ids_)
    if ids.ndim != 1 or (ids.size and not np.issubdtype(ids.dtype, np.integer)):
        raise InputError(f"target ids must be a 1-D list of integers, got {ids.dtype} of shape {list(ids.shape)}.")
    ids = np.sort(ids.astype(np.int64))
    if ids.size and (ids[0] < 0 or ids[-1] >= vocab_size):
        raise InputError(f"target ids must lie in 0..{vocab_size - 1}, got {ids[0]}..{ids[-1]}.")
    if np.any(np.diff(ids) == 0):
        raise InputError(f"target ids must be distinct; {int(np.count_nonzero(np.diff(ids) == 0))} repeat.")
    d2t = ids - np.arange(ids.size, dtype=np.int64)  # (N,) offsets
    t2d = np.zeros(vocab_size, dtype=np.bool_)  # (V,)
    t2d[ids] = True
    return d2t, t2d


@dataclass(frozen=True, eq=False)
class VocabMap:
    """A (d2t, t2d) pair, for code that passes the map around as one value."""

    d2t: np.ndarray | None
    t2d: np.ndarray | None

    @classmethod
    def from_targets(cls, target_ids_, vocab_size: int) -> VocabMap:
        return cls(*build_vocab_map(target_ids_, vocab_size))

    @property
    def targets(self) -> np.ndarray:
        if self.d2t is None:
            raise VocabMapError("d2t is missing: cannot map draft ids to target ids.")
        return target_ids(self.d2t)

    def check(self, *, vocab_size: int | None = None, draft_vocab_size: int | None = None,
              name: str = "A") -> VocabCheck:
        return check_vocab_map(self.d2t, self.t2d, vocab_size=vocab_size, draft_vocab_size=draft_vocab_size,
                               name=name)


def unreadable_d2t(d2t, *, vocab_size: int | None) -> str | None:
    """Why an engine could not read ``d2t`` alone (no t2d to check it against), or None: it must be one
    dimension of integer offsets whose targets ``i + d2t[i]`` lie in ``0..vocab_size-1``."""
    c = check_vocab_map(d2t, None, vocab_size=vocab_size)
    bad = [p for r, p in zip(c.rules, c.problems) if r in ("d2t-1d", "targets-nonnegative", "targets-in-range")]
    return bad[0].removeprefix("A: ") if bad else None
