"""What a weight comparison compares, and in which byte ranges: pure planning, no I/O, no torch.

Tensors of two inventories are paired by normalised name (:mod:`eaglekit.core.checkpoint.names`); each pair becomes a
:class:`Job`, or lands in ``only_a``/``only_b``, ``mismatched`` (with the reason) or ``buffers``
(integer/bool tensors, compared by equality). A job is the tensor viewed as a matrix (``[N]`` ->
``[N, 1]``, more dims folded into columns) and its meaningful parts (docs/domain.md, checkpoint layout):

* ``fc.weight`` [H, 3*Ht]: three column blocks, one per auxiliary hidden state (low/mid/high), labelled
  with the aux layer ids of the config (``eagle_config.eagle_aux_hidden_state_layer_ids`` or top level);
* ``q/k/v_proj`` [heads*hd, 2H] (and MLA's ``q_a_proj`` / ``kv_a_proj_with_mqa``): the half reading the normed
  embedding and the half reading the hidden;
* ``lm_head.weight``: rows paired by target token ``i + d2t[i]`` (:func:`eaglekit.core.tokens.vocab.align_rows`),
  over the shared draft vocabulary; a side without d2t predicts the full vocabulary (row i = token i).

Families built differently on the two sides are not compared tensor by tensor but named in
``incomparable`` (:class:`~eaglekit.analysis.similarity.report.Incomparable`): the attention of a Llama drafter
(q/k/v_proj) against an MLA drafter's (q_a/kv_a/kv_b projections; their o_proj too, whose columns are
heads x head_dim in one and heads x v_head_dim in the other), a MoE MLP against a dense one, and routed
experts stored fused (TorchSpec) against per expert. Everything else both have (fc, norms, lm_head, a
dense MLP of the same width, the vocabulary map) is compared.

Every part gets a grid of at most ``grid`` cells by even splits (the first ``n % g`` cells one longer,
as ``numpy.array_split``). :func:`blocks` cuts a job into row blocks that are one byte range per side.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.io.inventory import Inventory, TensorEntry
from eaglekit.core.checkpoint.names import (attention_kind, attention_words, expert_layout, family, mlp_kind, mlp_words,
                                            normalized)
from eaglekit.analysis.similarity.report import Incomparable, LmHeadAlignment, Mismatch
from eaglekit.core.checkpoint.tensors import NUMPY_DTYPES
from eaglekit.core.tokens.vocab import align_rows

FLOAT_DTYPES = frozenset({"BF16", "F16", "F32", "F64", "F8_E4M3", "F8_E5M2"})
QKV = tuple(f"midlayer.self_attn.{p}_proj.weight" for p in "qkv")
#: Every projection that reads the EAGLE-3 input [norm(embedding), norm(hidden)] (2H wide): Llama's q/k/v and
#: MLA's first projections (q_a_proj, or q_proj when q_lora_rank is null, and kv_a_proj_with_mqa).
FIRST_PROJECTIONS = QKV + ("midlayer.self_attn.q_a_proj.weight", "midlayer.self_attn.kv_a_proj_with_mqa.weight")


def split_edges(n: int, parts: int) -> np.ndarray:
    """Edges of ``parts`` even slices of ``range(n)``, longer slices first: (10, 4) -> [0, 3, 6, 8, 10]."""
    q, r = divmod(n, parts)
    sizes = np.full(parts, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate([[0], np.cumsum(sizes)])  # (parts + 1,)


def matrix_shape(shape: Sequence[int]) -> tuple[int, int]:
    """The matrix a tensor is viewed as: [] -> [1, 1], [N] -> [N, 1], [N, ...] -> [N, prod(rest)]."""
    if len(shape) == 0:
        return 1, 1
    return int(shape[0]), int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1


@dataclass(frozen=True, eq=False)
class Part:
    """A reported part of a job: a column range of the matrix and its grid edges."""

    name: str
    cols: tuple[int, int]
    row_edges: np.ndarray  # (gr + 1,)
    col_edges: np.ndarray  # (gc + 1,), relative to cols[0]


@dataclass(frozen=True, eq=False)
class Job:
    """One tensor pair to stream: ``rows`` compared positions of ``width`` columns, cut into parts."""

    key: str
    a: TensorEntry
    b: TensorEntry
    rows: int  # rows compared (shared lm_head rows when aligned)
    width: int
    parts: tuple[Part, ...]
    rows_a: np.ndarray | None = None  # (rows,) row of A for each compared position; None: identity
    rows_b: np.ndarray | None = None


@dataclass
class ComparisonPlan:
    """Everything :func:`plan` decided: what to stream, compare by equality, or only list."""

    jobs: list[Job]
    buffers: list[tuple[str, TensorEntry, TensorEntry]]
    only_a: list[str]
    only_b: list[str]
    mismatched: list[Mismatch]
    alignment: LmHeadAlignment | None
    incomparable: list[Incomparable] = field(default_factory=list)


def select(inv_a: Inventory, inv_b: Inventory, patterns: list[str] | None) -> list[str]:
    """Normalised names of either side matching any pattern (its own spelling may match too)."""
    na, nb = normalized(inv_a.names), normalized(inv_b.names)
    keys = sorted(set(na) | set(nb))
    if patterns is None:
        return keys
    keys = [k for k in keys if any(fnmatch.fnmatchcase(k, p) or fnmatch.fnmatchcase(na.get(k, nb.get(k)), p)
                                   for p in patterns)]
    if not keys:
        raise InputError(f"no tensor matches {', '.join(map(repr, patterns))}; names are normalised "
                         f"(midlayer.*), e.g. {', '.join(sorted(na)[:3])}.")
    return keys


def plan(inv_a: Inventory, inv_b: Inventory, *, keys: list[str], grid: tuple[int, int],
         d2t: tuple[np.ndarray | None, np.ndarray | None]) -> ComparisonPlan:
    """Pair the tensors named ``keys`` (normalised); ``d2t`` values (or None) pair lm_head rows."""
    na, nb = normalized(inv_a.names), normalized(inv_b.names)
    aux = (aux_layer_ids(inv_a.config), aux_layer_ids(inv_b.config))
    out = ComparisonPlan([], [], [], [], [], None)
    skip = _incomparable(na, nb, keys, out)
    for key in keys:
        if key in skip:
            continue
        if key not in nb or key not in na:
            (out.only_a if key in na else out.only_b).append(key)
            continue
        ta, tb = inv_a[na[key]], inv_b[nb[key]]
        fa, fb = ta.dtype in FLOAT_DTYPES, tb.dtype in FLOAT_DTYPES
        if not (fa and fb):
            if ta.dtype != tb.dtype or ta.dtype not in NUMPY_DTYPES:
                out.mismatched.append(Mismatch(key, f"dtype {ta.dtype} vs {tb.dtype}: floats are compared by "
                                                     "cosine, integer/bool buffers by equality of equal dtypes"))
            elif ta.shape != tb.shape:
                out.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}"))
            else:
                out.buffers.append((key, ta, tb))
        elif ta.parameters == 0 or tb.parameters == 0:
            out.mismatched.append(Mismatch(key, "empty tensor: nothing to compare"))
        elif key == "lm_head.weight":
            _plan_lm_head(out, key, ta, tb, d2t, grid)
        elif ta.shape != tb.shape:
            out.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}"))
        else:
            rows, width = matrix_shape(ta.shape)
            out.jobs.append(Job(key, ta, tb, rows, width, _parts(key, rows, width, grid, aux)))
    return out


def _incomparable(na: dict[str, str], nb: dict[str, str], keys: list[str], out: ComparisonPlan) -> set[str]:
    """Families built differently on the two sides: recorded in ``out.incomparable``; their keys returned."""
    skip: set[str] = set()
    checks = (
        ("attention", attention_kind(na), attention_kind(nb), attention_words,
         lambda k: family(k) == "attention"),
        ("mlp", mlp_kind(na), mlp_kind(nb), mlp_words, lambda k: family(k) == "mlp"),
    )
    for fam, ka, kb, words, member in checks:
        if ka and kb and ka != kb:
            mine = {k for k in keys if member(k)}
            out.incomparable.append(Incomparable(
                fam, f"{fam} not comparable: {ka} vs {kb} (A: {words(ka)}; B: {words(kb)})",
                tuple(sorted(k for k in mine if k in na)), tuple(sorted(k for k in mine if k in nb))))
            skip |= mine
    la, lb = expert_layout(na), expert_layout(nb)
    if la and lb and la != lb and not skip & {k for k in keys if family(k) == "mlp"}:
        mine = {k for k in keys if k.startswith("midlayer.mlp.experts.")}
        out.incomparable.append(Incomparable(
            "experts", f"routed experts not comparable tensor by tensor: stored {la} in A, {lb} in B (TorchSpec's "
            "fused experts.gate_up_proj / down_proj against per-expert gate/up/down_proj)",
            tuple(sorted(k for k in mine if k in na)), tuple(sorted(k for k in mine if k in nb))))
        skip |= mine
    return skip


def _plan_lm_head(out: ComparisonPlan, key: str, ta: TensorEntry, tb: TensorEntry, d2t, grid) -> None:

    (ra, wa), (rb, wb) = matrix_shape(ta.shape), matrix_shape(tb.shape)
    if wa != wb:
        out.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)}: hidden sizes differ"))
        return
    for side, rows, v in (("A", ra, d2t[0]), ("B", rb, d2t[1])):
        if v is not None and v.shape[0] != rows:
            out.mismatched.append(Mismatch(key, f"{side}'s d2t has {v.shape[0]} entries but its lm_head has "
                                                 f"{rows} rows; rows cannot be paired by token"))
            return
    if d2t[0] is None and d2t[1] is None:
        if ra != rb:
            out.mismatched.append(Mismatch(key, f"shape {list(ta.shape)} vs {list(tb.shape)} and no d2t to pair "
                                                 "rows by token"))
            return
        out.alignment = LmHeadAlignment(ra, ra, rb, "row index", full_a=True, full_b=True)
        out.jobs.append(Job(key, ta, tb, ra, wa, _parts(key, ra, wa, grid, (None, None))))
        return
    # A side without d2t predicts the full vocabulary: its row i is target token i.
    rows_a, rows_b = align_rows(d2t[0] if d2t[0] is not None else np.zeros(ra, np.int64),
                                d2t[1] if d2t[1] is not None else np.zeros(rb, np.int64))  # (K,), (K,)
    out.alignment = LmHeadAlignment(int(rows_a.size), ra, rb, "target token", full_a=d2t[0] is None,
                                    full_b=d2t[1] is None)
    if rows_a.size == 0:
        out.mismatched.append(Mismatch(key, "the two draft vocabularies share no target token"))
        return
    parts = _parts(key, int(rows_a.size), wa, grid, (None, None))
    out.jobs.append(Job(key, ta, tb, int(rows_a.size), wa, parts, rows_a, rows_b))


def _parts(key: str, rows: int, width: int, grid: tuple[int, int], aux) -> tuple[Part, ...]:
    """fc.weight -> low/mid/high column blocks; q/k/v and MLA's first projections -> embed/hidden halves;
    otherwise the whole."""
    if key == "fc.weight" and width % 3 == 0 and width >= 3:
        known = [ids for ids in aux if ids is not None and len(ids) == 3]  # A's and/or B's aux layer ids
        labels = []
        for i, pos in enumerate(("low", "mid", "high")):
            layers = sorted({ids[i] for ids in known}, key=[ids[i] for ids in known].index)
            labels.append(pos + (f": aux layer {' vs '.join(map(str, layers))}" if layers else ""))
        spans = [(i * width // 3, (i + 1) * width // 3) for i in range(3)]
    elif key in FIRST_PROJECTIONS and width % 2 == 0 and width >= 2:
        labels, spans = ["embed", "hidden"], [(0, width // 2), (width // 2, width)]
    else:
        labels, spans = [None], [(0, width)]
    row_edges = split_edges(rows, min(grid[0], rows))
    return tuple(Part(key if label is None else f"{key}[{label}]", (c0, c1), row_edges,
                      split_edges(c1 - c0, min(grid[1], c1 - c0))) for label, (c0, c1) in zip(labels, spans))


def aux_layer_ids(config) -> list[int] | None:
    """eagle_config.eagle_aux_hidden_state_layer_ids (SpecForge) or the top-level key (speculators)."""
    if not config:
        return None
    nested = config.get("eagle_config")
    ids = (nested.get("eagle_aux_hidden_state_layer_ids") if isinstance(nested, dict) else None) \
        or config.get("eagle_aux_hidden_state_layer_ids")
    return list(ids) if isinstance(ids, list) else None




# -- reads -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """Compared positions ``pos..pos+n``: rows ``span_a`` of A and ``span_b`` of B, each one range."""

    pos: int  # first compared position (grid row order)
    span_a: tuple[int, int]  # rows of A read (one byte range)
    span_b: tuple[int, int]
    sel_a: np.ndarray | None  # rows picked from the span (aligned lm_head), in position order
    sel_b: np.ndarray | None


def row_bytes(t: TensorEntry, width: int) -> int:
    """Bytes of one matrix row of ``t``: rows are contiguous in row-major order."""
    return width * (t.nbytes // max(t.parameters, 1))


def blocks(job: Job, chunk_bytes: int) -> Iterator[Block]:
    """Row blocks of at most ``chunk_bytes`` per side (one row at least), in compared-position order.
    Aligned lm_head rows: the greedy block ends where either side's row span would exceed a chunk."""
    m = max(1, chunk_bytes // max(row_bytes(job.a, job.width), row_bytes(job.b, job.width), 1))
    if job.rows_a is None:
        for k0 in range(0, job.rows, m):
            k1 = min(job.rows, k0 + m)
            yield Block(k0, (k0, k1), (k0, k1), None, None)
        return
    k0 = 0
    while k0 < job.rows:  # greedy: extend while both sides' row spans fit one chunk
        k1 = max(k0 + 1, min(_span_end(job.rows_a, k0, m), _span_end(job.rows_b, k0, m)))
        sa, sb = job.rows_a[k0:k1], job.rows_b[k0:k1]
        yield Block(k0, (int(sa.min()), int(sa.max()) + 1), (int(sb.min()), int(sb.max()) + 1),
                     sa - sa.min(), sb - sb.min())
        k0 = k1


def _span_end(rows: np.ndarray, k0: int, m: int) -> int:
    seg = rows[k0:k0 + m]
    span = np.maximum.accumulate(seg) - np.minimum.accumulate(seg)  # (len,)
    over = np.flatnonzero(span >= m)
    return k0 + int(over[0] if over.size else seg.size)


def column_runs(edges: np.ndarray) -> list[tuple[int, int, int]]:
    """Consecutive cells of equal width as (start column, cells, width): at most two for even splits."""
    widths = np.diff(edges)
    out: list[tuple[int, int, int]] = []
    for j, w in enumerate(widths):
        if out and out[-1][2] == w:
            out[-1] = (out[-1][0], out[-1][1] + 1, int(w))
        else:
            out.append((int(edges[j]), 1, int(w)))
    return out


def check_grid(grid: Any) -> tuple[int, int]:
    """``grid`` as (rows, cols), two positive integers; InputError otherwise."""
    ok = isinstance(grid, (tuple, list)) and len(grid) == 2 and all(
        isinstance(g, (int, np.integer)) and not isinstance(g, bool) and g >= 1 for g in grid)
    if not ok:
        raise InputError(f"grid must be two positive integers (rows, cols), e.g. (64, 64); got {grid!r}.")
    return int(grid[0]), int(grid[1])
