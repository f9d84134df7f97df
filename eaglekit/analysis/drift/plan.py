"""What a drift run compares: weights paired across two targets, cut into units, grouped into strata.

Weights pair by aligned name (:func:`~eaglekit.analysis.drift.dequant.align_name`: wrapper prefixes such as
K2.5's ``language_model.`` and quantisation suffixes dropped). Each pair is cut into *units* of whole
rows (about ``unit_bytes`` of stored bytes per side); units are what a sampled pass draws and what a full
pass hands to workers. A *stratum* is one row of the drift map: a layer's attention, shared experts,
routed experts (all experts of the layer together), dense MLP, router, norms; the embedding; lm_head;
and, when a drafter is given, lm_head restricted to the rows of its draft vocabulary.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from eaglekit.analysis.drift.dequant import QuantWeight, align_name

#: Stored bytes per side in one unit (a block of rows): one range request per tensor. Small enough that
#: a sampled pass over a 1 TB target's ~300 strata reads MIN_UNITS of each in about 1.5 GB.
UNIT_BYTES = 256 << 10
#: Stored bytes per side in one full-mode task handed to a worker.
TASK_BYTES = 64 << 20
EMBEDDING, LM_HEAD, DRAFT_LM_HEAD = "embedding", "lm_head", "lm_head (draft rows)"

_LAYER = re.compile(r"^layers\.(\d+)\.(.*)$")


def component(key: str) -> tuple[int | None, str]:
    """(layer, component) of an aligned weight name: the drift map's coordinates."""
    if key.startswith("embed_tokens."):
        return None, EMBEDDING
    if key.startswith("lm_head."):
        return None, LM_HEAD
    m = _LAYER.match(key)
    if not m:
        return None, "final norm" if key.startswith("norm.") else "other"
    layer, rest = int(m.group(1)), m.group(2)
    parts = rest.split(".")
    if "norm" in (parts[-2] if len(parts) > 1 else parts[0]):
        return layer, "norms"
    if rest.startswith("self_attn."):
        return layer, "attention"
    if rest.startswith("mlp.shared_experts."):
        return layer, "shared experts"
    if rest.startswith("mlp.experts."):
        return layer, "routed experts"
    if rest.startswith("mlp.gate."):
        return layer, "router"
    if rest.startswith("mlp."):
        return layer, "dense mlp"
    return layer, "other"


def stratum_name(layer: int | None, comp: str) -> str:
    return comp if layer is None else f"layer {layer} {comp}"


@dataclass(frozen=True)
class Pair:
    """One weight in both targets; ``rows`` (optional) restricts it to those rows (draft lm_head)."""

    key: str
    a: QuantWeight
    b: QuantWeight
    stratum: str
    layer: int | None
    component: str
    rows: tuple[int, ...] | None = None
    track_rows: bool = False  # report which rows moved (embedding, draft lm_head)

    @property
    def n_rows(self) -> int:
        return len(self.rows) if self.rows is not None else self.a.shape[0]

    @property
    def row_bytes(self) -> float:
        return self.a.row_bytes + self.b.row_bytes


@dataclass(frozen=True)
class Unit:
    """Rows ``r0..r1`` of pair ``pair`` (indices into ``Pair.rows`` when it restricts them)."""

    pair: int
    r0: int
    r1: int


@dataclass(frozen=True)
class DriftPlan:
    """Every unit of a comparison as columns (a 1 TB pair has millions of units: arrays, not objects):
    unit ``i`` is rows ``r0[i]..r1[i]`` of ``pairs[pair[i]]``, ``nbytes[i]`` stored bytes, both sides."""

    pairs: tuple[Pair, ...]
    pair: np.ndarray  # (units,) int64
    r0: np.ndarray  # (units,) int64
    r1: np.ndarray  # (units,) int64
    nbytes: np.ndarray  # (units,) float64
    strata: dict[str, np.ndarray]  # stratum -> indices of its units, ascending
    only_a: tuple[str, ...]
    only_b: tuple[str, ...]
    mismatched: tuple[tuple[str, tuple[int, int], tuple[int, int]], ...]

    def __len__(self) -> int:
        return int(self.pair.shape[0])

    def unit(self, i: int) -> Unit:
        return Unit(int(self.pair[i]), int(self.r0[i]), int(self.r1[i]))

    def read_bytes(self, units: np.ndarray, side: str) -> float:
        """Distinct stored bytes of ``units`` on one side: rows of a row set (the draft lm_head rows)
        that a unit of the whole weight also reads count once, so a full pass reads at most the
        targets' bytes (scales included on both counts)."""
        units = np.asarray(units, dtype=np.int64)
        per_row = np.array([getattr(p, side).row_bytes for p in self.pairs])
        row_set = np.array([p.rows is not None for p in self.pairs], dtype=bool)
        plain = units[~row_set[self.pair[units]]] if len(units) else units
        total = float(((self.r1[plain] - self.r0[plain]) * per_row[self.pair[plain]]).sum())
        for i in np.flatnonzero(row_set).tolist():
            mine = units[self.pair[units] == i]
            if not len(mine):
                continue
            p = self.pairs[i]
            rows = np.concatenate([np.asarray(p.rows[a:b], dtype=np.int64)
                                   for a, b in zip(self.r0[mine].tolist(), self.r1[mine].tolist())])
            whole = [j for j, q in enumerate(self.pairs) if q.key == p.key and q.rows is None]
            if whole:  # rows of the whole weight covered by its chosen units
                cover = units[self.pair[units] == whole[0]]
                edges = np.zeros(p.a.shape[0] + 1, dtype=np.int64)
                np.add.at(edges, self.r0[cover], 1)
                np.add.at(edges, self.r1[cover], -1)
                rows = rows[np.cumsum(edges)[rows] == 0]
            total += len(rows) * per_row[i]
        return total


def pair_weights(wa: dict[str, QuantWeight], wb: dict[str, QuantWeight], *,
                 draft_rows: np.ndarray | None = None) -> tuple[list[Pair], list[str], list[str], list]:
    """Pair weights by aligned name; (pairs, only in A, only in B, shape mismatches)."""
    ka = {align_name(n): w for n, w in wa.items()}
    kb = {align_name(n): w for n, w in wb.items()}
    pairs, mismatched = [], []
    for key in sorted(ka.keys() & kb.keys()):
        a, b = ka[key], kb[key]
        if a.shape != b.shape:
            mismatched.append((key, a.shape, b.shape))
            continue
        layer, comp = component(key)
        pairs.append(Pair(key, a, b, stratum_name(layer, comp), layer, comp, track_rows=comp == EMBEDDING))
        if comp == LM_HEAD and draft_rows is not None:
            rows = tuple(int(r) for r in draft_rows if 0 <= r < a.shape[0])
            pairs.append(Pair(key, a, b, DRAFT_LM_HEAD, None, DRAFT_LM_HEAD, rows=rows, track_rows=True))
    return pairs, sorted(ka.keys() - kb.keys()), sorted(kb.keys() - ka.keys()), mismatched


def make_plan(pairs: list[Pair], only_a, only_b, mismatched, *, unit_bytes: int = UNIT_BYTES) -> DriftPlan:
    """Cut every pair into units of about ``unit_bytes`` stored bytes per side (whole rows, at least one)."""
    cols: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    strata: dict[str, list[np.ndarray]] = {}
    start = 0
    for i, p in enumerate(pairs):
        per = max(1, int(unit_bytes // max(1.0, p.row_bytes / 2)))  # rows per unit: unit_bytes per side
        r0 = np.arange(0, p.n_rows, per, dtype=np.int64)
        cols.append((np.full(r0.shape, i, dtype=np.int64), r0, np.minimum(r0 + per, p.n_rows)))
        strata.setdefault(p.stratum, []).append(np.arange(start, start + len(r0), dtype=np.int64))
        start += len(r0)
    pair, r0, r1 = (np.concatenate([c[k] for c in cols]) if cols else np.zeros(0, np.int64) for k in range(3))
    row_bytes = np.array([p.row_bytes for p in pairs], dtype=np.float64)
    nbytes = (r1 - r0) * row_bytes[pair] if len(pair) else np.zeros(0)
    return DriftPlan(tuple(pairs), pair, r0, r1, nbytes, {k: np.concatenate(v) for k, v in strata.items()},
                tuple(only_a), tuple(only_b), tuple(mismatched))


#: Units every stratum gets in a sampled pass (all of them when it has fewer): below this the
#: delta-method interval is not to be trusted.
MIN_UNITS = 10


def sample(plan: DriftPlan, budget: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Units to read per stratum under ``budget`` bytes (both sides): :data:`MIN_UNITS` each (or all),
    the rest of the budget in proportion to each stratum's size (the allocation that minimises the
    whole-target variance when strata vary alike). Sorted unit indices per stratum."""
    mean = {s: float(plan.nbytes[idx].mean()) for s, idx in plan.strata.items()}
    n = {s: min(len(idx), MIN_UNITS) for s, idx in plan.strata.items()}
    left = budget - sum(n[s] * mean[s] for s in n)
    rest = {s: (len(idx) - n[s]) * mean[s] for s, idx in plan.strata.items()}
    total_rest = sum(rest.values())
    if left > 0 and total_rest > 0:
        for s in n:
            n[s] = min(len(plan.strata[s]), n[s] + int(left * rest[s] / total_rest // mean[s]))
    return {s: idx if n[s] >= len(idx) else np.sort(rng.choice(idx, size=n[s], replace=False))
            for s, idx in plan.strata.items()}


def tasks(plan: DriftPlan, units: np.ndarray, *, task_bytes: int = TASK_BYTES) -> list[np.ndarray]:
    """Cut the given unit indices (in order) into consecutive tasks of about ``task_bytes`` per side."""
    units = np.asarray(units, dtype=np.int64)
    if units.size == 0:
        return []
    half = plan.nbytes[units] / 2
    task_of = ((np.cumsum(half) - half) // task_bytes).astype(np.int64)  # where each unit starts
    return np.split(units, np.flatnonzero(np.diff(task_of)) + 1)
